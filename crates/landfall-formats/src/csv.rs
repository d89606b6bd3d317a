//! CSV, decoded incrementally. With a header (the default) each file is read by its own header:
//! columns are matched to the stream schema by name (exact, then ignoring case), columns the
//! schema lacks are dropped and columns the file lacks are null. With a rescued column
//! ([`crate::rescue`]) names are matched exactly, and unmatched columns and values that do not
//! convert go to the rescued column instead (not malformed); unmatched columns are reported as
//! new (string) columns when the policy asks. Without a header, columns are
//! taken by position. Records are split by [`crate::csv_tokenize`] (arrow-csv's dialect).
//!
//! Decoding is permissive (the only mode for now): a file never fails for its content.
//!
//! - A value that does not convert to its column's type (`abc` for INT) is null and its row is
//!   counted malformed; so is a value that is not UTF-8.
//! - An empty value is null and not malformed (for string columns too, unless `null_value` is
//!   set, which then is the only null spelling for them).
//! - A record with more fields than the header (or, without one, the schema) keeps the
//!   declared ones and drops the rest; one with fewer gets nulls. Both count as malformed.
//! - A last record without a newline is a row; one cut inside quotes by the end of the file is
//!   malformed and yields no row.
//! - Empty lines and comment lines are skipped.
//!
//! [`landfall_core::Decoder::malformed_rows`] counts malformed rows, and
//! [`CsvDecoder::first_malformed`] tells where the first one starts and why.

use crate::conform::cast_permissive;
use crate::csv_tokenize::{Records, Tokenizer};
use crate::error::{FormatError, MalformedRecord, Tally};
use crate::rescue::{NewColumns, RescuedRow, SchemaPolicy, rescued_array};
use crate::{CsvFormat, DecodeOptions};
use arrow::array::{ArrayRef, RecordBatch, StringArray, StringBuilder, new_null_array};
use arrow_schema::{DataType, Field, SchemaRef};
use bytes::Bytes;
use landfall_core::seams::SeamResult;
use serde_json::Value;
use std::sync::Arc;

pub struct CsvDecoder {
    path: String,
    schema: SchemaRef,
    format: CsvFormat,
    batch_size: usize,
    tok: Tokenizer,
    /// Records read and not yet turned into a batch.
    records: Records,
    /// How records map to the schema: known from the start without a header.
    layout: Option<Layout>,
    tally: Tally,
    policy: SchemaPolicy,
    new_columns: NewColumns,
    rescued_rows: u64,
    /// Malformed records yield no row (`mode = "drop_malformed"`).
    drop_malformed: bool,
    /// Lines still to pass over at the start (`skip_rows`).
    skip_left: usize,
}

/// How the records of one file map to the schema.
struct Layout {
    /// The number of fields a record should have.
    width: usize,
    /// For each schema field, the record field it is read from.
    sources: Vec<Option<usize>>,
    /// Header columns no schema column reads (rescued when the policy has a rescued column).
    extras: Vec<(usize, String)>,
}

/// Malformed rows of one batch, and the reason for the earliest.
struct Bad {
    rows: Vec<bool>,
    /// The first reason of each malformed row.
    reasons: Vec<Option<String>>,
}

impl Bad {
    fn note(&mut self, r: usize, reason: impl FnOnce() -> String) {
        self.rows[r] = true;
        if self.reasons[r].is_none() {
            self.reasons[r] = Some(reason());
        }
    }
}

impl CsvDecoder {
    pub fn new(path: &str, schema: SchemaRef, opts: &DecodeOptions) -> Self {
        let layout = (!opts.csv.header).then(|| {
            let data: Vec<usize> = (0..schema.fields().len())
                .filter(|&i| Some(schema.field(i).name()) != opts.policy.rescued_column.as_ref())
                .collect();
            Layout {
                width: data.len(),
                sources: (0..schema.fields().len())
                    .map(|i| data.iter().position(|&d| d == i))
                    .collect(),
                extras: Vec::new(),
            }
        });
        CsvDecoder {
            path: path.to_string(),
            schema,
            format: opts.csv.clone(),
            batch_size: opts.batch_size.max(1),
            tok: Tokenizer::new(&opts.csv),
            records: Records::default(),
            layout,
            tally: Tally::collecting(opts.collect_malformed),
            policy: opts.policy.clone(),
            new_columns: NewColumns::default(),
            rescued_rows: 0,
            drop_malformed: opts.mode == crate::ParseMode::DropMalformed,
            skip_left: opts.csv.skip_rows,
        }
    }

