//! The fault soak: three continuous streams in one daemon, one per discovery mode (listing,
//! S3 -> SQS notifications, managed file events), every request of theirs (S3 reads and
//! listings, the Delta commits of the listing stream's table on S3, every SQS call) through
//! the fault proxy, which faults one in ten (`LANDFALL_SOAK_FAULT_PCT`) in one of six ways;
//! writers keep uploading files while the daemon is killed with SIGKILL at random instants
//! (`LANDFALL_SOAK_KILLS`, default 6; bench/fault_soak.sh runs a longer one). No daemon may
//! stop a stream for these transient causes (checked in every run's log; a stream restarted
//! with backoff after a failed attempt is counted, not failed: object_store does not retry
//! some failures, such as a DeleteObjects answer cut short, and the stream's retry is the
//! supervisor's). The clients' own retries show as `landfall_storage_requests_total{op="FAILED"}`. Then the faults stop
//! and one drain must bring every stream to exactly its files: 0 lost, 0 duplicated, checked
//! by the independent reader. The run prints one `fault soak:` line of figures.

mod common;
mod daemon;
use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const FAULTS: [Fault; 6] = [
    Fault::Close,
    Fault::LoseAnswer,
    Fault::CutAnswer,
    Fault::SlowDown,
    Fault::InternalError,
    Fault::Delay(2000),
];

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn soak_config(
    root: &Path,
    proxy: &str,
    b1: &str,
    q1: &str,
    b2: &str,
    q2: &str,
) -> std::path::PathBuf {
    let store = moto_store_toml(proxy);
    let stream = |name: &str, source: &str, discovery: &str, sink: &str| {
        format!(
            r#"
[streams.{name}]
source = "{source}"
source_store = "flaky"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "{discovery}"
trigger.processing_time = "0s"
max_files_per_trigger = 20
{sink}
"#
        )
    };
    let local_sink = |name: &str| {
        format!(
            "[streams.{name}.sink]\npath = \"{}/tables/{name}\"\n",
            root.display()
        )
    };
    let mut body = format!(
        r#"
[server]
state_dir = "{root}/state"

[stores.flaky]
{store}

[locations.raw]
url = "s3://{b2}/events"
store = "flaky"
file_events = true
queue_url = "{q2}"
wait_time = "1s"
visibility_timeout = "10s"
"#,
        root = root.display()
    );
    body += &stream(
        "listed",
        &format!("s3://{b1}/listed"),
        "listing",
        &format!("[streams.listed.sink]\npath = \"s3://{b1}/tables/listed\"\nstore = \"flaky\"\n"),
    );
    body += &stream(
        "notified",
        &format!("s3://{b1}/notified"),
        "notifications",
        &format!(
            "[streams.notified.notifications]\nqueue_url = \"{q1}\"\nwait_time = \"1s\"\nvisibility_timeout = \"10s\"\n{}",
            local_sink("notified")
        ),
    );
    body += &stream(
        "events",
        &format!("s3://{b2}/events"),
        "file_events",
        &local_sink("events"),
    );
    write_config(root, &body)
}

async fn listed_rows(b1: &str, root: &Path) -> Vec<u64> {
    let s = moto_store(&format!("s3://{b1}"));
    let copy = root.join("listed-copy");
    download(&s, "tables/listed", &copy).await;
    ids(&verify("delta", &copy, Some("listed")), "id")
}

