//! Every observable event of a stream is one method here that writes the log line, moves the
//! Prometheus metrics ([`crate::metrics`]) and updates what the API shows
//! ([`crate::progress`]) together, so the logs, the metrics, the API and the run summary never
//! disagree. The stream's lifecycle is here; [`discovery`] holds the events of discovery
//! rounds, [`batch`] those of batches and schemas.

use crate::metrics::{self, ErrorLabel, Metrics, PhaseLabel, ReasonLabel};
use crate::progress::{BatchProgress, PhaseDurations, RunState, StreamView};
use chrono::{DateTime, Utc};
use landfall_core::{BatchPlan, CommitReceipt, SkipReason, StreamSummary};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

/// Counters of one stream in this process: its series of the process's metric families (and
/// two per-stream totals over reasons), readable for the run summary.
#[derive(Debug)]
pub struct StreamCounters {
    pub files_discovered: Counter,
    pub files_filtered: Counter,
    pub batches_committed: Counter,
    pub batches_recovered: Counter,
    pub batches_failed: Counter,
    pub rows_committed: Counter,
    pub files_committed: Counter,
    pub bytes_committed: Counter,
    pub orphan_files_removed: Counter,
    pub restarts: Counter,
    /// Files not ingested on purpose (missing, corrupt, changed after listing, by hand).
    pub files_skipped: Counter,
    /// Rows kept with null values where their values did not fit the schema.
    pub rows_malformed: Counter,
    pub rows_rescued: Counter,
    /// Listed objects passed over without tracking (zero-byte objects), per listing round.
    pub objects_passed_over: Counter,
}

impl StreamCounters {
    fn new(m: &Metrics, stream: &str) -> Self {
        let l = metrics::stream(stream);
        StreamCounters {
            files_discovered: m.files_discovered.get_or_create(&l).clone(),
            files_filtered: m.files_filtered.get_or_create(&l).clone(),
            batches_committed: m.batches_committed.get_or_create(&l).clone(),
            batches_recovered: m.batches_recovered.get_or_create(&l).clone(),
            batches_failed: m.batches_failed.get_or_create(&l).clone(),
            rows_committed: m.rows_committed.get_or_create(&l).clone(),
            files_committed: m.files_committed.get_or_create(&l).clone(),
            bytes_committed: m.bytes_committed.get_or_create(&l).clone(),
            orphan_files_removed: m.orphan_files_removed.get_or_create(&l).clone(),
            restarts: m.stream_restarts.get_or_create(&l).clone(),
            files_skipped: Counter::default(),
            // Present (at 0) from the start, so dashboards and alerts see the series.
            rows_rescued: m.rows_rescued.get_or_create(&l).clone(),
            rows_malformed: m.rows_malformed.get_or_create(&l).clone(),
            objects_passed_over: Counter::default(),
        }
    }

    pub fn get(c: &Counter) -> u64 {
        c.get()
    }
}

fn add(c: &Counter, n: u64) {
    c.inc_by(n);
}

fn set(g: &Gauge, v: i64) {
    g.set(v);
}

/// The event emitter of one stream.
pub struct StreamEvents {
    pub stream: String,
    pub counters: StreamCounters,
    metrics: Arc<Metrics>,
    view: Mutex<StreamView>,
    source: RwLock<String>,
    /// An operator asked for a listing now (admin `backfill`).
    backfill: tokio::sync::Notify,
    backfill_requested: std::sync::atomic::AtomicBool,
    /// The stream's LIST requests counted when its last listing round ended: the next round's
    /// requests are the count's growth (only listing sends LIST).
    lists_seen: std::sync::atomic::AtomicU64,
    /// The open state of the running worker, for the API's file listing.
    state: RwLock<Option<Arc<dyn landfall_core::StateStore>>>,
    /// The last approximate queue depth (notification mode), for progress records.
    queue_depth: Mutex<Option<u64>>,
    /// Requests by operation in this process (the metric's values, kept for the state).
    requests: Arc<Mutex<std::collections::BTreeMap<&'static str, u64>>>,
    /// The last hour, sampled for the charts.
    timeline: Mutex<crate::timeline::Timeline>,
    /// The files this process skipped last, newest last.
    skipped: Mutex<std::collections::VecDeque<recent::SkippedFile>>,
}

