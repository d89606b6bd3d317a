//! Conforming decoded batches to the stream schema, and adding per-file constant columns
//! (Hive partition values from the path).
//!
//! Matching is by name, exact first, then ignoring ASCII case. In [`conform`] a value that does
//! not cast to the schema's type is an error naming the column, never a silent null. The
//! permissive decoders use [`cast_permissive`] instead, which nulls such values and says which
//! rows lost one (to count them malformed).

use crate::error::FormatError;
use crate::rescue::{NewColumns, RescuedRow, SchemaPolicy, rescued_array, rows_as_json};
use arrow::array::{Array, ArrayRef, RecordBatch, StringArray, new_null_array};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::util::display::FormatOptions;
use arrow_schema::{Field, FieldRef, SchemaRef};
use std::sync::Arc;

const STRICT: CastOptions<'static> = CastOptions {
    safe: false,
    format_options: FormatOptions::new(),
};

fn cast_column(
    path: &str,
    name: &str,
    col: &ArrayRef,
    field: &Field,
) -> Result<ArrayRef, FormatError> {
    if col.data_type() == field.data_type() {
        return Ok(col.clone());
    }
    cast_with_options(col, field.data_type(), &STRICT).map_err(|e| FormatError::Column {
        path: path.to_string(),
        column: name.to_string(),
        reason: format!(
            "cannot convert {} to {}: {e}",
            col.data_type(),
            landfall_core::ddl::type_to_ddl(field.data_type())
        ),
    })
}

const SAFE: CastOptions<'static> = CastOptions {
    safe: true,
    format_options: FormatOptions::new(),
};

/// Cast `col` to `field`'s type, nulling the values that do not convert. Returns the cast
/// column and the rows whose non-null value became null. A cast arrow cannot do at all (say
/// strings to a struct) is still an error.
pub(crate) fn cast_permissive(
    path: &str,
    name: &str,
    col: &ArrayRef,
    field: &Field,
) -> Result<(ArrayRef, Vec<usize>), FormatError> {
    if col.data_type() == field.data_type() {
        return Ok((col.clone(), Vec::new()));
    }
    let cast =
        cast_with_options(col, field.data_type(), &SAFE).map_err(|e| FormatError::Column {
            path: path.to_string(),
            column: name.to_string(),
            reason: format!(
                "cannot convert {} to {}: {e}",
                col.data_type(),
                landfall_core::ddl::type_to_ddl(field.data_type())
            ),
        })?;
    let lost = match cast.logical_nulls() {
        None => Vec::new(),
        Some(nulls) if nulls.null_count() == col.logical_null_count() => Vec::new(),
        Some(nulls) => (0..col.len())
            .filter(|&i| nulls.is_null(i) && col.is_valid(i))
            .collect(),
    };
    Ok((cast, lost))
}

/// Reorder, cast and fill `batch` so it has exactly `target`'s columns.
pub fn conform(
    path: &str,
    batch: RecordBatch,
    target: &SchemaRef,
) -> Result<RecordBatch, FormatError> {
    if batch.schema().as_ref() == target.as_ref() {
        return Ok(batch);
    }
    let src = batch.schema();
    let mut cols = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let col = match src.index_of(field.name()).ok().or_else(|| {
            src.fields()
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(field.name()))
        }) {
            Some(i) => cast_column(path, field.name(), batch.column(i), field)?,
            None => {
                if !field.is_nullable() {
                    return Err(FormatError::Column {
                        path: path.to_string(),
                        column: field.name().clone(),
                        reason: "is NOT NULL in the schema but missing from the file".into(),
                    });
                }
                new_null_array(field.data_type(), batch.num_rows())
            }
        };
        cols.push(col);
    }
    RecordBatch::try_new(target.clone(), cols).map_err(|e| FormatError::Unreadable {
        path: path.to_string(),
        reason: e.to_string(),
    })
}

/// The value of a column that is the same for every row of a file.
#[derive(Debug, Clone)]
pub enum Constant {
    /// Text cast to the column's type (a Hive partition value; `None`: null).
    Text(Option<String>),
    /// A one-row array of the column's type (the `_metadata` struct).
    Row(ArrayRef),
}

/// Append columns whose value is the same on every row (partition values parsed from the
/// path, cast from their string form to the field's type; file metadata).
pub fn with_constant_columns(
    path: &str,
    batch: RecordBatch,
    columns: &[(FieldRef, Constant)],
    target: &SchemaRef,
) -> Result<RecordBatch, FormatError> {
    if columns.is_empty() {
        return Ok(batch);
    }
    let n = batch.num_rows();
    let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
    for (field, value) in columns {
        match value {
            Constant::Text(value) => {
                let s: ArrayRef = Arc::new(StringArray::from(vec![value.clone(); n]));
                cols.push(cast_column(path, field.name(), &s, field)?);
            }
            Constant::Row(one) => {
                let idx = arrow::array::UInt32Array::from(vec![0u32; n]);
                cols.push(arrow::compute::take(one.as_ref(), &idx, None).map_err(|e| {
                    FormatError::Unreadable {
                        path: path.to_string(),
                        reason: format!("column `{}`: {e}", field.name()),
                    }
                })?);
            }
        }
    }
    RecordBatch::try_new(target.clone(), cols).map_err(|e| FormatError::Unreadable {
        path: path.to_string(),
        reason: e.to_string(),
    })
}

