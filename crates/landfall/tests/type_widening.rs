//! `schema_evolution_mode = "add_new_columns_with_type_widening"` end to end into Delta, checked
//! by the independent reader (DuckDB's replay of `_delta_log` over the Parquet files; the
//! `deltalake` package cannot read `typeWidening` tables): values that do not fit their column
//! widen it as Auto Loader widens (INT to BIGINT, INT to DOUBLE, DECIMAL to a wider DECIMAL, a
//! typed file's INT64 and TIMESTAMP_NTZ into INT and DATE columns); those no widening holds
//! (a fraction in a BIGINT column) stay rescued; the table's column changes type in a commit
//! of its own, with the feature and `delta.typeChanges`; a kill between that commit and the
//! batch's loses and doubles nothing.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The tables live under a name with a space and a non-ASCII letter, as production prefixes
/// may: the type change commit is written into that log like every other commit.
const TABLE: &str = "wide table é";

fn rows_by_name(v: &Value) -> Vec<Value> {
    let mut rows = v["data"].as_array().unwrap().clone();
    rows.sort_by_key(|r| r["name"].as_str().unwrap_or("").to_string());
    rows
}

/// The versions of the type change commits (`CHANGE COLUMN`) in a table's commits.
fn type_changes(log: &[Vec<Value>]) -> Vec<usize> {
    (0..log.len())
        .filter(|&v| {
            log[v]
                .iter()
                .any(|a| a["commitInfo"]["operation"] == "CHANGE COLUMN")
        })
        .collect()
}

/// The newest action of `kind` (`protocol`, `metaData`) in a table's commits.
fn last_action(log: &[Vec<Value>], kind: &str) -> Value {
    log.iter()
        .flatten()
        .rev()
        .find_map(|a| a.get(kind))
        .unwrap_or_else(|| panic!("no {kind} action"))
        .clone()
}

/// The schema field at `path` in a metaData action.
fn field(meta: &Value, path: &[&str]) -> Value {
    let schema: Value = serde_json::from_str(meta["schemaString"].as_str().unwrap()).unwrap();
    let mut fields = schema["fields"].clone();
    let mut found = Value::Null;
    for (i, p) in path.iter().enumerate() {
        found = fields
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == *p)
            .unwrap_or_else(|| panic!("no field {p} in {schema}"))
            .clone();
        if i + 1 < path.len() {
            fields = found["type"]["fields"].clone();
        }
    }
    found
}

fn json_stream(root: &Path, name: &str) -> Stream {
    Stream::local(
        name,
        root.join("src").as_path(),
        "json",
        root.join(TABLE).as_path(),
    )
    .set("infer_column_types", true)
    .set("schema_hints", "n INT, user.score INT, price DECIMAL(5,2)")
    .set(
        "schema_evolution_mode",
        "add_new_columns_with_type_widening",
    )
}

fn first_file(src: &Path) {
    put_file(
        src,
        "f1.json",
        "{\"id\":1,\"name\":\"a\",\"n\":5,\"user\":{\"score\":3},\"price\":1.25}\n",
    );
}

/// One batch: an INT past 2^31, a fraction in an INT struct member, a decimal past its
/// precision, a new column, and a fraction in a BIGINT column (no widening holds it).
fn later_files(src: &Path) {
    put_file(
        src,
        "f2.json",
        "{\"id\":2,\"name\":\"b\",\"n\":3000000000,\"user\":{\"score\":4}}\n",
    );
    put_file(
        src,
        "f3.json",
        "{\"id\":3,\"name\":\"c\",\"n\":7,\"user\":{\"score\":2.5},\"extra\":\"x\"}\n",
    );
    put_file(
        src,
        "f4.json",
        "{\"id\":4.5,\"name\":\"d\",\"price\":12345.678}\n",
    );
}

