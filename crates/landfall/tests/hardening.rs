//! No file wedges a stream, and the table decides: files deleted, corrupted or changed between
//! listing and reading are skipped with their reason (or stop the stream with a way on), a
//! state restored from a backup is refused, toggling `allow_overwrites` re-ingests nothing.
//! Each test drives the real binary on local directories and checks the table independently.

mod common;
use common::*;
use std::path::Path;

fn config(root: &Path, extra: &str) -> std::path::PathBuf {
    config_in(
        root,
        &r#"
[streams.events]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
{extra}

[streams.events.sink]
path = "{root}/table"
"#
        .replace("{extra}", extra),
    )
}

fn land(root: &Path, name: &str, ids: std::ops::Range<u64>) {
    write_rows(&root.join("landing"), name, ids);
}

fn run_args(cfg: &Path) -> Vec<String> {
    vec![
        "run".into(),
        "--config".into(),
        cfg.to_str().unwrap().into(),
        "--available-now".into(),
    ]
}

fn run(cfg: &Path) -> std::process::Output {
    let args = run_args(cfg);
    landfall(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// a.json (0..5) and b.json (5..10) planned in one batch, the daemon killed after the plan,
/// then a.json deleted: the plan names a file that is gone.
fn planned_then_deleted(root: &Path, extra: &str) -> std::path::PathBuf {
    land(root, "a.json", 0..5);
    land(root, "b.json", 5..10);
    let cfg = config(root, extra);
    crash_at(&cfg, "after_plan");
    std::fs::remove_file(root.join("landing/a.json")).unwrap();
    cfg
}

/// `landfall streams --format json`.
fn streams_json(cfg: &Path) -> serde_json::Value {
    let o = landfall(&[
        "streams",
        "--config",
        cfg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn table_ids(root: &Path) -> Vec<u64> {
    ids(&verify("delta", &root.join("table"), Some("events")), "id")
}

/// The "write x.tmp, then rename" pattern without a glob: the plan names a file that is gone
/// when the batch reads it. Skipped as `missing` (ignore_missing_files defaults to true), the
/// rest of the batch commits.
#[test]
fn file_deleted_after_planning_is_skipped_as_missing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = planned_then_deleted(root, "");
    let out = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(" 1 file(s) skipped"),
        "{}",
        text(&out)
    );
    assert_exactly(&table_ids(root), &(5..10).collect::<Vec<_>>());
    let rows = state_rows(&cfg, "events");
    let a = state_of(&rows, "a.json");
    assert_eq!(a["state"], "skipped");
    assert_eq!(a["reason"], "missing: deleted or moved after it was listed");
    assert_eq!(state_of(&rows, "b.json")["state"], "committed");
    // Paths appear as the user wrote the source: absolute, with the leading slash.
    assert_eq!(
        a["path"].as_str().unwrap(),
        root.join("landing/a.json").to_str().unwrap()
    );
}

/// With `ignore_missing_files = false` the stream stops, names the file and says how to go on;
/// `landfall skip` lets the same batch commit without it.
#[test]
fn missing_file_stops_the_stream_until_skipped_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = planned_then_deleted(root, "ignore_missing_files = false");
    let out = run(&cfg);
    let shown = root.join("landing/a.json").display().to_string();
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains(&format!("landfall skip events {shown}")),
        "the error says how to go on: {all}"
    );
    // A fatal error is not retried: one attempt, no restart.
    assert!(!all.contains("restarting"), "{all}");
    let streams = streams_json(&cfg);
    let status = streams[0]["status"].as_str().unwrap();
    assert!(
        status.starts_with("stopped: ") && status.contains("landfall skip"),
        "{status}"
    );
    assert_eq!(delta_version(&root.join("table")), 0, "nothing committed");

    let o = landfall(&[
        "skip",
        "events",
        &shown,
        "--config",
        cfg.to_str().unwrap(),
        "--reason",
        "upload abandoned",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    drain(&cfg);
    assert_exactly(&table_ids(root), &(5..10).collect::<Vec<_>>());
    let rows = state_rows(&cfg, "events");
    assert_eq!(
        state_of(&rows, "a.json")["reason"],
        "manual: upload abandoned"
    );
    let streams = streams_json(&cfg);
    assert_eq!(streams[0]["status"], "ok");
    assert_eq!(streams[0]["skipped_files"], 1);
}

/// A corrupt file in continuous mode stops its stream instead of retrying forever, and with
/// `ignore_corrupt_files` it is skipped with the decoder's reason.
#[test]
fn corrupt_file_stops_continuous_stream_or_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let landing = root.join("landing");
    write_parquet_rows(&landing, "a.parquet", 0..5);
    write_corrupt_parquet(&landing, "b.parquet");
    write_parquet_rows(&landing, "c.parquet", 10..15);
    let parquet_config = |extra: &str| {
        config_in(
            root,
            &r#"
[streams.events]
source = "{root}/landing"
format = "parquet"
schema = "id BIGINT, name STRING"
poll_interval = "100ms"
{extra}
sink.path = "{root}/table"
"#
            .replace("{extra}", extra),
        )
    };
    let cfg = parquet_config("");
    // Continuous mode (no --available-now): the process ends because its only stream stopped.
    let mut child = std::process::Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .args(["run", "--config", cfg.to_str().unwrap()])
        .env("LANDFALL_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().kept();
            panic!("a fatal error was retried for a minute:\n{}", text(&o));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let o = child.wait_with_output().kept();
    assert!(!status.success(), "{}", text(&o));
    let all = text(&o);
    assert!(
        all.contains("b.parquet")
            && all.contains("ignore_corrupt_files")
            && !all.contains("restarting"),
        "{all}"
    );

    let cfg = parquet_config("ignore_corrupt_files = true");
    drain(&cfg);
    let mut expected: Vec<u64> = (0..5).collect();
    expected.extend(10..15);
    assert_exactly(&table_ids(root), &expected);
    let b = state_of(&state_rows(&cfg, "events"), "b.parquet").clone();
    assert_eq!(b["state"], "skipped");
    assert!(
        b["reason"].as_str().unwrap().starts_with("corrupt: "),
        "{b}"
    );
}

/// A file rewritten between listing and reading is never committed half-read or with the
/// listed identity: the listed version is skipped as `changed_after_listing` and the content
/// now there is ingested, once.
#[test]
fn file_changed_after_listing_is_read_as_it_is_now_never_mixed() {
    for overwrites in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        land(root, "a.json", 0..5);
        land(root, "b.json", 5..10);
        let cfg = config(root, &format!("allow_overwrites = {overwrites}"));
        crash_at(&cfg, "after_plan");
        // Rewritten with other rows (and another size).
        land(root, "a.json", 100..103);
        drain(&cfg);
        drain(&cfg);
        let mut expected: Vec<u64> = (100..103).collect();
        expected.extend(5..10);
        assert_exactly(&table_ids(root), &expected);
        let rows = state_rows(&cfg, "events");
        let a: Vec<_> = rows
            .iter()
            .filter(|r| r["path"].as_str().unwrap().ends_with("/a.json"))
            .collect();
        let states: Vec<_> = a.iter().map(|r| r["state"].as_str().unwrap()).collect();
        if overwrites {
            // Two identities: the listed version (skipped) and the new one (committed).
            assert_eq!(states.len(), 2, "{a:?}");
            assert!(
                states.contains(&"skipped") && states.contains(&"committed"),
                "{a:?}"
            );
        } else {
            // One identity (the path), ingested once with its current content; the record
            // keeps what happened to the listed version.
            assert_eq!(states, vec!["committed"], "{a:?}");
            assert!(
                a[0]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("changed after listing"),
                "{a:?}"
            );
        }
    }
}

/// Turning `allow_overwrites` on and off again re-ingests nothing that is unchanged.
#[test]
fn toggling_allow_overwrites_reingests_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    land(root, "a.json", 0..5);
    land(root, "b.json", 5..10);
    drain(&config(root, ""));
    let v = delta_version(&root.join("table"));
    drain(&config(root, "allow_overwrites = true"));
    assert_eq!(
        delta_version(&root.join("table")),
        v,
        "nothing new with overwrites on"
    );
    // A real overwrite is ingested again under allow_overwrites...
    land(root, "a.json", 50..52);
    drain(&config(root, "allow_overwrites = true"));
    // ... and switching back re-ingests nothing.
    let v = delta_version(&root.join("table"));
    drain(&config(root, ""));
    assert_eq!(delta_version(&root.join("table")), v);
    let mut expected: Vec<u64> = (0..10).collect();
    expected.extend(50..52);
    assert_exactly(&table_ids(root), &expected);
}

/// A state directory restored from last night's backup while the table moved on: refused with
/// the causes and the way out; `landfall reset` starts a new state after the table's batches.
#[test]
fn state_restored_from_backup_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = config(root, "");
    land(root, "a.json", 0..5);
    drain(&cfg);
    let state = root.join("state/events");
    let backup = root.join("backup");
    copy_dir(&state, &backup);
    land(root, "b.json", 5..10);
    drain(&cfg);
    std::fs::remove_dir_all(&state).unwrap();
    copy_dir(&backup, &state);
    land(root, "c.json", 10..15);
    let v = delta_version(&root.join("table"));
    let out = run(&cfg);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    for needle in [
        "already holds batch 1 of this stream",
        "restored from an older backup",
        "another landfall instance",
        "stream name was reused",
        "landfall reset events",
    ] {
        assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
    }
    assert_eq!(streams_json(&cfg)[0]["error_kind"], "table_ahead");
    assert_eq!(delta_version(&root.join("table")), v, "nothing committed");

    let o = landfall(&["reset", "events", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    drain(&cfg);
    // A new state ingests every file again (as Auto Loader with a new checkpoint), under
    // batch ids after the table's: the txn never goes backwards.
    let v = verify("delta", &root.join("table"), Some("events"));
    let mut expected: Vec<u64> = (0..10).collect();
    expected.extend(0..15);
    assert_exactly(&ids(&v, "id"), &expected);
    let last = last_txn(&root.join("table"), "events");
    assert_eq!(last, 2, "batch ids continue after the table's");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// The highest txn version of `app` in the table's JSON log.
fn last_txn(table: &Path, app: &str) -> i64 {
    let mut last = -1;
    for e in std::fs::read_dir(table.join("_delta_log")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            for line in std::fs::read_to_string(&p).unwrap().lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                if v["txn"]["appId"] == app {
                    last = last.max(v["txn"]["version"].as_i64().unwrap());
                }
            }
        }
    }
    last
}

/// TIMESTAMP, DATE and DECIMAL columns with known values, read back typed by the independent
/// reader, with the stream's txn checked strictly on every commit.
#[test]
fn typed_columns_round_trip_with_known_values() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let landing = root.join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(
        landing.join("a.json"),
        concat!(
            "{\"id\":1,\"ts\":\"2024-01-02T03:04:05.123456Z\",\"d\":\"2024-02-29\",\"amount\":12.34}\n",
            "{\"id\":2,\"ts\":\"1999-12-31T23:59:59+02:00\",\"d\":\"1970-01-01\",\"amount\":-0.05}\n",
            "{\"id\":3,\"ts\":null,\"d\":null,\"amount\":null}\n",
        ),
    )
    .unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.typed]
