//! Does the stream's schema fit the table's, and rows conformed to what the table stores.
//!
//! Contract: [`check_fits`] compares the stream schema *after* [`delta_normalize`] with the
//! table's schema as Delta reads it back into Arrow, recursively. Types must be equal, except
//! that the names of list element and map entry/key/value fields are ignored (writers and
//! readers disagree on them; Delta does not store them). Nullability matters one way: a stream
//! column (or nested field, list element, map value) that may be null cannot go into a NOT NULL
//! one; a NOT NULL stream column into a nullable one is fine. Every stream column must exist in
//! the table; table columns the stream lacks must be nullable. Structs are compared the same way
//! field by field. A table created from a normalised schema therefore always fits it.
//!
//! [`ConformingWriter`] casts each record batch to the normalised schema before the data-file
//! writer sees it, so the engine may hand over batches in the stream's own Arrow types.
//!
//! [`delta_normalize`]: landfall_core::delta_types::delta_normalize

use crate::error::SinkError;
use arrow::array::{
    Array, ArrayRef, AsArray, GenericListArray, MapArray, OffsetSizeTrait, RecordBatch,
    StructArray, new_null_array,
};
use arrow::compute::{CastOptions, cast_with_options};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use delta_kernel::schema::{DataType as KernelType, StructField, StructType};
use landfall_core::ddl::type_to_ddl;
use landfall_core::seams::SeamResult;
use landfall_core::{BatchWriter, StagedFile};
use std::sync::Arc;

/// Why `stream` (normalised) does not fit `table`, if it does not.
pub(crate) fn check_fits(stream: &Schema, table: &Schema) -> Result<(), String> {
    fits_fields("", stream.fields(), table.fields(), Grow::NO)
}

/// [`check_fits`] for a stream whose schema evolves: a stream column (or nested struct field)
/// the table lacks is fine when nullable; the next commit adds it ([`merge_new_fields`]).
pub(crate) fn check_fits_growing(stream: &Schema, table: &Schema) -> Result<(), String> {
    fits_fields("", stream.fields(), table.fields(), Grow::COLUMNS)
}

/// [`check_fits_growing`] for a stream under `add_new_columns_with_type_widening`: a column
/// (or struct member, not inside a list or map) whose type the stream's schema evolution
/// widened is fine too when Delta's type widening allows the change ([`widened_by_stream`]);
/// the committer widens the table's column before the batch's files are written
/// ([`crate::delta::type_change`]).
pub(crate) fn check_fits_widening(stream: &Schema, table: &Schema) -> Result<(), String> {
    fits_fields("", stream.fields(), table.fields(), Grow::COLUMNS_AND_TYPES)
}

/// What a stream's schema may have that its table does not yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Grow {
    /// Nullable columns the table lacks.
    columns: bool,
    /// Wider types the stream's schema evolution gave a column, where Delta's type widening
    /// allows the change.
    widen: bool,
    /// Not inside a list or a map: a type may differ from the table's by a widening (either
    /// way) only at the top level and in struct members, the columns `raised_to_table` and
    /// the type change commit reach.
    outside_collections: bool,
}

impl Grow {
    const NO: Grow = Grow {
        columns: false,
        widen: false,
        outside_collections: true,
    };
    const COLUMNS: Grow = Grow {
        columns: true,
        ..Grow::NO
    };
    const COLUMNS_AND_TYPES: Grow = Grow {
        widen: true,
        ..Grow::COLUMNS
    };

    /// Inside a list or a map: columns may grow, types may not differ.
    fn inner(self) -> Grow {
        Grow {
            widen: false,
            outside_collections: false,
            ..self
        }
    }
}

