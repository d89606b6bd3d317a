//! Every observable event of a stream is one method here that writes the log line, moves the
//! Prometheus metrics ([`crate::metrics`]) and updates what the API shows
//! ([`crate::progress`]) together, so the logs, the metrics, the API and the run summary never
//! disagree.

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

impl StreamEvents {
    pub fn new(stream: &str, metrics: Arc<Metrics>) -> Self {
        StreamEvents {
            stream: stream.to_string(),
            counters: StreamCounters::new(&metrics, stream),
            metrics,
            view: Mutex::new(StreamView::new(stream)),
            source: RwLock::new(String::new()),
            backfill: tokio::sync::Notify::new(),
            backfill_requested: std::sync::atomic::AtomicBool::new(false),
            lists_seen: std::sync::atomic::AtomicU64::new(0),
            state: RwLock::new(None),
            queue_depth: Mutex::new(None),
            requests: Arc::default(),
        }
    }

    fn label(&self) -> metrics::StreamLabel {
        metrics::stream(&self.stream)
    }

    fn view(&self) -> MutexGuard<'_, StreamView> {
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

    fn error(&self, stage: &str, kind: &str) {
        self.metrics
            .errors
            .get_or_create(&ErrorLabel {
                stream: self.stream.clone(),
                stage: stage.into(),
                kind: kind.into(),
            })
            .inc();
    }