/// [`conform`] under a [`SchemaPolicy`]: columns the target lacks are rescued and reported as
/// new columns, and values that do not cast are rescued (null in their column), as the policy
/// asks ([`crate::rescue`]). Without a rescued column or new-column detection it is [`conform`].
/// For inputs that carry their own schema (Parquet).
pub struct Conformer {
    path: String,
    target: SchemaRef,
    policy: SchemaPolicy,
    pub new_columns: NewColumns,
    pub rescued_rows: u64,
}

impl Conformer {
    pub fn new(path: &str, target: SchemaRef, policy: SchemaPolicy) -> Self {
        Conformer {
            path: path.to_string(),
            target,
            policy,
            new_columns: NewColumns::default(),
            rescued_rows: 0,
        }
    }

    pub fn conform(&mut self, batch: RecordBatch) -> Result<RecordBatch, FormatError> {
        if !self.policy.watches_unknown() {
            return conform(&self.path, batch, &self.target);
        }
        let rescue = self.policy.rescued_column.clone();
        let src = batch.schema();
        let n = batch.num_rows();
        let mut used = vec![false; src.fields().len()];
        let mut rescued: Vec<RescuedRow> = match rescue {
            Some(_) => (0..n).map(|_| RescuedRow::default()).collect(),
            None => Vec::new(),
        };
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(self.target.fields().len());
        let mut rescue_at = None;
        for (i, field) in self.target.fields().iter().enumerate() {
            if Some(field.name()) == rescue.as_ref() {
                rescue_at = Some(i);
                cols.push(new_null_array(field.data_type(), n));
                continue;
            }
            let found = src.index_of(field.name()).ok().or_else(|| {
                // With a rescued column a name that differs only in case is not this one's.
                rescue.is_none().then(|| {
                    src.fields()
                        .iter()
                        .position(|f| f.name().eq_ignore_ascii_case(field.name()))
                })?
            });
            let Some(j) = found else {
                if !field.is_nullable() {
                    return Err(FormatError::Column {
                        path: self.path.clone(),
                        column: field.name().clone(),
                        reason: "is NOT NULL in the schema but missing from the file".into(),
                    });
                }
                cols.push(new_null_array(field.data_type(), n));
                continue;
            };
            used[j] = true;
            let col = batch.column(j);
            if rescue.is_none() {
                cols.push(cast_column(&self.path, field.name(), col, field)?);
                continue;
            }
            let (cast, lost) = match cast_permissive(&self.path, field.name(), col, field) {
                Ok(c) => c,
                // No cast at all (a struct into an INT column): every value is rescued.
                Err(_) => (
                    new_null_array(field.data_type(), n),
                    (0..n).filter(|&r| col.is_valid(r)).collect(),
                ),
            };
            if !lost.is_empty() {
                let values = rows_as_json(&[field.name().clone()], std::slice::from_ref(col))
                    .map_err(|e| self.unreadable(e))?;
                for r in lost {
                    if let Some(v) = values[r].get(field.name()) {
                        rescued[r].put(field.name().clone(), v.clone());
                    }
                }
            }
            cols.push(cast);
        }
        let mut extra_names = Vec::new();
        let mut extra_cols = Vec::new();
        for (j, f) in src.fields().iter().enumerate() {
            // A file's own rescued-data column is an unknown column like any other.
            if used[j] || self.policy.is_path_column(f.name()) {
                continue;
            }
            let case_only = self
                .target
                .fields()
                .iter()
                .any(|t| t.name().eq_ignore_ascii_case(f.name()));
            if self.policy.detect_new_columns && !case_only {
                self.new_columns
                    .note(&[f.name().as_str()], f.data_type().clone());
            }
            extra_names.push(f.name().clone());
            extra_cols.push(batch.column(j).clone());
        }
        if let Some(at) = rescue_at {
            let extras = rows_as_json(&extra_names, &extra_cols).map_err(|e| self.unreadable(e))?;
            for (row, values) in rescued.iter_mut().zip(extras) {
                for (k, v) in values {
                    row.put(k, v);
                }
            }
            let texts: Vec<Option<String>> =
                rescued.into_iter().map(|r| r.finish(&self.path)).collect();
            self.rescued_rows += texts.iter().filter(|t| t.is_some()).count() as u64;
            cols[at] = rescued_array(texts);
        }
        RecordBatch::try_new(self.target.clone(), cols).map_err(|e| self.unreadable(e))
    }

    fn unreadable(&self, e: impl std::fmt::Display) -> FormatError {
        FormatError::Unreadable {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }
}
