//! Values the schema has no place for: the rescued-data column, and the new columns schema
//! evolution adds.
//!
//! A decoder given a [`SchemaPolicy`] with a rescued column (a nullable string column of its
//! schema) never drops a value silently. Per row, the rescued column holds a JSON object of
//! every value that did not fit, keyed by its column path (`a.b` for a nested field), plus
//! `_file_path`, the file the row came from:
//!
//! - a column the schema lacks (at any depth);
//! - a column whose name differs from the schema's only in case (`ID` for `id`): it is not
//!   matched to the schema's column, as in Spark with a rescued column;
//! - a value that does not fit its column's type (`"abc"` for an INT column); the column is
//!   null in that row. A rescued value does not make the row malformed.
//!
//! Without a rescued column such values behave as before: unknown columns are ignored (mode
//! `none`), case-only matches are read into their column, misfit values are null and their
//! rows counted malformed.
//!
//! With `detect_new_columns`, decoders also report the columns the schema lacks
//! ([`NewColumns`]), typed as inference would type them, so the engine can evolve the schema.
//! Case-only matches are never new columns (Delta column names are case-insensitive).

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The key of the source file in a rescued object.
pub const RESCUED_FILE_KEY: &str = "_file_path";

/// What a decoder does with values its schema has no place for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaPolicy {
    /// The rescued-data column: a nullable string column of the decoder's schema.
    pub rescued_column: Option<String>,
    /// Report the columns the schema lacks ([`landfall_core::Decoder::new_columns`]).
    pub detect_new_columns: bool,
    /// Type new columns as `infer_column_types` would (else strings, nested structure kept).
    pub infer_types: bool,
    /// New JSON columns of fractions are DECIMAL where the value fits (`json.prefers_decimal`).
    pub prefers_decimal: bool,
    /// Note a column that a value (or a typed file's column) does not fit, when type widening
    /// would make it fit, with the widened type ([`landfall_core::type_widening`]), among the
    /// new columns: `schema_evolution_mode = "add_new_columns_with_type_widening"`. The value
    /// itself is rescued (or nulled) as without it: the batch is read again on the widened
    /// schema.
    pub widen_types: bool,
    /// Columns filled from elsewhere (Hive partition values, `_metadata`): a file's column of
    /// that name is dropped, neither rescued nor new (the path's value wins, as in Spark).
    pub path_columns: Vec<String>,
}

/// The rescued column's name inside the JSON decoder: no JSON key can collide with it, so a
/// record's own `_rescued_data` key is an unknown key like any other (rescued, not trusted).
pub(crate) const INTERNAL_RESCUED: &str = "\u{1}landfall_rescued";

impl SchemaPolicy {
    /// Whether `name` is a column filled from the path.
    pub fn is_path_column(&self, name: &str) -> bool {
        self.path_columns
            .iter()
            .any(|p| p.eq_ignore_ascii_case(name))
    }

    /// Whether unknown columns must be looked for at all (else decoders may ignore them).
    pub fn watches_unknown(&self) -> bool {
        self.rescued_column.is_some() || self.detect_new_columns
    }
}

/// The rescued values of one row, by column path, as JSON text: a JSON input's values are kept
/// as written (a 30-digit number keeps its digits).
#[derive(Debug, Default)]
pub(crate) struct RescuedRow {
    values: BTreeMap<String, String>,
}

impl RescuedRow {
    pub fn put(&mut self, path: String, value: Value) {
        self.values.insert(path, value.to_string());
    }

    /// Keep `json`, a JSON value's text as read.
    pub fn put_raw(&mut self, path: String, json: &str) {
        self.values.insert(path, minify(json.trim()));
    }

