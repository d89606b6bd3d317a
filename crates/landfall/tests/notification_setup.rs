//! Automatic S3 notification setup against moto server, tried the way production breaks it:
//! a source prefix with a space and a non-ASCII letter (events alone must find its files), a
//! racing writer of the bucket's notification configuration (another process, a Terraform
//! apply), an entry removed behind a running daemon's back, the access policies read back
//! against the statements AWS documents, and a teardown that removes exactly what it made.
//!
//! Each test uses its own bucket and queue names. `wait_time = "1s"` keeps available-now runs
//! short.

mod common;
mod daemon;
use common::*;
use daemon::*;
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A notification stream `ev` on s3://`bucket`/`prefix` (as written in the TOML, decoded),
/// with automatic setup of queue `queue` (through an SNS topic with `sns`).
fn owned_stream(root: &Path, bucket: &str, prefix: &str, queue: &str, sns: bool) -> PathBuf {
    write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{root}/state"

[stores.moto]
{store}

[streams.ev]
source = "s3://{bucket}/{prefix}"
source_store = "moto"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "notifications"

[streams.ev.notifications]
queue_name = "{queue}"
sns = {sns}
wait_time = "1s"
visibility_timeout = "10s"
entry_check_interval = "1s"

[streams.ev.sink]
path = "{root}/table"
"#,
            root = root.display(),
            store = moto_store_toml(&moto_endpoint()),
        ),
    )
}

fn put(root: &Path, bucket: &str, key: &str, ids: std::ops::Range<u64>) {
    let body: String = ids.map(row).collect();
    let f = root.join("upload.json");
    std::fs::write(&f, body).unwrap();
    aws(&["put", bucket, key, f.to_str().unwrap()]);
}

fn drain_run(cfg: &Path) -> std::process::Output {
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert!(o.status.success(), "{}", text(&o));
    o
}

fn table_ids(root: &Path) -> Vec<u64> {
    let table = root.join("table");
    if !table.join("_delta_log").exists() {
        return Vec::new();
    }
    ids(&verify("delta", &table, Some("ev")), "id")
}

fn notifications_cli(action: &str, cfg: &Path) -> std::process::Output {
    landfall(&[
        "notifications",
        action,
        "ev",
        "--config",
        cfg.to_str().unwrap(),
    ])
}

