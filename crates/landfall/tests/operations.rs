//! The HTTP surface of a running daemon, over real HTTP on 127.0.0.1 (an ephemeral port read
//! from the daemon's log): health, readiness with a failed stream, metric values against a
//! known ingest, the JSON API (streams, progress, paged files), secrets never shown, the
//! `landfall health` probe, and shutdown. One stream reads S3 on moto with a secret key that
//! must appear in no response and no log line.

mod common;
use common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "SUPERSECRET-landfall-test-7f3a9c";

/// GET `path` from `addr`: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

fn get_json(addr: &str, path: &str) -> (u16, Value) {
    let (status, body) = get(addr, path);
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    (status, v)
}

/// The value of the metric line `series` (exact name and labels) in a scrape.
fn metric(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// The daemon's HTTP address, from its log once it listens.
fn address(log: &std::path::Path, deadline: Instant) -> String {
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("http server listening")) {
            let at = line.find("127.0.0.1:").expect("loopback address");
            let port: String = line[at + 10..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            return format!("127.0.0.1:{port}");
        }
        assert!(
            Instant::now() < deadline,
            "the daemon did not listen:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

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
    let log = root.join("daemon.log");
    let mut child = Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .env("LANDFALL_LOG", "debug")
        .env("NO_COLOR", "1")
        .args(["run", "--config", cfg.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let addr = address(&log, deadline);
    let result = std::panic::catch_unwind(|| {
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
        assert_eq!(m("landfall_schema_version{stream=\"ev\"}"), 1.0);
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
        assert_eq!(seqs(&page1), [1, 2]);
        assert_eq!(page1["next_after"], 2);
        let (_, page2) = get_json(&addr, "/api/v1/streams/ev/files?after=2&limit=10");
        assert_eq!(seqs(&page2), [3, 4, 5]);
        assert!(page2["next_after"].is_null());
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
    });
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let logs = std::fs::read_to_string(&log).unwrap_or_default();
    if let Err(e) = result {
        eprintln!("daemon log:\n{logs}");
        std::panic::resume_unwind(e);
    }
    let status = status.expect("the daemon did not stop within 30 s of SIGTERM");
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
    let mut daemons = Vec::new();
    for i in 0..2 {
        let log = root.join(format!("daemon{i}.log"));
        let child = Command::new(bin())
            .env("LANDFALL_LISTEN", "127.0.0.1:0")
            .args(["run", "--config", cfg.to_str().unwrap()])
            .args(["--shard", &format!("{i}/2")])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        daemons.push((child, log));
    }
    let result = std::panic::catch_unwind(|| {
        let addrs: Vec<String> = daemons
            .iter()
            .map(|(_, log)| address(log, deadline))
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
    });
    let mut statuses = Vec::new();
    for (child, _) in &mut daemons {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }
    for (child, log) in &mut daemons {
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if t.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        statuses.push((status, std::fs::read_to_string(log).unwrap_or_default()));
    }
    if let Err(e) = result {
        for (_, logs) in &statuses {
            eprintln!("daemon log:\n{logs}");
        }
        std::panic::resume_unwind(e);
    }
    for (status, logs) in statuses {
        let status = status.unwrap_or_else(|| panic!("no exit after SIGTERM:\n{logs}"));
        assert!(status.success(), "{logs}");
    }
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("ev")), "id"),
        &[0, 1, 2],
    );
}

/// SIGHUP reloads the configuration: a removed stream stops, an added one starts, a changed
/// one restarts (a new run id), an unchanged one is not disturbed (same run id). An invalid
/// configuration is refused and the running one stays in force.
#[test]
fn sighup_reloads_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for s in ["keep", "gone", "change", "fresh"] {
        std::fs::create_dir_all(root.join(format!("in_{s}"))).unwrap();
        std::fs::write(
            root.join(format!("in_{s}/a.json")),
            (0..2).map(row).collect::<String>(),
        )
        .unwrap();
    }
    let stream = |name: &str, poll: &str| {
        format!(
            "\n[streams.{name}]\nsource = \"{{root}}/in_{name}\"\nformat = \"json\"\n\
             schema = \"id BIGINT, name STRING, amount DOUBLE, tag STRING\"\n\
             poll_interval = \"{poll}\"\nsink.path = \"{{root}}/t_{name}\"\n"
        )
    };
    let v1 = [
        stream("keep", "100ms"),
        stream("gone", "100ms"),
        stream("change", "100ms"),
    ]
    .concat();
    let cfg = config_in(root, &v1);
    let log = root.join("daemon.log");
    let mut child = Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .args(["run", "--config", cfg.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let hup = |pid: u32| {
        let st = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    };
    let wait_table = |name: &str, version: i64| {
        while delta_version(&root.join(format!("t_{name}"))) < version {
            assert!(
                Instant::now() < deadline,
                "{name} did not reach version {version}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let pid = child.id();
    let result = std::panic::catch_unwind(|| {
        let addr = address(&log, deadline);
        for s in ["keep", "gone", "change"] {
            wait_table(s, 1);
        }
        let run_id =
            |name: &str| get_json(&addr, &format!("/api/v1/streams/{name}")).1["run_id"].clone();
        let names = || -> Vec<String> {
            get_json(&addr, "/api/v1/streams").1["streams"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["name"].as_str().unwrap().to_string())
                .collect()
        };
        let (keep_before, change_before) = (run_id("keep"), run_id("change"));
        assert!(keep_before.is_string() && change_before.is_string());

        let v2 = [
            stream("keep", "100ms"),
            stream("change", "150ms"),
            stream("fresh", "100ms"),
        ]
        .concat();
        config_in(root, &v2);
        hup(pid);
        while names() != ["change", "fresh", "keep"] {
            assert!(
                Instant::now() < deadline,
                "reload not applied: {:?}",
                names()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        wait_table("fresh", 1);
        assert_eq!(
            run_id("keep"),
            keep_before,
            "an unchanged stream was restarted"
        );
        assert_ne!(
            run_id("change"),
            change_before,
            "a changed stream was not restarted"
        );
        let (_, change) = get_json(&addr, "/api/v1/streams/change");
        assert_eq!(change["config"]["poll_interval_ms"], 150);

        // An invalid file: refused, nothing changes, the streams go on.
        std::fs::write(&cfg, "[streams.broken]\nnot_a_key = 1\n").unwrap();
        hup(pid);
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("configuration rejected")
        {
            assert!(
                Instant::now() < deadline,
                "the invalid config was not reported"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(names(), ["change", "fresh", "keep"]);
        std::fs::write(
            root.join("in_keep/b.json"),
            (10..12).map(row).collect::<String>(),
        )
        .unwrap();
        wait_table("keep", 2);
        assert_eq!(run_id("keep"), keep_before);
    });
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let logs = std::fs::read_to_string(&log).unwrap_or_default();
    if let Err(e) = result {
        eprintln!("daemon log:\n{logs}");
        std::panic::resume_unwind(e);
    }
    assert!(status.expect("no exit after SIGTERM").success(), "{logs}");
    // The removed stream stopped after its first batch; nothing ran twice.
    assert_eq!(delta_version(&root.join("t_gone")), 1);
    assert_exactly(
        &ids(&verify("delta", &root.join("t_keep"), Some("keep")), "id"),
        &[0, 1, 10, 11],
    );
    assert_exactly(
        &ids(
            &verify("delta", &root.join("t_change"), Some("change")),
            "id",
        ),
        &[0, 1],
    );
    assert_exactly(
        &ids(&verify("delta", &root.join("t_fresh"), Some("fresh")), "id"),
        &[0, 1],
    );
}

/// POST `body` (JSON) to `path` with an optional bearer token: (status, body).
fn post(addr: &str, path: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Admin actions: refused without a configured token (403) and with a wrong or missing one
/// (401); with it, a stream stopped on a corrupt file is unblocked by `skip` (the rest of its
/// batch commits), and `stop` / `restart` pause and resume a stream. The token appears in no
/// response and no log line.
#[test]
fn admin_actions_need_the_token_and_unblock_a_stream() {
    const TOKEN: &str = "admin-token-landfall-test-5d1e";
    const SHORT: &str = "short-token";
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bad = root.join("bad");
    write_parquet_rows(&bad, "a.parquet", 0..3);
    write_corrupt_parquet(&bad, "b.parquet");
    write_parquet_rows(&bad, "c.parquet", 10..13);
    std::fs::create_dir_all(root.join("in_ev")).unwrap();
    std::fs::write(
        root.join("in_ev/a.json"),
        (0..2).map(row).collect::<String>(),
    )
    .unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.bad]
source = "{root}/bad"
format = "parquet"
schema = "id BIGINT, name STRING"
poll_interval = "100ms"
sink.path = "{root}/t_bad"

[streams.ev]
source = "{root}/in_ev"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "100ms"
sink.path = "{root}/t_ev"
"#,
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let start = |token: Option<&str>, log: &std::path::Path| {
        let mut c = Command::new(bin());
        c.env("LANDFALL_LISTEN", "127.0.0.1:0")
            .env("LANDFALL_LOG", "debug")
            .env_remove("LANDFALL_ADMIN_TOKEN")
            .args(["run", "--config", cfg.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap());
        if let Some(t) = token {
            c.env("LANDFALL_ADMIN_TOKEN", t);
        }
        c.spawn().unwrap()
    };
    let stop = |mut child: std::process::Child, log: &std::path::Path| {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let t = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if t.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let status = child.wait().unwrap();
        (status, std::fs::read_to_string(log).unwrap_or_default())
    };

    // Without a token, or with one too short to be safe: disabled.
    for (i, token) in [None, Some(SHORT)].into_iter().enumerate() {
        let log0 = root.join(format!("daemon0-{i}.log"));
        let child = start(token, &log0);
        let r = std::panic::catch_unwind(|| {
            let addr = address(&log0, deadline);
            for t in [Some(TOKEN), Some(SHORT), None] {
                let (status, body) = post(&addr, "/api/v1/streams/ev/stop", t, "");
                assert_eq!(status, 403, "{body}");
            }
        });
        let (_, logs) = stop(child, &log0);
        if let Err(e) = r {
            eprintln!("daemon log:\n{logs}");
            std::panic::resume_unwind(e);
        }
    }
    // The stream `bad` stops on its corrupt file at once; the daemon keeps running for `ev`.

    let log = root.join("daemon.log");
    let child = start(Some(TOKEN), &log);
    let mut bodies = String::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let addr = address(&log, deadline);
        let state = |name: &str| get_json(&addr, &format!("/api/v1/streams/{name}")).1;
        while state("bad")["state"] != "stopped" {
            assert!(Instant::now() < deadline, "{}", state("bad"));
            std::thread::sleep(Duration::from_millis(100));
        }
        let skip = format!(
            r#"{{"path": "{}", "reason": "broken upload"}}"#,
            bad.join("b.parquet").display()
        );
        for token in [None, Some("wrong")] {
            let (status, body) = post(&addr, "/api/v1/streams/bad/skip", token, &skip);
            assert_eq!(status, 401, "{body}");
            bodies.push_str(&body.to_string());
        }
        let (status, body) = post(&addr, "/api/v1/streams/bad/skip", Some(TOKEN), &skip);
        bodies.push_str(&body.to_string());
        assert_eq!(status, 200, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("skipped"),
            "{body}"
        );
        while delta_version(&root.join("t_bad")) < 1 {
            assert!(
                Instant::now() < deadline,
                "the unblocked batch did not commit"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        while state("bad")["state"] != "running" {
            assert!(Instant::now() < deadline, "{}", state("bad"));
            std::thread::sleep(Duration::from_millis(100));
        }
        let (_, skipped) = get_json(&addr, "/api/v1/streams/bad/files?state=skipped");
        assert_eq!(skipped["files"][0]["skip"]["kind"], "manual", "{skipped}");

        // Stop and restart a healthy stream.
        let before = state("ev")["run_id"].clone();
        // A body that is not JSON, from a caller without the token: refused before parsing.
        assert_eq!(
            post(&addr, "/api/v1/streams/bad/skip", None, "not json").0,
            401
        );
        assert_eq!(
            post(&addr, "/api/v1/streams/bad/skip", Some(TOKEN), "not json").0,
            400
        );
        let (status, body) = post(&addr, "/api/v1/streams/ev/stop", Some(TOKEN), "");
        bodies.push_str(&body.to_string());
        assert_eq!(status, 200, "{body}");
        assert_eq!(state("ev")["state"], "paused");
        // A reload keeps a paused stream paused.
        let pid = child.id();
        let st = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("configuration reloaded")
        {
            assert!(Instant::now() < deadline, "no reload");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(state("ev")["state"], "paused");
        let (status, _) = get_json(&addr, "/readyz");
        assert_eq!(
            status, 200,
            "a paused stream does not make the process unready"
        );
        let (status, body) = post(&addr, "/api/v1/streams/ev/restart", Some(TOKEN), "");
        bodies.push_str(&body.to_string());
        assert_eq!(status, 200, "{body}");
        while state("ev")["state"] != "running" {
            assert!(Instant::now() < deadline, "{}", state("ev"));
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_ne!(state("ev")["run_id"], before);
        assert_eq!(
            post(&addr, "/api/v1/streams/nope/stop", Some(TOKEN), "").0,
            404
        );
        for path in [
            "/api/v1/streams",
            "/api/v1/streams/ev",
            "/readyz",
            "/metrics",
        ] {
            bodies.push_str(&get(&addr, path).1);
        }
    }));
    let (status, logs) = stop(child, &log);
    if let Err(e) = r {
        eprintln!("daemon log:\n{logs}");
        std::panic::resume_unwind(e);
    }
    // The stream unblocked by the skip ended well: the run is a success.
    assert!(status.success(), "{logs}");
    assert!(!bodies.contains(TOKEN), "a response shows the token");
    assert!(!logs.contains(TOKEN), "the log shows the token");
    assert!(logs.contains("operator action"), "{logs}");
    assert_exactly(
        &ids(&verify("delta", &root.join("t_bad"), Some("bad")), "id"),
        &[0, 1, 2, 10, 11, 12],
    );
}

/// `[monitoring] health_table`: each batch's progress record lands in a Delta table that an
/// independent reader can query, including the last batches before shutdown.
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
health_table_interval = "1s"

[streams.ev]
source = "{root}/in_ev"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "100ms"
max_files_per_trigger = 1
sink.path = "{root}/t_ev"
"#,
    );
    let log = root.join("daemon.log");
    let mut child = Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .args(["run", "--config", cfg.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while delta_version(&root.join("t_ev")) < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let logs = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{logs}");
    assert_eq!(delta_version(&root.join("t_ev")), 3, "{logs}");
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

/// `POST .../backfill` lists the source now: a file that lands during a one-hour poll
/// interval is ingested at once.
#[test]
fn backfill_lists_now() {
    const TOKEN: &str = "backfill-token-landfall-test-0001";
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("in")).unwrap();
    std::fs::write(root.join("in/a.json"), (0..2).map(row).collect::<String>()).unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.slow]
source = "{root}/in"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "1h"
sink.path = "{root}/t"
"#,
    );
    let log = root.join("daemon.log");
    let mut child = Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .env("LANDFALL_ADMIN_TOKEN", TOKEN)
        .args(["run", "--config", cfg.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let r = std::panic::catch_unwind(|| {
        let addr = address(&log, deadline);
        while delta_version(&root.join("t")) < 1 {
            assert!(Instant::now() < deadline, "first batch");
            std::thread::sleep(Duration::from_millis(100));
        }
        std::fs::write(
            root.join("in/b.json"),
            (10..12).map(row).collect::<String>(),
        )
        .unwrap();
        let (status, body) = post(&addr, "/api/v1/streams/slow/backfill", Some(TOKEN), "");
        assert_eq!(status, 200, "{body}");
        while delta_version(&root.join("t")) < 2 {
            assert!(Instant::now() < deadline, "the backfill did not list");
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    let logs = std::fs::read_to_string(&log).unwrap_or_default();
    if let Err(e) = r {
        eprintln!("daemon log:\n{logs}");
        std::panic::resume_unwind(e);
    }
    assert!(status.success(), "{logs}");
    assert_exactly(
        &ids(&verify("delta", &root.join("t"), Some("slow")), "id"),
        &[0, 1, 10, 11],
    );
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
    let log = root.join("daemon.log");
    let mut child = Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .args(["run", "--config", cfg.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let r = std::panic::catch_unwind(|| {
        let addr = address(&log, deadline);
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
    });
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    let logs = std::fs::read_to_string(&log).unwrap_or_default();
    if let Err(e) = r {
        eprintln!("daemon log:\n{logs}");
        std::panic::resume_unwind(e);
    }
    assert!(status.success(), "{logs}");
}
