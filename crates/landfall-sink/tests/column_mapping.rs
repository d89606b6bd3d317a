//! Appends to column-mapped tables (`delta.columnMapping.mode` name and id), as Databricks
//! creates them: the data files name every column, nested ones too, by its physical name and
//! carry its field id; partition values and statistics name physical columns; the deltalake
//! Python package reads the rows back by their logical names. A column the stream adds gets
//! its physical name and id from a commit of its own before the batch's files are written.
//! Compaction reads and writes the physical columns.

use arrow::array::{Int64Array, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use landfall_core::{Committer, StagedFile};
use landfall_sink::DeltaCommitter;
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

fn uri(dir: &Path) -> String {
    url::Url::from_directory_path(dir).unwrap().to_string()
}

fn mapped(name: &str, ty: serde_json::Value, id: i64, physical: &str) -> serde_json::Value {
    json!({"name": name, "type": ty, "nullable": true, "metadata": {
        "delta.columnMapping.id": id, "delta.columnMapping.physicalName": physical}})
}

/// A mapped table: `id` (col-a1, 1), `name` (col-b2, 2), `s struct<x long>` (col-c3 {col-d4}, 3
/// and 4), `extra` (col-e5, 5, a column the stream lacks), partitioned by `part` (col-f6, 6).
fn table(mode: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let schema = json!({"type": "struct", "fields": [
        mapped("id", json!("long"), 1, "col-a1"),
        mapped("name", json!("string"), 2, "col-b2"),
        mapped("s", json!({"type": "struct", "fields": [mapped("x", json!("long"), 4, "col-d4")]}), 3, "col-c3"),
        mapped("extra", json!("string"), 5, "col-e5"),
        mapped("part", json!("string"), 6, "col-f6"),
    ]});
    let lines = [
        json!({"commitInfo": {"timestamp": 1_700_000_000_000i64, "operation": "CREATE TABLE"}}),
        json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping"], "writerFeatures": ["columnMapping"]}}),
        json!({"metaData": {
            "id": uuid::Uuid::new_v4().to_string(),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema.to_string(),
            "partitionColumns": ["part"],
            "configuration": {"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": "6"},
            "createdTime": 1_700_000_000_000i64,
        }}),
    ];
    std::fs::create_dir(dir.path().join("_delta_log")).unwrap();
    std::fs::write(
        dir.path().join("_delta_log/00000000000000000000.json"),
        lines.map(|l| l.to_string()).join("\n"),
    )
    .unwrap();
    dir
}

fn inner() -> Fields {
    Fields::from(vec![Field::new("x", DataType::Int64, true)])
}

fn schema(with_new: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("s", DataType::Struct(inner()), true),
        Field::new("part", DataType::Utf8, true),
    ];
    if with_new {
        fields.push(Field::new("brand_new", DataType::Utf8, true));
    }
    Arc::new(Schema::new(fields))
}

fn batch(ids: std::ops::Range<i64>, part: &str) -> RecordBatch {
    let n = ids.clone().count();
    RecordBatch::try_new(
        schema(false),
        vec![
            Arc::new(Int64Array::from_iter_values(ids.clone())),
            Arc::new(StringArray::from_iter_values(
                ids.clone().map(|i| format!("n{i}")),
            )),
            Arc::new(StructArray::new(
                inner(),
                vec![Arc::new(Int64Array::from_iter_values(ids.map(|i| i * 10)))],
                None,
            )),
            Arc::new(StringArray::from(vec![part; n])),
        ],
    )
    .unwrap()
}

async fn append(c: &DeltaCommitter, batch_id: u64, b: RecordBatch, part: &str) -> Vec<StagedFile> {
    let mut w = c
        .writer(batch_id, 1, Arc::new(|_: &str| Ok(())))
        .await
        .unwrap();
    w.write(&[Some(part.to_string())], b).await.unwrap();
    let files = w.finish().await.unwrap();
    c.commit(batch_id, &files).await.unwrap();
    files
}

