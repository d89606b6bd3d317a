//! The data-file writer shared by both sinks: rows of one batch attempt, split by partition,
//! streamed as Snappy Parquet to the object store, one open file per partition, rolled past the
//! target size.
//!
//! File names carry the batch id and attempt (`part-<batch>-a<attempt>-<uuid>-c<n>.snappy.parquet`)
//! and each name is handed to the `on_new_file` hook, which records it in the state store,
//! before the file is created.
//!
//! Partition directories are `col=value/`, escaped as Hive and Spark escape them
//! ([`escape_partition_value`]); a value whose directory name would not fit a file system's
//! 255-byte name limit fails the write with an error naming the column and value. The
//! [`StagedFile::path`] is the object key exactly as created (escapes and all); the Delta
//! committer URI-encodes it into the `add` action's `path` as Delta writers do
//! (`delta::kernel::encode_path`) and readers decode it, so the log and the file agree (`%` in
//! a directory name is `%25` in the log).
//!
//! Each file's `stats` come from the batches as they are written and, for strings, from the
//! Parquet footer the writer computes anyway ([`stats`]).
//!
//! Small batches (the rows of small files, a file's last rows) are gathered per open file into
//! batches of up to [`COALESCED_ROWS`] rows or [`GATHERED_BYTES`] (arrow's `concat_batches`)
//! before they reach the Parquet writer, whose cost per call and
//! column dwarfs a batch of a few rows; larger batches go to it as they come, after what is
//! gathered. The Parquet writer of a file is made when its first rows are written, so the
//! columns that get no dictionary can be chosen on them ([`dictionary`]). It encodes the
//! columns of a large batch in parallel ([`encoder`]).

use crate::error::SinkError;
use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow_schema::{Schema, SchemaRef};
use landfall_core::StagedFile;
use landfall_core::seams::StagedHook;
use object_store::ObjectStore;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::collections::HashMap;
use std::sync::Arc;

mod dictionary;
mod encoder;
pub mod stats;

/// Hive's name for a null partition value.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The longest file or directory name most file systems allow (ext4, XFS, APFS, NTFS: 255).
pub const MAX_NAME_BYTES: usize = 255;

/// Whether Hive/Spark escape `c` in a partition directory name: Spark's
/// `ExternalCatalogUtils.escapePathName` (the same set as Hive's `FileUtils.escapePathName`)
/// escapes the control characters U+0001..U+001F, `"#%'*/:=?\` and U+007F `{[]^` (not `}`,
/// not the space). We also escape U+0000, which no file system or object store key accepts.
fn needs_escape(c: char) -> bool {
    c <= '\u{1F}' || "\"#%'*/:=?\\\u{7F}{[]^".contains(c)
}