#[test]
fn values_wider_than_their_column_widen_it_and_the_table_changes_type() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    first_file(&src);
    let cfg = Config::in_dir(root)
        .stream(json_stream(root, "w").set("json.prefers_decimal", true))
        .write();
    drain_stream(&cfg, "w");
    later_files(&src);
    drain_stream(&cfg, "w");

    let history = schema_history(&cfg, "w");
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(
        history[0]["schema"],
        "id BIGINT, n INT, name STRING, price DECIMAL(5,2), user STRUCT<score: INT>, _rescued_data STRING"
    );
    assert_eq!(
        history[1]["schema"],
        "id DECIMAL(21,1), n BIGINT, name STRING, price DECIMAL(8,3), user STRUCT<score: DECIMAL(11,1)>, _rescued_data STRING, extra STRING"
    );
    // With json.prefers_decimal a fraction is a DECIMAL: BIGINT and INT columns widen to the
    // decimal holding both (20 and 10 integer digits, as Auto Loader merges them).
    assert_eq!(
        history[1]["reason"],
        "new columns: extra; widened: id BIGINT -> DECIMAL(21,1), n INT -> BIGINT, price DECIMAL(5,2) -> DECIMAL(8,3), user.score INT -> DECIMAL(11,1)",
        "{history:?}"
    );

    let v = verify("delta", &root.join(TABLE), Some("w"));
    assert_eq!(
        v["second_reader"], "none: deltalake cannot read typeWidening tables",
        "{v}"
    );
    assert_eq!(v["schema"]["n"], "long", "{}", v["schema"]);
    assert_eq!(v["schema"]["price"], "decimal(8,3)");
    let r = rows_by_name(&v);
    let names: Vec<&str> = r.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b", "c", "d"], "every row once");
    // The first file's INT values read back through the wider column.
    assert_eq!(r[0]["n"], "5");
    assert_eq!(r[0]["price"], "1.250");
    assert_eq!(r[1]["n"], "3000000000");
    assert!(r[1]["_rescued_data"].is_null(), "{}", r[1]);
    // user.score is a DECIMAL(11,1) now: 2.5 exactly, and the first file's INT 3 through it.
    assert_eq!(r[2]["user"], "{\"score\": \"2.5\"}", "{}", r[2]);
    assert_eq!(r[0]["user"], "{\"score\": \"3.0\"}", "{}", r[0]);
    assert_eq!(r[2]["extra"], "x");
    assert_eq!(r[3]["price"], "12345.678");
    assert_eq!(r[3]["id"], "4.5");
    assert!(r.iter().all(|x| x["_rescued_data"].is_null()), "{r:?}");

    // The type change is a commit of its own: protocol with the feature, metaData with the
    // widened fields and their typeChanges, no add, no txn; the batch's commit follows.
    let log = commits(&root.join(TABLE));
    let changes = type_changes(&log);
    assert_eq!(changes.len(), 1, "one type change commit: {log:?}");
    let at = changes[0];
    let change = &log[at];
    assert!(change[0].get("commitInfo").is_some(), "commitInfo first");
    assert!(
        !change
            .iter()
            .any(|a| a.get("add").is_some() || a.get("txn").is_some())
    );
    let protocol = change.iter().find_map(|a| a.get("protocol")).unwrap();
    for key in ["readerFeatures", "writerFeatures"] {
        assert!(
            protocol[key]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f == "typeWidening"),
            "{protocol}"
        );
    }
    let meta = change.iter().find_map(|a| a.get("metaData")).unwrap();
    assert_eq!(meta["configuration"]["delta.enableTypeWidening"], "true");
    let first = log[0].iter().find_map(|a| a.get("metaData")).unwrap();
    assert_eq!(meta["id"], first["id"], "the table's id is kept");
    let n = field(meta, &["n"]);
    assert_eq!(n["type"], "long");
    assert_eq!(
        n["metadata"]["delta.typeChanges"],
        serde_json::json!([{"fromType": "integer", "toType": "long"}])
    );
    let score = field(meta, &["user", "score"]);
    assert_eq!(score["type"], "decimal(11,1)");
    assert_eq!(
        score["metadata"]["delta.typeChanges"],
        serde_json::json!([{"fromType": "integer", "toType": "decimal(11,1)"}])
    );
    let batch = &log[at + 1];
    assert!(batch.iter().any(|a| a.get("txn").is_some()));
    assert!(batch.iter().any(|a| a.get("add").is_some()));
    // The new column came with the batch's commit, the widened types kept.
    let grown = batch.iter().find_map(|a| a.get("metaData")).unwrap();
    // The stream's own marks of what it widened stay out of the table.
    for m in [meta, grown] {
        assert!(
            !m["schemaString"].as_str().unwrap().contains("landfall."),
            "{m}"
        );
    }
    assert_eq!(field(grown, &["extra"])["type"], "string");
    assert_eq!(
        field(grown, &["n"])["metadata"]["delta.typeChanges"],
        n["metadata"]["delta.typeChanges"]
    );

    // More rows on the widened schema, and a restart: no further version, no change commit.
    put_file(
        &src,
        "f5.json",
        "{\"id\":5,\"name\":\"e\",\"n\":9000000000,\"user\":{\"score\":0.5}}\n",
    );
    drain_stream(&cfg, "w");
    assert_eq!(schema_history(&cfg, "w").len(), 2);
    let before = verify("delta", &root.join(TABLE), Some("w"));
    assert_eq!(before["rows"], 5);

    // Compaction reads the INT files and the wider ones together and writes the table's
    // types: the verifier holds the new file (added after the change) to them, and the
    // OPTIMIZE commit to exactly the rows it replaced.
    let o = landfall(&[
        "optimize",
        "w",
        "--config",
        cfg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let done: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(done["rows"], 5, "{done}");
    let after = verify("delta", &root.join(TABLE), Some("w"));
    assert_eq!(
        after["data"], before["data"],
        "the same rows after compaction"
    );
}

#[test]
fn a_kill_between_the_type_change_and_the_batch_commit_loses_and_doubles_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    first_file(&src);
    let cfg = Config::in_dir(root).stream(json_stream(root, "k")).write();
    drain_stream(&cfg, "k");
    later_files(&src);
    // The column is widened in the table; the batch that needs it is not committed.
    crash_at(&cfg, "after_type_change");
    let log = commits(&root.join(TABLE));
    assert!(
        log.last().unwrap()[0]["commitInfo"]["operation"] == "CHANGE COLUMN",
        "the last commit is the type change"
    );
    drain_stream(&cfg, "k");
    let v = verify("delta", &root.join(TABLE), Some("k"));
    let names: Vec<String> = rows_by_name(&v)
        .iter()
        .map(|x| x["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["a", "b", "c", "d"], "every row once after the kill");
    let changes = type_changes(&commits(&root.join(TABLE))).len();
    assert_eq!(changes, 1, "the restart does not widen again");
    // Without prefers_decimal a fraction is a DOUBLE: an INT member widens to it, a BIGINT
    // or a DECIMAL column does not (a double does not hold every long or decimal): rescued.
    assert_eq!(
        schema_history(&cfg, "k")[1]["schema"],
        "id BIGINT, n BIGINT, name STRING, price DECIMAL(5,2), user STRUCT<score: DOUBLE>, _rescued_data STRING, extra STRING"
    );
    assert_eq!(v["schema"]["price"], "decimal(5,2)");
    let r = rows_by_name(&v);
    assert_eq!(r[2]["user"], "{\"score\": 2.5}", "{}", r[2]);
    assert!(r[3]["id"].is_null() && r[3]["price"].is_null(), "{}", r[3]);
    let rescued: Value = serde_json::from_str(r[3]["_rescued_data"].as_str().unwrap()).unwrap();
    // Kept as the file wrote them (JSON numbers).
    assert_eq!(rescued["id"], serde_json::json!(4.5));
    assert_eq!(rescued["price"], serde_json::json!(12345.678));
}

/// Parquet files whose columns are typed wider than the stream's: an INT64 where the stream
/// has INT, a TIMESTAMP_NTZ where it has DATE (Parquet sources only, as Auto Loader).
#[test]
fn typed_files_widen_by_their_schema_including_date_to_timestamp_ntz() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let script = format!(
        "import pyarrow as pa, pyarrow.parquet as pq, datetime as dt\n\
pq.write_table(pa.table({{'name': ['a'], 'n': pa.array([1], pa.int32()), 'day': pa.array([dt.date(2026, 1, 2)], pa.date32())}}), {a:?})\n\
pq.write_table(pa.table({{'name': ['b'], 'n': pa.array([2**40], pa.int64()), 'day': pa.array([dt.datetime(2026, 3, 4, 5, 6, 7)], pa.timestamp('us'))}}), {b:?})\n",
        a = src.join("a.parquet").display().to_string(),
        b = src.join("b.parquet").display().to_string(),
    );
    let o = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // Only the first file at the start: the schema is inferred from it.
    let b = src.join("b.parquet");
    let held = root.join("b.parquet");
    std::fs::rename(&b, &held).unwrap();
    let cfg = Config::in_dir(root)
        .stream(
            Stream::local("p", src.as_path(), "parquet", root.join(TABLE).as_path())
                .set(
                    "schema_evolution_mode",
                    "add_new_columns_with_type_widening",
                )
                .set("rescued_data_column", ""),
        )
        .write();
    drain_stream(&cfg, "p");
    std::fs::rename(&held, &b).unwrap();
    drain_stream(&cfg, "p");
    let history = schema_history(&cfg, "p");
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(
        history[1]["reason"], "widened: n INT -> BIGINT, day DATE -> TIMESTAMP_NTZ",
        "{history:?}"
    );
    let v = verify("delta", &root.join(TABLE), Some("p"));
    assert_eq!(v["schema"]["n"], "long", "{}", v["schema"]);
    assert_eq!(v["schema"]["day"], "timestamp_ntz");
    let r = rows_by_name(&v);
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(r[1]["n"], (1u64 << 40).to_string());
    // The DATE of the first file reads as midnight through the wider column.
    assert!(
        r[0]["day"].as_str().unwrap().starts_with("2026-01-02"),
        "{}",
        r[0]
    );
    assert!(
        r[1]["day"].as_str().unwrap().starts_with("2026-03-04"),
        "{}",
        r[1]
    );
    let log = commits(&root.join(TABLE));
    let protocol = last_action(&log, "protocol");
    for key in ["readerFeatures", "writerFeatures"] {
        let feats = protocol[key].as_array().unwrap();
        assert!(feats.iter().any(|f| f == "typeWidening"), "{protocol}");
        assert!(feats.iter().any(|f| f == "timestampNtz"), "{protocol}");
    }
}

#[test]
fn type_widening_needs_a_delta_sink() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = Config::in_dir(root)
        .stream(json_stream(root, "pq").set("sink.format", "parquet"))
        .write();
    let o = landfall(&["check", "--config", cfg.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("`add_new_columns_with_type_widening` needs a Delta sink"),
        "{}",
        text(&o)
    );
}

/// Append one hand-written commit to a local table's log.
fn put_commit(table: &Path, version: usize, actions: &[Value]) {
    let body: String = actions.iter().map(|a| format!("{a}\n")).collect();
    std::fs::write(table.join(format!("_delta_log/{version:020}.json")), body).unwrap();
}

/// A table that says `delta.enableTypeWidening = false` is never widened: the values that
/// need a wider column stay rescued, new columns are still added, the stream goes on.
#[test]
fn a_table_that_disables_type_widening_keeps_its_types_and_the_values_stay_rescued() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    let table = root.join(TABLE);
    first_file(&src);
    let cfg = Config::in_dir(root)
        .stream(json_stream(root, "off"))
        .write();
    drain_stream(&cfg, "off");
    // Another writer turns the property off.
    let log = commits(&table);
    let mut meta = last_action(&log, "metaData");
    meta["configuration"]["delta.enableTypeWidening"] = "false".into();
    put_commit(
        &table,
        log.len(),
        &[
            serde_json::json!({"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES"}}),
            serde_json::json!({"metaData": meta}),
        ],
    );
    later_files(&src);
    drain_stream(&cfg, "off");
    let history = schema_history(&cfg, "off");
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[1]["reason"], "new columns: extra", "{history:?}");
    let v = verify("delta", &table, Some("off"));
    assert_eq!(v["second_reader"], "deltalake", "no typeWidening feature");
    assert_eq!(v["schema"]["n"], "integer");
    let r = rows_by_name(&v);
    assert_eq!(r.len(), 4);
    assert!(r[1]["n"].is_null(), "{}", r[1]);
    let rescued: Value = serde_json::from_str(r[1]["_rescued_data"].as_str().unwrap()).unwrap();
    assert_eq!(rescued["n"], serde_json::json!(3000000000u64));
    assert!(type_changes(&commits(&table)).is_empty());
    // A batch whose only change would be a widening: read again on the same schema, no new
    // version, the value rescued.
    put_file(
        &src,
        "f5.json",
        "{\"id\":5,\"name\":\"e\",\"n\":4000000000}\n",
    );
    drain_stream(&cfg, "off");
    assert_eq!(schema_history(&cfg, "off").len(), 2);
    let v = verify("delta", &table, Some("off"));
    let r = rows_by_name(&v);
    assert_eq!(r.len(), 5);
    assert!(r[4]["n"].is_null(), "{}", r[4]);
    let rescued: Value = serde_json::from_str(r[4]["_rescued_data"].as_str().unwrap()).unwrap();
    assert_eq!(rescued["n"], serde_json::json!(4000000000u64));
}

