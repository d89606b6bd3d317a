//! Compaction (Delta's `OPTIMIZE`, bin-packing): a partition's small files rewritten into
//! files of about `target_file_size`, in one commit that removes the small files and adds the
//! new ones, every action with `dataChange = false` (readers of the change feed and streaming
//! readers of the table skip it: no row is new).
//!
//! Contract:
//! - **Rows**: the new files hold exactly the rows of the files they replace (each read whole),
//!   and the commit is atomic: a reader sees the small files or the big ones, never both,
//!   never neither. A crash before the commit leaves unreferenced new files (`landfall
//!   vacuum` deletes them after the retention); after it, nothing to redo.
//! - **Never racing appends**: the commit is put-if-absent of the next version. Losing the race
//!   (a stream's append took the version) refreshes the table and tries again while every file
//!   it replaces is still live: appends never remove files, so a stream's commits never make it
//!   give up. When a file it replaces is gone (another compaction, a DELETE), the compaction
//!   is dropped: its new files are deleted and it is tried again later. An answer lost after
//!   the write (the commit landed, the client was not told) is found by looking for the new
//!   files in the table, never committed twice.
//! - **Which files**: live files under `min_file_size` (default: half the target), without a
//!   deletion vector, grouped by partition, in path order, packed greedily into bins of at most
//!   `target_file_size` bytes; a bin of one file is left alone. Files written with an older
//!   schema (fewer columns) get nulls for the columns added since.
//! - **Refused**: tables with `rowTracking` (the kernel would give the rewritten rows new ids;
//!   keeping them needs materialized row-id columns this writer does not write), and tables
//!   landfall does not append to.

use super::DeltaCommitter;
use super::kernel::{ENGINE_INFO, Kernel, adds_batch, owner_commit_info};
use crate::error::SinkError;
use arrow::array::{RecordBatch, new_null_array};
use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;
use delta_kernel::KernelError;
use delta_kernel::SnapshotRef;
use delta_kernel::committer::FileSystemCommitter;
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::engine_data::{
    FilteredEngineData, FilteredRowVisitor, GetData, RowIndexIterator, TypedGetData,
};
use delta_kernel::expressions::ColumnName;
use delta_kernel::schema::DataType as KernelType;
use delta_kernel::transaction::{CommitResult, UpdateTableOperation};
use landfall_core::StagedFile;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

/// Rounds of losing the commit race before the compaction is dropped for this time.
const MAX_CONFLICTS: u32 = 10;

/// What to compact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactOptions {
    /// Files are packed into bins of at most this many bytes.
    pub target_file_size: u64,
    /// Files under this size are small (compacted).
    pub min_file_size: u64,
    /// Bytes rewritten in one run at most (the rest waits for the next run).
    pub max_bytes: u64,
    /// Small files the table must hold before anything is compacted.
    pub min_small_files: u64,
}

impl CompactOptions {
    pub fn for_target(target_file_size: u64) -> Self {
        CompactOptions {
            target_file_size,
            min_file_size: target_file_size / 2,
            max_bytes: 10 << 30,
            min_small_files: 2,
        }
    }
}

/// What one compaction found and did.
pub type CompactReport = landfall_core::Compaction;

/// A live data file of the table.
#[derive(Debug, Clone)]
struct LiveFile {
    /// As the `add` action writes it.
    path: String,
    size: u64,
    partition: BTreeMap<String, String>,
    has_dv: bool,
}

impl DeltaCommitter {
    /// The table's live files, and how many are small under `opts`.
    pub async fn small_files(&self, opts: &CompactOptions) -> Result<(u64, u64), SinkError> {
        let k = self.kernel().await?;
        let Some(snapshot) = k.load().await? else {
            return Ok((0, 0));
        };
        let live = live_files(k, &snapshot).await?;
        let small = live
            .iter()
            .filter(|f| f.size < opts.min_file_size && !f.has_dv)
            .count();
        Ok((live.len() as u64, small as u64))
    }

