//! Conforming decoded batches to the stream schema, and adding per-file constant columns
//! (Hive partition values from the path).
//!
//! Matching is by name, exact first, then ignoring ASCII case. A value that does not cast to
//! the schema's type, or that the cast would change (`3.7` into a BIGINT, a DOUBLE `1e300`
//! into a FLOAT, a timestamp with a time of day into a DATE: the rules are
//! [`crate::exact`]'s), is a misfit, never written changed and never a silent null: in
//! [`conform`] it is an error naming the column and the row; with a rescued column
//! ([`Conformer`]) it is rescued. The permissive decoders use [`cast_permissive`], which nulls
//! such values and says which rows lost one (to rescue them or count them malformed).

use crate::error::FormatError;
use crate::rescue::{NewColumns, RescuedRow, SchemaPolicy, rescued_array, values_as_json};
use arrow::array::{Array, ArrayRef, RecordBatch, StringArray, new_null_array};
use arrow::array::{AsArray, StructArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::util::display::FormatOptions;
use arrow_schema::{DataType, Fields};
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
    let cast = cast_strict(path, name, col, field)?;
    match crate::exact::not_kept(col, &cast).first() {
        None => Ok(cast),
        Some(&row) => Err(FormatError::Column {
            path: path.to_string(),
            column: name.to_string(),
            reason: format!(
                "row {row}: {} would change as {}",
                shown(col, row),
                landfall_core::ddl::type_to_ddl(field.data_type())
            ),
        }),
    }
}

/// One value of `col` for a message.
fn shown(col: &ArrayRef, row: usize) -> String {
    arrow::util::display::ArrayFormatter::try_new(col.as_ref(), &FormatOptions::new())
        .map(|f| f.value(row).to_string())
        .unwrap_or_else(|_| "the value".into())
}

