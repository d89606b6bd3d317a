//! Discovery: rounds of candidate files and, for queues, acknowledgement tokens that are
//! acknowledged only after the files are durably admitted.

use super::SeamResult;
use crate::file::FileMeta;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// An opaque token that acknowledges a queue message (a receipt handle, a pop receipt). Listing
/// discovery produces none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckToken(pub String);

/// One round of discovery.
#[derive(Debug, Default, Clone)]
pub struct DiscoveryBatch {
    pub files: Vec<FileMeta>,
    /// Position to store with the admitted files (listing: last key; queues: none).
    pub cursor: Option<String>,
    pub ack: Vec<AckToken>,
    /// Files the filters passed over, for the logs and metrics.
    pub filtered: u64,
    /// Listed objects that are not files to ingest at all, by reason (`empty`,
    /// `directory_marker`, `unrepresentable_key`), for the logs and metrics.
    pub passed_over: Vec<(&'static str, String)>,
    /// Objects listed (or events received) in this round, before any filter.
    pub listed: u64,
    /// The round listed only the keys after the cursor (an incremental listing).
    pub incremental: bool,
    /// This round listed the whole source (listing mode, or a notification stream's initial
    /// or backfill listing), so every file present when it started is admitted.
    pub full_listing: bool,
    /// The source has more right now (a queue returned full receives): discover again
    /// before concluding that everything available was seen.
    pub more: bool,
    /// Notification mode: what the round's queue messages held.
    pub queue: Option<QueueRound>,
}

impl DiscoveryBatch {
    /// Keep only the files `may_be_new` does not rule out.
    pub fn retain_new(&mut self, may_be_new: NewFilter<'_>) -> SeamResult<()> {
        if self.files.is_empty() {
            return Ok(());
        }
        let mut keep = may_be_new(&self.files)?.into_iter();
        self.files.retain(|_| keep.next().unwrap_or(true));
        Ok(())
    }
}

/// What one round of queue messages held, for the logs and metrics.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct QueueRound {
    pub received: u64,
    /// Messages that could not be parsed: left in the queue (its redrive policy moves them
    /// aside after its max receive count).
    pub malformed: Vec<MalformedMessage>,
    /// Well-formed messages without object events (S3 test events, SNS confirmations).
    pub ignored_messages: u64,
    /// Object-removed events (counted; the ledger keeps what was ingested).
    pub removed_events: u64,
    /// Events of other kinds, or about another bucket or container.
    pub other_events: u64,
    /// Deliveries held past their visibility timeout (their extensions failed): their files
    /// are admitted, but the messages are not deleted (they come back, and the ledger keeps
    /// them from duplicating). Reported as `kept`.
    pub extension_failures: u64,
    /// Directories renamed into the source (Azure `DirectoryRenamed`), which name none of
    /// their files: each was listed in the round.
    pub directories_listed: u64,
}

/// A queue message that could not be parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct MalformedMessage {
    pub id: String,
    pub receive_count: u32,
    pub error: String,
}

/// Decides, for one page of listed candidates, which may be new to the stream's state (see
/// [`StateStore::may_be_new`]).
pub type NewFilter<'a> = &'a (dyn Fn(&[FileMeta]) -> SeamResult<Vec<bool>> + Send + Sync);

/// What a run tells its discovery before the first round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStart {
    /// The run ends once everything present at its start is committed (`available_now`): a
    /// queue's receive does not wait for messages, a file-events stream drains its location.
    pub available_now: bool,
    /// Only files modified after this instant are candidates (`include_existing_files =
    /// false`: the cutoff fixed at the stream's first start).
    pub modified_after: Option<DateTime<Utc>>,
    /// List the whole source at this start even where the recorded mode says the view is
    /// complete (`list_on_start` of a file-events stream).
    pub list_on_start: bool,
}

/// The discovery mode whose view of the source a stream recorded as complete. A notification
/// or file-events stream whose record says otherwise (new, switched from listing, or owing a
/// listing) lists first, so files that landed before its events were seen are not missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordedMode {
    /// The stream lists.
    Listing,
    /// A notification stream whose first listing is admitted.
    Notifications,
    /// A notification stream whose bucket entry was written back and which has not listed
    /// since (bucket_entry.rs in landfall-discovery): the next start lists.
    NotificationsListingOwed,
    /// A file-events stream whose first listing is admitted.
    FileEvents,
    /// A value this version does not know (a newer landfall's): no mode this version runs
    /// in, so the stream lists first.
    Unknown,
}

