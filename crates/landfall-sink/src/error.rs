//! Sink errors; each names the table and, where it applies, the batch or file.
//!
//! Crossing the seam ([`SeamError`]) they are split into fatal and retryable: a table the stream
//! cannot write (incompatible schema, a protocol feature we do not honour, a bad location) never
//! gets better by retrying; a store or network error, or a commit that lost a race, does.

use deltalake::DeltaTableError;
use deltalake::kernel::transaction::TransactionError;
use landfall_core::SeamError;

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("table {location}: {reason}")]
    Location { location: String, reason: String },
    #[error("table {location}: cannot open: {source}")]
    Open {
        location: String,
        source: DeltaTableError,
    },
    #[error("table {location}: the stream schema does not fit the table: {reason}")]
    Incompatible { location: String, reason: String },
    /// The table's protocol needs something of writers that landfall does not do.
    #[error("table {location}: landfall cannot append to it: it uses `{feature}`: {reason}")]
    Unsupported {
        location: String,
        feature: String,
        reason: String,
    },
    #[error("table {location}: writing {path} for batch {batch_id}: {reason}")]
    Write {
        location: String,
        batch_id: u64,
        path: String,
        reason: String,
    },
    /// A data file that can never be written as asked (a partition directory name past the
    /// file system's limit, a path the store cannot address): retrying cannot help.
    #[error("table {location}: batch {batch_id} cannot be written: {path}: {reason}")]
    Unwritable {
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
    /// A Delta commit that failed; retryable or not depending on why (see [`delta_retryable`]).
    #[error("table {location}: commit of batch {batch_id} failed: {source}")]
    DeltaCommit {
        location: String,
        batch_id: u64,
        source: Box<DeltaTableError>,
    },
    /// Any other Delta operation (create, read the log).
    #[error("table {location}: {op}: {source}")]
    Delta {
        location: String,
        op: String,
        source: Box<DeltaTableError>,
    },
    /// A log entry that is not what the protocol says it is.
    #[error("table {location}: log entry {version} is unreadable: {reason}")]
    Log {
        location: String,
        version: i64,
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

/// Whether an object-store error can go away by itself (network, throttling, a credential being
/// rotated) rather than being a configuration mistake.
fn object_store_retryable(e: &object_store::Error) -> bool {
    !matches!(
        e,
        object_store::Error::InvalidPath { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::NotImplemented { .. }
            | object_store::Error::UnknownConfigurationKey { .. }
    )
}

/// Whether a deltalake error can go away by retrying: store and network errors and lost commit
/// races can; a table the library refuses to write, or a location it cannot use, cannot.
pub fn delta_retryable(e: &DeltaTableError) -> bool {
    match e {
        DeltaTableError::ObjectStore { source } => object_store_retryable(source),
        DeltaTableError::Transaction { source } => match source {
            TransactionError::UnsupportedTableFeatures(_)
            | TransactionError::TableFeaturesRequired(_)
            | TransactionError::DeltaTableAppendOnly
            | TransactionError::SerializeLogJson { .. } => false,
            TransactionError::ObjectStore { source } => object_store_retryable(source),
            // CommitConflict (ConcurrentTransaction, MetadataChanged, ...), MaxCommitAttempts,
            // VersionAlreadyExists, LogStoreError: the next attempt refreshes and decides again.
            _ => true,
        },
        // The kernel's error type is not re-exported; its messages are stable enough to tell
        // a table it cannot read (fatal) from a store failure underneath (retryable).
        DeltaTableError::KernelError(k) => {
            let m = k.to_string();
            ![
                "Unsupported:",
                "Invalid protocol action",
                "Invalid column mapping mode",
                "Invalid table location",
                "Schema error",
            ]
            .iter()
            .any(|p| m.starts_with(p))
        }
        DeltaTableError::InvalidTableLocation(_)
        | DeltaTableError::MissingFeature { .. }
        | DeltaTableError::UnsupportedColumnMapping { .. }
        | DeltaTableError::SerializeLogJson { .. } => false,
        _ => true,
    }
}

impl From<SinkError> for SeamError {
    fn from(e: SinkError) -> Self {
        match e {
            SinkError::Hook(inner) => inner,
            SinkError::Incompatible { .. }
            | SinkError::Location { .. }
            | SinkError::Unsupported { .. }
            | SinkError::Unwritable { .. }
            | SinkError::Log { .. } => SeamError::fatal(e.to_string()),
            SinkError::Open { ref source, .. } => classify(delta_retryable(source), &e),
            SinkError::DeltaCommit { ref source, .. } | SinkError::Delta { ref source, .. } => {
                classify(delta_retryable(source), &e)
            }
            other => SeamError::retryable(other.to_string()),
        }
    }
}

fn classify(retryable: bool, e: &SinkError) -> SeamError {
    if retryable {
        SeamError::retryable(e.to_string())
    } else {
        SeamError::fatal(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::kernel::transaction::CommitConflictError;

    fn seam(source: DeltaTableError) -> SeamError {
        SinkError::DeltaCommit {
            location: "file:///t".into(),
            batch_id: 7,
            source: Box::new(source),
        }
        .into()
    }

    #[test]
    fn table_problems_are_fatal_store_problems_retryable() {
        let loc = || "file:///t".to_string();
        for e in [
            SinkError::Incompatible {
                location: loc(),
                reason: "x".into(),
            },
            SinkError::Unsupported {
                location: loc(),
                feature: "columnMapping".into(),
                reason: "x".into(),
            },
            SinkError::Location {
                location: loc(),
                reason: "x".into(),
            },
        ] {
            assert!(!SeamError::from(e).retryable);
        }
        let conflict = seam(DeltaTableError::Transaction {
            source: TransactionError::CommitConflict(CommitConflictError::ConcurrentTransaction),
        });
        assert!(conflict.retryable, "{conflict}");
        assert!(conflict.message.contains("batch 7"));
        let store = seam(DeltaTableError::ObjectStore {
            source: object_store::Error::Generic {
                store: "S3",
                source: "connection reset".into(),
            },
        });
        assert!(store.retryable);
        let features = seam(DeltaTableError::Transaction {
            source: TransactionError::UnsupportedTableFeatures(vec![]),
        });
        assert!(!features.retryable);
        let location = seam(DeltaTableError::InvalidTableLocation("nope://".into()));
        assert!(!location.retryable);
        assert!(seam(DeltaTableError::VersionAlreadyExists(3)).retryable);
    }
}
