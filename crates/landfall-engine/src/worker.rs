//! One stream's loop: discover, plan, run, commit, record (docs/exactly-once.md).
//!
//! Each step is durable before the next starts: files are admitted to the ledger before a plan
//! takes them, the plan (exact files, batch id) is recorded before any data file is written,
//! every data file's name is recorded before it is created, and the batch is recorded as
//! committed only after the table holds it. Shutdown is honoured between batches only.

use crate::events::{BatchTimings, StreamEvents};
use crate::failpoint;
use crate::pipeline::{self, DecodeJob, Decoded};
use crate::progress::PhaseDurations;
use crate::protocol::recovery::{Recovered, recover};
use crate::schema::{self, StreamSchema};
use crate::stream::memory::{RecordedMode, StreamMemory};
use chrono::Utc;
use landfall_config::{EvolutionMode, StreamSpec, Trigger};
use landfall_core::seams::{SeamResult, StagedHook};
use landfall_core::{
    BatchPlan, CommitReceipt, Committer, Discovery, FileKey, FileMeta, FileState, SeamError,
    SkipKind, SkipReason, StateStore,
};
use landfall_discovery::SourceDiscovery;
use landfall_formats::{DecodeOptions, NewColumns};
use object_store::{ObjectStore, ObjectStoreExt};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Why a worker's `run` returned without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// available_now: everything present at start is committed.
    Drained,
    /// Shutdown was requested; the batch in flight (if any) finished first.
    Stopped,
}

/// The seams a worker runs on: its ledger, its discovery and its table.
pub struct StreamParts {
    pub state: Arc<dyn StateStore>,
    pub discovery: SourceDiscovery,
    pub committer: Arc<dyn Committer>,
}

pub struct StreamWorker {
    spec: StreamSpec,
    state: Arc<dyn StateStore>,
    memory: StreamMemory,
    discovery: SourceDiscovery,
    committer: Arc<dyn Committer>,
    events: Arc<StreamEvents>,
    schema: Option<StreamSchema>,
    available_now: bool,
    last_expiry: Option<Instant>,
    /// The listing time not yet credited to a batch, and the last planning's (for progress
    /// records).
    discover_credit: std::sync::Mutex<Duration>,
    plan_took: Duration,
    /// When the queue was last noted (see `note_queue`).
    queue_noted: std::sync::Mutex<Option<Instant>>,
    /// The last discovery said the source has more right now (a queue backlog).
    source_more: std::sync::atomic::AtomicBool,
    /// Request counts of earlier runs (from the state) and when they were last saved.
    requests_base: std::collections::BTreeMap<String, u64>,
    requests_saved: std::sync::Mutex<Option<Instant>>,
}

/// How often the last-receive time is written and the queue depth asked for.
const QUEUE_NOTE_EVERY: Duration = Duration::from_secs(60);

/// How often `max_file_age` expiry runs.
const EXPIRY_EVERY: Duration = Duration::from_secs(3600);
pub use crate::protocol::settle::KEEP_PLANS;

impl StreamWorker {
    /// Open the stream's state, source and table. `available_now` overrides the trigger.
    pub async fn open(
        spec: StreamSpec,
        events: Arc<StreamEvents>,
        available_now: bool,
    ) -> SeamResult<Self> {
        let state = crate::wiring::open_state(&spec)?;
        let memory = StreamMemory::new(&spec.name, state.clone());
        let discovery = crate::wiring::open_discovery(
            &spec,
            &memory,
            events.request_counter(),
            events.metrics().clone(),
        )
        .await?;
        let committer = crate::wiring::open_committer(&spec)?;
        Self::new(
            spec,
            events,
            available_now,
            StreamParts {
                state,
                discovery,
                committer,
            },
        )
    }

    /// A worker over seams built elsewhere (`open` builds them from the spec; tests pass
    /// in-memory ones).
    pub fn new(
        spec: StreamSpec,
        events: Arc<StreamEvents>,
        available_now: bool,
        parts: StreamParts,
    ) -> SeamResult<Self> {
        let StreamParts {
            state,
            discovery,
            committer,
        } = parts;
        let memory = StreamMemory::new(&spec.name, state.clone());
        let requests_base = memory.request_counts()?;
        let available_now = available_now || spec.trigger == Trigger::AvailableNow;
        Ok(StreamWorker {
            spec,
            state,
            memory,
            discovery,
            committer,
            events,
            schema: None,
            available_now,
            last_expiry: None,
            discover_credit: std::sync::Mutex::new(Duration::ZERO),
            plan_took: Duration::ZERO,
            queue_noted: std::sync::Mutex::new(None),
            source_more: std::sync::atomic::AtomicBool::new(false),
            requests_base,
            requests_saved: std::sync::Mutex::new(None),
        })
    }

    pub fn events(&self) -> &Arc<StreamEvents> {
        &self.events
    }

    pub fn state(&self) -> &Arc<dyn StateStore> {
        &self.state
    }

    pub fn committer(&self) -> &Arc<dyn Committer> {
        &self.committer
    }

