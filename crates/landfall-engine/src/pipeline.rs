//! The read side of a batch, run as its own task ahead of the writer: fetch files (small ones
//! whole, several in flight; large ones streamed), decode them, add the path partition columns
//! and split rows by the table's partition columns. The writer receives ready partitions over a
//! bounded channel, so memory stays bounded and decoding overlaps Parquet encoding.

use crate::schema::StreamSchema;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use landfall_core::seams::SeamResult;
use landfall_core::{FileMeta, SeamError};
use landfall_discovery::{hive_partitions, relative_path};
use landfall_formats::{DecodeOptions, FileFormat, with_constant_columns};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Files up to this size are read whole by the prefetcher; larger ones are streamed in chunks.
const FETCH_WHOLE_BELOW: u64 = 8 << 20;
/// Files fetched ahead of the decoder (at most this many small files in memory).
const PREFETCH_FILES: usize = 16;
/// Decoded partitions waiting for the writer.
const DECODED_AHEAD: usize = 8;

/// What the read side needs to know, owned so it can run in its own task.
#[derive(Clone)]
pub struct DecodeJob {
    pub format: FileFormat,
    pub options: DecodeOptions,
    pub schema: StreamSchema,
    pub partition_by: Vec<String>,
    pub prefix: Path,
}

/// One message to the writer.
pub enum Decoded {
    /// Rows that all belong to one partition (values in `partition_by` order).
    Rows(Vec<Option<String>>, arrow::array::RecordBatch),
    /// A file was read completely.
    FileDone { path: String, rows: u64 },
}

/// Files up to this size are decoded whole in their own task, several at once (one per core,
/// plus one); larger files are decoded as a stream of chunks, one at a time.
const DECODE_WHOLE_BELOW: u64 = 16 << 20;

/// What a file's read step produced: all its rows (decoded in parallel), or a file too large to
/// hold, to be decoded chunk by chunk in order.
enum FileRead {
    Whole(Vec<Decoded>),
    Large(FileMeta),
}

