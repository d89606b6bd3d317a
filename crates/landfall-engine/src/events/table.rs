//! Events of table maintenance while a stream runs: compaction checks, compactions committed,
//! dropped and failed.

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