    /// Keep the error a run ended with in the ledger, for `landfall streams` (best effort: the
    /// error may be the ledger's own).
    pub fn record_status(&self, e: &SeamError) {
        if let Err(err) = self.memory.set_status(e, Utc::now()) {
            tracing::warn!(stream = %self.spec.name, error = %err.message, "could not record the stream status");
        }
    }

    fn store(&self) -> &Arc<dyn ObjectStore> {
        self.discovery.store()
    }

    /// Fix the `include_existing_files = false` cutoff at first start.
    fn apply_existing_cutoff(&mut self) -> SeamResult<()> {
        if self.spec.include_existing_files {
            return Ok(());
        }
        let cutoff = self.memory.existing_cutoff(Utc::now())?;
        self.discovery.set_modified_after(cutoff);
        Ok(())
    }

    /// List, and admit unknown files with the cursor in one write. Returns the candidates:
    /// every listed file while the schema is not resolved yet (inference samples them), else
    /// only the files the state did not know (the listing is checked page by page, so a
    /// round's memory follows the new files, not the size of the prefix).
    async fn discover(&self) -> SeamResult<Vec<FileMeta>> {
        let mut candidates = Vec::new();
        // A queue with more messages: an available-now run takes everything in before
        // planning (it must see all that is present at its start), but not more than was
        // queued at its start (plus a round), so a busy producer cannot keep it from ever
        // planning; a continuous one plans a batch between rounds and discovers again at
        // once (`source_more`).
        let budget = match (self.available_now, self.discovery.notifications()) {
            (true, Some(n)) => n
                .queue()
                .approximate_depth()
                .await
                .ok()
                .flatten()
                .map(|d| d + landfall_discovery::MAX_MESSAGES_PER_ROUND as u64),
            _ => None,
        };
        let mut received = 0u64;
        loop {
            let (more, got) = self.discover_round(&mut candidates).await?;
            received += got;
            self.source_more
                .store(more, std::sync::atomic::Ordering::Relaxed);
            if !more || !self.available_now || budget.is_some_and(|b| received >= b) {
                break;
            }
        }
        Ok(candidates)
    }

    /// One discovery round: admit, then acknowledge. Returns whether the source has more, and
    /// how many queue messages the round received.
    async fn discover_round(&self, candidates: &mut Vec<FileMeta>) -> SeamResult<(bool, u64)> {
        let t = Instant::now();
        let t_listing = Utc::now();
        let cursor = self.state.cursor()?;
        let found = if self.schema.is_none() {
            self.discovery.discover(cursor.as_deref()).await?
        } else {
            let state = self.state.clone();
            let overwrites = self.spec.allow_overwrites;
            self.discovery
                .discover_new(cursor.as_deref(), &move |files| {
                    off_async(|| state.may_be_new(files, overwrites))
                })
                .await?
        };
        if found.queue.is_some() {
            failpoint::hit("after_receive");
        }
        let keyed: Vec<_> = found
            .files
            .iter()
            .map(|m| (m.key(self.spec.allow_overwrites), m.clone()))
            .collect();
        let admitted = off_async(|| {
            self.state
                .admit(&keyed, found.cursor.as_deref(), Utc::now())
        })?;
        drop(keyed);
        if found.queue.is_some() {
            failpoint::hit("after_admit");
        }
        // A full listing pays a listing owed for a bucket entry, unless the entry may be
        // missing still (its checks fail): then files published later sent no event either.
        if found.full_listing
            && let Some(n) = self.discovery.notifications()
            && !n.entry_unsettled()
        {
            self.memory.set_mode(RecordedMode::Notifications)?;
            self.memory.set_last_listing(t_listing)?;
        }
        if let Some(f) = self.discovery.file_events() {
            if found.full_listing {
                self.memory.set_mode(RecordedMode::FileEvents)?;
            }
            self.memory.set_discovery_note(f.note())?;
        }
        if let Some(n) = self.discovery.notifications() {
            self.memory.set_discovery_note(n.note())?;
        }
        self.discovery.acknowledge(found.ack).await?;
        for (reason, path) in &found.passed_over {
            self.events.passed_over(reason, &self.shown(path));
        }
        if let Some(round) = &found.queue {
            self.events.queue_round(round);
            self.note_queue().await?;
        }
        self.events.discovered(
            found.listed as usize,
            admitted,
            found.filtered,
            found.incremental,
            t.elapsed(),
        );
        candidates.extend(found.files);
        self.save_request_counts(false);
        Ok((found.more, found.queue.map_or(0, |q| q.received)))
    }

