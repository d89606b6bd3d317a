//! Parser modes and bad records end to end: `drop_malformed` leaves malformed records out of
//! the table, `bad_records_path` writes each one (file, line, offset, reason, text) before the
//! batch commits, and a batch read again writes the same file, never a second one.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;

fn bad_lines(dir: &Path, stream: &str) -> Vec<Value> {
    let d = dir.join(stream);
    let mut files: Vec<_> = std::fs::read_dir(&d)
        .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn drop_malformed_keeps_good_rows_and_bad_records_name_every_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let json = root.join("json");
    put_file(
        &json,
        "a.json",
        "{\"id\":1}\n{\"id\":\"two\"}\nnot json at all\n{\"id\":4}\n{\"id\":5",
    );
    let csv = root.join("csv");
    put_file(&csv, "a.csv", "id,name\n1,a\n2,b,extra\n3\n4,d\n");
    let cfg = config_in(
        root,
        r#"
[streams.j]
source = "{root}/json"
format = "json"
schema = "id BIGINT"
mode = "drop_malformed"
bad_records_path = "{root}/bad"
sink.path = "{root}/j_table"

[streams.c]
source = "{root}/csv"
format = "csv"
schema = "id BIGINT, name STRING"
bad_records_path = "{root}/bad"
sink.path = "{root}/c_table"
"#,
    );
    drain_stream(&cfg, "j");
    drain_stream(&cfg, "c");

    let v = verify("delta", &root.join("j_table"), Some("j"));
    assert_eq!(ids(&v, "id"), [1, 4], "malformed records are left out");
    let bad = bad_lines(&root.join("bad"), "j");
    let lines: Vec<u64> = bad.iter().map(|b| b["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, [2, 3, 5], "{bad:?}");
    assert_eq!(bad[0]["record"], "{\"id\":\"two\"}");
    assert!(bad[0]["reason"].as_str().unwrap().contains("does not fit"));
    assert_eq!(bad[1]["record"], "not json at all");
    assert!(
        bad[2]["reason"]
            .as_str()
            .unwrap()
            .contains("ends inside a record")
    );
    assert!(bad[0]["path"].as_str().unwrap().ends_with("a.json"));
    assert_eq!(bad[0]["batch_id"], 0);
    assert_eq!(bad[0]["stream"], "j");

    // permissive (the default): the rows stay, with nulls; the records are still written.
    let v = verify("delta", &root.join("c_table"), Some("c"));
    assert_eq!(ids(&v, "id"), [1, 2, 3, 4]);
    let bad = bad_lines(&root.join("bad"), "c");
    let lines: Vec<u64> = bad.iter().map(|b| b["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, [3, 4], "{bad:?}");
    assert!(
        bad[0]["reason"]
            .as_str()
            .unwrap()
            .contains("expected 2 fields, found 3")
    );
    assert!(
        bad[1]["reason"]
            .as_str()
            .unwrap()
            .contains("expected 2 fields, found 1"),
        "every record has its own reason: {bad:?}"
    );

    // A bad-records path inside the source is refused at validation.
    let cfg = config_in(
        root,
        r#"
[streams.loop]
source = "{root}/json"
format = "json"
bad_records_path = "{root}/json/bad"
sink.path = "{root}/loop_table"
"#,
    );
    let o = landfall(&["check", "--config", cfg.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("bad_records_path"), "{}", text(&o));
}
