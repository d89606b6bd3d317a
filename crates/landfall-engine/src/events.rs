//! Every observable event of a stream is one method here that writes the log line and moves
//! the counters together, so the logs, the run summary and (later) the metrics never disagree.

use landfall_core::{BatchPlan, CommitReceipt, SkipReason};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters of one stream in this process.
#[derive(Debug, Default)]
pub struct StreamCounters {
    pub files_discovered: AtomicU64,
    pub files_filtered: AtomicU64,
    pub batches_committed: AtomicU64,
    pub batches_recovered: AtomicU64,
    pub batches_failed: AtomicU64,
    pub rows_committed: AtomicU64,
    pub files_committed: AtomicU64,
    pub bytes_committed: AtomicU64,
    pub orphan_files_removed: AtomicU64,
    pub restarts: AtomicU64,
    /// Files not ingested on purpose (missing, corrupt, changed after listing, by hand).
    pub files_skipped: AtomicU64,
    /// Rows kept with null values where their values did not fit the schema.
    pub rows_malformed: AtomicU64,
    /// Listed objects passed over without tracking (zero-byte objects), per listing round.
    pub objects_passed_over: AtomicU64,
}

impl StreamCounters {
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// The event emitter of one stream.
#[derive(Debug)]
pub struct StreamEvents {
    pub stream: String,
    pub counters: StreamCounters,
}

impl StreamEvents {
    pub fn new(stream: &str) -> Self {
        StreamEvents {
            stream: stream.to_string(),
            counters: StreamCounters::default(),
        }
    }

    pub fn discovered(&self, listed: usize, admitted: u64, filtered: u64, took: Duration) {
        add(&self.counters.files_discovered, admitted);
        add(&self.counters.files_filtered, filtered);
        if admitted > 0 {
            tracing::info!(stream = %self.stream, listed, admitted, filtered, took_ms = took.as_millis() as u64, "files discovered");
        } else {
            tracing::debug!(stream = %self.stream, listed, filtered, took_ms = took.as_millis() as u64, "no new files");
        }
    }

    pub fn batch_planned(&self, plan: &BatchPlan) {
        tracing::debug!(stream = %self.stream, batch_id = plan.batch_id, files = plan.files.len(), bytes = plan.total_bytes(), "batch planned");
    }

    pub fn file_decoded(&self, batch_id: u64, path: &str, rows: u64, malformed: u64) {
        add(&self.counters.rows_malformed, malformed);
        if malformed > 0 {
            tracing::warn!(stream = %self.stream, batch_id, path, rows, malformed, "file decoded; some rows did not fit the schema (their misfit values are null)");
        } else {
            tracing::debug!(stream = %self.stream, batch_id, path, rows, "file decoded");
        }
    }

    pub fn file_skipped(&self, batch_id: u64, path: &str, reason: &SkipReason) {
        add(&self.counters.files_skipped, 1);
        tracing::warn!(stream = %self.stream, batch_id, path, reason = %reason, "file skipped; the rest of the batch goes on");
    }

    pub fn passed_over(&self, reason: &str, path: &str) {
        add(&self.counters.objects_passed_over, 1);
        tracing::debug!(stream = %self.stream, path, reason, "object passed over");
    }

    pub fn batch_committed(&self, plan: &BatchPlan, receipt: &CommitReceipt, took: Duration) {
        add(&self.counters.batches_committed, 1);
        add(&self.counters.rows_committed, receipt.rows);
        add(&self.counters.files_committed, plan.files.len() as u64);
        add(&self.counters.bytes_committed, plan.total_bytes());
        let secs = took.as_secs_f64().max(1e-6);
        tracing::info!(
            stream = %self.stream,
            batch_id = plan.batch_id,
            attempt = plan.attempts,
            files = plan.files.len(),
            input_bytes = plan.total_bytes(),
            rows = receipt.rows,
            data_files = receipt.data_files,
            table_version = receipt.table_version,
            took_ms = took.as_millis() as u64,
            rows_per_second = (receipt.rows as f64 / secs) as u64,
            "batch committed"
        );
    }

    pub fn batch_failed(&self, batch_id: u64, error: &str) {
        add(&self.counters.batches_failed, 1);
        tracing::error!(stream = %self.stream, batch_id, error, "batch failed");
    }

    pub fn batch_recovered(&self, batch_id: u64, table_version: Option<i64>) {
        add(&self.counters.batches_recovered, 1);
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
        tracing::info!(stream = %self.stream, schema_version = version, inferred, schema = ddl, "stream schema");
    }

    pub fn stream_stopped(&self, error: &str) {
        tracing::error!(stream = %self.stream, error, "stream stopped: this error does not heal by retrying");
    }

    pub fn panicked(&self, message: &str) {
        tracing::error!(stream = %self.stream, panic = message, "stream worker panicked");
    }

    pub fn table_checked(&self, table_batch: Option<u64>, ledger_batch: Option<u64>) {
        tracing::debug!(stream = %self.stream, table_batch, ledger_batch, "table and state agree");
    }

    pub fn restarting(&self, error: &str, backoff: Duration) {
        add(&self.counters.restarts, 1);
        tracing::error!(stream = %self.stream, error, backoff_ms = backoff.as_millis() as u64, "stream failed; restarting");
    }
}
