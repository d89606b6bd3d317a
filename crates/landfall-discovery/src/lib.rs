//! Finding files: flat recursive listing through object_store for local directories, S3, Azure
//! and GCS, with the stream's filters, plus Hive `key=value` partition values from paths. S3
//! is listed by [`RawLister`] (S3, GCS, Azure), which survives keys object_store cannot
//! represent.
//!
//! Listing is full or incremental (keys after the last one seen) round by round, as
//! [`incremental`] describes.
//!
//! Queue notifications ([`NotificationDiscovery`] over a [`MessageQueue`]: SQS and Azure
//! Storage Queues) plug in behind the same `Discovery` seam: a stream's worker holds whichever it
//! configured as a `Box<dyn Discovery>`, and each enters its mode from the stream's memory
//! (`Discovery::prepare`).
//!
//! Managed file events: one [`LocationConsumer`] per location fills an event cache from the
//! location's queue, and each stream under it reads the cache from its own position
//! ([`FileEventsDiscovery`]).

mod attempts;
mod aws_notify;
mod azure_queue;
mod bucket_entry;
mod counting;
#[cfg(test)]
mod fake_queue;
mod file_events;
pub mod incremental;
mod listing;
mod local_store;
mod location;
#[cfg(test)]
mod location_tests;
mod message_fields;
mod notification;
mod partitions;
mod queue;
mod queue_discovery;
mod queue_reader;
#[cfg(test)]
mod queue_reader_tests;
mod raw_list;
mod setup;
mod stores;

pub use attempts::{CountingConnector, FAILED_ATTEMPT, failed_status, open_counted_store};
pub use aws_notify::{
    AwsNotifications, CreatedResources, Entry, ResourceStatus, SetupError, SetupRequest, Target,
    notification_id, rule_prefix,
};
pub use azure_queue::{AzureAuth, AzureQueue, AzureQueueSettings, account_sas};
pub use bucket_entry::{EntryCheck, EntryGuard, EntryHooks, OwedListing, WRITE_ATTEMPTS};
pub use counting::{CountRequests, CountingStore};
pub use file_events::{FileEventsDiscovery, Position, READ_PER_ROUND, parse_position};
pub use listing::{Filters, ListingDiscovery};
pub use location::{
    CONSUMER_ERROR_META, ConsumerError, EventLocation, LAST_LISTING_META, LAST_ROUND_META,
    LISTING_OWED_META, LocationConsumer, LocationRound,
};
pub use notification::{
    EventKind, Ignored, MessageError, Notification, StorageEvent, StoreRef, parse_message,
    parse_notification,
};
pub use partitions::hive_partitions;
pub use queue::{AwsSettings, MessageQueue, QueueError, QueueMessage, SqsQueue};
pub use queue_discovery::{NotificationDiscovery, QueueOptions};
pub use queue_reader::{MAX_MESSAGES_PER_ROUND, QueueReader};
pub use raw_list::{AzureLister, Listed, RawLister, S3Lister};

/// The parsers of bytes a queue or a store's server sends, for the fuzz targets
/// (`crates/landfall-fuzz`).
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::raw_list::{azure_page_keys, s3_page_keys};
}
pub use stores::{display_path, file_meta, object_path, open_store, relative_path, shown_url};