    fn up(&self, up: bool) {
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

    fn not_behind(&self) {
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

    /// A listing round ended with the ledger at `s`: the gauges, and the falling-behind check
    /// (the backlog grew at several listings in a row).
    pub fn listing_done(&self, s: &StreamSummary) {
        self.ledger(s);
        let (behind, changed) = self.view().listed(s.pending_files);
        set(
            &self.metrics.falling_behind.get_or_create(&self.label()),
            behind as i64,
        );
        if changed && behind {
            tracing::warn!(stream = %self.stream, listings = crate::progress::FALLING_BEHIND_AFTER, backlog = s.pending_files, "stream is falling behind: its backlog grew at several listings in a row");
        } else if changed {
            tracing::info!(stream = %self.stream, backlog = s.pending_files, "stream caught up");
        }
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

    /// A counter of the stream's storage requests by operation
    /// (`landfall_storage_requests_total{op}`).
    pub fn request_counter(&self) -> landfall_discovery::CountRequests {
        let (metrics, stream) = (self.metrics.clone(), self.stream.clone());
        let totals = self.requests.clone();
        Arc::new(move |op: &'static str, n: u64| {
            metrics
                .storage_requests
                .get_or_create(&metrics::OpLabel {
                    stream: stream.clone(),
                    op: op.to_string(),
                })
                .inc_by(n);
            *totals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(op)
                .or_default() += n;
        })
    }

    /// Storage and queue requests of this stream in this process, by operation.
    pub fn request_counts(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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

    /// A listing round ended: `listed` objects, `admitted` of them new, `filtered` left out;
    /// `incremental`: it listed only the keys after the cursor. The log line carries the LIST
    /// requests the round sent (from `landfall_storage_requests_total{op="LIST"}`).
    pub fn discovered(
        &self,
        listed: usize,
        admitted: u64,
        filtered: u64,
        incremental: bool,
        took: Duration,
    ) {
        add(&self.counters.files_discovered, admitted);
        add(&self.counters.files_filtered, filtered);
        let listing = if incremental { "incremental" } else { "full" };
        self.metrics
            .listings
            .get_or_create(&metrics::ListingLabel {
                stream: self.stream.clone(),
                kind: listing.to_string(),
            })
            .inc();
        let lists = self
            .metrics
            .storage_requests
            .get_or_create(&metrics::OpLabel {
                stream: self.stream.clone(),
                op: "LIST".to_string(),
            })
            .get();
        let list_requests = lists.saturating_sub(
            self.lists_seen
                .swap(lists, std::sync::atomic::Ordering::Relaxed),
        );
        if admitted > 0 {
            tracing::info!(stream = %self.stream, listing = %listing, list_requests, listed, admitted, filtered, took_ms = took.as_millis() as u64, "files discovered");
        } else {
            tracing::debug!(stream = %self.stream, listing = %listing, list_requests, listed, filtered, took_ms = took.as_millis() as u64, "no new files");
        }
    }

    pub fn batch_planned(&self, plan: &BatchPlan) {
        tracing::debug!(stream = %self.stream, batch_id = plan.batch_id, files = plan.files.len(), bytes = plan.total_bytes(), "batch planned");
    }

    pub fn file_decoded(&self, batch_id: u64, path: &str, rows: u64, malformed: u64, rescued: u64) {
        add(&self.counters.rows_malformed, malformed);
        add(&self.counters.rows_rescued, rescued);
        if rescued > 0 {
            tracing::info!(stream = %self.stream, batch_id, path, rows, rescued, "file decoded; some values went to the rescued-data column");
        }
        if malformed > 0 {
            tracing::warn!(stream = %self.stream, batch_id, path, rows, malformed, "file decoded; some rows did not fit the schema (their misfit values are null)");
        } else {
            tracing::debug!(stream = %self.stream, batch_id, path, rows, "file decoded");
        }
    }

    pub fn file_skipped(&self, batch_id: u64, path: &str, reason: &SkipReason) {
        add(&self.counters.files_skipped, 1);
        self.metrics
            .files_skipped
            .get_or_create(&ReasonLabel {
                stream: self.stream.clone(),
                reason: reason.kind.as_str().into(),
            })
            .inc();
        tracing::warn!(stream = %self.stream, batch_id, path, reason = %reason, "file skipped; the rest of the batch goes on");
    }

    /// What a round of notification messages held: malformed messages are logged one by one
    /// with their id (they stay in the queue), the rest counted.
    pub fn queue_round(&self, round: &landfall_core::QueueRound) {
        let count = |family: &crate::metrics::Counters<ReasonLabel>, reason: &str, n: u64| {
            if n > 0 {
                family
                    .get_or_create(&ReasonLabel {
                        stream: self.stream.clone(),
                        reason: reason.into(),
                    })
                    .inc_by(n);
            }
        };
        let malformed = round.malformed.len() as u64;
        let m = &self.metrics.queue_messages;
        count(m, "malformed", malformed);
        count(m, "ignored", round.ignored_messages);
        count(m, "kept", round.extension_failures);
        count(
            m,
            "files",
            round
                .received
                .saturating_sub(malformed + round.ignored_messages),
        );
        count(&self.metrics.queue_events, "removed", round.removed_events);
        count(&self.metrics.queue_events, "other", round.other_events);
        count(
            &self.metrics.queue_events,
            "directory_listed",
            round.directories_listed,
        );
        for bad in &round.malformed {
            tracing::warn!(stream = %self.stream, message_id = %bad.id, receive_count = bad.receive_count, error = %bad.error, "queue message not understood; left in the queue (its redrive policy moves it aside after the max receive count)");
        }
        if round.received > 0 {
            tracing::debug!(stream = %self.stream, received = round.received, ignored = round.ignored_messages, removed_events = round.removed_events, other_events = round.other_events, "queue messages received");
        }
    }

    pub fn queue_depth(&self, depth: u64) {
        *self.queue_depth.lock().unwrap_or_else(|e| e.into_inner()) = Some(depth);
        self.metrics
            .queue_approximate_size
            .get_or_create(&crate::metrics::stream(&self.stream))
            .set(depth as i64);
    }

    pub fn passed_over(&self, reason: &str, path: &str) {
        add(&self.counters.objects_passed_over, 1);
        self.metrics
            .objects_passed_over
            .get_or_create(&ReasonLabel {
                stream: self.stream.clone(),
                reason: reason.into(),
            })
            .inc();
        tracing::debug!(stream = %self.stream, path, reason, "object passed over");
    }

    /// A batch landed: counters, phase and latency histograms, the progress record (logged as
    /// JSON, kept for the API) and the falling-behind check. `after`: the ledger's counts after
    /// the batch.
    pub fn batch_committed(
        &self,
        plan: &BatchPlan,
        receipt: &CommitReceipt,
        timings: &BatchTimings,
        after: Option<&StreamSummary>,
        sink: &str,
    ) {
        add(&self.counters.batches_committed, 1);
        add(&self.counters.rows_committed, receipt.rows);
        add(&self.counters.files_committed, timings.files);
        add(&self.counters.bytes_committed, timings.bytes);
        let m = &self.metrics;
        let d = timings.durations;
        for (phase, ms) in d.phases() {
            m.batch_duration
                .get_or_create(&PhaseLabel {
                    stream: self.stream.clone(),
                    phase: phase.into(),
                })
                .observe(ms as f64 / 1000.0);
        }
        let latency = m.commit_latency.get_or_create(&self.label());
        for t in &timings.discovered {
            let secs = (receipt.committed_at - *t).num_milliseconds().max(0) as f64 / 1000.0;
            latency.observe(secs);
        }
        set(
            &m.table_version.get_or_create(&self.label()),
            receipt.table_version,
        );
        if let Some(s) = after {
            self.ledger(s);
        }
        let total_s = (d.total as f64 / 1000.0).max(1e-3);
        let mut view = self.view();
        let since_last = view
            .last()
            .map(|p| (receipt.committed_at - p.timestamp).num_milliseconds() as f64 / 1000.0)
            .unwrap_or(total_s)
            .max(1e-3);
        let rates = after.map(|s| view.batched(s.pending_bytes, timings.bytes, since_last));
        let progress = BatchProgress {
            id: self.stream.clone(),
            run_id: view.run_id.clone(),
            name: self.stream.clone(),
            batch_id: plan.batch_id,
            timestamp: receipt.committed_at,
            num_input_rows: receipt.rows,
            num_input_files: timings.files,
            input_rows_per_second: receipt.rows as f64 / since_last,
            processed_rows_per_second: receipt.rows as f64 / total_s,
            duration_ms: d,
            source: crate::progress::SourceProgress {
                description: self.source_description(),
                start_offset: timings.offsets.0,
                end_offset: timings.offsets.1,
                files_outstanding: after.map_or(0, |s| s.pending_files),
                bytes_outstanding: after.map_or(0, |s| s.pending_bytes),
                approximate_queue_size: *self.queue_depth.lock().unwrap_or_else(|e| e.into_inner()),
                input_bytes_per_second: rates.and_then(|r| r.input_bytes_per_second),
                processed_bytes_per_second: rates.map_or(0.0, |r| r.processed_bytes_per_second),
            },
            sink: crate::progress::SinkProgress {
                description: sink.to_string(),
                table_version: receipt.table_version,
                num_output_rows: receipt.rows,
            },
        };
        let json = serde_json::to_string(&progress).unwrap_or_default();
        view.push(progress);
        drop(view);
        if let Some(r) = rates {
            set(
                &self.metrics.falling_behind.get_or_create(&self.label()),
                r.behind as i64,
            );
            if r.changed && r.behind {
                tracing::warn!(stream = %self.stream, batches = crate::progress::FALLING_BEHIND_AFTER, input_bytes_per_second = r.input_bytes_per_second.unwrap_or(0.0), processed_bytes_per_second = r.processed_bytes_per_second, "stream is falling behind: bytes arrive faster than its batches commit them");
            } else if r.changed {
                tracing::info!(stream = %self.stream, "stream caught up");
            }
        }
        tracing::info!(
            stream = %self.stream,
            batch_id = plan.batch_id,
            attempt = plan.attempts,
            files = timings.files,
            input_bytes = timings.bytes,
            rows = receipt.rows,
            data_files = receipt.data_files,
            table_version = receipt.table_version,
            took_ms = d.total,
            rows_per_second = (receipt.rows as f64 / total_s) as u64,
            progress = %json,
            "batch committed"
        );
    }

    fn source_description(&self) -> String {
        self.source
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What the progress records name as the stream's source.
    pub fn set_source(&self, description: &str) {
        *self.source.write().unwrap_or_else(|e| e.into_inner()) = description.to_string();
    }

    pub fn batch_failed(&self, batch_id: u64, error: &landfall_core::SeamError) {
        add(&self.counters.batches_failed, 1);
        self.error(
            "batch",
            if error.retryable {
                "retryable"
            } else {
                "fatal"
            },
        );
        let error = error.message.as_str();
        tracing::error!(stream = %self.stream, batch_id, error, "batch failed");
    }

    pub fn batch_recovered(&self, batch_id: u64, table_version: Option<i64>) {
        add(&self.counters.batches_recovered, 1);
        if let Some(v) = table_version {
            set(&self.metrics.table_version.get_or_create(&self.label()), v);
        }
        tracing::warn!(stream = %self.stream, batch_id, table_version, "batch found in the table after a crash; recorded as committed");
    }

    pub fn batch_replayed(&self, batch_id: u64, orphans: u64) {
        add(&self.counters.orphan_files_removed, orphans);
        tracing::warn!(stream = %self.stream, batch_id, orphans_removed = orphans, "batch did not land before the last stop; running it again with the same files");
    }

    pub fn orphans_removed(&self, batch_id: u64, n: u64) {
        add(&self.counters.orphan_files_removed, n);
        if n > 0 {
            tracing::info!(stream = %self.stream, batch_id, removed = n, "data files of failed attempts removed");
        }
    }

    pub fn files_expired(&self, n: u64) {
        if n > 0 {
            tracing::info!(stream = %self.stream, expired = n, "files past max_file_age forgotten");
        }
    }

    pub fn batch_floor_raised(&self, next: u64) {
        tracing::warn!(stream = %self.stream, next_batch_id = next, "the state is new but the table already holds batches of this stream; continuing after them (files already in the table will be ingested again)");
    }

    pub fn schema_resolved(&self, version: u32, ddl: &str, inferred: bool) {
        set(
            &self.metrics.schema_version.get_or_create(&self.label()),
            version as i64,
        );
        tracing::info!(stream = %self.stream, schema_version = version, inferred, schema = ddl, "stream schema");
    }

    /// The schema gained columns met in `file`; the batch is read again on it.
    pub fn schema_evolved(
        &self,
        batch_id: u64,
        version: u32,
        added: &[String],
        file: &str,
        ddl: &str,
    ) {
        set(
            &self.metrics.schema_version.get_or_create(&self.label()),
            version as i64,
        );
        tracing::warn!(stream = %self.stream, batch_id, schema_version = version, new_columns = %added.join(", "), file, schema = ddl, "schema evolved: new columns added; the batch is read again on the new schema");
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
