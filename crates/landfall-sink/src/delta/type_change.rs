//! Widening a Delta table's columns (`add_new_columns_with_type_widening`): the
//! `typeWidening` table feature, written by hand because delta_kernel 0.30's transactions
//! can add columns and drop NOT NULL but not change a type.
//!
//! Contract:
//! - [`widenings`] lists the columns (top level or struct members; never inside a list or a
//!   map) whose type the stream's schema evolution widened (marked
//!   [`landfall_core::type_widening::WIDENED_FROM`]) against the table's, each a change Delta
//!   allows ([`landfall_core::type_widening::is_widening`]).
//! - [`commit`] writes one commit of its own, before any data file of the batch that needs
//!   it is written: `commitInfo` (first, with a monotonic `inCommitTimestamp` when the table
//!   has in-commit timestamps; operation `CHANGE COLUMN`, the state identity), the `protocol`
//!   with `typeWidening` in its reader and writer features (reader 3 / writer 7; a legacy
//!   protocol lists the features its versions implied; `timestampNtz` too when a DATE becomes
//!   a TIMESTAMP_NTZ; a table on `typeWidening-preview` keeps it), and the `metaData` as the
//!   table had it (id, partitioning, configuration, every field's metadata: column mapping's
//!   physical names and ids stay) with `delta.enableTypeWidening = true` and each widened
//!   field's new type and a `delta.typeChanges` entry `{fromType, toType}` appended to the
//!   ones it had (Delta PROTOCOL.md, "Type Change Metadata").
//! - The commit is a put-if-absent of the next version: losing it is
//!   [`Attempt::Conflicted`], answered by refreshing and deciding again (another writer may
//!   have widened the column already). It carries no `txn`: it is no batch of the stream. A
//!   stop after it and before the batch's commit leaves a widened column and no rows, which
//!   the batch's next attempt writes in.
//! - Older data files keep their narrower Parquet types; readers of `typeWidening` tables
//!   read them as the wider type (the kernel's default engine, Spark, DuckDB's
//!   `union_by_name`).

use super::kernel::{Attempt, ENGINE_INFO, Kernel};
use crate::error::SinkError;
use arrow_schema::{DataType, Field, Fields, Schema};
use delta_kernel::SnapshotRef;
use object_store::{PutMode, PutOptions, PutPayload};
use serde_json::{Value, json};

/// One column to widen: its path (struct members under their parents) and both types.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Widening {
    pub path: Vec<String>,
    pub from: DataType,
    pub to: DataType,
}

impl Widening {
    /// `user.score INT -> DOUBLE`.
    pub fn describe(&self) -> String {
        landfall_core::type_widening::describe(&self.path.join("."), &self.from, &self.to)
    }
}

/// The columns `stream` (normalised) widens against `table`, as Delta's type widening allows.
pub(crate) fn widenings(stream: &Schema, table: &Schema) -> Vec<Widening> {
    let mut out = Vec::new();
    walk(&mut Vec::new(), stream.fields(), table.fields(), &mut out);
    out
}

fn walk(parents: &mut Vec<String>, stream: &Fields, table: &Fields, out: &mut Vec<Widening>) {
    for s in stream {
        let Some((_, t)) = table.find(s.name()) else {
            continue;
        };
        parents.push(s.name().clone());
        match (s.data_type(), t.data_type()) {
            (DataType::Struct(sf), DataType::Struct(tf)) => walk(parents, sf, tf, out),
            _ if crate::delta_schema::widened_by_stream(s, t) => out.push(Widening {
                path: parents.clone(),
                from: t.data_type().clone(),
                to: s.data_type().clone(),
            }),
            _ => {}
        }
        parents.pop();
    }
}

/// Delta's name of a primitive type (`integer`, `decimal(12,2)`, `timestamp_ntz`).
fn delta_type_name(ty: &DataType) -> Result<Value, String> {
    let schema = Schema::new(vec![Field::new("v", ty.clone(), true)]);
    let kernel = super::kernel::to_kernel(&schema)?;
    let field = kernel.fields().next().ok_or("no field")?;
    serde_json::to_value(field.data_type()).map_err(|e| e.to_string())
}

