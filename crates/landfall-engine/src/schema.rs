//! The stream schema: explicit (DDL) or inferred once from a sample of files (shaped by
//! `schema_hints`), stored in the state as version 0 and reused on every restart (never
//! re-inferred). Hive partition columns from paths are part of it: listed in
//! `partition_columns`, or, when inferring, every `k=v` level seen in the sampled paths. The
//! rescued-data column, when the stream has one, follows the first version's decoded columns
//! (columns added later come after it).
//!
//! Schema evolution ([`evolve`]) stores version N+1 with its reason and the file that caused
//! it; `landfall schema <stream>` prints the history ([`history`]). Streams created before
//! versions were numbered from 0 start at 1; nothing depends on the first number.

use crate::decode_options::{csv_format, file_format, infer_types, json_leniency, xml_format};
use crate::hints::apply_hints;
use crate::pinned::{FileError, PinnedReader};
use arrow_schema::{DataType, Field, FieldRef, Schema, SchemaRef};
use landfall_config::{EvolutionMode, Format, StreamSpec};
use landfall_core::seams::SeamResult;
use landfall_core::{FileMeta, SeamError, StateStore};
use landfall_discovery::{hive_partitions, relative_path};
use landfall_formats::FileFormat;
use object_store::ObjectStore;
use object_store::path::Path;
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
    /// The rescued-data column (a decoded string column), when the schema has one.
    pub rescued_column: Option<String>,
    /// The schema gained columns since the first version: the table may still lack them.
    pub evolved: bool,
}

/// A schema version as the ledger keeps it: the Arrow schema (exact, but its JSON form belongs
/// to one arrow major version) and the same schema as DDL (stable across upgrades; nested
/// nullability is not in it). Reading tries the Arrow form, then the DDL.
#[derive(Serialize, Deserialize)]
struct Stored {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    schema: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ddl: Option<String>,
    path_columns: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rescued_column: Option<String>,
    /// Why this version exists (`inferred from 12 files`, `new columns: a, b`).
    #[serde(default)]
    reason: String,
    /// The file that caused it, for evolved versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Stored {
    fn new(
        schema: &Schema,
        path_columns: Vec<String>,
        rescued_column: Option<String>,
        reason: String,
        file: Option<String>,
    ) -> Self {
        Stored {
            schema: serde_json::to_value(schema).ok(),
            ddl: Some(landfall_core::ddl::schema_to_ddl(schema)),
            path_columns,
            rescued_column,
            reason,
            file,
            created_at: Some(chrono::Utc::now()),
        }
    }

    fn schema(&self) -> Result<Schema, String> {
        if let Some(v) = &self.schema
            && let Ok(s) = serde_json::from_value::<Schema>(v.clone())
        {
            return Ok(s);
        }
        match &self.ddl {
            Some(ddl) => landfall_core::ddl::parse_schema(ddl).map_err(|e| e.to_string()),
            None => Err("neither the Arrow form nor the DDL form is readable".into()),
        }
    }
}

/// A stored schema must carry the file metadata the stream asks for: it is fixed with the
/// schema at the first start (schema evolution is not built yet).
fn check_metadata(spec: &StreamSpec, schema: &Schema) -> SeamResult<()> {
    let want = (!spec.metadata_columns.is_empty())
        .then(|| landfall_formats::metadata_field(&spec.metadata_columns));
    let have = schema
        .field_with_name(landfall_formats::METADATA_COLUMN)
        .ok()
        .cloned();
    if want.as_ref().map(|f| f.data_type()) != have.as_ref().map(|f| f.data_type()) {
        return Err(SeamError::fatal(format!(
            "stream `{}`: metadata_columns ({}) differ from the stream's schema, fixed at its first start ({}); restore the setting, or start the stream over on a new table (`landfall reset`, a new sink.path): changing the table's columns needs schema evolution, which is not built yet",
            spec.name,
            if spec.metadata_columns.is_empty() {
                "none".to_string()
            } else {
                spec.metadata_columns.join(", ")
            },
            have.map_or("none".to_string(), |f| landfall_core::ddl::schema_to_ddl(
                &Schema::new(vec![f])
            )),
        )));
    }
    Ok(())
}

