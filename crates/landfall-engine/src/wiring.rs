//! Building a stream's parts from its validated spec: the state store, the source store and
//! discovery, and the committer.

use landfall_config::{SinkFormat, StreamSpec};
use landfall_core::seams::SeamResult;
use landfall_core::{Committer, SeamError, StateStore};
use landfall_discovery::{
    CountRequests, CountingStore, Filters, ListingDiscovery, S3Lister, open_store,
};
use object_store::ObjectStore;
use std::sync::Arc;

/// Open the stream's RocksDB ledger.
pub fn open_state(spec: &StreamSpec) -> SeamResult<Arc<dyn StateStore>> {
    Ok(Arc::new(landfall_state::open_rocks(
        &spec.name,
        &spec.state_dir,
    )?))
}

/// Listing discovery over the stream's source, full or incremental as `incremental_listing`
/// says. Every request to the source (listing and reads) is counted with `count`.
pub fn open_discovery(spec: &StreamSpec, count: CountRequests) -> SeamResult<ListingDiscovery> {
    let (store, prefix) = open_store(&spec.source.url, spec.source_options.iter())
        .map_err(|e| SeamError::fatal(format!("stream `{}`: source: {e}", spec.name)))?;
    let store: Arc<dyn ObjectStore> = Arc::new(CountingStore::new(store, count.clone()));
    let filters = Filters {
        glob: spec.glob.as_ref().map(|(_, m)| m.clone()),
        modified_after: spec.modified_after,
        modified_before: spec.modified_before,
        max_file_age: spec.max_file_age,
    };
    let s3 = S3Lister::for_url(&spec.source.url, spec.source_options.iter())
        .map_err(|e| SeamError::fatal(format!("stream `{}`: source: {e}", spec.name)))?
        .map(|l| l.with_counter(count));
    Ok(ListingDiscovery::new(&spec.name, store, prefix, filters)
        .with_s3_lister(s3)
        .with_incremental(spec.incremental_listing, spec.full_listing_interval))
}

/// The committer of the stream's sink.
pub fn open_committer(spec: &StreamSpec) -> SeamResult<Arc<dyn Committer>> {
    let uri = spec.sink.location.as_table_uri();
    let options = spec.sink.options.to_hash_map();
    if let Some(dir) = spec.sink.location.local_path() {
        std::fs::create_dir_all(&dir).map_err(|e| {
            SeamError::fatal(format!(
                "stream `{}`: cannot create {}: {e}",
                spec.name,
                dir.display()
            ))
        })?;
    }
    Ok(match spec.sink.format {
        SinkFormat::Delta => Arc::new(landfall_sink::DeltaCommitter::new(
            &spec.name,
            &uri,
            options,
            spec.sink.target_file_size,
        )),
        SinkFormat::Parquet => Arc::new(landfall_sink::ParquetDirCommitter::new(
            &spec.name,
            &uri,
            options,
            spec.sink.target_file_size,
        )?),
    })
}