    /// Keep the stream's request counts (earlier runs plus this one) in the state, at most
    /// every [`QUEUE_NOTE_EVERY`] unless `now`. Best effort: a count is not worth a failure.
    pub fn save_request_counts(&self, now: bool) {
        {
            let mut last = self
                .requests_saved
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if !now && last.is_some_and(|t| t.elapsed() < QUEUE_NOTE_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let mut all = self.requests_base.clone();
        for (op, n) in self.events.request_counts() {
            *all.entry(op.to_string()).or_default() += n;
        }
        if let Err(e) = self.memory.set_request_counts(&all) {
            tracing::debug!(stream = %self.spec.name, error = %e.message, "could not record request counts");
        }
    }

    /// After a queue round, at most every [`QUEUE_NOTE_EVERY`]: record that the queue was
    /// read, and refresh the queue depth gauge.
    async fn note_queue(&self) -> SeamResult<()> {
        {
            let mut last = self.queue_noted.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < QUEUE_NOTE_EVERY) {
                return Ok(());
            }
            *last = Some(Instant::now());
        }
        self.memory.set_last_receive(Utc::now())?;
        if let Some(n) = self.discovery.notifications() {
            match n.queue().approximate_depth().await {
                Ok(Some(d)) => self.events.queue_depth(d),
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(stream = %self.spec.name, error = %e, "queue depth unavailable")
                }
            }
        }
        Ok(())
    }

    /// Before the first discovery: a notification or file-events stream entering the mode
    /// lists first; a listing stream notes that it lists (a later switch then lists again).
    fn prepare_discovery(&self) -> SeamResult<()> {
        let recorded = self.memory.mode()?;
        if let Some(f) = self.discovery.file_events() {
            let list_on_start = match &self.spec.discovery {
                landfall_config::DiscoverySpec::FileEvents(s) => s.list_on_start,
                _ => false,
            };
            if recorded != Some(RecordedMode::FileEvents) || list_on_start {
                f.request_listing();
            }
            f.set_drain(self.available_now);
            return Ok(());
        }
        match self.discovery.notifications() {
            Some(n) => {
                if recorded != Some(RecordedMode::Notifications) {
                    n.request_listing();
                }
                if let Some(t) = self.memory.last_listing()? {
                    n.set_last_listing(t);
                }
                if let Some(t) = self.memory.last_receive()? {
                    n.set_last_receive(t);
                }
                n.set_no_wait(self.available_now);
            }
            None if recorded != Some(RecordedMode::Listing) => {
                // Back from notification or file-events mode: the cursor is not a listing's
                // (queue admissions did not move it; file events keep a cache position in
                // it), so the first listing looks every file up.
                if recorded.is_some()
                    && let SourceDiscovery::Listing(l) = &self.discovery
                {
                    l.distrust_cursor();
                }
                self.memory.set_mode(RecordedMode::Listing)?;
            }
            None => {}
        }
        Ok(())
    }

    /// `discover`, timed, with the ledger's counts reported after it.
    async fn timed_discover(&mut self) -> SeamResult<Vec<FileMeta>> {
        let t = Instant::now();
        let found = self.discover().await?;
        *self
            .discover_credit
            .get_mut()
            .unwrap_or_else(|e| e.into_inner()) += t.elapsed();
        if let Ok(s) = self.state.counts() {
            self.events.listing_done(&s);
        }
        Ok(found)
    }

    fn expire(&mut self) -> SeamResult<()> {
        let Some(age) = self.spec.max_file_age else {
            return Ok(());
        };
        if self.last_expiry.is_some_and(|t| t.elapsed() < EXPIRY_EVERY) {
            return Ok(());
        }
        self.last_expiry = Some(Instant::now());
        let cutoff = Utc::now() - chrono::Duration::from_std(age).unwrap_or(chrono::Duration::MAX);
        let n = self.state.expire(cutoff)?;
        self.events.files_expired(n);
        Ok(())
    }

    /// Make sure the schema is known and the table prepared. False: nothing to infer from yet.
    async fn ensure_schema(&mut self, candidates: &[FileMeta]) -> SeamResult<bool> {
        if self.schema.is_some() {
            return Ok(true);
        }
        // Files admitted by an earlier run whose inference failed (a corrupt sample, a GET
        // error): a queue mode has deleted their messages and recorded the mode, so no round
        // finds them again. The ledger holds them: infer from its pending files.
        let pending;
        let candidates = if candidates.is_empty()
            && self.spec.schema.is_none()
            && self.state.latest_schema_version()?.is_none()
        {
            let state = self.state.clone();
            let sample = self.spec.sample_files.max(1);
            // A page at a time (the ledger may hold millions), until the sample is full.
            pending = off_async(move || -> SeamResult<Vec<FileMeta>> {
                let filter = landfall_core::seams::FileFilter {
                    state: Some(FileState::Discovered),
                    ..Default::default()
                };
                let mut out = Vec::new();
                let mut after = None;
                loop {
                    let page = state.files_page(filter, after.as_ref(), sample, 100_000)?;
                    out.extend(
                        page.files
                            .into_iter()
                            .map(|r| r.meta)
                            .filter(|m| m.size > 0),
                    );
                    match page.next {
                        Some(next) if out.len() < sample => after = Some(next),
                        _ => break,
                    }
                }
                out.truncate(sample);
                Ok(out)
            })?;
            &pending[..]
        } else {
            candidates
        };
        let prefix = self.discovery.prefix().clone();
        let Some((s, inferred)) = schema::resolve(
            &self.spec,
            self.state.as_ref(),
            self.store(),
            &prefix,
            candidates,
        )
        .await?
        else {
            return Ok(false);
        };
        self.events.schema_resolved(
            s.version,
            &landfall_core::ddl::schema_to_ddl(&s.table),
            inferred,
        );
        for c in &self.spec.sink.partition_by {
            if s.table.field_with_name(c).is_err() {
                return Err(SeamError::fatal(format!(
                    "stream `{}`: sink.partition_by column `{c}` is not in the stream schema",
                    self.spec.name
                )));
            }
        }
        if self.spec.evolution.adds_columns() || s.evolved {
            // The table may lack columns of an evolved schema (a stop between storing the
            // version and the commit that adds them): the next commit adds them.
            self.committer
                .evolve(s.table.clone(), &self.spec.sink.partition_by)
                .await?;
        } else {
            self.committer
                .prepare(s.table.clone(), &self.spec.sink.partition_by)
                .await?;
        }
        crate::protocol::recovery::check_table(
            &self.spec,
            self.state.as_ref(),
            self.committer.as_ref(),
            &self.events,
        )
        .await?;
        self.schema = Some(s);
        Ok(true)
    }