/// The stream schema from its stored form, normalised to the types Delta stores and reads
/// back (so the table created from it is accepted by it on every restart).
fn build(
    version: u32,
    schema: &Schema,
    path_column_names: &[String],
    rescued_column: Option<String>,
) -> StreamSchema {
    let schema = landfall_core::delta_types::delta_normalize(schema);
    let path_columns: Vec<FieldRef> = path_column_names
        .iter()
        .filter_map(|n| schema.field_with_name(n).ok().map(|f| Arc::new(f.clone())))
        .collect();
    let decoded = Schema::new(
        schema
            .fields()
            .iter()
            .filter(|f| !path_column_names.contains(f.name()))
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
        rescued_column,
        evolved: false,
    }
}

/// At most this much of each sampled JSON or CSV file is read for inference (cut back to its
/// last complete line), so one huge file cannot fill memory.
const INFER_BYTES_PER_FILE: u64 = 16 << 20;

/// Infer from up to `max_files` / `max_bytes` of `files`, one file in memory at a time: a
/// Parquet file's footer only; a JSON or CSV file's first 16 MB at most.
async fn infer_from_sample(
    spec: &StreamSpec,
    store: &Arc<dyn ObjectStore>,
    files: &[FileMeta],
) -> SeamResult<Schema> {
    let format = file_format(spec.format);
    let mut merger =
        landfall_formats::SchemaMerger::new(format, csv_format(spec), infer_types(spec))
            .with_json_multi_line(spec.json.multi_line)
            .with_json_leniency(json_leniency(spec))
            .with_json_prefers_decimal(spec.json.prefers_decimal)
            .with_xml(xml_format(spec));
    let fatal =
        |e: landfall_formats::FormatError| SeamError::fatal(format!("stream `{}`: {e}", spec.name));
    let mut total = 0u64;
    let mut read = 0usize;
    // A zero-byte file holds no schema (and is no Parquet or ORC file).
    for f in files.iter().filter(|f| f.size > 0).take(spec.sample_files) {
        if read > 0 && total + f.size > spec.sample_bytes {
            break;
        }
        let shown = landfall_discovery::display_path(&spec.source.url, &f.path);
        let sampled = if matches!(format, FileFormat::Parquet | FileFormat::Orc) {
            footer_schema(store, f, &shown, format).await
        } else {
            head_of(store, f, &shown).await
        };
        // Gone or changed since listing: sample the others (the batch decides what it means).
        let Some(sampled) = sampled? else { continue };
        total += f.size;
        read += 1;
        let added = match sampled {
            Sampled::Schema(s) => s.map(|s| merger.add_schema(&s)),
            // An Avro file's schema is in its header, at the start of the bytes as stored.
            Sampled::Bytes(b, _) if format == FileFormat::Avro => merger.add(&shown, &b),
            Sampled::Bytes(b, complete) => {
                merger.add_sample(&shown, &b, INFER_BYTES_PER_FILE as usize, complete)
            }
        };
        match added {
            Ok(()) => {}
            // The batch will skip it too; a sample of the others decides the schema.
            Err(e) if spec.ignore_corrupt_files => {
                tracing::warn!(stream = %spec.name, file = %shown, error = %e,
                    "schema inference passed over a corrupt file (ignore_corrupt_files)");
            }
            Err(e) => return Err(fatal(e)),
        }
    }
    merger.finish().map_err(fatal)
}

enum Sampled {
    /// A Parquet or ORC footer's schema, or why the footer is unreadable.
    Schema(Result<SchemaRef, landfall_formats::FormatError>),
    /// A text file's first bytes as stored (compressed or not), and whether they are all of
    /// it.
    Bytes(bytes::Bytes, bool),
}

