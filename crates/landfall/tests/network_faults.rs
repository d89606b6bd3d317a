//! Network faults between landfall and S3 (moto server), made by a fault-injecting proxy
//! (common/fault_proxy.rs) in front of it, with a Delta table on S3:
//!
//! - the ambiguous commit: the PUT of a Delta commit lands and its answer is lost, for every
//!   commit of the run; the batch must be recorded once, its rows once, and no second commit
//!   of it written;
//! - a network that fails one request in four or five (connections closed or reset before the
//!   request went on, answers lost, `503 SlowDown`, and among the first 200 requests no answer
//!   at all on a connection kept open) for a whole drain: every row exactly once.

mod common;
use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A drain of 20 one-file batches (local source) into a Delta table on S3 through `proxy`.
fn drain_through(proxy: &FaultProxy, run: &str, root: &std::path::Path) -> std::process::Output {
    let cfg = Config::in_dir(root)
        .section(
            "stores.s3",
            &[
                ("endpoint", proxy.endpoint().as_str().into()),
                ("region", "us-east-1".into()),
                ("access_key_id", "test".into()),
                ("secret_access_key", "test".into()),
                ("allow_http", true.into()),
                // A request unanswered for 3 s is abandoned and retried (object_store's
                // default is 30 s).
                ("options.timeout", "3s".into()),
            ],
        )
        .stream(
            Stream::local(
                "s",
                &root.join("in"),
                "json",
                format!("s3://landfall-test/{run}/table").as_str(),
            )
            .set(
                "schema",
                "id BIGINT, name STRING, amount DOUBLE, tag STRING",
            )
            .set("max_files_per_trigger", 1)
            .set("sink.store", "s3"),
        )
        .write();
    landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"])
}

async fn table_rows(run: &str, root: &std::path::Path) -> (Vec<u64>, i64) {
    let s = moto_store("s3://landfall-test");
    let copy = root.join("copy");
    download(&s, &format!("{run}/table"), &copy).await;
    let v = verify("delta", &copy, Some("s"));
    (ids(&v, "id"), delta_version(&copy))
}

fn inputs(root: &std::path::Path) {
    for f in 0..20u64 {
        write_rows(&root.join("in"), &format!("f{f:02}.json"), f * 3..f * 3 + 3);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_whose_answer_is_lost_is_recorded_once() {
    let run = unique("ambiguous");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    inputs(root);
    // Every Delta commit after the table's creation: the first PUT lands and its answer is
    // lost; the client's retry of it (or the writer's next attempt) gets its answer.
    let tried = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let proxy = FaultProxy::start(&moto_endpoint(), move |call| {
        let (method, path) = (call.method.as_str(), call.path.as_str());
        let commit = path.contains("/_delta_log/")
            && path.ends_with(".json")
            && !path.contains("00000000000000000000.json");
        if method == "PUT" && commit && tried.lock().unwrap().insert(path.to_string()) {
            Fault::LoseAnswer
        } else {
            Fault::Pass
        }
    });
    let out = drain_through(&proxy, &run, root);
    let lost = proxy.count(Fault::LoseAnswer);
    assert!(lost >= 20, "only {lost} answers lost:\n{}", text(&out));
    assert!(out.status.success(), "{}", text(&out));
    let log = text(&out);
    // Seen for what it is at the commit, not left to a restart's recovery.
    assert!(
        log.contains("the commit landed though its answer was lost; recorded once"),
        "{log}"
    );
    assert!(
        !log.contains("restarting"),
        "a lost answer restarted the stream:\n{log}"
    );
    let (rows, version) = table_rows(&run, root).await;
    assert_exactly(&rows, &(0..60).collect::<Vec<_>>());
    assert_eq!(version, 20, "one commit per batch, none written twice");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_request_in_five_failing_loses_and_duplicates_nothing() {
    let run = unique("flaky");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    inputs(root);
    let n = Arc::new(AtomicU64::new(0));
    let proxy = FaultProxy::start(&moto_endpoint(), move |_| {
        match n.fetch_add(1, Ordering::SeqCst) % 25 {
            3 | 18 => Fault::Close,
            8 | 23 => Fault::LoseAnswer,
            13 => Fault::SlowDown,
            16 => Fault::Reset,
            // Each costs the 3 s timeout: eight of them.
            21 if n.load(Ordering::SeqCst) <= 200 => Fault::Hang,
            _ => Fault::Pass,
        }
    });
    let out = drain_through(&proxy, &run, root);
    for f in [
        Fault::Close,
        Fault::LoseAnswer,
        Fault::SlowDown,
        Fault::Reset,
        Fault::Hang,
    ] {
        assert!(proxy.count(f) > 0, "no {f:?} injected");
    }
    assert!(out.status.success(), "{}", text(&out));
    let (rows, version) = table_rows(&run, root).await;
    assert_exactly(&rows, &(0..60).collect::<Vec<_>>());
    assert_eq!(version, 20, "one commit per batch");
}
