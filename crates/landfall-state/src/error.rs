//! Errors of the state store. Each variant names the stream or the key it concerns.

use landfall_core::SeamError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state directory {dir}: {source}")]
    Open {
        dir: PathBuf,
        source: rocksdb::Error,
    },
    #[error(
        "state directory {dir} is locked by another landfall process (two processes or two streams share it?)"
    )]
    Locked { dir: PathBuf },
    #[error("state store of stream `{stream}`: {op} failed: {reason}")]
    Backend {
        stream: String,
        op: &'static str,
        reason: String,
    },
    #[error("state store of stream `{stream}`: record `{key}` is unreadable: {reason}")]
    Corrupt {
        stream: String,
        key: String,
        reason: String,
    },
    #[error(
        "stream `{stream}`: batch {batch_id} is still open; it must be committed or recovered before planning another"
    )]
    BatchOpen { stream: String, batch_id: u64 },
    #[error("stream `{stream}`: batch {batch_id} is not in the state store")]
    UnknownBatch { stream: String, batch_id: u64 },
}

impl From<StateError> for SeamError {
    fn from(e: StateError) -> Self {
        // A broken ledger does not heal by restarting; a lock held by a dying process does.
        let retryable = matches!(e, StateError::Locked { .. } | StateError::Backend { .. });
        SeamError {
            message: e.to_string(),
            retryable,
        }
    }
}
