//! Crash injection for the exactly-once tests: `LANDFALL_FAILPOINTS="after_commit=0.3,..."`
//! aborts the process (like `kill -9`: no destructors, no flush) at the named point with the
//! given probability. Unset in production; reading it costs one environment lookup per point.
//!
//! Points, in protocol order: `after_plan`, `after_stage` (data files written, not committed),
//! `after_commit` (the table has the batch, the state does not), `after_record`.

use std::sync::atomic::{AtomicU64, Ordering};

static SEED: AtomicU64 = AtomicU64::new(0);

fn next_random() -> f64 {
    let mut x = SEED.load(Ordering::Relaxed);
    if x == 0 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        x = t ^ ((std::process::id() as u64) << 32) | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    SEED.store(x, Ordering::Relaxed);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Abort here if the failpoint `name` is armed and its dice say so.
pub fn hit(name: &str) {
    let Ok(spec) = std::env::var("LANDFALL_FAILPOINTS") else {
        return;
    };
    for item in spec.split(',') {
        if let Some((n, p)) = item.split_once('=')
            && n.trim() == name
            && let Ok(p) = p.trim().parse::<f64>()
            && next_random() < p
        {
            eprintln!("failpoint {name}: aborting");
            std::process::abort();
        }
    }
}
