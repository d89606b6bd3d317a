//! Finding files: flat recursive listing through object_store for local directories, S3, Azure
//! and GCS, with the stream's filters, plus Hive `key=value` partition values from paths. S3
//! is listed by [`S3Lister`], which survives keys object_store cannot represent.
//!
//! Listing is full or incremental (keys after the last one seen) round by round, as
//! [`incremental`] describes.
//!
//! Queue notifications and managed file events plug in behind the same `Discovery` seam later.

mod counting;
pub mod incremental;
mod listing;
mod notification;
mod partitions;
mod s3_list;
mod stores;

pub use counting::{CountRequests, CountingStore};
pub use listing::{Filters, ListingDiscovery};
pub use notification::{
    EventKind, Ignored, MessageError, Notification, StorageEvent, StoreRef, parse_message,
    parse_notification,
};
pub use partitions::hive_partitions;
pub use s3_list::{Listed, S3Lister};
pub use stores::{display_path, file_meta, object_path, open_store, relative_path};
