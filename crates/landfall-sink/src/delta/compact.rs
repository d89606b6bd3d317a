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
//!   give up (it keeps trying, with a growing pause, for up to two minutes). When a file it
//!   replaces is gone or gained a deletion vector (another compaction, a DELETE, UPDATE or
//!   MERGE), the compaction is dropped: its new files are deleted and it is tried again later.
//!   An answer lost after the write (the commit landed, the client was not told) is found by
//!   looking for the new files in the log (live, or removed by a later commit), never
//!   committed twice, and files a version may name are never deleted.
//! - **Checked**: each bin's rows read must equal the `numRecords` its files' statistics
//!   state, or nothing is committed.
//! - **Which files**: live files under `min_file_size` (default: half the target), without a
//!   deletion vector, grouped by partition, in path order, packed greedily into bins of at most
//!   `target_file_size` bytes; a bin of one file is left alone. Files written with an older
//!   schema get nulls for the columns (and nested fields) added since; columns are matched by
//!   name at every level, and a cast that would turn a value into a null fails instead.
//! - **Row tracking**: every row keeps its row id and row commit version: the new files carry
//!   them in the table's materialized columns (`delta.rowTracking.materializedRowIdColumnName`
//!   and `...RowCommitVersionColumnName`): the value a source file materialized, else its
//!   `baseRowId` plus the row's index in the file, and its `defaultRowCommitVersion`. A table
//!   without the column names, or a file without a `baseRowId`, is refused.
//! - **Refused**: tables landfall does not append to. Column-mapped tables are compacted in their physical
//!   columns (files read and written by physical name, with field ids).

use super::DeltaCommitter;
use super::kernel::{ENGINE_INFO, Kernel, adds_batch, owner_commit_info};
use crate::delta_schema::{Missing, conform};
use crate::error::SinkError;
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

