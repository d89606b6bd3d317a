//! One stream's loop: discover, plan, run, commit, record (docs/exactly-once.md).
//!
//! Each step is durable before the next starts: files are admitted to the ledger before a plan
//! takes them, the plan (exact files, batch id) is recorded before any data file is written,
//! every data file's name is recorded before it is created, and the batch is recorded as
//! committed only after the table holds it. Shutdown is honoured between batches only.
//!
//! The worker's parts: [`intake`] (discovery and admission), [`evolution`] (the schema's
//! lifecycle), [`batch`] (one attempt of a batch, from the plan to the record) and
//! [`memory`] (the facts kept in the ledger beside the files).

mod batch;
mod evolution;
mod intake;
pub mod memory;
mod parts;

pub use parts::{SourceStore, StreamParts};

use crate::events::StreamEvents;
use crate::failpoint;
use crate::pipeline::{self, DecodeJob, Decoded};
use crate::progress::PhaseDurations;
use crate::protocol::recovery::{Recovered, recover};
use crate::schema::{self, StreamSchema};
use crate::stream::memory::StreamMemory;
use batch::BatchEnd;
use chrono::Utc;
use landfall_config::{EvolutionMode, StreamSpec, Trigger};
use landfall_core::seams::{SeamResult, StagedHook};
use landfall_core::{
    BatchPlan, Committer, Discovery, FileMeta, FileState, SeamError, SkipKind, SkipReason,
    StateStore,
};
use landfall_formats::NewColumns;
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

