//! Committers: where a batch's rows become visible, exactly once.
//!
//! Both sinks share one data-file writer ([`writer::PartitionedWriter`]) that writes Parquet
//! straight to the object store under names carrying the batch id. The caller records each name
//! in the state store before the file is created, so the data files of an attempt that never
//! committed can always be found and removed.
//!
//! - [`DeltaCommitter`]: one Delta commit per batch holding the Add actions and
//!   `txn { appId = stream, version = batch id }`; the txn answers "did batch N land?".
//! - [`ParquetDirCommitter`]: a plain directory of Parquet files, committed by a manifest
//!   written with put-if-absent (see docs/exactly-once.md for what manifest-unaware readers see).

pub mod delta;
mod delta_log;
mod delta_protocol;
mod delta_schema;
mod error;
mod parquet_dir;
pub mod writer;

pub use delta::DeltaCommitter;
pub use delta_schema::storable_column;
pub use error::SinkError;
pub use parquet_dir::ParquetDirCommitter;

/// The readers of the Delta log that recovery relies on, for the fuzz targets
/// (`crates/landfall-fuzz`).
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::delta_log::{TxnInCommit, adds_in_commit, txn_in_commit};
}

use std::collections::HashMap;
use std::sync::Arc;

/// A table URI as it may be shown in messages and logs: without a password or query string
/// (SAS tokens); one that does not parse is cut at its query.
pub(crate) fn shown(uri: &str) -> String {
    match url::Url::parse(uri) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            u.set_query(None);
            u.as_str().trim_end_matches('/').to_string()
        }
        Err(_) => uri.split('?').next().unwrap_or_default().to_string(),
    }
}

/// The store behind `url` rooted at the bucket (file system) root, and the path of `url` in it
/// (object_store's own URL parsing and option keys, as for sources).
pub(crate) fn bucket_store(
    url: &url::Url,
    options: &HashMap<String, String>,
) -> Result<(Arc<dyn object_store::ObjectStore>, object_store::path::Path), SinkError> {
    let (store, path) =
        object_store::parse_url_opts(url, options.iter()).map_err(|e| SinkError::Location {
            location: shown(url.as_str()),
            reason: e.to_string(),
        })?;
    Ok((Arc::from(store), path))
}

/// An object store rooted at `uri` (a table location), built from `options`.
pub fn table_store(
    uri: &str,
    options: &HashMap<String, String>,
) -> Result<Arc<dyn object_store::ObjectStore>, SinkError> {
    let url = url::Url::parse(uri).map_err(|e| SinkError::Location {
        location: shown(uri),
        reason: e.to_string(),
    })?;
    let (store, path) = bucket_store(&url, options)?;
    if path.as_ref().is_empty() {
        return Ok(store);
    }
    Ok(Arc::new(object_store::prefix::PrefixStore::new(
        store, path,
    )))
}