/// The rows as the deltalake Python package reads them (logical names), sorted by id.
fn read_logical(dir: &Path) -> Vec<serde_json::Value> {
    // deltalake's DataFusion reader (QueryBuilder) applies column mapping; its pyarrow
    // reader refuses such tables.
    let script = "import sys, json\nfrom deltalake import DeltaTable, QueryBuilder\nrows = QueryBuilder().register('t', DeltaTable(sys.argv[1])).execute('SELECT * FROM t').read_all()\nrows = __import__('pyarrow').table(rows).to_pylist()\nprint(json.dumps(sorted(rows, key=lambda r: r['id'])))\n# deltalake may abort at interpreter exit, after the work is done\nimport os; sys.stdout.flush(); os._exit(0)";
    let o = std::process::Command::new("python3")
        .args(["-c", script, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

async fn appends_are_written_in_physical_columns(mode: &str) {
    let dir = table(mode);
    let c = DeltaCommitter::new("s", &uri(dir.path()), HashMap::new(), 64 << 20);
    c.prepare(schema(false), &["part".to_string()])
        .await
        .unwrap();
    let files = append(&c, 0, batch(0..3, "a"), "a").await;
    append(&c, 1, batch(3..5, "b"), "b").await;

    // The file: physical names at every level, field ids, no partition column.
    let path = dir.path().join(&files[0].path);
    let reader =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&path).unwrap())
            .unwrap();
    use parquet::file::reader::FileReader;
    let descr = reader.metadata().file_metadata().schema_descr_ptr();
    let root = descr.root_schema();
    let top: Vec<(String, i32)> = root
        .get_fields()
        .iter()
        .map(|f| (f.name().to_string(), f.get_basic_info().id()))
        .collect();
    assert_eq!(
        top,
        [
            ("col-a1".to_string(), 1),
            ("col-b2".to_string(), 2),
            ("col-c3".to_string(), 3),
            ("col-e5".to_string(), 5)
        ]
    );
    let nested = &root.get_fields()[2].get_fields()[0];
    assert_eq!((nested.name(), nested.get_basic_info().id()), ("col-d4", 4));

    // The log: partition values and statistics by physical name.
    let log =
        std::fs::read_to_string(dir.path().join("_delta_log/00000000000000000001.json")).unwrap();
    let add = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find_map(|a| a.get("add").cloned())
        .unwrap();
    assert_eq!(add["partitionValues"], json!({"col-f6": "a"}), "{add}");
    let stats: serde_json::Value = serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
    assert_eq!(stats["minValues"]["col-a1"], 0, "{stats}");
    assert_eq!(stats["maxValues"]["col-c3"]["col-d4"], 20, "{stats}");
    assert_eq!(stats["nullCount"]["col-e5"], 3, "{stats}");

    // Read back by logical names.
    let rows = read_logical(dir.path());
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert_eq!(
        rows[4],
        json!({"id": 4, "name": "n4", "s": {"x": 40}, "extra": null, "part": "b"})
    );

    // A column the table lacks: added by a commit of its own (physical name and id assigned
    // by the kernel), then the batch's files carry it.
    c.evolve(schema(true), &["part".to_string()]).await.unwrap();
    let grown = schema(true);
    let mut cols: Vec<Arc<dyn arrow::array::Array>> = batch(5..7, "a").columns().to_vec();
    cols.push(Arc::new(StringArray::from(vec!["new5", "new6"])));
    let b = RecordBatch::try_new(grown, cols).unwrap();
    append(&c, 2, b, "a").await;
    let alter =
        std::fs::read_to_string(dir.path().join("_delta_log/00000000000000000003.json")).unwrap();
    let meta: serde_json::Value = alter
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find_map(|a| a.get("metaData").cloned())
        .expect("the column is added by a metadata commit");
    assert!(!alter.contains("\"txn\""), "{alter}");
    assert_eq!(
        meta["configuration"]["delta.columnMapping.maxColumnId"], "7",
        "{meta}"
    );
    let rows = read_logical(dir.path());
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert_eq!(rows[6]["brand_new"], "new6", "{rows:?}");
    assert_eq!(rows[0]["brand_new"], serde_json::Value::Null, "{rows:?}");
    // Compaction: in physical columns. Partition `a` holds two small files, `b` one.
    let rows_before = read_logical(dir.path());
    let report = c
        .compact(&landfall_sink::delta::compact::CompactOptions::for_target(
            64 << 20,
        ))
        .await
        .unwrap();
    assert_eq!(
        (report.files_removed, report.files_added, report.rows),
        (2, 1, 5),
        "{report:?}"
    );
    assert_eq!(read_logical(dir.path()), rows_before);
    let last = std::fs::read_dir(dir.path().join("_delta_log"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .max()
        .unwrap();
    let optimize = std::fs::read_to_string(last).unwrap();
    assert!(optimize.contains(r#""col-f6":"a""#), "{optimize}");
}

#[tokio::test(flavor = "multi_thread")]
async fn name_mode_tables_get_physical_columns() {
    appends_are_written_in_physical_columns("name").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn id_mode_tables_get_physical_columns_and_field_ids() {
    appends_are_written_in_physical_columns("id").await;
}

/// Another writer drops a column while the stream runs: the batch's files, written in the old
/// mapping, are not committed (a retryable error); a committer prepared anew (what the worker's
/// restart does) writes the batch in the new mapping, adding the column back under a new
/// physical name, and every value lands where readers look.
#[tokio::test(flavor = "multi_thread")]
async fn a_mapping_changed_by_another_writer_makes_the_batch_be_written_again() {
    let dir = table("name");
    let c = DeltaCommitter::new("s", &uri(dir.path()), HashMap::new(), 64 << 20);
    c.prepare(schema(false), &["part".to_string()])
        .await
        .unwrap();
    append(&c, 0, batch(0..2, "a"), "a").await;
    let mut w = c.writer(1, 1, Arc::new(|_: &str| Ok(()))).await.unwrap();
    w.write(&[Some("a".to_string())], batch(2..4, "a"))
        .await
        .unwrap();
    let files = w.finish().await.unwrap();
    // ALTER TABLE DROP COLUMN name, by another writer.
    let v0 =
        std::fs::read_to_string(dir.path().join("_delta_log/00000000000000000000.json")).unwrap();
    let mut meta: serde_json::Value = v0
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|a| a.get("metaData").is_some())
        .unwrap();
    let mut schema_json: serde_json::Value =
        serde_json::from_str(meta["metaData"]["schemaString"].as_str().unwrap()).unwrap();
    schema_json["fields"]
        .as_array_mut()
        .unwrap()
        .retain(|f| f["name"] != "name");
    meta["metaData"]["schemaString"] = json!(schema_json.to_string());
    std::fs::write(
        dir.path().join("_delta_log/00000000000000000002.json"),
        [
            json!({"commitInfo": {"timestamp": 1_700_000_000_001i64, "operation": "DROP COLUMNS"}})
                .to_string(),
            meta.to_string(),
        ]
        .join("\n"),
    )
    .unwrap();
    let e = c.commit(1, &files).await.unwrap_err();
    assert!(e.retryable, "{e}");
    assert!(e.message.contains("columns changed"), "{e}");
    assert!(
        !dir.path()
            .join("_delta_log/00000000000000000003.json")
            .exists()
    );

    // The restart: prepared anew (the stream's schema still has `name`: added back).
    let c = DeltaCommitter::new("s", &uri(dir.path()), HashMap::new(), 64 << 20);
    c.evolve(schema(false), &["part".to_string()])
        .await
        .unwrap();
    append(&c, 1, batch(2..4, "a"), "a").await;
    let rows = read_logical(dir.path());
    assert_eq!(rows.len(), 4, "{rows:?}");
    // Batch 0's `name` was dropped with its column; batch 1's is in the new one.
    assert_eq!(rows[0]["name"], serde_json::Value::Null, "{rows:?}");
    assert_eq!(rows[3]["name"], "n3", "{rows:?}");
}
