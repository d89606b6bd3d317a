//! One data file's Parquet encoder: a batch's columns are encoded in parallel, each on its own
//! task, and finished row groups are uploaded as they close.
//!
//! arrow-rs's `ArrowWriter` encodes the columns of a batch one after another on the caller's
//! thread. With files decoded on every core, that one thread is the ingest's limit: encoding
//! and compressing a batch is about two fifths of a JSON ingest's CPU. arrow-rs offers the
//! parts to do better ([`ArrowColumnWriter`], one per leaf column): here each top-level column
//! of a batch of at least [`PARALLEL_ROWS`] rows is encoded on a tokio task of its own (a
//! struct's leaves together, on one). Every column is spawned, none encoded inline: tokio
//! keeps the last task a worker spawns in a slot no other worker steals from, so encoding one
//! inline would leave that last column waiting for it (a two-column table would get no
//! parallelism). Smaller batches are encoded in place, where a task would cost more than it
//! saves. The tasks are aborted when the write is dropped or fails.
//!
//! What comes out is what `ArrowWriter` makes of the same properties: the same row groups
//! (cut at `max_row_group_row_count` rows), the same pages and encodings, the Arrow schema in
//! the footer's key-value metadata (the writer is made by `ArrowWriter` and taken apart with
//! `into_serialized_writer`). A row group's encoded pages stay in memory until it closes, as
//! with `ArrowWriter`; then its bytes go to the upload. The properties `ArrowWriter` honours
//! and this encoder does not (`max_row_group_bytes`, content-defined chunking) are refused.
//!
//! After any error, and after a write or finish whose future was dropped before it ended, the
//! encoder refuses every further call, so a file can never be finished with a column's rows
//! missing; it can only be abandoned ([`FileEncoder::abandon`]).

use arrow::array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use object_store::buffered::BufWriter;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{
    ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory, compute_leaves,
};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

/// Batches of at least this many rows have their columns encoded in parallel.
pub(crate) const PARALLEL_ROWS: usize = 4096;

/// The column writers of one top-level column (one for a primitive, one per leaf of a
/// struct, list or map), in the file's leaf order.
type ColumnWriters = Vec<ArrowColumnWriter>;

/// One Parquet file being encoded and uploaded.
pub(crate) struct FileEncoder {
    file: SerializedFileWriter<Vec<u8>>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// For each leaf column, its top-level column.
    roots: Vec<usize>,
    /// The row group in progress: its writers by top-level column, and its rows.
    group: Option<Vec<ColumnWriters>>,
    group_rows: usize,
    max_group_rows: usize,
    upload: BufWriter,
    /// Set while a write or finish is under way and left set by any error (or by a dropped
    /// future): the file is incomplete and can only be abandoned.
    failed: bool,
    /// The upload's shutdown has begun: object_store's `BufWriter` cannot be aborted then.
    shut_down: bool,
}

/// Column tasks, aborted if dropped before they are all awaited (a failed column, a dropped
/// write): no task goes on encoding rows nobody will write.
struct ColumnTasks(Vec<JoinHandle<Result<ColumnWriters>>>);

impl Drop for ColumnTasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

