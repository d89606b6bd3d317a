//! The independent reader (tests/verify/verify_table.py: DuckDB log replay + the deltalake
//! package) and exact checks of what it read.

#[allow(unused_imports)]
use super::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Rows of the table as the independent reader sees them.
pub fn verify(kind: &str, table: &Path, stream: Option<&str>) -> Value {
    match stream {
        Some(s) => verify_args(kind, table, &["--stream", s]),
        None => verify_args(kind, table, &[]),
    }
}

/// The independent verifier with extra arguments (`--orphans`, `--stats`, ...).
pub fn verify_args(kind: &str, table: &Path, args: &[&str]) -> Value {
    let script = repo_root().join("tests/verify/verify_table.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(kind)
        .arg(table)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "independent verification failed:\n{}",
        text(&o)
    );
    serde_json::from_slice(&o.stdout).expect("verifier prints JSON")
}

/// The sorted values of integer column `col`.
pub fn ids(v: &Value, col: &str) -> Vec<u64> {
    let mut out: Vec<u64> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r[col]
                .as_str()
                .unwrap_or_else(|| panic!("no {col} in {r}"))
                .parse()
                .unwrap()
        })
        .collect();
    out.sort_unstable();
    out
}

/// Assert `got` is exactly `0..n` style `expected`: reports lost and duplicated ids.
pub fn assert_exactly(got: &[u64], expected: &[u64]) {
    use std::collections::BTreeMap;
    let mut counts: BTreeMap<u64, i64> = BTreeMap::new();
    for id in expected {
        *counts.entry(*id).or_default() -= 1;
    }
    for id in got {
        *counts.entry(*id).or_default() += 1;
    }
    let lost: Vec<_> = counts
        .iter()
        .filter(|(_, c)| **c < 0)
        .map(|(k, _)| *k)
        .take(20)
        .collect();
    let dup: Vec<_> = counts
        .iter()
        .filter(|(_, c)| **c > 0)
        .map(|(k, _)| *k)
        .take(20)
        .collect();
    assert!(
        lost.is_empty() && dup.is_empty(),
        "rows lost (first 20): {lost:?}; rows duplicated or unexpected (first 20): {dup:?}; got {} rows, expected {}",
        got.len(),
        expected.len()
    );
}

/// The Delta table's latest version, read from the log directory.
pub fn delta_version(table: &Path) -> i64 {
    let Ok(log) = std::fs::read_dir(table.join("_delta_log")) else {
        return -1;
    };
    log.filter_map(|e| {
        e.ok()?
            .file_name()
            .to_str()?
            .strip_suffix(".json")?
            .parse::<i64>()
            .ok()
    })
    .max()
    .unwrap_or(-1)
}

/// The verifier's row whose `id` column is `id`.
pub fn row_by_id(v: &Value, id: u64) -> &Value {
    let id = id.to_string();
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap_or_else(|| panic!("no row with id {id}"))
}

/// Every commit of a local Delta table, as the actions of each log entry.
pub fn commits(table: &Path) -> Vec<Vec<Value>> {
    (0..=delta_version(table))
        .map(|v| {
            std::fs::read_to_string(table.join(format!("_delta_log/{v:020}.json")))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        })
        .collect()
}
