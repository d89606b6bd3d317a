//! Errors of the state store. Each variant names the stream or the key it concerns.

use landfall_core::SeamError;
use landfall_core::seams::ErrorKind;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state directory {dir}: {source}")]
    Open {
        dir: PathBuf,
        source: rocksdb::Error,
    },
    #[error(
        "state directory {dir} is locked by another process{} (is landfall already running this stream, or do two streams share the directory?)",
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked { dir: PathBuf, holder: Option<u32> },
    #[error(
        "state directory {dir} is damaged: {reason}. The stream stopped: retrying cannot repair it. To recover (docs/operations.md, \"Back up and restore the state\"): restore the directory from a backup (landfall then checks it against the table and refuses to continue if the table is ahead), or move it away with `landfall reset <stream>` to start the stream over (files already in the table are ingested again unless include_existing_files = false)"
    )]
    Corrupted { dir: PathBuf, reason: String },
    #[error(
        "the event cache of location `{location}` in {dir} is damaged: {reason}. Streams reading the location stopped. To recover: stop the daemon, move {dir} aside and start again: the location's consumer builds a new cache, and each stream, finding its position in a cache that is gone, lists its prefix once and goes on (docs/file-events.md); no `landfall reset` is needed"
    )]
    CacheDamaged {
        location: String,
        dir: PathBuf,
        reason: String,
    },
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
    #[error("stream `{stream}`: no file `{key}` in the state store")]
    UnknownFile { stream: String, key: String },
    #[error(
        "stream `{stream}`: file `{key}` is {state}; only discovered, in-batch or failed files can be skipped"
    )]
    NotSkippable {
        stream: String,
        key: String,
        state: &'static str,
    },
    #[error(
        "state store of stream `{stream}` has ledger format {found}, this landfall reads format {supported}: it was written by a newer landfall; run that version, or move the state directory away to start the stream over"
    )]
    Format {
        stream: String,
        found: u64,
        supported: u64,
    },
}

impl From<StateError> for SeamError {
    fn from(e: StateError) -> Self {
        // A broken ledger does not heal by restarting; a lock held by a dying process does, and
        // so does an open that ran out of space, quota or file handles: the stream retries with
        // backoff, showing the error, and goes on when it clears. Other I/O errors at open (a
        // failing disk, a read-only file system, permissions) need an operator: they stop.
        let kind = match &e {
            StateError::Locked { .. } | StateError::Backend { .. } => ErrorKind::Transient,
            StateError::Open { source, .. } if passing(source.as_ref()) => ErrorKind::Transient,
            StateError::Open { .. }
            | StateError::CacheDamaged { .. }
            | StateError::Corrupted { .. }
            | StateError::Corrupt { .. }
            | StateError::Format { .. } => ErrorKind::StateUnusable,
            _ => ErrorKind::Fatal,
        };
        SeamError::of(kind, e.to_string())
    }
}

/// Whether an I/O error's text names a condition that clears without touching the state: no
/// space left (ENOSPC), a disk quota (EDQUOT), too many open files (EMFILE, ENFILE), no lock
/// available (ENOLCK).
fn passing(text: &str) -> bool {
    [
        "No space left on device",
        "Disk quota exceeded",
        "Too many open files",
        "No locks available",
    ]
    .iter()
    .any(|m| text.contains(m))
}
