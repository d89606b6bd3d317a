//! `clean_source`: committed source files deleted or moved once their retention passed
//! (Auto Loader's `cleanSource`). docs/clean-source.md has the rules; in short:
//!
//! - Only files the ledger records as **committed** are archived, and only after
//!   `retention_duration` since their batch's commit. The ledger's archive index holds them in
//!   commit order, so a pass reads what is due and stops at the first entry that is not.
//! - A file is archived by steps that may each be cut short by a crash, and each step is safe
//!   to do again: check the source (a HEAD), move (local: one `rename`; object stores: copy,
//!   then delete) or delete, then record `archived` with `archive_time`, `archive_mode` and
//!   `move_location`. A pass after a crash finds the file still `committed` and finishes the
//!   steps: a source already gone whose destination holds the file was moved; a source gone
//!   with nothing at the destination was deleted by someone else (recorded, with a note).
//! - A source replaced by another version since its commit (the etag or size differ) is left
//!   in place: with `allow_overwrites` it is a new file waiting to be ingested. The committed
//!   version is recorded archived with a note.
//! - Archiving never holds ingestion back: it runs beside the stream's loop on its own task
//!   (a drain runs one pass after the last batch), a failed file is tried again later with a
//!   growing delay (1 min to 1 h), and a failure is counted and logged, never fatal.
//! - Exactly-once is unaffected: an archived file keeps its ledger record until
//!   `max_file_age` forgets it, and the destination is never under the source (checked with
//!   the configuration, as is a second stream listing both).
//!
//! `LANDFALL_TEST_CLOCK_AHEAD_SECS` (seconds, tests only) moves the archiver's clock forward, so
//! a test can see a `delete` retention of 7 days pass.

use crate::events::{ArchiveOutcome, StreamEvents};
use crate::failpoint;
use crate::stream::SourceStore;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use landfall_config::CleanSource;
use landfall_core::seams::SeamResult;
use landfall_core::{Archive, ArchiveMode, FileKey, FileRecord, StateStore};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use url::Url;

/// Files archived at once (each a HEAD and one to three requests).
const IN_FLIGHT: usize = 8;
/// Due files read from the ledger per page.
const PAGE: usize = 256;
/// Retry delays of a failed file: doubling from the first to the cap.
const FIRST_RETRY: Duration = Duration::from_secs(60);
const MAX_RETRY: Duration = Duration::from_secs(3600);

/// The archiver of one stream.
pub struct Archiver {
    stream: String,
    mode: ArchiveMode,
    retention: Duration,
    /// How often a running stream looks for due files.
    every: Duration,
    state: Arc<dyn StateStore>,
    store: Arc<dyn ObjectStore>,
    source_prefix: Path,
    source_url: Url,
    /// `move`: the destination's prefix in the source's store, and its URL.
    destination: Option<(Path, Url)>,
    /// One `rename` moves a local file; object stores copy and delete.
    local: bool,
    events: Arc<StreamEvents>,
    /// Files whose last attempt failed: when they may be tried again, and how many failed.
    retry: Mutex<HashMap<FileKey, (Instant, u32)>>,
    clock_ahead: chrono::Duration,
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub archived: u64,
    pub failed: u64,
}

impl Archiver {
    /// The archiver of a stream with `clean_source` on, over the store its files are read
    /// from.
    pub fn new(
        stream: &str,
        clean: &CleanSource,
        source_url: &Url,
        poll_interval: Duration,
        source: &SourceStore,
        state: Arc<dyn StateStore>,
        events: Arc<StreamEvents>,
    ) -> SeamResult<Self> {
        let destination = match &clean.move_destination {
            Some(d) => {
                let (_, prefix) = object_store::ObjectStoreScheme::parse(&d.url).map_err(|e| {
                    landfall_core::SeamError::fatal(format!(
                        "{stream}: clean_source.move_destination {}: {e}",
                        d.shown()
                    ))
                })?;
                Some((prefix, d.url.clone()))
            }
            None => None,
        };
        let clock_ahead = std::env::var("LANDFALL_TEST_CLOCK_AHEAD_SECS")
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .and_then(chrono::Duration::try_seconds)
            .unwrap_or_default();
        Ok(Archiver {
            stream: stream.to_string(),
            mode: clean.mode,
            retention: clean.retention,
            every: poll_interval.clamp(Duration::from_secs(1), Duration::from_secs(60)),
            state,
            store: source.store.clone(),
            source_prefix: source.prefix.clone(),
            source_url: source_url.clone(),
            destination,
            local: source_url.scheme() == "file",
            events,
            retry: Mutex::new(HashMap::new()),
            clock_ahead,
        })
    }

