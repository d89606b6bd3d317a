//! The seams a worker runs on, and building the discovery a stream's spec asks for (the
//! state store and the committer are built by `crate::wiring`).

use crate::notify_setup::QueueOwner;
use crate::stream::memory::{RecordedMode, StreamMemory};
use crate::wiring::{open_listing, open_queue};
use landfall_config::{DiscoverySpec, StreamSpec};
use landfall_core::seams::SeamResult;
use landfall_core::{Committer, Discovery, DiscoveryMemory, StateStore};
use landfall_discovery::{
    CountRequests, FileEventsDiscovery, NotificationDiscovery, OwedListing, QueueOptions,
};
use object_store::ObjectStore;
use std::sync::Arc;

/// The seams a worker runs on: its ledger, its discovery, the store its files are read from
/// and its table.
pub struct StreamParts {
    pub state: Arc<dyn StateStore>,
    pub discovery: Box<dyn Discovery>,
    pub source: SourceStore,
    pub committer: Arc<dyn Committer>,
}

/// The store a stream reads its files from, and the source prefix within it (partition
/// values and messages are relative to it).
#[derive(Clone)]
pub struct SourceStore {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: object_store::path::Path,
}

/// The stream's discovery (listing over its source, notifications from its queue with
/// listings when asked, or its location's event cache) and the store its files are read
/// from. Every request to the source and the queue is counted with `count`.
pub async fn open_discovery(
    spec: &StreamSpec,
    memory: &StreamMemory,
    count: CountRequests,
    metrics: Arc<crate::metrics::Metrics>,
    locations: &crate::locations::Locations,
) -> SeamResult<(Box<dyn Discovery>, SourceStore)> {
    let listing = open_listing(
        &spec.name,
        &spec.source.url,
        &spec.source_options,
        Some(spec),
        count.clone(),
    )?;
    let read_from = SourceStore {
        store: listing.store().clone(),
        prefix: listing.prefix().clone(),
    };
    if let DiscoverySpec::FileEvents(f) = &spec.discovery {
        let location = locations.open(&f.location)?;
        let events = FileEventsDiscovery::new(&spec.name, listing, location);
        return Ok((Box::new(events), read_from));
    }
    let Some(owner) = QueueOwner::of_stream(spec) else {
        return Ok((Box::new(listing), read_from));
    };
    // A stream owes a listing by its recorded mode: anything but `notifications` lists at
    // the next start, and a full listing records the mode again (`NotificationDiscovery::round_admitted`).
    let owed = {
        let (owe, read) = (memory.clone(), memory.clone());
        OwedListing {
            owe: Arc::new(move || {
                owe.set_mode(RecordedMode::NotificationsListingOwed)
                    .map_err(|e| e.message)
            }),
            owed: Arc::new(move || {
                read.mode().ok().flatten() == Some(RecordedMode::NotificationsListingOwed)
            }),
        }
    };
    let (queue, source, guard) =
        open_queue(&owner, memory.state().as_ref(), count, metrics, owed).await?;
    let n = owner.queue;
    let notifications = NotificationDiscovery::new(
        &spec.name,
        listing,
        queue,
        source,
        QueueOptions {
            receivers: n.receivers,
            visibility: n.visibility_timeout,
            wait: n.wait_time,
            backfill_interval: spec.backfill_interval,
        },
    )
    .with_entry_guard(guard);
    Ok((Box::new(notifications), read_from))
}