source = "{root}/landing"
format = "json"
schema = "id BIGINT NOT NULL, ts TIMESTAMP, d DATE, amount DECIMAL(10,2)"
sink.path = "{root}/table"
"#,
    );
    drain(&cfg);
    // --stats: every live add's stats (numRecords, nullCount, min/max) checked against the
    // data files as DuckDB reads them.
    let v = verify_args(
        "delta",
        &root.join("table"),
        &["--stream", "typed", "--stats"],
    );
    let stats = v["stats"]
        .as_object()
        .expect("a stats report per live file");
    assert!(!stats.is_empty());
    for (file, s) in stats {
        assert!(
            s["numRecords"].as_u64().is_some() && s["minValues"].is_object(),
            "{file} has no stats to check: {s}"
        );
    }
    assert_eq!(v["schema"]["id"], "long", "{}", v["schema"]);
    assert_eq!(v["schema"]["ts"], "timestamp");
    assert_eq!(v["schema"]["d"], "date");
    assert_eq!(v["schema"]["amount"], "decimal(10,2)");
    let r1 = row_by_id(&v, 1);
    assert_eq!(r1["ts"], "2024-01-02T03:04:05.123456");
    assert_eq!(r1["d"], "2024-02-29");
    assert_eq!(r1["amount"], "12.34");
    let r2 = row_by_id(&v, 2);
    assert_eq!(r2["ts"], "1999-12-31T21:59:59", "the instant, in UTC");
    assert_eq!(r2["d"], "1970-01-01");
    assert_eq!(r2["amount"], "-0.05");
    let r3 = row_by_id(&v, 3);
    assert!(
        r3["ts"].is_null() && r3["d"].is_null() && r3["amount"].is_null(),
        "{r3}"
    );
    assert_eq!(v["txn"]["typed"], 0);
}

