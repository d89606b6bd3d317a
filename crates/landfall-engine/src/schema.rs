//! The stream schema: explicit (DDL) or inferred once from a sample of files, stored in the
//! state as version 1 and reused on every restart (never re-inferred). Hive partition columns
//! from paths are part of it: listed in `partition_columns`, or, when inferring, every `k=v`
//! level seen in the sampled paths.

use arrow_schema::{DataType, Field, FieldRef, Schema, SchemaRef};
use landfall_config::{Format, StreamSpec};
use landfall_core::seams::SeamResult;
use landfall_core::{FileMeta, SeamError, StateStore};
use landfall_discovery::{hive_partitions, relative_path};
use landfall_formats::{CsvFormat, FileFormat};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The resolved schema of a stream.
#[derive(Debug, Clone)]
pub struct StreamSchema {
    pub version: u32,
    /// Every column written to the table.
    pub table: SchemaRef,
    /// The columns decoders produce (the table minus path columns).
    pub decoded: SchemaRef,
    /// Columns filled from Hive `k=v` path levels, appended after the decoded ones.
    pub path_columns: Vec<FieldRef>,
}

#[derive(Serialize, Deserialize)]
struct Stored {
    schema: Schema,
    path_columns: Vec<String>,
}

pub fn file_format(f: Format) -> Result<FileFormat, SeamError> {
    match f {
        Format::Json => Ok(FileFormat::Json),
        Format::Csv => Ok(FileFormat::Csv),
        Format::Parquet => Ok(FileFormat::Parquet),
        other => Err(SeamError::fatal(format!(
            "format `{}` is not supported yet",
            other.as_str()
        ))),
    }
}

pub fn csv_format(spec: &StreamSpec) -> CsvFormat {
    let c = &spec.csv;
    let one = |s: &str| s.as_bytes().first().copied();
    CsvFormat {
        header: c.header,
        delimiter: one(&c.sep).unwrap_or(b','),
        quote: one(&c.quote).unwrap_or(b'"'),
        escape: c.escape.as_deref().and_then(one),
        comment: c.comment.as_deref().and_then(one),
        null_value: c.null_value.clone(),
    }
}

fn build(version: u32, stored: Stored) -> StreamSchema {
    let path_columns: Vec<FieldRef> = stored
        .path_columns
        .iter()
        .filter_map(|n| {
            stored
                .schema
                .field_with_name(n)
                .ok()
                .map(|f| Arc::new(f.clone()))
        })
        .collect();
    let decoded = Schema::new(
        stored
            .schema
            .fields()
            .iter()
            .filter(|f| !stored.path_columns.contains(f.name()))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let mut table_fields: Vec<FieldRef> = decoded.fields().iter().cloned().collect();
    table_fields.extend(path_columns.iter().cloned());
    StreamSchema {
        version,
        table: Arc::new(Schema::new(table_fields)),
        decoded: Arc::new(decoded),
        path_columns,
    }
}

async fn read_sample(
    store: &Arc<dyn ObjectStore>,
    files: &[FileMeta],
    max_files: usize,
    max_bytes: u64,
) -> SeamResult<Vec<(String, bytes::Bytes)>> {
    let mut out = Vec::new();
    let mut total = 0u64;
    for f in files.iter().take(max_files) {
        if !out.is_empty() && total + f.size > max_bytes {
            break;
        }
        let path =
            Path::parse(&f.path).map_err(|e| SeamError::fatal(format!("{}: {e}", f.path)))?;
        let bytes = store
            .get(&path)
            .await
            .map_err(|e| SeamError::retryable(format!("schema sample {}: {e}", f.path)))?
            .bytes()
            .await
            .map_err(|e| SeamError::retryable(format!("schema sample {}: {e}", f.path)))?;
        total += f.size;
        out.push((f.path.clone(), bytes));
    }
    Ok(out)
}

/// Load the stored schema, or fix it now (explicit, or inferred from `candidates`). `None`
/// when it must be inferred and no file has arrived yet.
pub async fn resolve(
    spec: &StreamSpec,
    state: &dyn StateStore,
    store: &Arc<dyn ObjectStore>,
    prefix: &Path,
    candidates: &[FileMeta],
) -> SeamResult<Option<(StreamSchema, bool)>> {
    if let Some(v) = state.latest_schema_version()? {
        let raw = state.schema(v)?.ok_or_else(|| {
            SeamError::fatal(format!(
                "stream `{}`: schema version {v} vanished",
                spec.name
            ))
        })?;
        let stored: Stored = serde_json::from_str(&raw).map_err(|e| {
            SeamError::fatal(format!(
                "stream `{}`: stored schema version {v} is unreadable: {e}",
                spec.name
            ))
        })?;
        return Ok(Some((build(v, stored), false)));
    }
    let (mut schema, inferred) = match &spec.schema {
        Some(s) => (s.as_ref().clone(), false),
        None => {
            if candidates.is_empty() {
                return Ok(None);
            }
            let sample =
                read_sample(store, candidates, spec.sample_files, spec.sample_bytes).await?;
            let s = landfall_formats::infer_schema(
                file_format(spec.format)?,
                &csv_format(spec),
                &sample,
                spec.infer_column_types,
            )
            .map_err(|e| SeamError::fatal(format!("stream `{}`: {e}", spec.name)))?;
            (s, true)
        }
    };
    let path_columns: Vec<String> = match &spec.partition_columns {
        Some(cols) => cols.clone(),
        None if inferred => {
            let mut cols: Vec<String> = Vec::new();
            for f in candidates.iter().take(spec.sample_files) {
                for (k, _) in hive_partitions(relative_path(prefix, &f.path)) {
                    if !cols.contains(&k) {
                        cols.push(k);
                    }
                }
            }
            cols
        }
        None => Vec::new(),
    };
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for c in &path_columns {
        if !fields.iter().any(|f| f.name() == c) {
            fields.push(Field::new(c, DataType::Utf8, true));
        }
    }
    schema = Schema::new(fields);
    let stored = Stored {
        schema,
        path_columns,
    };
    let json = serde_json::to_string(&stored).expect("schema serialises");
    state.put_schema(1, &json)?;
    Ok(Some((build(1, stored), inferred)))
}
