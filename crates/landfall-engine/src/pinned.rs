//! Reads pinned to what discovery listed.
//!
//! Every GET of a file carries the listed etag (`If-Match`) or object version, and a byte
//! range inside the listed size; the metadata the store returns is compared with the listing.
//! So a file overwritten, grown or deleted after it was listed is never read half-new: the
//! read fails with a reason the worker acts on (`changed_after_listing`, `missing`), and a
//! store error that leaves the file unchanged is transient (the batch is retried).
//!
//! [`fetch`] reads a whole file (small ones in one piece, large ones in pieces of megabytes);
//! [`PinnedReader`] serves the ranged reads of the Parquet and ORC readers, which read the
//! footer and then one row group (stripe) at a time.

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use landfall_core::{FileMeta, SeamError, SkipKind, SkipReason};
use landfall_discovery::file_meta;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, GetResult, GetResultPayload, ObjectStore, ObjectStoreExt,
};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// Files up to this size are read whole by the prefetcher; larger ones are streamed in chunks.
const FETCH_WHOLE_BELOW: u64 = 8 << 20;

/// Files up to this size are decoded whole in their own task, several at once (one per core,
/// plus one); larger files are decoded as a stream of chunks, one at a time (pipeline.rs).
pub(crate) const DECODE_WHOLE_BELOW: u64 = 16 << 20;

/// The size from which files are streamed: `DECODE_WHOLE_BELOW`, or
/// `LANDFALL_STREAM_FILES_FROM` (bytes) so tests can drive the streaming path with small files.
pub(crate) fn stream_files_from() -> u64 {
    static FROM: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *FROM.get_or_init(|| match std::env::var("LANDFALL_STREAM_FILES_FROM") {
        Err(_) => DECODE_WHOLE_BELOW,
        // A test knob: an unreadable value must not fall back silently (the test would then
        // never drive the path it names).
        Ok(v) => {
            let from = v.parse().unwrap_or_else(|_| {
                panic!("LANDFALL_STREAM_FILES_FROM=`{v}` is not a number of bytes")
            });
            tracing::info!(
                from,
                "LANDFALL_STREAM_FILES_FROM: files from this size are streamed"
            );
            from
        }
    })
}
/// Bytes the Parquet reader asks for at the end of a file before it knows the footer's size.
const FOOTER_HINT: usize = 64 << 10;

/// Why one file could not be read, before the worker decides what it means.
#[derive(Debug)]
pub(crate) enum FileError {
    Unreadable(SkipReason),
    /// Not the file's fault (network, store): the batch fails and is retried.
    Transient(SeamError),
}

impl FileError {
    /// A decode error of the file shown as `shown`; the reason without the path it repeats.
    pub(crate) fn corrupt(shown: &str) -> impl Fn(SeamError) -> FileError + '_ {
        move |e| {
            let detail = e
                .message
                .strip_prefix(shown)
                .map(|r| r.trim_start_matches(": ").to_string())
                .unwrap_or(e.message);
            FileError::Unreadable(SkipReason {
                kind: SkipKind::Corrupt,
                detail,
            })
        }
    }
}

impl From<SeamError> for FileError {
    fn from(e: SeamError) -> Self {
        FileError::Transient(e)
    }
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::Unreadable(r) => write!(f, "{}: {}", r.kind.as_str(), r.detail),
            FileError::Transient(e) => write!(f, "{}", e.message),
        }
    }
}

fn object_path(meta: &FileMeta) -> Result<Path, FileError> {
    Path::parse(&meta.path).map_err(|e| {
        FileError::Unreadable(SkipReason {
            kind: SkipKind::Missing,
            detail: format!("the key cannot be addressed: {e}"),
        })
    })
}

/// A GET of `range`, pinned to the listed version (etag or object version) and size.
fn pinned(meta: &FileMeta, range: Range<u64>) -> GetOptions {
    GetOptions {
        if_match: meta.etag.clone(),
        version: meta.version.clone(),
        range: (meta.size > 0).then(|| GetRange::Bounded(range.start..range.end.min(meta.size))),
        ..Default::default()
    }
}

