//! The discovery a stream runs: directory listing, queue notifications with listings when
//! asked, or a file-events location's cache. One type for the worker, whichever mode the configuration chose.

use crate::file_events::FileEventsDiscovery;
use crate::listing::ListingDiscovery;
use crate::queue_discovery::NotificationDiscovery;
use chrono::{DateTime, Utc};
use landfall_core::seams::{NewFilter, SeamResult};
use landfall_core::{AckToken, Discovery, DiscoveryBatch};
use object_store::ObjectStore;
use object_store::path::Path;
use std::sync::Arc;

// One per stream, built once: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum SourceDiscovery {
    Listing(ListingDiscovery),
    Notifications(Box<NotificationDiscovery>),
    FileEvents(Box<FileEventsDiscovery>),
}

impl SourceDiscovery {
    fn listing(&self) -> &ListingDiscovery {
        match self {
            SourceDiscovery::Listing(l) => l,
            SourceDiscovery::Notifications(n) => n.listing(),
            SourceDiscovery::FileEvents(f) => f.listing(),
        }
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        self.listing().store()
    }

    pub fn prefix(&self) -> &Path {
        self.listing().prefix()
    }

    /// Narrow the modification window (used for `include_existing_files = false`).
    pub fn set_modified_after(&mut self, t: DateTime<Utc>) {
        match self {
            SourceDiscovery::Listing(l) => l.set_modified_after(t),
            SourceDiscovery::Notifications(n) => n.listing_mut().set_modified_after(t),
            SourceDiscovery::FileEvents(f) => f.listing_mut().set_modified_after(t),
        }
    }

    /// List the whole source on the next round (an admin backfill).
    pub fn request_full_listing(&self) {
        match self {
            SourceDiscovery::Listing(l) => l.request_full_listing(),
            SourceDiscovery::Notifications(n) => {
                n.listing().request_full_listing();
                n.request_listing();
            }
            SourceDiscovery::FileEvents(f) => f.request_listing(),
        }
    }

    /// The notification side, in notification mode.
    pub fn notifications(&self) -> Option<&NotificationDiscovery> {
        match self {
            SourceDiscovery::Notifications(n) => Some(n),
            _ => None,
        }
    }

    /// The file-events side, in file-events mode.
    pub fn file_events(&self) -> Option<&FileEventsDiscovery> {
        match self {
            SourceDiscovery::FileEvents(f) => Some(f),
            _ => None,
        }
    }
}

#[async_trait::async_trait]
impl Discovery for SourceDiscovery {
    async fn discover(&self, cursor: Option<&str>) -> SeamResult<DiscoveryBatch> {
        match self {
            SourceDiscovery::Listing(l) => l.discover(cursor).await,
            SourceDiscovery::Notifications(n) => n.discover(cursor).await,
            SourceDiscovery::FileEvents(f) => f.discover(cursor).await,
        }
    }

    async fn discover_new(
        &self,
        cursor: Option<&str>,
        may_be_new: NewFilter<'_>,
    ) -> SeamResult<DiscoveryBatch> {
        match self {
            SourceDiscovery::Listing(l) => l.discover_new(cursor, may_be_new).await,
            SourceDiscovery::Notifications(n) => n.discover_new(cursor, may_be_new).await,
            SourceDiscovery::FileEvents(f) => f.discover_new(cursor, may_be_new).await,
        }
    }

    async fn acknowledge(&self, tokens: Vec<AckToken>) -> SeamResult<()> {
        match self {
            SourceDiscovery::Listing(l) => l.acknowledge(tokens).await,
            SourceDiscovery::Notifications(n) => n.acknowledge(tokens).await,
            SourceDiscovery::FileEvents(f) => f.acknowledge(tokens).await,
        }
    }
}
