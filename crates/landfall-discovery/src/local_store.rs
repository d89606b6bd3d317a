//! A local directory's store, with GETs answered on the calling task.
//!
//! object_store's `LocalFileSystem` runs every GET (open the file, read its metadata, check
//! the preconditions) on tokio's blocking pool: a hand-off to a pool thread and back for each
//! file, two or more futex wake-ups and context switches. For a stream of many small files
//! that hand-off is most of the cost: on 20,000 files of 2 KB it made 137,000 futex calls and
//! 34,500 context switches (docs/benchmarks.md). [`InlineLocal`] answers `get_opts` itself,
//! with the same two system calls (`open`, `fstat`) on the task that asked, and returns what
//! `LocalFileSystem` returns: the open file as the payload, the same [`ObjectMeta`] (its etag
//! built the same way, checked against `LocalFileSystem`'s own `head` by a test), the same
//! preconditions and range checks. Everything else (listings, puts, deletes, ranged reads) is
//! `LocalFileSystem`'s.
//!
//! The cost moves to the async worker: an `open` and an `fstat`, a few microseconds on a local
//! disk. A source on a network file system whose metadata calls can stall for long should be
//! read through its object store instead.

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use std::fs::Metadata;
use std::io::ErrorKind;
use std::ops::Range;
use std::sync::Arc;

/// `LocalFileSystem` with GETs answered on the calling task (see the module docs).
#[derive(Debug)]
pub struct InlineLocal {
    inner: Arc<LocalFileSystem>,
}

impl InlineLocal {
    pub fn new(inner: LocalFileSystem) -> Self {
        InlineLocal {
            inner: Arc::new(inner),
        }
    }
}

impl std::fmt::Display for InlineLocal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.inner)
    }
}

/// The etag `LocalFileSystem` gives a file: inode, modification time in microseconds and
/// size, in hexadecimal.
fn etag(metadata: &Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let mtime = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros();
    format!("{:x}-{mtime:x}-{:x}", metadata.ino(), metadata.len())
}

fn generic(source: impl std::error::Error + Send + Sync + 'static) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: Box::new(source),
    }
}

#[async_trait]
impl ObjectStore for InlineLocal {
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let path = self.inner.path_to_filesystem(location)?;
        let not_found = |source: std::io::Error| object_store::Error::NotFound {
            path: path.display().to_string(),
            source: Box::new(source),
        };
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(not_found(e)),
            Err(e) => return Err(generic(e)),
        };
        let metadata = file.metadata().map_err(generic)?;
        if metadata.is_dir() {
            return Err(not_found(std::io::Error::new(
                ErrorKind::NotFound,
                "is directory",
            )));
        }
        let meta = ObjectMeta {
            location: location.clone(),
            last_modified: metadata.modified().map_err(generic)?.into(),
            size: metadata.len(),
            e_tag: Some(etag(&metadata)),
            version: None,
        };
        options.check_preconditions(&meta)?;
        let range = match &options.range {
            Some(r) => r.as_range(meta.size).map_err(generic)?,
            None => 0..meta.size,
        };
        Ok(GetResult {
            payload: GetResultPayload::File(file, path),
            attributes: Default::default(),
            range,
            meta,
        })
    }

    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> Result<Vec<bytes::Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::{GetRange, ObjectStoreExt};

    #[tokio::test]
    async fn answers_as_local_file_system_does() {
        let dir = tempfile::tempdir().unwrap();
        let plain = LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let inline = InlineLocal::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
        for (name, body) in [
            ("a.json", &b"{\"a\":1}\n"[..]),
            ("sub dir/b %.json", &b""[..]),
            ("z/\u{fc}.json", &[7u8; 70_000][..]),
        ] {
            let p = Path::from(name);
            inline.put(&p, body.to_vec().into()).await.unwrap();
            let ours = inline.get_opts(&p, GetOptions::default()).await.unwrap();
            let theirs = plain.get_opts(&p, GetOptions::default()).await.unwrap();
            assert_eq!(ours.meta, theirs.meta, "{name}");
            assert_eq!(ours.meta, plain.head(&p).await.unwrap(), "{name}");
            assert_eq!(ours.range, theirs.range);
            assert_eq!(ours.bytes().await.unwrap(), body, "{name}");
            // Pinned to the listed version, with a range, as the read path asks.
            let pinned = GetOptions {
                if_match: theirs.meta.e_tag.clone(),
                range: (!body.is_empty()).then_some(GetRange::Bounded(0..1)),
                ..Default::default()
            };
            let got = inline.get_opts(&p, pinned).await.unwrap();
            assert_eq!(got.range, if body.is_empty() { 0..0 } else { 0..1 });
        }
        let p = Path::from("a.json");
        // A rewrite changes the etag: the pinned GET fails as LocalFileSystem's does.
        let before = inline.head(&p).await.unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        inline
            .put(&p, b"{\"a\":22}\n".to_vec().into())
            .await
            .unwrap();
        let stale = GetOptions {
            if_match: before.e_tag.clone(),
            ..Default::default()
        };
        let ours = inline.get_opts(&p, stale.clone()).await.unwrap_err();
        let theirs = plain.get_opts(&p, stale).await.unwrap_err();
        assert!(
            matches!(ours, object_store::Error::Precondition { .. })
                && matches!(theirs, object_store::Error::Precondition { .. }),
            "{ours} / {theirs}"
        );
        // Missing files and directories are not found, as with LocalFileSystem.
        for missing in ["gone.json", "sub dir"] {
            let e = inline
                .get_opts(&Path::from(missing), GetOptions::default())
                .await
                .unwrap_err();
            assert!(
                matches!(e, object_store::Error::NotFound { .. }),
                "{missing}: {e}"
            );
        }
        // A range past the end is refused.
        let past = GetOptions {
            range: Some(GetRange::Bounded(100..200)),
            ..Default::default()
        };
        assert!(inline.get_opts(&p, past).await.is_err());
    }
}
