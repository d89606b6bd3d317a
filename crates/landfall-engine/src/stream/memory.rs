//! The stream's memory: the small facts a stream keeps in its ledger's `m/user/` entries
//! beside its files (docs/state-layout.md), typed. Every read and write of them goes through
//! [`StreamMemory`]; the key names are the ledger format and never change.

use chrono::{DateTime, Utc};
use landfall_core::seams::{ErrorKind, SeamResult};
use landfall_core::{DiscoveryMemory, SeamError, StateStore};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The `include_existing_files = false` cutoff, fixed at the first start (and carried over by
/// `landfall reset`).
pub const EXISTING_CUTOFF_META: &str = "existing_files_cutoff";

/// The last error a run of the stream ended with ([`StreamStatus`], JSON).
pub const STATUS_META: &str = "last_error";

/// The discovery mode whose view of the source is complete ([`RecordedMode`]).
pub const DISCOVERY_MODE_META: &str = "discovery_mode";

/// What the stream's discovery does instead of reading its events (empty while it reads
/// them): a file-events stream listing because its location's consumer is down, a
/// notification stream whose bucket entry cannot be checked.
pub const DISCOVERY_NOTE_META: &str = "discovery_note";

/// When a notification stream's last full listing started (RFC 3339), so `backfill_interval`
/// holds across restarts.
pub const LAST_LISTING_META: &str = "last_full_listing";

/// When a notification stream last read its queue (RFC 3339): a stream away longer than the
/// queue keeps messages lists at start.
pub const LAST_RECEIVE_META: &str = "last_queue_receive";

/// The stream's storage and queue requests by operation (JSON object, all runs), for
/// `landfall streams`.
pub const REQUESTS_META: &str = "request_counts";

/// The discovery mode whose view of the source is complete (the discovery decides; see
/// `Discovery::prepare`).
pub use landfall_core::RecordedMode;

/// The last error a run ended with; shown by `landfall streams` while no batch committed after
/// it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StreamStatus {
    pub error: String,
    /// Retrying cannot heal it: the stream stopped until someone acts.
    pub fatal: bool,
    /// What kind of failure (absent in statuses written before kinds).
    #[serde(default)]
    pub kind: Option<ErrorKind>,
    pub at: DateTime<Utc>,
}

/// The typed view of a stream's `m/user/` entries.
#[derive(Clone)]
pub struct StreamMemory {
    stream: String,
    state: Arc<dyn StateStore>,
}

impl StreamMemory {
    pub fn new(stream: &str, state: Arc<dyn StateStore>) -> Self {
        StreamMemory {
            stream: stream.to_string(),
            state,
        }
    }

    /// The ledger it keeps its facts in.
    pub fn state(&self) -> &Arc<dyn StateStore> {
        &self.state
    }

    /// A stored time; an unreadable one is `None` (the callers then act as on a first start,
    /// which lists: never less safe).
    fn time(&self, key: &str) -> SeamResult<Option<DateTime<Utc>>> {
        Ok(self
            .state
            .meta(key)?
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.with_timezone(&Utc)))
    }

    fn set_time(&self, key: &str, t: DateTime<Utc>) -> SeamResult<()> {
        self.state.set_meta(key, &t.to_rfc3339())
    }

    /// The `include_existing_files = false` cutoff: the stored one, or `now` stored as it at
    /// the first start. An unreadable stored cutoff is an error (guessing one would ingest
    /// or drop files).
    pub fn existing_cutoff(&self, now: DateTime<Utc>) -> SeamResult<DateTime<Utc>> {
        match self.state.meta(EXISTING_CUTOFF_META)? {
            Some(t) => DateTime::parse_from_rfc3339(&t)
                .map(|d| d.with_timezone(&Utc))
                .map_err(|e| {
                    SeamError::fatal(format!(
                        "stream `{}`: stored cutoff `{t}` unreadable: {e}",
                        self.stream
                    ))
                }),
            None => {
                self.set_time(EXISTING_CUTOFF_META, now)?;
                Ok(now)
            }
        }
    }

    /// When the stream last read its queue (written by the worker, at most once a minute).
    pub fn set_last_receive(&self, t: DateTime<Utc>) -> SeamResult<()> {
        self.set_time(LAST_RECEIVE_META, t)
    }

    /// Request counts of earlier runs (empty when none, or unreadable: counts are not worth a
    /// failure).
    pub fn request_counts(&self) -> SeamResult<BTreeMap<String, u64>> {
        Ok(self
            .state
            .meta(REQUESTS_META)?
            .and_then(|j| serde_json::from_str(&j).ok())
            .unwrap_or_default())
    }

    pub fn set_request_counts(&self, counts: &BTreeMap<String, u64>) -> SeamResult<()> {
        let json = serde_json::to_string(counts).expect("counts serialise");
        self.state.set_meta(REQUESTS_META, &json)
    }

    /// Keep the error a run ended with.
    pub fn set_status(&self, e: &SeamError, at: DateTime<Utc>) -> SeamResult<()> {
        let status = StreamStatus {
            error: e.message.clone(),
            fatal: !e.retryable,
            kind: Some(e.kind),
            at,
        };
        let json = serde_json::to_string(&status).expect("status serialises");
        self.state.set_meta(STATUS_META, &json)
    }
}

