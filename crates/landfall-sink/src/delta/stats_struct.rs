//! The `stats` of a commit's `add` actions as the kernel takes them: one struct column typed
//! by the table's stats schema, parsed from the JSON our writer computed
//! ([`crate::writer::stats`]).
//!
//! Contract: each file's stats JSON is read with the types the table's stats schema gives each
//! column (so a decimal keeps its digits and scale, a timestamp its instant; nothing goes
//! through a float), fields the schema does not name are ignored, and a file without stats
//! gets an all-null struct. The kernel writes the struct back as the `add`'s JSON `stats`.
//! Stats are an optimisation for readers, never a reason to fail a commit: if the JSON does
//! not parse with the table's types (a column whose stats our writer states differently), the
//! commit keeps `numRecords` alone, which row tracking needs, and says so in the log.

use arrow::array::{Array, StructArray};
use arrow_schema::{DataType, Field, Schema};
use delta_kernel::KernelError;
use delta_kernel::engine::arrow_conversion::TryIntoArrow;
use landfall_core::StagedFile;
use std::sync::Arc;

/// The stats of `files`, one row each, typed by `stats_schema` (the kernel's).
pub(crate) fn stats_struct(
    files: &[StagedFile],
    stats_schema: &delta_kernel::schema::SchemaRef,
) -> Result<StructArray, KernelError> {
    let typed: Schema = stats_schema.as_ref().try_into_arrow()?;
    match parse(files, typed) {
        Ok(s) => Ok(s),
        Err(e) => {
            tracing::warn!(
                error = %e,
                "the data files' stats do not parse with the table's types; the commit keeps numRecords only"
            );
            let counts = Schema::new(vec![Field::new("numRecords", DataType::Int64, true)]);
            parse(files, counts).map_err(|e| KernelError::generic(format!("stats: {e}")))
        }
    }
}

fn parse(files: &[StagedFile], schema: Schema) -> Result<StructArray, String> {
    let schema = Arc::new(schema);
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        .with_batch_size(files.len().max(1))
        .build_decoder()
        .map_err(|e| e.to_string())?;
    for f in files {
        let line = f.stats.as_deref().unwrap_or("{}");
        decoder
            .decode(line.as_bytes())
            .map_err(|e| format!("{}: {e}", f.path))?;
        decoder
            .decode(b"\n")
            .map_err(|e| format!("{}: {e}", f.path))?;
    }
    let batch = decoder
        .flush()
        .map_err(|e| e.to_string())?
        .unwrap_or_else(|| arrow::array::RecordBatch::new_empty(schema));
    if batch.num_rows() != files.len() {
        return Err(format!(
            "{} stats rows for {} files",
            batch.num_rows(),
            files.len()
        ));
    }
    let s = StructArray::from(batch);
    debug_assert_eq!(s.len(), files.len());
    Ok(s)
}
