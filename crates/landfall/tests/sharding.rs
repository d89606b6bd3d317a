//! `landfall run --shard i/N`: three processes over nine streams of one configuration, run at
//! the same time. Each stream runs in exactly one process, every stream's table holds its rows
//! once, and a second round commits nothing.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

const STREAMS: u64 = 9;
const SHARDS: u32 = 3;

/// The streams a run summary reports, with their row counts this run.
fn ran(stdout: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current = None;
    for line in stdout.lines() {
        if let Some(rest) = line.trim().strip_prefix("stream ") {
            current = rest.split(':').next().map(str::to_string);
        } else if let (Some(s), Some(rest)) = (&current, line.trim().strip_prefix("this run:")) {
            out.insert(s.clone(), rest.trim().to_string());
        }
    }
    out
}

/// Run the three shards at once; their summaries by shard.
fn run_shards(cfg: &std::path::Path) -> Vec<BTreeMap<String, String>> {
    let children: Vec<_> = (0..SHARDS)
        .map(|i| {
            Command::new(bin())
                .env("LANDFALL_LISTEN", "127.0.0.1:0")
                .args(["run", "--config", cfg.to_str().unwrap(), "--available-now"])
                .args(["--shard", &format!("{i}/{SHARDS}")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", text(&o));
            ran(&String::from_utf8_lossy(&o.stdout))
        })
        .collect()
}

#[test]
fn three_processes_split_nine_streams() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut streams = String::new();
    for s in 0..STREAMS {
        let landing = root.join(format!("landing{s}"));
        std::fs::create_dir_all(&landing).unwrap();
        let body: String = (s * 100..s * 100 + s + 1).map(row).collect();
        std::fs::write(landing.join("a.json"), body).unwrap();
        streams.push_str(&format!(
            "\n[streams.s{s}]\nsource = \"{{root}}/landing{s}\"\nformat = \"json\"\n\
             schema = \"id BIGINT, name STRING, amount DOUBLE, tag STRING\"\n\
             sink.path = \"{{root}}/table{s}\"\n"
        ));
    }
    let cfg = config_in(root, &streams);

    let first = run_shards(&cfg);
    let mut owner = BTreeMap::new();
    for (shard, summary) in first.iter().enumerate() {
        for name in summary.keys() {
            assert!(
                owner.insert(name.clone(), shard).is_none(),
                "{name} ran in two shards: {first:?}"
            );
        }
    }
    let all: Vec<String> = (0..STREAMS).map(|s| format!("s{s}")).collect();
    assert_eq!(owner.keys().cloned().collect::<Vec<_>>(), all, "{first:?}");
    assert!(
        first.iter().all(|s| !s.is_empty()),
        "a shard ran nothing (the hash should spread 9 streams): {first:?}"
    );
    for s in 0..STREAMS {
        let table = root.join(format!("table{s}"));
        assert_eq!(delta_version(&table), 1, "s{s}: create + one batch");
        let v = verify("delta", &table, Some(&format!("s{s}")));
        assert_exactly(
            &ids(&v, "id"),
            &(s * 100..s * 100 + s + 1).collect::<Vec<_>>(),
        );
    }

    // Again: the same owners, nothing new.
    let second = run_shards(&cfg);
    for (shard, summary) in second.iter().enumerate() {
        for (name, this_run) in summary {
            assert_eq!(owner[name], shard, "{name} moved shards: {second:?}");
            assert!(this_run.starts_with("0 file(s)"), "{name}: {this_run}");
        }
    }
    for s in 0..STREAMS {
        assert_eq!(delta_version(&root.join(format!("table{s}"))), 1);
    }
}
