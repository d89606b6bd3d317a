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

/// Start reading `files` in order; the receiver yields their rows, then closes. The first error
/// is sent and ends the task; dropping the receiver stops it.
pub fn spawn(
    job: DecodeJob,
    store: Arc<dyn ObjectStore>,
    files: Vec<FileMeta>,
) -> mpsc::Receiver<SeamResult<Decoded>> {
    let (tx, rx) = mpsc::channel(DECODED_AHEAD);
    tokio::spawn(async move {
        let mut fetched = futures::stream::iter(files)
            .map(move |meta| fetch(store.clone(), meta))
            .buffered(PREFETCH_FILES)
            .boxed();
        while let Some(next) = fetched.next().await {
            let result = match next {
                Ok((meta, body)) => decode_file(&job, &meta, body, &tx).await,
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

/// Decode one file and send its partitions. Errors carry the path.
async fn decode_file(
    job: &DecodeJob,
    meta: &FileMeta,
    mut body: BoxStream<'static, SeamResult<Bytes>>,
    tx: &mpsc::Sender<SeamResult<Decoded>>,
) -> SeamResult<()> {
    let schema = &job.schema;
    let mut decoder =
        landfall_formats::decoder(job.format, &meta.path, schema.decoded.clone(), &job.options)?;
    let hive = hive_partitions(relative_path(&job.prefix, &meta.path));
    let constants: Vec<_> = schema
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
    let mut rows = 0u64;
    loop {
        let chunk = body.next().await;
        let done = chunk.is_none();
        let batches = match chunk {
            Some(c) => decoder.push(c?)?,
            None => decoder.finish()?,
        };
        for b in batches {
            let b = with_constant_columns(&meta.path, b, &constants, &schema.table)?;
            rows += b.num_rows() as u64;
            let parts = crate::partition::split(&b, &job.partition_by)
                .map_err(|e| SeamError::fatal(format!("{}: partitioning: {e}", meta.path)))?;
            for (values, part) in parts {
                if tx.send(Ok(Decoded::Rows(values, part))).await.is_err() {
                    return Ok(());
                }
            }
        }
        if done {
            break;
        }
    }
    let _ = tx
        .send(Ok(Decoded::FileDone {
            path: meta.path.clone(),
            rows,
        }))
        .await;
    Ok(())
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
