//! Schema evolution modes end to end into Delta, checked by the independent reader: files 1-2
//! are ingested first, then files 3-5 arrive in one batch, where file 3 brings a new column
//! and file 4 a value that does not fit its column. Each mode's schema versions, table schema,
//! rows, rescued values and stream status are asserted.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;

/// Files 1-2: the columns every file has.
/// The `name` column of every row, sorted: a lost or doubled row shows, unlike a count.
fn names(rows: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = rows
        .iter()
        .map(|r| r["name"].as_str().unwrap_or("<null>").to_string())
        .collect();
    n.sort();
    n
}

fn first_files(src: &Path) {
    put_file(
        src,
        "f1.json",
        "{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\"name\":\"b\"}\n",
    );
    put_file(src, "f2.json", "{\"id\":3,\"name\":\"c\"}\n");
}

/// Files 3-5: file 3 adds `extra` (and a key differing from `name` only in case), file 4
/// has an id that is no BIGINT.
fn later_files(src: &Path) {
    put_file(
        src,
        "f3.json",
        "{\"id\":4,\"name\":\"d\",\"extra\":10,\"NAME\":\"shout\"}\n",
    );
    put_file(
        src,
        "f4.json",
        "{\"id\":\"five\",\"name\":\"e\",\"extra\":11}\n",
    );
    put_file(src, "f5.json", "{\"id\":6,\"name\":\"f\"}\n");
}

fn rows(v: &Value) -> Vec<Value> {
    let mut rows = v["data"].as_array().unwrap().clone();
    rows.sort_by_key(|r| r["name"].as_str().unwrap_or("").to_string());
    rows
}

fn rescued(row: &Value) -> Option<Value> {
    row["_rescued_data"]
        .as_str()
        .map(|s| serde_json::from_str(s).unwrap())
}