/// The table's schema (its `schemaString`, parsed) with `changes` applied.
fn widened_schema(schema: &mut Value, changes: &[Widening]) -> Result<(), String> {
    for w in changes {
        let shown = w.path.join(".");
        let mut fields = schema
            .get_mut("fields")
            .and_then(Value::as_array_mut)
            .ok_or("the table schema has no fields")?;
        let (last, parents) = w.path.split_last().ok_or("an empty path")?;
        for p in parents {
            let field = fields
                .iter_mut()
                .find(|f| f.get("name").and_then(Value::as_str) == Some(p))
                .ok_or_else(|| format!("column `{shown}` is not in the table"))?;
            fields = field
                .get_mut("type")
                .and_then(|t| t.get_mut("fields"))
                .and_then(Value::as_array_mut)
                .ok_or_else(|| format!("`{p}` of column `{shown}` is no struct in the table"))?;
        }
        let field = fields
            .iter_mut()
            .find(|f| f.get("name").and_then(Value::as_str) == Some(last))
            .ok_or_else(|| format!("column `{shown}` is not in the table"))?;
        let from = field.get("type").cloned().unwrap_or(Value::Null);
        let to = delta_type_name(&w.to)?;
        let expected = delta_type_name(&w.from)?;
        if from != expected {
            return Err(format!(
                "column `{shown}` is {from} in the table, not {expected}"
            ));
        }
        field["type"] = to.clone();
        let meta = field
            .as_object_mut()
            .ok_or("a field is no object")?
            .entry("metadata")
            .or_insert_with(|| json!({}));
        let changes = meta
            .as_object_mut()
            .ok_or("a field's metadata is no object")?
            .entry("delta.typeChanges")
            .or_insert_with(|| json!([]));
        changes
            .as_array_mut()
            .ok_or("delta.typeChanges is no list")?
            .push(json!({"fromType": from, "toType": to}));
    }
    Ok(())
}

/// Features a legacy protocol's versions imply (writer versions 3 to 6 are refused earlier).
fn implied_writer_features(writer: i64) -> Vec<&'static str> {
    match writer {
        0 | 1 => vec![],
        _ => vec!["appendOnly", "invariants"],
    }
}

