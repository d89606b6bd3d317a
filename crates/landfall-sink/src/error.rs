//! Sink errors; each names the table and, where it applies, the batch or file.
//!
//! Crossing the seam ([`SeamError`]) they are split into fatal and retryable: a table the stream
//! cannot write (incompatible schema, a protocol feature we do not honour, a bad location) never
//! gets better by retrying; a store or network error, or a commit that lost a race, does.

use delta_kernel::KernelError;
use landfall_core::SeamError;

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("table {location}: {reason}")]
    Location { location: String, reason: String },
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
    /// A Delta operation (open, create, commit, checkpoint) that failed; retryable or not
    /// depending on why (see [`kernel_retryable`]).
    #[error("table {location}: {op}: {source}")]
    Kernel {
        location: String,
        op: String,
        source: Box<KernelError>,
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

/// Whether a kernel error can go away by retrying: store and network errors and lost commit
/// races can; a table the kernel refuses to write, or a location it cannot use, cannot.
pub fn kernel_retryable(e: &KernelError) -> bool {
    match e.without_backtrace() {
        KernelError::ObjectStore(source) => object_store_retryable(source),
        KernelError::Unsupported(_)
        | KernelError::InvalidProtocol(_)
        | KernelError::InvalidColumnMappingMode(_)
        | KernelError::InvalidTableLocation(_)
        | KernelError::InvalidUrl(_)
        | KernelError::Schema(_)
        | KernelError::StatsValidation(_)
        | KernelError::InvalidPartitionValues(_)
        | KernelError::InvalidTransactionState(_)
        | KernelError::MissingData(_)
        | KernelError::MalformedJson(_)
        | KernelError::ChecksumWriteUnsupported(_) => false,
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
            SinkError::Kernel { ref source, .. } => classify(kernel_retryable(source), &e),
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

    fn seam(source: KernelError) -> SeamError {
        SinkError::Kernel {
            location: "file:///t".into(),
            op: "commit of batch 7".into(),
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
        let store = seam(KernelError::ObjectStore(object_store::Error::Generic {
            store: "S3",
            source: "connection reset".into(),
        }));
        assert!(store.retryable);
        assert!(store.message.contains("batch 7"), "{store}");
        let features = seam(KernelError::Unsupported("rowTracking".into()));
        assert!(!features.retryable);
        let location = seam(KernelError::InvalidTableLocation("nope://".into()));
        assert!(!location.retryable);
        assert!(seam(KernelError::Generic("file listing failed".into())).retryable);
        let bad_path = seam(KernelError::ObjectStore(object_store::Error::InvalidPath {
            source: object_store::path::Error::EmptySegment {
                path: "a//b".into(),
            },
        }));
        assert!(!bad_path.retryable);
    }
}