#[tokio::test(flavor = "multi_thread")]
async fn three_modes_under_network_faults_and_kill_9_lose_and_duplicate_nothing() {
    let kills = env_or("LANDFALL_SOAK_KILLS", 6) as usize;
    let pct = env_or("LANDFALL_SOAK_FAULT_PCT", 10);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let b1 = unique("soak1");
    let b2 = unique("soak2");
    let q1 = aws(&["wire", &b1, &b1, "notified/"])["queue_url"]
        .as_str()
        .unwrap()
        .to_string();
    let q2 = aws(&["wire", &b2, &b2, "events/"])["queue_url"]
        .as_str()
        .unwrap()
        .to_string();
    let on = Arc::new(AtomicBool::new(true));
    let proxy = {
        let (on, n) = (on.clone(), AtomicU64::new(0));
        FaultProxy::start(&moto_endpoint(), move |_| {
            // A fixed sequence: request i is faulted when (i * 7919) % 100 < pct, the fault
            // kind turning with each faulted request.
            let i = n.fetch_add(1, Ordering::SeqCst);
            if on.load(Ordering::SeqCst) && (i * 7919) % 100 < pct {
                FAULTS[(i as usize / 7) % FAULTS.len()]
            } else {
                Fault::Pass
            }
        })
    };
    let cfg = soak_config(root, &proxy.endpoint(), &b1, &q1, &b2, &q2);
    let writers = [
        FlowingWriter::start(&b1, "'listed/f%06d.json' % i", 3),
        FlowingWriter::start(&b1, "'notified/f%06d.json' % i", 3),
        FlowingWriter::start(&b2, "'events/f%06d.json' % i", 3),
    ];
    let started = Instant::now();
    let (progressed, restarts) = kill_9_under_faults(&cfg, kills, 1500, 2500);
    // Runs are short and faulted: some end before their first commit. The watched run below
    // must commit.
    assert!(progressed >= 1, "none of {kills} runs committed a batch");
    // One daemon watched for 15 s under the faults: it commits, and the retries show.
    let mut d = daemon::Daemon::start(
        bin(),
        &cfg,
        &root.join("watched.log"),
        Instant::now() + Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_secs(15));
    let scrape = daemon::get(&d.addr, "/metrics").1;
    let (_, watched) = d.stop(Duration::from_secs(60));
    assert_no_stream_stopped_for_good(&watched, "the watched daemon");
    let restarts = restarts + watched.matches("stream failed; restarting").count();
    let retried = daemon::metric_sum(&scrape, "landfall_storage_requests_total", "op=\"FAILED\"");
    let committed = daemon::metric_sum(&scrape, "landfall_batches_committed_total", "stream=");
    assert!(
        committed > 0.0,
        "no batch committed under the faults:\n{scrape}"
    );
    // With no faults (LANDFALL_SOAK_FAULT_PCT=0: a crash soak only) there is nothing to count.
    assert!(
        retried > 0.0 || pct == 0,
        "no failed attempt counted under the faults:\n{scrape}"
    );
    let written: Vec<u64> = writers.into_iter().map(FlowingWriter::stop).collect();
    on.store(false, Ordering::SeqCst);
    let requests = proxy.count_where(|_| true);
    let faulted: BTreeMap<String, usize> = FAULTS
        .iter()
        .map(|f| (format!("{f:?}"), proxy.count(*f)))
        .collect();
    for (kind, n) in &faulted {
        assert!(*n > 0 || pct == 0, "no {kind} injected: {faulted:?}");
    }
    // Deliveries the killed daemons held come back after their visibility timeout (later
    // still for a receive the proxy delayed past the kill): wait until none is in flight.
    let deadline = Instant::now() + Duration::from_secs(60);
    for q in [&q1, &q2] {
        while aws(&["peek", q])["in_flight"].as_u64() != Some(0) {
            assert!(Instant::now() < deadline, "messages stay in flight in {q}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let recovering = Instant::now();
    let o = drain(&cfg);
    let recovered_in = recovering.elapsed();
    let rows = |name: &str| {
        ids(
            &verify("delta", &root.join("tables").join(name), Some(name)),
            "id",
        )
    };
    let got = [
        listed_rows(&b1, root).await,
        rows("notified"),
        rows("events"),
    ];
    for ((name, got), n) in ["listed", "notified", "events"]
        .iter()
        .zip(&got)
        .zip(&written)
    {
        let want: Vec<u64> = (0..3 * n).collect();
        eprintln!("{name}: {n} files written, {} rows", got.len());
        assert_exactly(got, &want);
    }
    let log = text(&o);
    eprintln!(
        "fault soak: {kills} kills, {requests} requests under faults, {} faulted ({faulted:?}), {retried} failed attempts counted in the watched run, {restarts} stream restarts, files {written:?}, 0 lost, 0 duplicated, drain after the faults {:.1} s, whole run {:.0} s",
        faulted.values().sum::<usize>(),
        recovered_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(log.contains("this run:"), "{log}");
}