    /// Compact the table's small files (see the module docs).
    pub async fn compact(&self, opts: &CompactOptions) -> Result<CompactReport, SinkError> {
        let k = self.kernel().await?;
        let location = crate::shown(&self.uri);
        let Some(mut snapshot) = k.load().await? else {
            return Ok(CompactReport::default());
        };
        let writability = crate::delta_protocol::check_writable(&location, &snapshot)?;
        if snapshot
            .table_configuration()
            .protocol()
            .writer_features()
            .is_some_and(|fs| fs.iter().any(|f| f.to_string() == "rowTracking"))
        {
            return Err(SinkError::Unsupported {
                location,
                feature: "rowTracking".into(),
                reason: "compaction would give the rewritten rows new row ids; keeping them needs materialized row-id columns, which landfall does not write".into(),
            });
        }
        let live = live_files(k, &snapshot).await?;
        let mut report = CompactReport {
            files: live.len() as u64,
            ..Default::default()
        };
        let bins = bins(&live, opts, &mut report);
        if bins.is_empty() || report.small_files < opts.min_small_files {
            return Ok(report);
        }
        let partition_by: Vec<String> = snapshot
            .table_configuration()
            .metadata()
            .partition_columns()
            .to_vec();
        let schema: SchemaRef = Arc::new(
            super::kernel::to_arrow(snapshot.schema().as_ref()).map_err(|reason| {
                SinkError::Io {
                    location: location.clone(),
                    op: "read the table's schema",
                    reason,
                }
            })?,
        );
        let written = Arc::new(Mutex::new(Vec::<String>::new()));
        let result = self
            .rewrite(k, &bins, &schema, &partition_by, opts, &written)
            .await;
        let (adds, rows) = match result {
            Ok(r) => r,
            Err(e) => {
                self.discard(&written).await;
                return Err(e);
            }
        };
        let targets: HashSet<String> = bins.iter().flatten().map(|f| f.path.clone()).collect();
        let new_paths: HashSet<String> = adds
            .iter()
            .map(|f| super::kernel::encode_path(&f.path))
            .collect();
        let mut conflicts = 0;
        let committed = loop {
            let attempt = compact_commit(k, &snapshot, &targets, &adds, self.owner()).await;
            match attempt {
                Ok(Outcome::Committed(s)) => break Some(s),
                Ok(Outcome::SourceGone) => break None,
                Ok(Outcome::Conflicted) | Err(_) => {
                    snapshot = k.refresh(snapshot).await?;
                    // Our own write whose answer was lost: it is in the table.
                    let now_live: HashSet<String> = live_files(k, &snapshot)
                        .await?
                        .into_iter()
                        .map(|f| f.path)
                        .collect();
                    if new_paths.iter().all(|p| now_live.contains(p)) {
                        break Some(snapshot.clone());
                    }
                    if let Err(e) = attempt {
                        self.discard(&written).await;
                        return Err(k.kernel_err("commit a compaction", e));
                    }
                    conflicts += 1;
                    if conflicts >= MAX_CONFLICTS {
                        break None;
                    }
                }
            }
        };
        let Some(snapshot) = committed else {
            self.discard(&written).await;
            report.dropped = true;
            return Ok(report);
        };
        report.version = Some(snapshot.version() as i64);
        report.files_removed = targets.len() as u64;
        report.files_added = adds.len() as u64;
        report.bytes_rewritten = bins.iter().flatten().map(|f| f.size).sum();
        report.rows = rows;
        self.after_commit(k, snapshot, &writability).await;
        Ok(report)
    }

    fn owner(&self) -> Option<String> {
        self.owner.lock().expect("owner lock").clone()
    }

    /// Delete the files a dropped or failed compaction wrote (best effort: `landfall vacuum`
    /// deletes what is left).
    async fn discard(&self, written: &Mutex<Vec<String>>) {
        let paths = written.lock().expect("written lock").clone();
        if paths.is_empty() {
            return;
        }
        let location = crate::shown(&self.uri);
        let removed = match crate::table_store(&self.uri, &self.options) {
            Ok(store) => crate::parquet_dir::delete_all(&location, store.as_ref(), &paths).await,
            Err(e) => Err(e),
        };
        if let Err(e) = removed {
            tracing::warn!(table = %location, error = %e, "could not delete the files of a dropped compaction; vacuum deletes them later");
        }
    }