/// How long a compaction keeps losing the commit race to appends before it is dropped for
/// this time.
const MAX_RACING: std::time::Duration = std::time::Duration::from_secs(120);

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
pub(crate) struct LiveFile {
    /// As the `add` action writes it.
    path: String,
    size: u64,
    partition: BTreeMap<String, String>,
    has_dv: bool,
    /// `numRecords` of its statistics, when stated.
    rows: Option<u64>,
    /// Row tracking: its `baseRowId` and `defaultRowCommitVersion`.
    pub(crate) row_ids: Option<(Option<i64>, Option<i64>)>,
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
        let tracking = super::row_ids::row_tracking(&location, &snapshot)?;
        let mut live = live_files(k, &snapshot).await?;
        let planned_ids = match &tracking {
            Some(_) => Some(super::row_ids::row_ids(k, &snapshot).await?),
            None => None,
        };
        if let Some(ids) = &planned_ids {
            for f in &mut live {
                f.row_ids = Some(ids.get(&f.path).copied().unwrap_or((None, None)));
            }
        }
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
        let schema_err = |reason| SinkError::Io {
            location: location.clone(),
            op: "read the table's schema",
            reason,
        };
        // A column-mapped table's files hold its physical columns (and `partitionValues` name
        // physical columns): read and write those.
        let physical = super::column_mapping::Physical::of(&snapshot).map_err(schema_err)?;
        let (schema, partition_by): (SchemaRef, Vec<String>) = match &physical {
            Some(p) => (
                p.schema(),
                p.partition_names(&partition_by).map_err(schema_err)?,
            ),
            None => (
                Arc::new(super::kernel::to_arrow(snapshot.schema().as_ref()).map_err(schema_err)?),
                partition_by,
            ),
        };
        let written = Arc::new(Mutex::new(Vec::<String>::new()));
        let result = self
            .rewrite(
                k,
                &bins,
                Shape {
                    schema: &schema,
                    partition_by: &partition_by,
                    tracking: tracking.as_ref(),
                    physical: physical.as_ref(),
                },
                opts,
                &written,
            )
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
        let started = std::time::Instant::now();
        let mut backoff = std::time::Duration::from_millis(50);
        let mut writability = writability;
        let committed = loop {
            let attempt = compact_commit(
                k,
                &snapshot,
                &targets,
                &adds,
                self.owner(),
                planned_ids.clone(),
            )
            .await;
            match attempt {
                Ok(Outcome::Committed(s)) => break Some(s),
                Ok(Outcome::SourceGone) => break None,
                Ok(Outcome::Conflicted) | Err(_) => {
                    snapshot = k.refresh(snapshot).await?;
                    // Our own write whose answer was lost is in the log: live, or removed
                    // since by a later commit. Never delete files a version references.
                    let (live, removed) = super::vacuum::referenced(k, &snapshot, i64::MIN).await?;
                    let landed = |p: &String| live.paths.contains(p) || removed.paths.contains(p);
                    if new_paths.iter().all(landed) {
                        break Some(snapshot.clone());
                    }
                    if new_paths.iter().any(landed) {
                        // Part of it in the log: never the case for one commit; keep its files
                        // for vacuum rather than delete what a version may name.
                        return Err(SinkError::Io {
                            location,
                            op: "commit a compaction",
                            reason: "some of its new files are in the log and some are not; its files are left for vacuum".into(),
                        });
                    }
                    if let Err(e) = attempt {
                        self.discard(&written).await;
                        return Err(k.kernel_err("commit a compaction", e));
                    }
                    // The table may have changed its features meanwhile.
                    writability = match crate::delta_protocol::check_writable(&location, &snapshot)
                    {
                        Ok(w) => w,
                        Err(e) => {
                            self.discard(&written).await;
                            return Err(e);
                        }
                    };
                    // Appends only add files: keep trying while they take the versions, with
                    // a growing pause, for at most two minutes.
                    if started.elapsed() > MAX_RACING {
                        break None;
                    }
                    let jitter = (chrono::Utc::now().timestamp_subsec_nanos() % 1000) as u64;
                    tokio::time::sleep(backoff + std::time::Duration::from_micros(jitter * 50))
                        .await;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(2));
                }
            }
        };
        let Some(snapshot) = committed else {
            self.discard(&written).await;
            report.dropped = true;
            return Ok(report);
        };
        // The version after it (ours, or a later one when our answer was lost).
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
        shape: Shape<'_>,
        opts: &CompactOptions,
        written: &Arc<Mutex<Vec<String>>>,
    ) -> Result<(Vec<StagedFile>, u64), SinkError> {
        let Shape {
            schema,
            partition_by,
            tracking,
            physical,
        } = shape;
        let location = crate::shown(&self.uri);
        let layout = crate::writer::TableLayout::new(&location, opts.target_file_size);
        // Row tracking: the rows keep their ids in the materialized columns.
        let written_schema = match tracking {
            Some(t) => {
                let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
                fields.push(Arc::new(arrow_schema::Field::new(
                    &t.id_column,
                    arrow_schema::DataType::Int64,
                    true,
                )));
                fields.push(Arc::new(arrow_schema::Field::new(
                    &t.version_column,
                    arrow_schema::DataType::Int64,
                    true,
                )));
                Arc::new(Schema::new(fields))
            }
            None => schema.clone(),
        };
        layout.set(written_schema, partition_by);
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
        let mut writer = Some(
            layout
                .writer(store, 0, 0, String::new(), hook)?
                .with_stem(&stem),
        );
        let mut rows = 0u64;
        let mut out = Vec::new();
        // Any failure abandons the file being written (a multipart upload of a compacted
        // file would otherwise stay open); the files already finished are in `written`, which
        // the caller deletes.
        let result: Result<(), SinkError> = async {
            for bin in bins {
                let before = rows;
                let w = writer.as_mut().expect("a writer for every bin");
                for f in bin {
                    let values: Vec<Option<String>> = partition_by
                        .iter()
                        .map(|c| f.partition.get(c).cloned())
                        .collect();
                    let bytes = read(k, &f.path).await?;
                    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
                        .map_err(|e| io(&location, "read a file to compact", &f.path, e))?;
                    if let Some(p) = physical {
                        p.check_ids(builder.schema())
                            .map_err(|e| io(&location, "read a file to compact", &f.path, e))?;
                    }
                    let reader = builder
                        .with_batch_size(64 * 1024)
                        .build()
                        .map_err(|e| io(&location, "read a file to compact", &f.path, e))?;
                    let mut offset = 0i64;
                    for batch in reader {
                        let raw =
                            batch.map_err(|e| io(&location, "read a file to compact", &f.path, e))?;
                        let mut batch = conform(raw.clone(), &file_schema, Missing::Null)
                            .map_err(|e| io(&location, "read a file to compact", &f.path, e))?;
                        if let Some(t) = tracking {
                            batch = t
                                .keep_ids(&raw, batch, f, offset)
                                .map_err(|e| io(&location, "keep row ids", &f.path, e))?;
                        }
                        offset += raw.num_rows() as i64;
                        rows += batch.num_rows() as u64;
                        w.write(&values, batch).await?;
                    }
                }
                // Every row of the bin, as the files' statistics count them.
                let stated: Option<u64> = bin.iter().map(|f| f.rows).sum();
                if let Some(stated) = stated
                    && stated != rows - before
                {
                    return Err(io(
                        &location,
                        "rewrite files",
                        &bin[0].path,
                        format!(
                            "read {} rows from {} files whose statistics state {stated}; nothing committed",
                            rows - before,
                            bin.len()
                        ),
                    ));
                }
                // One bin, one file: close it before the next bin.
                let done = writer.take().expect("a writer for every bin").finish().await?;
                out.extend(done);
                writer = Some(layout
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
                    .with_stem(&stem));
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            if let Some(w) = writer.take() {
                w.abort().await;
            }
            return Err(e);
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

/// Small files packed into bins per partition (bins of one file left out), up to
/// `max_bytes` in all.
fn bins(
    live: &[LiveFile],
    opts: &CompactOptions,
    report: &mut CompactReport,
) -> Vec<Vec<LiveFile>> {
    let mut by_partition: BTreeMap<&BTreeMap<String, String>, Vec<&LiveFile>> = BTreeMap::new();
    for f in live {
        // Under row tracking, a file needs its baseRowId and defaultRowCommitVersion for its
        // rows to keep their ids (rows written before tracking was enabled have none).
        let untracked = f
            .row_ids
            .is_some_and(|(base, version)| base.is_none() || version.is_none());
        if f.size < opts.min_file_size && !f.has_dv && !untracked {
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
                    rows: f.stats.map(|s| s.num_records),
                    row_ids: None,
                })
            })?;
        }
        Ok(out)
    })
    .await
    .map_err(|e| k.kernel_err("list the table's files", e))
}