/// The Parquet reader's ranged reads of one file, each pinned to the listed version. The
/// reader only sees a message when a read fails; what the failure means for the file
/// (missing, changed, or a transient store error) is kept for [`PinnedReader::failure`].
pub(crate) struct PinnedReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
    meta: FileMeta,
    failure: Arc<Mutex<Option<FileError>>>,
}

/// Where a [`PinnedReader`] leaves the cause of its first failed read.
#[derive(Clone, Default)]
pub(crate) struct ReadFailure(Arc<Mutex<Option<FileError>>>);

impl ReadFailure {
    /// The cause of the first failed read, if a read failed.
    pub(crate) fn take(&self) -> Option<FileError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl PinnedReader {
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        meta: &FileMeta,
    ) -> Result<(Self, ReadFailure), FileError> {
        let failure = ReadFailure::default();
        let reader = PinnedReader {
            store,
            path: object_path(meta)?,
            meta: meta.clone(),
            failure: failure.0.clone(),
        };
        Ok((reader, failure))
    }

    fn fail(&self, e: FileError) -> ParquetError {
        let msg = e.to_string();
        let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        ParquetError::General(msg)
    }

    async fn read(&self, range: Range<u64>) -> Result<Bytes, FileError> {
        if range.end > self.meta.size || range.start > range.end {
            // The reader asks for bytes past the listed size: the file's own offsets (its
            // footer) say so, and the read is pinned to the listed version, so the file is
            // damaged, not changed.
            return Err(FileError::Unreadable(SkipReason {
                kind: SkipKind::Corrupt,
                detail: format!(
                    "its footer points at bytes {}..{}, past its {} bytes",
                    range.start, range.end, self.meta.size
                ),
            }));
        }
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        let result = pinned_get(&self.store, &self.path, &self.meta, range.clone()).await?;
        collect(result, &self.meta, range).await
    }
}

/// Read `range` of a file, pinned to its listed version.
pub(crate) async fn fetch_range(
    store: &Arc<dyn ObjectStore>,
    meta: &FileMeta,
    range: Range<u64>,
) -> Result<Bytes, FileError> {
    let (reader, _) = PinnedReader::new(store.clone(), meta)?;
    reader.read(range).await
}

impl AsyncFileReader for PinnedReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        Box::pin(async move { self.read(range).await.map_err(|e| self.fail(e)) })
    }

    /// The ranges of one row group's column chunks: ranges close together are merged and up
    /// to ten pinned GETs run at once (object_store's own coalescing), instead of one GET per
    /// column chunk in turn.
    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        Box::pin(async move {
            let this = &*self;
            object_store::coalesce_ranges(
                &ranges,
                |r| async move { this.read(r).await.map_err(|e| this.fail(e)) },
                object_store::OBJECT_STORE_COALESCE_DEFAULT,
            )
            .await
        })
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        Box::pin(async move {
            let size = self.meta.size;
            ParquetMetaDataReader::new()
                .with_prefetch_hint(Some(FOOTER_HINT))
                .load_and_finish(self, size)
                .await
                .map(Arc::new)
        })
    }
}

/// The ORC reader asks for each stream of a stripe in turn, often a few KB each: reads are
/// widened to this many bytes and the rest kept for the next asks, so a stripe costs a few GETs
/// rather than one per stream.
const ORC_READ_AHEAD: u64 = 1 << 20;

/// The ORC reader's ranged reads (the tail, then one stripe at a time), pinned like Parquet's.
pub(crate) struct PinnedOrcReader {
    inner: PinnedReader,
    /// Bytes read ahead, and where they start in the file.
    ahead: Option<(u64, Bytes)>,
}

impl PinnedOrcReader {
    pub(crate) fn new(inner: PinnedReader) -> Self {
        PinnedOrcReader { inner, ahead: None }
    }