    /// Read each bin's files and write them as new files; returns the files and their rows.
    async fn rewrite(
        &self,
        k: &Kernel,
        bins: &[Vec<LiveFile>],
        schema: &SchemaRef,
        partition_by: &[String],
        opts: &CompactOptions,
        written: &Arc<Mutex<Vec<String>>>,
    ) -> Result<(Vec<StagedFile>, u64), SinkError> {
        let location = crate::shown(&self.uri);
        let layout = crate::writer::TableLayout::new(&location, opts.target_file_size);
        layout.set(schema.clone(), partition_by);
        let file_schema = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .filter(|f| !partition_by.contains(f.name()))
                .cloned()
                .collect::<Vec<_>>(),
        ));
        let store = crate::table_store(&self.uri, &self.options)?;
        let stem = format!("compact-{}", chrono::Utc::now().format("%Y%m%d%H%M%S"));
        let record = written.clone();
        let hook: landfall_core::seams::StagedHook = Arc::new(move |p: &str| {
            record.lock().expect("written lock").push(p.to_string());
            Ok(())
        });
        let mut writer = layout
            .writer(store, 0, 0, String::new(), hook)?
            .with_stem(&stem);
        let mut rows = 0u64;
        let mut out = Vec::new();
        for bin in bins {
            for f in bin {
                let values: Vec<Option<String>> = partition_by
                    .iter()
                    .map(|c| f.partition.get(c).cloned())
                    .collect();
                let bytes = read(k, &f.path).await?;
                let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
                    .and_then(|b| b.with_batch_size(64 * 1024).build())
                    .map_err(|e| io(&location, "read a file to compact", &f.path, e))?;
                for batch in reader {
                    let batch =
                        batch.map_err(|e| io(&location, "read a file to compact", &f.path, e))?;
                    let batch = conform(&batch, &file_schema)
                        .map_err(|e| io(&location, "read a file to compact", &f.path, e))?;
                    rows += batch.num_rows() as u64;
                    writer.write(&values, batch).await?;
                }
            }
            // One bin, one file: close it before the next bin.
            let done = writer.finish().await?;
            out.extend(done);
            writer = layout
                .writer(
                    crate::table_store(&self.uri, &self.options)?,
                    0,
                    0,
                    String::new(),
                    {
                        let record = written.clone();
                        Arc::new(move |p: &str| {
                            record.lock().expect("written lock").push(p.to_string());
                            Ok(())
                        })
                    },
                )?
                .with_stem(&stem);
        }
        Ok((out, rows))
    }
}

fn io(location: &str, op: &'static str, path: &str, e: impl std::fmt::Display) -> SinkError {
    SinkError::Io {
        location: location.to_string(),
        op,
        reason: format!("{path}: {e}"),
    }
}

/// A file of the table, whole (small files only are read).
async fn read(k: &Kernel, log_path: &str) -> Result<Bytes, SinkError> {
    let key = percent_encoding::percent_decode_str(log_path)
        .decode_utf8_lossy()
        .into_owned();
    let path = Path::parse(format!("{}/{key}", k.prefix.as_ref()).trim_start_matches('/'))
        .map_err(|e| io(&k.location, "read a file to compact", log_path, e))?;
    k.store
        .get(&path)
        .await
        .map_err(|e| io(&k.location, "read a file to compact", log_path, e))?
        .bytes()
        .await
        .map_err(|e| io(&k.location, "read a file to compact", log_path, e))
}

/// A batch of a data file in the table's file schema: columns by name, cast where the file
/// wrote another type, nulls for columns added after the file was written.
fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, String> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
            Some(c) => arrow::compute::cast(c, f.data_type())
                .map_err(|e| format!("column `{}`: {e}", f.name())),
            None if f.is_nullable() => Ok(new_null_array(f.data_type(), batch.num_rows())),
            None => Err(format!("column `{}` is missing and not nullable", f.name())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| e.to_string())
}

/// Small files packed into bins per partition (bins of one file left out), up to
/// `max_bytes` in all.
fn bins(
    live: &[LiveFile],
    opts: &CompactOptions,
    report: &mut CompactReport,
) -> Vec<Vec<LiveFile>> {
    let mut by_partition: BTreeMap<&BTreeMap<String, String>, Vec<&LiveFile>> = BTreeMap::new();
    for f in live {
        if f.size < opts.min_file_size && !f.has_dv {
            report.small_files += 1;
            by_partition.entry(&f.partition).or_default().push(f);
        }
    }
    let mut out = Vec::new();
    let mut total = 0u64;
    for (_, mut files) in by_partition {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut bin: Vec<LiveFile> = Vec::new();
        let mut size = 0u64;
        for f in files {
            if !bin.is_empty() && size + f.size > opts.target_file_size {
                if bin.len() > 1 {
                    total += size;
                    out.push(std::mem::take(&mut bin));
                } else {
                    bin.clear();
                }
                size = 0;
            }
            if total + size + f.size > opts.max_bytes {
                break;
            }
            size += f.size;
            bin.push(f.clone());
        }
        if bin.len() > 1 {
            total += size;
            out.push(bin);
        }
    }
    out
}

