//! Appends to column-mapped tables (`delta.columnMapping.mode` = `name` or `id`, as Databricks
//! enables to rename and drop columns): data files must name every column, nested ones too, by
//! its physical name, and carry its field id, which readers in `id` mode match columns by.
//!
//! Contract: a batch in the stream's schema is first conformed to the table's whole logical
//! schema (columns the stream lacks are null), then rebuilt with the physical names and the
//! `PARQUET:field_id` of each field, as the kernel's `make_physical` states them. Partition
//! columns are named by their physical names in `partitionValues`; statistics are taken from
//! the physical batch, so they name physical columns, as the protocol wants. A column the
//! stream adds is added by a commit of its own first (the kernel assigns its physical name and
//! id, and `delta.columnMapping.maxColumnId`), so the batch's files can carry them; mapping
//! metadata the stream's fields carry is dropped first, so a new column never takes another
//! column's identity. A commit whose table's mapping changed since `prepare` (another
//! writer's ALTER TABLE) fails retryably, and the batch is written again. Compaction reads
//! and writes the physical columns (`compact`).

use crate::delta_schema::{Missing, conform, rebuild_nested};
use arrow::array::{ArrayRef, RecordBatch, StructArray};
use arrow_schema::{DataType, Field, SchemaRef};
use delta_kernel::Snapshot;
use delta_kernel::table_features::ColumnMappingMode;
use std::sync::Arc;

/// A column-mapped table's two views of its schema.
#[derive(Debug)]
pub(crate) struct Physical {
    pub mode: ColumnMappingMode,
    /// The table's logical schema, as Arrow.
    logical: SchemaRef,
    /// The same, field by field, with physical names and `PARQUET:field_id` metadata.
    physical: SchemaRef,
}

impl Physical {
    /// The mapping of `table`, or `None` when it maps no columns.
    pub(crate) fn of(table: &Snapshot) -> Result<Option<Self>, String> {
        let mode = table.table_configuration().column_mapping_mode();
        if mode == ColumnMappingMode::None {
            return Ok(None);
        }
        let logical = table.schema();
        let physical = logical.make_physical(mode).map_err(|e| e.to_string())?;
        Ok(Some(Physical {
            mode,
            logical: Arc::new(super::kernel::to_arrow(&logical)?),
            physical: Arc::new(super::kernel::to_arrow(&physical)?),
        }))
    }

    pub(crate) fn schema(&self) -> SchemaRef {
        self.physical.clone()
    }

    /// The physical names of the (logical) partition columns.
    pub(crate) fn partition_names(&self, logical: &[String]) -> Result<Vec<String>, String> {
        logical
            .iter()
            .map(|c| {
                let i = self
                    .logical
                    .index_of(c)
                    .map_err(|_| format!("partition column `{c}` is not in the table"))?;
                Ok(self.physical.field(i).name().clone())
            })
            .collect()
    }

    /// In `id` mode, readers find columns by field id: a data file (written by another engine)
    /// whose field ids name other columns than its field names would be misread by a rewrite
    /// that goes by name, so it is refused.
    pub(crate) fn check_ids(&self, file: &arrow_schema::Schema) -> Result<(), String> {
        if self.mode != ColumnMappingMode::Id {
            return Ok(());
        }
        fn ids(fields: &arrow_schema::Fields, out: &mut std::collections::HashMap<String, String>) {
            for f in fields {
                if let Some(id) = f.metadata().get("PARQUET:field_id") {
                    out.insert(id.clone(), f.name().clone());
                }
                match f.data_type() {
                    DataType::Struct(c) => ids(c, out),
                    DataType::List(i) | DataType::LargeList(i) => {
                        ids(&arrow_schema::Fields::from(vec![i.as_ref().clone()]), out)
                    }
                    DataType::Map(e, _) => {
                        ids(&arrow_schema::Fields::from(vec![e.as_ref().clone()]), out)
                    }
                    _ => {}
                }
            }
        }
        let (mut want, mut got) = (Default::default(), Default::default());
        ids(self.physical.fields(), &mut want);
        ids(file.fields(), &mut got);
        for (id, name) in &got {
            if let Some(expected) = want.get(id)
                && expected != name
            {
                return Err(format!(
                    "field id {id} is `{name}` in the file but `{expected}` in the table; the file is left as it is"
                ));
            }
        }
        Ok(())
    }

    /// A batch of the stream as the table's physical columns.
    pub(crate) fn batch(&self, batch: RecordBatch) -> Result<RecordBatch, String> {
        let logical = conform(batch, &self.logical, Missing::Null)?;
        let columns = logical
            .columns()
            .iter()
            .zip(self.physical.fields())
            .map(|(c, f)| rename(c, f))
            .collect::<Result<Vec<_>, _>>()?;
        RecordBatch::try_new(self.physical.clone(), columns).map_err(|e| e.to_string())
    }
}

/// `a` (of the logical type) with the field names of `physical` at every level (the two
/// types have the same shape: children match by position).
fn rename(a: &ArrayRef, physical: &Field) -> Result<ArrayRef, String> {
    let child = |s: &StructArray, i: usize, f: &Field| rename(s.column(i), f);
    rebuild_nested(a, physical.data_type(), &child, &rename).unwrap_or_else(|| Ok(a.clone()))
}

/// `schema` without column-mapping or field-id metadata at any level
/// (`delta.columnMapping.*`, `parquet.field.*`, `PARQUET:field_id`).
pub(crate) fn without_mapping_metadata(schema: &arrow_schema::Schema) -> arrow_schema::Schema {
    fn field(f: &Field) -> Field {
        let metadata = f
            .metadata()
            .iter()
            .filter(|(k, _)| {
                !(k.starts_with("delta.columnMapping.")
                    || k.starts_with("parquet.field.")
                    || k.as_str() == "PARQUET:field_id")
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let data_type = match f.data_type() {
            DataType::Struct(fs) => DataType::Struct(fs.iter().map(|c| field(c)).collect()),
            DataType::List(i) => DataType::List(Arc::new(field(i))),
            DataType::LargeList(i) => DataType::LargeList(Arc::new(field(i))),
            DataType::Map(e, sorted) => DataType::Map(Arc::new(field(e)), *sorted),
            other => other.clone(),
        };
        f.clone().with_data_type(data_type).with_metadata(metadata)
    }
    arrow_schema::Schema::new_with_metadata(
        schema.fields().iter().map(|f| field(f)).collect::<Vec<_>>(),
        schema.metadata().clone(),
    )
}