/// Why a column could not be added to a Delta table by schema evolution, if it could not: its
/// name must be one Delta takes without column mapping, its type must have a Delta and a
/// Parquet form (no empty struct, no time-of-day or interval), and zone-less timestamps are
/// refused (adding one would need the `timestampNtz` table feature, which growing a table
/// does not enable).
pub fn storable_column(field: &Field) -> Result<(), String> {
    plain_names(field)?;
    fn no_ntz(ty: &DataType) -> bool {
        match ty {
            DataType::Timestamp(_, None) => false,
            DataType::Struct(c) => c.iter().all(|f| no_ntz(f.data_type())),
            DataType::List(c) | DataType::LargeList(c) => no_ntz(c.data_type()),
            DataType::Map(e, _) => no_ntz(e.data_type()),
            _ => true,
        }
    }
    if !no_ntz(field.data_type()) {
        return Err(
            "a TIMESTAMP_NTZ column needs the timestampNtz table feature, which adding a column does not enable"
                .into(),
        );
    }
    let schema = landfall_core::delta_types::delta_normalize(&Schema::new(vec![field.clone()]));
    crate::delta::kernel::to_kernel(&schema).map_err(|e| format!("no Delta type: {e}"))?;
    parquet::arrow::ArrowSchemaConverter::new()
        .convert(&schema)
        .map_err(|e| format!("no Parquet type: {e}"))?;
    Ok(())
}

/// Why a column's name (or a nested field's) cannot be in a Delta table without column
/// mapping, if it cannot: the Delta kernel refuses to create, or change the schema of, a table
/// holding one of these characters in a name.
pub(crate) fn plain_names(field: &Field) -> Result<(), String> {
    const INVALID: &[char] = &[' ', ',', ';', '{', '}', '(', ')', '\n', '\t', '='];
    fn names(f: &Field, out: &mut Vec<String>) {
        out.push(f.name().clone());
        match f.data_type() {
            DataType::Struct(c) => c.iter().for_each(|c| names(c, out)),
            DataType::List(c) | DataType::LargeList(c) => names(c, out),
            DataType::Map(e, _) => names(e, out),
            _ => {}
        }
    }
    let mut all = Vec::new();
    names(field, &mut all);
    for n in &all {
        if n.is_empty() || n.contains(INVALID) {
            return Err(format!(
                "column name {n:?} is not allowed in a Delta table without column mapping \
                 (no space or any of ,;{{}}()=, tab, newline); rename it with a SQL \
                 transformation or write to a table with column mapping created by Spark"
            ));
        }
    }
    Ok(())
}

/// [`plain_names`] of every column of `schema`.
pub(crate) fn plain_schema_names(schema: &Schema) -> Result<(), String> {
    schema.fields().iter().try_for_each(|f| plain_names(f))
}

/// The stream's columns the table lacks, each with the path of the struct it goes into
/// (empty: the top level), in the stream's order; names match ignoring case, as in Delta. The
/// table's schema after adding them in order has every new column at the end of its struct.
pub(crate) fn new_fields(
    table: &StructType,
    stream: &StructType,
) -> Vec<(Vec<String>, StructField)> {
    let mut out = Vec::new();
    collect_new(&[], table, stream, &mut out);
    out
}

fn collect_new(
    parent: &[String],
    table: &StructType,
    stream: &StructType,
    out: &mut Vec<(Vec<String>, StructField)>,
) {
    for s in stream.fields() {
        match table
            .fields()
            .find(|t| t.name.eq_ignore_ascii_case(&s.name))
        {
            Some(t) => {
                let mut path = parent.to_vec();
                path.push(t.name.clone());
                collect_in(&path, &t.data_type, &s.data_type, out);
            }
            None => out.push((parent.to_vec(), s.clone())),
        }
    }
}