/// On a table with in-commit timestamps the type change's commitInfo comes first with a
/// timestamp past the previous commit's, and the kernel's appends after it go on from it.
#[test]
fn in_commit_timestamps_stay_first_and_monotonic_through_the_type_change() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    let table = root.join(TABLE);
    std::fs::create_dir_all(table.join("_delta_log")).unwrap();
    let field = |name: &str, ty: Value| serde_json::json!({"name": name, "type": ty, "nullable": true, "metadata": {}});
    let schema = serde_json::json!({"type": "struct", "fields": [
        field("id", "long".into()), field("n", "integer".into()), field("name", "string".into()),
        field("price", "decimal(5,2)".into()),
        field("user", serde_json::json!({"type": "struct", "fields": [field("score", "integer".into())]})),
        field("_rescued_data", "string".into())]});
    // Far in the future: every later timestamp must still be past it.
    let ict0 = 4_102_444_800_000i64;
    put_commit(
        &table,
        0,
        &[
            serde_json::json!({"commitInfo": {"inCommitTimestamp": ict0, "timestamp": ict0, "operation": "CREATE TABLE"}}),
            serde_json::json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                "readerFeatures": [], "writerFeatures": ["inCommitTimestamp"]}}),
            serde_json::json!({"metaData": {"id": "00000000-0000-0000-0000-000000000001",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": schema.to_string(), "partitionColumns": [],
                "configuration": {"delta.enableInCommitTimestamps": "true"},
                "createdTime": ict0}}),
        ],
    );
    first_file(&src);
    let cfg = Config::in_dir(root)
        .stream(json_stream(root, "ict"))
        .write();
    drain_stream(&cfg, "ict");
    later_files(&src);
    drain_stream(&cfg, "ict");
    let log = commits(&table);
    let icts: Vec<i64> = log
        .iter()
        .map(|c| {
            c[0]["commitInfo"]["inCommitTimestamp"]
                .as_i64()
                .unwrap_or_else(|| panic!("commitInfo first, with its timestamp: {c:?}"))
        })
        .collect();
    assert!(icts.windows(2).all(|w| w[1] > w[0]), "monotonic: {icts:?}");
    let at = *type_changes(&log).first().expect("a type change commit");
    assert!(at + 1 < log.len(), "the batch commits after the change");
    let v = verify("delta", &table, Some("ict"));
    assert_eq!(v["rows"], 4);
    assert_eq!(v["schema"]["n"], "long");
}

