//! What the commands print, read as a program reads it: `--format json` keeps types (numbers,
//! booleans, null for an absent value), `landfall state` streams its rows in key order, and a
//! reader that goes away (`| head`) ends a command quietly, as it ends `ls` or `git`: no panic,
//! no message, death by SIGPIPE. Local directories only: no emulator.

mod common;
use chrono::Utc;
use common::*;
use landfall_core::{FileMeta, StateStore};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

fn stream_config(root: &Path) -> std::path::PathBuf {
    config_in(
        root,
        r#"
[streams.s]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
sink.path = "{root}/table"

[streams.idle]
source = "{root}/elsewhere"
format = "json"
schema = "id BIGINT"
sink.path = "{root}/idle_table"
"#,
    )
}

/// The object path of `root/name` (a local file's: absolute, without the leading `/`).
fn object(root: &Path, name: &str) -> String {
    root.join(name)
        .display()
        .to_string()
        .trim_start_matches('/')
        .to_string()
}

/// Admit `paths` (object paths) to stream `s`'s ledger directly (the stream stopped), as discovery would.
fn admit(root: &Path, paths: impl Iterator<Item = String>) {
    let ledger = landfall_state::open_rocks("s", &root.join("state/s")).unwrap();
    let now = Utc::now();
    let files: Vec<_> = paths
        .map(|path| {
            let m = FileMeta {
                path,
                size: 42,
                modified: now,
                etag: None,
                version: None,
            };
            (m.key(false), m)
        })
        .collect();
    ledger.admit(&files, None, now).unwrap();
}

#[test]
fn json_output_keeps_numbers_booleans_and_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_rows(&root.join("landing"), "a.json", 0..3);
    write_rows(&root.join("landing"), "b.json", 3..5);
    let cfg = stream_config(root);
    drain_stream(&cfg, "s");
    // One more file, discovered and not yet in a batch: its batch columns are null.
    admit(root, std::iter::once(object(root, "landing/c.json")));

    let rows = state_rows(&cfg, "s");
    assert_eq!(rows.len(), 3, "{rows:?}");
    let paths: Vec<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert!(paths.is_sorted(), "key order: {paths:?}");
    let a = state_of(&rows, "a.json");
    assert_eq!(
        a["size"],
        std::fs::metadata(root.join("landing/a.json"))
            .unwrap()
            .len()
    );
    assert_eq!(a["batch_id"], 0, "{a}");
    assert_eq!(a["table_version"], 1, "{a}");
    assert_eq!(a["state"], "committed");
    assert_eq!(a["ingestion_state"], "INGESTED");
    for t in [
        "create_time",
        "discovery_time",
        "processed_time",
        "commit_time",
    ] {
        assert!(a[t].is_string(), "{t}: {a}");
    }
    for absent in ["archive_time", "archive_mode", "move_location", "reason"] {
        assert!(a[absent].is_null(), "{absent}: {a}");
    }
    let c = state_of(&rows, "c.json");
    assert_eq!(c["size"], 42);
    assert_eq!(c["state"], "discovered");
    for absent in [
        "batch_id",
        "table_version",
        "processed_time",
        "commit_time",
        "ingestion_state",
    ] {
        assert!(c[absent].is_null(), "{absent}: {c}");
    }
    // Every row has every column.
    for r in &rows {
        assert_eq!(r.as_object().unwrap().len(), 14, "{r}");
    }

    let streams = json_rows(&cfg, &["streams"]);
    let s = streams.iter().find(|s| s["stream"] == "s").unwrap();
    assert_eq!(s["pending_files"], 1, "{s}");
    assert_eq!(s["pending_bytes"], 42, "{s}");
    assert_eq!(s["committed_files"], 2, "{s}");
    assert_eq!(s["last_batch"], 0, "{s}");
    assert_eq!(s["last_batch_files"], 2, "{s}");
    assert_eq!(s["last_batch_state"], "committed", "{s}");
    assert_eq!(s["skipped_files"], 0, "{s}");
    assert_eq!(s["status"], "ok", "{s}");
    assert!(s["last_commit_time"].is_string(), "{s}");
    let requests = s["requests"].as_object().expect("requests by operation");
    assert!(requests["LIST"].as_u64() >= Some(1), "{s}");
    assert!(requests.values().all(Value::is_u64), "{s}");
    let idle = streams.iter().find(|s| s["stream"] == "idle").unwrap();
    assert_eq!(idle["status"], "never run", "{idle}");
    for absent in [
        "pending_files",
        "last_batch",
        "last_batch_state",
        "error_kind",
        "requests",
    ] {
        assert!(idle[absent].is_null(), "{absent}: {idle}");
    }

    let schema = schema_history(&cfg, "s");
    assert_eq!(schema[0]["version"], 0, "{schema:?}");
    assert!(schema[0]["file"].is_null() && schema[0]["created_at"].is_string());

    // CSV and tables show the same cells as text.
    let o = landfall(&[
        "streams",
        "--config",
        cfg.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    let csv = String::from_utf8_lossy(&o.stdout);
    let line = csv.lines().find(|l| l.starts_with("s,")).unwrap();
    assert!(line.contains(",1,42,2,0,2,committed,"), "{csv}");
    assert!(line.contains("LIST="), "{csv}");
}

/// `landfall <args>` with its output read by a reader that goes away after `lines` lines.
fn read_then_close(args: &[&str], lines: usize) -> std::process::Output {
    let mut child = Command::new(bin())
        .args(args)
        .env("LANDFALL_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut reader = BufReader::new(stdout);
    for _ in 0..lines {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "{args:?} ended early"
        );
    }
    drop(reader);
    child.wait_with_output().kept()
}

/// `landfall <args>` writing to a pipe whose reader is gone before it starts.
fn closed_from_the_start(args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(bin())
        .args(args)
        .env("LANDFALL_LOG", "warn")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .kept()
}

#[test]
fn a_closed_pipe_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("landing")).unwrap();
    let cfg = stream_config(root);
    // Far more than a pipe holds (64 KiB): the command is still writing when `head` goes.
    admit(
        root,
        (0..5_000).map(|i| object(root, &format!("landing/part-{i:05}.json"))),
    );
    let c = cfg.to_str().unwrap();
    let quiet = |o: &std::process::Output, what: &str| {
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe") && stderr.is_empty(),
            "{what}: {stderr}"
        );
        // Ended as `ls | head` ends ls: by SIGPIPE (status 141 in a shell), or, had it
        // finished first, with success.
        assert!(
            o.status.signal() == Some(libc::SIGPIPE) || o.status.success(),
            "{what}: {:?}",
            o.status
        );
    };
    for format in ["table", "json", "csv"] {
        let o = read_then_close(&["state", "s", "--config", c, "--format", format], 1);
        quiet(&o, format);
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGPIPE),
            "{format}: {:?}",
            o.status
        );
    }
    // Commands that print a few lines, to a reader gone before they write: `check` prints
    // with `println!` (the crate's own), the others through buffered writers.
    for args in [
        &["streams", "--config", c][..],
        &["streams", "--config", c, "--format", "json"],
        &["schema", "s", "--config", c],
        &["locations", "--config", c, "--format", "json"],
        &["check", "--config", c],
    ] {
        let o = closed_from_the_start(args);
        quiet(&o, &format!("{args:?}"));
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?}",
            o.status
        );
    }
}