impl std::fmt::Debug for StreamEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamEvents")
            .field("stream", &self.stream)
            .finish()
    }
}

/// What a committed batch took, and where its files came from.
#[derive(Debug, Clone, Default)]
pub struct BatchTimings {
    pub durations: PhaseDurations,
    /// When each committed file was discovered.
    pub discovered: Vec<DateTime<Utc>>,
    /// Files read into the batch (skipped ones left out) and their input bytes.
    pub files: u64,
    pub bytes: u64,
    /// Discovery sequence numbers of the batch's first and last file.
    pub offsets: (Option<u64>, Option<u64>),
}

mod archive;
mod batch;
mod discovery;
mod recent;
mod table;

pub use archive::ArchiveOutcome;
pub use batch::PROGRESS_TARGET;
pub use recent::{RECENT_SKIPS, SkippedFile};

impl StreamEvents {
    pub fn new(stream: &str, metrics: Arc<Metrics>) -> Self {
        let counters = StreamCounters::new(&metrics, stream);
        // The metrics may hold totals of this stream already: the first step starts from them.
        let timeline = crate::timeline::Timeline::new(recent::totals(&counters));
        StreamEvents {
            stream: stream.to_string(),
            counters,
            metrics,
            view: Mutex::new(StreamView::new(stream)),
            source: RwLock::new(String::new()),
            backfill: tokio::sync::Notify::new(),
            backfill_requested: std::sync::atomic::AtomicBool::new(false),
            lists_seen: std::sync::atomic::AtomicU64::new(0),
            state: RwLock::new(None),
            queue_depth: Mutex::new(None),
            requests: Arc::default(),
            timeline: Mutex::new(timeline),
            skipped: Mutex::default(),
        }
    }

    pub(super) fn label(&self) -> metrics::StreamLabel {
        metrics::stream(&self.stream)
    }

    pub(super) fn view(&self) -> MutexGuard<'_, StreamView> {
        self.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Files outstanding at the last count of the ledger.
    pub fn files_outstanding(&self) -> u64 {
        self.metrics
            .files_outstanding
            .get_or_create(&self.label())
            .get()
            .max(0) as u64
    }

    /// A copy of what the API shows of the stream, with its progress history.
    pub fn snapshot(&self) -> StreamView {
        self.view().clone()
    }

    /// The running worker's state store, if a worker runs.
    pub fn state_store(&self) -> Option<Arc<dyn landfall_core::StateStore>> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(super) fn error(&self, stage: &str, kind: &str) {
        self.metrics
            .errors
            .get_or_create(&ErrorLabel {
                stream: self.stream.clone(),
                stage: stage.into(),
                kind: kind.into(),
            })
            .inc();
    }

    pub(super) fn up(&self, up: bool) {
        set(
            &self.metrics.stream_up.get_or_create(&self.label()),
            up as i64,
        );
    }

    /// A worker is opening the stream: a new run (progress records carry its id).
    pub fn starting(&self) {
        let mut v = self.view();
        v.run_id = uuid::Uuid::new_v4().to_string();
        v.set(RunState::Starting);
    }

    pub(super) fn not_behind(&self) {
        self.view().set_behind(false);
        set(&self.metrics.falling_behind.get_or_create(&self.label()), 0);
    }

    /// The worker opened its state, source and table, recovered, and listed once: it runs.
    pub fn running(&self, state: Arc<dyn landfall_core::StateStore>) {
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Some(state);
        self.up(true);
        let mut v = self.view();
        v.set(RunState::Running);
        tracing::info!(stream = %self.stream, run_id = %v.run_id, "stream started");
    }

    /// The worker ended (its state is closed).
    pub fn worker_ended(&self) {
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = None;
        self.up(false);
    }