impl DiscoveryMemory for StreamMemory {
    fn mode(&self) -> SeamResult<Option<RecordedMode>> {
        Ok(self
            .state
            .meta(DISCOVERY_MODE_META)?
            .map(|m| RecordedMode::parse(&m)))
    }

    fn set_mode(&self, mode: RecordedMode) -> SeamResult<()> {
        self.state.set_meta(DISCOVERY_MODE_META, mode.as_str())
    }

    /// Written on change only.
    fn set_discovery_note(&self, note: Option<String>) -> SeamResult<()> {
        let note = note.unwrap_or_default();
        if self.state.meta(DISCOVERY_NOTE_META)?.unwrap_or_default() != note {
            self.state.set_meta(DISCOVERY_NOTE_META, &note)?;
        }
        Ok(())
    }

    fn last_listing(&self) -> SeamResult<Option<DateTime<Utc>>> {
        self.time(LAST_LISTING_META)
    }

    fn set_last_listing(&self, t: DateTime<Utc>) -> SeamResult<()> {
        self.set_time(LAST_LISTING_META, t)
    }

    fn last_receive(&self) -> SeamResult<Option<DateTime<Utc>>> {
        self.time(LAST_RECEIVE_META)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landfall_state::{Ledger, MemoryKv};

    fn memory() -> StreamMemory {
        StreamMemory::new("s", Arc::new(Ledger::new("s", MemoryKv::default())))
    }

    #[test]
    fn facts_round_trip_under_their_ledger_names() {
        let m = memory();
        let t = DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(m.mode().unwrap(), None);
        for mode in [
            RecordedMode::Listing,
            RecordedMode::Notifications,
            RecordedMode::NotificationsListingOwed,
            RecordedMode::FileEvents,
        ] {
            m.set_mode(mode).unwrap();
            assert_eq!(m.mode().unwrap(), Some(mode));
        }
        // The names are the ledger format: older ledgers hold these strings.
        assert_eq!(
            m.state.meta(DISCOVERY_MODE_META).unwrap().as_deref(),
            Some("file_events")
        );
        m.state
            .set_meta(DISCOVERY_MODE_META, "from the future")
            .unwrap();
        assert_eq!(m.mode().unwrap(), Some(RecordedMode::Unknown));

        assert_eq!(m.existing_cutoff(t).unwrap(), t, "fixed at the first start");
        let later = t + chrono::Duration::days(1);
        assert_eq!(m.existing_cutoff(later).unwrap(), t, "kept after it");
        m.state.set_meta(EXISTING_CUTOFF_META, "garbage").unwrap();
        assert!(!m.existing_cutoff(later).unwrap_err().retryable);

        m.set_last_listing(t).unwrap();
        assert_eq!(m.last_listing().unwrap(), Some(t));
        m.state.set_meta(LAST_RECEIVE_META, "garbage").unwrap();
        assert_eq!(m.last_receive().unwrap(), None);

        let counts = BTreeMap::from([("GET".to_string(), 3u64)]);
        m.set_request_counts(&counts).unwrap();
        assert_eq!(m.request_counts().unwrap(), counts);

        m.set_discovery_note(Some("listing".into())).unwrap();
        m.set_discovery_note(None).unwrap();
        assert_eq!(
            m.state.meta(DISCOVERY_NOTE_META).unwrap().as_deref(),
            Some("")
        );

        m.set_status(&SeamError::fatal("boom"), t).unwrap();
        let s: StreamStatus =
            serde_json::from_str(&m.state.meta(STATUS_META).unwrap().unwrap()).unwrap();
        assert_eq!((s.error.as_str(), s.fatal, s.at), ("boom", true, t));
        assert_eq!(s.kind, Some(ErrorKind::Fatal));
        // A status written before kinds reads without one.
        let old: StreamStatus =
            serde_json::from_str(r#"{"error":"x","fatal":false,"at":"2026-01-02T03:04:05Z"}"#)
                .unwrap();
        assert_eq!(old.kind, None);
    }
}