/// The rows `landfall state` streams are all there, each once, in key order; `--state`
/// filters them.
#[test]
fn state_prints_every_tracked_file_once_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("landing")).unwrap();
    let cfg = stream_config(root);
    // Admitted in an order unlike their names'.
    let names: Vec<String> = (0..2_500u32)
        .map(|i| format!("landing/part-{:05}.json", i.reverse_bits() >> 20))
        .collect();
    admit(root, names.iter().map(|n| object(root, n)));
    let rows = state_rows(&cfg, "s");
    let got: Vec<String> = rows
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    let mut expected: Vec<String> = names
        .iter()
        .map(|n| root.join(n).display().to_string())
        .collect();
    expected.sort();
    expected.dedup();
    assert_eq!(got, expected);
    let o = landfall(&[
        "state",
        "s",
        "--config",
        cfg.to_str().unwrap(),
        "--state",
        "committed",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v, Value::Array(vec![]));
}

/// A command whose messages go to a standard error nobody reads (`2>&1 | head` gone) ends by
/// its own exit code, without a panic.
#[test]
fn a_closed_standard_error_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[streams.s]\nsource = 3\n").unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(bin())
        .args(["check", "--config", cfg.to_str().unwrap()])
        .env("LANDFALL_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(writer)
        .output()
        .kept();
    // An invalid configuration: exit code 2 or 1, never the 101 of a panic.
    assert!(
        matches!(o.status.code(), Some(1 | 2)),
        "{:?} {}",
        o.status,
        String::from_utf8_lossy(&o.stdout)
    );
}

/// The human log has one short line per batch (stream, batch, files, rows, duration,
/// version) and no colour codes off a terminal; the JSON log also carries each batch's full
/// progress record, for log shippers.
#[test]
fn batch_log_lines_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_rows(&root.join("in"), "a.json", 0..3);
    let stream = |table: &str| {
        Stream::local(
            "s",
            root.join("in").as_path(),
            "json",
            root.join(table).as_path(),
        )
        .set(
            "schema",
            "id BIGINT, name STRING, amount DOUBLE, tag STRING",
        )
    };
    let cfg = Config::in_dir(&root.join("text"))
        .stream(stream("t1"))
        .write();
    // NO_COLOR would hide colour codes by itself: the test is about the terminal check.
    let o = Command::new(bin())
        .args(["run", "--config", cfg.to_str().unwrap(), "--available-now"])
        .env_remove("NO_COLOR")
        .output()
        .kept();
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err
        .lines()
        .find(|l| l.contains("batch committed"))
        .unwrap_or_else(|| panic!("no batch line in:\n{err}"));
    for part in [
        "stream=s",
        "batch_id=0",
        "files=1",
        "rows=3",
        "took_ms=",
        "table_version=1",
    ] {
        assert!(line.contains(part), "`{part}` missing from: {line}");
    }
    assert!(!line.contains("progress"), "{line}");
    assert!(!err.contains("batch progress"), "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "colour codes off a terminal:\n{err}"
    );

    let cfg = Config::in_dir(&root.join("json"))
        .server("log_format", "json")
        .stream(stream("t2"))
        .write();
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let progress = lines
        .iter()
        .find(|v| v["target"] == "landfall_engine::progress")
        .unwrap_or_else(|| panic!("no progress record in:\n{err}"));
    assert_eq!(progress["fields"]["batch_id"], 0);
    let record: serde_json::Value =
        serde_json::from_str(progress["fields"]["progress"].as_str().unwrap()).unwrap();
    assert_eq!(record["batch_id"], 0);
    assert_eq!(record["num_input_rows"], 3, "{record}");
}