#[test]
fn add_new_columns_grows_the_table_in_the_batch_commit_and_reads_the_batch_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    first_files(&src);
    let cfg = Config::in_dir(root)
        .stream(
            Stream::local(
                "evo",
                root.join("src").as_path(),
                "json",
                root.join("evo_table").as_path(),
            )
            .set("infer_column_types", true),
        )
        .write();
    drain_stream(&cfg, "evo");
    later_files(&src);
    drain_stream(&cfg, "evo");

    let history = schema_history(&cfg, "evo");
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[0]["version"], 0);
    assert_eq!(
        history[0]["schema"],
        "id BIGINT, name STRING, _rescued_data STRING"
    );
    assert_eq!(history[1]["version"], 1);
    assert_eq!(history[1]["reason"], "new columns: extra");
    assert!(
        history[1]["file"].as_str().unwrap().ends_with("f3.json"),
        "{history:?}"
    );
    assert_eq!(
        history[1]["schema"],
        "id BIGINT, name STRING, _rescued_data STRING, extra BIGINT"
    );

    let v = verify("delta", &root.join("evo_table"), Some("evo"));
    assert_eq!(v["schema"]["extra"], "long", "{}", v["schema"]);
    let r = rows(&v);
    assert_eq!(
        names(&r),
        ["a", "b", "c", "d", "e", "f"],
        "no row lost or doubled by reading the batch again"
    );
    let by_name = |n: &str| r.iter().find(|x| x["name"] == n).unwrap().clone();
    assert!(by_name("a")["extra"].is_null());
    assert_eq!(by_name("d")["extra"], "10");
    assert_eq!(by_name("e")["extra"], "11");
    assert!(by_name("f")["extra"].is_null());
    // NAME differs from name only in case: rescued, not a new column.
    let d = rescued(&by_name("d")).unwrap();
    assert_eq!(d["NAME"], "shout");
    assert!(d["_file_path"].as_str().unwrap().ends_with("f3.json"));
    // "five" is no BIGINT: rescued, the column null.
    let e = by_name("e");
    assert!(e["id"].is_null());
    assert_eq!(rescued(&e).unwrap()["id"], "five");
    assert!(rescued(&by_name("a")).is_none());

    // The batch of files 3-5 is one commit carrying the new schema with its adds and txn.
    let log = commits(&root.join("evo_table"));
    let grown: Vec<&Vec<Value>> = log[1..]
        .iter()
        .filter(|c| c.iter().any(|a| a.get("metaData").is_some()))
        .collect();
    assert_eq!(grown.len(), 1, "one commit changes the schema");
    let c = grown[0];
    assert!(c.iter().any(|a| a.get("add").is_some()));
    assert!(c.iter().any(|a| a.get("txn").is_some()));
    let meta = c.iter().find_map(|a| a.get("metaData")).unwrap();
    let schema: Value = serde_json::from_str(meta["schemaString"].as_str().unwrap()).unwrap();
    let names: Vec<&str> = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["id", "name", "_rescued_data", "extra"]);
    // The first table id and creation time are kept.
    let first = log[0].iter().find_map(|a| a.get("metaData")).unwrap();
    assert_eq!(meta["id"], first["id"]);

    // A restart reuses version 1 and re-infers nothing.
    drain_stream(&cfg, "evo");
    assert_eq!(schema_history(&cfg, "evo").len(), 2);
    let o = landfall(&["streams", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn rescue_keeps_the_schema_and_fail_on_new_columns_stops_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    first_files(&src);
    let cfg = Config::in_dir(root)
        .stream(
            Stream::local(
                "resc",
                root.join("src").as_path(),
                "json",
                root.join("resc_table").as_path(),
            )
            .set("infer_column_types", true)
            .set("schema_evolution_mode", "rescue"),
        )
        .stream(
            Stream::local(
                "strict",
                root.join("src").as_path(),
                "json",
                root.join("strict_table").as_path(),
            )
            .set("infer_column_types", true)
            .set("schema_evolution_mode", "fail_on_new_columns"),
        )
        .stream(
            Stream::local(
                "fixed",
                root.join("src").as_path(),
                "json",
                root.join("fixed_table").as_path(),
            )
            .set("schema", "id BIGINT, name STRING"),
        )
        .write();
    for s in ["resc", "strict", "fixed"] {
        drain_stream(&cfg, s);
    }
    later_files(&src);
    drain_stream(&cfg, "resc");
    drain_stream(&cfg, "fixed");

    // rescue: one schema version; the new column's values are in the rescued column.
    assert_eq!(schema_history(&cfg, "resc").len(), 1);
    let v = verify("delta", &root.join("resc_table"), Some("resc"));
    assert!(v["schema"].get("extra").is_none(), "{}", v["schema"]);
    let r = rows(&v);
    assert_eq!(names(&r), ["a", "b", "c", "d", "e", "f"]);
    let d = rescued(r.iter().find(|x| x["name"] == "d").unwrap()).unwrap();
    assert_eq!(d["extra"], 10);
    assert_eq!(d["NAME"], "shout");
    let e = rescued(r.iter().find(|x| x["name"] == "e").unwrap()).unwrap();
    assert_eq!(e["extra"], 11);
    assert_eq!(e["id"], "five");

    // none with an explicit schema: no rescued column, the new column ignored, the misfit
    // value null and its row counted malformed.
    let v = verify("delta", &root.join("fixed_table"), Some("fixed"));
    assert!(v["schema"].get("_rescued_data").is_none());
    assert!(v["schema"].get("extra").is_none());
    assert_eq!(names(&rows(&v)), ["a", "b", "c", "d", "e", "f"]);

    // fail_on_new_columns: the run fails naming the column and the file; nothing of the
    // batch lands; the schema is unchanged.
    let before = delta_version(&root.join("strict_table"));
    let o = landfall(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--available-now",
        "--stream",
        "strict",
    ]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("has columns the schema lacks: extra") && out.contains("f3.json"),
        "{out}"
    );
    assert_eq!(delta_version(&root.join("strict_table")), before);
    assert_eq!(schema_history(&cfg, "strict").len(), 1);
    let o = landfall(&["streams", "--config", cfg.to_str().unwrap()]);
    assert!(
        text(&o).contains("fail_on_new_columns"),
        "the status says why: {}",
        text(&o)
    );
}