fn external(e: impl std::error::Error + Send + Sync + 'static) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl FileEncoder {
    /// An encoder of files of `schema` with `props`, uploading to `upload`.
    pub(crate) fn try_new(
        upload: BufWriter,
        schema: SchemaRef,
        props: WriterProperties,
    ) -> Result<Self> {
        if props.max_row_group_bytes().is_some() || props.content_defined_chunking().is_some() {
            return Err(ParquetError::General(
                "the file encoder cuts row groups by rows only and does not chunk by content"
                    .into(),
            ));
        }
        let max_group_rows = props.max_row_group_row_count().unwrap_or(usize::MAX);
        let (file, factory) = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))?
            .into_serialized_writer()?;
        let descr = file.schema_descr();
        let roots = (0..descr.num_columns())
            .map(|leaf| descr.get_column_root_idx(leaf))
            .collect();
        Ok(FileEncoder {
            file,
            factory,
            schema,
            roots,
            group: None,
            group_rows: 0,
            max_group_rows: max_group_rows.max(1),
            upload,
            failed: false,
            shut_down: false,
        })
    }

    /// Bytes in finished row groups (and the header; the footer too after [`Self::finish`]).
    pub(crate) fn bytes_written(&self) -> usize {
        self.file.bytes_written()
    }

    /// The encoded size of the row group in progress (arrow-rs's estimate).
    pub(crate) fn in_progress_size(&self) -> usize {
        self.group
            .iter()
            .flatten()
            .flatten()
            .map(|w| w.get_estimated_total_bytes())
            .sum()
    }

    fn check(&self) -> Result<()> {
        if self.failed {
            return Err(ParquetError::General(
                "the file's encoder failed earlier; it can only be abandoned".into(),
            ));
        }
        Ok(())
    }

    /// Encode `batch` (of the file's schema), closing row groups as they fill.
    pub(crate) async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.check()?;
        if batch.num_columns() != self.schema.fields().len() {
            // Checked here: the zip below would drop the missing columns' writers, and the
            // row group would only fail when it closes, batches later.
            return Err(ParquetError::General(format!(
                "a batch of {} columns for a file of {}",
                batch.num_columns(),
                self.schema.fields().len()
            )));
        }
        // Set until the write ends well: a write dropped midway (its row group taken, its
        // bytes half uploaded) leaves the file unfinishable.
        self.failed = true;
        self.write_rows(batch).await?;
        self.failed = false;
        Ok(())
    }

    async fn write_rows(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let n = (self.max_group_rows - self.group_rows).min(batch.num_rows() - offset);
            let part = if n == batch.num_rows() {
                batch.clone()
            } else {
                batch.slice(offset, n)
            };
            self.encode(part).await?;
            offset += n;
            if self.group_rows >= self.max_group_rows {
                self.close_group().await?;
            }
        }
        Ok(())
    }

    /// The writers of a new row group, by top-level column.
    fn new_group(&self) -> Result<Vec<ColumnWriters>> {
        let writers = self
            .factory
            .create_column_writers(self.file.flushed_row_groups().len())?;
        let mut by_column: Vec<ColumnWriters> = (0..self.schema.fields().len())
            .map(|_| Vec::new())
            .collect();
        for (writer, &root) in writers.into_iter().zip(&self.roots) {
            by_column[root].push(writer);
        }
        Ok(by_column)
    }

    /// Encode rows that fit in the row group in progress.
    async fn encode(&mut self, batch: RecordBatch) -> Result<()> {
        let group = match self.group.take() {
            Some(group) => group,
            None => self.new_group()?,
        };
        let mut work = Vec::with_capacity(group.len());
        for ((writers, field), column) in group
            .into_iter()
            .zip(self.schema.fields())
            .zip(batch.columns())
        {
            work.push((writers, compute_leaves(field, column)?));
        }
        let group = if batch.num_rows() >= PARALLEL_ROWS && work.len() > 1 {
            let mut tasks = ColumnTasks(
                work.into_iter()
                    .map(|(writers, leaves)| {
                        tokio::spawn(async move { encode_column(writers, leaves) })
                    })
                    .collect(),
            );
            let mut group = Vec::with_capacity(tasks.0.len());
            for task in &mut tasks.0 {
                group.push(task.await.map_err(external)??);
            }
            group
        } else {
            work.into_iter()
                .map(|(writers, leaves)| encode_column(writers, leaves))
                .collect::<Result<_>>()?
        };
        self.group = Some(group);
        self.group_rows += batch.num_rows();
        Ok(())
    }

    /// Close the row group in progress, if any, and upload its bytes.
    async fn close_group(&mut self) -> Result<()> {
        if let Some(group) = self.group.take() {
            let mut row_group = self.file.next_row_group()?;
            for writer in group.into_iter().flatten() {
                writer.close()?.append_to_row_group(&mut row_group)?;
            }
            row_group.close()?;
            self.group_rows = 0;
        }
        self.upload_buffered().await
    }

    async fn upload_buffered(&mut self) -> Result<()> {
        let bytes = std::mem::take(self.file.inner_mut());
        if !bytes.is_empty() {
            self.upload
                .put(Bytes::from(bytes))
                .await
                .map_err(external)?;
        }
        Ok(())
    }

    /// Close the last row group, write the footer and complete the upload; the footer's
    /// metadata is returned.
    pub(crate) async fn finish(&mut self) -> Result<ParquetMetaData> {
        self.check()?;
        // A failed finish leaves nothing to retry: the upload may be shut down.
        self.failed = true;
        self.close_group().await?;
        let footer = self.file.finish()?;
        self.upload_buffered().await?;
        self.shut_down = true;
        self.upload.shutdown().await.map_err(external)?;
        self.failed = false;
        Ok(footer)
    }

    /// Abandon the upload after a failure: a multipart upload already begun is aborted.
    /// After the upload's shutdown has begun there is nothing left to abort (and object_store's
    /// `BufWriter` would panic): `Ok` then, as the store either has the whole file or, for a
    /// multipart upload the store did not complete, expires it by its own lifecycle rules.
    pub(crate) async fn abandon(mut self) -> object_store::Result<()> {
        if self.shut_down {
            return Ok(());
        }
        self.upload.abort().await
    }
}

