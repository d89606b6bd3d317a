//! Every output of the binary under test, kept for the suite's secret scan: when
//! `LANDFALL_TEST_OUTPUTS` names a directory (scripts/test.sh sets it), each CLI run's output
//! and each daemon's log is copied there, and tests/deploy/scan_secrets.py fails the run when
//! one carries a credential the tests use. Included by both common/ and daemon/ (a file of its own for that).
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

/// Keep `bytes` (what `what` printed) for the scan; nothing when the variable is unset.
pub fn keep_output(what: &str, bytes: &[u8]) {
    let Some(dir) = std::env::var_os("LANDFALL_TEST_OUTPUTS") else {
        return;
    };
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::create_dir_all(&dir);
    let test = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let name = format!(
        "{test}-{}-{}-{what}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    );
    let _ = std::fs::write(dir.join(name), bytes);
}