    /// The rescued column's text: the values and the file's path, or `None` when nothing was
    /// rescued. A data value keyed `_file_path` keeps its key; the file's path is then under
    /// `_file_path_`, with as many underscores as it takes.
    pub fn finish(mut self, file: &str) -> Option<String> {
        if self.values.is_empty() {
            return None;
        }
        let mut key = RESCUED_FILE_KEY.to_string();
        while self.values.contains_key(&key) {
            key.push('_');
        }
        self.values
            .insert(key, Value::String(file.to_string()).to_string());
        let mut out = String::from("{");
        for (i, (k, v)) in self.values.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::String(k.clone()).to_string());
            out.push(':');
            out.push_str(v);
        }
        out.push('}');
        Some(out)
    }
}

/// Columns seen in a file that its schema lacks, as a tree of fields: a new nested field
/// `a.b` is `a STRUCT<b ...>` here, holding only the new parts.
#[derive(Debug, Default, Clone)]
pub struct NewColumns {
    fields: Vec<Field>,
}

impl NewColumns {
    /// Note a new column at `path` (parents first) of type `ty`; a column noted twice keeps
    /// the wider of its types.
    pub fn note(&mut self, path: &[&str], ty: DataType) {
        note_in(&mut self.fields, path, ty, false);
    }

    /// Note that the existing column at `path` needs the wider type `ty`
    /// ([`SchemaPolicy::widen_types`]); noted twice, it keeps the type that widens to the other
    /// ([`landfall_core::type_widening::merge_noted`]).
    pub fn note_widening(&mut self, path: &[&str], ty: DataType) {
        note_in(&mut self.fields, path, ty, true);
    }

    /// Whether any note is a widening.
    pub fn has_widenings(&self) -> bool {
        fn any(f: &Field) -> bool {
            is_widening_note(f)
                || matches!(f.data_type(), DataType::Struct(c) if c.iter().any(|c| any(c)))
        }
        self.fields.iter().any(any)
    }