#[test]
fn schema_hints_fix_named_columns_and_rescue_what_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    put_file(
        &src,
        "a.json",
        concat!(
            "{\"id\":\"1\",\"user\":{\"age\":\"30\",\"nick\":\"x\"},\"score\":1.5}\n",
            "{\"id\":\"2\",\"user\":{\"age\":\"old\"},\"score\":2}\n",
        ),
    );
    let cfg = Config::in_dir(root)
        .stream(
            Stream::local(
                "hinted",
                root.join("src").as_path(),
                "json",
                root.join("hinted_table").as_path(),
            )
            .set("schema_hints", "id INT, user.age INT, added DATE"),
        )
        .write();
    drain_stream(&cfg, "hinted");
    let history = schema_history(&cfg, "hinted");
    assert_eq!(
        history[0]["schema"],
        "id INT, score STRING, user STRUCT<age: INT, nick: STRING>, added DATE, _rescued_data STRING"
    );
    let v = verify("delta", &root.join("hinted_table"), Some("hinted"));
    let mut r = v["data"].as_array().unwrap().clone();
    r.sort_by_key(|x| x["id"].as_str().unwrap().to_string());
    assert_eq!(r[0]["id"], "1");
    assert!(r[0]["_rescued_data"].is_null(), "{}", r[0]);
    // "old" does not fit the INT hint: rescued under its path, never a silent null.
    let rescued = rescued(&r[1]).unwrap();
    assert_eq!(rescued["user.age"], "old");
}

#[test]
fn new_columns_a_delta_table_cannot_hold_stay_rescued_and_the_stream_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    put_file(&src, "a.json", "{\"id\":\"1\"}\n");
    let cfg = Config::in_dir(root)
        .stream(Stream::local(
            "odd",
            root.join("src").as_path(),
            "json",
            root.join("odd_table").as_path(),
        ))
        .write();
    drain_stream(&cfg, "odd");
    put_file(
        &src,
        "b.json",
        "{\"id\":\"2\",\"bad name\":1,\"empty\":{\"y\":{}},\"fine\":true}\n",
    );
    let o = drain_stream(&cfg, "odd");
    assert!(
        text(&o).contains("cannot be added to the table"),
        "the refusal is logged: {}",
        text(&o)
    );
    let history = schema_history(&cfg, "odd");
    assert_eq!(history.len(), 2);
    assert_eq!(history[1]["reason"], "new columns: fine");
    let v = verify("delta", &root.join("odd_table"), Some("odd"));
    let row = row_by_id(&v, 2);
    assert_eq!(row["fine"], "true");
    let r = rescued(row).unwrap();
    assert_eq!(r["bad name"], 1);
    assert_eq!(r["empty"], serde_json::json!({"y": {}}));
}

/// CSV with typed inference: a column that appears in a later file joins the table with the
/// type inference gives its values (DOUBLE, DATE, TIMESTAMP), not as a string.
#[test]
fn new_csv_columns_join_the_table_typed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    put_file(&src, "a.csv", "id,name\n1,a\n");
    let cfg = Config::in_dir(root)
        .stream(
            Stream::local(
                "c",
                root.join("src").as_path(),
                "csv",
                root.join("table").as_path(),
            )
            .set("infer_column_types", true),
        )
        .write();
    drain_stream(&cfg, "c");
    put_file(
        &src,
        "b.csv",
        "id,name,score,day,at\n2,b,1.5,2026-12-01,2026-12-01T10:00:00\n3,c,,,\n",
    );
    drain_stream(&cfg, "c");
    let v = verify("delta", &root.join("table"), Some("c"));
    let schema = &v["schema"];
    assert_eq!(schema["score"], "double", "{schema}");
    assert_eq!(schema["day"], "date", "{schema}");
    assert_eq!(
        schema["at"], "timestamp",
        "a zone-less new column joins as TIMESTAMP (UTC): {schema}"
    );
    let rows = rows(&v);
    assert_eq!(rows[1]["score"], "1.5", "{rows:?}");
    assert_eq!(rows[1]["day"], "2026-12-01", "{rows:?}");
    assert_eq!(rows[1]["at"], "2026-12-01T10:00:00", "{rows:?}");
    assert!(rows[2]["score"].is_null() && rows[0]["score"].is_null());
    assert!(
        rows.iter().all(|r| r["_rescued_data"].is_null()),
        "{rows:?}"
    );
}
