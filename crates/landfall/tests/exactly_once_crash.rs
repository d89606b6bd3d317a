//! Exactly-once under crashes: the daemon is killed at random moments (SIGKILL from outside,
//! and aborts at the protocol's failpoints, including between the Delta commit and the state
//! record) while it ingests a few thousand files that keep arriving; it is restarted each time.
//! At the end every input row must be in the table exactly once.
//!
//! Sized for CI (`LANDFALL_CRASH_FILES`, `LANDFALL_CRASH_KILLS` scale it; bench/crash_soak.sh runs
//! a longer variant).

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % bound
    }
}

#[test]
fn no_row_lost_or_duplicated_across_kills() {
    let files = env_or("LANDFALL_CRASH_FILES", 3000);
    let kills_wanted = env_or("LANDFALL_CRASH_KILLS", 30);
    let rows_per_file = 5;
    let seed = env_or(
        "LANDFALL_CRASH_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    eprintln!("crash test: files={files} kills={kills_wanted} seed={seed}");
    let mut rng = Lcg(seed);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let landing = root.join("landing");
    let cfg = config_in(
        root,
        r#"
[streams.crashy]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
max_files_per_trigger = 40
poll_interval = "100ms"

[streams.crashy.sink]
path = "{root}/table"
partition_by = ["tag"]
target_file_size = "64k"
"#,
    );
    // Half the files land before the first start, the rest while the daemon crashes and restarts.
    let mut written = 0u64;
    let write_more = |n: u64, written: &mut u64| {
        for _ in 0..n {
            if *written >= files {
                break;
            }
            let f = *written;
            write_rows(
                &landing.join(format!("d{:02}", f % 16)),
                &format!("f{f:06}.json"),
                f * rows_per_file..(f + 1) * rows_per_file,
            );
            *written += 1;
        }
    };
    write_more(files / 2, &mut written);

    let mut kills = 0;
    let mut commit_record_kills = 0;
    let started = Instant::now();
    let mut round = 0u64;
    while kills < kills_wanted {
        round += 1;
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "crash loop took too long ({kills} kills)"
        );
        let failpoints = match rng.next(4) {
            0 => "after_commit=0.9",
            1 => "after_stage=0.3,after_commit=0.2",
            2 => "after_plan=0.2,after_record=0.2",
            _ => "",
        };
        let mut child = Command::new(bin())
            .args(["run", "--config", cfg.to_str().unwrap()])
            .env("LANDFALL_FAILPOINTS", failpoints)
            .env("LANDFALL_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let wait = Duration::from_millis(100 + rng.next(600));
        let deadline = Instant::now() + wait;
        let mut exited = None;
        while Instant::now() < deadline {
            if let Some(st) = child.try_wait().unwrap() {
                exited = Some(st);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if exited.is_none() {
            child.kill().unwrap(); // SIGKILL
        }
        child.wait().unwrap();
        let mut err = String::new();
        use std::io::Read;
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        if err.contains("failpoint after_commit: aborting") {
            commit_record_kills += 1;
        }
        match exited {
            None => kills += 1,
            Some(st) if !st.success() && err.contains("failpoint") => kills += 1,
            Some(st) => panic!(
                "round {round}: the daemon exited by itself ({st}) without a failpoint:\n{err}"
            ),
        }
        write_more(files / (kills_wanted * 2) + 1, &mut written);
    }
    write_more(files, &mut written);
    eprintln!(
        "crash test: {kills} kills ({commit_record_kills} between commit and record) in {round} rounds, {:?}",
        started.elapsed()
    );

    let out = drain(&cfg);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("0 pending"), "{summary}");
    let expected: Vec<u64> = (0..files * rows_per_file).collect();
    let v = verify("delta", &root.join("table"), None);
    assert_exactly(&ids(&v, "id"), &expected);
    assert!(
        commit_record_kills > 0,
        "no kill landed between the Delta commit and the state record (seed {seed}); the test did not exercise that window"
    );

    // Every file is recorded as ingested exactly once, and no data file is orphaned.
    let o = landfall(&[
        "state",
        "crashy",
        "--config",
        cfg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len() as u64, files);
    assert!(rows.iter().all(|r| r["ingestion_state"] == "INGESTED"));
    let referenced = v["rows"].as_u64().unwrap();
    assert_eq!(referenced, files * rows_per_file);
    let on_disk = count_parquet(&root.join("table"));
    let in_log = live_files(&root.join("table"));
    assert_eq!(
        on_disk, in_log,
        "data files on disk that the table does not reference (orphans)"
    );
}

fn count_parquet(p: &std::path::Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() && !path.ends_with("_delta_log") {
            n += count_parquet(&path);
        } else if path.extension().is_some_and(|x| x == "parquet") {
            n += 1;
        }
    }
    n
}

fn live_files(table: &std::path::Path) -> usize {
    let mut live = std::collections::HashSet::new();
    let mut commits: Vec<_> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    commits.sort();
    for c in commits {
        for line in std::fs::read_to_string(c).unwrap().lines() {
            let a: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(p) = a["add"]["path"].as_str() {
                live.insert(p.to_string());
            }
            if let Some(p) = a["remove"]["path"].as_str() {
                live.remove(p);
            }
        }
    }
    live.len()
}