    /// The new columns alone, without the widenings.
    pub fn without_widenings(&self) -> NewColumns {
        fn keep(fields: &[Field]) -> Vec<Field> {
            fields
                .iter()
                .filter(|f| !is_widening_note(f))
                .filter_map(|f| match f.data_type() {
                    DataType::Struct(c) => {
                        let children: Vec<Field> = c.iter().map(|c| c.as_ref().clone()).collect();
                        let kept = keep(&children);
                        (!kept.is_empty())
                            .then(|| f.clone().with_data_type(DataType::Struct(kept.into())))
                    }
                    _ => Some(f.clone()),
                })
                .collect()
        }
        NewColumns {
            fields: keep(&self.fields),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Columns as [`landfall_core::Decoder::new_columns`] reports them.
    pub fn from_fields(fields: &[Field]) -> Self {
        let mut n = NewColumns::default();
        for f in fields {
            absorb_field(&mut n.fields, f, &mut Vec::new());
        }
        n
    }

    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    pub fn absorb(&mut self, other: &NewColumns) {
        for f in &other.fields {
            absorb_field(&mut self.fields, f, &mut Vec::new());
        }
    }

    /// Dotted paths of the new columns (for messages).
    pub fn paths(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.fields {
            leaf_paths(f, "", &mut out);
        }
        out
    }
}

fn is_widening_note(f: &Field) -> bool {
    f.metadata()
        .contains_key(landfall_core::type_widening::WIDENING_NOTE)
}

fn note_in(fields: &mut Vec<Field>, path: &[&str], ty: DataType, widening: bool) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let at = fields.iter().position(|f| f.name() == first);
    if rest.is_empty() {
        let widening = widening || at.is_some_and(|i| is_widening_note(&fields[i]));
        let ty = match at {
            Some(i) if widening => {
                landfall_core::type_widening::merge_noted(fields[i].data_type(), &ty)
            }
            Some(i) => crate::types::merge_widen(fields[i].data_type(), &ty),
            None => ty,
        };
        let mut f = Field::new(*first, ty, true);
        if widening {
            f = f.with_metadata(
                [(
                    landfall_core::type_widening::WIDENING_NOTE.to_string(),
                    String::new(),
                )]
                .into(),
            );
        }
        match at {
            Some(i) => fields[i] = f,
            None => fields.push(f),
        }
        return;
    }
    let i = match at {
        Some(i) => i,
        None => {
            fields.push(Field::new(*first, DataType::Struct(Fields::empty()), true));
            fields.len() - 1
        }
    };
    let mut children: Vec<Field> = match fields[i].data_type() {
        DataType::Struct(c) => c.iter().map(|f| f.as_ref().clone()).collect(),
        // A leaf noted earlier under this name: keep it (the wider struct goes to the rescue).
        _ => return,
    };
    note_in(&mut children, rest, ty, widening);
    fields[i] = Field::new(*first, DataType::Struct(children.into()), true);
}

fn absorb_field(into: &mut Vec<Field>, f: &Field, parents: &mut Vec<String>) {
    match f.data_type() {
        DataType::Struct(children) if !children.is_empty() => {
            parents.push(f.name().clone());
            for c in children {
                absorb_field(into, c, parents);
            }
            parents.pop();
        }
        ty => {
            let mut path: Vec<&str> = parents.iter().map(String::as_str).collect();
            path.push(f.name());
            note_in(into, &path, ty.clone(), is_widening_note(f));
        }
    }
}

fn leaf_paths(f: &Field, prefix: &str, out: &mut Vec<String>) {
    let path = if prefix.is_empty() {
        f.name().clone()
    } else {
        format!("{prefix}.{}", f.name())
    };
    match f.data_type() {
        DataType::Struct(c) if !c.is_empty() => {
            for child in c {
                leaf_paths(child, &path, out);
            }
        }
        _ => out.push(path),
    }
}

/// `schema` with the columns `noted` names that it already has widened to the noted type
/// where Delta's type widening allows it ([`landfall_core::type_widening::widened`]): a type
/// noted for an existing column is the widened type a value or a file's column needed
/// ([`SchemaPolicy::widen_types`]). Struct members are widened in place; name, nullability
/// and metadata are kept. Also returns each change as (dotted path, from, to).
pub fn widen_columns(
    schema: &Fields,
    noted: &NewColumns,
) -> (Fields, Vec<(String, DataType, DataType)>) {
    let mut changes = Vec::new();
    let out = widen_into(schema, noted.fields(), "", &mut changes);
    (out, changes)
}

fn widen_into(
    schema: &Fields,
    noted: &[Field],
    prefix: &str,
    changes: &mut Vec<(String, DataType, DataType)>,
) -> Fields {
    schema
        .iter()
        .map(|f| {
            let Some(n) = noted.iter().find(|n| n.name() == f.name()) else {
                return f.clone();
            };
            let path = if prefix.is_empty() {
                f.name().clone()
            } else {
                format!("{prefix}.{}", f.name())
            };
            match (f.data_type(), n.data_type()) {
                (DataType::Struct(have), DataType::Struct(inner)) => {
                    let inner: Vec<Field> = inner.iter().map(|c| c.as_ref().clone()).collect();
                    let children = widen_into(have, &inner, &path, changes);
                    Arc::new(
                        f.as_ref()
                            .clone()
                            .with_data_type(DataType::Struct(children)),
                    )
                }
                (from, observed) => match landfall_core::type_widening::widened(from, observed) {
                    Some(to) => {
                        let mut meta = f.metadata().clone();
                        meta.insert(
                            landfall_core::type_widening::WIDENED_FROM.to_string(),
                            landfall_core::ddl::type_to_ddl(from),
                        );
                        changes.push((path, from.clone(), to.clone()));
                        Arc::new(f.as_ref().clone().with_data_type(to).with_metadata(meta))
                    }
                    None => f.clone(),
                },
            }
        })
        .collect()
}

/// `schema` with the `new` columns appended: top-level ones at the end (before nothing:
/// callers place path columns themselves), new nested fields at the end of their struct.
/// Existing columns keep their types; a new column whose name matches an existing one but for
/// case is left out (it stays rescued).
pub fn append_new_columns(schema: &Fields, new: &NewColumns) -> Fields {
    let mut out: Vec<Field> = schema.iter().map(|f| f.as_ref().clone()).collect();
    append_into(&mut out, new.fields());
    out.into()
}

fn append_into(out: &mut Vec<Field>, new: &[Field]) {
    for n in new {
        match out.iter().position(|f| f.name() == n.name()) {
            Some(i) => {
                if let (DataType::Struct(have), DataType::Struct(add)) =
                    (out[i].data_type(), n.data_type())
                {
                    let mut children: Vec<Field> =
                        have.iter().map(|f| f.as_ref().clone()).collect();
                    let add: Vec<Field> = add.iter().map(|f| f.as_ref().clone()).collect();
                    append_into(&mut children, &add);
                    out[i] = out[i]
                        .clone()
                        .with_data_type(DataType::Struct(children.into()));
                }
            }
            None if out.iter().any(|f| f.name().eq_ignore_ascii_case(n.name())) => {}
            None if matches!(n.data_type(), DataType::Struct(c) if c.is_empty()) => {}
            None => out.push(n.clone()),
        }
    }
}

/// The type inference gives a JSON value: strings unless `infer_types` (structure kept); a
/// value seen only as null is a string. `decimal_text`: the value's JSON text as written, when
/// fractions are DECIMAL (`json.prefers_decimal`; read from the text, not the parsed `f64`,
/// which loses trailing zeros and digits past 17).
pub(crate) fn json_value_type(
    value: &Value,
    infer_types: bool,
    decimal_text: Option<&str>,
) -> DataType {
    let mut record = Map::new();
    record.insert("v".into(), value.clone());
    let inferred = arrow_json::reader::infer_json_schema_from_iterator(std::iter::once(Ok(
        Value::Object(record),
    )))
    .ok()
    .and_then(|s| s.field_with_name("v").ok().map(|f| f.data_type().clone()))
    .unwrap_or(DataType::Utf8);
    let ty = if let (true, Some(text)) = (infer_types, decimal_text) {
        let mut stats = crate::DecimalStats::default();
        stats.scan(format!("{{\"v\":{text}}}").as_bytes());
        let fields = Fields::from(vec![Field::new("v", inferred, true)]);
        stats.apply(&fields)[0].data_type().clone()
    } else if infer_types {
        inferred
    } else {
        crate::types::stringify_leaves(&inferred)
    };
    no_null_leaves(&ty)
}

/// `ty` with null leaves as strings and struct fields sorted by name at every level, as
/// Spark's inference orders them (the same rule as a first schema's, infer_json.rs).
fn no_null_leaves(ty: &DataType) -> DataType {
    match ty {
        DataType::Null => DataType::Utf8,
        DataType::Struct(fs) => {
            let mut fields: Vec<Field> = fs
                .iter()
                .map(|f| {
                    f.as_ref()
                        .clone()
                        .with_data_type(no_null_leaves(f.data_type()))
                })
                .collect();
            fields.sort_by(|a, b| crate::types::name_order(a.name(), b.name()));
            DataType::Struct(fields.into())
        }
        DataType::List(f) => DataType::List(Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(no_null_leaves(f.data_type())),
        )),
        other => other.clone(),
    }
}