/// Another writer widens a column the stream keeps narrower (Spark's `ALTER TABLE ... CHANGE
/// COLUMN n TYPE BIGINT`): in any evolution mode the stream goes on, its files written in the
/// table's wider type (the verifier checks every file added after the change holds it).
#[test]
fn a_table_widened_by_another_writer_takes_the_stream_rows_in_its_type() {
    for mode in [
        "add_new_columns",
        "add_new_columns_with_type_widening",
        "rescue",
    ] {
        widened_by_another_writer(mode);
    }
}

fn widened_by_another_writer(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    let table = root.join(TABLE);
    first_file(&src);
    let cfg = Config::in_dir(root)
        .stream(json_stream(root, "o").set("schema_evolution_mode", mode))
        .write();
    drain_stream(&cfg, "o");
    let log = commits(&table);
    let mut protocol = last_action(&log, "protocol");
    for key in ["readerFeatures", "writerFeatures"] {
        let mut feats = protocol[key].as_array().cloned().unwrap_or_default();
        feats.push("typeWidening".into());
        protocol[key] = feats.into();
    }
    let mut meta = last_action(&log, "metaData");
    let mut schema: Value = serde_json::from_str(meta["schemaString"].as_str().unwrap()).unwrap();
    for f in schema["fields"].as_array_mut().unwrap() {
        if f["name"] == "n" {
            f["type"] = "long".into();
            f["metadata"]["delta.typeChanges"] =
                serde_json::json!([{"fromType": "integer", "toType": "long"}]);
        }
    }
    meta["schemaString"] = schema.to_string().into();
    meta["configuration"]["delta.enableTypeWidening"] = "true".into();
    put_commit(
        &table,
        log.len(),
        &[
            serde_json::json!({"commitInfo": {"timestamp": 1, "operation": "CHANGE COLUMN"}}),
            serde_json::json!({"protocol": protocol}),
            serde_json::json!({"metaData": meta}),
        ],
    );
    put_file(
        &src,
        "f2.json",
        "{\"id\":2,\"name\":\"b\",\"n\":7,\"user\":{\"score\":4}}\n",
    );
    drain_stream(&cfg, "o");
    let v = verify("delta", &table, Some("o"));
    assert_eq!(v["schema"]["n"], "long", "{mode}");
    let r = rows_by_name(&v);
    assert_eq!(r.len(), 2, "{mode}: {r:?}");
    assert_eq!(r[0]["n"], "5");
    assert_eq!(r[1]["n"], "7", "{mode}");
    // The stream's own schema is unchanged: the table's type is the files' only.
    assert_eq!(schema_history(&cfg, "o").len(), 1);
}