/// The table's protocol with `typeWidening` (and `timestampNtz` when `ntz`) enabled.
fn widened_protocol(protocol: &Value, ntz: bool) -> Result<Value, String> {
    let reader = protocol["minReaderVersion"].as_i64().unwrap_or(1);
    let writer = protocol["minWriterVersion"].as_i64().unwrap_or(2);
    let list = |key: &str| -> Vec<String> {
        protocol[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (mut readers, mut writers) = if reader >= 3 && writer >= 7 {
        (list("readerFeatures"), list("writerFeatures"))
    } else if writer >= 7 {
        // Writer features only (reader 1, or 2 for column mapping): at reader 3 the reader
        // features list every reader-writer feature the writer features have.
        let writers = list("writerFeatures");
        let readers = if reader >= 2 && writers.iter().any(|f| f == "columnMapping") {
            vec!["columnMapping".to_string()]
        } else {
            Vec::new()
        };
        (readers, writers)
    } else if reader <= 1 && writer <= 2 {
        (
            Vec::new(),
            implied_writer_features(writer)
                .into_iter()
                .map(str::to_string)
                .collect(),
        )
    } else {
        return Err(format!(
            "its protocol (reader {reader}, writer {writer}) cannot take the typeWidening feature here; upgrade the table to reader 3 / writer 7 first"
        ));
    };
    let mut wanted = Vec::new();
    if !writers
        .iter()
        .any(|f| f == "typeWidening" || f == "typeWidening-preview")
    {
        wanted.push("typeWidening");
    }
    if ntz {
        wanted.push("timestampNtz");
    }
    for f in wanted {
        if !readers.iter().any(|r| r == f) {
            readers.push(f.to_string());
        }
        if !writers.iter().any(|w| w == f) {
            writers.push(f.to_string());
        }
    }
    Ok(json!({
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": readers,
        "writerFeatures": writers,
    }))
}

/// Why `table` cannot take a type change, if it cannot: its `delta.enableTypeWidening` set
/// to `false` (writers must then refuse widening, PROTOCOL.md), or a protocol the feature
/// cannot be added to.
pub(crate) fn refusal(table: &SnapshotRef) -> Option<String> {
    if table.table_properties().enable_type_widening == Some(false) {
        return Some(
            "the table sets delta.enableTypeWidening = false; set it to true to let the stream widen columns"
                .into(),
        );
    }
    let protocol = serde_json::to_value(table.table_configuration().protocol()).ok()?;
    widened_protocol(&protocol, false).err()
}

/// The widening commit's log entry on `table` (see the module docs).
fn entry(
    table: &SnapshotRef,
    changes: &[Widening],
    owner: Option<&str>,
    now_ms: i64,
    in_commit_timestamp: Option<i64>,
) -> Result<Vec<u8>, String> {
    let config = table.table_configuration();
    let mut metadata = serde_json::to_value(config.metadata()).map_err(|e| e.to_string())?;
    let protocol = serde_json::to_value(config.protocol()).map_err(|e| e.to_string())?;
    let raw = metadata["schemaString"]
        .as_str()
        .ok_or("the table's metadata has no schemaString")?
        .to_string();
    let mut schema: Value = serde_json::from_str(&raw).map_err(|e| e.to_string())?;
    widened_schema(&mut schema, changes)?;
    metadata["schemaString"] = Value::String(schema.to_string());
    metadata["configuration"]["delta.enableTypeWidening"] = Value::String("true".into());
    let ntz = changes
        .iter()
        .any(|w| matches!(w.to, DataType::Timestamp(_, None)));
    let protocol = widened_protocol(&protocol, ntz)?;
    let described: Vec<String> = changes.iter().map(Widening::describe).collect();
    let mut info = serde_json::Map::new();
    if let Some(ict) = in_commit_timestamp {
        info.insert("inCommitTimestamp".into(), json!(ict));
    }
    info.insert("timestamp".into(), json!(now_ms));
    info.insert("operation".into(), json!("CHANGE COLUMN"));
    info.insert(
        "operationParameters".into(),
        json!({"columns": serde_json::to_string(&described).unwrap_or_default()}),
    );
    info.insert("isBlindAppend".into(), json!(false));
    info.insert("engineInfo".into(), json!(ENGINE_INFO));
    if let Some(owner) = owner {
        info.insert(landfall_core::OWNER_KEY.into(), json!(owner));
    }
    let mut out = String::new();
    for action in [
        json!({"commitInfo": Value::Object(info)}),
        json!({"protocol": protocol}),
        json!({"metaData": metadata}),
    ] {
        out.push_str(&action.to_string());
        out.push('\n');
    }
    Ok(out.into_bytes())
}

/// Widen `changes` in the table at `table`'s version + 1 (see the module docs).
pub(crate) async fn commit(
    k: &Kernel,
    table: &SnapshotRef,
    changes: &[Widening],
    owner: Option<&str>,
) -> Result<Attempt, SinkError> {
    let incompatible = |reason: String| SinkError::Incompatible {
        location: k.location.clone(),
        reason: format!("its columns cannot be widened: {reason}"),
    };
    let now_ms = chrono::Utc::now().timestamp_millis();
    let ict = if table.table_properties().enable_in_commit_timestamps == Some(true) {
        let snapshot = table.clone();
        let previous = k
            .run(move |engine| snapshot.get_in_commit_timestamp(engine))
            .await
            .map_err(|e| k.kernel_err("read the last in-commit timestamp", e))?;
        Some(previous.map_or(now_ms, |p| now_ms.max(p + 1)))
    } else {
        None
    };
    if let Some(why) = refusal(table) {
        return Err(incompatible(why));
    }
    let bytes = entry(table, changes, owner, now_ms, ict).map_err(incompatible)?;
    let version = table.version() as i64 + 1;
    let path = crate::delta_log::commit_path(&k.path("_delta_log"), version);
    let put = k
        .store
        .put_opts(
            &path,
            PutPayload::from(bytes),
            PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            },
        )
        .await;
    match put {
        Ok(_) => {
            let snapshot = k.refresh(table.clone()).await?;
            if snapshot.version() as i64 != version {
                // Another commit followed ours at once: the refreshed table is newer, and
                // holds ours.
                tracing::debug!(table = %k.location, version, now = snapshot.version(), "the table moved on right after the type change");
            }
            Ok(Attempt::Committed { version, snapshot })
        }
        Err(object_store::Error::AlreadyExists { .. }) => Ok(Attempt::Conflicted { version }),
        Err(e) => Err(SinkError::Io {
            location: k.location.clone(),
            op: "widen columns",
            reason: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_gain_the_feature() {
        let legacy = json!({"minReaderVersion": 1, "minWriterVersion": 2});
        assert_eq!(
            widened_protocol(&legacy, false).unwrap(),
            json!({"minReaderVersion": 3, "minWriterVersion": 7,
                   "readerFeatures": ["typeWidening"],
                   "writerFeatures": ["appendOnly", "invariants", "typeWidening"]})
        );
        let modern = json!({"minReaderVersion": 3, "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors", "rowTracking"]});
        assert_eq!(
            widened_protocol(&modern, true).unwrap(),
            json!({"minReaderVersion": 3, "minWriterVersion": 7,
                   "readerFeatures": ["deletionVectors", "typeWidening", "timestampNtz"],
                   "writerFeatures": ["deletionVectors", "rowTracking", "typeWidening", "timestampNtz"]})
        );
        // A table on the preview feature keeps it (as Spark does).
        let preview = json!({"minReaderVersion": 3, "minWriterVersion": 7,
            "readerFeatures": ["typeWidening-preview"],
            "writerFeatures": ["typeWidening-preview"]});
        assert_eq!(widened_protocol(&preview, false).unwrap(), preview);
        assert!(
            widened_protocol(
                &json!({"minReaderVersion": 2, "minWriterVersion": 5}),
                false
            )
            .is_err()
        );
        // Writer features only: the reader side is listed from them.
        let writer_only = json!({"minReaderVersion": 2, "minWriterVersion": 7,
            "writerFeatures": ["columnMapping", "appendOnly"]});
        assert_eq!(
            widened_protocol(&writer_only, false).unwrap(),
            json!({"minReaderVersion": 3, "minWriterVersion": 7,
                   "readerFeatures": ["columnMapping", "typeWidening"],
                   "writerFeatures": ["columnMapping", "appendOnly", "typeWidening"]})
        );
    }

    #[test]
    fn fields_change_type_and_keep_their_metadata() {
        let mut schema = json!({"type": "struct", "fields": [
            {"name": "n", "type": "integer", "nullable": true,
             "metadata": {"delta.columnMapping.id": 1, "delta.typeChanges": [{"fromType": "short", "toType": "integer"}]}},
            {"name": "s", "type": {"type": "struct", "fields": [
                {"name": "d", "type": "decimal(5,2)", "nullable": true, "metadata": {}}]},
             "nullable": true, "metadata": {}}]});
        widened_schema(
            &mut schema,
            &[
                Widening {
                    path: vec!["n".into()],
                    from: DataType::Int32,
                    to: DataType::Int64,
                },
                Widening {
                    path: vec!["s".into(), "d".into()],
                    from: DataType::Decimal128(5, 2),
                    to: DataType::Decimal128(12, 2),
                },
            ],
        )
        .unwrap();
        assert_eq!(schema["fields"][0]["type"], "long");
        assert_eq!(schema["fields"][0]["metadata"]["delta.columnMapping.id"], 1);
        assert_eq!(
            schema["fields"][0]["metadata"]["delta.typeChanges"],
            json!([{"fromType": "short", "toType": "integer"}, {"fromType": "integer", "toType": "long"}])
        );
        let d = &schema["fields"][1]["type"]["fields"][0];
        assert_eq!(d["type"], "decimal(12,2)");
        assert_eq!(
            d["metadata"]["delta.typeChanges"],
            json!([{"fromType": "decimal(5,2)", "toType": "decimal(12,2)"}])
        );
        // A column that is not what the stream widened from is refused.
        let err = widened_schema(
            &mut schema,
            &[Widening {
                path: vec!["n".into()],
                from: DataType::Int32,
                to: DataType::Int64,
            }],
        )
        .unwrap_err();
        assert!(err.contains("is \"long\" in the table"), "{err}");
    }

    #[test]
    fn widenings_between_schemas() {
        let table = Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Int64, true),
            Field::new(
                "s",
                DataType::Struct(
                    vec![
                        Field::new("f", DataType::Float32, true),
                        Field::new("g", DataType::Int32, true),
                    ]
                    .into(),
                ),
                true,
            ),
        ]);
        let marked = |f: Field| {
            f.with_metadata(
                [(
                    landfall_core::type_widening::WIDENED_FROM.to_string(),
                    "x".to_string(),
                )]
                .into(),
            )
        };
        let stream = Schema::new(vec![
            marked(Field::new("a", DataType::Int64, true)),
            Field::new("b", DataType::Int64, true),
            Field::new(
                "s",
                DataType::Struct(
                    vec![
                        marked(Field::new("f", DataType::Float64, true)),
                        // Wider than the table's, but not by the stream's evolution: kept.
                        Field::new("g", DataType::Int64, true),
                    ]
                    .into(),
                ),
                true,
            ),
            Field::new("new", DataType::Utf8, true),
        ]);
        assert_eq!(
            widenings(&stream, &table),
            vec![
                Widening {
                    path: vec!["a".into()],
                    from: DataType::Int32,
                    to: DataType::Int64
                },
                Widening {
                    path: vec!["s".into(), "f".into()],
                    from: DataType::Float32,
                    to: DataType::Float64
                },
            ]
        );
    }
}
