//! The HTTP surface of a running daemon, over real HTTP on 127.0.0.1 (an ephemeral port read
//! from the daemon's log): health, readiness with a failed stream, metric values against a
//! known ingest, the JSON API (streams, progress, paged files), secrets never shown, the
//! `landfall health` probe, and shutdown. One stream reads S3 on moto with a secret key that
//! must appear in no response and no log line.

mod common;
mod daemon;
use common::*;
use daemon::*;
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

const SECRET: &str = "SUPERSECRET-landfall-test-7f3a9c";

#[test]
fn endpoints_report_a_known_ingest_and_never_show_secrets() {
    let endpoint = std::env::var("LANDFALL_TEST_S3_ENDPOINT")
        .expect("LANDFALL_TEST_S3_ENDPOINT is not set: run the suite with scripts/test.sh, which starts moto server");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut bytes = 0;
    for f in 0..5u64 {
        let body: String = (f * 2..f * 2 + 2).map(row).collect();
        bytes += body.len();
        std::fs::create_dir_all(root.join("landing")).unwrap();
        std::fs::write(root.join(format!("landing/f{f}.json")), body).unwrap();
    }
    write_corrupt_parquet(&root.join("bad"), "b.parquet");
    let cfg = config_in(
        root,
        &format!(
            r#"
[stores.moto]
endpoint = "{endpoint}"
region = "us-east-1"
access_key_id = "AKIDLANDFALLTEST"
secret_access_key = "{SECRET}"
allow_http = true

[streams.ev]
source = "{{root}}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "100ms"
sink.path = "{{root}}/table"

[streams.bad]
source = "{{root}}/bad"
format = "parquet"
schema = "id BIGINT, name STRING"
poll_interval = "100ms"
sink.path = "{{root}}/bad_table"

[streams.remote]
source = "s3://landfall-test/operations-{}/landing"
source_store = "moto"
format = "json"
schema = "id BIGINT"
poll_interval = "100ms"
sink.path = "{{root}}/remote_table"
"#,
            std::process::id()
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = Daemon::start_with(
        bin(),
        &cfg,
        &root.join("daemon.log"),
        deadline,
        &[("LANDFALL_LOG", "debug")],
        &[],
    );
    let addr = d.addr.clone();
    assert_eq!(get(&addr, "/healthz"), (200, "ok\n".to_string()));
    // Wait for the known ingest: 5 files, 10 rows, in one batch.
    let committed = "landfall_files_committed_total{stream=\"ev\"}";
    let scrape = loop {
        let (status, scrape) = get(&addr, "/metrics");
        assert_eq!(status, 200);
        if metric(&scrape, committed) == Some(5.0) {
            break scrape;
        }
        assert!(Instant::now() < deadline, "no commit in time:\n{scrape}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let m = |s: &str| metric(&scrape, s).unwrap_or_else(|| panic!("no {s} in:\n{scrape}"));
    assert_eq!(m("landfall_rows_committed_total{stream=\"ev\"}"), 10.0);
    assert_eq!(
        m("landfall_bytes_committed_total{stream=\"ev\"}"),
        bytes as f64
    );
    assert_eq!(m("landfall_batches_committed_total{stream=\"ev\"}"), 1.0);
    assert_eq!(m("landfall_files_discovered_total{stream=\"ev\"}"), 5.0);
    assert_eq!(m("landfall_tracked_files{stream=\"ev\"}"), 5.0);
    assert_eq!(m("landfall_files_outstanding{stream=\"ev\"}"), 0.0);
    assert_eq!(m("landfall_stream_up{stream=\"ev\"}"), 1.0);
    assert_eq!(m("landfall_table_version{stream=\"ev\"}"), 1.0);
    assert_eq!(m("landfall_schema_version{stream=\"ev\"}"), 0.0);
    assert_eq!(
        m("landfall_commit_latency_seconds_count{stream=\"ev\"}"),
        5.0
    );
    assert_eq!(
        m("landfall_batch_duration_seconds_count{stream=\"ev\",phase=\"commit\"}"),
        1.0
    );
    assert!(scrape.trim_end().ends_with("# EOF"), "{scrape}");
    // Source requests: each file read once (pinned GET), listings counted.
    assert_eq!(
        m("landfall_storage_requests_total{stream=\"ev\",op=\"GET\"}"),
        5.0
    );
    assert!(m("landfall_storage_requests_total{stream=\"ev\",op=\"LIST\"}") >= 1.0);

    // The corrupt file stops its stream: not ready, with the reason; the others run.
    let (status, ready) = loop {
        let (status, ready) = get_json(&addr, "/readyz");
        if ready["streams"]["bad"]["state"] == "stopped"
            && ready["streams"]["remote"]["state"] == "running"
        {
            break (status, ready);
        }
        assert!(Instant::now() < deadline, "{ready}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 503, "{ready}");
    assert_eq!(ready["ready"], false);
    assert_eq!(ready["streams"]["ev"]["state"], "running");
    assert!(
        ready["streams"]["bad"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("b.parquet") && e.contains("ignore_corrupt_files")),
        "{ready}"
    );
    let scrape = get(&addr, "/metrics").1;
    assert_eq!(
        metric(&scrape, "landfall_stream_up{stream=\"bad\"}"),
        Some(0.0)
    );
    // The S3 stream lists with its own ListObjectsV2, counted per request.
    assert!(
        metric(
            &scrape,
            "landfall_storage_requests_total{stream=\"remote\",op=\"LIST\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{scrape}"
    );

    // The API.
    let (status, list) = get_json(&addr, "/api/v1/streams");
    assert_eq!(status, 200);
    let names: Vec<_> = list["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["bad", "ev", "remote"]);
    let (_, ev) = get_json(&addr, "/api/v1/streams/ev");
    assert_eq!(ev["config"]["format"], "json");
    assert_eq!(ev["last_progress"]["num_input_rows"], 10);
    assert_eq!(ev["last_progress"]["num_input_files"], 5);
    assert_eq!(ev["last_progress"]["sink"]["table_version"], 1);
    assert_eq!(ev["last_progress"]["source"]["start_offset"], 1);
    assert_eq!(ev["last_progress"]["source"]["end_offset"], 5);
    assert_eq!(
        ev["last_progress"]["source"]["description"],
        format!("{}/landing", root.display())
    );
    let (_, progress) = get_json(&addr, "/api/v1/streams/ev/progress?limit=1");
    assert_eq!(progress["progress"].as_array().unwrap().len(), 1);
    assert_eq!(progress["progress"][0]["batch_id"], 0);

    let (_, page1) = get_json(&addr, "/api/v1/streams/ev/files?limit=2");
    let seqs = |p: &Value| -> Vec<u64> {
        p["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["seq"].as_u64().unwrap())
            .collect()
    };
    // In key order, f0..f4.json: discovery order too here. `next` is a cursor.
    assert_eq!(seqs(&page1), [1, 2]);
    let next = page1["next"].as_str().expect("a cursor to the next page");
    let (_, page2) = get_json(
        &addr,
        &format!("/api/v1/streams/ev/files?after={next}&limit=10"),
    );
    assert_eq!(seqs(&page2), [3, 4, 5]);
    assert!(page2["next"].is_null());
    // The number form from before cursors: files discovered after that sequence number.
    let (_, later) = get_json(&addr, "/api/v1/streams/ev/files?after=2&limit=10");
    assert_eq!(seqs(&later), [3, 4, 5]);
    assert_eq!(get(&addr, "/api/v1/streams/ev/files?after=zz").0, 400);
    let (_, committed) = get_json(&addr, "/api/v1/streams/ev/files?state=committed");
    assert_eq!(seqs(&committed).len(), 5);
    assert_eq!(get(&addr, "/api/v1/streams/ev/files?state=bogus").0, 400);
    assert_eq!(get(&addr, "/api/v1/streams/nope").0, 404);

    // Secrets: the remote stream's key is shown redacted, and appears in no response.
    let (_, remote) = get_json(&addr, "/api/v1/streams/remote");
    assert_eq!(
        remote["config"]["source_options"]["aws_secret_access_key"], "<redacted>",
        "{remote}"
    );
    assert_eq!(
        remote["config"]["source_options"]["aws_region"],
        "us-east-1"
    );
    for path in [
        "/api/v1/streams",
        "/api/v1/streams/remote",
        "/api/v1/streams/remote/progress",
        "/api/v1/streams/remote/files",
        "/api/v1/streams/remote/timeline",
        "/api/v1/streams/remote/charts.svg",
        "/api/v1/streams/remote/skipped",
        "/api/v1/streams/remote/schemas",
        "/api/v1/streams/bad/skipped",
        "/api/v1/locations",
        "/",
        "/readyz",
        "/metrics",
    ] {
        let (_, body) = get(&addr, path);
        assert!(!body.contains(SECRET), "{path} shows the secret: {body}");
        assert!(
            !body.contains("AKIDLANDFALLTEST"),
            "{path} shows the key id: {body}"
        );
    }

    let probe = landfall(&["health", "--listen", &addr]);
    assert!(probe.status.success(), "{}", text(&probe));
    let (status, logs) = d.stop(Duration::from_secs(30));
    // The `bad` stream stopped with an error: the run reports failure.
    assert!(!status.success(), "{logs}");
    assert!(!logs.contains(SECRET), "the logs show the secret");
    assert!(logs.contains("shutdown requested"), "{logs}");
    // Started, idle and terminated events, as Spark's query listener reports them.
    for event in ["stream started", "stream idle", "stream terminated"] {
        assert!(
            logs.lines()
                .any(|l| l.contains(event) && l.contains("stream=ev")),
            "no `{event}` for ev:\n{logs}"
        );
    }
    // After shutdown, the probe fails.
    let probe = landfall(&["health", "--listen", &addr]);
    assert!(!probe.status.success(), "{}", text(&probe));
}

/// Two processes split one stream's configuration with `--shard i/2`: the one that owns the
/// stream ingests it, the other owns nothing and stays up (a StatefulSet replica must not
/// crash-loop); both are ready, and both stop cleanly on SIGTERM.
#[test]
fn readiness_and_a_shard_that_owns_no_stream() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("landing")).unwrap();
    std::fs::write(
        root.join("landing/a.json"),
        (0..3).map(row).collect::<String>(),
    )
    .unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.ev]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "100ms"
sink.path = "{root}/table"
"#,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut daemons: Vec<Daemon> = (0..2)
        .map(|i| {
            let log = root.join(format!("daemon{i}.log"));
            Daemon::spawn(bin(), &cfg, &log, &[], &["--shard", &format!("{i}/2")])
        })
        .collect();
    let addrs: Vec<String> = daemons
        .iter_mut()
        .map(|d| d.wait_listening(deadline).to_string())
        .collect();
    let mut owners = 0;
    for addr in &addrs {
        let (_, list) = get_json(addr, "/api/v1/streams");
        let owns = !list["streams"].as_array().unwrap().is_empty();
        owners += owns as u32;
        // Ready once its stream runs (or at once, with no stream).
        loop {
            let (status, ready) = get_json(addr, "/readyz");
            if status == 200 {
                assert_eq!(ready["ready"], true);
                break;
            }
            assert!(Instant::now() < deadline, "{addr} never ready: {ready}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert_eq!(owners, 1, "exactly one shard owns the stream");
    while delta_version(&root.join("table")) < 1 {
        assert!(Instant::now() < deadline, "no commit");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut statuses = Vec::new();
    for d in &mut daemons {
        d.process.terminate();
    }
    for d in &mut daemons {
        statuses.push(d.stop(Duration::from_secs(30)));
    }
    for (status, logs) in statuses {
        assert!(status.success(), "{logs}");
    }
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("ev")), "id"),
        &[0, 1, 2],
    );
}

/// `[monitoring] health_table`: each batch's progress record lands in a Delta table that an
/// independent reader can query. The interval is an hour, so every record here is written by
/// the final append at shutdown.
#[test]
fn progress_records_land_in_the_health_table() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("in_ev")).unwrap();
    for f in 0..3u64 {
        std::fs::write(
            root.join(format!("in_ev/f{f}.json")),
            (f * 10..f * 10 + 2).map(row).collect::<String>(),
        )
        .unwrap();
    }
    let cfg = config_in(
        root,
        r#"
[monitoring]
health_table = "{root}/health"
health_table_interval = "1h"

[streams.ev]
source = "{root}/in_ev"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "100ms"
max_files_per_trigger = 1
sink.path = "{root}/t_ev"
"#,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = Daemon::start_with(bin(), &cfg, &root.join("daemon.log"), deadline, &[], &[]);
    while delta_version(&root.join("t_ev")) < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, logs) = d.stop(Duration::from_secs(60));
    assert!(status.success(), "{logs}");
    assert_eq!(delta_version(&root.join("t_ev")), 3, "{logs}");
    // The health table is no stream's: its appends carry one txn app id per process run.
    let v = verify("delta", &root.join("health"), None);
    let rows = v["data"].as_array().unwrap();
    let mut batches: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["stream"].as_str().unwrap().to_string(),
                r["batch_id"].as_str().unwrap().to_string(),
                r["num_input_rows"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    batches.sort();
    let expected: Vec<(String, String, String)> = (0..3)
        .map(|b| ("ev".to_string(), b.to_string(), "2".to_string()))
        .collect();
    assert_eq!(batches, expected, "{v}\n{logs}");
    assert_eq!(v["schema"]["timestamp"], "timestamp", "{v}");
}

/// Readiness follows a stream that fails and recovers: a source bucket that does not exist
/// yet makes the stream restart with backoff (503, `restarting` with the error); once the
/// bucket is created, the stream runs and the process is ready (200).
#[test]
fn readiness_follows_a_stream_that_fails_and_recovers() {
    let endpoint = std::env::var("LANDFALL_TEST_S3_ENDPOINT")
        .expect("LANDFALL_TEST_S3_ENDPOINT is not set: run the suite with scripts/test.sh, which starts moto server");
    let bucket = format!("landfall-ready-{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = config_in(
        root,
        &format!(
            r#"
[stores.moto]
endpoint = "{endpoint}"
region = "us-east-1"
access_key_id = "test"
secret_access_key = "test"
allow_http = true

[streams.late]
source = "s3://{bucket}/landing"
source_store = "moto"
format = "json"
schema = "id BIGINT"
poll_interval = "200ms"
sink.path = "{{root}}/t"
"#
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut d = Daemon::start_with(bin(), &cfg, &root.join("daemon.log"), deadline, &[], &[]);
    let addr = d.addr.clone();
    let (status, ready) = loop {
        let (status, ready) = get_json(&addr, "/readyz");
        if ready["streams"]["late"]["state"] == "restarting" {
            break (status, ready);
        }
        assert!(Instant::now() < deadline, "{ready}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 503, "{ready}");
    assert!(
        ready["streams"]["late"]["error"]
            .as_str()
            .is_some_and(|e| e.contains(&bucket)),
        "{ready}"
    );
    let script = format!(
        "import boto3\nboto3.client('s3', endpoint_url={endpoint:?}, aws_access_key_id='test', \
         aws_secret_access_key='test', region_name='us-east-1').create_bucket(Bucket={bucket:?})\n"
    );
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    loop {
        let (status, ready) = get_json(&addr, "/readyz");
        if status == 200 {
            assert_eq!(ready["streams"]["late"]["state"], "running");
            break;
        }
        assert!(Instant::now() < deadline, "never recovered: {ready}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let scrape = get(&addr, "/metrics").1;
    assert!(
        metric(&scrape, "landfall_stream_restarts_total{stream=\"late\"}")
            .is_some_and(|n| n >= 1.0),
        "{scrape}"
    );
    assert_eq!(
        metric(&scrape, "landfall_stream_up{stream=\"late\"}"),
        Some(1.0)
    );
    let (status, logs) = d.stop(Duration::from_secs(60));
    assert!(status.success(), "{logs}");
}

/// A stream that commits one file per batch while files keep arriving faster: after five
/// batches in a row with more bytes arriving than committed, `landfall_falling_behind` is 1
/// and the progress records carry both rates.
#[test]
fn a_stream_slower_than_its_input_reports_falling_behind() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let landing = root.join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.slow]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "50ms"
max_files_per_trigger = 1
trigger.processing_time = "300ms"
sink.path = "{root}/table"
"#,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = Daemon::start(bin(), &cfg, &root.join("daemon.log"), deadline);
    let addr = d.addr.clone();
    let mut next = 0u64;
    let behind = loop {
        // Three files per batch interval, one committed per batch.
        for _ in 0..3 {
            write_rows(&landing, &format!("f{next:05}.json"), next..next + 1);
            next += 1;
        }
        std::thread::sleep(Duration::from_millis(300));
        let (_, scrape) = get(&addr, "/metrics");
        if metric(&scrape, "landfall_falling_behind{stream=\"slow\"}") == Some(1.0) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
    };
    assert!(
        behind,
        "never reported falling behind:\n{}",
        d.process.logs()
    );
    let (status, progress) = get_json(&addr, "/api/v1/streams/slow/progress?limit=3");
    assert_eq!(status, 200);
    let last = progress["progress"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let input = last["source"]["input_bytes_per_second"].as_f64().unwrap();
    let processed = last["source"]["processed_bytes_per_second"]
        .as_f64()
        .unwrap();
    assert!(
        input > processed,
        "input {input} <= processed {processed}: {last}"
    );
    let (_, log) = d.stop(Duration::from_secs(10));
    assert!(log.contains("stream is falling behind"), "{log}");
}