/// Every queue and topic entry of the bucket's notification configuration: (id, prefix rule).
fn entries(bucket: &str) -> Vec<(String, String)> {
    let conf = aws(&["notification", bucket]);
    let mut out = Vec::new();
    for kind in ["QueueConfigurations", "TopicConfigurations"] {
        for e in conf[kind].as_array().into_iter().flatten() {
            let rule = e["Filter"]["Key"]["FilterRules"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| {
                    r["Name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case("prefix"))
                })
                .and_then(|r| r["Value"].as_str())
                .unwrap_or("")
                .to_string();
            out.push((e["Id"].as_str().unwrap_or("").to_string(), rule));
        }
    }
    out.sort();
    out
}

fn range(r: std::ops::Range<u64>) -> Vec<u64> {
    r.collect()
}

/// The single statement of a policy document.
fn statement(policy: &Value) -> &Value {
    let s = policy["Statement"].as_array().expect("Statement is a list");
    assert_eq!(s.len(), 1, "{policy}");
    &s[0]
}

/// `s3://bkt/landing zone/é/`: S3 keys hold the space and the `é` as they are, moto compares
/// the rule with the raw key and AWS with its encoded form, so the rule is cut before the
/// space (`landing`) and landfall passes over the keys the rule lets through that are not
/// under the stream's prefix. After the entering listing, new files arrive by events alone.
/// The policies are AWS's documented statements; teardown removes the queue (and topic) and
/// leaves a foreign queue alone.
#[test]
fn events_alone_find_files_under_a_prefix_with_a_space_and_an_accent() {
    for sns in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bucket = unique(if sns { "odd-sns" } else { "odd" });
        aws(&["mkbucket", &bucket]);
        let queue = format!("{bucket}-q");
        let cfg = owned_stream(root, &bucket, "landing zone/é/", &queue, sns);

        // First start: setup, and the entering listing (nothing there yet).
        drain_run(&cfg);
        assert_eq!(
            entries(&bucket),
            vec![(queue.clone(), "landing".to_string())],
            "sns = {sns}"
        );

        put(root, &bucket, "landing zone/é/a.json", 0..5);
        put(root, &bucket, "landing zone/é/sub dir/b+c.json", 5..8);
        // Through the rule, outside the stream's prefix: passed over.
        put(root, &bucket, "landing zone/other/c.json", 100..103);
        put(root, &bucket, "landingX/d.json", 200..203);
        let o = drain_run(&cfg);
        assert!(
            text(&o).contains("this run:  2 file(s)"),
            "sns = {sns}: {}",
            text(&o)
        );
        assert_exactly(&table_ids(root), &range(0..8));
        let again = drain_run(&cfg);
        assert!(
            text(&again).contains("this run:  0 file(s)"),
            "{}",
            text(&again)
        );
        assert_exactly(&table_ids(root), &range(0..8));

        // The access policies, as AWS documents them for S3 -> SQS and S3 -> SNS -> SQS.
        let q = format!("{}/123456789012/{queue}", moto_endpoint());
        let queue_arn = format!("arn:aws:sqs:us-east-1:123456789012:{queue}");
        let bucket_arn = format!("arn:aws:s3:::{bucket}");
        let qp = aws(&["policy", &q]);
        let st = statement(&qp);
        assert_eq!(st["Effect"], "Allow", "{qp}");
        assert_eq!(st["Action"], "sqs:SendMessage", "{qp}");
        assert_eq!(st["Resource"], queue_arn.as_str(), "{qp}");
        if sns {
            let topic_arn = format!("arn:aws:sns:us-east-1:123456789012:{queue}");
            assert_eq!(st["Principal"]["Service"], "sns.amazonaws.com", "{qp}");
            assert_eq!(
                st["Condition"]["ArnEquals"]["aws:SourceArn"],
                topic_arn.as_str(),
                "{qp}"
            );
            let tp = aws(&["topic-policy", &topic_arn]);
            let t = statement(&tp);
            assert_eq!(t["Principal"]["Service"], "s3.amazonaws.com", "{tp}");
            assert_eq!(t["Action"], "sns:Publish", "{tp}");
            assert_eq!(t["Resource"], topic_arn.as_str(), "{tp}");
            assert_eq!(
                t["Condition"]["ArnLike"]["aws:SourceArn"],
                bucket_arn.as_str(),
                "{tp}"
            );
            assert_eq!(
                t["Condition"]["StringEquals"]["aws:SourceAccount"], "123456789012",
                "{tp}"
            );
        } else {
            assert_eq!(st["Principal"]["Service"], "s3.amazonaws.com", "{qp}");
            assert_eq!(
                st["Condition"]["ArnLike"]["aws:SourceArn"],
                bucket_arn.as_str(),
                "{qp}"
            );
            assert_eq!(
                st["Condition"]["StringEquals"]["aws:SourceAccount"], "123456789012",
                "{qp}"
            );
        }

        // Teardown removes what setup made, and nothing else.
        let foreign = format!("{bucket}-foreign");
        aws(&["mksqs", &foreign]);
        let down = notifications_cli("teardown", &cfg);
        assert!(down.status.success(), "{}", text(&down));
        assert_eq!(aws(&["queue-exists", &queue]), Value::Bool(false));
        assert_eq!(aws(&["queue-exists", &foreign]), Value::Bool(true));
        let topics = aws(&["topics"]);
        assert!(
            !topics.as_array().unwrap().iter().any(|t| t
                .as_str()
                .is_some_and(|t| t.ends_with(&format!(":{queue}")))),
            "{topics}"
        );
        assert!(entries(&bucket).is_empty(), "{:?}", entries(&bucket));
    }
}