    /// Run until drained (available_now) or until `shutdown` turns true.
    pub async fn run(&mut self, mut shutdown: watch::Receiver<bool>) -> SeamResult<RunEnd> {
        self.events.set_source(&landfall_discovery::display_path(
            &self.spec.source.url,
            self.discovery.prefix().as_ref(),
        ));
        self.apply_existing_cutoff()?;
        self.prepare_discovery()?;
        // A stored or explicit schema needs no listing: resolving it first lets even the first
        // listing of this run keep only new files. (Inference needs the full first listing.)
        self.ensure_schema(&[]).await?;
        let mut candidates = if self.discovery.notifications().is_some() && !self.available_now {
            // The first queue round long-polls: a stop must not wait for it.
            tokio::select! {
                found = self.timed_discover() => found?,
                _ = stop_asked(&mut shutdown) => return Ok(RunEnd::Stopped),
            }
        } else {
            self.timed_discover().await?
        };
        // Every commit carries this state's identity (checked before recording a batch the
        // table already holds).
        self.committer
            .set_owner(&crate::protocol::recovery::state_id(self.state.as_ref())?);
        if !self.ensure_schema(&candidates).await? && self.available_now {
            return Ok(RunEnd::Drained);
        }
        if self.schema.is_some()
            && let Recovered::Replay(plan) = recover(
                &self.spec.name,
                self.state.as_ref(),
                self.committer.as_ref(),
                &self.events,
            )
            .await?
        {
            self.run_batch(plan).await?;
        }
        self.events.running(self.state.clone());
        let mut last_listing = Instant::now();
        // Whether the last round planned a batch: files may still be pending. (A round that
        // plans nothing has drained the pending queue.)
        let mut backlog = true;
        let events = self.events.clone();
        loop {
            if *shutdown.borrow() {
                return Ok(RunEnd::Stopped);
            }
            let round = Instant::now();
            // While a backlog is pending, list at most once per poll interval: each LIST of a
            // large prefix costs time and money, and the backlog is already known.
            let asked = self.events.take_backfill();
            let queue = self.discovery.notifications().is_some();
            if asked {
                // A backfill is a full listing, whatever incremental_listing says (a
                // notification stream lists on its next round).
                self.discovery.request_full_listing();
            }
            let more = self.source_more.load(std::sync::atomic::Ordering::Relaxed);
            if !self.available_now
                && (asked || !backlog || more || last_listing.elapsed() >= self.spec.poll_interval)
            {
                if queue {
                    // On a queue the receive may long-poll, and a stop must not wait for it.
                    // Dropping the receive loses nothing: its messages come back after their
                    // visibility timeout (admission and deletion happen after it).
                    tokio::select! {
                        found = self.timed_discover() => candidates = found?,
                        _ = stop_asked(&mut shutdown) => return Ok(RunEnd::Stopped),
                    }
                } else {
                    candidates = self.timed_discover().await?;
                }
                last_listing = Instant::now();
            }
            self.expire()?;
            if !self.ensure_schema(&candidates).await? {
                if wait(&mut shutdown, self.spec.poll_interval, &events).await {
                    return Ok(RunEnd::Stopped);
                }
                continue;
            }
            let version = self.schema.as_ref().map_or(1, |s| s.version);
            let planning = Instant::now();
            let planned = self
                .state
                .plan_batch(self.spec.limits, version, Utc::now())?;
            self.plan_took = planning.elapsed();
            match planned {
                Some(plan) => {
                    backlog = true;
                    self.events.batch_planned(&plan);
                    failpoint::hit("after_plan");
                    // A batch that met new columns is read again on the grown schema: same
                    // plan, same batch id, a new attempt.
                    while let BatchEnd::Evolve { new, file } = self.run_batch(plan.clone()).await? {
                        self.evolve_schema(plan.batch_id, &new, &file).await?;
                    }
                }
                None if self.available_now => return Ok(RunEnd::Drained),
                None => {
                    if backlog {
                        self.events.idle();
                    }
                    backlog = false;
                    // A queue's receive waits by itself (long polling); a file-events stream
                    // wakes when its location's consumer finishes a round.
                    let pause = if self.discovery.notifications().is_some() {
                        Duration::ZERO
                    } else {
                        self.spec.poll_interval
                    };
                    let stop = match self.discovery.file_events() {
                        Some(f) => {
                            let location = f.location().clone();
                            tokio::select! {
                                stop = wait(&mut shutdown, pause, &events) => stop,
                                _ = location.next_round() => false,
                            }
                        }
                        None => wait(&mut shutdown, pause, &events).await,
                    };
                    if stop {
                        return Ok(RunEnd::Stopped);
                    }
                    continue;
                }
            }
            if let Trigger::ProcessingTime(every) = self.spec.trigger
                && !self.available_now
                && let Some(rest) = every.checked_sub(round.elapsed())
                && wait(&mut shutdown, rest, &events).await
            {
                return Ok(RunEnd::Stopped);
            }
        }
    }

