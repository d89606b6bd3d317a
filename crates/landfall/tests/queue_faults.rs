//! Network faults between landfall and its notification queues, made by the fault proxy
//! (common/fault_proxy.rs) in front of moto's SQS and Azurite's Storage Queue, with the files
//! themselves read directly:
//!
//! - every queue call failing now and then, each way a network fails it (`500`, the answer
//!   lost after the call landed, the answer cut short, the connection closed or reset, no
//!   answer at all on a connection kept open): a lost
//!   ReceiveMessage answer hides its messages for a visibility timeout, a lost DeleteMessageBatch
//!   answer deletes them unseen, a closed one leaves them to come back, a silent receive is
//!   abandoned after `request_timeout` (before the fix it brought, the SDK waited for ever and
//!   held the round), and the heartbeat's
//!   extensions always fail. Every file lands exactly once, and once the faults stop the queue
//!   drains to nothing;
//! - a visibility timeout that expires while the stream holds messages (slow receives, every
//!   extension failing): the deliveries whose extension failed are not deleted, come back once
//!   their visibility expires and are recognised as recorded; nothing is recorded twice, and
//!   the queue drains once the faults stop. Before the fix this test brought, a round went on
//!   receiving while receives came back full, without holding (so without extending) what it
//!   had received: with slow receives its first messages expired and came back to the same
//!   round, which received them again and again up to 1,000 messages, and no batch ran for
//!   minutes. A round now holds each message as it arrives and stops at half a visibility
//!   timeout.

mod common;
mod daemon;
use common::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Upload files `0..n` (see [`put_files_from`]).
fn put_files(root: &Path, bucket: &str, n: u64) {
    put_files_from(root, bucket, 0, n);
}

/// Stream `ev`: S3 notifications of `bucket`/landing on moto, its SQS calls through `proxy`.
fn sqs_stream(root: &Path, bucket: &str, queue_url: &str, proxy: &FaultProxy) -> PathBuf {
    write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{root}/state"

[stores.moto]
{store}

[streams.ev]
source = "s3://{bucket}/landing"
source_store = "moto"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "notifications"
trigger.processing_time = "0s"

[streams.ev.notifications]
queue_url = "{queue_url}"
endpoint = "{proxy}"
wait_time = "1s"
visibility_timeout = "10s"
request_timeout = "3s"
receivers = 1

[streams.ev.sink]
path = "{root}/table"
"#,
            root = root.display(),
            store = moto_store_toml(&moto_endpoint()),
            proxy = proxy.endpoint(),
        ),
    )
}

/// The table's rows. The daemon may be committing: the table is read from a copy whose data
/// files are copied before its log, so every commit in the copy finds its files.
fn table_ids(root: &Path) -> Vec<u64> {
    let copy = root.join("table-copy");
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(copy.join("_delta_log")).unwrap();
    let table = root.join("table");
    for e in std::fs::read_dir(&table).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            let _ = std::fs::copy(e.path(), copy.join(e.file_name()));
        }
    }
    for e in std::fs::read_dir(table.join("_delta_log")).unwrap() {
        let e = e.unwrap();
        let _ = std::fs::copy(e.path(), copy.join("_delta_log").join(e.file_name()));
    }
    ids(&verify("delta", &copy, Some("ev")), "id")
}

fn peek(queue_url: &str) -> (u64, u64) {
    let v = aws(&["peek", queue_url]);
    (
        v["visible"].as_u64().unwrap(),
        v["in_flight"].as_u64().unwrap(),
    )
}

/// A rule that faults SQS calls while `on`: receives get 500, a lost answer, a cut one or
/// no answer at all on a connection kept open (half of them), deletes a lost answer, a
/// closed connection or a reset one (three in four), every visibility extension a 500 or (one
/// in four) no answer.
fn flaky_sqs(on: Arc<AtomicBool>) -> impl Fn(&Call) -> Fault + Send + Sync + 'static {
    let receives = AtomicU64::new(0);
    let deletes = AtomicU64::new(0);
    let extends = AtomicU64::new(0);
    move |call| {
        if !on.load(Ordering::SeqCst) {
            return Fault::Pass;
        }
        match call.op.as_str() {
            "ReceiveMessage" => match receives.fetch_add(1, Ordering::SeqCst) % 8 {
                1 => Fault::InternalError,
                3 => Fault::LoseAnswer,
                5 => Fault::CutAnswer,
                7 => Fault::Hang,
                _ => Fault::Pass,
            },
            "DeleteMessageBatch" => match deletes.fetch_add(1, Ordering::SeqCst) % 4 {
                0 => Fault::LoseAnswer,
                1 => Fault::Close,
                2 => Fault::Reset,
                _ => Fault::Pass,
            },
            // Every extension fails: a 500, or (one in four) no answer at all.
            "ChangeMessageVisibilityBatch" => match extends.fetch_add(1, Ordering::SeqCst) % 4 {
                3 => Fault::Hang,
                _ => Fault::InternalError,
            },
            _ => Fault::Pass,
        }
    }
}

