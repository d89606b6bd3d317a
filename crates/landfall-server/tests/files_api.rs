//! `GET /api/v1/streams/{name}/files` over real HTTP against a ledger of a few thousand files:
//! small pages, with and without a state filter, give every file exactly once in key order;
//! one page reads its rows from the ledger, not the ledger (the issue: 200,000 files were read
//! whole for every `?limit=1`).

use chrono::{TimeZone, Utc};
use landfall_core::{BatchLimits, CommitReceipt, FileMeta, StateStore};
use landfall_engine::Hub;
use landfall_server::AppState;
use landfall_state::{Kv, KvError, KvOp, Ledger, MemoryKv};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FILES: u64 = 2_500;
const COMMITTED: usize = 600;

/// A store that counts the entries scans hand to the ledger.
struct Counting {
    inner: MemoryKv,
    visited: Arc<AtomicU64>,
}

impl Kv for Counting {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.inner.get(key)
    }
    fn scan(
        &self,
        prefix: &[u8],
        from: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), KvError> {
        self.inner.scan(prefix, from, &mut |k, v| {
            self.visited.fetch_add(1, Ordering::Relaxed);
            visit(k, v)
        })
    }
    fn write(&self, ops: Vec<KvOp>) -> Result<(), KvError> {
        self.inner.write(ops)
    }
}

/// `GET path` over HTTP/1.0: status and JSON body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, Value) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: test\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Every page of `query` from `after` on, following `next`: the paths in the order received.
async fn page_all(addr: std::net::SocketAddr, query: &str, after: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut after = after.to_string();
    for _ in 0..10 * FILES {
        let (status, page) = get(
            addr,
            &format!("/api/v1/streams/s/files?{query}&after={after}"),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        for f in page["files"].as_array().unwrap() {
            out.push(f["meta"]["path"].as_str().unwrap().to_string());
        }
        assert_eq!(
            page["next"], page["next_after"],
            "the older name pages the same"
        );
        match page["next"].as_str() {
            Some(n) => after = n.to_string(),
            None => return out,
        }
    }
    panic!("paging does not end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_follow_the_cursor_and_read_only_the_page() {
    let visited = Arc::new(AtomicU64::new(0));
    let ledger = Ledger::new(
        "s",
        Counting {
            inner: MemoryKv::default(),
            visited: visited.clone(),
        },
    );
    let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    // Discovered in an order unlike the paths' (reversed digits).
    let files: Vec<_> = (0..FILES)
        .map(|i| {
            let n: String = format!("{i:05}").chars().rev().collect();
            let m = FileMeta {
                path: format!("landing/{n}.json"),
                size: i,
                modified: now,
                etag: None,
                version: None,
            };
            (m.key(false), m)
        })
        .collect();
    ledger.admit(&files, None, now).unwrap();
    let limits = BatchLimits {
        max_files: COMMITTED,
        max_bytes: None,
    };
    let plan = ledger.plan_batch(limits, 0, now).unwrap().unwrap();
    let receipt = CommitReceipt {
        table_version: 3,
        rows: 1,
        data_files: 1,
        data_bytes: 1,
        committed_at: now,
        recovered: false,
    };
    ledger.record_committed(plan.batch_id, receipt).unwrap();
    let mut paths: Vec<String> = files.iter().map(|(_, m)| m.path.clone()).collect();
    paths.sort();
    let mut committed: Vec<String> = plan.files.iter().map(|(_, m)| m.path.clone()).collect();
    committed.sort();

    let hub = Hub::new();
    hub.register("s").running(Arc::new(ledger));
    let listener = landfall_server::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let state = AppState::new(hub, None);
    let server = tokio::spawn(landfall_server::serve(listener, state, shutdown));

    assert_eq!(page_all(addr, "limit=7", "").await, paths);
    assert_eq!(page_all(addr, "limit=10000", "").await, paths);
    assert_eq!(
        page_all(addr, "limit=9&state=committed", "").await,
        committed
    );
    let discovered: Vec<String> = paths
        .iter()
        .filter(|p| !committed.contains(p))
        .cloned()
        .collect();
    assert_eq!(
        page_all(addr, "limit=50&state=discovered", "").await,
        discovered
    );

    // One page deep into the ledger reads that page (and one row more), not the ledger.
    let (_, first) = get(addr, "/api/v1/streams/s/files?limit=2000").await;
    let cursor = first["next"].as_str().unwrap().to_string();
    let before = visited.load(Ordering::Relaxed);
    let (status, page) = get(
        addr,
        &format!("/api/v1/streams/s/files?limit=1&after={cursor}"),
    )
    .await;
    let read = visited.load(Ordering::Relaxed) - before;
    assert_eq!(status, 200);
    assert_eq!(page["files"][0]["meta"]["path"], paths[2_000].as_str());
    assert!(read <= 2, "a page of one row read {read} ledger rows");

    // Typed rows: numbers as numbers, absent values as null.
    let (_, d) = get(addr, "/api/v1/streams/s/files?limit=1&state=discovered").await;
    let row = &d["files"][0];
    assert!(row["meta"]["size"].is_u64() && row["seq"].is_u64(), "{row}");
    assert!(row["batch_id"].is_null() && row["skip"].is_null(), "{row}");
    assert!(row["meta"]["etag"].is_null(), "{row}");
    let (_, c) = get(addr, "/api/v1/streams/s/files?limit=1&state=committed").await;
    assert_eq!(c["files"][0]["batch_id"], 0, "{c}");
    assert_eq!(c["files"][0]["table_version"], 3, "{c}");

    // The form from before cursors: a number is a discovery sequence number.
    let late = page_all(addr, "limit=100", "2400").await;
    assert_eq!(late.len(), 100);
    assert!(late.is_sorted());
    assert_eq!(
        get(addr, "/api/v1/streams/s/files?after=nonsense").await.0,
        400
    );
    assert_eq!(
        get(addr, "/api/v1/streams/s/files?state=bogus").await.0,
        400
    );

    stop.send(true).unwrap();
    server.await.unwrap();
}
