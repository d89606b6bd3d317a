//! VACUUM: delete the files of a Delta table that no reader of a retained version needs
//! (`landfall vacuum <stream> [--dry-run]`). The kernel has none, so this is ours, after
//! Delta's `VacuumCommand`.
//!
//! Contract, at the table's latest version `V`, with `R` = `delta.deletedFileRetentionDuration`
//! (7 days by default) and `cutoff` = now - `R`:
//!
//! - **Kept**: every file a live `add` of `V` names, and its deletion-vector file; every file an
//!   unexpired `remove` still in the log names (deleted after `cutoff`, or without a deletion
//!   time), and its deletion-vector file: a reader of any version written after `cutoff` finds
//!   all its files. Every file modified after `cutoff` (a writer's data file not committed
//!   yet). `_delta_log/` and every hidden path (a level starting with `.`, or with `_` and
//!   not a `column=value` partition directory), as Delta keeps them.
//! - **Deleted**: every other file under the table's root.
//! - A retention under 7 days is refused, as Delta refuses it by default: a writer's data
//!   files wait, uncommitted, for as long as its batch takes, and only their age keeps them.
//! - Tables with features landfall does not write are refused, as for appends (a feature may
//!   reference files in ways this code does not know).
//!
//! Paths are compared as the log writes them and percent-decoded: a file kept under either
//! form is kept. When in doubt, a file is kept.

use super::kernel::Kernel;
use crate::error::SinkError;
use chrono::{DateTime, Utc};
use delta_kernel::KernelError;
use delta_kernel::actions::deletion_vector::DeletionVectorDescriptor;
use delta_kernel::engine_data::{
    FilteredRowVisitor, GetData, RowIndexIterator, RowVisitor, TypedGetData,
};
use delta_kernel::expressions::ColumnName;
use delta_kernel::schema::DataType;

type DeltaResult<T> = Result<T, KernelError>;
use futures::{StreamExt, TryStreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;
use std::time::Duration;
use url::Url;

/// Delta's default `delta.deletedFileRetentionDuration`, and the shortest it accepts without
/// turning its safety check off.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// What a vacuum found and did.
#[derive(Debug, Clone, PartialEq)]
pub struct VacuumReport {
    pub version: i64,
    pub retention: Duration,
    /// Files the latest version references (data files and deletion vectors).
    pub live_files: u64,
    /// Files kept for unexpired `remove` actions.
    pub tombstoned_files: u64,
    /// Unreferenced files kept because they are newer than the cutoff.
    pub recent_files: u64,
    /// Table-relative paths and sizes of the files deleted (or, in a dry run, to delete).
    pub deleted: Vec<(String, u64)>,
    pub dry_run: bool,
}

/// Vacuum the Delta table at `uri` (a URL) as of `now`.
pub async fn vacuum(
    uri: &str,
    options: &HashMap<String, String>,
    dry_run: bool,
    now: DateTime<Utc>,
) -> Result<VacuumReport, SinkError> {
    let k = Kernel::open(uri, options)?;
    let snapshot = k.load().await?.ok_or_else(|| SinkError::Location {
        location: k.location.clone(),
        reason: "no Delta table here (no _delta_log)".into(),
    })?;
    crate::delta_protocol::check_writable(&k.location, &snapshot)?;
    let retention = snapshot
        .table_properties()
        .deleted_file_retention_duration
        .unwrap_or(DEFAULT_RETENTION);
    if retention < DEFAULT_RETENTION {
        return Err(SinkError::Unsupported {
            location: k.location.clone(),
            feature: "delta.deletedFileRetentionDuration".into(),
            reason: format!(
                "{} is under 7 days: a writer's uncommitted data files could be deleted (Delta refuses it too unless its retention check is turned off)",
                humanize(retention)
            ),
        });
    }
    let cutoff = now - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
    let cutoff_ms = cutoff.timestamp_millis();
    let version = snapshot.version() as i64;
    let partition_columns: Vec<String> = snapshot
        .table_configuration()
        .metadata()
        .partition_columns()
        .to_vec();
    let (live, removed) = referenced(&k, &snapshot, cutoff_ms).await?;
    let io = |op: &'static str, e: object_store::Error| SinkError::Io {
        location: k.location.clone(),
        op,
        reason: e.to_string(),
    };
    let listed: Vec<object_store::ObjectMeta> = k
        .store
        .list(Some(&k.prefix))
        .try_collect()
        .await
        .map_err(|e| io("list the table", e))?;
    let prefix = k.prefix.as_ref();
    let mut report = VacuumReport {
        version,
        retention,
        live_files: live.files.len() as u64,
        tombstoned_files: removed.files.difference(&live.files).count() as u64,
        recent_files: 0,
        deleted: Vec::new(),
        dry_run,
    };
    let mut doomed = Vec::new();
    for m in listed {
        let key = m.location.as_ref();
        let rel = if prefix.is_empty() {
            key
        } else {
            match key.strip_prefix(prefix).and_then(|r| r.strip_prefix('/')) {
                Some(r) => r,
                None => continue,
            }
        };
        if hidden(rel, &partition_columns) {
            continue;
        }
        let decoded = decode(rel);
        let kept = |set: &HashSet<String>| set.contains(rel) || set.contains(&decoded);
        if kept(&live.paths) || kept(&removed.paths) {
            continue;
        }
        if m.last_modified >= cutoff {
            report.recent_files += 1;
            continue;
        }
        report.deleted.push((rel.to_string(), m.size));
        doomed.push(m.location);
    }
    report.deleted.sort();
    if !dry_run && !doomed.is_empty() {
        k.store
            .delete_stream(futures::stream::iter(doomed.into_iter().map(Ok)).boxed())
            .try_collect::<Vec<_>>()
            .await
            .map_err(|e| io("delete unreferenced files", e))?;
    }
    Ok(report)
}