/// New fields of the structs inside a column's type: structs, list elements (`element`), map
/// keys and values (`key`, `value`), as the kernel's `add_column_at` addresses them.
fn collect_in(
    path: &[String],
    table: &KernelType,
    stream: &KernelType,
    out: &mut Vec<(Vec<String>, StructField)>,
) {
    let step = |seg: &str| {
        let mut p = path.to_vec();
        p.push(seg.to_string());
        p
    };
    match (table, stream) {
        (KernelType::Struct(tt), KernelType::Struct(st)) => collect_new(path, tt, st, out),
        (KernelType::Array(ta), KernelType::Array(sa)) => {
            collect_in(&step("element"), ta.element_type(), sa.element_type(), out)
        }
        (KernelType::Map(tm), KernelType::Map(sm)) => {
            collect_in(&step("key"), tm.key_type(), sm.key_type(), out);
            collect_in(&step("value"), tm.value_type(), sm.value_type(), out);
        }
        _ => {}
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn fits_fields(prefix: &str, stream: &Fields, table: &Fields, grow: Grow) -> Result<(), String> {
    for s in stream {
        let path = join(prefix, s.name());
        let Some((_, t)) = table.find(s.name()) else {
            if let Some(t) = table
                .iter()
                .find(|t| t.name().eq_ignore_ascii_case(s.name()))
            {
                return Err(format!(
                    "column `{path}` differs from the table's `{}` only in case",
                    join(prefix, t.name())
                ));
            }
            if grow.columns && s.is_nullable() {
                continue;
            }
            return Err(format!("column `{path}` is not in the table"));
        };
        fits_field(&path, s, t, grow)?;
    }
    for t in table {
        if stream.find(t.name()).is_none() && !t.is_nullable() {
            return Err(format!(
                "NOT NULL column `{}` of the table is not produced by the stream",
                join(prefix, t.name())
            ));
        }
    }
    Ok(())
}

fn fits_field(path: &str, s: &Field, t: &Field, grow: Grow) -> Result<(), String> {
    if s.is_nullable() && !t.is_nullable() {
        return Err(format!(
            "column `{path}` may be null in the stream but is NOT NULL in the table"
        ));
    }
    if grow.widen && grow.outside_collections && widened_by_stream(s, t) {
        return Ok(());
    }
    // A table column wider than the stream's, as type widening makes it (another writer's
    // `ALTER TABLE ... CHANGE COLUMN ... TYPE`, another stream's widening): the data files are
    // written in the table's type ([`raised_to_table`]).
    if grow.outside_collections
        && landfall_core::type_widening::is_widening(s.data_type(), t.data_type())
    {
        return Ok(());
    }
    fits_type(path, s.data_type(), t.data_type(), grow)
}

/// `stream` with each column (or struct member) that the table holds in a wider type, as
/// Delta's type widening allows, raised to the table's type: the schema data files are written
/// in, so that a table widened by another writer takes the stream's rows in its own types.
pub(crate) fn raised_to_table(stream: &Schema, table: &Schema) -> Schema {
    fn raise(stream: &Fields, table: &Fields) -> Fields {
        stream
            .iter()
            .map(|s| {
                let Some((_, t)) = table.find(s.name()) else {
                    return s.clone();
                };
                match (s.data_type(), t.data_type()) {
                    (DataType::Struct(sf), DataType::Struct(tf)) => Arc::new(
                        s.as_ref()
                            .clone()
                            .with_data_type(DataType::Struct(raise(sf, tf))),
                    ),
                    (a, b) if landfall_core::type_widening::is_widening(a, b) => {
                        Arc::new(s.as_ref().clone().with_data_type(b.clone()))
                    }
                    _ => s.clone(),
                }
            })
            .collect()
    }
    Schema::new_with_metadata(
        raise(stream.fields(), table.fields()),
        stream.metadata().clone(),
    )
}

/// Whether stream column `s` is table column `t` widened by the stream's own schema evolution
/// (marked [`landfall_core::type_widening::WIDENED_FROM`]) as Delta's type widening allows: a
/// stream's inferred or given type wider than an existing table's column widens nothing.
pub(crate) fn widened_by_stream(s: &Field, t: &Field) -> bool {
    s.metadata()
        .contains_key(landfall_core::type_widening::WIDENED_FROM)
        && landfall_core::type_widening::is_widening(t.data_type(), s.data_type())
}

fn map_key_value(entries: &Field) -> Option<(&Field, &Field)> {
    match entries.data_type() {
        DataType::Struct(kv) if kv.len() == 2 => Some((&kv[0], &kv[1])),
        _ => None,
    }
}

fn fits_type(path: &str, s: &DataType, t: &DataType, grow: Grow) -> Result<(), String> {
    match (s, t) {
        (DataType::List(se), DataType::List(te)) => {
            fits_field(&format!("{path}.element"), se, te, grow.inner())
        }
        (DataType::Map(se, _), DataType::Map(te, _)) => {
            match (map_key_value(se), map_key_value(te)) {
                (Some((sk, sv)), Some((tk, tv))) => {
                    let inner = grow.inner();
                    fits_type(
                        &format!("{path}.key"),
                        sk.data_type(),
                        tk.data_type(),
                        inner,
                    )?;
                    fits_field(&format!("{path}.value"), sv, tv, inner)
                }
                _ => Err(format!("column `{path}` is not a well-formed map")),
            }
        }
        (DataType::Struct(sf), DataType::Struct(tf)) => fits_fields(path, sf, tf, grow),
        (a, b) if a == b => Ok(()),
        (a, b) => Err(format!(
            "column `{path}` is {} in the table but {} in the stream",
            type_to_ddl(b),
            type_to_ddl(a)
        )),
    }
}

/// How [`conform`] treats a top-level column the batch lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Missing {
    /// An error: the stream's batches hold every column of its schema.
    Refuse,
    /// Nulls, when the column is nullable: a data file written before the column was added.
    Null,
}

/// `batch` in `schema`: columns by name at every level of structs, lists and maps; nested
/// fields the batch lacks are null (when nullable); other types cast, failing rather than
/// turning a value into a null.
pub(crate) fn conform(
    batch: RecordBatch,
    schema: &SchemaRef,
    missing: Missing,
) -> Result<RecordBatch, String> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch);
    }
    let columns = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) => conform_array(c, f).map_err(|e| {
                format!(
                    "column `{}`: cannot store {} as {}: {e}",
                    f.name(),
                    c.data_type(),
                    f.data_type()
                )
            }),
            None if missing == Missing::Null && f.is_nullable() => {
                Ok(new_null_array(f.data_type(), batch.num_rows()))
            }
            None => Err(format!("the batch has no column `{}`", f.name())),
        })
        .collect::<Result<Vec<ArrayRef>, String>>()?;
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| e.to_string())
}

