//! Events of batches (planned, files decoded or skipped, committed, failed, recovered) and
//! of the stream's schema.

use super::*;

/// The log target of each batch's full progress record (`landfall_engine::progress`, so a
/// filter such as `landfall_engine=info` keeps it): in the JSON log format, left out of the
/// human one.
pub const PROGRESS_TARGET: &str = "landfall_engine::progress";

impl StreamEvents {
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
        self.remember_skip(batch_id, path, reason);
        tracing::warn!(stream = %self.stream, batch_id, path, reason = %reason, "file skipped; the rest of the batch goes on");
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
        self.timeline_batch(&d);
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
            files = timings.files,
            rows = receipt.rows,
            took_ms = d.total,
            table_version = receipt.table_version,
            "batch committed"
        );
        // The whole progress record, for log shippers: the JSON log format carries it, the
        // human one leaves it out (the API and the health table have it too).
        tracing::info!(
            target: PROGRESS_TARGET,
            stream = %self.stream,
            batch_id = plan.batch_id,
            attempt = plan.attempts,
            input_bytes = timings.bytes,
            data_files = receipt.data_files,
            rows_per_second = (receipt.rows as f64 / total_s) as u64,
            progress = %json,
            "batch progress"
        );
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

    /// Values in `file` need wider columns and the table cannot widen them (`why`): they
    /// stay rescued, and the stream stops asking until it restarts.
    pub fn widening_refused(&self, batch_id: u64, file: &str, why: &str) {
        tracing::warn!(stream = %self.stream, batch_id, file, reason = why, "values do not fit their columns and the table cannot widen them; they stay in the rescued-data column");
    }

    /// The schema gained columns met in `file`, or widened columns whose values did not fit
    /// (`changes`: `new columns: a`, `widened: n INT -> BIGINT`); the batch is read again on it.
    pub fn schema_evolved(
        &self,
        batch_id: u64,
        version: u32,
        changes: &[String],
        file: &str,
        ddl: &str,
    ) {
        set(
            &self.metrics.schema_version.get_or_create(&self.label()),
            version as i64,
        );
        tracing::warn!(stream = %self.stream, batch_id, schema_version = version, changes = %changes.join("; "), file, schema = ddl, "schema evolved; the batch is read again on the new schema");
    }
}