/// What the new files are written as: the table's (physical) schema, its partition columns,
/// and its row tracking.
struct Shape<'a> {
    schema: &'a SchemaRef,
    partition_by: &'a [String],
    tracking: Option<&'a super::row_ids::Tracking>,
    physical: Option<&'a super::column_mapping::Physical>,
}

/// How one compaction commit ended.
enum Outcome {
    Committed(SnapshotRef),
    /// Another commit took the version: refresh and try again.
    Conflicted,
    /// A file to replace is no longer live, or gained a deletion vector.
    SourceGone,
}

static PICK_COLUMNS: LazyLock<(Vec<ColumnName>, Vec<KernelType>)> = LazyLock::new(|| {
    (
        vec![
            ColumnName::new(["path"]),
            ColumnName::new(["deletionVector", "storageType"]),
            ColumnName::new(["fileConstantValues", "baseRowId"]),
            ColumnName::new(["fileConstantValues", "defaultRowCommitVersion"]),
        ],
        vec![
            KernelType::STRING,
            KernelType::STRING,
            KernelType::LONG,
            KernelType::LONG,
        ],
    )
});

/// Selects the live rows of a scan whose path is one to replace; notes a target that gained a
/// deletion vector since it was planned (a DELETE, UPDATE or MERGE rewrote it in place), or
/// whose row ids are not the ones planned (`planned`: row tracking), which the new files'
/// materialized ids would contradict.
struct Pick<'t> {
    targets: &'t HashSet<String>,
    planned: Option<&'t super::row_ids::FileRowIds>,
    selected: Vec<bool>,
    found: usize,
    changed: bool,
}