fn conform_array(a: &ArrayRef, target: &Field) -> Result<ArrayRef, String> {
    if a.data_type() == target.data_type() {
        return Ok(a.clone());
    }
    let child = |s: &StructArray, _: usize, f: &Field| match s.column_by_name(f.name()) {
        Some(c) => conform_array(c, f).map_err(|e| format!("{}.{e}", f.name())),
        None if f.is_nullable() => Ok(new_null_array(f.data_type(), s.len())),
        None => Err(format!("{} is missing and not nullable", f.name())),
    };
    if let Some(rebuilt) = rebuild_nested(a, target.data_type(), &child, &conform_array) {
        return rebuilt;
    }
    cast_with_options(
        a,
        target.data_type(),
        &CastOptions {
            safe: false,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())
}

/// The walk through nested arrays that [`conform`] and column mapping's renaming share: `a`
/// rebuilt as `target`'s struct, list, large list or map type, a struct's children made by
/// `child(source struct, index of the target field, target field)`, list items and map entries
/// by `item(source items, target item field)`. `None` when `a` and `target` are not the same
/// kind of nested type.
pub(crate) fn rebuild_nested(
    a: &ArrayRef,
    target: &DataType,
    child: &dyn Fn(&StructArray, usize, &Field) -> Result<ArrayRef, String>,
    item: &dyn Fn(&ArrayRef, &Field) -> Result<ArrayRef, String>,
) -> Option<Result<ArrayRef, String>> {
    fn list<O: OffsetSizeTrait>(
        a: &ArrayRef,
        field: &FieldRef,
        item: &dyn Fn(&ArrayRef, &Field) -> Result<ArrayRef, String>,
    ) -> Result<ArrayRef, String> {
        let l = a.as_list::<O>();
        let values = item(l.values(), field)?;
        GenericListArray::<O>::try_new(
            field.clone(),
            l.offsets().clone(),
            values,
            l.nulls().cloned(),
        )
        .map(|l| Arc::new(l) as ArrayRef)
        .map_err(|e| e.to_string())
    }
    Some(match (a.data_type(), target) {
        (DataType::Struct(_), DataType::Struct(fields)) => {
            let s = a.as_struct();
            fields
                .iter()
                .enumerate()
                .map(|(i, f)| child(s, i, f))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|children| {
                    StructArray::try_new(fields.clone(), children, s.nulls().cloned())
                        .map(|s| Arc::new(s) as ArrayRef)
                        .map_err(|e| e.to_string())
                })
        }
        (DataType::List(_), DataType::List(field)) => list::<i32>(a, field, item),
        (DataType::LargeList(_), DataType::LargeList(field)) => list::<i64>(a, field, item),
        (DataType::Map(_, _), DataType::Map(entries, sorted)) => {
            let m = a.as_map();
            let as_struct: ArrayRef = Arc::new(m.entries().clone());
            item(&as_struct, entries).and_then(|e| {
                MapArray::try_new(
                    entries.clone(),
                    m.offsets().clone(),
                    e.as_struct().clone(),
                    m.nulls().cloned(),
                    *sorted,
                )
                .map(|m| Arc::new(m) as ArrayRef)
                .map_err(|e| e.to_string())
            })
        }
        _ => return None,
    })
}