/// SIGTERM during `--available-now` with a backlog: the batch in flight finishes, and the run
/// exits non-zero saying the stream did not drain (it used to report success).
#[test]
fn sigterm_before_draining_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for f in 0..60u64 {
        land(root, &format!("f{f:03}.json"), f * 2..f * 2 + 2);
    }
    let cfg = config(root, "max_files_per_trigger = 1");
    let mut child = std::process::Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .args(["run", "--config", cfg.to_str().unwrap(), "--available-now"])
        .env("LANDFALL_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let table = root.join("table");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while delta_version(&table) < 3 {
        if std::time::Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("{}", text(&child.wait_with_output().kept()));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let o = child.wait_with_output().kept();
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(
        all.contains("stopped by shutdown before it drained"),
        "{all}"
    );
    // What committed is whole: every committed file's rows, once.
    let v = verify("delta", &table, Some("events"));
    let got = ids(&v, "id");
    assert!(!got.is_empty() && got.len() < 120, "{} rows", got.len());
    assert_eq!(got.len() % 2, 0, "whole files only");
    assert_exactly(&got, &(0..got.len() as u64).collect::<Vec<_>>());
}

/// A panicking worker is caught, reported with its message and restarted like a failed one;
/// the batch it was running lands once.
#[test]
fn a_panicking_worker_is_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    land(root, "a.json", 0..5);
    land(root, "b.json", 5..10);
    let cfg = config(root, "");
    let o = landfall_env(
        &["run", "--config", cfg.to_str().unwrap(), "--available-now"],
        &[
            ("LANDFALL_FAILPOINTS", "after_stage=#1"),
            ("LANDFALL_FAILPOINT_ACTION", "panic"),
        ],
    );
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains("stream worker panicked") && all.contains("failpoint after_stage: panicking"),
        "{all}"
    );
    assert!(all.contains("restarting"), "{all}");
    assert_exactly(&table_ids(root), &(0..10).collect::<Vec<_>>());
}

