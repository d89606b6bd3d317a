//! CSV (each file read by its own header) and Parquet input, `include_existing_files = false`,
//! and a continuous daemon that finishes its batch and exits cleanly on SIGTERM.

mod common;
mod daemon;
use common::*;
use daemon::*;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn csv_by_header_then_parquet_input() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("csv")).unwrap();
    std::fs::write(
        root.join("csv/a.csv"),
        "id,name,amount\n1,alpha,1.5\n2,\"beta, quoted\",2.5\n",
    )
    .unwrap();
    // Another column order, an extra column and a missing one, no trailing newline.
    std::fs::write(root.join("csv/b.csv"), "extra,amount,id\nx,3.5,3\ny,4.5,4").unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.csv]
source = "{root}/csv"
format = "csv"
schema = "id BIGINT, name STRING, amount DOUBLE"
sink = { format = "parquet", path = "{root}/csv_out" }

[streams.from_parquet]
source = "{root}/csv_out"
format = "parquet"
path_glob_filter = "*.parquet"
sink.path = "{root}/delta"
"#,
    );
    drain_stream(&cfg, "csv");
    let v = verify("parquet", &root.join("csv_out"), Some("csv"));
    assert_exactly(&ids(&v, "id"), &[1, 2, 3, 4]);
    let two = row_by_id(&v, 2);
    assert_eq!(two["name"], "beta, quoted");
    let four = row_by_id(&v, 4);
    assert_eq!(
        (four["amount"].as_str(), four["name"].as_str()),
        (Some("4.5"), None)
    );

    // The Parquet files just written become the input of a Parquet stream (schema from the files).
    drain_stream(&cfg, "from_parquet");
    let v = verify("delta", &root.join("delta"), Some("from_parquet"));
    assert_exactly(&ids(&v, "id"), &[1, 2, 3, 4]);
}

#[test]
fn existing_files_can_be_skipped_at_first_start() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_rows(&root.join("landing"), "old.json", 0..5);
    std::thread::sleep(Duration::from_millis(50));
    let cfg = config_in(
        root,
        r#"
[streams.fresh]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING"
include_existing_files = false
sink.path = "{root}/table"
"#,
    );
    let out = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("this run:  0 file(s)"),
        "{}",
        text(&out)
    );
    std::thread::sleep(Duration::from_millis(50));
    write_rows(&root.join("landing"), "new.json", 10..13);
    drain(&cfg);
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("fresh")), "id"),
        &[10, 11, 12],
    );
}

/// `files` files of 10 rows (`f000.json` holds ids 0..10, and so on) in `root/landing`, and a
/// continuous stream `live` reading them into `root/table`, with `settings` added.
fn live_stream(root: &std::path::Path, files: u64, settings: &str) -> std::path::PathBuf {
    for f in 0..files {
        write_rows(
            &root.join("landing"),
            &format!("f{f:03}.json"),
            f * 10..f * 10 + 10,
        );
    }
    config_in(
        root,
        &format!(
            "\n[streams.live]\nsource = \"{{root}}/landing\"\nformat = \"json\"\nschema = \"id BIGINT, name STRING\"\n{settings}\npoll_interval = \"100ms\"\nsink.path = \"{{root}}/table\"\n"
        ),
    )
}

#[test]
fn continuous_run_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = live_stream(root, 30, "max_files_per_trigger = 5");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = Daemon::start_with(bin(), &cfg, &root.join("daemon.log"), deadline, &[], &[]);
    // Wait until everything present is committed, then add more and wait again.
    while delta_version(&root.join("table")) < 6 {
        assert!(
            Instant::now() < deadline,
            "the daemon did not ingest the files in time"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    write_rows(&root.join("landing"), "late.json", 1000..1005);
    while delta_version(&root.join("table")) < 7 {
        assert!(
            Instant::now() < deadline,
            "the daemon did not pick up a new file"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = Instant::now();
    d.process.terminate();
    let (status, logs) = d.stop(Duration::from_secs(60));
    assert!(
        status.success(),
        "SIGTERM must end the run with exit 0:\n{logs}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "shutdown took {:?}",
        t.elapsed()
    );
    assert!(logs.contains("shutdown requested"));
    let mut expected: Vec<u64> = (0..300).collect();
    expected.extend(1000..1005);
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("live")), "id"),
        &expected,
    );
}

/// `run --available-now` on a terminal (a pseudo-terminal from `script`) draws a progress bar
/// per stream that ends at all files; piped, it prints plain log lines; `--log-format json`
/// prints one JSON object per line.
#[test]
fn progress_bars_on_a_terminal_and_json_logs_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for f in 0..4u64 {
        write_rows(
            &root.join("landing"),
            &format!("f{f}.json"),
            f * 10..f * 10 + 2,
        );
    }
    let cfg = config_in(
        root,
        r#"
[streams.ev]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING"
max_files_per_trigger = 2
sink.path = "{root}/table"
"#,
    );
    let run = format!(
        "{} run --config {} --available-now",
        bin(),
        cfg.to_str().unwrap()
    );
    let o = Command::new("script")
        .args(["-qec", &run, "/dev/null"])
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .output()
        .expect("`script` (util-linux) runs");
    let tty = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{tty}");
    assert!(tty.contains("4/4 files"), "no finished bar:\n{tty}");
    // Not a terminal: no bar.
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert!(o.status.success());
    assert!(!text(&o).contains("files  "), "{}", text(&o));
    // JSON logs: every stderr line is a JSON object.
    std::fs::remove_dir_all(root.join("state")).unwrap();
    std::fs::remove_dir_all(root.join("table")).unwrap();
    let o = landfall(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--available-now",
        "--log-format",
        "json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.lines().count() > 2, "{stderr}");
    for line in stderr.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{line}");
    }
}

/// SIGTERM while a backlog is pending: the run ends at a safe point (exit 0, quickly), the
/// table holds whole files only, and the next run ingests the rest exactly once.
#[test]
fn sigterm_with_a_backlog_pending_stops_at_a_safe_point_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = live_stream(
        root,
        40,
        "max_files_per_trigger = 1\ntrigger.processing_time = \"200ms\"",
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = Daemon::start_with(bin(), &cfg, &root.join("daemon.log"), deadline, &[], &[]);
    while delta_version(&root.join("table")) < 2 {
        assert!(Instant::now() < deadline, "no batch in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    d.process.terminate();
    let (status, logs) = d.stop(Duration::from_secs(60));
    assert!(
        status.success(),
        "SIGTERM must end the run with exit 0:\n{logs}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "shutdown took {:?}",
        t.elapsed()
    );
    assert!(logs.contains("shutdown requested"), "{logs}");
    let got = ids(&verify("delta", &root.join("table"), Some("live")), "id");
    let files = got.len() / 10;
    assert!(
        files < 40,
        "the backlog was still pending at SIGTERM ({files} files in)"
    );
    assert_exactly(&got, &(0..files as u64 * 10).collect::<Vec<_>>());
    drain(&cfg);
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("live")), "id"),
        &(0..400).collect::<Vec<_>>(),
    );
}
