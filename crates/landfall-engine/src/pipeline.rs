//! The read side of a batch, run as its own task ahead of the writer: fetch files (small ones
//! whole, several in flight; large ones streamed), decode them, add the path partition columns
//! and split rows by the table's partition columns. The writer receives ready partitions over a
//! bounded channel, so memory stays bounded and decoding overlaps Parquet encoding.
//!
//! Every file is read pinned to what discovery listed (see [`crate::pinned`]). A file that
//! changed since it was listed is never read half-new: it is reported as
//! [`Decoded::FileUnreadable`] with reason `changed_after_listing`. A file gone is `missing`; a
//! file that does not decode is `corrupt`. The worker decides what each means (skip it, or stop
//! the stream); other errors (network) fail the batch as retryable.
//!
//! Large line-delimited JSON files are cut at newlines and decoded on every core
//! ([`crate::split`]); other large files are decoded in order as their pieces come.
//! Large Parquet files are not streamed as bytes: their footer is read first, then one row
//! group at a time through ranged reads, so memory follows the row group, not the file.

use crate::pinned::{Body, FileError, PinnedReader, fetch, stream_files_from};
use crate::schema::StreamSchema;
use arrow::array::RecordBatch;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use landfall_core::seams::SeamResult;
use landfall_core::{FileKey, FileMeta, SeamError, SkipReason};
use landfall_discovery::{display_path, hive_partitions, relative_path};
use landfall_formats::{Constant, DecodeOptions, FileFormat, with_constant_columns};
use object_store::ObjectStore;
use object_store::path::Path;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc;
/// Files fetched ahead of the decoder (at most this many small files in memory).
const PREFETCH_FILES: usize = 16;
/// The read-ahead budget [`files_ahead`] divides by the mean size of the files read whole:
/// 24 MiB holds two of the 10 MB files of the benchmark's large shape.
const PREFETCH_BYTES: u64 = 24 << 20;

/// How many files are read and decoded ahead of the writer: [`PREFETCH_BYTES`] over the mean
/// size of the batch's files read whole (`sizes`; streamed and skipped files are left out),
/// between 2 and four per core ([`PREFETCH_FILES`] at most). Small files need many in flight
/// to keep the cores busy (20,000 files of 2 KB: 0.80 s with 8, 1.10 s with 2); large ones
/// only hold memory (100 files of 10 MB: the same time, and 150 MB instead of 215 MB, with
/// 2). The memory bound is still the count's: four files per core of up to 16 MiB each.
fn files_ahead(sizes: &[u64], cores: usize) -> usize {
    let most = PREFETCH_FILES.min(cores * 4).max(2);
    if sizes.is_empty() {
        return 2;
    }
    let mean = (sizes.iter().sum::<u64>() / sizes.len() as u64).max(1);
    usize::try_from(PREFETCH_BYTES / mean)
        .unwrap_or(usize::MAX)
        .clamp(2, most)
}

/// Decoded partitions waiting for the writer.
const DECODED_AHEAD: usize = 8;

/// What the read side needs to know, owned so it can run in its own task.
#[derive(Clone)]
pub struct DecodeJob {
    pub format: FileFormat,
    pub options: DecodeOptions,
    pub schema: StreamSchema,
    pub partition_by: Vec<String>,
    /// How partition values are written (the sink's format).
    pub partition_style: crate::partition::Style,
    pub prefix: Path,
    /// The source as the user wrote it, to show object paths in messages.
    pub source: url::Url,
    /// Files larger are skipped as `too_large` before they are read (binary_file).
    pub max_file_size: Option<u64>,
}

impl DecodeJob {
    pub(crate) fn show(&self, object_path: &str) -> String {
        display_path(&self.source, object_path)
    }
}

