//! Decoding errors. Every variant names the file.

use landfall_core::SeamError;

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{path}: malformed {format} near byte {offset}: {reason}")]
    Malformed {
        path: String,
        format: &'static str,
        offset: u64,
        reason: String,
    },
    #[error("{path}: column `{column}`: {reason}")]
    Column {
        path: String,
        column: String,
        reason: String,
    },
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("schema inference: {reason}")]
    Inference { reason: String },
}

impl From<FormatError> for SeamError {
    fn from(e: FormatError) -> Self {
        // A corrupt file stays corrupt: restarting does not help.
        SeamError::fatal(e.to_string())
    }
}