/// The table's live files.
async fn live_files(k: &Kernel, snapshot: &SnapshotRef) -> Result<Vec<LiveFile>, SinkError> {
    let snapshot = snapshot.clone();
    k.run(move |engine| {
        let scan = snapshot.scan_builder().build()?;
        let mut out: Vec<LiveFile> = Vec::new();
        for meta in scan.scan_metadata(engine)? {
            out = meta?.visit_scan_files(out, |files: &mut Vec<LiveFile>, f| {
                files.push(LiveFile {
                    path: f.path,
                    size: f.size.max(0) as u64,
                    partition: f.partition_values.into_iter().collect(),
                    has_dv: f.dv_info.has_vector(),
                })
            })?;
        }
        Ok(out)
    })
    .await
    .map_err(|e| k.kernel_err("list the table's files", e))
}

/// How one compaction commit ended.
enum Outcome {
    Committed(SnapshotRef),
    /// Another commit took the version: refresh and try again.
    Conflicted,
    /// A file to replace is no longer live.
    SourceGone,
}

static PATH_COLUMN: LazyLock<(Vec<ColumnName>, Vec<KernelType>)> =
    LazyLock::new(|| (vec![ColumnName::new(["path"])], vec![KernelType::STRING]));

/// Selects the live rows of a scan whose path is one to replace.
struct Pick<'t> {
    targets: &'t HashSet<String>,
    selected: Vec<bool>,
    found: usize,
}

impl FilteredRowVisitor for Pick<'_> {
    fn selected_column_names_and_types(&self) -> (&'static [ColumnName], &'static [KernelType]) {
        (&PATH_COLUMN.0, &PATH_COLUMN.1)
    }

    fn visit_filtered<'a>(
        &mut self,
        g: &[&'a dyn GetData<'a>],
        rows: RowIndexIterator<'_>,
    ) -> Result<(), KernelError> {
        self.selected = vec![false; rows.num_rows()];
        for i in rows {
            let path: Option<String> = g[0].get_opt(i, "path")?;
            if path.is_some_and(|p| self.targets.contains(&p)) {
                self.selected[i] = true;
                self.found += 1;
            }
        }
        Ok(())
    }
}

/// One compaction commit on `snapshot`: remove `targets`, add `adds`, `dataChange = false`.
async fn compact_commit(
    k: &Kernel,
    snapshot: &SnapshotRef,
    targets: &HashSet<String>,
    adds: &[StagedFile],
    owner: Option<String>,
) -> Result<Outcome, KernelError> {
    let snapshot = snapshot.clone();
    let targets = targets.clone();
    let adds = adds.to_vec();
    k.run(move |engine| {
        let mut b = snapshot
            .clone()
            .update_table(UpdateTableOperation::Optimize, ENGINE_INFO, false)
            .with_operation_parameters(vec![
                ("predicate", Some("[]".to_string())),
                ("zOrderBy", Some("[]".to_string())),
            ]);
        if let Some(owner) = &owner {
            let (row, schema) = owner_commit_info(owner)?;
            b = b.with_commit_info(row, schema);
        }
        let mut txn = b.build(engine, Box::new(FileSystemCommitter::new()))?;
        let scan = snapshot.scan_builder().build()?;
        let mut found = 0;
        for meta in scan.scan_metadata(engine)? {
            let files = meta?.scan_files;
            let mut pick = Pick {
                targets: &targets,
                selected: Vec::new(),
                found: 0,
            };
            pick.visit_rows_of(&files)?;
            found += pick.found;
            if pick.found == 0 {
                continue;
            }
            let (data, _) = files.into_parts();
            let mut selected = pick.selected;
            selected.resize(data.len(), false);
            txn.remove_files(FilteredEngineData::try_new(data, selected)?);
        }
        if found != targets.len() {
            return Ok(Outcome::SourceGone);
        }
        let now_ms = chrono::Utc::now().timestamp_millis();
        let stats_schema = txn.stats_schema()?;
        let batch = adds_batch(&adds, now_ms, &stats_schema)?;
        txn.add_files(Box::new(ArrowEngineData::new(batch)));
        Ok(match txn.commit(engine)? {
            CommitResult::Committed(c) => Outcome::Committed(
                c.post_commit_snapshot()
                    .cloned()
                    .ok_or_else(|| KernelError::generic("no post-commit snapshot"))?,
            ),
            CommitResult::Conflicted(_) => Outcome::Conflicted,
            CommitResult::Retryable(r) => return Err(r.error),
        })
    })
    .await
}