    /// The first record that did not fit: where it starts and why.
    pub fn first_malformed(&self) -> Option<&MalformedRecord> {
        self.tally.first.as_ref()
    }

    /// The layout a header gives: its names matched to the schema as [`crate::conform`] does.
    fn layout_of(&mut self, header: Vec<Vec<u8>>) -> Result<Layout, FormatError> {
        if header.len() > self.format.max_columns {
            return Err(FormatError::Unreadable {
                path: self.path.clone(),
                reason: format!(
                    "the header has {} columns, more than max_columns ({})",
                    header.len(),
                    self.format.max_columns
                ),
            });
        }
        let mut seen = std::collections::HashSet::new();
        let names: Vec<String> = header
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let n = String::from_utf8_lossy(self.trimmed(n)).into_owned();
                if seen.insert(n.clone()) {
                    n
                } else {
                    format!("_c{i}")
                }
            })
            .collect();
        let rescuing = self.policy.rescued_column.is_some();
        let mut sources = Vec::with_capacity(self.schema.fields().len());
        for field in self.schema.fields() {
            if Some(field.name()) == self.policy.rescued_column.as_ref() {
                sources.push(None);
                continue;
            }
            // With a rescued column a name that differs only in case is not this column's.
            let src = names.iter().position(|n| n == field.name()).or_else(|| {
                (!rescuing)
                    .then(|| {
                        names
                            .iter()
                            .position(|n| n.eq_ignore_ascii_case(field.name()))
                    })
                    .flatten()
            });
            if src.is_none() && !field.is_nullable() {
                return Err(FormatError::Column {
                    path: self.path.clone(),
                    column: field.name().clone(),
                    reason: "is NOT NULL in the schema but missing from the file".into(),
                });
            }
            sources.push(src);
        }
        let mut extras = Vec::new();
        if self.policy.watches_unknown() {
            for (j, n) in names.iter().enumerate() {
                if sources.contains(&Some(j)) || self.policy.is_path_column(n) {
                    continue;
                }
                let case_only = self
                    .schema
                    .fields()
                    .iter()
                    .any(|f| f.name().eq_ignore_ascii_case(n));
                if self.policy.detect_new_columns && !case_only {
                    // Typed from its values batch by batch when inferring (a column with no
                    // value at all stays a string: see `new_columns`).
                    let ty = if self.policy.infer_types {
                        DataType::Null
                    } else {
                        DataType::Utf8
                    };
                    self.new_columns.note(&[n.as_str()], ty);
                }
                extras.push((j, n.clone()));
            }
        }
        Ok(Layout {
            width: names.len(),
            sources,
            extras,
        })
    }

    fn is_null(&self, v: &[u8], string_column: bool) -> bool {
        match &self.format.null_value {
            Some(n) => v == n.as_bytes() || (v.is_empty() && !string_column),
            None => v.is_empty(),
        }
    }

    /// The type inference gives column `j` from the values of the records read so far (the
    /// rule of a first schema, [`crate::infer_csv`]): `Null` when none has a value.
    fn value_type(&self, j: usize) -> DataType {
        crate::infer_csv::column_type(
            (0..self.records.len()).filter_map(|r| self.records.field(r, j)),
            &self.format,
        )
    }

    /// A field as the options see it: trimmed as asked.
    fn trimmed<'a>(&self, mut v: &'a [u8]) -> &'a [u8] {
        if self.format.ignore_leading_white_space {
            v = v.trim_ascii_start();
        }
        if self.format.ignore_trailing_white_space {
            v = v.trim_ascii_end();
        }
        v
    }

    /// Field `j` of every record, as strings (nulls per the null rules).
    fn strings(&self, j: usize, ty: &DataType, name: &str, bad: &mut Bad) -> StringArray {
        let string_column = matches!(
            ty,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
        let float_column = matches!(
            ty,
            DataType::Float16 | DataType::Float32 | DataType::Float64
        );
        let n = self.records.len();
        let mut b = StringBuilder::with_capacity(n, 0);
        for r in 0..n {
            let field = self.records.field(r, j).map(|v| self.trimmed(v));
            if let (Some(v), Some(empty)) = (field, &self.format.empty_value)
                && v.is_empty()
                && string_column
                && self.format.null_value.as_deref() != Some("")
            {
                b.append_value(empty);
                continue;
            }
            match field {
                Some(v) if float_column && v == self.format.nan_value.as_bytes() => {
                    b.append_value("NaN")
                }
                Some(v) if !self.is_null(v, string_column) => match std::str::from_utf8(v) {
                    Ok(s) => b.append_value(s),
                    Err(_) => {
                        bad.note(r, || format!("column `{name}`: not UTF-8"));
                        b.append_null();
                    }
                },
                _ => b.append_null(),
            }
        }
        b.finish()
    }

    /// Turn the records read so far into a batch (the first one is the header if none was).
    fn flush(&mut self, out: &mut Vec<RecordBatch>) -> Result<(), FormatError> {
        if self.layout.is_none() {
            if self.records.len() == 0 {
                return Ok(());
            }
            let header = self.records.take_first();
            self.layout = Some(self.layout_of(header)?);
        }
        let n = self.records.len();
        if n == 0 {
            return Ok(());
        }
        let layout = self.layout.as_ref().expect("layout known");
        let mut bad = Bad {
            rows: vec![false; n],
            reasons: vec![None; n],
        };
        for r in 0..n {
            let k = self.records.num_fields(r);
            if k > self.format.max_columns {
                return Err(FormatError::Unreadable {
                    path: self.path.clone(),
                    reason: format!(
                        "line {}: {k} fields, more than max_columns ({})",
                        self.records.start(r).line,
                        self.format.max_columns
                    ),
                });
            }
            if k != layout.width {
                let width = layout.width;
                bad.note(r, || format!("expected {width} fields, found {k}"));
            }
        }
        let rescue_at = self
            .policy
            .rescued_column
            .as_ref()
            .and_then(|c| self.schema.index_of(c).ok());
        let mut rescued: Vec<RescuedRow> = match rescue_at {
            Some(_) => (0..n).map(|_| RescuedRow::default()).collect(),
            None => Vec::new(),
        };
        if self.policy.detect_new_columns && self.policy.infer_types {
            for (j, name) in &layout.extras {
                // A name differing from a column only in case is rescued, not new.
                let case_only = self
                    .schema
                    .fields()
                    .iter()
                    .any(|f| f.name().eq_ignore_ascii_case(name));
                if !case_only {
                    let ty = self.value_type(*j);
                    self.new_columns.note(&[name.as_str()], ty);
                }
            }
        }
        if rescue_at.is_some() {
            for (j, name) in &layout.extras {
                for (r, row) in rescued.iter_mut().enumerate() {
                    if let Some(v) = self.records.field(r, *j)
                        && !self.is_null(v, true)
                    {
                        row.put(
                            name.clone(),
                            Value::String(String::from_utf8_lossy(v).into_owned()),
                        );
                    }
                }
            }
        }
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(layout.sources.len());
        for (field, src) in self.schema.fields().iter().zip(&layout.sources) {
            let Some(j) = *src else {
                cols.push(new_null_array(field.data_type(), n));
                continue;
            };
            let strings = self.strings(j, field.data_type(), field.name(), &mut bad);
            let strings: ArrayRef = Arc::new(strings);
            let parsed = self
                .format
                .temporal
                .for_type(field.data_type())
                .and_then(|fmt| {
                    let s = strings.as_any().downcast_ref::<StringArray>()?;
                    crate::temporal::parse_with(s, field.data_type(), fmt)
                });
            let (col, lost) = match parsed {
                Some(p) => p,
                None => cast_permissive(&self.path, field.name(), &strings, field)?,
            };
            if self.policy.widen_types
                && let Some(to) = widening(field, &strings, &lost, &self.format)
            {
                self.new_columns.note_widening(&[field.name().as_str()], to);
            }
            for r in lost {
                if rescue_at.is_some() {
                    let v = strings
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .map_or("", |s| s.value(r));
                    rescued[r].put(field.name().clone(), Value::String(v.to_string()));
                    continue;
                }
                bad.note(r, || {
                    let v = strings
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .map_or("", |s| s.value(r));
                    format!(
                        "column `{}`: {v:?} does not fit {}",
                        field.name(),
                        landfall_core::ddl::type_to_ddl(field.data_type())
                    )
                });
            }
            cols.push(col);
        }
        if let Some(at) = rescue_at {
            let texts: Vec<Option<String>> =
                rescued.into_iter().map(|r| r.finish(&self.path)).collect();
            self.rescued_rows += texts.iter().filter(|t| t.is_some()).count() as u64;
            cols[at] = rescued_array(texts);
        }
        let batch = RecordBatch::try_new(self.schema.clone(), cols).map_err(|e| {
            FormatError::Unreadable {
                path: self.path.clone(),
                reason: e.to_string(),
            }
        })?;
        for (r, reason) in bad.reasons.iter_mut().enumerate() {
            let Some(reason) = reason.take() else {
                continue;
            };
            let at = self.records.start(r);
            self.tally.note(|| MalformedRecord {
                path: self.path.clone(),
                line: at.line,
                offset: at.offset,
                reason,
                record: None,
            });
        }
        self.records.clear();
        let batch = if self.drop_malformed && bad.rows.iter().any(|b| *b) {
            let keep = arrow::array::BooleanArray::from(
                bad.rows.iter().map(|b| !*b).collect::<Vec<bool>>(),
            );
            arrow::compute::filter_record_batch(&batch, &keep).map_err(|e| {
                FormatError::Unreadable {
                    path: self.path.clone(),
                    reason: e.to_string(),
                }
            })?
        } else {
            batch
        };
        out.push(batch);
        Ok(())
    }

    fn limit(&self) -> usize {
        // Until the header is read, stop after it.
        if self.layout.is_none() {
            1
        } else {
            self.batch_size
        }
    }
}

