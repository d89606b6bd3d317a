//! Building the parts of streams and locations from their validated specs: the state store,
//! the source listing, a queue (set up when landfall owns it), and the committer. A stream's
//! discovery is assembled from these in `stream/parts.rs`, a location's consumer in
//! `locations.rs`.

use crate::notify_setup::{Notes, QueueOwner};
use landfall_config::{QueueSpec, SinkFormat, StoreOptions, StreamSpec};
use landfall_core::seams::SeamResult;
use landfall_core::{Committer, SeamError, StateStore};
use landfall_discovery::{
    AzureQueue, CountRequests, CountingStore, EntryGuard, Filters, ListingDiscovery, MessageQueue,
    OwedListing, RawLister, SqsQueue, StoreRef,
};
use object_store::ObjectStore;
use std::sync::Arc;

/// Open the stream's RocksDB ledger, on the blocking pool: an open can take long (the
/// recovery of its log, the one-time move of an older ledger's queues into their column
/// families), and the runtime's threads keep serving the other streams, the health endpoint
/// and the watchdog meanwhile.
pub async fn open_state(spec: &StreamSpec) -> SeamResult<Arc<dyn StateStore>> {
    let (name, dir) = (spec.name.clone(), spec.state_dir.clone());
    let ledger = tokio::task::spawn_blocking(move || landfall_state::open_rocks(&name, &dir))
        .await
        .map_err(|e| {
            SeamError::retryable(format!(
                "opening the state of stream `{}` failed: {e}",
                spec.name
            ))
        })??;
    Ok(Arc::new(ledger))
}

/// The owner's queue (set up first when landfall owns it and has not created it yet), the
/// bucket or container its events must be about, and the guard of the bucket entry landfall
/// created (none for a given `queue_url` or an Azure queue).
pub async fn open_queue(
    owner: &QueueOwner<'_>,
    notes: &(impl Notes + ?Sized),
    count: CountRequests,
    metrics: Arc<crate::metrics::Metrics>,
    owed: OwedListing,
) -> SeamResult<(Arc<dyn MessageQueue>, StoreRef, Option<EntryGuard>)> {
    // The storage account events name (Azure), when the store options give it.
    let mut account = None;
    let mut guard = None;
    let queue: Arc<dyn MessageQueue> = match &owner.queue.queue {
        QueueSpec::Sqs { url, .. } => {
            let url = match url {
                Some(u) => u.clone(),
                None => {
                    let (url, g) =
                        crate::notify_setup::ensure_queue(owner, notes, metrics, owed).await?;
                    guard = g;
                    url
                }
            };
            let aws = crate::notify_setup::aws_settings(owner);
            Arc::new(SqsQueue::with_request_timeout(
                &aws.sdk_config().await,
                &url,
                count,
                owner.queue.request_timeout,
            ))
        }
        QueueSpec::AzureQueue { name: queue } => {
            let settings = crate::notify_setup::azure_settings(owner, queue)?;
            account = Some(settings.account.clone());
            Arc::new(
                AzureQueue::new(settings, count).with_request_timeout(owner.queue.request_timeout),
            )
        }
    };
    let source = store_ref(owner.url, account).ok_or_else(|| {
        SeamError::fatal(format!(
            "{}: events need an S3 or Azure location, not {}",
            owner.what,
            landfall_discovery::shown_url(owner.url)
        ))
    })?;
    Ok((queue, source, guard))
}

/// The bucket or container a source URL names, as storage events name it (`account`: the
/// Azure storage account of the store's options).
fn store_ref(url: &url::Url, account: Option<String>) -> Option<StoreRef> {
    let host = url.host_str()?.to_string();
    match url.scheme() {
        "s3" | "s3a" => Some(StoreRef::S3 { bucket: host }),
        "gs" => Some(StoreRef::Gcs { bucket: host }),
        // container@account.dfs.core.windows.net
        "abfs" | "abfss" if !url.username().is_empty() => Some(StoreRef::Azure {
            account: account.unwrap_or_else(|| host.split('.').next().unwrap_or("").to_string()),
            container: url.username().to_string(),
        }),
        // az://container/prefix
        "az" | "azure" | "abfs" | "abfss" | "adl" => Some(StoreRef::Azure {
            account: account?,
            container: host,
        }),
        _ => None,
    }
}

/// Listing discovery over `url`: with a stream's filters and `incremental_listing` when
/// `spec` is given, plain and full otherwise (a location's listing).
pub(crate) fn open_listing(
    name: &str,
    url: &url::Url,
    options: &StoreOptions,
    spec: Option<&StreamSpec>,
    count: CountRequests,
) -> SeamResult<ListingDiscovery> {
    let (store, prefix) =
        landfall_discovery::open_counted_store(url, options.iter(), count.clone())
            .map_err(|e| SeamError::fatal(format!("{name}: {e}")))?;
    let store: Arc<dyn ObjectStore> = Arc::new(CountingStore::new(store, count.clone()));
    let raw = RawLister::for_url(url, options.iter())
        .map_err(|e| SeamError::fatal(format!("{name}: {e}")))?
        .map(|l| l.with_counter(count));
    let Some(spec) = spec else {
        // A location's listing: every file, hidden paths included (the streams under it decide
        // what is hidden to them).
        let everything = Filters {
            keep_hidden: true,
            ..Filters::default()
        };
        return Ok(ListingDiscovery::new(name, store, prefix, everything).with_raw_lister(raw));
    };
    let filters = Filters {
        glob: spec.glob.as_ref().map(|(_, m)| m.clone()),
        modified_after: spec.modified_after,
        modified_before: spec.modified_before,
        max_file_age: spec.max_file_age,
        keep_hidden: false,
    };
    Ok(ListingDiscovery::new(&spec.name, store, prefix, filters)
        .with_store_offset(url.scheme() == "file")
        .with_raw_lister(raw)
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
        SinkFormat::Delta => Arc::new(
            landfall_sink::DeltaCommitter::new(
                &spec.name,
                &uri,
                options,
                spec.sink.target_file_size,
            )
            .with_type_widening(spec.evolution.widens_types()),
        ),
        SinkFormat::Parquet => Arc::new(landfall_sink::ParquetDirCommitter::new(
            &spec.name,
            &uri,
            options,
            spec.sink.target_file_size,
        )?),
    })
}