    /// Index the committed files of a ledger older than the archive index (once).
    pub fn prepare(&self) -> SeamResult<()> {
        let n = crate::stream::off_async(|| self.state.index_for_archive())?;
        self.events.archive_indexed(n);
        Ok(())
    }

    fn now(&self) -> DateTime<Utc> {
        Utc::now() + self.clock_ahead
    }

    /// Archive every file due now (files waiting for a retry aside). A ledger error ends the
    /// pass; a file's own failure does not.
    pub async fn pass(&self) -> SeamResult<Pass> {
        let started = Instant::now();
        let mut pass = Pass::default();
        let retention = chrono::Duration::from_std(self.retention).unwrap_or(chrono::Duration::MAX);
        let cutoff = self
            .now()
            .checked_sub_signed(retention)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        loop {
            let waiting = self.waiting();
            let skip = |k: &FileKey| waiting.contains_key(k);
            let due = crate::stream::off_async(|| self.state.due_for_archive(cutoff, PAGE, &skip))?;
            if due.is_empty() {
                break;
            }
            let mut results = futures::stream::iter(due)
                .map(|rec| async move {
                    let r = self.archive(&rec).await;
                    (rec, r)
                })
                .buffer_unordered(IN_FLIGHT);
            while let Some((rec, r)) = results.next().await {
                match r {
                    Ok(()) => {
                        pass.archived += 1;
                        self.retry_lock().remove(&rec.key);
                    }
                    Err(Failure::Ledger(e)) => return Err(e),
                    Err(Failure::Store(e)) => {
                        pass.failed += 1;
                        let delay = self.failed(&rec.key);
                        self.events
                            .archive_failed(&self.shown(&rec.meta.path), &e, delay);
                    }
                }
            }
        }
        self.events
            .archive_pass(pass.archived, pass.failed, started.elapsed());
        Ok(pass)
    }