/// A [`BatchWriter`] that conforms every batch to the table's normalised schema first.
pub(crate) struct ConformingWriter {
    pub inner: Box<dyn BatchWriter>,
    pub schema: SchemaRef,
    /// A column-mapped table's physical columns, which the files are written in.
    pub physical: Option<Arc<crate::delta::column_mapping::Physical>>,
    pub location: String,
    pub batch_id: u64,
}

#[async_trait::async_trait]
impl BatchWriter for ConformingWriter {
    async fn write(
        &mut self,
        partition_values: &[Option<String>],
        batch: RecordBatch,
    ) -> SeamResult<()> {
        let write_err = |reason| SinkError::Write {
            location: self.location.clone(),
            batch_id: self.batch_id,
            path: String::new(),
            reason,
        };
        let mut batch = conform(batch, &self.schema, Missing::Refuse).map_err(write_err)?;
        if let Some(p) = &self.physical {
            batch = p.batch(batch).map_err(write_err)?;
        }
        self.inner.write(partition_values, batch).await
    }

    async fn finish(self: Box<Self>) -> SeamResult<Vec<StagedFile>> {
        self.inner.finish().await
    }

    async fn abort(self: Box<Self>) {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        DictionaryArray, Int32Array, LargeStringArray, ListArray, StringArray,
        TimestampNanosecondArray, UInt32Array, UInt64Array,
    };
    use arrow::datatypes::{Int32Type, TimeUnit};
    use landfall_core::delta_types::delta_normalize;
    use std::sync::Arc;

    fn list(name: &str, nullable: bool) -> DataType {
        DataType::List(Arc::new(Field::new(name, DataType::Int32, nullable)))
    }

    #[test]
    fn list_child_names_are_ignored_nullability_is_not() {
        let stream = Schema::new(vec![Field::new("l", list("item", true), true)]);
        let table = Schema::new(vec![Field::new("l", list("element", true), true)]);
        check_fits(&stream, &table).unwrap();
        let strict = Schema::new(vec![Field::new("l", list("element", false), true)]);
        let err = check_fits(&stream, &strict).unwrap_err();
        assert!(err.contains("`l.element`"), "{err}");
        let not_null = Schema::new(vec![Field::new("l", list("element", true), false)]);
        let err = check_fits(&stream, &not_null).unwrap_err();
        assert!(err.contains("`l` may be null"), "{err}");
        // Not null into nullable is fine.
        let s2 = Schema::new(vec![Field::new("l", list("x", false), false)]);
        check_fits(&s2, &table).unwrap();
    }

    #[test]
    fn growing_allows_new_nullable_columns_but_not_case_only_twins() {
        let table = Schema::new(vec![Field::new("ID", DataType::Int64, true)]);
        let stream = Schema::new(vec![
            Field::new("ID", DataType::Int64, true),
            Field::new("extra", DataType::Utf8, true),
        ]);
        check_fits_growing(&stream, &table).unwrap();
        assert!(check_fits(&stream, &table).is_err());
        let twin = Schema::new(vec![Field::new("id", DataType::Int64, true)]);
        let err = check_fits_growing(&twin, &table).unwrap_err();
        assert!(err.contains("only in case"), "{err}");
    }

