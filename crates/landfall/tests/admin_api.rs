//! The daemon's admin surface over real HTTP on 127.0.0.1 (an ephemeral port read from the
//! daemon's log): admin actions behind the bearer token (skip, stop, restart), `backfill`,
//! and SIGHUP reloading the configuration.

mod common;
mod daemon;
use common::*;
use daemon::*;
use std::time::{Duration, Instant};

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
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut d = Daemon::start_with(bin(), &cfg, &root.join("daemon.log"), deadline, &[], &[]);
    let addr = d.addr.clone();
    let wait_table = |name: &str, version: i64| {
        while delta_version(&root.join(format!("t_{name}"))) < version {
            assert!(
                Instant::now() < deadline,
                "{name} did not reach version {version}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
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
    d.process.signal("HUP");
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
    d.process.signal("HUP");
    while !d.process.logs().contains("configuration rejected") {
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
    let (status, logs) = d.stop(Duration::from_secs(30));
    assert!(status.success(), "{logs}");
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
    let start = |token: Option<&str>, log: &str| {
        let mut envs = vec![("LANDFALL_LOG", "debug")];
        envs.extend(token.map(|t| ("LANDFALL_ADMIN_TOKEN", t)));
        Daemon::start_with(bin(), &cfg, &root.join(log), deadline, &envs, &[])
    };

    // Without a token, or with one too short to be safe: disabled.
    for (i, token) in [None, Some(SHORT)].into_iter().enumerate() {
        let mut d = start(token, &format!("daemon0-{i}.log"));
        for t in [Some(TOKEN), Some(SHORT), None] {
            let (status, body) = post(&d.addr, "/api/v1/streams/ev/stop", t, "");
            assert_eq!(status, 403, "{body}");
        }
        d.process.stop(Duration::from_secs(30));
    }
    // The stream `bad` stops on its corrupt file at once; the daemon keeps running for `ev`.

    let mut d = start(Some(TOKEN), "daemon.log");
    let addr = d.addr.clone();
    let mut bodies = String::new();
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
    d.process.signal("HUP");
    while !d.process.logs().contains("configuration reloaded") {
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
    let (status, logs) = d.stop(Duration::from_secs(30));
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
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = Daemon::start_with(
        bin(),
        &cfg,
        &root.join("daemon.log"),
        deadline,
        &[("LANDFALL_ADMIN_TOKEN", TOKEN)],
        &[],
    );
    let addr = d.addr.clone();
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
    let (status, logs) = d.stop(Duration::from_secs(60));
    assert!(status.success(), "{logs}");
    assert_exactly(
        &ids(&verify("delta", &root.join("t"), Some("slow")), "id"),
        &[0, 1, 10, 11],
    );
}