    /// Passes until `shutdown` turns true, between files (a file's steps are never cut short
    /// by a stop; a crash may cut them, and the next pass finishes them).
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            if *shutdown.borrow() {
                return;
            }
            if let Err(e) = self.pass().await {
                tracing::warn!(stream = %self.stream, error = %e.message, "clean_source pass failed; trying again later");
            }
            tokio::select! {
                _ = tokio::time::sleep(self.every) => {}
                r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
            }
        }
    }

    fn retry_lock(&self) -> std::sync::MutexGuard<'_, HashMap<FileKey, (Instant, u32)>> {
        self.retry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The files still waiting for their retry (the others are forgotten here).
    fn waiting(&self) -> HashMap<FileKey, (Instant, u32)> {
        let mut retry = self.retry_lock();
        let now = Instant::now();
        retry.retain(|_, (at, _)| *at > now);
        retry.clone()
    }

    /// Note a failure; returns the delay before the next attempt.
    fn failed(&self, key: &FileKey) -> Duration {
        let mut retry = self.retry_lock();
        let failures = retry.get(key).map_or(0, |(_, n)| *n) + 1;
        let delay = FIRST_RETRY
            .saturating_mul(1 << (failures - 1).min(6))
            .min(MAX_RETRY);
        retry.insert(key.clone(), (Instant::now() + delay, failures));
        delay
    }

    fn shown(&self, object_path: &str) -> String {
        landfall_discovery::display_path(&self.source_url, object_path)
    }

    /// Where a file of the source goes under the destination: its path below the source,
    /// kept.
    fn destination_of(&self, path: &str) -> Option<(Path, String)> {
        let (prefix, url) = self.destination.as_ref()?;
        let rel = landfall_discovery::relative_path(&self.source_prefix, path);
        let joined = if prefix.as_ref().is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", prefix.as_ref())
        };
        let to = Path::parse(&joined).ok()?;
        let shown = landfall_discovery::display_path(url, to.as_ref());
        Some((to, shown))
    }

    /// Archive one committed file and record it.
    async fn archive(&self, rec: &FileRecord) -> Result<(), Failure> {
        let from = Path::parse(&rec.meta.path)
            .map_err(|e| Failure::Store(format!("not an object path: {e}")))?;
        let to = match self.mode {
            ArchiveMode::Move => {
                Some(self.destination_of(&rec.meta.path).ok_or_else(|| {
                    Failure::Store("no destination path for this file".to_string())
                })?)
            }
            ArchiveMode::Delete => None,
        };
        let shown = self.shown(&rec.meta.path);
        let (outcome, note) = match self.store.head(&from).await {
            Ok(found) => {
                if !rec.meta.same_version(&landfall_discovery::file_meta(found)) {
                    (
                        ArchiveOutcome::Overwritten,
                        Some(
                            "clean_source: the source was overwritten after its commit; the new version was left in place".to_string(),
                        ),
                    )
                } else {
                    self.archive_steps(&from, to.as_ref().map(|(p, _)| p))
                        .await
                        .map_err(|e| Failure::Store(e.to_string()))?;
                    (
                        match self.mode {
                            ArchiveMode::Move => ArchiveOutcome::Moved,
                            ArchiveMode::Delete => ArchiveOutcome::Deleted,
                        },
                        None,
                    )
                }
            }
            Err(object_store::Error::NotFound { .. }) => {
                self.already_gone(rec, to.as_ref()).await?
            }
            Err(e) => return Err(Failure::Store(e.to_string())),
        };
        failpoint::hit("archive_before_record");
        let moved = matches!(outcome, ArchiveOutcome::Moved);
        let archive = Archive {
            time: Utc::now(),
            mode: self.mode,
            move_location: to.as_ref().filter(|_| moved).map(|(_, s)| s.clone()),
            note,
        };
        let recorded = crate::stream::off_async(|| self.state.record_archived(&rec.key, &archive))
            .map_err(Failure::Ledger)?;
        if recorded.is_some() {
            self.events
                .file_archived(&shown, outcome, archive.move_location.as_deref());
        }
        Ok(())
    }

    /// The source is gone: a move whose destination holds the file was done by an earlier
    /// attempt; anything else was deleted by someone else (or by an earlier `delete`).
    async fn already_gone(
        &self,
        rec: &FileRecord,
        to: Option<&(Path, String)>,
    ) -> Result<(ArchiveOutcome, Option<String>), Failure> {
        let Some((to, _)) = to else {
            return Ok((
                ArchiveOutcome::Gone,
                Some("clean_source: the source was already gone when it was deleted".to_string()),
            ));
        };
        match self.store.head(to).await {
            Ok(m) if m.size == rec.meta.size => Ok((ArchiveOutcome::Moved, None)),
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok((
                ArchiveOutcome::Gone,
                Some(
                    "clean_source: the source was gone before it was moved; nothing was moved"
                        .to_string(),
                ),
            )),
            Err(e) => Err(Failure::Store(e.to_string())),
        }
    }

    /// Delete, or move: a local file by one rename, an object by a copy and a delete.
    async fn archive_steps(&self, from: &Path, to: Option<&Path>) -> object_store::Result<()> {
        let Some(to) = to else {
            return match self.store.delete(from).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            };
        };
        if self.local {
            return self.store.rename(from, to).await;
        }
        self.store.copy(from, to).await?;
        failpoint::hit("archive_after_copy");
        match self.store.delete(from).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Why archiving a file stopped: its store (the file is tried again later) or the ledger
/// (the pass ends).
enum Failure {
    Store(String),
    Ledger(landfall_core::SeamError),
}