    /// The stream ended for good: drained, or shut down (errors are reported by their own
    /// events).
    pub fn terminated(&self, drained: bool) {
        self.up(false);
        self.not_behind();
        let mut v = self.view();
        if matches!(v.state, RunState::Running | RunState::Starting) {
            v.set(if drained {
                RunState::Drained
            } else {
                RunState::Shutdown
            });
        }
        tracing::info!(stream = %self.stream, run_id = %v.run_id, state = ?v.state, "stream terminated");
    }

    /// Ask the worker for a full listing now (it wakes from its poll wait).
    pub fn request_backfill(&self) {
        self.backfill_requested
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes a worker waiting now; one busy with a batch sees the flag at its next round
        // (no stored permit that would cut a later wait short).
        self.backfill.notify_waiters();
    }

    /// Whether a listing was asked for since the last call.
    pub fn take_backfill(&self) -> bool {
        self.backfill_requested
            .swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves when a listing is asked for.
    pub async fn backfill_requested(&self) {
        self.backfill.notified().await
    }

    /// The process's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// An operator acted on the stream through the admin API.
    pub fn operator_action(&self, action: &str, outcome: &Result<String, String>) {
        match outcome {
            Ok(m) => tracing::warn!(stream = %self.stream, action, outcome = %m, "operator action"),
            Err(e) => {
                tracing::warn!(stream = %self.stream, action, refused = %e, "operator action refused")
            }
        }
    }

    /// The stream committed everything it knows of and waits for new files (logged once per
    /// backlog drained, like Spark's QueryIdleEvent).
    pub fn idle(&self) {
        let v = self.view();
        tracing::info!(stream = %self.stream, run_id = %v.run_id, "stream idle: no file pending");
    }

    /// Stopped by an operator: stays stopped until restarted.
    pub fn paused(&self) {
        self.up(false);
        self.view().set(RunState::Paused);
    }

    /// The ledger's counts after a round: backlog and tracked files.
    pub fn ledger(&self, s: &StreamSummary) {
        let l = self.label();
        let m = &self.metrics;
        set(
            &m.files_outstanding.get_or_create(&l),
            s.pending_files as i64,
        );
        set(
            &m.bytes_outstanding.get_or_create(&l),
            s.pending_bytes as i64,
        );
        let tracked: u64 = s.files_by_state.iter().map(|(_, n)| n).sum();
        set(&m.tracked_files.get_or_create(&l), tracked as i64);
    }

    pub(super) fn source_description(&self) -> String {
        self.source
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What the progress records name as the stream's source.
    pub fn set_source(&self, description: &str) {
        *self.source.write().unwrap_or_else(|e| e.into_inner()) = description.to_string();
    }

    pub fn stream_stopped(&self, error: &str) {
        self.error("worker", "fatal");
        self.up(false);
        self.not_behind();
        self.view().set(RunState::Stopped {
            error: error.to_string(),
        });
        tracing::error!(stream = %self.stream, error, "stream stopped: this error does not heal by retrying");
    }

    pub fn panicked(&self, message: &str) {
        self.error("worker", "panic");
        tracing::error!(stream = %self.stream, panic = message, "stream worker panicked");
    }

    pub fn table_checked(&self, table_batch: Option<u64>, ledger_batch: Option<u64>) {
        tracing::debug!(stream = %self.stream, table_batch, ledger_batch, "table and state agree");
    }

    pub fn restarting(&self, error: &str, backoff: Duration) {
        add(&self.counters.restarts, 1);
        self.error("worker", "retryable");
        self.up(false);
        self.not_behind();
        let mut v = self.view();
        v.restarts += 1;
        v.set(RunState::Restarting {
            error: error.to_string(),
            retry_in_ms: backoff.as_millis() as u64,
        });
        drop(v);
        tracing::error!(stream = %self.stream, error, backoff_ms = backoff.as_millis() as u64, "stream failed; restarting");
    }
}