/// The files `snapshot` references: its live files and their deletion vectors, and the files
/// of `remove` actions still in the log deleted after `cutoff_ms` (or at no stated time), each
/// path as written and decoded.
pub(crate) async fn referenced(
    k: &Kernel,
    snapshot: &delta_kernel::SnapshotRef,
    cutoff_ms: i64,
) -> Result<(Referenced, Referenced), SinkError> {
    let snapshot = snapshot.clone();
    let root = snapshot.table_root().clone();
    k.run(move |engine| {
        let mut live = Referenced::default();
        let scan = snapshot.clone().scan_builder().build()?;
        for meta in scan.scan_metadata(engine)? {
            let files = meta?.scan_files;
            let mut v = LiveVisitor {
                root: &root,
                out: &mut live,
            };
            v.visit_rows_of(&files)?;
        }
        let mut removed = Referenced::default();
        let mut v = RemoveVisitor {
            root: &root,
            cutoff_ms,
            out: &mut removed,
        };
        for batch in snapshot
            .log_segment()
            .read_actions(engine, delta_kernel::actions::LOG_REMOVE_SCHEMA.clone())?
        {
            v.visit_rows_of(batch?.actions.as_ref())?;
        }
        Ok((live, removed))
    })
    .await
    .map_err(|e| k.kernel_err("read the table's files", e))
}

