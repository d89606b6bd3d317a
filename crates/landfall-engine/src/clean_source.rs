//! `clean_source`: committed source files deleted or moved once their retention passed
//! (Auto Loader's `cleanSource`). docs/clean-source.md has the rules; in short:
//!
//! - Only files the ledger records as **committed** are archived, and only after
//!   `retention_duration` since their batch's commit. The ledger's archive index holds them in
//!   commit order, so a pass reads what is due and stops at the first entry that is not.
//! - A page of due files is archived in steps, each safe to repeat after a crash: check each
//!   source (a HEAD: a source replaced since its commit is left in place, recorded with a
//!   note, never tried again); for `move`, choose each target (the path below the source,
//!   put below the destination; if something else is there already, the same name with
//!   `.landfall-<version>` appended) and record the targets, in one ledger write; move
//!   (local: a rename; object stores: a copy, checked by a HEAD of the copy, then a delete
//!   of the source) or delete; record the files archived, in one ledger write.
//! - A pass after a crash finds the files still `committed` and finishes them: a source still
//!   there is copied again to its recorded target (our own copy, overwritten with the same
//!   bytes); a source gone whose recorded target holds a file of its size was moved; a source
//!   gone otherwise was deleted by someone else (recorded, with a note).
//! - Archiving never holds ingestion back: it runs beside the stream's loop on its own task,
//!   started once the table and the ledger were checked and recovery ran (a drain runs one
//!   pass after the last batch); a failed file is tried again later with a growing delay
//!   (1 min to 1 h); a failure is counted and logged, never fatal; ledger writes are one per
//!   page and step, not per file.
//! - Exactly-once is unaffected: an archived file keeps its ledger record until
//!   `max_file_age` forgets it, and the destination is never under the source (checked with
//!   the configuration, as is a second stream listing both).
//!
//! `LANDFALL_TEST_CLOCK_AHEAD_SECS` (seconds; read by debug builds only, which tests use)
//! moves the archiver's clock forward, so a test can see a `delete` retention of 7 days pass.

use crate::events::{ArchiveOutcome, StreamEvents};
use crate::failpoint;
use crate::stream::SourceStore;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use landfall_config::CleanSource;
use landfall_core::seams::SeamResult;
use landfall_core::{Archive, ArchiveMode, ArchiveStep, FileKey, FileRecord, StateStore};
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
    /// The ledger's older committed files are in the archive index.
    indexed: std::sync::atomic::AtomicBool,
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub archived: u64,
    pub failed: u64,
}

/// What archiving one file did, to be recorded.
type Recorded = (ArchiveOutcome, ArchiveStep);

