//! Admission with a large ledger: fill a RocksDB ledger with `N` tracked files (default
//! 1,000,000) through `admit` in pages of 1,000, then time what one discovery round costs once
//! the ledger is large: `may_be_new` on a page of 1,000 known files, on a page of 1,000 new
//! ones, and `admit` of 1,000 new files; then a restart (the ledger closed, opened again and
//! read as a worker reads it before its first round). Prints JSON with rates, the restart's
//! time and the process RSS. Run by
//! bench/admission_bench.sh (a release build is faster; the figures in docs/benchmarks.md say
//! which was used).
//!
//!   cargo run -p landfall-state --example admission_bench [N] [--keep DIR]

use chrono::Utc;

/// The daemon's allocator and options (crates/landfall/src/memory.rs), so that the RSS and
/// the rates are the daemon's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[allow(non_upper_case_globals)]
#[unsafe(export_name = "malloc_conf")]
pub static malloc_conf: &[u8; 70] =
    b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:4\0";
use landfall_core::{FileMeta, StateStore};
use std::time::Instant;

fn meta(i: u64) -> FileMeta {
    FileMeta {
        path: format!("landing/2026/11/30/{:02}/part-{i:010}.json", i % 24),
        size: 1000 + i % 100,
        modified: Utc::now(),
        etag: Some(format!("\"{i:032x}\"")),
        version: None,
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

fn page(range: std::ops::Range<u64>) -> Vec<FileMeta> {
    range.map(meta).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    // `--keep <dir>`: the ledger is made in (an empty) `<dir>` and left there, for
    // bench/state_bench.py to read with `landfall state`.
    let kept = args
        .iter()
        .position(|a| a == "--keep")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = kept.clone().unwrap_or_else(|| temp.path().to_path_buf());
    let ledger = landfall_state::open_rocks("bench", &dir).expect("ledger");
    let rss_start = rss_mb();
    let t = Instant::now();
    for start in (0..n).step_by(1000) {
        let files = page(start..(start + 1000).min(n));
        let keyed: Vec<_> = files.iter().map(|m| (m.key(false), m.clone())).collect();
        let cursor = files.last().map(|m| m.path.clone());
        ledger
            .admit(&keyed, cursor.as_deref(), Utc::now())
            .expect("admit");
    }
    let fill_s = t.elapsed().as_secs_f64();
    let rss_filled = rss_mb();
    // One round's costs with the ledger full, averaged over 20 pages each.
    let rounds = 20u64;
    let time = |f: &mut dyn FnMut(u64)| {
        let t = Instant::now();
        for r in 0..rounds {
            f(r);
        }
        t.elapsed().as_secs_f64() / rounds as f64
    };
    let known_s = time(&mut |r| {
        let start = (r * 7919 * 1000) % n.saturating_sub(1000).max(1);
        let v = ledger
            .may_be_new(&page(start..start + 1000), false)
            .unwrap();
        assert!(v.iter().all(|b| !b));
    });
    let new_s = time(&mut |r| {
        let start = n + 1_000_000 + r * 1000;
        let v = ledger
            .may_be_new(&page(start..start + 1000), false)
            .unwrap();
        assert!(v.iter().all(|b| *b));
    });
    let admit_s = time(&mut |r| {
        let start = n + r * 1000;
        let files = page(start..start + 1000);
        let keyed: Vec<_> = files.iter().map(|m| (m.key(false), m.clone())).collect();
        assert_eq!(ledger.admit(&keyed, None, Utc::now()).unwrap(), 1000);
    });
    // A restart: the ledger closed and opened again, and what a worker reads before its
    // first round (an open batch to recover, the summary, the listing cursor).
    drop(ledger);
    let t = Instant::now();
    let ledger = landfall_state::open_rocks("bench", &dir).expect("reopen");
    let open_s = t.elapsed().as_secs_f64();
    ledger.open_batch().expect("open batch");
    let summary = ledger.summary().expect("summary");
    ledger.cursor().expect("cursor");
    let restart_s = t.elapsed().as_secs_f64();
    assert!(summary.files_by_state.iter().map(|(_, c)| c).sum::<u64>() >= n);
    let per_s = |secs: f64| (1000.0 / secs).round();
    println!(
        "{}",
        serde_json::json!({
            "tracked_files": n,
            "fill_files_per_s": (n as f64 / fill_s).round(),
            "lookup_known_files_per_s": per_s(known_s),
            "lookup_new_files_per_s": per_s(new_s),
            "admit_new_files_per_s": per_s(admit_s),
            "page_of_1000_ms": {
                "lookup_known": (known_s * 1000.0 * 10.0).round() / 10.0,
                "lookup_new": (new_s * 1000.0 * 10.0).round() / 10.0,
                "admit": (admit_s * 1000.0 * 10.0).round() / 10.0,
            },
            "restart_s": {"open": (open_s * 1000.0).round() / 1000.0, "open_and_recover": (restart_s * 1000.0).round() / 1000.0},
            "rss_mb": {"start": rss_start.round(), "filled": rss_filled.round(), "end": rss_mb().round()},
        })
    );
}