    /// An object path as the user wrote the source.
    fn shown(&self, path: &str) -> String {
        landfall_discovery::display_path(&self.spec.source.url, path)
    }

    /// Admit the version of `path` that is there now, after its listed version turned out to
    /// have changed: it is ingested in a later batch, even by a run that lists only once
    /// (`available_now`). A file gone meanwhile, or empty, is left to discovery.
    async fn readmit(&self, path: &str) -> SeamResult<()> {
        let Ok(object) = object_store::path::Path::parse(path) else {
            return Ok(());
        };
        let now = match self.store().head(&object).await {
            Ok(m) => m,
            Err(object_store::Error::NotFound { .. }) => return Ok(()),
            Err(e) => {
                return Err(SeamError::retryable(format!(
                    "stream `{}`: {}: {e}",
                    self.spec.name,
                    self.shown(path)
                )));
            }
        };
        if now.size == 0 {
            return Ok(());
        }
        let meta = landfall_discovery::file_meta(now);
        let key = meta.key(self.spec.allow_overwrites);
        self.state.admit(&[(key, meta)], None, Utc::now())?;
        Ok(())
    }

    /// Whether a file that could not be read may be skipped under the stream's options.
    fn may_skip(&self, reason: &SkipReason) -> bool {
        match reason.kind {
            SkipKind::Missing => self.spec.ignore_missing_files,
            SkipKind::Corrupt => self.spec.ignore_corrupt_files,
            // What was listed no longer exists: nothing to ingest under this identity.
            SkipKind::ChangedAfterListing | SkipKind::Manual => true,
            // A limit of the format: reading it cannot succeed.
            SkipKind::TooLarge => true,
            // Nothing to read; a version with content is a new file.
            SkipKind::Empty => true,
        }
    }

    /// The stop message for a file that may not be skipped: what happened and the two ways on.
    fn unreadable_error(&self, batch_id: u64, path: &str, reason: &SkipReason) -> SeamError {
        let option = match reason.kind {
            SkipKind::Missing => "ignore_missing_files",
            _ => "ignore_corrupt_files",
        };
        SeamError::fatal(format!(
            "stream `{s}`: batch {batch_id}: {path}: {reason}. The stream stopped; to go on without this file, run `landfall skip {s} {path}` (or set {option} = true to skip such files), then start it again",
            s = self.spec.name,
            path = self.shown(path),
        ))
    }

    /// Store the grown schema and prepare the table for it (the next commit adds the columns).
    async fn evolve_schema(
        &mut self,
        batch_id: u64,
        new: &NewColumns,
        file: &str,
    ) -> SeamResult<()> {
        let current = self
            .schema
            .as_ref()
            .expect("schema resolved before planning");
        let Some(next) = schema::evolve(self.state.as_ref(), current, new, file)? else {
            return Err(SeamError::fatal(format!(
                "stream `{}`: batch {batch_id}: new columns {} cannot be added to the schema",
                self.spec.name,
                new.paths().join(", ")
            )));
        };
        self.events.schema_evolved(
            batch_id,
            next.version,
            &new.paths(),
            file,
            &landfall_core::ddl::schema_to_ddl(&next.table),
        );
        self.committer
            .evolve(next.table.clone(), &self.spec.sink.partition_by)
            .await?;
        self.schema = Some(next);
        Ok(())
    }

