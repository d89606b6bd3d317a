//! Listings that survive keys object_store cannot represent, for every cloud store.
//!
//! object_store parses a whole list page at once (S3 and GCS ListObjectsV2, Azure List Blobs)
//! and fails the page when one key is not a valid [`Path`] (an empty segment such as `a//b`, a
//! `.` or `..` segment, a trailing `/` on an object with content). One such key would stop a
//! stream's discovery for good. [`RawLister`] sends the list requests itself, with
//! object_store's own HTTP client, credential providers and request signers (the same
//! configuration keys as the store), and hands every key back: representable ones as
//! [`ObjectMeta`], the others as [`Listed::Unrepresentable`], which discovery passes over with
//! a counted reason.
//!
//! - S3 (and S3-compatible stores): ListObjectsV2 with URL-encoded keys ([`S3Lister`]).
//! - GCS: the same ListObjectsV2 on its XML API, with object_store's OAuth bearer token.
//! - Azure Blob and ADLS Gen2: List Blobs ([`AzureLister`]), signed with object_store's
//!   `AzureAuthorizer` (shared key, SAS or bearer token). Azure has no `start-after`: an
//!   incremental listing filters after the cursor, as object_store's `list_with_offset` does.
//!
//! Configurations a lister would not address exactly as object_store does (S3 Express zonal
//! endpoints, Fabric OneLake) keep object_store's listing.

mod azure;
mod http;
mod s3;

pub use azure::{AzureLister, page_keys as azure_page_keys};
pub use http::Listed;
pub use s3::{S3Lister, page_keys as s3_page_keys};

use futures::stream::BoxStream;
use object_store::path::Path;
use url::Url;

/// A cloud store's own listing (see the module docs).
#[derive(Clone, Debug)]
pub enum RawLister {
    S3(S3Lister),
    Azure(AzureLister),
}

impl RawLister {
    /// The lister of an `s3://`, `gs://` or Azure URL with the store's options; `None` for
    /// local paths and for configurations listed by object_store (see the module docs).
    pub fn for_url<'a>(
        url: &Url,
        options: impl Iterator<Item = (&'a String, &'a String)>,
    ) -> Result<Option<Self>, String> {
        let options: Vec<_> = options.collect();
        if let Some(s3) = S3Lister::for_url(url, options.iter().copied())? {
            return Ok(Some(RawLister::S3(s3)));
        }
        if let Some(gcs) = S3Lister::for_gcs_url(url, options.iter().copied())? {
            return Ok(Some(RawLister::S3(gcs)));
        }
        Ok(AzureLister::for_url(url, options.into_iter())?.map(RawLister::Azure))
    }

    /// Count each list request with `count` (`LIST`).
    pub fn with_counter(self, count: crate::CountRequests) -> Self {
        match self {
            RawLister::S3(l) => RawLister::S3(l.with_counter(count)),
            RawLister::Azure(l) => RawLister::Azure(l.with_counter(count)),
        }
    }

    /// The objects under `prefix` whose keys sort after `start_after` (all of them when
    /// `None`), page by page, in key order.
    pub fn list_after(
        &self,
        prefix: Option<&Path>,
        start_after: Option<&str>,
    ) -> BoxStream<'static, Result<Listed, String>> {
        match self {
            RawLister::S3(l) => l.list_after(prefix, start_after),
            RawLister::Azure(l) => l.list_after(prefix, start_after),
        }
    }
}
