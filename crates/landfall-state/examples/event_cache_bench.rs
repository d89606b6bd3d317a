//! Events per second into a location's event cache: `N` object-created events (default
//! 200,000) appended in rounds of `ROUND` (default 1,000, one consumer round), each round one
//! synced RocksDB write with the (path, etag) identity checks, against a reference run in the
//! same process: the same JSON records written in the same synced batches to a bare RocksDB,
//! without identity checks. Then the reading side: a stream reading the whole cache from
//! position 0 in pages of 10,000. Prints JSON with rates, the ratio, and the process RSS.
//!
//!   cargo run -p landfall-state --example event_cache_bench [N] [ROUND]

use chrono::Utc;
use landfall_state::{Kv, KvOp, NewEvent, RocksKv};
use std::time::Instant;

fn event(i: u64) -> NewEvent {
    NewEvent {
        path: format!("raw/orders/2026/11/30/{:02}/part-{i:010}.json", i % 24),
        size: 1000 + i % 100,
        etag: Some(format!("\"{i:032x}\"")),
        version: None,
        modified: Utc::now(),
        sequencer: Some(format!("{:016X}", i * 7919)),
    }
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let round: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);

    // Reference: the same records, the same synced batches, no identity checks.
    let dir = tempfile::tempdir().expect("tempdir");
    let raw = RocksKv::open(dir.path()).expect("rocksdb");
    let t = Instant::now();
    for start in (0..n).step_by(round as usize) {
        let ops: Vec<KvOp> = (start..(start + round).min(n))
            .map(|i| {
                KvOp::Put(
                    format!("e/{i:020}").into_bytes(),
                    serde_json::to_vec(&event(i)).expect("json"),
                )
            })
            .collect();
        raw.write(ops).expect("write");
    }
    let reference_s = t.elapsed().as_secs_f64();

    let dir = tempfile::tempdir().expect("tempdir");
    let cache = landfall_state::open_event_cache("bench", dir.path()).expect("cache");
    let t = Instant::now();
    let mut added = 0;
    for start in (0..n).step_by(round as usize) {
        let events: Vec<NewEvent> = (start..(start + round).min(n)).map(event).collect();
        added += cache.append(&events, Utc::now()).expect("append");
    }
    let append_s = t.elapsed().as_secs_f64();
    assert_eq!(added, n);
    // Redeliveries: a round of events the cache holds adds nothing.
    let t = Instant::now();
    let again: Vec<NewEvent> = (0..round.min(n)).map(event).collect();
    assert_eq!(cache.append(&again, Utc::now()).expect("append"), 0);
    let duplicate_round_ms = t.elapsed().as_secs_f64() * 1000.0;

    let t = Instant::now();
    let (mut pos, mut read) = (0, 0u64);
    loop {
        let page = cache.read_after(pos, 10_000).expect("read");
        let Some(last) = page.last() else { break };
        pos = last.seq;
        read += page.len() as u64;
    }
    let read_s = t.elapsed().as_secs_f64();
    assert_eq!(read, n);

    let out = serde_json::json!({
        "events": n,
        "round": round,
        "append_events_per_s": (n as f64 / append_s).round(),
        "reference_raw_rocksdb_events_per_s": (n as f64 / reference_s).round(),
        "append_vs_reference": ((reference_s / append_s) * 100.0).round() / 100.0,
        "duplicate_round_ms": (duplicate_round_ms * 10.0).round() / 10.0,
        "read_events_per_s": (n as f64 / read_s).round(),
        "rss_mb": rss_mb().round(),
    });
    println!("{}", serde_json::to_string_pretty(&out).expect("json"));
}