pub struct StreamWorker {
    spec: StreamSpec,
    state: Arc<dyn StateStore>,
    memory: StreamMemory,
    discovery: Box<dyn Discovery>,
    source: SourceStore,
    committer: Arc<dyn Committer>,
    events: Arc<StreamEvents>,
    schema: Option<StreamSchema>,
    /// Why the table cannot widen columns, once it said so (`add_new_columns_with_type_widening`):
    /// decoders then note no widenings, and values that need one stay rescued.
    widening_refused: Option<String>,
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
    /// `clean_source`'s archiver, and the tasks beside the loop while a continuous run goes
    /// on (archiving, compaction).
    archiver: Option<Arc<crate::clean_source::Archiver>>,
    background: Vec<AbortOnDrop>,
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
        locations: &crate::locations::Locations,
    ) -> SeamResult<Self> {
        let state = crate::wiring::open_state(&spec).await?;
        let memory = StreamMemory::new(&spec.name, state.clone());
        let (discovery, source) = parts::open_discovery(
            &spec,
            &memory,
            events.request_counter(),
            events.metrics().clone(),
            locations,
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
                source,
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
            source,
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
            source,
            committer,
            events,
            schema: None,
            widening_refused: None,
            available_now,
            last_expiry: None,
            discover_credit: std::sync::Mutex::new(Duration::ZERO),
            plan_took: Duration::ZERO,
            queue_noted: std::sync::Mutex::new(None),
            source_more: std::sync::atomic::AtomicBool::new(false),
            requests_base,
            requests_saved: std::sync::Mutex::new(None),
            archiver: None,
            background: Vec::new(),
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
        &self.source.store
    }

    /// Run until drained (available_now) or until `shutdown` turns true. With `clean_source`
    /// on, the archiver runs beside the loop on its own task once the table and the ledger
    /// were checked and recovery ran (a drain runs one pass at its end instead).
    pub async fn run(&mut self, shutdown: watch::Receiver<bool>) -> SeamResult<RunEnd> {
        self.archiver = self.open_archiver();
        let end = self.run_loop(shutdown.clone()).await;
        let background = std::mem::take(&mut self.background);
        let end = end?;
        match end {
            RunEnd::Drained => {
                if let Some(a) = &self.archiver
                    && let Err(e) = a.pass(&shutdown).await
                {
                    tracing::warn!(stream = %self.spec.name, error = %e.message, "clean_source pass after the drain failed; the next run tries again");
                }
            }
            RunEnd::Stopped => {
                // The archiver stops between files, the compactor between compactions: let
                // them finish what is in hand.
                for mut task in background {
                    if tokio::time::timeout(Duration::from_secs(30), &mut task.0)
                        .await
                        .is_err()
                    {
                        tracing::warn!(stream = %self.spec.name, "a background task (clean_source or compaction) did not stop within 30 s; cut short (the next start finishes its work)");
                    }
                }
            }
        }
        Ok(end)
    }

    /// The stream's archiver, if `clean_source` is on; one that cannot be built is reported
    /// and left out (ingestion goes on without archiving).
    fn open_archiver(&self) -> Option<Arc<crate::clean_source::Archiver>> {
        let clean = self.spec.clean_source.as_ref()?;
        match crate::clean_source::Archiver::new(
            &self.spec.name,
            clean,
            &self.spec.source.url,
            self.spec.poll_interval,
            &self.source,
            self.state.clone(),
            self.events.clone(),
        ) {
            Ok(a) => Some(Arc::new(a)),
            Err(e) => {
                tracing::error!(stream = %self.spec.name, error = %e.message, "clean_source is off for this run: its archiver could not start");
                None
            }
        }
    }

    /// Start the tasks beside the loop of a continuous run: archiving (`clean_source`),
    /// compaction (`sink.compaction.auto`) and vacuum (`sink.vacuum.auto`).
    fn start_background(&mut self, shutdown: &watch::Receiver<bool>) {
        if self.available_now || !self.background.is_empty() {
            return;
        }
        if let Some(a) = &self.archiver {
            self.background
                .push(AbortOnDrop(tokio::spawn(a.clone().run(shutdown.clone()))));
        }
        if let Some(settings) = self.spec.sink.compaction {
            let compactor = crate::compaction::Compactor::new(
                self.committer.clone(),
                settings,
                self.events.clone(),
            );
            self.background
                .push(AbortOnDrop(tokio::spawn(compactor.run(shutdown.clone()))));
        }
        if let Some(every) = self.spec.sink.vacuum_every {
            let vacuumer = crate::vacuum::Vacuumer::new(&self.spec, every, self.events.clone());
            self.background
                .push(AbortOnDrop(tokio::spawn(vacuumer.run(shutdown.clone()))));
        }
    }

    async fn run_loop(&mut self, mut shutdown: watch::Receiver<bool>) -> SeamResult<RunEnd> {
        self.events.set_source(&landfall_discovery::display_path(
            &self.spec.source.url,
            self.source.prefix.as_ref(),
        ));
        self.prepare_discovery()?;
        // A stored or explicit schema needs no listing: resolving it first lets even the first
        // listing of this run keep only new files. (Inference needs the full first listing.)
        self.ensure_schema(&[]).await?;
        let mut candidates = if self.discovery.long_polls() && !self.available_now {
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
            .set_owner(&crate::protocol::owner::state_id(self.state.as_ref())?);
        let resolved = self.ensure_schema(&candidates).await?;
        if resolved.is_none() && self.available_now {
            return Ok(RunEnd::Drained);
        }
        if let Some(schema) = &resolved
            && let Recovered::Replay(plan) = recover(
                &self.spec.name,
                self.state.as_ref(),
                self.committer.as_ref(),
                &self.events,
            )
            .await?
        {
            self.run_batch(plan, schema).await?;
        }
        self.events.running(self.state.clone());
        self.start_background(&shutdown);
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
            let queue = self.discovery.long_polls();
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
            let Some(mut schema) = self.ensure_schema(&candidates).await? else {
                if wait(&mut shutdown, self.spec.poll_interval, &events).await {
                    return Ok(RunEnd::Stopped);
                }
                continue;
            };
            let version = schema.version;
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
                    while let BatchEnd::Evolve { new, file } =
                        self.run_batch(plan.clone(), &schema).await?
                    {
                        schema = self
                            .evolve_schema(&schema, plan.batch_id, &new, &file)
                            .await?;
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
                    let pause = if self.discovery.long_polls() {
                        Duration::ZERO
                    } else {
                        self.spec.poll_interval
                    };
                    let stop = tokio::select! {
                        stop = wait(&mut shutdown, pause, &events) => stop,
                        _ = self.discovery.wake() => false,
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
}

/// Run ledger work (RocksDB reads of a page, a synced write) without holding up the other
/// streams' tasks: on the daemon's multi-threaded runtime the worker thread is handed over
/// for the call (`block_in_place`); elsewhere (tests on a current-thread runtime) it runs
/// as is.
pub(crate) fn off_async<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// A task aborted when its handle is dropped (a worker that ends by an error).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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
