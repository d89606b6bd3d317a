//! `landfall vacuum` on a table landfall wrote: every data file made to look 30 days old (so
//! only the table's references keep them), an old orphan (an attempt's leftover) and a fresh
//! one. The dry run lists the old orphan and deletes nothing; the real run deletes it alone,
//! and the independent reader still finds every row once.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, SystemTime};

fn age(p: &Path, days: u64) {
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(days * 24 * 3600))
        .unwrap();
}

fn data_files(table: &Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(table)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    out.sort();
    out
}

#[test]
fn vacuum_deletes_old_unreferenced_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("landing");
    let table = root.join("table");
    for f in 0..4u64 {
        write_rows(&src, &format!("f{f}.json"), f * 10..f * 10 + 10);
    }
    let cfg = Config::in_dir(root)
        .stream(Stream::rows("s", &src, &table).set("max_files_per_trigger", 2))
        .write();
    drain(&cfg);
    let live = data_files(&table);
    assert_eq!(live.len(), 2, "{live:?}");
    for f in &live {
        age(f, 30);
    }
    let orphan = table.join("part-00000-0000dead-beef-0000-0000-000000000000-c000.snappy.parquet");
    std::fs::copy(&live[0], &orphan).unwrap();
    age(&orphan, 30);
    let fresh = table.join("part-00000-0000feed-beef-0000-0000-000000000000-c000.snappy.parquet");
    std::fs::copy(&live[0], &fresh).unwrap();

    let v: Value = {
        let o = landfall(&[
            "vacuum",
            "s",
            "--config",
            cfg.to_str().unwrap(),
            "--dry-run",
            "--format",
            "json",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    assert_eq!(v["dry_run"], true, "{v}");
    assert_eq!(v["deleted_files"], 1, "{v}");
    assert_eq!(v["live_files"], 2, "{v}");
    assert_eq!(v["recent_files"], 1, "{v}");
    assert_eq!(v["retention_hours"], 168, "{v}");
    assert_eq!(
        v["files"][0]["path"],
        orphan.file_name().unwrap().to_str().unwrap(),
        "{v}"
    );
    assert!(orphan.exists());

    let o = landfall(&["vacuum", "s", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("deleted 1 file(s)") && text(&o).contains("kept 2 live"),
        "{}",
        text(&o)
    );
    assert!(!orphan.exists());
    assert!(fresh.exists());
    for f in &live {
        assert!(f.exists(), "{} was deleted", f.display());
    }
    let v = verify("delta", &table, Some("s"));
    assert_exactly(&ids(&v, "id"), &(0..40).collect::<Vec<_>>());
}

#[test]
fn vacuum_refuses_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = Config::in_dir(root)
        .stream(
            Stream::local("p", &root.join("in"), "json", &root.join("out"))
                .set("schema", "id BIGINT")
                .set("sink.format", "parquet"),
        )
        .stream(
            Stream::local("d", &root.join("in2"), "json", &root.join("none"))
                .set("schema", "id BIGINT"),
        )
        .write();
    let o = landfall(&["vacuum", "p", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("vacuum is for Delta tables"),
        "{}",
        text(&o)
    );
    let o = landfall(&["vacuum", "d", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("no Delta table here"), "{}", text(&o));
    let o = landfall(&["vacuum", "nope", "--config", cfg.to_str().unwrap()]);
    assert!(!o.status.success(), "{}", text(&o));
}

fn log_operations(table: &Path) -> Vec<String> {
    let mut entries: Vec<_> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    entries
        .iter()
        .filter_map(|p| {
            std::fs::read_to_string(p).ok()?.lines().find_map(|l| {
                let v: Value = serde_json::from_str(l).ok()?;
                v["commitInfo"]["operation"].as_str().map(str::to_string)
            })
        })
        .collect()
}

/// `landfall optimize` by hand: six one-file batches become one file in one OPTIMIZE commit;
/// every row once; a vacuum right after keeps the replaced files (older versions read them).
#[test]
fn optimize_rewrites_small_files_in_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("landing");
    let table = root.join("table");
    for f in 0..6u64 {
        write_rows(&src, &format!("f{f}.json"), f * 10..f * 10 + 10);
    }
    let cfg = Config::in_dir(root)
        .stream(Stream::rows("s", &src, &table).set("max_files_per_trigger", 1))
        .write();
    drain(&cfg);
    assert_eq!(data_files(&table).len(), 6);
    let o = landfall(&[
        "optimize",
        "s",
        "--config",
        cfg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["files_removed"], 6, "{v}");
    assert_eq!(v["files_added"], 1, "{v}");
    assert_eq!(v["rows"], 60, "{v}");
    assert_eq!(log_operations(&table).last().unwrap(), "OPTIMIZE");
    let checked = verify("delta", &table, Some("s"));
    assert_exactly(&ids(&checked, "id"), &(0..60).collect::<Vec<_>>());
    // Nothing left to do.
    let o = landfall(&["optimize", "s", "--config", cfg.to_str().unwrap()]);
    assert!(text(&o).contains("nothing to compact"), "{}", text(&o));
    // The replaced files stay for the retention.
    let o = landfall(&["vacuum", "s", "--config", cfg.to_str().unwrap()]);
    assert!(text(&o).contains("deleted 0 file(s)"), "{}", text(&o));
    assert_eq!(data_files(&table).len(), 7);
    // The stream goes on after the compaction.
    write_rows(&src, "f6.json", 60..70);
    drain(&cfg);
    let checked = verify("delta", &table, Some("s"));
    assert_exactly(&ids(&checked, "id"), &(0..70).collect::<Vec<_>>());
}

/// Auto compaction in a running daemon: files arrive one by one, each its own batch; the
/// compactor commits OPTIMIZE beside the stream's appends, and every row lands once.
#[test]
fn auto_compaction_runs_beside_a_continuous_stream() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("landing");
    let table = root.join("table");
    std::fs::create_dir_all(&src).unwrap();
    let cfg = Config::in_dir(root)
        .stream(
            Stream::rows("s", &src, &table)
                .set("max_files_per_trigger", 1)
                .set("poll_interval", "100ms")
                .set("sink.compaction.auto", true)
                .set("sink.compaction.min_files", 3)
                .set("sink.compaction.check_interval", "1s"),
        )
        .write();
    let mut child = std::process::Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .env("LANDFALL_LOG", "info")
        .args(["run", "--config", cfg.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let files = 16u64;
    for f in 0..files {
        write_rows(&src, &format!("f{f:02}.json"), f * 10..f * 10 + 10);
        std::thread::sleep(Duration::from_millis(250));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ops = log_operations(&table);
        let appends = ops
            .iter()
            .filter(|o| *o != "OPTIMIZE" && *o != "CREATE TABLE")
            .count();
        if appends as u64 >= files && ops.iter().any(|o| o == "OPTIMIZE") {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "no compaction or not every batch within a minute: {ops:?}\n{}",
                text(&o)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("table compacted"), "{}", text(&o));
    let checked = verify("delta", &table, Some("s"));
    assert_exactly(&ids(&checked, "id"), &(0..files * 10).collect::<Vec<_>>());
    assert!(
        data_files(&table).len() as u64 > files,
        "the compacted files are kept"
    );
}

/// Vacuum in a running daemon: an old orphan in the table is deleted at the first interval,
/// the live files stay, and the stream goes on ingesting.
#[test]
fn auto_vacuum_runs_beside_a_continuous_stream() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("landing");
    let table = root.join("table");
    write_rows(&src, "f0.json", 0..10);
    let cfg = Config::in_dir(root)
        .stream(
            Stream::rows("s", &src, &table)
                .set("poll_interval", "100ms")
                .set("sink.vacuum.auto", true)
                .set("sink.vacuum.interval", "2s"),
        )
        .write();
    drain(&cfg);
    let live = data_files(&table);
    for f in &live {
        age(f, 30);
    }
    let orphan = table.join("part-00000-0000dead-beef-0000-0000-000000000000-c000.snappy.parquet");
    std::fs::copy(&live[0], &orphan).unwrap();
    age(&orphan, 30);
    let child = std::process::Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .env("LANDFALL_LOG", "info")
        .args(["run", "--config", cfg.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    write_rows(&src, "f1.json", 10..20);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while orphan.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(!orphan.exists(), "{}", text(&o));
    assert!(text(&o).contains("table vacuumed"), "{}", text(&o));
    for f in &live {
        assert!(f.exists(), "{} was deleted", f.display());
    }
    let checked = verify("delta", &table, Some("s"));
    assert_exactly(&ids(&checked, "id"), &(0..20).collect::<Vec<_>>());
}