/// Escape a partition column name or value for a directory name as Spark does: `%XX` for the
/// characters of [`needs_escape`]; everything else, non-ASCII included, is kept as it is.
pub fn escape_partition_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if needs_escape(c) {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `col=value/...` for a partition, with a trailing slash (empty when unpartitioned), or why
/// it cannot be a directory name.
pub fn partition_dir(columns: &[String], values: &[Option<String>]) -> Result<String, String> {
    let mut out = String::new();
    for (c, v) in columns.iter().zip(values) {
        let name = format!(
            "{}={}",
            escape_partition_value(c),
            v.as_deref()
                .map(escape_partition_value)
                .unwrap_or_else(|| NULL_PARTITION.to_string())
        );
        if name.len() > MAX_NAME_BYTES {
            // Said here, where the column and value are known: the store would only report
            // a name-too-long IO error on some path when the file is closed.
            let value = v.as_deref().unwrap_or_default();
            let shown: String = value.chars().take(64).collect();
            let more = if shown.len() < value.len() { "…" } else { "" };
            return Err(format!(
                "partition column `{c}`: the value `{shown}{more}` ({} bytes) makes the \
                 directory name {} bytes long, over the {MAX_NAME_BYTES}-byte limit of file \
                 systems",
                value.len(),
                name.len()
            ));
        }
        out.push_str(&name);
        out.push('/');
    }
    Ok(out)
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

    pub fn target_file_size(&self) -> u64 {
        self.target_file_size
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

/// The Parquet writer properties of a file whose first rows are `first`: Snappy, the string
/// statistics [`stats`] reads from the footer, and dictionaries only where they pay
/// ([`dictionary`]).
pub(crate) fn file_properties(first: &RecordBatch) -> WriterProperties {
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY);
    dictionary::choose(stats::footer_bounds(props), first).build()
}

/// Batches below this many rows are gathered before they are written (see the module docs).
pub const COALESCE_BELOW: usize = 1024;

/// The rows of a gathered batch.
pub const COALESCED_ROWS: usize = 8192;

/// The memory gathered per open file at most (with [`MAX_OPEN_PARTITION_FILES`] open, 64 MiB in
/// all): wide rows in tiny batches are written sooner, in smaller batches.
pub const GATHERED_BYTES: u64 = 1 << 20;

struct OpenFile {
    path: String,
    object: Path,
    /// Made with the first rows written ([`PartitionedWriter::write_rows`]).
    writer: Option<encoder::FileEncoder>,
    /// Small batches not written yet, their rows, and their size in memory (counted towards
    /// the target file size until they are written).
    gathered: Vec<RecordBatch>,
    gathered_rows: usize,
    gathered_bytes: u64,
    rows: u64,
    stats: stats::FileStats,
    /// When rows last went to this file (a write counter), to close the least recently used.
    last_used: u64,
}

/// Partition files open at once per batch attempt. Each holds a row group in memory and an
/// upload in flight; past this many, the least recently used is closed (a later row of its
/// partition starts a new file).
pub const MAX_OPEN_PARTITION_FILES: usize = 64;

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
    /// Writes so far, the clock of `OpenFile::last_used`.
    writes: u64,
    /// The name's middle part instead of `<batch>-a<attempt>` (compaction's files).
    stem: Option<String>,
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
            writes: 0,
            done: Vec::new(),
            files_started: 0,
            stem: None,
        }
    }

    /// Name files `part-<stem>-<run>-c<n>.snappy.parquet` (files no batch writes).
    pub fn with_stem(mut self, stem: &str) -> Self {
        self.stem = Some(stem.to_string());
        self
    }

    fn err(&self, path: &str, reason: impl ToString) -> SinkError {
        SinkError::Write {
            location: self.location.clone(),
            batch_id: self.batch_id,
            path: path.to_string(),
            reason: reason.to_string(),
        }
    }

    /// A file that can never be written as asked: fatal, not retried.
    fn unwritable(&self, path: &str, reason: impl ToString) -> SinkError {
        SinkError::Unwritable {
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
        let name = match &self.stem {
            Some(stem) => format!(
                "part-{stem}-{}-c{:03}.snappy.parquet",
                self.run, self.files_started
            ),
            None => format!(
                "part-{:010}-a{}-{}-c{:03}.snappy.parquet",
                self.batch_id, self.attempt, self.run, self.files_started
            ),
        };
        let dir = partition_dir(&self.partition_by, values)
            .map_err(|reason| self.unwritable(&name, reason))?;
        let path = format!("{}{dir}{name}", self.prefix);
        let object = Path::parse(&path).map_err(|e| self.unwritable(&path, e))?;
        (self.on_new_file)(&path).map_err(SinkError::Hook)?;
        Ok(OpenFile {
            path,
            object,
            writer: None,
            gathered: Vec::new(),
            gathered_rows: 0,
            gathered_bytes: 0,
            rows: 0,
            stats: stats::FileStats::new(&self.file_schema),
            last_used: 0,
        })
    }

    /// Write `batch` to `f`'s Parquet file, made now if these are its first rows.
    async fn write_rows(&mut self, f: &mut OpenFile, batch: RecordBatch) -> Result<(), SinkError> {
        let writer = match &mut f.writer {
            Some(w) => w,
            None => {
                let writer = encoder::FileEncoder::try_new(
                    BufWriter::new(self.store.clone(), f.object.clone()),
                    self.file_schema.clone(),
                    file_properties(&batch),
                )
                .map_err(|e| self.err(&f.path, e))?;
                f.writer.insert(writer)
            }
        };
        writer
            .write(&batch)
            .await
            .map_err(|e| self.err(&f.path, e))?;
        f.stats.update(&batch);
        Ok(())
    }

    /// Write what `f` has gathered, as one batch.
    async fn flush_gathered(&mut self, f: &mut OpenFile) -> Result<(), SinkError> {
        let batch = match f.gathered.len() {
            0 => return Ok(()),
            1 => f.gathered.pop().expect("one batch"),
            _ => {
                concat_batches(&self.file_schema, &f.gathered).map_err(|e| self.err(&f.path, e))?
            }
        };
        f.gathered.clear();
        f.gathered_rows = 0;
        f.gathered_bytes = 0;
        self.write_rows(f, batch).await
    }

    /// Gather `batch` in `f` when it is small and of the file's schema, else write it after
    /// what is gathered.
    async fn push(&mut self, f: &mut OpenFile, batch: RecordBatch) -> Result<(), SinkError> {
        if batch.num_rows() < COALESCE_BELOW && batch.schema().fields() == self.file_schema.fields()
        {
            f.gathered_rows += batch.num_rows();
            f.gathered_bytes += batch.get_array_memory_size() as u64;
            f.gathered.push(batch);
            if f.gathered_rows >= COALESCED_ROWS || f.gathered_bytes >= GATHERED_BYTES {
                self.flush_gathered(f).await?;
            }
            return Ok(());
        }
        self.flush_gathered(f).await?;
        self.write_rows(f, batch).await
    }

    /// Close `f`: its gathered rows written, the file finished. When writing the gathered rows
    /// fails, its upload is abandoned here (the caller abandons the other open files').
    async fn close(
        &mut self,
        values: Vec<Option<String>>,
        mut f: OpenFile,
    ) -> Result<(), SinkError> {
        let flushed = self.flush_gathered(&mut f).await;
        let Some(mut writer) = f.writer.take() else {
            // Its Parquet writer could not be made: there is no upload to abandon.
            return Err(flushed
                .err()
                .unwrap_or_else(|| self.err(&f.path, "closed before any rows were written")));
        };
        if let Err(e) = flushed {
            abandon(&f.path, writer).await;
            return Err(e);
        }
        // A finish that fails before the upload's shutdown (a row group that would not close,
        // a part that would not upload) abandons the upload; after it, nothing is left to abort.
        let footer = match writer.finish().await {
            Ok(footer) => footer,
            Err(e) => {
                let err = self.err(&f.path, e);
                abandon(&f.path, writer).await;
                return Err(err);
            }
        };
        let size = writer.bytes_written() as u64;
        let stats = f.stats.to_json(f.rows, &footer);
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
        // A failed write fails the whole batch: every open upload is abandoned.
        let batch = match self.project(batch) {
            Ok(batch) => batch,
            Err(e) => {
                self.abort_all(None).await;
                return Err(e);
            }
        };
        let key = values.to_vec();
        self.writes += 1;
        let mut file = match self.open.remove(&key) {
            Some(f) => f,
            None => {
                if self.open.len() >= MAX_OPEN_PARTITION_FILES {
                    self.close_least_recent().await?;
                }
                match self.open_file(values) {
                    Ok(f) => f,
                    Err(e) => {
                        self.abort_all(None).await;
                        return Err(e);
                    }
                }
            }
        };
        file.last_used = self.writes;
        file.rows += batch.num_rows() as u64;
        if let Err(err) = self.push(&mut file, batch).await {
            self.abort_all(Some(file)).await;
            return Err(err);
        }
        let written = file.writer.as_ref().map_or(0, |w| {
            w.bytes_written() as u64 + w.in_progress_size() as u64
        });
        if written + file.gathered_bytes >= self.target_file_size {
            let closed = self.close(key, file).await;
            if closed.is_err() {
                self.abort_all(None).await;
            }
            closed
        } else {
            self.open.insert(key, file);
            Ok(())
        }
    }

    /// Close the open file written to least recently (bounded memory with many partitions).
    async fn close_least_recent(&mut self) -> Result<(), SinkError> {
        let Some(key) = self
            .open
            .iter()
            .min_by_key(|(_, f)| f.last_used)
            .map(|(k, _)| k.clone())
        else {
            return Ok(());
        };
        let file = self.open.remove(&key).expect("key just found");
        let closed = self.close(key, file).await;
        if closed.is_err() {
            self.abort_all(None).await;
        }
        closed
    }

    /// Close every open file and return all files written.
    pub async fn finish(mut self) -> Result<Vec<StagedFile>, SinkError> {
        let mut open: Vec<_> = self.open.drain().collect();
        while let Some((k, f)) = open.pop() {
            if let Err(e) = self.close(k, f).await {
                self.open.extend(open);
                self.abort_all(None).await;
                return Err(e);
            }
        }
        Ok(self.done)
    }

    /// Give the files up unfinished: every upload still open is abandoned.
    pub async fn abort(mut self) {
        self.abort_all(None).await
    }

    /// After a failure: abandon the uploads still open (`failed` and the other partitions'),
    /// so no multipart upload lingers. Best effort and silent on purpose: the error the caller
    /// reports is the one that made the write fail, never a cleanup failure after it.
    async fn abort_all(&mut self, failed: Option<OpenFile>) {
        let open: Vec<OpenFile> = failed
            .into_iter()
            .chain(self.open.drain().map(|(_, f)| f))
            .collect();
        for f in open {
            // A file with no rows written has no upload.
            if let Some(writer) = f.writer {
                abandon(&f.path, writer).await;
            }
        }
    }
}