impl FilteredRowVisitor for Pick<'_> {
    fn selected_column_names_and_types(&self) -> (&'static [ColumnName], &'static [KernelType]) {
        (&PICK_COLUMNS.0, &PICK_COLUMNS.1)
    }

    fn visit_filtered<'a>(
        &mut self,
        g: &[&'a dyn GetData<'a>],
        rows: RowIndexIterator<'_>,
    ) -> Result<(), KernelError> {
        self.selected = vec![false; rows.num_rows()];
        for i in rows {
            let path: Option<String> = g[0].get_opt(i, "path")?;
            let Some(path) = path.filter(|p| self.targets.contains(p)) else {
                continue;
            };
            let dv: Option<String> = g[1].get_opt(i, "deletionVector.storageType")?;
            self.changed |= dv.is_some();
            if let Some(planned) = self.planned {
                let base: Option<i64> = g[2].get_opt(i, "fileConstantValues.baseRowId")?;
                let version: Option<i64> =
                    g[3].get_opt(i, "fileConstantValues.defaultRowCommitVersion")?;
                self.changed |= planned.get(&path) != Some(&(base, version));
            }
            self.selected[i] = true;
            self.found += 1;
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
    planned_ids: Option<super::row_ids::FileRowIds>,
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
        let scan = snapshot.clone().scan_builder().build()?;
        let mut found = 0;
        for meta in scan.scan_metadata(engine)? {
            let files = meta?.scan_files;
            let mut pick = Pick {
                targets: &targets,
                planned: planned_ids.as_ref(),
                selected: Vec::new(),
                found: 0,
                changed: false,
            };
            pick.visit_rows_of(&files)?;
            if pick.changed {
                return Ok(Outcome::SourceGone);
            }
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
        // Row tracking as planned (each target's row ids were checked by `Pick`): else the
        // new files would carry no materialized ids, or stale ones.
        if super::row_ids::tracked(&snapshot) != planned_ids.is_some() {
            return Ok(Outcome::SourceGone);
        }
        if planned_ids.is_some() {
            // Row ids are kept in the materialized columns of the new files.
            txn.ack_row_tracking_preservation();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn add(path: &str, dv: bool) -> String {
        let dv = if dv {
            r#","deletionVector":{"storageType":"u","pathOrInlineDv":"ab00000000000000000000","offset":1,"sizeInBytes":36,"cardinality":2}"#
        } else {
            ""
        };
        format!(
            r#"{{"add":{{"path":"{path}","partitionValues":{{}},"size":10,"modificationTime":0,"dataChange":true,"stats":"{{\"numRecords\":5}}"{dv}}}}}"#
        )
    }

    /// A DELETE that rewrote a planned file with a deletion vector while the compaction ran:
    /// the stale snapshot's commit conflicts, and the refreshed one finds the change and
    /// drops the compaction instead of bringing the deleted rows back.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_file_that_gained_a_deletion_vector_drops_the_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("_delta_log");
        std::fs::create_dir_all(&log).unwrap();
        let schema = r#"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}"#;
        let v0 = [
            r#"{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}}"#.to_string(),
            format!(r#"{{"metaData":{{"id":"t","format":{{"provider":"parquet","options":{{}}}},"schemaString":"{schema}","partitionColumns":[],"configuration":{{}},"createdTime":0}}}}"#),
        ];
        std::fs::write(log.join("00000000000000000000.json"), v0.join("\n")).unwrap();
        std::fs::write(
            log.join("00000000000000000001.json"),
            [add("a.parquet", false), add("b.parquet", false)].join("\n"),
        )
        .unwrap();
        let uri = url::Url::from_directory_path(dir.path())
            .unwrap()
            .to_string();
        let k = Kernel::open(&uri, &Default::default()).unwrap();
        let planned = k.load().await.unwrap().unwrap();
        // The DELETE: a.parquet removed and added again with a deletion vector.
        std::fs::write(
            log.join("00000000000000000002.json"),
            [
                r#"{"remove":{"path":"a.parquet","deletionTimestamp":1,"dataChange":true}}"#
                    .to_string(),
                add("a.parquet", true),
            ]
            .join("\n"),
        )
        .unwrap();
        let targets: HashSet<String> = ["a.parquet", "b.parquet"].map(String::from).into();
        let stale = compact_commit(&k, &planned, &targets, &[], None, None)
            .await
            .unwrap();
        assert!(matches!(stale, Outcome::Conflicted));
        let fresh = k.refresh(planned).await.unwrap();
        let outcome = compact_commit(&k, &fresh, &targets, &[], None, None)
            .await
            .unwrap();
        assert!(matches!(outcome, Outcome::SourceGone));
        assert!(!log.join("00000000000000000003.json").exists());
    }

    /// Nested fields added after a file was written: matched by name at every level, nulls
    /// for the new ones; a cast that would lose a value fails.
    #[test]
    fn files_of_an_older_schema_conform_by_name_at_every_level() {
        use arrow::array::{
            Array, ArrayRef, AsArray, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
        };
        use arrow_schema::{DataType as T, Field, Fields};
        let old_inner = Fields::from(vec![Field::new("a", T::Int64, true)]);
        let new_inner = Fields::from(vec![
            Field::new("a", T::Int64, true),
            Field::new("b", T::Utf8, true),
        ]);
        let old_struct = StructArray::try_new(
            old_inner.clone(),
            vec![Arc::new(Int64Array::from(vec![1, 2]))],
            None,
        )
        .unwrap();
        let old_list = ListArray::try_new(
            Arc::new(Field::new("item", T::Struct(old_inner.clone()), true)),
            arrow::buffer::OffsetBuffer::from_lengths([1, 1]),
            Arc::new(old_struct.clone()),
            None,
        )
        .unwrap();
        let old_schema = Arc::new(Schema::new(vec![
            Field::new("s", T::Struct(old_inner.clone()), true),
            Field::new("l", old_list.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(
            old_schema,
            vec![Arc::new(old_struct) as ArrayRef, Arc::new(old_list)],
        )
        .unwrap();
        let target = Arc::new(Schema::new(vec![
            Field::new("s", T::Struct(new_inner.clone()), true),
            Field::new(
                "l",
                T::List(Arc::new(Field::new("item", T::Struct(new_inner), true))),
                true,
            ),
            Field::new("note", T::Utf8, true),
        ]));
        let out = conform(batch, &target, Missing::Null).unwrap();
        let s = out.column(0).as_struct();
        assert_eq!(
            s.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .value(1),
            2
        );
        assert_eq!(s.column(1).null_count(), 2);
        let l = out.column(1).as_list::<i32>();
        assert_eq!(l.values().as_struct().column(1).null_count(), 2);
        assert_eq!(out.column(2).null_count(), 2);
        // A value that does not fit fails, never a null.
        let text = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("n", T::Utf8, true)])),
            vec![Arc::new(StringArray::from(vec!["12", "x"]))],
        )
        .unwrap();
        let wants_int = Arc::new(Schema::new(vec![Field::new("n", T::Int64, true)]));
        assert!(conform(text, &wants_int, Missing::Null).is_err());
    }
}