    async fn read(&mut self, start: u64, length: u64) -> Result<Bytes, FileError> {
        let end = start.saturating_add(length);
        if let Some((at, bytes)) = &self.ahead
            && start >= *at
            && end <= at + bytes.len() as u64
        {
            return Ok(bytes.slice((start - at) as usize..(end - at) as usize));
        }
        let wide = end.max(
            start
                .saturating_add(ORC_READ_AHEAD)
                .min(self.inner.meta.size),
        );
        let bytes = self.inner.read(start..wide).await?;
        let out = bytes.slice(..(end - start) as usize);
        self.ahead = Some((start, bytes));
        Ok(out)
    }
}

impl orc_rust::reader::AsyncChunkReader for PinnedOrcReader {
    fn len(&mut self) -> BoxFuture<'_, std::io::Result<u64>> {
        Box::pin(futures::future::ready(Ok(self.inner.meta.size)))
    }

    fn get_bytes(
        &mut self,
        offset_from_start: u64,
        length: u64,
    ) -> BoxFuture<'_, std::io::Result<Bytes>> {
        Box::pin(async move {
            self.read(offset_from_start, length)
                .await
                .map_err(|e| std::io::Error::other(self.inner.fail(e).to_string()))
        })
    }
}

/// The bytes of one file, in order: one piece for a small file, pieces of about
/// [`LOCAL_PIECE`] or [`REMOTE_PIECE`] for a large one. A piece that cannot be read says why
/// (the file changed or went away after its first piece, or the store failed).
pub(crate) type Body = BoxStream<'static, Result<Bytes, FileError>>;

/// A large local file is read by one blocking reader in pieces of this size (one hand-off to
/// the decoder per piece: object_store's own stream reads 8 KiB at a time, each read a trip
/// through the blocking pool and a wake-up).
const LOCAL_PIECE: u64 = 4 << 20;
/// A large remote file is read by pinned ranged GETs of this size...
const REMOTE_PIECE: u64 = 8 << 20;
/// ...and at most this many pieces are read ahead of the decoder (local or remote).
const PIECES_AHEAD: usize = 2;
/// Local files up to this size are read on the task that asked, without a blocking task.
const READ_INLINE_UP_TO: u64 = 64 << 10;

/// The piece sizes (local, remote). With `LANDFALL_STREAM_FILES_FROM` set below the default,
/// tests stream small files: pieces are then 4 KiB, so a test crosses many piece boundaries.
fn piece_sizes() -> (u64, u64) {
    if stream_files_from() < DECODE_WHOLE_BELOW {
        (4 << 10, 4 << 10)
    } else {
        (LOCAL_PIECE, REMOTE_PIECE)
    }
}

/// Open one file for reading, pinned to the listed version and size. A small file is read
/// whole in one request (so several can be in flight). A large local file is one open file
/// read by a blocking reader in pieces; a large remote file is a sequence of pinned ranged
/// GETs, each checked against the listing like the first. One metadata call per file: the
/// first GET's answer (object_store's local GET opens the file and reads its metadata once).
pub(crate) async fn fetch(
    store: Arc<dyn ObjectStore>,
    meta: FileMeta,
) -> Result<(FileMeta, Body), FileError> {
    let (local, remote) = piece_sizes();
    let whole_below = FETCH_WHOLE_BELOW.min(stream_files_from());
    fetch_in_pieces(store, meta, whole_below, (local, remote)).await
}

/// [`fetch`] with its sizes given: files below `whole_below` bytes in one piece, others in
/// pieces of `(local, remote)` bytes.
async fn fetch_in_pieces(
    store: Arc<dyn ObjectStore>,
    meta: FileMeta,
    whole_below: u64,
    (local_piece, remote_piece): (u64, u64),
) -> Result<(FileMeta, Body), FileError> {
    let path = object_path(&meta)?;
    let whole = meta.size < whole_below;
    let first = if whole {
        0..meta.size
    } else {
        0..remote_piece.min(meta.size)
    };
    let result = pinned_get(&store, &path, &meta, first.clone()).await?;
    let body = match result.payload {
        // A local GET is an open file handle (the range only bounds what object_store itself
        // would read): the reader takes the whole listed size from it, version checked once.
        GetResultPayload::File(file, _) if !whole => local_pieces(file, meta.clone(), local_piece),
        // A small local file is read right here: reading a few pages from the page cache costs
        // less than the hand-off to the blocking pool and back that `bytes()` would make (the
        // small-file shape spent more time in futex wake-ups than in decoding).
        GetResultPayload::File(mut file, _) if meta.size <= READ_INLINE_UP_TO => {
            let bytes = read_piece(&mut file, &meta, 0, meta.size)?;
            futures::stream::once(futures::future::ready(Ok(bytes))).boxed()
        }
        payload => {
            let head = collect(GetResult { payload, ..result }, &meta, first.clone()).await?;
            let head = futures::stream::once(futures::future::ready(Ok(head)));
            if first.end < meta.size {
                head.chain(remote_pieces(
                    store,
                    path,
                    meta.clone(),
                    first.end,
                    remote_piece,
                ))
                .boxed()
            } else {
                head.boxed()
            }
        }
    };
    Ok((meta, body))
}

