//! The data-file writer shared by both sinks: rows of one batch attempt, split by partition,
//! streamed as Snappy Parquet to the object store, one open file per partition, rolled past the
//! target size.
//!
//! File names carry the batch id and attempt (`part-<batch>-a<attempt>-<uuid>-c<n>.snappy.parquet`)
//! and each name is handed to the `on_new_file` hook, which records it in the state store,
//! before the file is created.

use crate::error::SinkError;
use arrow::array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use landfall_core::StagedFile;
use landfall_core::seams::StagedHook;
use object_store::ObjectStore;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use parquet::arrow::AsyncArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::collections::HashMap;
use std::sync::Arc;

/// Hive's name for a null partition value.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Escape a partition value for a directory name (`%XX` for anything outside `[A-Za-z0-9._-]`).
pub fn escape_partition_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `col=value/...` for a partition, with a trailing slash (empty when unpartitioned).
pub fn partition_dir(columns: &[String], values: &[Option<String>]) -> String {
    columns
        .iter()
        .zip(values)
        .map(|(c, v)| {
            format!(
                "{c}={}/",
                v.as_deref()
                    .map(escape_partition_value)
                    .unwrap_or_else(|| NULL_PARTITION.to_string())
            )
        })
        .collect()
}

/// What every data file of a table shares: its location, schema and partitioning (known once
/// `Committer::prepare` ran) and the size at which files roll.
#[derive(Debug)]
pub struct TableLayout {
    location: String,
    target_file_size: u64,
    shape: std::sync::Mutex<Option<(SchemaRef, Vec<String>)>>,
}

impl TableLayout {
    pub fn new(location: &str, target_file_size: u64) -> Self {
        TableLayout {
            location: location.to_string(),
            target_file_size,
            shape: std::sync::Mutex::new(None),
        }
    }

    pub fn set(&self, schema: SchemaRef, partition_by: &[String]) {
        *self.shape.lock().expect("layout lock") = Some((schema, partition_by.to_vec()));
    }

    fn shape(&self) -> Result<(SchemaRef, Vec<String>), SinkError> {
        self.shape
            .lock()
            .expect("layout lock")
            .clone()
            .ok_or_else(|| SinkError::Io {
                location: self.location.clone(),
                op: "write",
                reason: "prepare() was not called".into(),
            })
    }

    pub fn partition_by(&self) -> Result<Vec<String>, SinkError> {
        Ok(self.shape()?.1)
    }

    /// A writer for one attempt of one batch, writing under `prefix` in `store`.
    pub fn writer(
        &self,
        store: Arc<dyn ObjectStore>,
        batch_id: u64,
        attempt: u32,
        prefix: String,
        on_new_file: StagedHook,
    ) -> Result<PartitionedWriter, SinkError> {
        let (schema, partition_by) = self.shape()?;
        Ok(PartitionedWriter::new(
            self.location.clone(),
            store,
            batch_id,
            attempt,
            prefix,
            &schema,
            partition_by,
            self.target_file_size,
            on_new_file,
        ))
    }
}

struct OpenFile {
    path: String,
    writer: AsyncArrowWriter<BufWriter>,
    rows: u64,
    null_counts: Vec<u64>,
}

/// Writes one attempt of one batch.
pub struct PartitionedWriter {
    location: String,
    store: Arc<dyn ObjectStore>,
    batch_id: u64,
    attempt: u32,
    run: String,
    /// Prepended to every data file path (the Parquet sink stages under `_landfall/`).
    prefix: String,
    partition_by: Vec<String>,
    file_schema: SchemaRef,
    target_file_size: u64,
    on_new_file: StagedHook,
    open: HashMap<Vec<Option<String>>, OpenFile>,
    done: Vec<StagedFile>,
    files_started: u32,
}

impl PartitionedWriter {
    #[allow(clippy::too_many_arguments)]
    fn new(
        location: String,
        store: Arc<dyn ObjectStore>,
        batch_id: u64,
        attempt: u32,
        prefix: String,
        table_schema: &Schema,
        partition_by: Vec<String>,
        target_file_size: u64,
        on_new_file: StagedHook,
    ) -> Self {
        let file_schema = Arc::new(Schema::new(
            table_schema
                .fields()
                .iter()
                .filter(|f| !partition_by.contains(f.name()))
                .cloned()
                .collect::<Vec<_>>(),
        ));
        PartitionedWriter {
            location,
            store,
            batch_id,
            attempt,
            run: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            prefix,
            partition_by,
            file_schema,
            target_file_size,
            on_new_file,
            open: HashMap::new(),
            done: Vec::new(),
            files_started: 0,
        }
    }