    #[test]
    fn columns_a_table_cannot_take_are_not_storable() {
        storable_column(&Field::new("ok", DataType::Int64, true)).unwrap();
        for (f, why) in [
            (Field::new("a b", DataType::Utf8, true), "not allowed"),
            (
                Field::new("e", DataType::Struct(Fields::empty()), true),
                "Parquet",
            ),
            (
                Field::new(
                    "t",
                    DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, None),
                    true,
                ),
                "timestampNtz",
            ),
        ] {
            let err = storable_column(&f).unwrap_err();
            assert!(err.contains(why), "{}: {err}", f.name());
        }
    }

    #[test]
    fn struct_fields_are_checked_by_name() {
        let st = |fs: Vec<Field>| DataType::Struct(fs.into());
        let stream = Schema::new(vec![Field::new(
            "s",
            st(vec![Field::new("a", DataType::Int32, true)]),
            true,
        )]);
        let table = Schema::new(vec![Field::new(
            "s",
            st(vec![
                Field::new("a", DataType::Int64, true),
                Field::new("b", DataType::Utf8, true),
            ]),
            true,
        )]);
        // A narrower member fits a table that widened it: the files are written in its type.
        check_fits(&stream, &table).unwrap();
        assert_eq!(
            raised_to_table(&stream, &table).field(0).data_type(),
            &st(vec![Field::new("a", DataType::Int64, true)])
        );
        // A wider one, or another type, does not.
        let wider = Schema::new(vec![Field::new(
            "s",
            st(vec![Field::new("a", DataType::Decimal128(30, 0), true)]),
            true,
        )]);
        let err = check_fits(&wider, &table).unwrap_err();
        assert!(
            err.contains("`s.a` is BIGINT in the table but DECIMAL(30,0)"),
            "{err}"
        );
        let text = Schema::new(vec![Field::new(
            "s",
            st(vec![Field::new("a", DataType::Utf8, true)]),
            true,
        )]);
        assert!(check_fits(&text, &table).is_err());
        // Inside a list the types must be the table's: raised_to_table does not reach there.
        let list = |t: DataType| {
            Schema::new(vec![Field::new(
                "l",
                DataType::List(Arc::new(Field::new("element", t, true))),
                true,
            )])
        };
        let err = check_fits(&list(DataType::Int32), &list(DataType::Int64)).unwrap_err();
        assert!(err.contains("`l.element`"), "{err}");
    }

    #[test]
    fn batches_are_cast_to_the_normalised_schema() {
        let raw = Arc::new(Schema::new(vec![
            Field::new("u", DataType::UInt32, true),
            Field::new("big", DataType::UInt64, true),
            Field::new("s", DataType::LargeUtf8, true),
            Field::new(
                "d",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                true,
            ),
            Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
            Field::new("l", list("item", true), true),
        ]));
        let dict: DictionaryArray<Int32Type> = vec!["x", "y", "x"].into_iter().collect();
        let batch = RecordBatch::try_new(
            raw.clone(),
            vec![
                Arc::new(UInt32Array::from(vec![u32::MAX, 0, 1])),
                Arc::new(UInt64Array::from(vec![u64::MAX, 0, 1])),
                Arc::new(LargeStringArray::from(vec!["a", "b", "c"])),
                Arc::new(dict),
                Arc::new(TimestampNanosecondArray::from(vec![1_000, 2_000, 3_999])),
                Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
                    Some(vec![Some(1)]),
                    None,
                    Some(vec![]),
                ])),
            ],
        )
        .unwrap();
        let target = Arc::new(delta_normalize(&raw));
        let out = conform(batch, &target, Missing::Refuse).unwrap();
        assert_eq!(out.schema(), target);
        let d = out
            .column(3)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(d.value(2), "x");
        let u = out
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>();
        assert_eq!(u.unwrap().value(0), u32::MAX as i64);
        let _ = Int32Array::from(vec![1]);
    }
}