/// Each value of `col` as JSON text through arrow-json's writer (`None`: null): what
/// Parquet values look like in the rescued column. Decimals and big integers keep their
/// digits.
pub(crate) fn values_as_json(col: &ArrayRef) -> Result<Vec<Option<String>>, ArrowError> {
    let n = col.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let schema = Schema::new(vec![Field::new("v", col.data_type().clone(), true)]);
    let batch = RecordBatch::try_new(Arc::new(schema), vec![col.clone()])?;
    let mut w = arrow_json::LineDelimitedWriter::new(Vec::new());
    w.write(&batch)?;
    w.finish()?;
    let text = w.into_inner();
    let mut out = Vec::with_capacity(n);
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        // arrow-json leaves out null values: a row is `{}` then.
        let row: BTreeMap<String, Box<serde_json::value::RawValue>> =
            serde_json::from_slice(line).map_err(|e| ArrowError::JsonError(e.to_string()))?;
        out.push(row.get("v").map(|v| v.get().to_string()));
    }
    if out.len() != n {
        return Err(ArrowError::JsonError(format!(
            "{} JSON rows for {n} values",
            out.len()
        )));
    }
    Ok(out)
}

/// A string column of `rows` rescued texts (`None`: null).
pub(crate) fn rescued_array(rows: Vec<Option<String>>) -> ArrayRef {
    Arc::new(StringArray::from(rows))
}