/// Whether a table-relative path is kept out of a vacuum: the log, and any level starting
/// with `.`, or with `_` unless it is the directory of one of the table's partition columns
/// (`_col=value`). (`_change_data/` is kept whole: Delta deletes its expired files, this
/// vacuum does not read `cdc` actions.)
fn hidden(rel: &str, partition_columns: &[String]) -> bool {
    rel.split('/').any(|level| {
        level.starts_with('.')
            || (level.starts_with('_')
                && !partition_columns.iter().any(|c| {
                    level.starts_with(&format!("{}=", crate::writer::escape_partition_value(c)))
                }))
    })
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

fn humanize(d: Duration) -> String {
    let h = d.as_secs() / 3600;
    if h >= 24 && h.is_multiple_of(24) {
        format!("{} days", h / 24)
    } else {
        format!("{h} hours")
    }
}

/// Table-relative paths of files some action names, each as written and decoded.
#[derive(Default)]
pub(crate) struct Referenced {
    pub(crate) paths: HashSet<String>,
    /// The files, once each (decoded).
    files: HashSet<String>,
}

impl Referenced {
    /// A data file's path as an action writes it: relative (URI-encoded), or an absolute URI:
    /// kept when it lies in the table, passed over when it lies in another bucket or
    /// container, and an error when it cannot be told (an unknown scheme): when in doubt,
    /// nothing is deleted.
    fn add(&mut self, root: &Url, path: &str) -> Result<(), KernelError> {
        if path.contains("://") {
            let url = Url::parse(path)
                .map_err(|e| KernelError::generic(format!("the log names `{path}`: {e}")))?;
            if let Some(rel) = inside(root, &url).map_err(KernelError::generic)? {
                self.paths.insert(rel.clone());
                self.files.insert(rel);
            }
            return Ok(());
        }
        self.paths.insert(path.to_string());
        self.paths.insert(decode(path));
        self.files.insert(decode(path));
        Ok(())
    }

    fn add_dv(&mut self, root: &Url, dv: Option<DeletionVectorDescriptor>) -> DeltaResult<()> {
        if let Some(url) = dv.map(|d| d.absolute_path(root)).transpose()?.flatten() {
            self.add(root, url.as_str())?;
        }
        Ok(())
    }
}

/// Where an absolute URL lies against the table root: `Some(decoded relative path)` inside it,
/// `None` in another bucket or container or outside the table's prefix, an error when the two
/// cannot be compared. Schemes are compared by family (`s3`/`s3a`/`s3n`; `az`, `azure`,
/// `abfs(s)`, `wasb(s)` by container).
fn inside(root: &Url, url: &Url) -> Result<Option<String>, String> {
    fn family(u: &Url) -> Option<(&'static str, String)> {
        let host = u.host_str().unwrap_or_default().to_ascii_lowercase();
        match u.scheme() {
            "s3" | "s3a" | "s3n" => Some(("s3", host)),
            "gs" | "gcs" => Some(("gs", host)),
            "file" => Some(("file", host)),
            "az" | "azure" | "abfs" | "abfss" | "wasb" | "wasbs" | "adl" => {
                let container = if u.username().is_empty() {
                    host
                } else {
                    u.username().to_ascii_lowercase()
                };
                Some(("azure", container))
            }
            _ => None,
        }
    }
    let (Some(r), Some(f)) = (family(root), family(url)) else {
        return Err(format!(
            "cannot tell whether {url} lies in the table {root}; vacuum deletes nothing"
        ));
    };
    if r != f {
        return Ok(None);
    }
    let (rp, fp) = (decode(root.path()), decode(url.path()));
    let rp = if rp.ends_with('/') {
        rp
    } else {
        format!("{rp}/")
    };
    Ok(fp.strip_prefix(&rp).map(str::to_string))
}

/// The leaves of a deletion vector descriptor under `parent`, and the descriptor read back.
fn dv_columns(parent: &[&str]) -> Vec<ColumnName> {
    [
        "storageType",
        "pathOrInlineDv",
        "offset",
        "sizeInBytes",
        "cardinality",
    ]
    .iter()
    .map(|leaf| ColumnName::new(parent.iter().copied().chain(["deletionVector", leaf])))
    .collect()
}

const DV_TYPES: [DataType; 5] = [
    DataType::STRING,
    DataType::STRING,
    DataType::INTEGER,
    DataType::INTEGER,
    DataType::LONG,
];

fn dv_at<'a>(
    g: &[&'a dyn GetData<'a>],
    first: usize,
    i: usize,
) -> DeltaResult<Option<DeletionVectorDescriptor>> {
    let storage: Option<String> = g[first].get_opt(i, "deletionVector.storageType")?;
    let Some(storage) = storage else {
        return Ok(None);
    };
    let path: String = g[first + 1].get(i, "deletionVector.pathOrInlineDv")?;
    let offset: Option<i32> = g[first + 2].get_opt(i, "deletionVector.offset")?;
    let size: i32 = g[first + 3].get(i, "deletionVector.sizeInBytes")?;
    let cardinality: i64 = g[first + 4].get(i, "deletionVector.cardinality")?;
    Ok(Some(DeletionVectorDescriptor::try_new(
        storage.parse()?,
        path,
        offset,
        size,
        cardinality,
    )?))
}

static LIVE_COLUMNS: LazyLock<(Vec<ColumnName>, Vec<DataType>)> = LazyLock::new(|| {
    let mut names = vec![ColumnName::new(["path"])];
    names.extend(dv_columns(&[]));
    let mut types = vec![DataType::STRING];
    types.extend(DV_TYPES.iter().cloned());
    (names, types)
});

/// The live files of a scan (its selected rows) and their deletion vectors.
struct LiveVisitor<'r> {
    root: &'r Url,
    out: &'r mut Referenced,
}