/// A Parquet or ORC file's schema from its footer (pinned ranged reads); `None` when the file
/// is gone or changed.
async fn footer_schema(
    store: &Arc<dyn ObjectStore>,
    f: &FileMeta,
    shown: &str,
    format: FileFormat,
) -> SeamResult<Option<Sampled>> {
    let (reader, failure) = PinnedReader::new(store.clone(), f)
        .map_err(|e| SeamError::fatal(format!("schema sample {shown}: {e}")))?;
    let schema = if format == FileFormat::Orc {
        landfall_formats::orc_footer_schema(shown, crate::pinned::PinnedOrcReader::new(reader))
            .await
    } else {
        landfall_formats::parquet_footer_schema(shown, reader).await
    };
    match schema {
        Ok(s) => Ok(Some(Sampled::Schema(Ok(s)))),
        Err(e) => match failure.take() {
            Some(FileError::Unreadable(_)) => Ok(None),
            Some(FileError::Transient(e)) => Err(SeamError::retryable(format!(
                "schema sample {shown}: {}",
                e.message
            ))),
            None => Ok(Some(Sampled::Schema(Err(e)))),
        },
    }
}

/// The start of a text file as stored, at most `INFER_BYTES_PER_FILE` (the merger decompresses
/// it and cuts it back to its last complete line); `None` when the file is gone or changed.
async fn head_of(
    store: &Arc<dyn ObjectStore>,
    f: &FileMeta,
    shown: &str,
) -> SeamResult<Option<Sampled>> {
    let mut head = f.clone();
    head.size = f.size.min(INFER_BYTES_PER_FILE);
    let body = match crate::pinned::fetch_range(store, f, 0..head.size).await {
        Ok(b) => b,
        Err(FileError::Unreadable(_)) => return Ok(None),
        Err(FileError::Transient(e)) => {
            return Err(SeamError::retryable(format!(
                "schema sample {shown}: {}",
                e.message
            )));
        }
    };
    Ok(Some(Sampled::Bytes(body, head.size == f.size)))
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
        let (stored, schema) = load(spec, state, v)?;
        check_metadata(spec, &schema)?;
        let rescued = stored.rescued_column.clone();
        if let Some(want) = &spec.rescued_column
            && rescued.as_ref() != Some(want)
        {
            tracing::warn!(stream = %spec.name, rescued_data_column = %want,
                have = rescued.as_deref().unwrap_or("none"),
                "rescued_data_column differs from the stream's schema, fixed at its first start; the schema's is used");
        }
        let mut built = build(v, &schema, &stored.path_columns, rescued);
        built.evolved = stored.file.is_some();
        return Ok(Some((built, false)));
    }
    // text and binary_file have a fixed schema: as if given explicitly.
    let fixed = file_format(spec.format).fixed_schema();
    let (mut schema, inferred) = match (&spec.schema, fixed) {
        (_, Some(f)) => (f, false),
        (Some(s), None) => (s.as_ref().clone(), false),
        (None, None) => {
            if candidates.is_empty() {
                return Ok(None);
            }
            crate::failpoint::hit("before_inference");
            let inferred = infer_from_sample(spec, store, candidates).await?;
            (apply_hints(&spec.name, inferred, &spec.schema_hints)?, true)
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
    // The rescued-data column: the last decoded column.
    let rescued = spec.rescued_column.clone();
    if let Some(r) = &rescued {
        if let Some(f) = fields.iter().find(|f| f.name().eq_ignore_ascii_case(r)) {
            return Err(SeamError::fatal(format!(
                "stream `{}`: the data has a column `{}`, the name of the rescued-data column; set rescued_data_column to another name",
                spec.name,
                f.name()
            )));
        }
        fields.push(Field::new(r, DataType::Utf8, true));
    }
    for c in &path_columns {
        if !fields.iter().any(|f| f.name() == c) {
            fields.push(Field::new(c, DataType::Utf8, true));
        }
    }
    // File metadata: one struct column, filled per file like the path columns.
    let mut path_columns = path_columns;
    if !spec.metadata_columns.is_empty() {
        let meta = landfall_formats::metadata_field(&spec.metadata_columns);
        if fields.iter().any(|f| f.name() == meta.name()) {
            return Err(SeamError::fatal(format!(
                "stream `{}`: the data has a column `{}`, the name of the file metadata column; drop metadata_columns or rename the column",
                spec.name,
                meta.name()
            )));
        }
        path_columns.push(meta.name().clone());
        fields.push(meta);
    }
    schema = Schema::new(fields);
    let reason = if inferred {
        format!(
            "inferred from a sample of {} file(s)",
            candidates.len().min(spec.sample_files)
        )
    } else if spec.schema.is_some() {
        "the stream's schema".to_string()
    } else {
        format!("the fixed schema of {}", spec.format.as_str())
    };
    let json = serde_json::to_string(&Stored::new(
        &schema,
        path_columns.clone(),
        rescued.clone(),
        reason,
        None,
    ))
    .expect("schema serialises");
    state.put_schema(0, &json)?;
    Ok(Some((build(0, &schema, &path_columns, rescued), inferred)))
}

/// Stored version `v`: its record and its schema.
fn load(spec: &StreamSpec, state: &dyn StateStore, v: u32) -> SeamResult<(Stored, Schema)> {
    let raw = state.schema(v)?.ok_or_else(|| {
        SeamError::fatal(format!(
            "stream `{}`: schema version {v} vanished",
            spec.name
        ))
    })?;
    let unreadable = |e: String| {
        SeamError::fatal(format!(
            "stream `{}`: stored schema version {v} is unreadable: {e}",
            spec.name
        ))
    };
    let stored: Stored = serde_json::from_str(&raw).map_err(|e| unreadable(e.to_string()))?;
    let schema = stored.schema().map_err(unreadable)?;
    Ok((stored, schema))
}

/// What the decoders do with values the schema has no place for, under the stream's
/// evolution mode; `may_widen`: the table has not refused to widen columns.
pub fn policy(
    spec: &StreamSpec,
    schema: &StreamSchema,
    may_widen: bool,
) -> landfall_formats::SchemaPolicy {
    landfall_formats::SchemaPolicy {
        rescued_column: schema.rescued_column.clone(),
        detect_new_columns: matches!(
            spec.evolution,
            EvolutionMode::AddNewColumns
                | EvolutionMode::AddNewColumnsWithTypeWidening
                | EvolutionMode::FailOnNewColumns
        ),
        infer_types: infer_types(spec)
            || matches!(spec.format, Format::Parquet | Format::Avro | Format::Orc),
        prefers_decimal: spec.format == Format::Json && spec.json.prefers_decimal,
        widen_types: may_widen && spec.evolution.widens_types(),
        path_columns: schema
            .path_columns
            .iter()
            .map(|f| f.name().clone())
            .collect(),
    }
}

/// `current` with the columns `new` notes for the first time appended (after the decoded
/// ones; columns named like a path or metadata column are left to the rescue), and the
/// existing columns it notes with a wider type widened where Delta's type widening allows
/// ([`landfall_formats::widen_columns`]: decoders note those only under
/// `add_new_columns_with_type_widening`); `None` when nothing would change.
pub fn grown_schema(current: &StreamSchema, new: &landfall_formats::NewColumns) -> Option<Schema> {
    grown(current, new).map(|(schema, _)| schema)
}

/// [`grown_schema`], with what changed: the new columns' paths and the widened columns as
/// `path FROM -> TO`.
fn grown(
    current: &StreamSchema,
    new: &landfall_formats::NewColumns,
) -> Option<(Schema, Vec<String>)> {
    let (accepted, _) = addable(current, new);
    let (widened, changes) = landfall_formats::widen_columns(current.decoded.fields(), new);
    let decoded: Vec<FieldRef> = landfall_formats::append_new_columns(&widened, &accepted)
        .iter()
        .cloned()
        .collect();
    if decoded[..] == current.decoded.fields()[..] {
        return None;
    }
    let mut described = Vec::new();
    let added: Vec<String> = accepted
        .paths()
        .into_iter()
        .filter(|p| !changes.iter().any(|(w, _, _)| w == p))
        .collect();
    if !added.is_empty() {
        described.push(format!("new columns: {}", added.join(", ")));
    }
    if !changes.is_empty() {
        described.push(format!(
            "widened: {}",
            changes
                .iter()
                .map(|(path, from, to)| landfall_core::type_widening::describe(path, from, to))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut fields = decoded;
    fields.extend(current.path_columns.iter().cloned());
    Some((Schema::new(fields), described))
}

/// The new columns a table can take (the rest stay rescued): not named like a path column,
/// and storable in Delta and Parquet ([`landfall_sink::storable_column`]); and those refused,
/// with why.
pub fn addable(
    current: &StreamSchema,
    new: &landfall_formats::NewColumns,
) -> (landfall_formats::NewColumns, Vec<(String, String)>) {
    let mut ok = Vec::new();
    let mut refused = Vec::new();
    for f in new.fields() {
        // An existing column noted again is a widening ([`grown`]), not a new column.
        if current
            .decoded
            .field_with_name(f.name())
            .is_ok_and(|have| !matches!(have.data_type(), DataType::Struct(_)))
        {
            continue;
        }
        if current
            .path_columns
            .iter()
            .any(|p| p.name().eq_ignore_ascii_case(f.name()))
        {
            continue;
        }
        match landfall_sink::storable_column(f) {
            Ok(()) => ok.push(f.clone()),
            Err(why) => refused.push((f.name().clone(), why)),
        }
    }
    (landfall_formats::NewColumns::from_fields(&ok), refused)
}

/// Store the next schema version, [`grown_schema`]; `file`: the first file that held the new
/// columns or the values that needed a wider column, as the user wrote the source. Returns it
/// with what changed (`new columns: a, b`, `widened: n INT -> BIGINT`); `None` when nothing
/// would change.
pub fn evolve(
    state: &dyn StateStore,
    current: &StreamSchema,
    new: &landfall_formats::NewColumns,
    file: &str,
) -> SeamResult<Option<(StreamSchema, Vec<String>)>> {
    let Some((schema, changes)) = grown(current, new) else {
        return Ok(None);
    };
    let (_, refused) = addable(current, new);
    for (column, why) in &refused {
        tracing::warn!(column = %column, reason = %why, file, "a new column cannot be added to the table; its values stay in the rescued-data column");
    }
    let version = current.version + 1;
    let path_names: Vec<String> = current
        .path_columns
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let json = serde_json::to_string(&Stored::new(
        &schema,
        path_names.clone(),
        current.rescued_column.clone(),
        changes.join("; "),
        Some(file.to_string()),
    ))
    .expect("schema serialises");
    state.put_schema(version, &json)?;
    let mut next = build(
        version,
        &schema,
        &path_names,
        current.rescued_column.clone(),
    );
    next.evolved = true;
    Ok(Some((next, changes)))
}

/// One stored schema version, as `landfall schema` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SchemaVersion {
    pub version: u32,
    pub schema: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rescued_column: Option<String>,
}

/// Every stored schema version, oldest first.
pub fn history(spec: &StreamSpec, state: &dyn StateStore) -> SeamResult<Vec<SchemaVersion>> {
    let Some(latest) = state.latest_schema_version()? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for v in 0..=latest {
        if state.schema(v)?.is_none() {
            continue;
        }
        let (stored, schema) = load(spec, state, v)?;
        out.push(SchemaVersion {
            version: v,
            schema: landfall_core::ddl::schema_to_ddl(&schema),
            reason: if stored.reason.is_empty() {
                "the stream's first schema".into()
            } else {
                stored.reason
            },
            file: stored.file,
            created_at: stored.created_at,
            rescued_column: stored.rescued_column,
        });
    }
    Ok(out)
}
