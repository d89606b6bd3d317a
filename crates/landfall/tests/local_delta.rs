//! Local directory -> Delta table, checked by the independent reader: the first ingest, an
//! idempotent re-run, new files only, overwrites ignored unless `allow_overwrites`, Hive
//! partitions, and what `landfall state` / `landfall streams` report.

mod common;
use common::*;

fn config(root: &std::path::Path, extra: &str) -> std::path::PathBuf {
    config_in(
        root,
        &r#"
[streams.events]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
max_files_per_trigger = 3
{extra}

[streams.events.sink]
path = "{root}/table"
"#
        .replace("{extra}", extra),
    )
}

/// Paths as users name them: a source directory (with a backslash), its files and a table
/// whose names hold spaces, quotes and accents (each a valid local name), written into the
/// configuration as TOML strings by the typed builder. Every file is ingested once, and a
/// re-run commits nothing.
#[test]
fn paths_with_quotes_spaces_backslashes_and_accents() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in \"quotes\" and é");
    let src = root.join("landing \\ zone ü");
    for f in 0..3u64 {
        write_rows(&src, &format!("f \"{f}\" é.json"), f * 10..f * 10 + 10);
    }
    let table = root.join("table \"t\" ß");
    let cfg = Config::in_dir(&root)
        .stream(Stream::local("events", &src, "json", &table).set(
            "schema",
            "id BIGINT, name STRING, amount DOUBLE, tag STRING",
        ))
        .write();
    let out = drain(&cfg);
    assert!(
        text(&out).contains("this run:  3 file(s), 30 row(s)"),
        "{}",
        text(&out)
    );
    let v = verify("delta", &table, Some("events"));
    assert_exactly(&ids(&v, "id"), &(0..30).collect::<Vec<_>>());
    let out = drain(&cfg);
    assert!(
        text(&out).contains("this run:  0 file(s), 0 row(s)"),
        "{}",
        text(&out)
    );
    let rows = state_rows(&cfg, "events");
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["state"] == "committed" && r["path"].as_str().unwrap().contains("é.json")),
        "{rows:?}"
    );
    // A Delta table under a directory holding a backslash: delta-rs reads `\` as a path
    // separator when it lists the log (the table is written, then not found), so the
    // configuration is refused before anything is written.
    let table = root.join("table \\ t");
    let bad = Config::in_dir(&root)
        .stream(Stream::local("events", &src, "json", &table).set("schema", "id BIGINT"))
        .write();
    let o = landfall(&["check", "--config", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("streams.events.sink.path") && text(&o).contains("path separator"),
        "{}",
        text(&o)
    );
    let o = landfall(&["run", "--config", bad.to_str().unwrap(), "--available-now"]);
    assert!(
        !o.status.success() && text(&o).contains("path separator"),
        "{}",
        text(&o)
    );
    assert!(!table.exists(), "run wrote nothing");
}

#[test]
fn ingests_once_then_only_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for f in 0..7u64 {
        write_rows(
            &root.join("landing"),
            &format!("f{f:03}.json"),
            f * 10..f * 10 + 10,
        );
    }
    // A hidden file and a temp marker are not data.
    std::fs::write(root.join("landing/_SUCCESS"), "").unwrap();
    let cfg = config(root, "");
    let out = drain(&cfg);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("this run:  7 file(s), 70 row(s)"),
        "{summary}"
    );
    let table = root.join("table");
    let v = verify("delta", &table, Some("events"));
    assert_exactly(&ids(&v, "id"), &(0..70).collect::<Vec<_>>());
    // 7 files in batches of at most 3: 3 commits after the create.
    assert_eq!(delta_version(&table), 3);
    let row7 = row_by_id(&v, 7);
    assert_eq!(row7["name"], "n7");
    assert_eq!(row7["amount"], "7.5");

    // Unchanged landing area: nothing new is committed.
    let out = drain(&cfg);
    assert!(String::from_utf8_lossy(&out.stdout).contains("this run:  0 file(s), 0 row(s)"));
    assert_eq!(delta_version(&table), 3);

    // New files: only those.
    write_rows(&root.join("landing"), "g000.json", 100..105);
    write_rows(&root.join("landing"), "sub/g001.json", 105..110);
    let out = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("this run:  2 file(s), 10 row(s)"),
        "{}",
        text(&out)
    );
    let mut expected: Vec<u64> = (0..70).collect();
    expected.extend(100..110);
    assert_exactly(
        &ids(&verify("delta", &table, Some("events")), "id"),
        &expected,
    );

    // Overwritten in place: ignored without allow_overwrites.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_rows(&root.join("landing"), "f000.json", 500..503);
    drain(&cfg);
    assert_exactly(
        &ids(&verify("delta", &table, Some("events")), "id"),
        &expected,
    );

    // The state lists every file with its lifecycle.
    let o = landfall(&[
        "state",
        "events",
        "--config",
        cfg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 9);
    assert!(rows.iter().all(|r| r["ingestion_state"] == "INGESTED"
        && r["commit_time"].is_string()
        && r["batch_id"].is_u64()));
    let o = landfall(&[
        "state",
        "events",
        "--config",
        cfg.to_str().unwrap(),
        "--state",
        "discovered",
        "--format",
        "csv",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).lines().count(),
        1,
        "only the header: nothing pending"
    );
    let o = landfall(&[
        "state",
        "events",
        "--config",
        cfg.to_str().unwrap(),
        "--state",
        "bogus",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--state `bogus` is not a state"));
    let o = landfall(&["streams", "--config", cfg.to_str().unwrap()]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("events") && s.contains("committed"), "{s}");
}

#[test]
fn overwrites_are_ingested_again_with_allow_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_rows(&root.join("landing"), "a.json", 0..5);
    let cfg = config(root, "allow_overwrites = true");
    drain(&cfg);
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_rows(&root.join("landing"), "a.json", 10..13);
    drain(&cfg);
    let mut expected: Vec<u64> = (0..5).collect();
    expected.extend(10..13);
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("events")), "id"),
        &expected,
    );
}

#[test]
fn hive_partitions_and_inferred_string_schema() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_rows(&root.join("landing/date=2026-01-01"), "a.json", 0..4);
    write_rows(&root.join("landing/date=2026-01-02"), "b.json", 4..10);
    let cfg = config_in(
        root,
        r#"
[streams.inferred]
source = "{root}/landing"
format = "json"

[streams.inferred.sink]
path = "{root}/table"
partition_by = ["date"]
"#,
    );
    drain(&cfg);
    let v = verify("delta", &root.join("table"), Some("inferred"));
    assert_exactly(&ids(&v, "id"), &(0..10).collect::<Vec<_>>());
    let r = row_by_id(&v, 5);
    assert_eq!(r["date"], "2026-01-02", "partition value from the path");
    assert_eq!(
        r["amount"], "5.5",
        "strings by default (infer_column_types = false)"
    );
    assert!(
        root.join("table/date=2026-01-02").is_dir(),
        "the table is partitioned on disk"
    );
}