/// Start `aws.py stale-writer`: it reads the bucket's configuration once and writes that
/// snapshot back every 50 ms for `seconds`. Returns once it has read.
fn stale_writer(bucket: &str, seconds: f64) -> std::process::Child {
    let mut child = Command::new("python3")
        .arg(repo_root().join("tests/notify/aws.py"))
        .arg(moto_endpoint())
        .args(["stale-writer", bucket, &seconds.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("ready"), "stale writer: {first}");
    child
}

/// A writer that read the configuration before landfall wrote its entry keeps writing its
/// stale copy back (a second process's read-modify-write, a Terraform apply): setup reads its
/// entry back after writing and writes it again until it holds. Then two setups of two
/// streams on one bucket, from two processes at once, in a loop: both entries survive.
#[test]
fn a_racing_writer_of_the_bucket_configuration_cannot_drop_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("race");
    aws(&["mkbucket", &bucket]);
    let queue = format!("{bucket}-q");
    let cfg = owned_stream(root, &bucket, "landing", &queue, false);
    let racer = stale_writer(&bucket, 3.0);
    let setup = notifications_cli("setup", &cfg);
    let raced = racer.wait_with_output().kept();
    assert!(raced.status.success());
    assert!(setup.status.success(), "{}", text(&setup));
    // The racer wrote its stale copy (without the entry) for 3 s after setup began.
    let writes: Value = serde_json::from_slice(&raced.stdout).unwrap();
    assert!(writes["writes"].as_u64().unwrap() > 10, "{writes}");
    assert_eq!(
        entries(&bucket),
        vec![(queue.clone(), "landing/".to_string())]
    );

    // Two processes setting up two streams of one bucket at the same instant.
    for round in 0..4 {
        let b = unique(&format!("pair{round}"));
        aws(&["mkbucket", &b]);
        let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
        let cfgs: Vec<_> = dirs
            .iter()
            .enumerate()
            .map(|(i, d)| owned_stream(d.path(), &b, &format!("p{i}"), &format!("{b}-{i}"), false))
            .collect();
        let children: Vec<_> = cfgs
            .iter()
            .map(|c| {
                Command::new(bin())
                    .args([
                        "notifications",
                        "setup",
                        "ev",
                        "--config",
                        c.to_str().unwrap(),
                    ])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let o = c.wait_with_output().kept();
            assert!(o.status.success(), "round {round}: {}", text(&o));
        }
        assert_eq!(
            entries(&b),
            vec![
                (format!("{b}-0"), "p0/".to_string()),
                (format!("{b}-1"), "p1/".to_string())
            ],
            "round {round}"
        );
    }
}

/// Files committed so far, from the daemon's metrics.
fn committed(addr: &str) -> f64 {
    let (_, scrape) = get(addr, "/metrics");
    metric(&scrape, "landfall_files_committed_total{stream=\"ev\"}").unwrap_or(0.0)
}

fn wait_committed(d: &mut Daemon, n: f64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while committed(&d.addr) < n {
        d.process.assert_running();
        assert!(
            Instant::now() < deadline,
            "{what}: {} of {n} files committed; log:\n{}",
            committed(&d.addr),
            d.process.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A running daemon's bucket entry is removed by another writer: within the check interval it
/// is written again, counted, and the source listed once, so the file published while the
/// bucket sent no events lands; later files arrive by events again. Each file exactly once.
#[test]
fn an_entry_removed_behind_the_daemons_back_is_restored_and_nothing_is_missed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("gone");
    aws(&["mkbucket", &bucket]);
    let queue = format!("{bucket}-q");
    let cfg = owned_stream(root, &bucket, "landing", &queue, false);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = Daemon::start(bin(), &cfg, &root.join("daemon.log"), deadline);
    // The entry exists once the stream runs (setup at its first start).
    while entries(&bucket).is_empty() {
        d.process.assert_running();
        assert!(Instant::now() < deadline, "no setup: {}", d.process.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    put(root, &bucket, "landing/a.json", 0..3);
    wait_committed(&mut d, 1.0, "the first file, by its event");

    // A blind write without the entry (Terraform managing the bucket's other notifications).
    aws(&["unwire", &bucket]);
    put(root, &bucket, "landing/b.json", 3..6);
    wait_committed(&mut d, 2.0, "the file published while the entry was gone");
    assert_eq!(
        entries(&bucket),
        vec![(queue.clone(), "landing/".to_string())]
    );
    let (_, scrape) = get(&d.addr, "/metrics");
    assert!(
        metric(
            &scrape,
            "landfall_notification_entry_restored_total{stream=\"ev\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "{scrape}"
    );
    assert!(
        metric(
            &scrape,
            "landfall_listings_total{stream=\"ev\",kind=\"full\"}"
        )
        .is_some_and(|n| n >= 2.0),
        "the entering listing and the one after the entry was restored: {scrape}"
    );
    put(root, &bucket, "landing/c.json", 6..9);
    wait_committed(&mut d, 3.0, "a file after the entry was restored");
    let (status, logs) = d.stop(Duration::from_secs(60));
    assert!(status.success(), "{logs}");
    assert!(
        logs.contains("removed or changed by another writer"),
        "{logs}"
    );
    assert_exactly(&table_ids(root), &range(0..9));
}

/// The listing an entry written back makes owed survives a crash between the write and the
/// listing: the file published while the entry was gone (no event for it, ever) lands at the
/// next start, although the entry is in place by then.
#[test]
fn the_listing_owed_after_a_restored_entry_survives_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("owed");
    aws(&["mkbucket", &bucket]);
    let queue = format!("{bucket}-q");
    let cfg = owned_stream(root, &bucket, "landing zone/é", &queue, false);
    put(root, &bucket, "landing zone/é/a.json", 0..3);
    drain_run(&cfg);
    assert_eq!(table_ids(root), range(0..3));

    // The entry is removed while the daemon is down, and a file published meanwhile.
    aws(&["unwire", &bucket]);
    assert!(entries(&bucket).is_empty());
    put(root, &bucket, "landing zone/é/b.json", 3..6);
    // The next start writes the entry back, then dies before it lists.
    let o = landfall_env(
        &["run", "--config", cfg.to_str().unwrap(), "--available-now"],
        &[("LANDFALL_FAILPOINTS", "after_entry_restored=#1")],
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("failpoint after_entry_restored"),
        "{}",
        text(&o)
    );
    assert_eq!(entries(&bucket).len(), 1, "written back before the crash");
    // The start after it finds the entry in place, and still lists once.
    drain_run(&cfg);
    assert_exactly(&table_ids(root), &range(0..6));
    // Later files come by their events; nothing is ingested twice.
    put(root, &bucket, "landing zone/é/c.json", 6..9);
    drain_run(&cfg);
    assert_exactly(&table_ids(root), &range(0..9));
}