    fn err(&self, path: &str, reason: impl ToString) -> SinkError {
        SinkError::Write {
            location: self.location.clone(),
            batch_id: self.batch_id,
            path: path.to_string(),
            reason: reason.to_string(),
        }
    }

    fn project(&self, batch: RecordBatch) -> Result<RecordBatch, SinkError> {
        if self.partition_by.is_empty() {
            return Ok(batch);
        }
        let idx: Vec<usize> = self
            .file_schema
            .fields()
            .iter()
            .map(|f| batch.schema().index_of(f.name()))
            .collect::<Result<_, _>>()
            .map_err(|e| self.err("", e))?;
        batch.project(&idx).map_err(|e| self.err("", e))
    }

    fn open_file(&mut self, values: &[Option<String>]) -> Result<OpenFile, SinkError> {
        self.files_started += 1;
        let path = format!(
            "{}{}part-{:010}-a{}-{}-c{:03}.snappy.parquet",
            self.prefix,
            partition_dir(&self.partition_by, values),
            self.batch_id,
            self.attempt,
            self.run,
            self.files_started
        );
        (self.on_new_file)(&path).map_err(SinkError::Hook)?;
        let object = Path::parse(&path).map_err(|e| self.err(&path, e))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let writer = AsyncArrowWriter::try_new(
            BufWriter::new(self.store.clone(), object),
            self.file_schema.clone(),
            Some(props),
        )
        .map_err(|e| self.err(&path, e))?;
        Ok(OpenFile {
            path,
            writer,
            rows: 0,
            null_counts: vec![0; self.file_schema.fields().len()],
        })
    }

    async fn close(
        &mut self,
        values: Vec<Option<String>>,
        mut f: OpenFile,
    ) -> Result<(), SinkError> {
        f.writer.finish().await.map_err(|e| self.err(&f.path, e))?;
        let size = f.writer.bytes_written() as u64;
        let nulls: serde_json::Map<String, serde_json::Value> = self
            .file_schema
            .fields()
            .iter()
            .zip(&f.null_counts)
            .filter(|(fl, _)| {
                fl.data_type().is_primitive()
                    || matches!(
                        fl.data_type(),
                        arrow_schema::DataType::Utf8 | arrow_schema::DataType::Boolean
                    )
            })
            .map(|(fl, n)| (fl.name().clone(), serde_json::json!(n)))
            .collect();
        let stats = serde_json::json!({ "numRecords": f.rows, "nullCount": nulls }).to_string();
        self.done.push(StagedFile {
            path: f.path,
            size,
            rows: f.rows,
            partition_values: self.partition_by.iter().cloned().zip(values).collect(),
            stats: Some(stats),
        });
        Ok(())
    }

    /// Write rows that all belong to the partition `values` (in `partition_by` order).
    pub async fn write(
        &mut self,
        values: &[Option<String>],
        batch: RecordBatch,
    ) -> Result<(), SinkError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = self.project(batch)?;
        let key = values.to_vec();
        let mut file = match self.open.remove(&key) {
            Some(f) => f,
            None => self.open_file(values)?,
        };
        for (i, c) in batch.columns().iter().enumerate() {
            file.null_counts[i] += c.null_count() as u64;
        }
        file.rows += batch.num_rows() as u64;
        if let Err(e) = file.writer.write(&batch).await {
            return Err(self.err(&file.path, e));
        }
        if file.writer.bytes_written() as u64 + file.writer.in_progress_size() as u64
            >= self.target_file_size
        {
            self.close(key, file).await
        } else {
            self.open.insert(key, file);
            Ok(())
        }
    }

    /// Close every open file and return all files written.
    pub async fn finish(mut self) -> Result<Vec<StagedFile>, SinkError> {
        let open: Vec<_> = self.open.drain().collect();
        for (k, f) in open {
            self.close(k, f).await?;
        }
        Ok(self.done)
    }
}

#[async_trait::async_trait]
impl landfall_core::BatchWriter for PartitionedWriter {
    async fn write(
        &mut self,
        partition_values: &[Option<String>],
        batch: RecordBatch,
    ) -> landfall_core::seams::SeamResult<()> {
        Ok(PartitionedWriter::write(self, partition_values, batch).await?)
    }

    async fn finish(self: Box<Self>) -> landfall_core::seams::SeamResult<Vec<StagedFile>> {
        Ok(PartitionedWriter::finish(*self).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dirs_escape_values() {
        assert_eq!(escape_partition_value("2024-01-02"), "2024-01-02");
        assert_eq!(escape_partition_value("a/b c"), "a%2Fb%20c");
        let cols = vec!["date".to_string(), "region".to_string()];
        assert_eq!(
            partition_dir(&cols, &[Some("2024-01-02".into()), None]),
            "date=2024-01-02/region=__HIVE_DEFAULT_PARTITION__/"
        );
    }
}