/// One message to the writer.
pub enum Decoded {
    /// Rows that all belong to one partition (values in `partition_by` order).
    Rows(Vec<Option<String>>, arrow::array::RecordBatch),
    /// Malformed records met so far, in detail (only with `bad_records_path`).
    Malformed(Vec<landfall_core::MalformedRecord>),
    /// A file was read completely. `malformed`: rows that did not fit the schema (kept with
    /// nulls where the values did not fit).
    FileDone {
        path: String,
        rows: u64,
        malformed: u64,
        /// Rows with a value in the rescued-data column.
        rescued: u64,
        /// Columns the file holds and the schema lacks (when the policy looks for them).
        new_columns: Vec<arrow_schema::Field>,
    },
    /// A file could not be read as listed. `partial`: some of its rows were already sent (a
    /// large file that failed midway), so this attempt cannot commit without them.
    FileUnreadable {
        key: FileKey,
        path: String,
        reason: SkipReason,
        partial: bool,
    },
}

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
    files: Vec<(FileKey, FileMeta)>,
) -> mpsc::Receiver<SeamResult<Decoded>> {
    let (tx, rx) = mpsc::channel(DECODED_AHEAD);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sizes: Vec<u64> = files
        .iter()
        .filter(|(_, m)| reads_whole(&job, m))
        .map(|(_, m)| m.size)
        .collect();
    tokio::spawn(async move {
        let (job2, store2) = (job.clone(), store.clone());
        let mut reads = futures::stream::iter(files)
            .map(move |(key, meta)| {
                let read = read_file(job2.clone(), store2.clone(), meta.clone());
                async move { (key, meta, read.await) }
            })
            .buffered(files_ahead(&sizes, cores))
            .boxed();
        while let Some((key, meta, next)) = reads.next().await {
            let mut sent = false;
            let result = match next {
                Ok(FileRead::Whole(items)) => {
                    for item in items {
                        if tx.send(Ok(item)).await.is_err() {
                            return;
                        }
                    }
                    Ok(())
                }
                Ok(FileRead::Large(meta))
                    if matches!(job.format, FileFormat::Parquet | FileFormat::Orc) =>
                {
                    stream_columnar(&job, store.clone(), &meta, &tx, &mut sent).await
                }
                Ok(FileRead::Large(meta)) => match fetch(store.clone(), meta).await {
                    Ok((meta, body))
                        if landfall_formats::splits_at_newlines(
                            job.format,
                            &meta.path,
                            &job.options,
                        ) =>
                    {
                        crate::split::decode_large(&job, &meta, body, &tx, &mut sent, cores).await
                    }
                    Ok((meta, body)) => stream_file(&job, &meta, body, &tx, &mut sent).await,
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            let item = match result {
                Ok(()) => None,
                Err(FileError::Unreadable(reason)) => Some(Ok(Decoded::FileUnreadable {
                    key,
                    path: meta.path.clone(),
                    reason,
                    partial: sent,
                })),
                Err(FileError::Transient(e)) => Some(Err(e)),
            };
            if let Some(item) = item {
                let stop = item.is_err();
                if tx.send(item).await.is_err() || stop {
                    return;
                }
            }
            if tx.is_closed() {
                return;
            }
        }
    });
    rx
}

/// The size from which `meta` is streamed instead of read whole: a compressed file may
/// inflate a thousandfold or more, so it is always streamed (its decoded rows flow to the
/// writer as they come instead of being held for the whole file).
fn streamed_from(job: &DecodeJob, meta: &FileMeta) -> u64 {
    match landfall_formats::Codec::of(&meta.path) {
        Some(_) if job.format != FileFormat::BinaryFile => 0,
        _ => stream_files_from(),
    }
}

/// Whether `meta` is read whole and decoded in a task of its own ([`read_file`]), neither
/// skipped nor streamed.
fn reads_whole(job: &DecodeJob, meta: &FileMeta) -> bool {
    meta.size > 0
        && job.max_file_size.is_none_or(|max| meta.size <= max)
        && meta.size < streamed_from(job, meta)
}

/// Start fetching and decoding a small file in a task of its own, now (so files decode in
/// parallel as soon as they enter the read-ahead window, not when the window is next
/// polled); leave a large one to `stream_file`.
fn read_file(
    job: DecodeJob,
    store: Arc<dyn ObjectStore>,
    meta: FileMeta,
) -> BoxFuture<'static, Result<FileRead, FileError>> {
    // Recorded, never read: a zero-byte Parquet or ORC file is no file of its format, and a
    // zero-byte text file has no rows.
    if meta.size == 0 {
        return futures::future::ready(Err(FileError::Unreadable(landfall_core::SkipReason {
            kind: landfall_core::SkipKind::Empty,
            detail: "0 bytes when discovered".into(),
        })))
        .boxed();
    }
    if let Some(max) = job.max_file_size
        && meta.size > max
    {
        return futures::future::ready(Err(FileError::Unreadable(landfall_core::SkipReason {
            kind: landfall_core::SkipKind::TooLarge,
            detail: format!(
                "{} bytes, more than binary_file.max_file_size ({max} bytes)",
                meta.size
            ),
        })))
        .boxed();
    }
    if !reads_whole(&job, &meta) {
        return futures::future::ready(Ok(FileRead::Large(meta))).boxed();
    }
    let path = meta.path.clone();
    let task = tokio::spawn(async move {
        let (meta, body) = fetch(store, meta).await?;
        let out = FileDecoder::open(&job, &meta)?
            .decoded(&job, body)
            .try_collect()
            .await?;
        Ok(FileRead::Whole(out))
    });
    async move { joined(&path, task.await) }.boxed()
}

/// The result of a file's decoding task; a task that panicked or was cancelled is a transient
/// failure of the batch, naming the file.
pub(crate) fn joined<T>(
    path: &str,
    result: Result<Result<T, FileError>, tokio::task::JoinError>,
) -> Result<T, FileError> {
    result.map_err(|e| {
        FileError::Transient(SeamError::retryable(format!(
            "{path}: decoding task failed: {e}"
        )))
    })?
}

/// Decode a large file chunk by chunk, sending its partitions as they come.
pub(crate) async fn stream_file(
    job: &DecodeJob,
    meta: &FileMeta,
    body: Body,
    tx: &mpsc::Sender<SeamResult<Decoded>>,
    sent: &mut bool,
) -> Result<(), FileError> {
    let mut items = FileDecoder::open(job, meta)?.decoded(job, body);
    while let Some(item) = items.try_next().await? {
        *sent = true;
        if tx.send(Ok(item)).await.is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// Read a large Parquet (ORC) file row group (stripe) by row group with pinned ranged reads,
/// sending its partitions as they come.
async fn stream_columnar(
    job: &DecodeJob,
    store: Arc<dyn ObjectStore>,
    meta: &FileMeta,
    tx: &mpsc::Sender<SeamResult<Decoded>>,
    sent: &mut bool,
) -> Result<(), FileError> {
    let shown = job.show(&meta.path);
    let (reader, failure) = PinnedReader::new(store, meta)?;
    // A failed read says why (missing, changed, transient); anything else is the file's content.
    let fail = |e: landfall_formats::FormatError| {
        failure
            .take()
            .unwrap_or_else(|| FileError::corrupt(&shown)(e.into()))
    };
    let mut file = FileDecoder::open(job, meta)?;
    let (schema, size) = (job.schema.decoded.clone(), job.options.batch_size);
    let policy = job.options.policy.clone();
    let (mut batches, conformer) = if job.format == FileFormat::Orc {
        let reader = crate::pinned::PinnedOrcReader::new(reader);
        landfall_formats::orc_batches(&shown, reader, schema, size, policy).await
    } else {
        landfall_formats::parquet_batches(&shown, reader, schema, size, policy).await
    }
    .map_err(fail)?;
    file.conformer = Some(conformer);
    loop {
        let batch = match batches.next().await {
            Some(b) => Some(b.map_err(fail)?),
            None => None,
        };
        let done = batch.is_none();
        for item in file.emit(job, batch.into_iter().collect(), done)? {
            *sent = true;
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
pub(crate) struct FileDecoder {
    path: String,
    /// The path as the user wrote the source, for errors.
    shown: String,
    decoder: Box<dyn landfall_core::Decoder>,
    constants: Vec<(arrow_schema::FieldRef, Constant)>,
    rows: u64,
    /// A Parquet or ORC file read by ranges: its batches are conformed here, not by `decoder`.
    conformer: Option<std::sync::Arc<std::sync::Mutex<landfall_formats::Conformer>>>,
}

impl FileDecoder {
    pub(crate) fn new(job: &DecodeJob, meta: &FileMeta) -> SeamResult<Self> {
        let schema = &job.schema;
        // Decode errors name the file as the user wrote the source.
        let decoder = landfall_formats::decoder(
            job.format,
            &job.show(&meta.path),
            meta,
            schema.decoded.clone(),
            &job.options,
        )?;
        let hive = hive_partitions(relative_path(&job.prefix, &meta.path));
        let shown = job.show(&meta.path);
        let constants = schema
            .path_columns
            .iter()
            .map(|f| {
                let value = if f.name() == landfall_formats::METADATA_COLUMN {
                    Constant::Row(
                        landfall_formats::metadata_row(f, &shown, meta)
                            .map_err(|e| SeamError::fatal(format!("{shown}: {e}")))?,
                    )
                } else {
                    Constant::Text(
                        hive.iter()
                            .find(|(k, _)| k == f.name())
                            .and_then(|(_, v)| v.clone()),
                    )
                };
                Ok((f.clone(), value))
            })
            .collect::<SeamResult<_>>()?;
        Ok(FileDecoder {
            path: meta.path.clone(),
            shown: job.show(&meta.path),
            decoder,
            constants,
            rows: 0,
            conformer: None,
        })
    }

    /// [`FileDecoder::new`], a failure of which says the file is corrupt.
    pub(crate) fn open(job: &DecodeJob, meta: &FileMeta) -> Result<Self, FileError> {
        Self::new(job, meta).map_err(FileError::corrupt(&job.show(&meta.path)))
    }

    /// Everything decoded from `body`, in order and as it comes, `FileDone` last; the first
    /// failure (of a read or of the file) ends it.
    pub(crate) fn decoded<'a>(
        self,
        job: &'a DecodeJob,
        body: Body,
    ) -> BoxStream<'a, Result<Decoded, FileError>> {
        let state = (self, body, VecDeque::new(), false);
        futures::stream::try_unfold(
            state,
            move |(mut file, mut body, mut ready, mut done)| async move {
                loop {
                    if let Some(item) = ready.pop_front() {
                        return Ok(Some((item, (file, body, ready, done))));
                    }
                    if done {
                        return Ok(None);
                    }
                    let chunk = match body.next().await {
                        Some(c) => Some(c?),
                        None => None,
                    };
                    done = chunk.is_none();
                    ready.extend(file.feed(job, chunk)?);
                }
            },
        )
        .boxed()
    }

    /// Decode a part of the file starting at 1-based `line`, byte `offset` (split.rs).
    pub(crate) fn start_at(&mut self, line: u64, offset: u64) {
        self.decoder.start_at(line, offset);
    }

    /// Decode a chunk (`None`: the end of the file) into partitions; at the end, `FileDone`.
    /// Only the decoder's errors say the file is corrupt; errors adding path columns or
    /// splitting partitions are the stream's (its schema, its partitioning) and stop it.
    pub(crate) fn feed(
        &mut self,
        job: &DecodeJob,
        chunk: Option<Bytes>,
    ) -> Result<Vec<Decoded>, FileError> {
        let decoded = match &chunk {
            Some(c) => self.decoder.push(c.clone()),
            None => self.decoder.finish(),
        };
        let batches = decoded.map_err(FileError::corrupt(&self.shown))?;
        let bad = self.decoder.take_malformed();
        let mut out = self.emit(job, batches, chunk.is_none())?;
        if !bad.is_empty() {
            out.insert(0, Decoded::Malformed(bad));
        }
        Ok(out)
    }

    /// Add the path columns to decoded `batches` and split them into partitions; `done`: the
    /// file is complete, so `FileDone` follows.
    fn emit(
        &mut self,
        job: &DecodeJob,
        batches: Vec<RecordBatch>,
        done: bool,
    ) -> Result<Vec<Decoded>, FileError> {
        let not_the_file = |e: SeamError| FileError::Transient(SeamError::fatal(e.message));
        let mut out = Vec::new();
        for b in batches {
            let b = with_constant_columns(&self.shown, b, &self.constants, &job.schema.table)
                .map_err(|e| not_the_file(e.into()))?;
            self.rows += b.num_rows() as u64;
            let parts = crate::partition::split(&b, &job.partition_by, job.partition_style)
                .map_err(|e| {
                    not_the_file(SeamError::fatal(format!(
                        "{}: partitioning: {e}",
                        self.shown
                    )))
                })?;
            out.extend(
                parts
                    .into_iter()
                    .map(|(values, part)| Decoded::Rows(values, part)),
            );
        }
        if done {
            let (rescued, new_columns) = match &self.conformer {
                Some(c) => {
                    let c = c.lock().unwrap_or_else(|e| e.into_inner());
                    (c.rescued_rows, c.new_columns.fields().to_vec())
                }
                None => (self.decoder.rescued_rows(), self.decoder.new_columns()),
            };
            out.push(Decoded::FileDone {
                path: self.path.clone(),
                rows: self.rows,
                malformed: self.decoder.malformed_rows(),
                rescued,
                new_columns,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_ahead_follow_the_files_size() {
        // Small files: four per core; 10 MB files: two; between, what fits in the budget.
        assert_eq!(files_ahead(&vec![2_000; 1000], 2), 8);
        assert_eq!(files_ahead(&vec![10 << 20; 100], 2), 2);
        assert_eq!(files_ahead(&vec![4 << 20; 100], 2), 6);
        assert_eq!(files_ahead(&vec![2_000; 1000], 8), PREFETCH_FILES);
        assert_eq!(files_ahead(&[], 1), 2);
        assert_eq!(files_ahead(&[1, 1], 1), 4);
    }
}