    /// Write the batch's malformed records to `bad_records_path` as JSON lines, one file per
    /// batch (`<path>/<stream>/batch_id=<id>.json`). A failed write fails the attempt.
    async fn write_bad_records(
        &self,
        batch_id: u64,
        records: &[landfall_core::MalformedRecord],
        over: u64,
        attempt: u32,
    ) -> SeamResult<()> {
        let Some((location, options)) = &self.spec.bad_records else {
            return Ok(());
        };
        // Only a later attempt can find a file of an earlier one to take back.
        if records.is_empty() && attempt <= 1 {
            return Ok(());
        }
        let failed = |e: String| {
            SeamError::retryable(format!(
                "stream `{}`: batch {batch_id}: writing bad records to {}: {e}",
                self.spec.name, location.url
            ))
        };
        let (store, prefix) =
            landfall_discovery::open_store(&location.url, options.iter()).map_err(failed)?;
        let mut body = Vec::new();
        let mut over = over;
        for r in records {
            if body.len() >= MAX_BAD_RECORDS_BYTES {
                over += 1;
                continue;
            }
            let line = serde_json::json!({
                "stream": self.spec.name,
                "batch_id": batch_id,
                "path": r.path,
                "line": r.line,
                "offset": r.offset,
                "reason": r.reason,
                "record": r.record,
            });
            serde_json::to_writer(&mut body, &line).expect("JSON serialises");
            body.push(b'\n');
        }
        let path = prefix
            .clone()
            .join(self.spec.name.as_str())
            .join(format!("batch_id={batch_id}.json").as_str());
        if records.is_empty() {
            // An earlier attempt of this batch may have written one (with a file skipped
            // since): the batch has none now.
            return match store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(failed(e.to_string())),
            };
        }
        store
            .put(&path, body.into())
            .await
            .map_err(|e| failed(e.to_string()))?;
        if over > 0 {
            tracing::warn!(stream = %self.spec.name, batch_id, written = records.len(), not_written = over, "more malformed records than one batch's bad-records file keeps");
        }
        tracing::info!(stream = %self.spec.name, batch_id, records = records.len(), file = %path, "bad records written");
        Ok(())
    }

    /// The stop message of `fail_on_new_columns`.
    fn new_columns_error(&self, batch_id: u64, file: &str, new: &NewColumns) -> SeamError {
        SeamError::fatal(format!(
            "stream `{s}`: batch {batch_id}: {file} has columns the schema lacks: {cols} (schema_evolution_mode = \"fail_on_new_columns\"). The stream stopped; set schema_evolution_mode = \"add_new_columns\" (the table gains them) or \"rescue\" (they go to the rescued-data column), or run `landfall skip {s} {file}`, then start it again",
            s = self.spec.name,
            cols = new.paths().join(", "),
        ))
    }

    /// Remove the data files this attempt wrote (nothing was committed); the ledger lists
    /// them, so recovery would remove them too.
    async fn discard_attempt(&self, batch_id: u64, earlier_staged: &[String]) -> SeamResult<()> {
        let mine = self
            .state
            .batch(batch_id)?
            .map(|p| p.staged)
            .unwrap_or_default();
        let fresh: Vec<String> = mine
            .into_iter()
            .filter(|p| !earlier_staged.contains(p))
            .collect();
        if let Err(cleanup) = self.committer.remove_files(&fresh).await {
            tracing::warn!(stream = %self.spec.name, batch_id, error = %cleanup.message, "could not remove the failed attempt's data files yet");
        }
        Ok(())
    }

    /// Steps 3 to 5 for one recorded plan. Files skipped earlier (by an earlier attempt, or by
    /// hand) are not read: the batch commits without them. A batch that met new columns
    /// under `add_new_columns` reads on without writing (to learn every new column of the
    /// batch), discards the attempt and asks for the schema to grow ([`BatchEnd::Evolve`]).
    async fn run_batch(&self, plan: BatchPlan) -> SeamResult<BatchEnd> {
        let started = Instant::now();
        let plan = self.state.start_attempt(plan.batch_id)?;
        let earlier_staged = plan.staged.clone();
        let state = self.state.clone();
        let batch_id = plan.batch_id;
        let mut to_read: Vec<(FileKey, FileMeta)> = Vec::with_capacity(plan.files.len());
        let mut timings = BatchTimings::default();
        for (key, meta) in &plan.files {
            // Only files still held by this batch: not skipped, and not re-admitted since (a
            // path whose listed version changed is discovered again under the same key; that
            // new record belongs to a later batch, and this plan's version of it is gone).
            let record = self.state.file(key)?;
            let held = record
                .as_ref()
                .is_some_and(|r| r.state == FileState::InBatch && r.batch_id == Some(batch_id));
            if let Some(r) = record.filter(|_| held) {
                timings.discovered.push(r.discovery_time);
                let (first, last) = &mut timings.offsets;
                *first = Some(first.map_or(r.seq, |f: u64| f.min(r.seq)));
                *last = Some(last.map_or(r.seq, |l: u64| l.max(r.seq)));
                to_read.push((key.clone(), meta.clone()));
            }
        }
        let hook: StagedHook = Arc::new(move |path: &str| state.record_staged(batch_id, path));
        let mut writer = self.committer.writer(batch_id, plan.attempts, hook).await?;
        let mut rows = 0u64;
        // New columns met under add_new_columns, and the first file holding them.
        let mut evolution: Option<(NewColumns, String)> = None;
        let mut decoded_files: Vec<(String, u64, u64, u64)> = Vec::new();
        let mut bad_records: Vec<landfall_core::MalformedRecord> = Vec::new();
        let mut bad_records_over = 0u64;
        let mut bad_bytes = 0usize;
        // Time the writer spent writing; the rest of the read loop is waiting for rows.
        let mut writing = Duration::ZERO;
        let reading = Instant::now();
        let written: SeamResult<Vec<_>> = async {
            // Fetching and decoding run in their own task, ahead of the writer: decoding one
            // file overlaps encoding the previous one, and object-store latency overlaps both.
            let job = DecodeJob {
                format: schema::file_format(self.spec.format),
                options: DecodeOptions {
                    csv: schema::csv_format(&self.spec),
                    text: schema::text_format(&self.spec),
                    json_multi_line: self.spec.json.multi_line,
                    json_leniency: schema::json_leniency(&self.spec),
                    json_temporal: schema::temporal_formats(
                        &self.spec.json.timestamp_format,
                        &self.spec.json.date_format,
                    ),
                    xml: schema::xml_format(&self.spec),
                    mode: if self.spec.fail_fast {
                        landfall_formats::ParseMode::FailFast
                    } else if self.spec.drop_malformed {
                        landfall_formats::ParseMode::DropMalformed
                    } else {
                        landfall_formats::ParseMode::Permissive
                    },
                    collect_malformed: self.spec.bad_records.is_some(),
                    policy: schema::policy(
                        &self.spec,
                        self.schema.as_ref().expect("schema resolved before planning"),
                    ),
                    ..Default::default()
                },
                max_file_size: (self.spec.format == landfall_config::Format::BinaryFile)
                    .then_some(self.spec.binary_max_size),
                schema: self
                    .schema
                    .clone()
                    .expect("schema resolved before planning"),
                partition_by: self.spec.sink.partition_by.clone(),
                partition_style: match self.spec.sink.format {
                    landfall_config::SinkFormat::Delta => crate::partition::Style::Delta,
                    landfall_config::SinkFormat::Parquet => crate::partition::Style::Hive,
                },
                prefix: self.discovery.prefix().clone(),
                source: self.spec.source.url.clone(),
            };
            let expected = to_read.len();
            let sizes: std::collections::HashMap<String, u64> =
                to_read.iter().map(|(_, m)| (m.path.clone(), m.size)).collect();
            let mut decoded = pipeline::spawn(job, self.store().clone(), to_read);
            let mut files_done = 0usize;
            while let Some(item) = decoded.recv().await {
                match item? {
                    Decoded::Malformed(records) => {
                        for r in records {
                            let size = r.path.len()
                                + r.reason.len()
                                + r.record.as_ref().map_or(0, String::len);
                            if bad_records.len() < MAX_BAD_RECORDS
                                && bad_bytes + size <= MAX_BAD_RECORDS_BYTES
                            {
                                bad_bytes += size;
                                bad_records.push(r);
                            } else {
                                bad_records_over += 1;
                            }
                        }
                    }
                    // Rows decoded on a schema about to grow are read again after it did.
                    Decoded::Rows(..) if evolution.is_some() => {}
                    Decoded::Rows(values, part) => {
                        let t = Instant::now();
                        writer.write(&values, part).await?;
                        writing += t.elapsed();
                    }
                    Decoded::FileDone { path, rows: n, malformed, rescued, new_columns } => {
                        let shown = self.shown(&path);
                        // Reported once the batch is known not to be read again.
                        decoded_files.push((shown.clone(), n, malformed, rescued));
                        let found = NewColumns::from_fields(&new_columns);
                        let current = self.schema.as_ref().expect("schema resolved");
                        if !found.is_empty() && schema::grown_schema(current, &found).is_some() {
                            match self.spec.evolution {
                                EvolutionMode::FailOnNewColumns => {
                                    return Err(self.new_columns_error(batch_id, &shown, &found));
                                }
                                m if m.adds_columns() => {
                                    let (all, _) = evolution.get_or_insert_with(|| {
                                        (NewColumns::default(), shown.clone())
                                    });
                                    all.absorb(&found);
                                }
                                _ => {}
                            }
                        }
                        timings.files += 1;
                        timings.bytes += sizes.get(&path).copied().unwrap_or(0);
                        rows += n;
                        files_done += 1;
                    }
                    Decoded::FileUnreadable { key, path, reason, partial } => {
                        if !self.may_skip(&reason) {
                            return Err(self.unreadable_error(batch_id, &path, &reason));
                        }
                        // Durable before the commit: every later attempt of this batch, and
                        // recovery, leave the file out too.
                        self.state.skip_file(&key, reason.clone(), Utc::now())?;
                        self.events.file_skipped(batch_id, &self.shown(&path), &reason);
                        if reason.kind == SkipKind::ChangedAfterListing {
                            self.readmit(&path).await?;
                        }
                        if partial {
                            return Err(SeamError::retryable(format!(
                                "stream `{}`: batch {batch_id}: {} was skipped after part of it was read; the batch runs again without it",
                                self.spec.name,
                                self.shown(&path)
                            )));
                        }
                        files_done += 1;
                    }
                }
            }
            // The channel also closes if the read task died (a panic): never commit a batch
            // that did not read every one of its files.
            if files_done != expected {
                return Err(SeamError::retryable(format!(
                    "stream `{}`: batch {batch_id}: the read side stopped after {files_done} of {expected} files",
                    self.spec.name,
                )));
            }
            let t = Instant::now();
            let staged = writer.finish().await;
            writing += t.elapsed();
            staged
        }
        .await;
        let read_loop = reading.elapsed();
        // Per-file counts, once the attempt is known not to be read again.
        if !(written.is_ok() && evolution.is_some()) {
            for (shown, n, malformed, rescued) in &decoded_files {
                self.events
                    .file_decoded(batch_id, shown, *n, *malformed, *rescued);
            }
        }
        let staged = match written {
            Ok(_) if evolution.is_some() => {
                self.discard_attempt(batch_id, &earlier_staged).await?;
                let (new, file) = evolution.expect("checked");
                return Ok(BatchEnd::Evolve { new, file });
            }
            Ok(s) => s,
            Err(e) => {
                self.events.batch_failed(batch_id, &e);
                // Nothing was committed: this attempt's files can go now (recovery would
                // remove them too, from the ledger's list). The batch's own error is what the
                // user must see.
                self.discard_attempt(batch_id, &earlier_staged).await?;
                return Err(e);
            }
        };
        // Written (again, whole, under the same name) by every attempt before it commits.
        self.write_bad_records(batch_id, &bad_records, bad_records_over, plan.attempts)
            .await?;
        failpoint::hit("after_stage");
        self.state.commit_started(batch_id, plan.attempts)?;
        failpoint::hit("before_commit");
        let committing = Instant::now();
        let committed = match self.committer.commit(batch_id, &staged).await {
            Ok(c) => c,
            Err(e) => {
                // The outcome may be unknown (the commit may have landed): keep the files;
                // recovery decides from the table.
                self.events.batch_failed(batch_id, &e);
                return Err(e);
            }
        };
        let commit_took = committing.elapsed();
        failpoint::hit("after_commit");
        if committed.landed_before {
            // An earlier attempt's commit landed after all: its data files are the live ones,
            // this attempt's are orphans. Settled as recovery settles a landed batch.
            crate::protocol::settle::settle_landed(
                &self.spec.name,
                self.state.as_ref(),
                self.committer.as_ref(),
                &self.events,
                batch_id,
                Some(committed.version),
            )
            .await?;
            return Ok(BatchEnd::Committed);
        }
        let receipt = CommitReceipt {
            table_version: committed.version,
            rows,
            data_files: staged.len() as u64,
            data_bytes: staged.iter().map(|f| f.size).sum(),
            committed_at: Utc::now(),
            recovered: false,
        };
        // Earlier attempts' files go before the batch is recorded: once recorded, no recovery
        // looks at this batch again, and a stop in between would leave them for good.
        let keep: Vec<&String> = staged.iter().map(|f| &f.path).collect();
        let orphans: Vec<String> = earlier_staged
            .into_iter()
            .filter(|p| !keep.contains(&p))
            .collect();
        if !orphans.is_empty() {
            let n = self.committer.remove_files(&orphans).await?;
            self.events.orphans_removed(batch_id, n);
        }
        self.state.record_committed(batch_id, receipt.clone())?;
        failpoint::hit("after_record");
        self.state.prune_batch(batch_id, KEEP_PLANS)?;
        let ms = |d: Duration| d.as_millis() as u64;
        // The listing before this batch is credited to it once; later batches of the same
        // backlog did not list.
        let discover = std::mem::take(
            &mut *self
                .discover_credit
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        timings.durations = PhaseDurations {
            discover: ms(discover),
            plan: ms(self.plan_took),
            read: ms(read_loop.saturating_sub(writing)),
            write: ms(writing),
            commit: ms(commit_took),
            total: ms(started.elapsed() + discover + self.plan_took),
        };
        self.events.batch_committed(
            &plan,
            &receipt,
            &timings,
            self.state.counts().ok().as_ref(),
            &self.committer.location(),
        );
        Ok(BatchEnd::Committed)
    }
}