/// A state directory that is gone (a volume that did not mount, a mistyped state_dir) facing a
/// table with the stream's batches is refused instead of ingesting everything again; after
/// `landfall reset` batch ids continue after the table's.
#[test]
fn lost_state_is_refused_until_reset() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = config(root, "max_files_per_trigger = 1");
    land(root, "a.json", 0..5);
    land(root, "b.json", 5..10);
    drain(&cfg);
    std::fs::remove_dir_all(root.join("state/events")).unwrap();
    let out = run(&cfg);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("is new (empty or missing)") && all.contains("landfall reset events"),
        "{all}"
    );
    assert_eq!(streams_json(&cfg)[0]["error_kind"], "state_lost");
    assert_eq!(
        last_txn(&root.join("table"), "events"),
        1,
        "nothing committed"
    );
    let o = landfall(&["reset", "events", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    drain(&cfg);
    assert_eq!(
        last_txn(&root.join("table"), "events"),
        3,
        "batches 2 and 3"
    );
    let mut expected: Vec<u64> = (0..10).collect();
    expected.extend(0..10);
    assert_exactly(&table_ids(root), &expected);
}

/// `landfall skip` refuses a file of a batch whose commit already landed (the process died
/// between commit and record): its rows are in the table, and recovery records the batch.
#[test]
fn skip_refuses_a_file_whose_batch_landed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    land(root, "a.json", 0..5);
    let cfg = config(root, "");
    crash_at(&cfg, "after_commit");
    let shown = root.join("landing/a.json").display().to_string();
    let o = landfall(&["skip", "events", &shown, "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("already landed"), "{}", text(&o));
    drain(&cfg);
    assert_exactly(&table_ids(root), &(0..5).collect::<Vec<_>>());
    assert_eq!(
        state_of(&state_rows(&cfg, "events"), "a.json")["state"],
        "committed"
    );
}

/// `landfall state` and `landfall streams` work while the daemon holds the state directory
/// (they open it read-only), and `landfall skip` is refused with the lock named.
#[test]
fn state_is_readable_while_the_daemon_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    land(root, "a.json", 0..5);
    let cfg = config(root, "poll_interval = \"100ms\"");
    let mut child = std::process::Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .args(["run", "--config", cfg.to_str().unwrap()])
        .env("LANDFALL_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    // The table commit comes before the ledger record: wait until the ledger says so too.
    let rows = loop {
        if delta_version(&root.join("table")) >= 1 {
            let rows = state_rows(&cfg, "events");
            if state_of(&rows, "a.json")["state"] == "committed" {
                break rows;
            }
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("nothing recorded as committed in a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let streams = streams_json(&cfg);
    let skip = landfall(&[
        "skip",
        "events",
        "x.json",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(state_of(&rows, "a.json")["state"], "committed");
    assert_eq!(streams[0]["committed_files"], 1);
    assert!(!skip.status.success());
    assert!(
        text(&skip).contains("locked by another process (pid "),
        "{}",
        text(&skip)
    );
}

/// `landfall reset` keeps the `include_existing_files = false` cutoff: a file that arrived
/// after the first start but was still pending is ingested by the new state.
#[test]
fn reset_keeps_the_existing_files_cutoff() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    land(root, "old.json", 0..5);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let cfg = config(root, "include_existing_files = false");
    drain(&cfg);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    land(root, "new.json", 5..10);
    let o = landfall(&["reset", "events", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    drain(&cfg);
    assert_exactly(&table_ids(root), &(5..10).collect::<Vec<_>>());
}

/// Large Parquet inputs (forced here with a 1-byte threshold) are read through pinned ranged
/// reads, footer first and then row group by row group, and the schema is inferred from the
/// footers alone. A file without a footer is corrupt, for inference and for the batch alike:
/// with `ignore_corrupt_files` it is passed over by both, and recorded as skipped.
#[test]
fn large_parquet_files_are_read_row_group_by_row_group() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let landing = root.join("landing");
    write_parquet_row_groups(&landing, "a.parquet", 0..5000, Some(700));
    write_corrupt_parquet(&landing, "b.parquet");
    write_parquet_row_groups(&landing, "c.parquet", 10_000..10_003, None);
    let cfg = config_in(
        root,
        r#"
[streams.events]
source = "{root}/landing"
format = "parquet"
ignore_corrupt_files = true
sink.path = "{root}/table"
"#,
    );
    let o = landfall_env(
        &["run", "--config", cfg.to_str().unwrap(), "--available-now"],
        &[("LANDFALL_STREAM_FILES_FROM", "1")],
    );
    // The knob was read: the streaming (ranged) path ran, not the whole-file one.
    assert!(
        text(&o).contains("LANDFALL_STREAM_FILES_FROM: files from this size are streamed"),
        "{}",
        text(&o)
    );
    assert!(o.status.success(), "{}", text(&o));
    // The skipped file is not counted as committed.
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("this run:  2 file(s), 5003 row(s)"),
        "{}",
        text(&o)
    );
    let mut expected: Vec<u64> = (0..5000).collect();
    expected.extend(10_000..10_003);
    assert_exactly(&table_ids(root), &expected);
    let table = verify("delta", &root.join("table"), Some("events"));
    assert_eq!(table["schema"]["name"], "string", "{table}");
    assert_eq!(table["schema"]["id"], "long", "{table}");
    let b = state_of(&state_rows(&cfg, "events"), "b.parquet").clone();
    assert_eq!(b["state"], "skipped", "{b}");
    assert!(
        b["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("corrupt") && r.contains("Parquet")),
        "{b}"
    );
}

/// The streaming path for large files (forced here with a 1-byte threshold), and a file that
/// turns out bad after part of it was sent to the writer (a row lacking a NOT NULL column,
/// after 9,000 good rows): with `ignore_corrupt_files` the skip is recorded, the attempt
/// fails, and the batch runs again without the file; no row of it is committed.
#[test]
fn a_file_corrupt_midway_through_streaming_is_left_out_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    land(root, "a.json", 0..5);
    land(root, "c.json", 10..15);
    let mut bad: String = (100_000..109_000u64).map(row).collect();
    bad.push_str("{\"name\":\"no id\"}\n");
    bad.push_str(&row(200_000));
    std::fs::write(root.join("landing/b.json"), bad).unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.events]
source = "{root}/landing"
format = "json"
schema = "id BIGINT NOT NULL, name STRING, amount DOUBLE, tag STRING"
ignore_corrupt_files = true
sink.path = "{root}/table"
"#,
    );
    let o = landfall_env(
        &["run", "--config", cfg.to_str().unwrap(), "--available-now"],
        &[("LANDFALL_STREAM_FILES_FROM", "1")],
    );
    // The knob was read: the streaming (ranged) path ran, not the whole-file one.
    assert!(
        text(&o).contains("LANDFALL_STREAM_FILES_FROM: files from this size are streamed"),
        "{}",
        text(&o)
    );
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains("was skipped after part of it was read"),
        "{all}"
    );
    let mut expected: Vec<u64> = (0..5).collect();
    expected.extend(10..15);
    assert_exactly(&table_ids(root), &expected);
    let b = state_of(&state_rows(&cfg, "events"), "b.json").clone();
    assert_eq!(b["state"], "skipped", "{b}");
}

/// An attempt that reached the commit call and died there keeps its files (its commit might
/// still land); the next attempt commits. Whether the process then stops before or after the
/// batch is recorded, the first attempt's files end up deleted and nothing the table
/// references is touched.
#[test]
fn files_of_an_attempt_that_reached_the_commit_call_do_not_outlive_the_batch() {
    for second_stop in ["after_commit", "after_record"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        land(root, "a.json", 0..5);
        let cfg = config(root, "");
        crash_at(&cfg, "before_commit");
        crash_at(&cfg, second_stop);
        drain(&cfg);
        let v = verify_args(
            "delta",
            &root.join("table"),
            &["--stream", "events", "--orphans"],
        );
        assert_exactly(&ids(&v, "id"), &(0..5).collect::<Vec<_>>());
        assert_eq!(
            v["orphans"],
            serde_json::json!([]),
            "stopped at before_commit, then at {second_stop}"
        );
    }
}

/// Two instances with their own state run one stream against one table. B plans batch 0,
/// stages its files and stops just before committing; A commits batch 0. B's next start finds
/// batch 0 in the table, committed with files B never wrote: it stops with the causes instead
/// of recording A's commit as its own.
#[test]
fn a_batch_committed_by_another_instance_is_never_recorded_as_ours() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    land(root, "a.json", 0..5);
    let body = |state: &str| {
        format!(
            "[server]\nstate_dir = \"{root}/{state}\"\n\n[streams.events]\nsource = \"{root}/landing\"\nformat = \"json\"\nschema = \"id BIGINT, name STRING, amount DOUBLE, tag STRING\"\n\n[streams.events.sink]\npath = \"{root}/table\"\n",
            root = root.display()
        )
    };
    for d in ["a", "b"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let cfg_a = write_config(&root.join("a"), &body("state_a"));
    let cfg_b = write_config(&root.join("b"), &body("state_b"));
    crash_at(&cfg_b, "before_commit");
    drain(&cfg_a);
    let o = run(&cfg_b);
    let out = text(&o);
    assert!(!o.status.success(), "B must not go on:\n{out}");
    assert!(
        out.contains("committed by another state")
            && out.contains("Another landfall instance")
            && out.contains("landfall reset events"),
        "{out}"
    );
    assert_eq!(streams_json(&cfg_b)[0]["error_kind"], "foreign_commit");
    // B recorded nothing: its state still holds batch 0 open, not committed.
    let rows = state_rows(&cfg_b, "events");
    assert!(
        rows.iter().all(|r| r["state"] != "committed"),
        "B recorded A's commit: {rows:?}"
    );
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("events")), "id"),
        &(0..5).collect::<Vec<_>>(),
    );
    // The commit carries A's state identity in its commitInfo (the Delta kernel writes no
    // add tags).
    let log =
        std::fs::read_to_string(root.join("table/_delta_log/00000000000000000001.json")).unwrap();
    let stamped = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|a| {
            a["commitInfo"]["landfall.state"].is_string()
                || a["add"]["tags"]["landfall.state"].is_string()
        })
        .count();
    assert!(stamped >= 1, "commitInfo carries the owner:\n{log}");
}