/// JSON text without whitespace outside strings (`{"b": 1}` -> `{"b":1}`), keys in their order.
pub(crate) fn minify(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_new_struct_column_has_its_fields_sorted_by_name_as_spark_infers_them() {
        let v: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"d": 1, "c": [{"z": 1, "y": null}]}}"#).unwrap();
        let t = json_value_type(&v, true, None);
        let DataType::Struct(top) = &t else {
            panic!("{t:?}")
        };
        let names: Vec<&str> = top.iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let DataType::Struct(inner) = top[0].data_type() else {
            panic!("{t:?}")
        };
        let names: Vec<&str> = inner.iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["c", "d"]);
        let DataType::List(item) = inner[0].data_type() else {
            panic!("{t:?}")
        };
        let DataType::Struct(deep) = item.data_type() else {
            panic!("{t:?}")
        };
        let names: Vec<&str> = deep.iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["y", "z"]);
        assert_eq!(
            deep[0].data_type(),
            &DataType::Utf8,
            "a null leaf is a string"
        );
    }

    use super::*;

    #[test]
    fn new_columns_append_at_the_end_and_nested_into_their_struct() {
        let schema: Fields = vec![
            Field::new("id", DataType::Int64, true),
            Field::new(
                "user",
                DataType::Struct(vec![Field::new("name", DataType::Utf8, true)].into()),
                true,
            ),
        ]
        .into();
        let mut new = NewColumns::default();
        new.note(&["user", "age"], DataType::Int64);
        new.note(&["score"], DataType::Int64);
        new.note(&["score"], DataType::Float64);
        new.note(&["ID"], DataType::Utf8);
        assert_eq!(new.paths(), ["user.age", "score", "ID"]);
        let out = append_new_columns(&schema, &new);
        let s = Schema::new(out);
        assert_eq!(
            landfall_core::ddl::schema_to_ddl(&s),
            "id BIGINT, user STRUCT<name: STRING, age: BIGINT>, score DOUBLE"
        );
    }

    #[test]
    fn rescued_rows_name_the_file_and_only_exist_with_values() {
        let mut r = RescuedRow::default();
        r.put("a.b".into(), Value::from(3));
        let text = r.finish("s3://b/x.json").unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["a.b"], 3);
        assert_eq!(v[RESCUED_FILE_KEY], "s3://b/x.json");
        assert!(RescuedRow::default().finish("f").is_none());
    }

    #[test]
    fn value_types_follow_infer_column_types() {
        let v: Value = serde_json::from_str(r#"{"x": [1, 2], "y": null}"#).unwrap();
        assert_eq!(
            landfall_core::ddl::type_to_ddl(&json_value_type(&v, true, None)),
            "STRUCT<x: ARRAY<BIGINT>, y: STRING>"
        );
        assert_eq!(
            landfall_core::ddl::type_to_ddl(&json_value_type(&v, false, None)),
            "STRUCT<x: ARRAY<STRING>, y: STRING>"
        );
        assert_eq!(json_value_type(&Value::Null, true, None), DataType::Utf8);
    }
}

#[cfg(test)]
#[path = "rescue_tests.rs"]
mod decoder_tests;
