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
//! preconditions and range checks.
//!
//! Listings are walked here too, with one metadata call per file instead of three:
//! `LocalFileSystem` stats each entry to tell a broken symbolic link (`symlink_metadata`), again
//! to tell a file (`is_file`), and a third time for its metadata, 60,000 `statx` calls for
//! 20,000 files. [`InlineLocal`] takes the entry's type from the directory itself (walkdir,
//! which follows links as `LocalFileSystem` asks it to and stats only the links) and stats
//! each regular file once. It yields what `LocalFileSystem` yields, in the same order: regular
//! files and links to them, below the prefix; broken links and entries that vanished or cannot
//! be stat'ed passed over; object_store's temporary upload files (`name#123`) left out; the
//! offset applied before the metadata call. A test compares the two on a
//! tree with links, spaces and such names. One difference: with an offset, `LocalFileSystem`
//! also converts the names of directories and other non-files it walks, and fails the
//! listing on one that is no path (not UTF-8); here only files' names are converted.
//! Everything else (puts, deletes, ranged reads) is `LocalFileSystem`'s.
//!
//! The cost moves to the async worker: an `open` and an `fstat`, a few microseconds on a local
//! disk. A source on a network file system whose metadata calls can stall for long should be
//! read through its object store instead.

use async_trait::async_trait;
use futures::StreamExt;
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
use url::Url;

/// `LocalFileSystem` with GETs and listings answered here (see the module docs).
#[derive(Debug)]
pub struct InlineLocal {
    inner: Arc<LocalFileSystem>,
    /// The directory paths are relative to, as `LocalFileSystem`'s own root URL.
    root: Arc<Url>,
}

impl InlineLocal {
    /// The whole file system (paths are absolute), as `LocalFileSystem::new`.
    pub fn new() -> Self {
        InlineLocal {
            inner: Arc::new(LocalFileSystem::new()),
            root: Arc::new(Url::parse("file:///").expect("the root URL")),
        }
    }

    /// Paths relative to `dir`, as `LocalFileSystem::new_with_prefix` (the directory must
    /// exist). The daemon addresses local files by absolute path ([`InlineLocal::new`]).
    #[cfg(test)]
    pub fn with_prefix(dir: &std::path::Path) -> Result<Self> {
        let inner = LocalFileSystem::new_with_prefix(dir)?;
        let dir = std::fs::canonicalize(dir).map_err(generic)?;
        let root = Url::from_directory_path(&dir)
            .map_err(|()| invalid(format!("{} is no directory URL", dir.display())))?;
        Ok(InlineLocal {
            inner: Arc::new(inner),
            root: Arc::new(root),
        })
    }

    /// The directory of `prefix` below the root, as `LocalFileSystem` resolves it.
    fn prefix_dir(&self, prefix: Option<&Path>) -> Result<std::path::PathBuf> {
        let mut url = (*self.root).clone();
        url.path_segments_mut()
            .expect("a file URL has segments")
            .pop_if_empty()
            .extend(prefix.into_iter().flat_map(|p| p.parts()));
        url.to_file_path()
            .map_err(|()| invalid(format!("{url} is no file path")))
    }

    /// Files below `prefix` (after `offset`), walked on the blocking pool a chunk at a time.
    fn walk(
        &self,
        prefix: Option<&Path>,
        offset: Option<Path>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let dir = match self.prefix_dir(prefix) {
            Ok(dir) => dir,
            Err(e) => return futures::stream::once(async { Err(e) }).boxed(),
        };
        let root = self.root.clone();
        let entries = walkdir::WalkDir::new(dir)
            .min_depth(1)
            .follow_links(true)
            .into_iter()
            .filter_map(move |entry| listed(&root, offset.as_ref(), entry).transpose());
        chunked(entries)
    }
}

impl Default for InlineLocal {
    fn default() -> Self {
        Self::new()
    }
}

/// What one walked entry lists: `None` for directories, other non-files, broken links,
/// entries gone since the directory was read, temporary upload files and paths at or before
/// `offset`.
fn listed(
    root: &Url,
    offset: Option<&Path>,
    entry: walkdir::Result<walkdir::DirEntry>,
) -> Result<Option<ObjectMeta>> {
    let entry = match entry {
        Ok(entry) => entry,
        // A broken link (followed, its target is missing) or an entry deleted meanwhile.
        Err(e)
            if e.io_error()
                .is_some_and(|io| io.kind() == ErrorKind::NotFound) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(generic(e)),
    };
    // With links followed, a link's type is its target's: only regular files are listed.
    if !entry.file_type().is_file() {
        return Ok(None);
    }
    let location = relative(root, entry.path())?;
    if offset.is_some_and(|o| location <= *o) || !valid_file_name(&location) {
        return Ok(None);
    }
    // As `LocalFileSystem`, an entry that cannot be stat'ed (gone, no permission on its
    // directory, a stale handle) is passed over, not a failed listing; and one that is no
    // longer a regular file (replaced since the directory was read) is not listed.
    let Ok(metadata) = entry.metadata() else {
        return Ok(None);
    };
    if !metadata.is_file() {
        return Ok(None);
    }
    object_meta(location, &metadata).map(Some)
}

/// The `ObjectMeta` `LocalFileSystem` gives a file of `metadata` (a GET's and a listing's).
fn object_meta(location: Path, metadata: &Metadata) -> Result<ObjectMeta> {
    Ok(ObjectMeta {
        location,
        last_modified: metadata.modified().map_err(generic)?.into(),
        size: metadata.len(),
        e_tag: Some(etag(metadata)),
        version: None,
    })
}