/// Wait until the table holds `want` (every file's rows), or fail with the daemon's log.
fn wait_for_rows(root: &Path, want: &[u64], d: &mut daemon::Daemon, deadline: Instant) {
    loop {
        if root.join("table/_delta_log").exists() {
            let got = table_ids(root);
            if got.len() >= want.len() {
                assert_exactly(&got, want);
                return;
            }
        }
        d.process.assert_running();
        assert!(
            Instant::now() < deadline,
            "the rows did not all land; the daemon's log:\n{}",
            d.process.logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Each way of failing was injected: receives got a 500, a lost, a cut and no answer; deletes a
/// lost answer, a closed and a reset connection; visibility extensions a 500 and no answer.
fn assert_every_fault(
    proxy: &FaultProxy,
    [receive, delete, extend]: [&str; 3],
    d: &mut daemon::Daemon,
) {
    for (op, fault) in [
        (receive, Fault::InternalError),
        (receive, Fault::LoseAnswer),
        (receive, Fault::CutAnswer),
        (receive, Fault::Hang),
        (delete, Fault::LoseAnswer),
        (delete, Fault::Close),
        (delete, Fault::Reset),
        (extend, Fault::InternalError),
        (extend, Fault::Hang),
    ] {
        let n = proxy.count_where(|s| s.op == op && s.fault == fault);
        assert!(n > 0, "no {op} got {fault:?}:\n{}", d.process.logs());
    }
}

/// Wait (30 s at most) for `line` in the daemon's log.
fn wait_logged(d: &mut daemon::Daemon, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d.process.logs().contains(line) {
        d.process.assert_running();
        assert!(
            Instant::now() < deadline,
            "no `{line}`:\n{}",
            d.process.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Phase two of both tests: faults off, the daemon keeps running; once the deliveries the
/// faults left behind are visible again (10 s), they are received, recognised as recorded and
/// deleted: the queue ends empty and the table unchanged.
fn drains_once_faults_stop(root: &Path, q: &str, want: &[u64], d: &mut daemon::Daemon) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (visible, in_flight) = peek(q);
        if visible + in_flight == 0 {
            break;
        }
        d.process.assert_running();
        assert!(
            Instant::now() < deadline,
            "{visible} visible and {in_flight} in-flight messages left a minute after the faults stopped:\n{}",
            d.process.logs()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_exactly(&table_ids(root), want);
}

#[test]
fn sqs_calls_failing_every_way_lose_and_duplicate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("sqsfault");
    let wired = aws(&["wire", &bucket, &bucket, "landing/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let on = Arc::new(AtomicBool::new(true));
    let proxy = FaultProxy::start(&moto_endpoint(), flaky_sqs(on.clone()));
    let cfg = sqs_stream(root, &bucket, &q, &proxy);
    put_files(root, &bucket, 60);
    let mut d = daemon::Daemon::start(
        bin(),
        &cfg,
        &root.join("daemon.log"),
        Instant::now() + Duration::from_secs(30),
    );
    // The first files arrive while the faults run, the rest half-way.
    std::thread::sleep(Duration::from_secs(4));
    put_files_from(root, &bucket, 60, 120);
    let want: Vec<u64> = (0..360).collect();
    wait_for_rows(
        root,
        &want,
        &mut d,
        Instant::now() + Duration::from_secs(120),
    );
    assert_every_fault(
        &proxy,
        [
            "ReceiveMessage",
            "DeleteMessageBatch",
            "ChangeMessageVisibilityBatch",
        ],
        &mut d,
    );
    on.store(false, Ordering::SeqCst);
    drains_once_faults_stop(root, &q, &want, &mut d);
    let (_, log) = d.stop(Duration::from_secs(30));
    assert_no_stream_stopped(&log, "the daemon under faults");
}

/// Upload files `from..to` in one boto3 run: `landing/f<i>.json` with rows `3i..3i+3`.
fn put_files_from(root: &Path, bucket: &str, from: u64, to: u64) {
    let spec: Vec<(String, String)> = (from..to)
        .map(|i| {
            (
                format!("landing/f{i:04}.json"),
                (3 * i..3 * i + 3).map(row).collect(),
            )
        })
        .collect();
    let f = root.join("putmany.json");
    std::fs::write(&f, serde_json::to_string(&spec).unwrap()).unwrap();
    aws(&["putmany", bucket, f.to_str().unwrap()]);
}

/// A visibility timeout that runs out while the daemon holds messages. Every extension is
/// refused (403: the permission is missing) and each receive is answered after 1.5 s, so a
/// round's deliveries live on their first timeout (10 s). A delivery acknowledged while it is
/// surely still invisible to others is deleted even so (a receipt whose extension was refused
/// is seen in a later delete); the daemon is then frozen (SIGSTOP, as a stalled process or a
/// throttled container) for longer than the timeout while it holds messages: those become
/// visible again before they are acknowledged, are kept, received again and recognised as
/// known. Every file lands once.
#[test]
fn a_visibility_timeout_expiring_mid_round_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("vismid");
    let wired = aws(&["wire", &bucket, &bucket, "landing/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let on = Arc::new(AtomicBool::new(true));
    let proxy = {
        let on = on.clone();
        FaultProxy::start(&moto_endpoint(), move |call| {
            match (on.load(Ordering::SeqCst), call.op.as_str()) {
                (true, "ReceiveMessage") => Fault::Delay(1500),
                (true, "ChangeMessageVisibilityBatch") => Fault::AccessDenied,
                _ => Fault::Pass,
            }
        })
    };
    let cfg = sqs_stream(root, &bucket, &q, &proxy);
    let mut d = daemon::Daemon::start(
        bin(),
        &cfg,
        &root.join("daemon.log"),
        Instant::now() + Duration::from_secs(30),
    );
    // Uploaded once the stream runs (its first listing found nothing): the queue carries them.
    wait_logged(&mut d, "stream started");
    put_files(root, &bucket, 300);
    let count = |d: &daemon::Daemon, reason: &str| {
        daemon::metric_sum(
            &daemon::get(&d.addr, "/metrics").1,
            "landfall_queue_messages_total",
            &format!("reason=\"{reason}\""),
        )
    };
    // A delivery whose extension was refused, deleted in time all the same.
    let receipts_in = |seen: &Seen| -> Vec<String> {
        serde_json::from_str::<serde_json::Value>(&seen.body)
            .ok()
            .and_then(|v| v["Entries"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e["ReceiptHandle"].as_str().map(str::to_string))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let seen = proxy.seen.lock().unwrap().clone();
        let refused: std::collections::HashSet<String> = seen
            .iter()
            .filter(|s| s.op == "ChangeMessageVisibilityBatch")
            .flat_map(receipts_in)
            .collect();
        let deleted_anyway = seen
            .iter()
            .filter(|s| s.op == "DeleteMessageBatch" && s.fault == Fault::Pass)
            .flat_map(receipts_in)
            .any(|r| refused.contains(&r));
        if deleted_anyway {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no delivery whose extension was refused was deleted in time ({} refused):\n{}",
            refused.len(),
            d.process.logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Frozen while it receives: whatever it holds then outlives its visibility timeout.
    let mut pauses = 0;
    while count(&d, "kept") == 0.0 {
        assert!(
            pauses < 5,
            "no delivery kept after {pauses} pauses:\n{}",
            d.process.logs()
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while count(&d, "files") == 0.0 {
            assert!(
                Instant::now() < deadline,
                "nothing received:\n{}",
                d.process.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        d.process.signal("STOP");
        std::thread::sleep(Duration::from_secs(11));
        d.process.signal("CONT");
        pauses += 1;
        // The round goes on and acknowledges (or fails and the next one reports) in seconds.
        let deadline = Instant::now() + Duration::from_secs(20);
        while count(&d, "kept") == 0.0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let want: Vec<u64> = (0..900).collect();
    wait_for_rows(
        root,
        &want,
        &mut d,
        Instant::now() + Duration::from_secs(120),
    );
    // Deliveries kept were received again, and recognised as known.
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&d, "files") <= 300.0 {
        assert!(
            Instant::now() < deadline,
            "no kept delivery received again:\n{}",
            daemon::get(&d.addr, "/metrics").1
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_exactly(&table_ids(root), &want);
    let log = d.process.logs();
    assert!(
        log.contains("could not extend the visibility of held messages"),
        "{log}"
    );
    on.store(false, Ordering::SeqCst);
    drains_once_faults_stop(root, &q, &want, &mut d);
    let (_, log) = d.stop(Duration::from_secs(30));
    assert_no_stream_stopped(&log, "the daemon under faults");
}

/// Azure Storage Queue calls on Azurite failing every way (the test plays Event Grid: each
/// upload's BlobCreated event is enqueued by tests/notify/azurite.py): receives get a 500, a
/// lost answer, a cut one or none at all; deletes (16 at a time) a lost answer, a closed or a
/// reset connection; every visibility update a 500 or no answer. Every blob lands once, and
/// once the faults stop the queue drains.
#[test]
fn azure_queue_calls_failing_every_way_lose_and_duplicate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let tag = unique("azfault");
    let queue = tag.to_ascii_lowercase();
    az(&["mkqueue", &queue]);
    let (_, queue_url) = azurite();
    let on = Arc::new(AtomicBool::new(true));
    let proxy = {
        let (on, receives, deletes, extends) = (
            on.clone(),
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
        );
        FaultProxy::start(&queue_url, move |call| {
            if !on.load(Ordering::SeqCst) {
                return Fault::Pass;
            }
            match call.op.as_str() {
                "GetMessages" => match receives.fetch_add(1, Ordering::SeqCst) % 8 {
                    1 => Fault::InternalError,
                    3 => Fault::LoseAnswer,
                    5 => Fault::CutAnswer,
                    7 => Fault::Hang,
                    _ => Fault::Pass,
                },
                "DeleteMessage" => match deletes.fetch_add(1, Ordering::SeqCst) % 4 {
                    0 => Fault::LoseAnswer,
                    1 => Fault::Close,
                    2 => Fault::Reset,
                    _ => Fault::Pass,
                },
                "UpdateMessage" => match extends.fetch_add(1, Ordering::SeqCst) % 4 {
                    3 => Fault::Hang,
                    _ => Fault::InternalError,
                },
                _ => Fault::Pass,
            }
        })
    };
    let cfg = write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{root}/state"

[stores.azurite]
use_emulator = true
allow_http = true

[streams.ev]
source = "az://landfall-test/{tag}/landing"
source_store = "azurite"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "notifications"
trigger.processing_time = "0s"

[streams.ev.notifications]
queue_name = "{queue}"
endpoint = "{proxy}/devstoreaccount1"
wait_time = "1s"
visibility_timeout = "10s"
request_timeout = "3s"

[streams.ev.sink]
path = "{root}/table"
"#,
            root = root.display(),
            proxy = proxy.endpoint(),
        ),
    );
    let upload = |from: u64, to: u64| {
        let spec: Vec<(String, String)> = (from..to)
            .map(|i| {
                (
                    format!("{tag}/landing/f{i:04}.json"),
                    (3 * i..3 * i + 3).map(row).collect(),
                )
            })
            .collect();
        let f = root.join("putmany.json");
        std::fs::write(&f, serde_json::to_string(&spec).unwrap()).unwrap();
        az(&["putmany", "landfall-test", &queue, f.to_str().unwrap()]);
    };
    upload(0, 30);
    let mut d = daemon::Daemon::start(
        bin(),
        &cfg,
        &root.join("daemon.log"),
        Instant::now() + Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_secs(3));
    upload(30, 60);
    let want: Vec<u64> = (0..180).collect();
    wait_for_rows(
        root,
        &want,
        &mut d,
        Instant::now() + Duration::from_secs(120),
    );
    assert_every_fault(
        &proxy,
        ["GetMessages", "DeleteMessage", "UpdateMessage"],
        &mut d,
    );
    on.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(60);
    while az(&["peek", &queue])["count"].as_u64() != Some(0) {
        d.process.assert_running();
        assert!(
            Instant::now() < deadline,
            "messages left a minute after the faults stopped:\n{}",
            d.process.logs()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    assert_exactly(&table_ids(root), &want);
    let (_, log) = d.stop(Duration::from_secs(30));
    assert_no_stream_stopped(&log, "the daemon under faults");
}
