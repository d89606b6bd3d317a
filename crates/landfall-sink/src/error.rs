//! Sink errors; each names the table and, where it applies, the batch or file.

use landfall_core::SeamError;

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("table {location}: {reason}")]
    Location { location: String, reason: String },
    #[error("table {location}: cannot open: {source}")]
    Open {
        location: String,
        source: deltalake::DeltaTableError,
    },
    #[error("table {location}: the stream schema does not fit the table: {reason}")]
    Incompatible { location: String, reason: String },
    #[error("table {location}: writing {path} for batch {batch_id}: {reason}")]
    Write {
        location: String,
        batch_id: u64,
        path: String,
        reason: String,
    },
    #[error("table {location}: commit of batch {batch_id} failed: {reason}")]
    Commit {
        location: String,
        batch_id: u64,
        reason: String,
    },
    #[error("table {location}: {op}: {reason}")]
    Io {
        location: String,
        op: &'static str,
        reason: String,
    },
    #[error("{0}")]
    Hook(SeamError),
}

impl From<SinkError> for SeamError {
    fn from(e: SinkError) -> Self {
        match e {
            SinkError::Hook(inner) => inner,
            SinkError::Incompatible { .. } | SinkError::Location { .. } => {
                SeamError::fatal(e.to_string())
            }
            other => SeamError::retryable(other.to_string()),
        }
    }
}