/// Encode one top-level column's leaves with its writers.
fn encode_column(
    mut writers: ColumnWriters,
    leaves: Vec<ArrowLeafColumn>,
) -> Result<ColumnWriters> {
    if writers.len() != leaves.len() {
        return Err(ParquetError::General(format!(
            "a column has {} leaves for {} column writers",
            leaves.len(),
            writers.len()
        )));
    }
    for (writer, leaf) in writers.iter_mut().zip(&leaves) {
        writer.write(leaf)?;
    }
    Ok(writers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        ArrayRef, Int32Array, Int64Array, ListArray, MapBuilder, StringArray, StringBuilder,
        StructArray,
    };
    use arrow::buffer::NullBuffer;
    use arrow::datatypes::Int32Type;
    use arrow_schema::{DataType, Field, Schema};
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{ObjectStore, ObjectStoreExt};
    use std::sync::Arc;

    /// Rows `start..start + n` of a table with a primitive, a string, a struct, a list and a
    /// map column, nulls in each.
    fn rows(start: i64, n: usize) -> RecordBatch {
        let ids: Vec<i64> = (start..start + n as i64).collect();
        let id = Int64Array::from(ids.clone());
        let name = StringArray::from_iter(
            ids.iter()
                .map(|i| (i % 7 != 0).then(|| format!("name-{}", i % 50))),
        );
        let point = StructArray::new(
            vec![
                Field::new("x", DataType::Int32, true),
                Field::new("label", DataType::Utf8, true),
            ]
            .into(),
            vec![
                Arc::new(Int32Array::from_iter(
                    ids.iter().map(|i| Some(*i as i32 * 3)),
                )) as ArrayRef,
                Arc::new(StringArray::from_iter(
                    ids.iter().map(|i| (i % 3 == 0).then(|| format!("l{i}"))),
                )),
            ],
            Some(NullBuffer::from_iter(ids.iter().map(|i| i % 11 != 0))),
        );
        let tags = ListArray::from_iter_primitive::<Int32Type, _, _>(ids.iter().map(|i| {
            (i % 5 != 0).then(|| {
                (0..(i % 4) as i32)
                    .map(|k| (k % 2 == 0).then_some(k))
                    .collect::<Vec<_>>()
            })
        }));
        let mut attrs = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        for i in &ids {
            if i % 13 == 0 {
                attrs.append(false).unwrap();
                continue;
            }
            for k in 0..(i % 3) {
                attrs.keys().append_value(format!("k{k}"));
                attrs
                    .values()
                    .append_option((k != 1).then(|| format!("v{i}")));
            }
            attrs.append(true).unwrap();
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(id),
            Arc::new(name),
            Arc::new(point),
            Arc::new(tags),
            Arc::new(attrs.finish()),
        ];
        let fields: Vec<Field> = ["id", "name", "point", "tags", "attrs"]
            .iter()
            .zip(&columns)
            .map(|(n, c)| Field::new(*n, c.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    fn props() -> WriterProperties {
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(10_000))
            .build()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parallel_columns_make_the_file_arrow_writer_makes() {
        // Batches above and below the parallel threshold, crossing row groups of 10,000 rows.
        let sizes = [5_000, 12, 8_192, 4_095, 4_096, 30_000, 1, 7];
        let mut batches = Vec::new();
        let mut start = 0;
        for n in sizes {
            batches.push(rows(start, n));
            start += n as i64;
        }
        let schema = batches[0].schema();
        let mut expected = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props())).unwrap();
        for b in &batches {
            expected.write(b).unwrap();
        }
        let expected_meta = expected.finish().unwrap();
        let expected = std::mem::take(expected.inner_mut());

        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("t/f.parquet");
        let mut encoder =
            FileEncoder::try_new(BufWriter::new(store.clone(), path.clone()), schema, props())
                .unwrap();
        for b in &batches {
            encoder.write(b).await.unwrap();
        }
        let meta = encoder.finish().await.unwrap();
        let written = store.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(meta.num_row_groups(), 6);
        assert_eq!(meta.num_row_groups(), expected_meta.num_row_groups());
        assert_eq!(encoder.bytes_written(), written.len());
        assert!(
            written.as_ref() == expected.as_slice(),
            "the same bytes as ArrowWriter's"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn after_a_failed_write_the_file_cannot_be_finished() {
        let good = rows(0, 5_000);
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("t/f.parquet");
        let mut encoder = FileEncoder::try_new(
            BufWriter::new(store.clone(), path.clone()),
            good.schema(),
            props(),
        )
        .unwrap();
        encoder.write(&good).await.unwrap();
        // A batch whose `id` is not an Int64: the encoder of that column rejects it.
        let mut columns = good.columns().to_vec();
        columns[0] = Arc::new(StringArray::from_iter_values(
            (0..5_000).map(|i| i.to_string()),
        ));
        let bad = RecordBatch::try_from_iter(
            good.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .zip(columns),
        )
        .unwrap();
        assert!(encoder.write(&bad).await.is_err());
        assert!(
            encoder.write(&good).await.is_err(),
            "refused after a failure"
        );
        assert!(
            encoder.finish().await.is_err(),
            "never finished with rows missing"
        );
        encoder.abandon().await.unwrap();
        assert!(store.get(&path).await.is_err(), "nothing was created");
    }

    /// A write dropped while its columns are being encoded (a `select!`, a shutdown) has
    /// taken the row group in progress with it: the file must not be finished without it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_dropped_midway_leaves_a_file_that_cannot_be_finished() {
        let first = rows(0, 5_000);
        let big = rows(5_000, 200_000);
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("t/f.parquet");
        let mut encoder = FileEncoder::try_new(
            BufWriter::new(store.clone(), path.clone()),
            first.schema(),
            props(),
        )
        .unwrap();
        encoder.write(&first).await.unwrap();
        // Polled once, then dropped: its column tasks cannot have encoded 10,000 rows yet.
        let dropped = tokio::time::timeout(std::time::Duration::ZERO, encoder.write(&big)).await;
        assert!(dropped.is_err(), "the write was dropped midway");
        assert!(encoder.write(&first).await.is_err(), "refused after a drop");
        assert!(
            encoder.finish().await.is_err(),
            "never finished without its rows"
        );
        encoder.abandon().await.unwrap();
        assert!(store.get(&path).await.is_err(), "nothing was created");
    }

    #[test]
    fn a_batch_missing_columns_and_properties_it_cannot_honour_are_refused() {
        let good = rows(0, 10);
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let upload = || BufWriter::new(store.clone(), Path::from("t/f.parquet"));
        let by_bytes = WriterProperties::builder()
            .set_max_row_group_bytes(Some(1 << 20))
            .build();
        assert!(FileEncoder::try_new(upload(), good.schema(), by_bytes).is_err());
        let mut encoder = FileEncoder::try_new(upload(), good.schema(), props()).unwrap();
        let short = good.project(&[0, 1]).unwrap();
        let err = futures::executor::block_on(encoder.write(&short)).unwrap_err();
        assert!(
            err.to_string().contains("2 columns for a file of 5"),
            "{err}"
        );
    }
}
