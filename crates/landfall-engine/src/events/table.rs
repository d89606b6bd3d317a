//! Events of table maintenance while a stream runs: compaction checks, compactions committed,
//! dropped and failed; vacuums.

use super::*;

impl StreamEvents {
    /// A compaction check ended with `c` (which may have compacted nothing).
    pub fn compaction(&self, c: &landfall_core::Compaction, took: Duration) {
        let label = self.label();
        set(
            &self.metrics.table_small_files.get_or_create(&label),
            c.small_files as i64,
        );
        let outcome = match (c.version, c.dropped) {
            (Some(_), _) => "committed",
            (None, true) => "dropped",
            (None, false) => return,
        };
        self.metrics
            .compactions
            .get_or_create(&ReasonLabel {
                stream: self.stream.clone(),
                reason: outcome.into(),
            })
            .inc();
        if let Some(version) = c.version {
            add(
                &self.metrics.compaction_files_removed.get_or_create(&label),
                c.files_removed,
            );
            add(
                &self
                    .metrics
                    .compaction_bytes_rewritten
                    .get_or_create(&label),
                c.bytes_rewritten,
            );
            set(
                &self.metrics.last_compaction.get_or_create(&label),
                Utc::now().timestamp(),
            );
            tracing::info!(stream = %self.stream, version, files_removed = c.files_removed, files_added = c.files_added, bytes = c.bytes_rewritten, rows = c.rows, took = ?took, "table compacted");
        } else {
            tracing::info!(stream = %self.stream, small_files = c.small_files, "compaction dropped: a file it replaced was removed meanwhile; tried again later");
        }
    }

    /// A compaction failed; the next check tries again.
    pub fn compaction_failed(&self, error: &str) {
        self.metrics
            .compactions
            .get_or_create(&ReasonLabel {
                stream: self.stream.clone(),
                reason: "failed".into(),
            })
            .inc();
        tracing::warn!(stream = %self.stream, error = %error, "compaction failed; the next check tries again (ingestion goes on)");
    }
}

impl StreamEvents {
    /// A vacuum deleted `files` files of `bytes` bytes.
    pub fn vacuumed(&self, files: u64, bytes: u64, took: Duration) {
        let label = self.label();
        add(&self.metrics.files_vacuumed.get_or_create(&label), files);
        add(&self.metrics.bytes_vacuumed.get_or_create(&label), bytes);
        tracing::info!(stream = %self.stream, files, bytes, took = ?took, "table vacuumed");
    }

    /// A vacuum failed; the next interval tries again.
    pub fn vacuum_failed(&self, error: &str) {
        add(
            &self.metrics.vacuum_failures.get_or_create(&self.label()),
            1,
        );
        tracing::warn!(stream = %self.stream, error = %error, "vacuum failed; the next interval tries again (ingestion goes on)");
    }
}
