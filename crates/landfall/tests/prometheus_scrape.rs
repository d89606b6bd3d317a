//! Debian's Prometheus server on loopback scrapes a running daemon every second; the known
//! ingest's row count comes back through Prometheus's HTTP query API, and the target is up.

mod common;
mod daemon;
use common::*;
use daemon::*;
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

const MISSING: &str = "Debian's `prometheus` package is not installed: run scripts/test.sh \
                       (scripts/lib.sh ensure_system_packages installs it) or \
                       `apt-get install --no-install-recommends prometheus`";

/// The value of the single series `query` returns now, if exactly one.
fn instant_value(prometheus: &str, query: &str) -> Option<String> {
    let q: String = url::form_urlencoded::byte_serialize(query.as_bytes()).collect();
    let (status, body) = try_get(prometheus, &format!("/api/v1/query?query={q}")).ok()?;
    assert_eq!(status, 200, "{query}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{query}: {e}: {body}"));
    assert_eq!(v["status"], "success", "{query}: {body}");
    let result = v["data"]["result"].as_array()?;
    match result.as_slice() {
        [one] => one["value"][1].as_str().map(str::to_string),
        [] => None,
        _ => panic!("{query} matched more than one series: {body}"),
    }
}

#[test]
fn prometheus_scrapes_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for f in 0..4u64 {
        write_rows(
            &root.join("landing"),
            &format!("f{f}.json"),
            f * 5..f * 5 + 5,
        );
    }
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
    let mut d = Daemon::start(bin(), &cfg, &root.join("daemon.log"), deadline);
    let addr = d.addr.clone();

    let port = free_port();
    let prom_addr = format!("127.0.0.1:{port}");
    let prom_cfg = root.join("prometheus.yml");
    std::fs::write(
        &prom_cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: landfall\n    static_configs:\n      - targets: [\"{addr}\"]\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", prom_cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            root.join("prometheus-data").display()
        ))
        .arg(format!("--web.listen-address={prom_addr}"))
        .current_dir(root);
    let mut prom = Process::spawn("prometheus", cmd, &root.join("prometheus.log"), MISSING);

    // Ready: its storage is open and it serves queries.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok((200, _)) = try_get(&prom_addr, "/-/ready") {
            break;
        }
        prom.assert_running();
        assert!(
            Instant::now() < deadline,
            "prometheus was not ready in 60 s:\n{}",
            prom.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The known ingest through a scrape: 4 files, 20 rows.
    let query = "landfall_rows_committed_total{stream=\"ev\"}";
    let mut last = None;
    while last.as_deref() != Some("20") {
        assert!(
            Instant::now() < deadline,
            "{query} was {last:?}, not 20, after 60 s; daemon's metrics:\n{}\nprometheus log:\n{}",
            try_get(&addr, "/metrics").map(|r| r.1).unwrap_or_default(),
            prom.logs()
        );
        prom.assert_running();
        std::thread::sleep(Duration::from_millis(500));
        last = instant_value(&prom_addr, query);
    }
    assert_eq!(
        instant_value(&prom_addr, "landfall_files_committed_total{stream=\"ev\"}").as_deref(),
        Some("4")
    );
    assert_eq!(
        instant_value(&prom_addr, "up{job=\"landfall\"}").as_deref(),
        Some("1")
    );
    // The target as Prometheus sees it: healthy, at the daemon's address.
    let (_, targets) = get_json(&prom_addr, "/api/v1/targets?state=active");
    let active = targets["data"]["activeTargets"].as_array().unwrap();
    assert_eq!(active.len(), 1, "{targets}");
    assert_eq!(active[0]["health"], "up", "{targets}");
    assert_eq!(active[0]["labels"]["instance"], addr.as_str(), "{targets}");
    let prom_status = prom.stop(Duration::from_secs(30));
    let status = d.process.stop(Duration::from_secs(30));
    assert!(
        prom_status.is_some(),
        "prometheus did not stop within 30 s of SIGTERM"
    );
    let status = status.expect("the daemon did not stop within 30 s of SIGTERM");
    assert!(status.success(), "{}", d.process.logs());
}