/// At most this many malformed records go to one batch's bad-records file (the rest are
/// counted, and logged as such).
const MAX_BAD_RECORDS: usize = 100_000;
/// ...and at most about this many bytes.
const MAX_BAD_RECORDS_BYTES: usize = 256 << 20;

/// How one attempt of a batch ended.
enum BatchEnd {
    Committed,
    /// The batch met columns the schema lacks (`add_new_columns`): grow it and read again.
    Evolve {
        new: NewColumns,
        file: String,
    },
}

/// Sleep for `d` unless shutdown comes first. True when shutting down.
/// Wait `d`, or less when shutdown (returns true) or a backfill is asked for (returns false).
/// Run ledger work (RocksDB reads of a page, a synced write) without holding up the other
/// streams' tasks: on the daemon's multi-threaded runtime the worker thread is handed over
/// for the call (`block_in_place`); elsewhere (tests on a current-thread runtime) it runs
/// as is.
fn off_async<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Resolves once a stop is asked (never, if the sender is gone).
async fn stop_asked(shutdown: &mut watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        if shutdown.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

async fn wait(shutdown: &mut watch::Receiver<bool>, d: Duration, events: &StreamEvents) -> bool {
    if *shutdown.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = events.backfill_requested() => false,
        r = shutdown.changed() => r.is_err() || *shutdown.borrow(),
    }
}
