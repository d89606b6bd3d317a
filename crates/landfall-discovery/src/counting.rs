//! Counting a stream's storage requests by operation (`LIST`, `GET`, `HEAD`, `PUT`, `DELETE`,
//! `COPY`, ...), for `landfall_storage_requests_total{op}`: what listing and reading cost.
//!
//! [`CountingStore`] wraps the source's object store and counts each call as the request(s) it
//! makes: a `get_opts` with `head` set is a HEAD; `get_ranges` is one GET per range (an upper
//! bound: stores may merge nearby ranges); a `list` stream is one LIST per call (object_store
//! does not expose its pages; cloud sources are listed by [`crate::RawLister`], which counts each
//! ListObjectsV2 page itself). Retries inside object_store are not visible here.

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use std::ops::Range;
use std::sync::Arc;

/// Called with an operation name and a number of requests.
pub type CountRequests = Arc<dyn Fn(&'static str, u64) + Send + Sync>;

/// An object store that counts the requests made through it.
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    count: CountRequests,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>, count: CountRequests) -> Self {
        CountingStore { inner, count }
    }
}

impl std::fmt::Debug for CountingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

impl std::fmt::Display for CountingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.inner)
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        (self.count)("PUT", 1);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        (self.count)("CreateMultipartUpload", 1);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        (self.count)(if options.head { "HEAD" } else { "GET" }, 1);
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        (self.count)("GET", ranges.len() as u64);
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        (self.count)("DELETE", 1);
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        (self.count)("LIST", 1);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        (self.count)("LIST", 1);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        (self.count)("LIST", 1);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        (self.count)("COPY", 1);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        (self.count)("RENAME", 1);
        self.inner.rename_opts(from, to, options).await
    }
}