impl FilteredRowVisitor for LiveVisitor<'_> {
    fn selected_column_names_and_types(&self) -> (&'static [ColumnName], &'static [DataType]) {
        (&LIVE_COLUMNS.0, &LIVE_COLUMNS.1)
    }

    fn visit_filtered<'a>(
        &mut self,
        g: &[&'a dyn GetData<'a>],
        rows: RowIndexIterator<'_>,
    ) -> DeltaResult<()> {
        for i in rows {
            let Some(path) = g[0].get_opt(i, "path")? else {
                continue;
            };
            let path: String = path;
            self.out.add(self.root, &path)?;
            self.out.add_dv(self.root, dv_at(g, 1, i)?)?;
        }
        Ok(())
    }
}

static REMOVE_COLUMNS: LazyLock<(Vec<ColumnName>, Vec<DataType>)> = LazyLock::new(|| {
    let mut names = vec![
        ColumnName::new(["remove", "path"]),
        ColumnName::new(["remove", "deletionTimestamp"]),
    ];
    names.extend(dv_columns(&["remove"]));
    let mut types = vec![DataType::STRING, DataType::LONG];
    types.extend(DV_TYPES.iter().cloned());
    (names, types)
});

/// The files of `remove` actions still needed: deleted after the cutoff, or at no stated
/// time (kept: when in doubt, keep).
struct RemoveVisitor<'r> {
    root: &'r Url,
    cutoff_ms: i64,
    out: &'r mut Referenced,
}

impl RowVisitor for RemoveVisitor<'_> {
    fn selected_column_names_and_types(&self) -> (&'static [ColumnName], &'static [DataType]) {
        (&REMOVE_COLUMNS.0, &REMOVE_COLUMNS.1)
    }

    fn visit<'a>(&mut self, rows: usize, g: &[&'a dyn GetData<'a>]) -> DeltaResult<()> {
        for i in 0..rows {
            let Some(path) = g[0].get_opt(i, "remove.path")? else {
                continue;
            };
            let path: String = path;
            let deleted: Option<i64> = g[1].get_opt(i, "remove.deletionTimestamp")?;
            if deleted.is_some_and(|t| t <= self.cutoff_ms) {
                continue;
            }
            self.out.add(self.root, &path)?;
            self.out.add_dv(self.root, dv_at(g, 2, i)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_paths_are_those_delta_keeps() {
        for h in [
            "_delta_log/00000000000000000000.json",
            ".part-0.parquet.crc",
            "_change_data/cdc-0.parquet",
            "x/.tmp/part-1.parquet",
            "_tmp_path/a.parquet",
            "_other=1/a.parquet",
        ] {
            assert!(hidden(h, &["_col".to_string()]), "{h}");
        }
        for v in [
            "part-0.parquet",
            "_col=1/part-0.parquet",
            "day=2024-01-01/part-0.parquet",
            "x/part-0.parquet",
            "deletion_vector_0b7e5a1c.bin",
        ] {
            assert!(!hidden(v, &["_col".to_string(), "day".to_string()]), "{v}");
        }
    }

    #[test]
    fn paths_are_kept_as_written_and_decoded() {
        let root = Url::parse("s3://b/t%20x/").unwrap();
        let mut r = Referenced::default();
        r.add(&root, "k=a%20b/part-0.parquet").unwrap();
        r.add(&root, "s3://b/t%20x/abs/part-1.parquet").unwrap();
        r.add(&root, "s3a://b/t x/abs/part-3.parquet").unwrap();
        r.add(&root, "s3://elsewhere/part-2.parquet").unwrap();
        for p in [
            "k=a%20b/part-0.parquet",
            "k=a b/part-0.parquet",
            "abs/part-1.parquet",
            "abs/part-3.parquet",
        ] {
            assert!(r.paths.contains(p), "{p}: {:?}", r.paths);
        }
        assert!(!r.paths.iter().any(|p| p.contains("part-2")));
        // A scheme it cannot compare: an error, nothing deleted.
        assert!(r.add(&root, "hdfs://nn/t/part-4.parquet").is_err());
        let az = Url::parse("az://box/t/").unwrap();
        let mut r = Referenced::default();
        r.add(&az, "abfss://box@acct.dfs.core.windows.net/t/p.parquet")
            .unwrap();
        r.add(&az, "abfss://other@acct.dfs.core.windows.net/t/q.parquet")
            .unwrap();
        assert!(
            r.paths.contains("p.parquet") && !r.paths.contains("q.parquet"),
            "{:?}",
            r.paths
        );
    }
}