/// What the check of one due file decided.
enum Plan {
    /// Delete the source.
    Delete,
    /// Move the source to `to` (object path, shown form); `new` when the target is not yet
    /// recorded.
    Move { to: Path, shown: String, new: bool },
    /// Nothing to do at the store: record this.
    Record(ArchiveOutcome, ArchiveStep),
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
        let clock_ahead = if cfg!(debug_assertions) {
            std::env::var("LANDFALL_TEST_CLOCK_AHEAD_SECS")
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .and_then(chrono::Duration::try_seconds)
                .unwrap_or_default()
        } else {
            chrono::Duration::zero()
        };
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
            indexed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Index the committed files of a ledger older than the archive index (once per ledger;
    /// once per process it is checked).
    async fn prepare(&self) -> SeamResult<()> {
        if self.indexed.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(());
        }
        let state = self.state.clone();
        let n = tokio::task::spawn_blocking(move || state.index_for_archive())
            .await
            .map_err(|e| {
                landfall_core::SeamError::fatal(format!("indexing for clean_source: {e}"))
            })??;
        self.events.archive_indexed(n);
        self.indexed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    fn now(&self) -> DateTime<Utc> {
        Utc::now() + self.clock_ahead
    }

    /// Archive every file due now (files waiting for a retry aside), until `stop` turns true:
    /// it is looked at between pages and before each file's check. A ledger error ends the
    /// pass; a file's own failure does not.
    pub async fn pass(&self, stop: &watch::Receiver<bool>) -> SeamResult<Pass> {
        self.prepare().await?;
        let started = Instant::now();
        let mut pass = Pass::default();
        let retention = chrono::Duration::from_std(self.retention).unwrap_or(chrono::Duration::MAX);
        let cutoff = self
            .now()
            .checked_sub_signed(retention)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        while !*stop.borrow() {
            let waiting = self.waiting();
            let skip = |k: &FileKey| waiting.contains_key(k);
            let due = crate::stream::off_async(|| self.state.due_for_archive(cutoff, PAGE, &skip))?;
            if due.is_empty() {
                break;
            }
            self.page(due, stop, &mut pass).await?;
        }
        self.events
            .archive_pass(pass.archived, pass.failed, started.elapsed());
        Ok(pass)
    }

    /// One page of due files: check, record the targets, move or delete, record.
    async fn page(
        &self,
        due: Vec<FileRecord>,
        stop: &watch::Receiver<bool>,
        pass: &mut Pass,
    ) -> SeamResult<()> {
        let checked: Vec<(FileRecord, Result<Plan, String>)> = futures::stream::iter(due)
            .take_while(|_| futures::future::ready(!*stop.borrow()))
            .map(|rec| async move {
                let plan = self.check(&rec).await;
                (rec, plan)
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut steps = Vec::new();
        let mut work = Vec::new();
        for (rec, plan) in checked {
            match plan {
                Err(e) => self.failure(&rec, &e, pass),
                Ok(Plan::Record(outcome, step)) => steps.push((rec, outcome, step)),
                Ok(plan) => work.push((rec, plan)),
            }
        }
        let targets: Vec<(FileKey, ArchiveStep)> = work
            .iter()
            .filter_map(|(rec, plan)| match plan {
                Plan::Move {
                    shown, new: true, ..
                } => Some((rec.key.clone(), ArchiveStep::Target(shown.clone()))),
                _ => None,
            })
            .collect();
        if !targets.is_empty() {
            crate::stream::off_async(|| self.state.record_archive(&targets))?;
        }
        let done: Vec<(FileRecord, Result<Recorded, String>)> = futures::stream::iter(work)
            .map(|(rec, plan)| async move {
                let r = self.execute(&rec, plan).await;
                failpoint::hit("archive_before_record");
                (rec, r)
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        for (rec, r) in done {
            match r {
                Ok((outcome, step)) => steps.push((rec, outcome, step)),
                Err(e) => self.failure(&rec, &e, pass),
            }
        }
        if steps.is_empty() {
            return Ok(());
        }
        let record: Vec<(FileKey, ArchiveStep)> = steps
            .iter()
            .map(|(rec, _, step)| (rec.key.clone(), step.clone()))
            .collect();
        crate::stream::off_async(|| self.state.record_archive(&record))?;
        let mut retry = self.retry_lock();
        for (rec, outcome, step) in &steps {
            retry.remove(&rec.key);
            let to = match step {
                ArchiveStep::Done(a) => a.move_location.as_deref(),
                _ => None,
            };
            self.events
                .file_archived(&self.shown(&rec.meta.path), *outcome, to);
            pass.archived += 1;
        }
        Ok(())
    }

    fn failure(&self, rec: &FileRecord, error: &str, pass: &mut Pass) {
        pass.failed += 1;
        let delay = self.failed(&rec.key);
        self.events
            .archive_failed(&self.shown(&rec.meta.path), error, delay);
    }

    /// Passes until `shutdown` turns true (looked at between files: a file's steps are never
    /// cut short by a stop; a crash may cut them, and the next pass finishes them).
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            if *shutdown.borrow() {
                return;
            }
            if let Err(e) = self.pass(&shutdown).await {
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
    /// kept, with `suffix` appended to the name.
    fn destination_of(&self, path: &str, suffix: &str) -> Option<(Path, String)> {
        let (prefix, url) = self.destination.as_ref()?;
        let rel = landfall_discovery::relative_path(&self.source_prefix, path);
        let joined = if prefix.as_ref().is_empty() {
            format!("{rel}{suffix}")
        } else {
            format!("{}/{rel}{suffix}", prefix.as_ref())
        };
        let to = Path::parse(&joined).ok()?;
        let shown = landfall_discovery::display_path(url, to.as_ref());
        Some((to, shown))
    }

    /// The target recorded by an earlier attempt, as an object path.
    fn recorded_target(&self, rec: &FileRecord) -> Option<(Path, String)> {
        let (_, url) = self.destination.as_ref()?;
        let shown = rec.move_location.as_ref()?;
        let path = Path::parse(landfall_discovery::object_path(url, shown)).ok()?;
        Some((path, shown.clone()))
    }

    /// What to do with one due file, from a HEAD of its source (and, for a move, of its
    /// target).
    async fn check(&self, rec: &FileRecord) -> Result<Plan, String> {
        let from = Path::parse(&rec.meta.path).map_err(|e| format!("not an object path: {e}"))?;
        let recorded = self.recorded_target(rec);
        match self.store.head(&from).await {
            Ok(found)
                if !rec
                    .meta
                    .same_version(&landfall_discovery::file_meta(found.clone())) =>
            {
                Ok(Plan::Record(
                    ArchiveOutcome::Overwritten,
                    ArchiveStep::PassedOver(
                        "clean_source: the source was overwritten after its commit; left in place"
                            .to_string(),
                    ),
                ))
            }
            Ok(_) => match self.mode {
                ArchiveMode::Delete => Ok(Plan::Delete),
                ArchiveMode::Move => {
                    if let Some((to, shown)) = recorded {
                        // Our own target: a copy there is ours.
                        return Ok(Plan::Move {
                            to,
                            shown,
                            new: false,
                        });
                    }
                    let (to, shown) = self
                        .destination_of(&rec.meta.path, "")
                        .ok_or("no destination path for this file")?;
                    match self.store.head(&to).await {
                        Err(object_store::Error::NotFound { .. }) => Ok(Plan::Move {
                            to,
                            shown,
                            new: true,
                        }),
                        Ok(_) => {
                            // Something else is there: never overwrite it.
                            let suffix = format!(".landfall-{}", tag(&rec.meta.version_tag()));
                            let (to, shown) = self
                                .destination_of(&rec.meta.path, &suffix)
                                .ok_or("no destination path for this file")?;
                            Ok(Plan::Move {
                                to,
                                shown,
                                new: true,
                            })
                        }
                        Err(e) => Err(e.to_string()),
                    }
                }
            },
            Err(object_store::Error::NotFound { .. }) => {
                let gone = |note: &str| {
                    Ok(Plan::Record(
                        ArchiveOutcome::Gone,
                        ArchiveStep::Done(Archive {
                            time: Utc::now(),
                            mode: self.mode,
                            move_location: None,
                            note: Some(note.to_string()),
                        }),
                    ))
                };
                match (self.mode, recorded) {
                    (ArchiveMode::Delete, _) => {
                        gone("clean_source: the source was already gone when it was deleted")
                    }
                    (ArchiveMode::Move, Some((to, shown))) => match self.store.head(&to).await {
                        // An earlier attempt moved it (its target was recorded first).
                        Ok(m) if m.size == rec.meta.size => Ok(Plan::Record(
                            ArchiveOutcome::Moved,
                            ArchiveStep::Done(Archive {
                                time: Utc::now(),
                                mode: ArchiveMode::Move,
                                move_location: Some(shown),
                                note: None,
                            }),
                        )),
                        Ok(_) | Err(object_store::Error::NotFound { .. }) => gone(
                            "clean_source: the source was gone before it was moved; nothing was moved",
                        ),
                        Err(e) => Err(e.to_string()),
                    },
                    (ArchiveMode::Move, None) => gone(
                        "clean_source: the source was gone before it was moved; nothing was moved",
                    ),
                }
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Delete, or move: a local file by a rename (a copy across file systems), an object by
    /// a copy, a HEAD of the copy, and a delete.
    async fn execute(&self, rec: &FileRecord, plan: Plan) -> Result<Recorded, String> {
        let from = Path::parse(&rec.meta.path).map_err(|e| format!("not an object path: {e}"))?;
        let done = |outcome, move_location| {
            (
                outcome,
                ArchiveStep::Done(Archive {
                    time: Utc::now(),
                    mode: self.mode,
                    move_location,
                    note: None,
                }),
            )
        };
        match plan {
            Plan::Record(outcome, step) => Ok((outcome, step)),
            Plan::Delete => {
                delete(self.store.as_ref(), &from).await?;
                Ok(done(ArchiveOutcome::Deleted, None))
            }
            Plan::Move { to, shown, .. } => {
                if self.local {
                    local_move(&from, &to).await?;
                } else {
                    self.store
                        .copy(&from, &to)
                        .await
                        .map_err(|e| e.to_string())?;
                    let copy = self.store.head(&to).await.map_err(|e| e.to_string())?;
                    if copy.size != rec.meta.size {
                        return Err(format!(
                            "the copy at {shown} has {} bytes, the source {}; the source is kept",
                            copy.size, rec.meta.size
                        ));
                    }
                    failpoint::hit("archive_after_copy");
                    delete(self.store.as_ref(), &from).await?;
                }
                Ok(done(ArchiveOutcome::Moved, Some(shown)))
            }
        }
    }
}

/// Delete an object; one already gone is deleted.
async fn delete(store: &dyn ObjectStore, path: &Path) -> Result<(), String> {
    match store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Move a local file: one rename, the directories made; across file systems a copy to a
/// temporary name beside the target, synced, renamed into place, then the source removed.
async fn local_move(from: &Path, to: &Path) -> Result<(), String> {
    let fs = object_store::local::LocalFileSystem::new();
    let from = fs.path_to_filesystem(from).map_err(|e| e.to_string())?;
    let to = fs.path_to_filesystem(to).map_err(|e| e.to_string())?;
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)?;
        }
        match std::fs::rename(&from, &to) {
            Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
                let mut tmp = to.clone().into_os_string();
                tmp.push(".landfall-partial");
                let tmp = std::path::PathBuf::from(tmp);
                std::fs::copy(&from, &tmp)?;
                std::fs::File::open(&tmp)?.sync_all()?;
                std::fs::rename(&tmp, &to)?;
                std::fs::remove_file(&from)
            }
            other => other,
        }
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())
}

/// A version tag fit for a file name: letters and digits only, at most 32.
fn tag(version: &str) -> String {
    version
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(32)
        .collect()
}