/// The bytes of a pinned GET's answer, which must be all of `range`; short, the file changed
/// (its size now is what a whole-file read got, else unknown: the listed one is shown).
async fn collect(
    result: GetResult,
    meta: &FileMeta,
    range: Range<u64>,
) -> Result<Bytes, FileError> {
    let bytes = result.bytes().await.map_err(|e| read_failed(meta, e))?;
    let got = bytes.len() as u64;
    if got != range.end - range.start {
        let whole = range == (0..meta.size);
        return Err(changed(meta, if whole { got } else { meta.size }));
    }
    Ok(bytes)
}

/// A read that failed without saying the file changed: transient, the batch is retried.
fn read_failed(meta: &FileMeta, e: impl std::fmt::Display) -> FileError {
    FileError::Transient(SeamError::retryable(format!(
        "{}: read failed: {e}",
        meta.path
    )))
}

/// The rest of a remote file from `from`: pinned ranged GETs of `piece` bytes, in order,
/// [`PIECES_AHEAD`] in flight.
fn remote_pieces(
    store: Arc<dyn ObjectStore>,
    path: Path,
    meta: FileMeta,
    from: u64,
    piece: u64,
) -> Body {
    let (size, shown) = (meta.size, meta.path.clone());
    let mut gets = futures::stream::iter((from..size).step_by(piece as usize))
        .map(move |start| {
            let (store, path, meta) = (store.clone(), path.clone(), meta.clone());
            async move {
                let range = start..(start + piece).min(meta.size);
                let result = pinned_get(&store, &path, &meta, range.clone()).await?;
                collect(result, &meta, range).await
            }
        })
        .buffered(PIECES_AHEAD);
    // Driven by a task of its own, so the GETs in flight keep reading while the decoder is
    // busy (a body left unread for long would hit the client's timeout); it stops at the
    // first error or when the reader is dropped. Started when the rest is first asked for.
    futures::stream::once(async move {
        let (tx, rx) = tokio::sync::mpsc::channel(PIECES_AHEAD);
        tokio::spawn(async move {
            while let Some(piece) = gets.next().await {
                let failed = piece.is_err();
                if tx.send(piece).await.is_err() || failed {
                    return;
                }
            }
        });
        received(rx, size - from, shown)
    })
    .flatten()
    .boxed()
}

/// The pieces a reader task sends, checked to add up to `expected` bytes: a reader that ended
/// without its last pieces and without an error (it panicked, it was cancelled) is a failed
/// read, never a shorter file.
fn received(
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, FileError>>,
    expected: u64,
    path: String,
) -> Body {
    futures::stream::unfold((rx, 0u64, false), move |(mut rx, got, over)| {
        let path = path.clone();
        async move {
            if over {
                return None;
            }
            match rx.recv().await {
                Some(Ok(p)) => {
                    let got = got + p.len() as u64;
                    Some((Ok(p), (rx, got, false)))
                }
                Some(Err(e)) => Some((Err(e), (rx, got, true))),
                None if got < expected => Some((
                    Err(FileError::Transient(SeamError::retryable(format!(
                        "{path}: read stopped after {got} of {expected} bytes"
                    )))),
                    (rx, got, true),
                )),
                None => None,
            }
        }
    })
    .boxed()
}

