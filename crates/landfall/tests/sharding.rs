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
            let o = c.wait_with_output().kept();
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

/// Streams of file-events locations on moto, split over 2 and then 3 `--shard` processes run
/// at once, each with its own state directory (as the StatefulSet gives each replica its own
/// volume): all streams of a location run in one shard, so one consumer reads its queue, and
/// every file reaches every stream whose prefix holds it exactly once. (Sharded by stream name,
/// two processes would each consume the one queue and each stream would miss what the other
/// process deleted.) Files arrive by events alone: the locations list never, and the streams
/// only at their first start, before any file exists.
#[test]
fn file_events_streams_split_over_separate_state_volumes_get_every_file_once() {
    for shards in [2u32, 3] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bucket = unique(&format!("shard{shards}"));
        aws(&["mkbucket", &bucket]);
        // Two locations, four streams each, and two listing streams.
        let mut body = format!(
            "[server]\nstate_dir = \"${{LANDFALL_TEST_STATE}}\"\n\n[stores.moto]\n{}\n",
            moto_store_toml(&moto_endpoint())
        );
        let prefixes = ["a", "b", "c", "d"];
        for loc in ["l1", "l2"] {
            body += &format!(
                "\n[locations.{loc}]\nurl = \"s3://{bucket}/{loc}\"\nstore = \"moto\"\nfile_events = true\n\
                 queue_name = \"{bucket}-{loc}\"\nwait_time = \"1s\"\nvisibility_timeout = \"10s\"\nlisting_interval = \"off\"\n"
            );
            for p in prefixes {
                body += &format!(
                    "\n[streams.{loc}_{p}]\nsource = \"s3://{bucket}/{loc}/{p}\"\nsource_store = \"moto\"\n\
                     format = \"json\"\nschema = \"id BIGINT, name STRING, amount DOUBLE, tag STRING\"\n\
                     discovery = \"file_events\"\nsink.path = \"{root}/tables/{loc}_{p}\"\n",
                    root = root.display()
                );
            }
        }
        for p in ["x", "y"] {
            let landing = root.join(format!("landing_{p}"));
            std::fs::create_dir_all(&landing).unwrap();
            body += &format!(
                "\n[streams.list_{p}]\nsource = \"{}\"\nformat = \"json\"\n\
                 schema = \"id BIGINT, name STRING, amount DOUBLE, tag STRING\"\nsink.path = \"{root}/tables/list_{p}\"\n",
                landing.display(),
                root = root.display()
            );
        }
        let cfg = write_config(root, &body);
        let run_all = |round: &str| -> Vec<BTreeMap<String, String>> {
            let children: Vec<_> = (0..shards)
                .map(|i| {
                    Command::new(bin())
                        .env("LANDFALL_LISTEN", "127.0.0.1:0")
                        .env("LANDFALL_TEST_STATE", root.join(format!("volume{i}")))
                        .args(["run", "--config", cfg.to_str().unwrap(), "--available-now"])
                        .args(["--shard", &format!("{i}/{shards}")])
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect();
            children
                .into_iter()
                .map(|c| {
                    let o = c.wait_with_output().kept();
                    assert!(o.status.success(), "{shards} shards, {round}: {}", text(&o));
                    ran(&String::from_utf8_lossy(&o.stdout))
                })
                .collect()
        };
        // First start: queues set up, each stream's first listing finds nothing.
        let first = run_all("setup");
        let mut owner: BTreeMap<String, usize> = BTreeMap::new();
        for (shard, summary) in first.iter().enumerate() {
            for name in summary.keys() {
                assert!(
                    owner.insert(name.clone(), shard).is_none(),
                    "{name}: {first:?}"
                );
            }
        }
        assert_eq!(owner.len(), 10, "{first:?}");
        for loc in ["l1", "l2"] {
            let shard_of: Vec<usize> = prefixes
                .iter()
                .map(|p| owner[&format!("{loc}_{p}")])
                .collect();
            assert!(
                shard_of.iter().all(|s| *s == shard_of[0]),
                "{loc}'s streams ran in shards {shard_of:?}"
            );
        }
        // 15 files per stream prefix, uploaded at once; then the streams read their events.
        let mut files: Vec<(String, String)> = Vec::new();
        let mut expected: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        let mut next = 0u64;
        for loc in ["l1", "l2"] {
            for p in prefixes {
                for k in 0..15 {
                    let ids: Vec<u64> = (next..next + 2).collect();
                    next += 2;
                    files.push((
                        format!("{loc}/{p}/f {k}.json"),
                        ids.iter().copied().map(row).collect(),
                    ));
                    expected
                        .entry(format!("{loc}_{p}"))
                        .or_default()
                        .extend(ids);
                }
            }
        }
        let spec = root.join("putmany.json");
        std::fs::write(&spec, serde_json::to_string(&files).unwrap()).unwrap();
        aws(&["putmany", &bucket, spec.to_str().unwrap()]);
        for p in ["x", "y"] {
            write_rows(&root.join(format!("landing_{p}")), "r.json", next..next + 3);
            expected.insert(format!("list_{p}"), (next..next + 3).collect());
            next += 3;
        }
        run_all("events");
        for (stream, want) in &expected {
            let table = root.join("tables").join(stream);
            let got = if table.join("_delta_log").exists() {
                ids(&verify("delta", &table, Some(stream)), "id")
            } else {
                Vec::new()
            };
            assert_exactly(&got, want);
        }
    }
}
