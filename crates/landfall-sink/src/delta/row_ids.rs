//! Row ids through compaction: a row-tracking table's rows keep their row ids and row commit
//! versions when compaction rewrites their files, in the table's materialized columns
//! (`delta.rowTracking.materializedRowIdColumnName`, `...RowCommitVersionColumnName`), as the
//! protocol asks of writers that move rows between files.

use super::compact::LiveFile;
use super::kernel::Kernel;
use crate::error::SinkError;
use arrow::array::RecordBatch;
use arrow_schema::Schema;
use delta_kernel::engine_data::{FilteredRowVisitor, GetData, RowIndexIterator, TypedGetData};
use delta_kernel::expressions::ColumnName;
use delta_kernel::schema::DataType as KernelType;
use delta_kernel::{KernelError, SnapshotRef};
use std::sync::{Arc, LazyLock};

/// Each live file's `baseRowId` and `defaultRowCommitVersion`, by its path in the log.
pub(crate) type FileRowIds = std::collections::HashMap<String, (Option<i64>, Option<i64>)>;

/// A row-tracking table's materialized columns.
pub(crate) struct Tracking {
    pub id_column: String,
    pub version_column: String,
}

/// The table's row tracking, when its protocol has the feature.
pub(crate) fn row_tracking(
    location: &str,
    snapshot: &SnapshotRef,
) -> Result<Option<Tracking>, SinkError> {
    if !tracked(snapshot) {
        return Ok(None);
    }
    let props = snapshot.table_properties();
    match (
        props.materialized_row_id_column_name.clone(),
        props.materialized_row_commit_version_column_name.clone(),
    ) {
        (Some(id_column), Some(version_column)) => Ok(Some(Tracking {
            id_column,
            version_column,
        })),
        _ => Err(SinkError::Unsupported {
            location: location.to_string(),
            feature: "rowTracking".into(),
            reason: "the table names no materialized row-id columns, where compacted files keep their rows' ids".into(),
        }),
    }
}

impl Tracking {
    /// `batch` (rows `offset..` of source file `f`, conformed) with the two materialized
    /// columns: the file's own materialized values where it has them, else computed.
    pub(crate) fn keep_ids(
        &self,
        raw: &RecordBatch,
        batch: RecordBatch,
        f: &LiveFile,
        offset: i64,
    ) -> Result<RecordBatch, String> {
        use arrow::array::{Array, AsArray, Int64Array};
        let (Some(base), Some(version)) = f.row_ids.unwrap_or((None, None)) else {
            return Err("the file has no baseRowId or defaultRowCommitVersion (rows written before row tracking was enabled)".into());
        };
        let given = |name: &str| -> Result<Option<Int64Array>, String> {
            match raw.column_by_name(name) {
                None => Ok(None),
                Some(c) => c
                    .as_primitive_opt::<arrow::datatypes::Int64Type>()
                    .cloned()
                    .map(Some)
                    .ok_or_else(|| {
                        format!(
                            "its materialized column `{name}` is {}, not a long",
                            c.data_type()
                        )
                    }),
            }
        };
        let (ids_given, versions_given) = (given(&self.id_column)?, given(&self.version_column)?);
        let n = raw.num_rows();
        let ids: Int64Array = (0..n)
            .map(|i| match &ids_given {
                Some(g) if !g.is_null(i) => Some(g.value(i)),
                _ => Some(base + offset + i as i64),
            })
            .collect();
        let versions: Int64Array = (0..n)
            .map(|i| match &versions_given {
                Some(g) if !g.is_null(i) => Some(g.value(i)),
                _ => Some(version),
            })
            .collect();
        let mut fields: Vec<_> = batch.schema().fields().iter().cloned().collect();
        fields.push(Arc::new(arrow_schema::Field::new(
            &self.id_column,
            arrow_schema::DataType::Int64,
            true,
        )));
        fields.push(Arc::new(arrow_schema::Field::new(
            &self.version_column,
            arrow_schema::DataType::Int64,
            true,
        )));
        let mut columns = batch.columns().to_vec();
        columns.push(Arc::new(ids));
        columns.push(Arc::new(versions));
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| e.to_string())
    }
}

static ROW_ID_COLUMNS: LazyLock<(Vec<ColumnName>, Vec<KernelType>)> = LazyLock::new(|| {
    (
        vec![
            ColumnName::new(["path"]),
            ColumnName::new(["fileConstantValues", "baseRowId"]),
            ColumnName::new(["fileConstantValues", "defaultRowCommitVersion"]),
        ],
        vec![KernelType::STRING, KernelType::LONG, KernelType::LONG],
    )
});

/// `baseRowId` and `defaultRowCommitVersion` of every live file.
struct RowIds(FileRowIds);

impl FilteredRowVisitor for RowIds {
    fn selected_column_names_and_types(&self) -> (&'static [ColumnName], &'static [KernelType]) {
        (&ROW_ID_COLUMNS.0, &ROW_ID_COLUMNS.1)
    }

    fn visit_filtered<'a>(
        &mut self,
        g: &[&'a dyn GetData<'a>],
        rows: RowIndexIterator<'_>,
    ) -> Result<(), KernelError> {
        for i in rows {
            let path: Option<String> = g[0].get_opt(i, "path")?;
            if let Some(path) = path {
                let base: Option<i64> = g[1].get_opt(i, "fileConstantValues.baseRowId")?;
                let version: Option<i64> =
                    g[2].get_opt(i, "fileConstantValues.defaultRowCommitVersion")?;
                self.0.insert(path, (base, version));
            }
        }
        Ok(())
    }
}

pub(crate) async fn row_ids(k: &Kernel, snapshot: &SnapshotRef) -> Result<FileRowIds, SinkError> {
    let snapshot = snapshot.clone();
    k.run(move |engine| {
        let scan = snapshot.scan_builder().build()?;
        let mut v = RowIds(Default::default());
        for meta in scan.scan_metadata(engine)? {
            v.visit_rows_of(&meta?.scan_files)?;
        }
        Ok(v.0)
    })
    .await
    .map_err(|e| k.kernel_err("read the files' row ids", e))
}

/// Whether `snapshot`'s protocol has row tracking.
pub(crate) fn tracked(snapshot: &SnapshotRef) -> bool {
    snapshot
        .table_configuration()
        .protocol()
        .writer_features()
        .is_some_and(|fs| fs.iter().any(|f| f.to_string() == "rowTracking"))
}