impl landfall_core::Decoder for CsvDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let mut rest: &[u8] = &chunk;
        if self.skip_left > 0 {
            let used = self.tok.skip_lines(rest, &mut self.skip_left);
            rest = &rest[used..];
        }
        while !rest.is_empty() {
            let limit = self.limit();
            let used = self.tok.feed(rest, &mut self.records, limit);
            rest = &rest[used..];
            if self.records.len() >= limit {
                self.flush(&mut out)?;
            }
        }
        Ok(out)
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let cut = self.tok.finish(&mut self.records);
        self.flush(&mut out)?;
        if let Some(at) = cut {
            self.tally.note(|| MalformedRecord {
                path: self.path.clone(),
                line: at.line,
                offset: at.offset,
                reason: "the file ends inside a quoted field".into(),
                record: None,
            });
        }
        Ok(out)
    }

    fn rescued_rows(&self) -> u64 {
        self.rescued_rows
    }

    fn take_malformed(&mut self) -> Vec<MalformedRecord> {
        std::mem::take(&mut self.tally.records)
    }

    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        // A new column without a single value is a string, as inference types it.
        self.new_columns
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Null => f.clone().with_data_type(DataType::Utf8),
                _ => f.clone(),
            })
            .collect()
    }

    fn malformed_rows(&self) -> u64 {
        self.tally.rows
    }

    fn first_malformed(&self) -> Option<String> {
        self.tally
            .first
            .as_ref()
            .map(|m| format!("line {} (byte {}): {}", m.line, m.offset, m.reason))
    }
}

/// Under type widening: the values of `field` that did not fit it (rows `lost` of `strings`),
/// typed as inference types a column, and the wider column that holds them, if any
/// ([`SchemaPolicy::widen_types`]).
fn widening(
    field: &Field,
    strings: &ArrayRef,
    lost: &[usize],
    format: &CsvFormat,
) -> Option<DataType> {
    if lost.is_empty() {
        return None;
    }
    let s = strings.as_any().downcast_ref::<StringArray>()?;
    let observed =
        crate::infer_csv::column_type(lost.iter().map(|&r| s.value(r).as_bytes()), format);
    landfall_core::type_widening::widened(field.data_type(), &observed)
}

#[cfg(test)]
#[path = "csv_tests.rs"]
mod tests;