fn cast_strict(
    path: &str,
    name: &str,
    col: &ArrayRef,
    field: &Field,
) -> Result<ArrayRef, FormatError> {
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

/// Cast `col` to `field`'s type, nulling the values that do not convert exactly (see
/// [`crate::exact`]). Returns the cast column and the rows whose non-null value it does not
/// hold (to rescue them, or count them malformed). A cast arrow cannot do at all (say strings
/// to a struct) is still an error.
pub(crate) fn cast_permissive(
    path: &str,
    name: &str,
    col: &ArrayRef,
    field: &Field,
) -> Result<(ArrayRef, Vec<usize>), FormatError> {
    if col.data_type() == field.data_type() {
        return Ok((col.clone(), Vec::new()));
    }
    let column_error = |e: &dyn std::fmt::Display| FormatError::Column {
        path: path.to_string(),
        column: name.to_string(),
        reason: format!(
            "cannot convert {} to {}: {e}",
            col.data_type(),
            landfall_core::ddl::type_to_ddl(field.data_type())
        ),
    };
    let cast = cast_with_options(col, field.data_type(), &SAFE).map_err(|e| column_error(&e))?;
    let lost = crate::exact::not_kept(col, &cast);
    let cast = crate::exact::null_rows(&cast, &lost).map_err(|e| column_error(&e))?;
    Ok((cast, lost))
}

/// Reorder, cast and fill `batch` so it has exactly `target`'s columns: by name at every
/// struct level (exact, then ignoring ASCII case); columns and struct fields the target lacks
/// are dropped, those the batch lacks are null (an error for a NOT NULL one); a value that does
/// not cast, or would change, is an error naming the column.
pub fn conform(
    path: &str,
    batch: RecordBatch,
    target: &SchemaRef,
) -> Result<RecordBatch, FormatError> {
    if batch.schema().as_ref() == target.as_ref() {
        return Ok(batch);
    }
    Conformer::new(path, target.clone(), SchemaPolicy::default()).conform(batch)
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

/// A columnar file's batches as they are read, conformed, and the conformer that counts what
/// it rescued and the new columns it met ([`crate::parquet_batches`], [`crate::orc_batches`]).
pub type ConformedBatches = (
    futures::stream::BoxStream<'static, Result<RecordBatch, FormatError>>,
    Arc<std::sync::Mutex<Conformer>>,
);

/// [`conform`] under a [`SchemaPolicy`]: columns the target lacks are rescued and reported as
/// new columns, and values that do not cast, or would change, are rescued (null in their
/// column), as the policy asks ([`crate::rescue`]). Without a rescued column or new-column detection it is [`conform`].
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
        if batch.schema().as_ref() == self.target.as_ref() {
            return Ok(batch);
        }
        let n = batch.num_rows();
        let rescue = self.policy.rescued_column.clone();
        let mut fit = Fit {
            file: &self.path,
            policy: &self.policy,
            rescued: rescue
                .as_ref()
                .map(|_| (0..n).map(|_| RescuedRow::default()).collect()),
            new_columns: &mut self.new_columns,
        };
        let src = batch.schema();
        let wanted: Fields = self
            .target
            .fields()
            .iter()
            .filter(|f| Some(f.name()) != rescue.as_ref())
            .cloned()
            .collect();
        let fitted = fit.fit_fields(&[], src.fields(), batch.columns(), &wanted, true)?;
        let rescued = fit.rescued.take();
        let mut fitted = fitted.into_iter();
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(self.target.fields().len());
        for field in self.target.fields() {
            if Some(field.name()) == rescue.as_ref() {
                cols.push(new_null_array(field.data_type(), n));
            } else {
                cols.push(fitted.next().expect("one fitted column per wanted field"));
            }
        }
        if let (Some(rows), Some(at)) = (
            rescued,
            rescue.as_ref().and_then(|r| self.target.index_of(r).ok()),
        ) {
            let texts: Vec<Option<String>> =
                rows.into_iter().map(|r| r.finish(&self.path)).collect();
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

/// One batch being fitted to a schema under a policy.
struct Fit<'a> {
    file: &'a str,
    policy: &'a SchemaPolicy,
    /// Per row, when the policy has a rescued column.
    rescued: Option<Vec<RescuedRow>>,
    new_columns: &'a mut NewColumns,
}

impl Fit<'_> {
    /// `src` columns (rows aligned with the batch) fitted to `fields` by name. `top`: the
    /// batch's own columns (path columns are dropped there).
    fn fit_fields(
        &mut self,
        parents: &[String],
        src: &Fields,
        cols: &[ArrayRef],
        fields: &Fields,
        top: bool,
    ) -> Result<Vec<ArrayRef>, FormatError> {
        let rescuing = self.rescued.is_some();
        let n = cols.first().map_or(0, |c| c.len());
        let mut used = vec![false; src.len()];
        let mut out = Vec::with_capacity(fields.len());
        for field in fields {
            let found = src
                .iter()
                .position(|f| f.name() == field.name())
                .or_else(|| {
                    // With a rescued column a name that differs only in case is not this one's.
                    (!rescuing)
                        .then(|| {
                            src.iter()
                                .position(|f| f.name().eq_ignore_ascii_case(field.name()))
                        })
                        .flatten()
                })
                .filter(|&j| !used[j]);
            let mut segs = parents.to_vec();
            segs.push(field.name().clone());
            let Some(j) = found else {
                if !field.is_nullable() {
                    return Err(FormatError::Column {
                        path: self.file.to_string(),
                        column: segs.join("."),
                        reason: "is NOT NULL in the schema but missing from the file".into(),
                    });
                }
                out.push(new_null_array(field.data_type(), n));
                continue;
            };
            used[j] = true;
            out.push(self.fit_column(&segs, &cols[j], field)?);
        }
        for (j, f) in src.iter().enumerate() {
            if used[j] || (top && self.policy.is_path_column(f.name())) {
                continue;
            }
            let mut segs = parents.to_vec();
            segs.push(f.name().clone());
            let case_only = fields
                .iter()
                .any(|t| t.name().eq_ignore_ascii_case(f.name()));
            if self.policy.detect_new_columns && !case_only {
                let path: Vec<&str> = segs.iter().map(String::as_str).collect();
                self.new_columns.note(&path, f.data_type().clone());
            }
            self.rescue_values(&segs, &cols[j], None)?;
        }
        Ok(out)
    }

    /// `col` fitted to `field`: structs member by member, other types cast. A value that does
    /// not cast, or would change, is rescued (null in its column) with a rescued column, an
    /// error without.
    fn fit_column(
        &mut self,
        segs: &[String],
        col: &ArrayRef,
        field: &Field,
    ) -> Result<ArrayRef, FormatError> {
        if col.data_type() == field.data_type() {
            return Ok(col.clone());
        }
        let name = segs.join(".");
        if let (DataType::Struct(_), DataType::Struct(children)) =
            (col.data_type(), field.data_type())
        {
            let s = col.as_struct();
            let fitted = self.fit_fields(segs, s.fields(), s.columns(), children, false)?;
            return StructArray::try_new(children.clone(), fitted, s.nulls().cloned())
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| FormatError::Column {
                    path: self.file.to_string(),
                    column: name,
                    reason: e.to_string(),
                });
        }
        // Type widening: a file column wider than its schema column widens it, whether or
        // not its values fit (the file's schema says what it holds, as Auto Loader reads it).
        // The batch is read again on the widened schema, so this attempt's values need not
        // be exact: those that do not fit are rescued, or null without a rescued column.
        let widening = self.policy.widen_types
            && match landfall_core::type_widening::widened(field.data_type(), col.data_type()) {
                Some(to) => {
                    let path: Vec<&str> = segs.iter().map(String::as_str).collect();
                    self.new_columns.note_widening(&path, to);
                    true
                }
                None => false,
            };
        if self.rescued.is_none() {
            if widening && let Ok((cast, _)) = cast_permissive(self.file, &name, col, field) {
                return Ok(cast);
            }
            return cast_column(self.file, &name, col, field);
        }
        let (cast, lost) = match cast_permissive(self.file, &name, col, field) {
            Ok(c) => c,
            // No cast at all (a struct into an INT column): every value is rescued.
            Err(_) => (
                new_null_array(field.data_type(), col.len()),
                (0..col.len()).filter(|&r| col.is_valid(r)).collect(),
            ),
        };
        if !lost.is_empty() {
            self.rescue_values(segs, col, Some(&lost))?;
        }
        Ok(cast)
    }

    /// Put the non-null values of `col` (all rows, or `rows`) in the rescued column under the
    /// path `segs`.
    fn rescue_values(
        &mut self,
        segs: &[String],
        col: &ArrayRef,
        rows: Option<&[usize]>,
    ) -> Result<(), FormatError> {
        let Some(rescued) = self.rescued.as_mut() else {
            return Ok(());
        };
        let texts = values_as_json(col).map_err(|e| FormatError::Unreadable {
            path: self.file.to_string(),
            reason: format!("column `{}`: {e}", segs.join(".")),
        })?;
        let path = segs.join(".");
        let mut put = |r: usize| {
            if let Some(t) = &texts[r] {
                rescued[r].put_raw(path.clone(), t);
            }
        };
        match rows {
            Some(rows) => rows.iter().copied().for_each(&mut put),
            None => (0..col.len()).for_each(&mut put),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Float64Array};

    /// A cast into a decimal that changed the value is found; one that kept it is not (a FLOAT
    /// compared in its own type, -0.0 as 0.0); text that does not convert is not kept either.
    #[test]
    fn inexact_decimal_casts_are_found_and_exact_ones_kept() {
        let dec = DataType::Decimal128(4, 2);
        let check = |src: ArrayRef| {
            let cast = arrow::compute::cast(&src, &dec).unwrap();
            crate::exact::not_kept(&src, &cast)
        };
        let f32s: ArrayRef = Arc::new(Float32Array::from(vec![0.1, 0.125, 12.5, -0.0]));
        assert_eq!(check(f32s), [1]);
        let f64s: ArrayRef = Arc::new(Float64Array::from(vec![Some(-0.0), None, Some(1.005)]));
        assert_eq!(check(f64s), [2]);
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["12.345", " 1.5 ", "12.50", "x"]));
        assert_eq!(check(strings), [0, 3]);
    }
}

#[cfg(test)]
#[path = "conform_tests.rs"]
pub(crate) mod exact_tests;