impl RecordedMode {
    /// The name kept in the ledger (a format: older ledgers hold these strings).
    pub fn as_str(self) -> &'static str {
        match self {
            RecordedMode::Listing => "listing",
            RecordedMode::Notifications => "notifications",
            RecordedMode::NotificationsListingOwed => "notifications_listing_owed",
            RecordedMode::FileEvents => "file_events",
            RecordedMode::Unknown => "unknown",
        }
    }

    /// The mode a kept name stands for ([`RecordedMode::Unknown`] for a name this version
    /// does not know).
    pub fn parse(s: &str) -> Self {
        [
            RecordedMode::Listing,
            RecordedMode::Notifications,
            RecordedMode::NotificationsListingOwed,
            RecordedMode::FileEvents,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
        .unwrap_or(RecordedMode::Unknown)
    }
}

/// What a discovery remembers across runs, kept in the stream's ledger beside its files (the
/// engine's `StreamMemory`). Discovery decides what to remember; the stream owns where.
pub trait DiscoveryMemory: Send + Sync {
    /// The recorded mode (`None`: none yet, a new stream).
    fn mode(&self) -> SeamResult<Option<RecordedMode>>;
    fn set_mode(&self, mode: RecordedMode) -> SeamResult<()>;
    /// When a notification stream's last full listing started (for `backfill_interval`).
    fn last_listing(&self) -> SeamResult<Option<DateTime<Utc>>>;
    fn set_last_listing(&self, t: DateTime<Utc>) -> SeamResult<()>;
    /// When a notification stream last read its queue.
    fn last_receive(&self) -> SeamResult<Option<DateTime<Utc>>>;
    /// What the discovery does instead of reading its events (`None`: it reads them).
    fn set_discovery_note(&self, note: Option<String>) -> SeamResult<()>;
}

/// A stream's discovery, as its worker drives it: [`Discovery::prepare`] once per run, then
/// rounds of [`Discovery::discover_new`], each followed, once its files are durably admitted,
/// by [`Discovery::round_admitted`] and [`Discovery::acknowledge`].
#[async_trait]
pub trait Discovery: Send + Sync {
    /// Enter the mode for a run. `memory` tells which mode the stream's view of the source
    /// was complete in; a mode that is not this one lists first (and a listing stream back
    /// from another mode stops trusting its cursor).
    /// Required: a discovery that ignored `run.modified_after` would ingest what
    /// `include_existing_files = false` keeps out.
    fn prepare(&mut self, memory: &dyn DiscoveryMemory, run: RunStart) -> SeamResult<()>;
    /// Find candidate files, resuming from `cursor` where the mode supports it.
    async fn discover(&self, cursor: Option<&str>) -> SeamResult<DiscoveryBatch>;
    /// Like `discover`, keeping only the candidates `may_be_new` does not rule out. Listing
    /// modes apply it page by page, so memory follows the new files, not the prefix size.
    async fn discover_new(
        &self,
        cursor: Option<&str>,
        may_be_new: NewFilter<'_>,
    ) -> SeamResult<DiscoveryBatch> {
        let mut batch = self.discover(cursor).await?;
        batch.retain_new(may_be_new)?;
        Ok(batch)
    }
    /// A round's files are durably admitted: remember what the round settled (a full
    /// listing that started at `started` completes the mode's view; what the discovery does
    /// instead of reading its events). Called before the round's messages are acknowledged.
    fn round_admitted(
        &self,
        _memory: &dyn DiscoveryMemory,
        _full_listing: bool,
        _started: DateTime<Utc>,
    ) -> SeamResult<()> {
        Ok(())
    }
    /// Acknowledge messages whose files are durably admitted. A no-op for listing.
    async fn acknowledge(&self, _tokens: Vec<AckToken>) -> SeamResult<()> {
        Ok(())
    }
    /// List the whole source on the next round (an admin backfill).
    fn request_full_listing(&self) {}
    /// A round may wait for events by itself (a queue's long poll): the worker neither
    /// pauses between rounds nor lets a stop wait for one.
    fn long_polls(&self) -> bool {
        false
    }
    /// For an `available_now` run: how many queue messages to take in at most before the
    /// first batch (what was queued at the start, plus a round), so a busy producer cannot
    /// keep the run from ever planning. `None`: no bound (not a queue, or its depth unknown).
    async fn drain_budget(&self) -> Option<u64> {
        None
    }
    /// The queue's approximate depth, where there is a queue.
    async fn queue_depth(&self) -> SeamResult<Option<u64>> {
        Ok(None)
    }
    /// Resolves when new files may be waiting before the next poll (a file-events
    /// location's consumer finished a round); never, for modes that poll.
    async fn wake(&self) {
        std::future::pending::<()>().await
    }
}
