//! A stream without a schema in a queue mode (notifications, file events) on moto: its first
//! files are recorded, their messages deleted and the mode noted before inference runs. A run
//! that dies there (a crash, a failed GET of the sample) must not leave the files pending
//! forever: no later round lists or receives them again, so the next start infers from the
//! files the ledger holds, and every file lands exactly once.

mod common;
use common::*;
use std::path::{Path, PathBuf};

fn put(root: &Path, bucket: &str, key: &str, ids: std::ops::Range<u64>) {
    let body: String = ids.map(row).collect();
    let f = root.join("upload.json");
    std::fs::write(&f, body).unwrap();
    aws(&["put", bucket, key, f.to_str().unwrap()]);
}

/// Stream `ev` without a schema on s3://`bucket`/landing, discovery `mode` reading queue `q`.
fn config(root: &Path, bucket: &str, q: &str, mode: &str) -> PathBuf {
    let queue = if mode == "notifications" {
        format!(
            "[streams.ev.notifications]\nqueue_url = \"{q}\"\nwait_time = \"1s\"\nvisibility_timeout = \"10s\"\n"
        )
    } else {
        String::new()
    };
    let location = if mode == "file_events" {
        format!(
            "[locations.raw]\nurl = \"s3://{bucket}/\"\nstore = \"moto\"\nfile_events = true\nqueue_url = \"{q}\"\nwait_time = \"1s\"\nvisibility_timeout = \"10s\"\n"
        )
    } else {
        String::new()
    };
    write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{root}/state"

[stores.moto]
{store}

{location}
[streams.ev]
source = "s3://{bucket}/landing"
source_store = "moto"
format = "json"
discovery = "{mode}"
schema_hints = "id BIGINT"

{queue}
[streams.ev.sink]
path = "{root}/table"
"#,
            root = root.display(),
            store = moto_store_toml(&moto_endpoint()),
        ),
    )
}

fn drain_run(cfg: &Path) -> std::process::Output {
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert!(o.status.success(), "{}", text(&o));
    o
}

#[test]
fn a_run_that_dies_before_inference_leaves_nothing_pending() {
    for mode in ["notifications", "file_events"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bucket = unique("infer");
        let wired = aws(&["wire", &bucket, &bucket, "landing/"]);
        let q = wired["queue_url"].as_str().unwrap().to_string();
        let cfg = config(root, &bucket, &q, mode);
        // Entering the mode: the listing finds nothing, so there is nothing to infer from.
        drain_run(&cfg);
        put(root, &bucket, "landing/a.json", 0..5);
        put(root, &bucket, "landing/b.json", 5..9);
        // The events are received, the files recorded, the messages deleted: then the run
        // dies before its inference.
        crash_at(&cfg, "before_inference");
        let rows = state_rows(&cfg, "ev");
        assert_eq!(rows.len(), 2, "{mode}: {rows:?}");
        let o = drain_run(&cfg);
        assert!(
            text(&o).contains("this run:  2 file(s)"),
            "{mode}: {}",
            text(&o)
        );
        let v = verify("delta", &root.join("table"), Some("ev"));
        let want: Vec<u64> = (0..9).collect();
        assert_exactly(&ids(&v, "id"), &want);
        for r in state_rows(&cfg, "ev") {
            assert_eq!(r["state"], "committed", "{mode}: {r}");
        }
    }
}
