//! Events of `clean_source`: files archived (deleted or moved), found gone or overwritten,
//! and archive attempts that failed.

use super::*;

/// What archiving did with one committed file (the `landfall_files_archived` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveOutcome {
    Deleted,
    Moved,
    /// The source was already gone (deleted by someone else, or by an earlier attempt whose
    /// record was lost, e.g. a state directory restored from a backup).
    Gone,
    /// The source was replaced by another version after the commit: left in place.
    Overwritten,
}

impl ArchiveOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ArchiveOutcome::Deleted => "delete",
            ArchiveOutcome::Moved => "move",
            ArchiveOutcome::Gone => "gone",
            ArchiveOutcome::Overwritten => "overwritten",
        }
    }
}

impl StreamEvents {
    /// One committed file archived: `path` as the user wrote the source, `to` where it went.
    pub fn file_archived(&self, path: &str, outcome: ArchiveOutcome, to: Option<&str>) {
        self.metrics
            .files_archived
            .get_or_create(&ReasonLabel {
                stream: self.stream.clone(),
                reason: outcome.as_str().to_string(),
            })
            .inc();
        match outcome {
            ArchiveOutcome::Deleted => {
                tracing::debug!(stream = %self.stream, file = %path, "source file deleted (clean_source)")
            }
            ArchiveOutcome::Moved => {
                tracing::debug!(stream = %self.stream, file = %path, to = to.unwrap_or_default(), "source file moved (clean_source)")
            }
            ArchiveOutcome::Gone => {
                tracing::info!(stream = %self.stream, file = %path, to = to.unwrap_or_default(), "source file was already gone when archived; recorded archived")
            }
            ArchiveOutcome::Overwritten => {
                tracing::warn!(stream = %self.stream, file = %path, "source file was overwritten after its commit; the new version is left in place and this one recorded archived")
            }
        }
    }

    /// An archive attempt failed; it is tried again after `retry_in`.
    pub fn archive_failed(&self, path: &str, error: &str, retry_in: Duration) {
        self.metrics
            .archive_failures
            .get_or_create(&metrics::stream(&self.stream))
            .inc();
        tracing::warn!(stream = %self.stream, file = %path, error = %error, retry_in = ?retry_in, "could not archive a committed source file; ingestion goes on, the file is tried again later");
    }

    /// A pass of the archiver ended with `archived` files archived and `failed` failures.
    pub fn archive_pass(&self, archived: u64, failed: u64, took: Duration) {
        if archived + failed > 0 {
            tracing::info!(stream = %self.stream, archived, failed, took = ?took, "clean_source pass");
        }
    }

    /// Committed files of an older ledger were put in the archive index.
    pub fn archive_indexed(&self, files: u64) {
        if files > 0 {
            tracing::info!(stream = %self.stream, files, "indexed committed files for clean_source");
        }
    }
}