/// Start reading `files` in order; the receiver yields their rows, then closes. The first error
/// is sent and ends the task; dropping the receiver stops it.
pub fn spawn(
    job: DecodeJob,
    store: Arc<dyn ObjectStore>,
    files: Vec<FileMeta>,
) -> mpsc::Receiver<SeamResult<Decoded>> {
    let (tx, rx) = mpsc::channel(DECODED_AHEAD);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    tokio::spawn(async move {
        let (job2, store2) = (job.clone(), store.clone());
        let mut reads = futures::stream::iter(files)
            .map(move |meta| read_file(job2.clone(), store2.clone(), meta))
            .buffered(PREFETCH_FILES.min(cores * 4).max(2))
            .boxed();
        while let Some(next) = reads.next().await {
            let result = match next {
                Ok(FileRead::Whole(items)) => {
                    for item in items {
                        if tx.send(Ok(item)).await.is_err() {
                            return;
                        }
                    }
                    Ok(())
                }
                Ok(FileRead::Large(meta)) => match fetch(store.clone(), meta).await {
                    Ok((meta, body)) => stream_file(&job, &meta, body, &tx).await,
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                let _ = tx.send(Err(e)).await;
                return;
            }
            if tx.is_closed() {
                return;
            }
        }
    });
    rx
}

/// Fetch and decode a small file in a task of its own (so files decode in parallel); leave a
/// large one to `stream_file`.
async fn read_file(
    job: DecodeJob,
    store: Arc<dyn ObjectStore>,
    meta: FileMeta,
) -> SeamResult<FileRead> {
    if meta.size >= DECODE_WHOLE_BELOW {
        return Ok(FileRead::Large(meta));
    }
    let path = meta.path.clone();
    let task = tokio::spawn(async move {
        let (meta, mut body) = fetch(store, meta).await?;
        let mut file = FileDecoder::new(&job, &meta)?;
        let mut out = Vec::new();
        while let Some(chunk) = body.next().await {
            out.extend(file.feed(&job, Some(chunk?))?);
        }
        out.extend(file.feed(&job, None)?);
        Ok(FileRead::Whole(out))
    });
    task.await
        .map_err(|e| SeamError::retryable(format!("{path}: decoding task failed: {e}")))?
}

/// Decode a large file chunk by chunk, sending its partitions as they come.
async fn stream_file(
    job: &DecodeJob,
    meta: &FileMeta,
    mut body: BoxStream<'static, SeamResult<Bytes>>,
    tx: &mpsc::Sender<SeamResult<Decoded>>,
) -> SeamResult<()> {
    let mut file = FileDecoder::new(job, meta)?;
    loop {
        let chunk = match body.next().await {
            Some(c) => Some(c?),
            None => None,
        };
        let done = chunk.is_none();
        for item in file.feed(job, chunk)? {
            if tx.send(Ok(item)).await.is_err() {
                return Ok(());
            }
        }
        if done {
            return Ok(());
        }
    }
}

/// One file being decoded: its decoder, its path partition values, and its row count.
struct FileDecoder {
    path: String,
    decoder: Box<dyn landfall_core::Decoder>,
    constants: Vec<(arrow_schema::FieldRef, Option<String>)>,
    rows: u64,
}

impl FileDecoder {
    fn new(job: &DecodeJob, meta: &FileMeta) -> SeamResult<Self> {
        let schema = &job.schema;
        let decoder = landfall_formats::decoder(
            job.format,
            &meta.path,
            schema.decoded.clone(),
            &job.options,
        )?;
        let hive = hive_partitions(relative_path(&job.prefix, &meta.path));
        let constants = schema
            .path_columns
            .iter()
            .map(|f| {
                (
                    f.clone(),
                    hive.iter()
                        .find(|(k, _)| k == f.name())
                        .and_then(|(_, v)| v.clone()),
                )
            })
            .collect();
        Ok(FileDecoder {
            path: meta.path.clone(),
            decoder,
            constants,
            rows: 0,
        })
    }

    /// Decode a chunk (`None`: the end of the file) into partitions; at the end, `FileDone`.
    fn feed(&mut self, job: &DecodeJob, chunk: Option<Bytes>) -> SeamResult<Vec<Decoded>> {
        let batches = match &chunk {
            Some(c) => self.decoder.push(c.clone())?,
            None => self.decoder.finish()?,
        };
        let mut out = Vec::new();
        for b in batches {
            let b = with_constant_columns(&self.path, b, &self.constants, &job.schema.table)?;
            self.rows += b.num_rows() as u64;
            let parts = crate::partition::split(&b, &job.partition_by)
                .map_err(|e| SeamError::fatal(format!("{}: partitioning: {e}", self.path)))?;
            out.extend(
                parts
                    .into_iter()
                    .map(|(values, part)| Decoded::Rows(values, part)),
            );
        }
        if chunk.is_none() {
            out.push(Decoded::FileDone {
                path: self.path.clone(),
                rows: self.rows,
            });
        }
        Ok(out)
    }
}

/// Open one file for reading: small files are read whole (so several can be in flight), large
/// ones become a stream of chunks.
async fn fetch(
    store: Arc<dyn ObjectStore>,
    meta: FileMeta,
) -> SeamResult<(FileMeta, BoxStream<'static, SeamResult<Bytes>>)> {
    let path =
        Path::parse(&meta.path).map_err(|e| SeamError::fatal(format!("{}: {e}", meta.path)))?;
    let read_err = |e: object_store::Error| match e {
        object_store::Error::NotFound { .. } => SeamError::fatal(format!(
            "{}: the file was discovered but no longer exists (it was deleted or moved before it was read)",
            meta.path
        )),
        other => SeamError::retryable(format!("{}: read failed: {other}", meta.path)),
    };
    let result = store.get(&path).await.map_err(read_err)?;
    let body = if meta.size < FETCH_WHOLE_BELOW {
        let bytes = result.bytes().await.map_err(read_err)?;
        futures::stream::once(async move { Ok(bytes) }).boxed()
    } else {
        let p = meta.path.clone();
        result
            .into_stream()
            .map(move |c| c.map_err(|e| SeamError::retryable(format!("{p}: read failed: {e}"))))
            .boxed()
    };
    Ok((meta, body))
}