/// The next `want` bytes of an open local file (at `at` of it, for the message): all of them,
/// or `changed_after_listing` when the file ends sooner (truncated since it was listed).
fn read_piece(
    file: &mut std::fs::File,
    meta: &FileMeta,
    at: u64,
    want: u64,
) -> Result<Bytes, FileError> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(want as usize);
    match file.take(want).read_to_end(&mut buf) {
        Ok(n) if n as u64 == want => Ok(Bytes::from(buf)),
        Ok(n) => Err(changed(meta, at + n as u64)),
        Err(e) => Err(read_failed(meta, e)),
    }
}

/// An open local file, read from its start by one blocking task in pieces of `piece` bytes,
/// [`PIECES_AHEAD`] pieces ahead of the decoder. A file shorter than listed (truncated while
/// read) is `changed_after_listing`; dropping the stream stops the reader.
fn local_pieces(file: std::fs::File, meta: FileMeta, piece: u64) -> Body {
    let (size, shown) = (meta.size, meta.path.clone());
    let (tx, rx) = tokio::sync::mpsc::channel(PIECES_AHEAD);
    tokio::task::spawn_blocking(move || {
        let mut file = file;
        let mut at = 0;
        while at < meta.size {
            let want = piece.min(meta.size - at);
            let piece = read_piece(&mut file, &meta, at, want);
            let failed = piece.is_err();
            if tx.blocking_send(piece).is_err() || failed {
                return;
            }
            at += want;
        }
    });
    received(rx, size, shown)
}

/// GET `range` pinned to the listed version, and check what the store answers with against
/// the listing: a failed GET says why (missing, changed, transient), a changed object is
/// `changed_after_listing`.
async fn pinned_get(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    meta: &FileMeta,
    range: Range<u64>,
) -> Result<object_store::GetResult, FileError> {
    let result = match store.get_opts(path, pinned(meta, range)).await {
        Ok(r) => r,
        Err(e) => return Err(classify(store, path, meta, e).await),
    };
    if !meta.same_version(&file_meta(result.meta.clone())) {
        return Err(changed(meta, result.meta.size));
    }
    Ok(result)
}

fn changed(meta: &FileMeta, now_size: u64) -> FileError {
    FileError::Unreadable(SkipReason {
        kind: SkipKind::ChangedAfterListing,
        detail: format!(
            "listed with {} bytes{}, now {now_size} bytes or another version",
            meta.size,
            meta.etag
                .as_deref()
                .map(|e| format!(" and etag {e}"))
                .unwrap_or_default()
        ),
    })
}