/// The same race where the other instance's batch holds no data file (its files had no rows):
/// the commit has no add to compare, and its stamp still tells it is not this state's, so B's
/// staged rows are not recorded as landed (which would lose them).
#[test]
fn an_empty_batch_of_another_instance_is_never_recorded_as_ours() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    land(root, "a.json", 0..5);
    put_file(&root.join("landing_a"), "blank.json", "\n\n");
    let body = |state: &str, source: &str| {
        format!(
            "[server]\nstate_dir = \"{root}/{state}\"\n\n[streams.events]\nsource = \"{root}/{source}\"\nformat = \"json\"\nschema = \"id BIGINT, name STRING, amount DOUBLE, tag STRING\"\n\n[streams.events.sink]\npath = \"{root}/table\"\n",
            root = root.display()
        )
    };
    for d in ["a", "b"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let cfg_a = write_config(&root.join("a"), &body("state_a", "landing_a"));
    let cfg_b = write_config(&root.join("b"), &body("state_b", "landing"));
    crash_at(&cfg_b, "before_commit");
    drain(&cfg_a);
    let o = run(&cfg_b);
    let out = text(&o);
    assert!(
        !o.status.success(),
        "B must not record A's empty batch:\n{out}"
    );
    assert!(out.contains("committed by another state"), "{out}");
    assert_eq!(streams_json(&cfg_b)[0]["error_kind"], "foreign_commit");
    let rows = state_rows(&cfg_b, "events");
    assert!(rows.iter().all(|r| r["state"] != "committed"), "{rows:?}");
}

/// A table replaced behind the stream's back (deleted and made anew, restored from an older
/// copy): the state recorded batches the table lacks, so the stream refuses to go on, by kind.
#[test]
fn a_table_behind_the_state_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = config(root, "");
    land(root, "a.json", 0..5);
    drain(&cfg);
    std::fs::remove_dir_all(root.join("table")).unwrap();
    land(root, "b.json", 5..10);
    let out = run(&cfg);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("recorded batch 0 as committed") && all.contains("landfall reset events"),
        "{all}"
    );
    assert_eq!(streams_json(&cfg)[0]["error_kind"], "table_behind");
}