/// Abandon the upload of the file at `path` after a failure. Best effort and silent on
/// purpose: the error the caller reports is the one that made the write fail.
async fn abandon(path: &str, writer: encoder::FileEncoder) {
    if let Err(e) = writer.abandon().await {
        tracing::debug!(path, error = %e, "abandoning a failed upload");
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

    async fn abort(self: Box<Self>) {
        PartitionedWriter::abort(*self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dirs_escape_what_spark_escapes() {
        assert_eq!(escape_partition_value("2024-01-02"), "2024-01-02");
        assert_eq!(escape_partition_value("a/b c"), "a%2Fb c");
        assert_eq!(escape_partition_value("a b/c:d"), "a b%2Fc%3Ad");
        assert_eq!(escape_partition_value("100%"), "100%25");
        assert_eq!(escape_partition_value("日本語"), "日本語");
        assert_eq!(escape_partition_value("é ü ß"), "é ü ß");
        // Spark's set, one by one; `}`, `~`, `<`, `>`, `|`, `+`, `&`, space are kept.
        assert_eq!(
            escape_partition_value("\"#%'*/:=?\\\u{7F}{[]^"),
            "%22%23%25%27%2A%2F%3A%3D%3F%5C%7F%7B%5B%5D%5E"
        );
        assert_eq!(escape_partition_value("}~<>|+& ,;@!$()"), "}~<>|+& ,;@!$()");
        assert_eq!(escape_partition_value("\u{1}\n\u{1F}\u{0}"), "%01%0A%1F%00");
        let cols = vec!["date".to_string(), "region".to_string()];
        assert_eq!(
            partition_dir(&cols, &[Some("2024-01-02".into()), None]).unwrap(),
            "date=2024-01-02/region=__HIVE_DEFAULT_PARTITION__/"
        );
        assert_eq!(
            partition_dir(&["a=b".to_string()], &[Some("=".into())]).unwrap(),
            "a%3Db=%3D/",
            "column names are escaped too"
        );
    }

    #[test]
    fn a_value_too_long_for_a_directory_name_is_a_clear_error() {
        let cols = vec!["city".to_string()];
        // 80 three-byte characters: 240 bytes kept as is, so `city=` + 240 fits...
        let fits = "東".repeat(80);
        assert!(partition_dir(&cols, &[Some(fits)]).is_ok());
        // ...86 do not (5 + 258 bytes). Percent-encoding them would have made 778 bytes.
        let long = "東".repeat(86);
        let err = partition_dir(&cols, &[Some(long.clone())]).unwrap_err();
        assert!(err.contains("partition column `city`"), "{err}");
        assert!(err.contains(&"東".repeat(64)), "{err}");
        assert!(err.contains("263 bytes long"), "{err}");
        assert!(err.contains("255-byte limit"), "{err}");
        // Escapes count: 100 `/` are 300 bytes escaped.
        assert!(partition_dir(&cols, &[Some("/".repeat(100))]).is_err());
    }

    /// More partitions than may be open at once: the least recently used file is closed, so
    /// writing to it again starts a new file; every row lands in exactly one file.
    #[tokio::test]
    async fn open_partition_files_are_capped() {
        use arrow::array::{Int64Array, StringArray};
        use arrow_schema::{DataType, Field};
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("p", DataType::Utf8, true),
        ]));
        let layout = TableLayout::new("memory:///t", 128 << 20);
        layout.set(schema.clone(), &["p".to_string()]);
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let s2 = started.clone();
        let hook: StagedHook = Arc::new(move |_: &str| {
            s2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        });
        let mut w = layout
            .writer(store, 0, 1, String::new(), hook)
            .expect("writer");
        let n = MAX_OPEN_PARTITION_FILES + 6;
        let mut order: Vec<usize> = (0..n).collect();
        order.push(0); // partition 0 is the least recently used by now
        for (i, p) in order.iter().enumerate() {
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(vec![i as i64])),
                    Arc::new(StringArray::from(vec![format!("v{p}")])),
                ],
            )
            .unwrap();
            w.write(&[Some(format!("v{p}"))], batch).await.unwrap();
            assert!(w.open.len() <= MAX_OPEN_PARTITION_FILES);
        }
        let files = w.finish().await.unwrap();
        assert_eq!(files.len(), n + 1, "partition 0 was reopened as a new file");
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), n + 1);
        assert_eq!(files.iter().map(|f| f.rows).sum::<u64>(), (n + 1) as u64);
    }

    /// A writer of `(id BIGINT, kind STRING)` files into memory, rolled past `target` bytes.
    fn plain_writer(target: u64) -> (Arc<dyn ObjectStore>, SchemaRef, PartitionedWriter) {
        use arrow_schema::{DataType, Field};
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("kind", DataType::Utf8, true),
        ]));
        let layout = TableLayout::new("memory:///t", target);
        layout.set(schema.clone(), &[]);
        let hook: StagedHook = Arc::new(|_: &str| Ok(()));
        let w = layout
            .writer(store.clone(), 0, 1, String::new(), hook)
            .unwrap();
        (store, schema, w)
    }

    fn rows(schema: &SchemaRef, ids: std::ops::Range<i64>) -> RecordBatch {
        use arrow::array::{Int64Array, StringArray};
        let kinds = ids.clone().map(|i| format!("kind-{}", i % 3));
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(ids)),
                Arc::new(StringArray::from_iter_values(kinds)),
            ],
        )
        .unwrap()
    }

    #[tokio::test]
    async fn small_batches_are_gathered_in_order_and_unique_columns_skip_the_dictionary() {
        use arrow::array::AsArray;
        use object_store::ObjectStoreExt;
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let (store, schema, mut w) = plain_writer(128 << 20);
        // 3,000 batches of 3 rows (small files), a large batch, then small ones again.
        let mut next = 0;
        for size in std::iter::repeat_n(3, 3000)
            .chain([5000])
            .chain(std::iter::repeat_n(7, 10))
        {
            w.write(&[], rows(&schema, next..next + size))
                .await
                .unwrap();
            next += size;
        }
        let files = w.finish().await.unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].rows, next as u64);
        let bytes = store
            .get(&Path::parse(&files[0].path).unwrap())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        let meta = reader.metadata().clone();
        let mut ids = Vec::new();
        for b in reader.build().unwrap() {
            let b = b.unwrap();
            ids.extend(
                b.column(0)
                    .as_primitive::<arrow::datatypes::Int64Type>()
                    .values()
                    .iter()
                    .copied(),
            );
            let kinds = b.column(1).as_string::<i32>();
            let first = ids[ids.len() - b.num_rows()];
            assert_eq!(kinds.value(0), format!("kind-{}", first % 3));
        }
        assert_eq!(ids, (0..next).collect::<Vec<_>>(), "every row, in order");
        // The first rows written decide: ids are unique (no dictionary), kinds repeat.
        let columns = meta.row_group(0).columns();
        assert_eq!(
            columns[0].dictionary_page_offset(),
            None,
            "id is written plain"
        );
        assert!(
            columns[1].dictionary_page_offset().is_some(),
            "kind keeps its dictionary"
        );
        let stats: serde_json::Value =
            serde_json::from_str(files[0].stats.as_ref().unwrap()).unwrap();
        assert_eq!(stats["minValues"]["id"], 0);
        assert_eq!(stats["maxValues"]["id"], next - 1);
        assert_eq!(stats["maxValues"]["kind"], "kind-2");
    }

    #[tokio::test]
    async fn written_rows_stop_counting_as_gathered() {
        // Batches of 1,000 rows are gathered and written in eights: once written, their memory
        // no longer counts, so files roll on their encoded size (two or three for 1,000,000
        // highly compressible rows at 4 MiB), not on the memory of every row ever gathered
        // (200 MB: 50 files).
        use arrow::array::{Int64Array, StringArray};
        let (_store, schema, mut w) = plain_writer(4 << 20);
        for b in 0..1000i64 {
            let ids = b * 1000..b * 1000 + 1000;
            let kinds = ids.clone().map(|i| format!("{}{}", "x".repeat(200), i % 3));
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values(ids)),
                    Arc::new(StringArray::from_iter_values(kinds)),
                ],
            )
            .unwrap();
            w.write(&[], batch).await.unwrap();
        }
        let files = w.finish().await.unwrap();
        assert_eq!(files.iter().map(|f| f.rows).sum::<u64>(), 1_000_000);
        assert!(
            files.len() <= 3,
            "{} files of {:?} bytes",
            files.len(),
            files.iter().map(|f| f.size).collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn gathered_rows_count_towards_the_target_size() {
        // A target below one batch's size: every batch still closes its file, gathered or not.
        let (_store, schema, mut w) = plain_writer(1);
        for i in 0..5 {
            w.write(&[], rows(&schema, i * 3..i * 3 + 3)).await.unwrap();
        }
        let files = w.finish().await.unwrap();
        assert_eq!(files.len(), 5);
        assert!(files.iter().all(|f| f.rows == 3 && f.size > 0));
    }
}