/// What a failed pinned GET means: the file is gone, it changed, or the store failed (then a
/// HEAD tells whether the file changed, e.g. shrank below the requested range).
async fn classify(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    meta: &FileMeta,
    e: object_store::Error,
) -> FileError {
    let missing = || {
        FileError::Unreadable(SkipReason {
            kind: SkipKind::Missing,
            detail: "deleted or moved after it was listed".into(),
        })
    };
    if let object_store::Error::NotFound { .. } = e {
        return missing();
    }
    // Anything else (a failed precondition included: stores spell etags differently in
    // listings and in headers) is judged by what the store says the object is now.
    match store.head(path).await {
        Ok(now) => {
            let now = file_meta(now);
            if !meta.same_version(&now) {
                changed(meta, now.size)
            } else {
                FileError::Transient(SeamError::retryable(format!(
                    "{}: read failed (the file is unchanged): {e}",
                    meta.path
                )))
            }
        }
        Err(object_store::Error::NotFound { .. }) => missing(),
        Err(_) => read_failed(meta, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use object_store::memory::InMemory;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// A Parquet file of `rows` ids in row groups of 1,000 rows.
    fn parquet(rows: i64) -> (Arc<Schema>, Bytes) {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(1000))
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema.clone(), Some(props)).unwrap();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(0..rows))],
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        (schema, out.into())
    }

    async fn listed(store: &Arc<dyn ObjectStore>, path: &str, body: Bytes) -> FileMeta {
        let p = Path::from(path);
        store.put(&p, body.into()).await.unwrap();
        file_meta(store.head(&p).await.unwrap())
    }

    #[tokio::test]
    async fn reads_row_group_by_row_group_and_stops_at_a_rewrite() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let (schema, body) = parquet(3000);
        let meta = listed(&store, "in/a.parquet", body.clone()).await;

        // Unchanged: every row, in three row groups.
        let (reader, failure) = PinnedReader::new(store.clone(), &meta).unwrap();
        let (mut batches, _) = landfall_formats::parquet_batches(
            "a",
            reader,
            schema.clone(),
            1000,
            Default::default(),
        )
        .await
        .unwrap();
        let mut rows = 0;
        while let Some(b) = batches.next().await {
            rows += b.unwrap().num_rows();
        }
        assert_eq!(rows, 3000);
        assert!(failure.take().is_none());

        // Rewritten after the first row group was read: the next read is refused as changed,
        // so no row of the new version joins rows of the old one.
        let (reader, failure) = PinnedReader::new(store.clone(), &meta).unwrap();
        let (mut batches, _) =
            landfall_formats::parquet_batches("a", reader, schema, 1000, Default::default())
                .await
                .unwrap();
        assert_eq!(batches.next().await.unwrap().unwrap().num_rows(), 1000);
        listed(&store, "in/a.parquet", body).await;
        assert!(batches.next().await.unwrap().is_err());
        match failure.take() {
            Some(FileError::Unreadable(r)) => assert_eq!(r.kind, SkipKind::ChangedAfterListing),
            Some(other) => panic!("expected changed_after_listing, got {other}"),
            None => panic!("the rewrite went unnoticed"),
        }
    }

    /// An ORC file read through pinned ranges, a few GETs for its many small streams; a read
    /// past the listed size (a footer's offset) is a corrupt file, not a changed one; an empty
    /// range is no request at all.
    #[tokio::test]
    async fn orc_reads_by_ranges_and_offsets_past_the_end_are_corrupt() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let mut out = Vec::new();
        let mut w = orc_rust::ArrowWriterBuilder::new(&mut out, schema.clone())
            .try_build()
            .unwrap();
        for part in 0..3 {
            let ids = Int64Array::from_iter_values(part * 1000..(part + 1) * 1000);
            w.write(&RecordBatch::try_new(schema.clone(), vec![Arc::new(ids)]).unwrap())
                .unwrap();
            w.flush_stripe().unwrap();
        }
        w.close().unwrap();
        let meta = listed(&store, "in/a.orc", out.into()).await;
        let (reader, failure) = PinnedReader::new(store.clone(), &meta).unwrap();
        let (mut batches, _) = landfall_formats::orc_batches(
            "a",
            PinnedOrcReader::new(reader),
            schema,
            1000,
            Default::default(),
        )
        .await
        .unwrap();
        let mut rows = 0;
        while let Some(b) = batches.next().await {
            rows += b.unwrap().num_rows();
        }
        assert_eq!(rows, 3000);
        assert!(failure.take().is_none());

        let (reader, _) = PinnedReader::new(store, &meta).unwrap();
        assert!(reader.read(3..3).await.unwrap().is_empty());
        match reader.read(meta.size - 2..meta.size + 5).await {
            Err(FileError::Unreadable(r)) => {
                assert_eq!(r.kind, SkipKind::Corrupt, "{}", r.detail);
                assert!(r.detail.contains("past its"), "{}", r.detail);
            }
            other => panic!("expected a corrupt file, got {:?}", other.map(|b| b.len())),
        }
    }

    /// Every piece of a body, in order, and the error that ended it (if one did).
    async fn pieces(mut body: Body) -> (Vec<Bytes>, Option<FileError>) {
        let mut out = Vec::new();
        while let Some(p) = body.next().await {
            match p {
                Ok(b) => out.push(b),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    }

    fn assert_changed(e: Option<FileError>) {
        match e {
            Some(FileError::Unreadable(r)) => {
                assert_eq!(r.kind, SkipKind::ChangedAfterListing, "{}", r.detail)
            }
            Some(other) => panic!("expected changed_after_listing, got {other}"),
            None => panic!("the change went unnoticed"),
        }
    }

    /// Fetch `meta` with the given sizes and read every piece.
    async fn fetched(
        store: &Arc<dyn ObjectStore>,
        meta: &FileMeta,
        whole_below: u64,
        sizes: (u64, u64),
    ) -> (Vec<Bytes>, Option<FileError>) {
        let (_, read) = fetch_in_pieces(store.clone(), meta.clone(), whole_below, sizes)
            .await
            .unwrap();
        pieces(read).await
    }

    fn lengths(pieces: &[Bytes]) -> Vec<usize> {
        pieces.iter().map(|p| p.len()).collect()
    }

    fn content(len: usize) -> Bytes {
        (0..len).map(|i| (i % 251) as u8).collect::<Vec<_>>().into()
    }

    /// A large local file comes in pieces of the asked size from one open file, all of its
    /// bytes in order; one truncated while it is read ends with `changed_after_listing`.
    #[tokio::test]
    async fn a_local_file_is_read_in_pieces_and_a_truncation_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
        let body = content(10_000);
        let meta = listed(&store, "in/a.json", body.clone()).await;
        let (got, err) = fetched(&store, &meta, 1, (3000, 3000)).await;
        assert!(err.is_none());
        assert_eq!(lengths(&got), [3000, 3000, 3000, 1000]);
        assert_eq!(got.concat(), body);
        // Below the whole-file size (and small): one piece, read inline.
        assert_eq!(
            fetched(&store, &meta, 20_000, (3000, 3000)).await.0,
            std::slice::from_ref(&body)
        );

        // Ten pieces: the reader runs at most three ahead (two queued, one waiting), so the
        // truncation below lands before it reaches the end.
        let meta = listed(&store, "in/b.json", content(10_000)).await;
        let (_, read) = fetch_in_pieces(store.clone(), meta, 1, (1000, 1000))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("in/b.json"))
            .unwrap()
            .set_len(4500)
            .unwrap();
        let (got, err) = pieces(read).await;
        assert!(
            got.len() <= 4,
            "{} pieces read before the truncation",
            got.len()
        );
        assert_changed(err);
    }

    /// A large remote file comes as pinned ranged GETs; a rewrite between two pieces is
    /// `changed_after_listing`, never old bytes followed by new ones.
    #[tokio::test]
    async fn a_remote_file_is_read_by_pinned_ranges_and_a_rewrite_between_them_is_a_change() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let body = content(10_000);
        let meta = listed(&store, "in/a.json", body.clone()).await;
        let (got, err) = fetched(&store, &meta, 1, (3000, 4000)).await;
        assert!(err.is_none());
        assert_eq!(lengths(&got), [4000, 4000, 2000]);
        assert_eq!(got.concat(), body);

        // Below the whole-file size: one piece.
        assert_eq!(
            fetched(&store, &meta, 20_000, (3000, 4000)).await.0,
            std::slice::from_ref(&body)
        );

        let (_, mut read) = fetch_in_pieces(store.clone(), meta, 1, (3000, 4000))
            .await
            .unwrap();
        assert_eq!(read.next().await.unwrap().unwrap().len(), 4000);
        listed(&store, "in/a.json", body).await;
        let (got, err) = pieces(read).await;
        assert!(got.is_empty());
        assert_changed(err);
    }

    #[tokio::test]
    async fn a_file_deleted_before_its_footer_is_read_is_missing() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let (schema, body) = parquet(10);
        let meta = listed(&store, "in/b.parquet", body).await;
        store.delete(&Path::from("in/b.parquet")).await.unwrap();
        let (reader, failure) = PinnedReader::new(store, &meta).unwrap();
        assert!(
            landfall_formats::parquet_batches("b", reader, schema, 1000, Default::default())
                .await
                .is_err()
        );
        assert!(matches!(
            failure.take(),
            Some(FileError::Unreadable(SkipReason {
                kind: SkipKind::Missing,
                ..
            }))
        ));
    }
}
