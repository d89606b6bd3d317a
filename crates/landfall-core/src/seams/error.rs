//! The error every seam returns, and its kinds.

use serde::{Deserialize, Serialize};

/// An error crossing a seam. `retryable` tells the supervisor whether a restart can help
/// (a network error) or not (a corrupt file under FAILFAST, an incompatible table); `kind`
/// names the refusals that matter most, so callers and tests match them by kind, not text.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SeamError {
    pub message: String,
    pub retryable: bool,
    pub kind: ErrorKind,
}

/// What kind of failure crossed a seam.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// Retrying may heal it (a network error, throttling, a lock held by a dying process).
    Transient,
    /// Retrying cannot heal it, and no kind below says more.
    Fatal,
    /// The table holds a batch of the stream that this state never planned: the state is
    /// older than the table (a restored backup, a second instance, a reused stream name).
    TableAhead,
    /// The table lacks a batch this state recorded as committed (the table was replaced or
    /// restored, or the sink points elsewhere).
    TableBehind,
    /// A new, empty state facing a table that already holds the stream's batches: the state
    /// was lost, or its volume did not mount.
    StateLost,
    /// The table holds the batch, committed by another state (another instance's commit).
    ForeignCommit,
    /// The state directory cannot be used as it is (damaged, or from a newer landfall).
    StateUnusable,
}

impl SeamError {
    pub fn retryable(message: impl Into<String>) -> Self {
        SeamError::of(ErrorKind::Transient, message)
    }
    pub fn fatal(message: impl Into<String>) -> Self {
        SeamError::of(ErrorKind::Fatal, message)
    }
    /// An error of `kind`: retryable only when [`ErrorKind::Transient`].
    pub fn of(kind: ErrorKind, message: impl Into<String>) -> Self {
        SeamError {
            message: message.into(),
            retryable: kind == ErrorKind::Transient,
            kind,
        }
    }
}

pub type SeamResult<T> = Result<T, SeamError>;