/// The path of `file` below `root`, as `LocalFileSystem` turns file names into paths (through
/// a file URL, percent-decoded; names that are no UTF-8 are an error).
fn relative(root: &Url, file: &std::path::Path) -> Result<Path> {
    let url = Url::from_file_path(file)
        .map_err(|()| invalid(format!("{} is no absolute path", file.display())))?;
    let below = url
        .path()
        .strip_prefix(root.path())
        .ok_or_else(|| invalid(format!("{} is not below {root}", file.display())))?;
    Ok(Path::from_url_path(below)?)
}

/// Not one of object_store's temporary upload files (`name#123`), as `LocalFileSystem` lists.
fn valid_file_name(location: &Path) -> bool {
    match location.filename() {
        Some(name) => match name.split_once('#') {
            Some((_, suffix)) if !suffix.is_empty() => !suffix.bytes().all(|b| b.is_ascii_digit()),
            _ => true,
        },
        None => false,
    }
}

/// Entries walked [`CHUNK`] at a time on tokio's blocking pool (one hand-off per chunk), or
/// directly without a runtime.
fn chunked(
    entries: impl Iterator<Item = Result<ObjectMeta>> + Send + 'static,
) -> BoxStream<'static, Result<ObjectMeta>> {
    const CHUNK: usize = 1024;
    if tokio::runtime::Handle::try_current().is_err() {
        return futures::stream::iter(entries).boxed();
    }
    let state = (entries, std::collections::VecDeque::with_capacity(CHUNK));
    futures::stream::try_unfold(state, |(mut entries, mut buf)| async move {
        if buf.is_empty() {
            (entries, buf) = tokio::task::spawn_blocking(move || {
                buf.extend(entries.by_ref().take(CHUNK));
                (entries, buf)
            })
            .await
            .map_err(generic)?;
        }
        match buf.pop_front() {
            Some(Err(e)) => Err(e),
            Some(Ok(meta)) => Ok(Some((meta, (entries, buf)))),
            None => Ok(None),
        }
    })
    .boxed()
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

/// A path or URL that cannot stand for a local file.
fn invalid(reason: String) -> object_store::Error {
    generic(std::io::Error::new(ErrorKind::InvalidInput, reason))
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
        let meta = object_meta(location.clone(), &metadata)?;
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
        self.walk(prefix, None)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.walk(prefix, Some(offset.clone()))
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
        let inline = InlineLocal::with_prefix(dir.path()).unwrap();
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

    /// Both listings of `prefix` (and after `offset`), in their order.
    async fn both(
        plain: &LocalFileSystem,
        inline: &InlineLocal,
        prefix: Option<&Path>,
        offset: Option<&Path>,
    ) -> (Vec<ObjectMeta>, Vec<ObjectMeta>) {
        use futures::TryStreamExt;
        match offset {
            None => (
                inline.list(prefix).try_collect().await.unwrap(),
                plain.list(prefix).try_collect().await.unwrap(),
            ),
            Some(o) => (
                inline
                    .list_with_offset(prefix, o)
                    .try_collect()
                    .await
                    .unwrap(),
                plain
                    .list_with_offset(prefix, o)
                    .try_collect()
                    .await
                    .unwrap(),
            ),
        }
    }

    #[tokio::test]
    async fn lists_as_local_file_system_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (name, body) in [
            ("a.json", "1"),
            ("sub dir/b %.json", "22"),
            ("sub dir/deep/c.json", "333"),
            ("z/\u{fc}.json", ""),
            ("z/upload.json#123", "x"),
            ("z/kept#abc", "y"),
            ("_hidden/d.json", "4"),
            ("target/t.json", "55"),
        ] {
            let p = root.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, body).unwrap();
        }
        std::fs::create_dir_all(root.join("empty dir")).unwrap();
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(root.join(target), root.join(name)).unwrap()
        };
        link("a.json", "link to a.json");
        link("target", "linked dir");
        link("missing.json", "broken link");
        let plain = LocalFileSystem::new_with_prefix(root).unwrap();
        let inline = InlineLocal::with_prefix(root).unwrap();
        let (ours, theirs) = both(&plain, &inline, None, None).await;
        assert_eq!(ours, theirs);
        let names: std::collections::BTreeSet<String> =
            ours.iter().map(|m| m.location.to_string()).collect();
        for listed in [
            "a.json",
            "link to a.json",
            "linked dir/t.json",
            "sub dir/deep/c.json",
            "z/kept#abc",
        ] {
            assert!(names.contains(listed), "{listed} in {names:?}");
        }
        assert!(
            !names
                .iter()
                .any(|n| n.contains("broken") || n.contains("#123"))
        );
        let sub = Path::from("sub dir");
        let (ours, theirs) = both(&plain, &inline, Some(&sub), None).await;
        assert_eq!(ours, theirs);
        assert_eq!(ours.len(), 2);
        for offset in ["a.json", "sub dir/b %.json", "zz"] {
            let o = Path::from(offset);
            let (ours, theirs) = both(&plain, &inline, None, Some(&o)).await;
            assert_eq!(ours, theirs, "after {offset}");
        }
        // A prefix that does not exist lists nothing, as LocalFileSystem's does.
        let (ours, theirs) = both(&plain, &inline, Some(&Path::from("nowhere")), None).await;
        assert_eq!((ours.len(), theirs.len()), (0, 0));
        // Absolute paths, as the daemon's local store is built.
        let whole = InlineLocal::new();
        let abs = Path::from_absolute_path(root.join("sub dir")).unwrap();
        let (ours, theirs) = both(&LocalFileSystem::new(), &whole, Some(&abs), None).await;
        assert_eq!(ours, theirs);
        assert_eq!(ours.len(), 2);
    }
}
