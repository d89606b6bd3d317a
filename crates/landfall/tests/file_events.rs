//! Managed file events against moto server's real S3 -> SQS delivery: one queue and one event
//! cache for a location, many streams reading it, each file landing exactly once in exactly
//! the streams whose prefix and glob match it, checked by the independent reader.
//!
//! Each test uses its own bucket and queue. `wait_time = "1s"` keeps available-now runs short.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Upload files at once: `(key, first id)`, each with 3 rows.
fn put_files(root: &Path, bucket: &str, files: &[(String, u64)]) {
    let spec: Vec<(String, String)> = files
        .iter()
        .map(|(k, first)| (k.clone(), (*first..first + 3).map(row).collect()))
        .collect();
    let f = root.join("putmany.json");
    std::fs::write(&f, serde_json::to_string(&spec).unwrap()).unwrap();
    aws(&["putmany", bucket, f.to_str().unwrap()]);
}

/// A stream reading location `raw`: source `s3://bucket/<prefix>`, optional glob.
struct S {
    name: &'static str,
    prefix: &'static str,
    glob: Option<&'static str>,
}

/// Stream `name` on `prefix`, no glob.
fn s(name: &'static str, prefix: &'static str) -> S {
    S {
        name,
        prefix,
        glob: None,
    }
}

impl S {
    fn glob(self, glob: &'static str) -> S {
        S {
            glob: Some(glob),
            ..self
        }
    }

    /// Whether the stream takes `key`: under its prefix at a `/`, through its glob (on the
    /// path below the prefix).
    fn takes(&self, key: &str) -> bool {
        let Some(rel) = key
            .strip_prefix(self.prefix)
            .and_then(|r| r.strip_prefix('/'))
        else {
            return false;
        };
        // The globs used here (`*.json`, `**/*.json`) both match any path ending in
        // `.json`: `*` crosses `/` in path_glob_filter, as in Spark.
        match self.glob {
            None => true,
            Some(g) => {
                assert!(g.ends_with("*.json"));
                rel.ends_with(".json")
            }
        }
    }
}

fn config(root: &Path, bucket: &str, location: &str, streams: &[S], extra: &str) -> PathBuf {
    let mut body = format!(
        r#"
[server]
state_dir = "{root}/state"

[stores.moto]
{store}

[locations.raw]
url = "s3://{bucket}/raw"
store = "moto"
file_events = true
wait_time = "1s"
visibility_timeout = "10s"
{location}
"#,
        root = root.display(),
        store = moto_store_toml(&moto_endpoint()),
    );
    for s in streams {
        body += &format!(
            r#"
[streams.{name}]
source = "s3://{bucket}/{prefix}"
source_store = "moto"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "file_events"
{glob}
{extra}
[streams.{name}.sink]
path = "{root}/tables/{name}"
"#,
            name = s.name,
            prefix = s.prefix,
            glob = s
                .glob
                .map(|g| format!("path_glob_filter = \"{g}\""))
                .unwrap_or_default(),
            root = root.display(),
        );
    }
    write_config(root, &body)
}

fn run(cfg: &Path, only: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "--config", cfg.to_str().unwrap(), "--available-now"];
    for s in only {
        args.extend(["--stream", s]);
    }
    let o = landfall(&args);
    assert!(o.status.success(), "{}", text(&o));
    o
}

fn table_ids(root: &Path, stream: &str) -> Vec<u64> {
    let table = root.join("tables").join(stream);
    if !table.join("_delta_log").exists() {
        return Vec::new();
    }
    ids(&verify("delta", &table, Some(stream)), "id")
}

fn expected(s: &S, files: &[(String, u64)]) -> Vec<u64> {
    files
        .iter()
        .filter(|(k, _)| s.takes(k))
        .flat_map(|(_, first)| *first..first + 3)
        .collect()
}

fn locations(cfg: &Path) -> Value {
    let o = landfall(&[
        "locations",
        "--config",
        cfg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// LIST requests of all streams, all runs (`landfall streams`).
fn list_requests(cfg: &Path) -> u64 {
    let o = landfall(&[
        "streams",
        "--config",
        cfg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["requests"]["LIST"].as_u64())
        .sum()
}

fn streams_on_raw() -> Vec<S> {
    vec![
        s("all", "raw"),
        s("a", "raw/a"),
        s("ab", "raw/a/b"),
        s("b", "raw/b").glob("*.json"),
        s("a2", "raw/a2").glob("**/*.json"),
    ]
}

/// Five streams on sibling and nested prefixes of one bucket share one queue: files written
/// before the first start are found by each stream's first listing, files written after by
/// the location's events; every file lands in exactly the streams whose prefix and glob match
/// it, once each. `landfall locations` shows the cache and each stream's position.
#[test]
fn five_streams_on_one_location_each_get_exactly_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("fev");
    let wired = aws(&["wire", &bucket, &bucket, "raw/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let streams = streams_on_raw();
    let cfg = config(root, &bucket, &format!("queue_url = \"{q}\""), &streams, "");
    let mut files: Vec<(String, u64)> = Vec::new();
    let mut next = 0u64;
    let mut batch = |keys: &[&str], files: &mut Vec<(String, u64)>| {
        let new: Vec<(String, u64)> = keys
            .iter()
            .map(|k| {
                next += 3;
                (k.to_string(), next - 3)
            })
            .collect();
        put_files(root, &bucket, &new);
        files.extend(new);
    };
    let keys = [
        "raw/top.json",
        "raw/a/1.json",
        "raw/a/b/2.json",
        "raw/a2/3.json",
        "raw/b/4.json",
        "raw/b/5.txt",
        "raw/b/deep/6.json",
        "raw/c/7.json",
    ];
    batch(&keys, &mut files);
    run(&cfg, &[]);
    for s in &streams {
        assert_exactly(&table_ids(root, s.name), &expected(s, &files));
    }
    // Now through the events.
    let keys2: Vec<String> = keys.iter().map(|k| k.replace('.', "-2.")).collect();
    let keys2: Vec<&str> = keys2.iter().map(|s| s.as_str()).collect();
    batch(&keys2, &mut files);
    batch(
        &["raw/a/b/c/8.json", "raw/a2/x/9.json", "raw/ab/10.json"],
        &mut files,
    );
    let lists_before = list_requests(&cfg);
    // The first run listed (each stream once, entering the mode): the count below is real.
    assert!(lists_before >= 5, "{lists_before} LIST requests");
    run(&cfg, &[]);
    for s in &streams {
        assert_exactly(&table_ids(root, s.name), &expected(s, &files));
    }
    // Files arrive through the cache, not by listing: the second run lists nothing.
    assert_eq!(list_requests(&cfg), lists_before);
    // A third run changes nothing.
    run(&cfg, &[]);
    for s in &streams {
        assert_exactly(&table_ids(root, s.name), &expected(s, &files));
    }
    let v = locations(&cfg);
    let raw = &v[0];
    assert_eq!(raw["name"], "raw");
    let cached = raw["cache"]["events"].as_u64().unwrap();
    // Every upload's event (the bucket sent events before the first start too), `.txt`
    // included: the cache holds the location's files, streams filter.
    assert_eq!(cached, 19, "{raw}");
    let positions: BTreeMap<String, Value> =
        serde_json::from_value(raw["streams"].clone()).unwrap();
    assert_eq!(positions.len(), 5, "{raw}");
    for (name, p) in &positions {
        assert_eq!(p["behind"], 0, "{name}: {raw}");
    }
    assert!(raw["consumer_error"].is_null(), "{raw}");
    assert_eq!(raw["queue_depth"], 0, "{raw}");
}

/// A stream stopped longer than the retention: the events it never read expire, its position
/// falls below the cache's horizon, and its next start lists its prefix once. Nothing is
/// missed, nothing doubled.
#[test]
fn a_stream_stopped_longer_than_the_retention_lists_and_misses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("ret");
    let wired = aws(&["wire", &bucket, &bucket, "raw/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let streams = vec![s("busy", "raw"), s("idle", "raw")];
    let cfg = config(
        root,
        &bucket,
        &format!("queue_url = \"{q}\"\nretention = \"3s\"\nlisting_interval = \"off\""),
        &streams,
        "",
    );
    let mut files = vec![("raw/0.json".to_string(), 0u64)];
    put_files(root, &bucket, &files);
    run(&cfg, &[]);
    // Only `busy` runs while files arrive; their events reach the cache and expire.
    let more: Vec<(String, u64)> = (1..4).map(|i| (format!("raw/{i}.json"), i * 3)).collect();
    put_files(root, &bucket, &more);
    files.extend(more);
    run(&cfg, &["busy"]);
    std::thread::sleep(std::time::Duration::from_secs(4));
    // A later run of `busy` expires them (expiry runs at a consumer's first round).
    run(&cfg, &["busy"]);
    let v = locations(&cfg);
    let raw = &v[0];
    let horizon = raw["cache"]["expired_through"].as_u64().unwrap();
    let idle = raw["streams"]["idle"]["position"].as_u64().unwrap();
    assert!(idle < horizon, "idle at {idle}, horizon {horizon}: {raw}");
    let o = run(&cfg, &["idle"]);
    assert!(
        text(&o).contains("older than the retention"),
        "{}",
        text(&o)
    );
    let all: Vec<u64> = (0..12).collect();
    assert_exactly(&table_ids(root, "idle"), &all);
    // `busy` read every event before: a draining run's consumer receives only while a stream
    // waits for it, so no long poll is left in flight (taking messages) when a run exits.
    assert_exactly(&table_ids(root, "busy"), &all);
}

/// Objects written while the bucket sends no events (lost events) are cached by the
/// location's periodic listing and reach every stream whose prefix holds them.
#[test]
fn lost_events_are_found_by_the_periodic_location_listing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("lost");
    let wired = aws(&["wire", &bucket, &bucket, "raw/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    // `h` lies under a hidden directory of the location: the location listing keeps hidden
    // paths (the stream decides below its own prefix).
    let streams = vec![s("a", "raw/a"), s("b", "raw/b"), s("h", "raw/_landing")];
    let cfg = |interval: &str| {
        config(
            root,
            &bucket,
            &format!("queue_url = \"{q}\"\nlisting_interval = \"{interval}\""),
            &streams,
            "",
        )
    };
    run(&cfg("1h"), &[]);
    aws(&["unwire", &bucket]);
    let lost = vec![
        ("raw/a/lost.json".to_string(), 0u64),
        ("raw/b/lost.json".into(), 3),
        ("raw/_landing/lost.json".into(), 9),
    ];
    put_files(root, &bucket, &lost);
    aws(&["wire", &bucket, &bucket, "raw/"]);
    let seen = vec![("raw/a/seen.json".to_string(), 6u64)];
    put_files(root, &bucket, &seen);
    // Without a location listing due, only the event's file arrives.
    run(&cfg("1h"), &[]);
    assert_exactly(&table_ids(root, "a"), &[6, 7, 8]);
    assert!(table_ids(root, "b").is_empty());
    // With one due (the last listing is over 2 s old), the lost files are cached and read.
    std::thread::sleep(std::time::Duration::from_secs(3));
    run(&cfg("2s"), &[]);
    assert_exactly(&table_ids(root, "a"), &[0, 1, 2, 6, 7, 8]);
    assert_exactly(&table_ids(root, "b"), &[3, 4, 5]);
    assert_exactly(&table_ids(root, "h"), &[9, 10, 11]);
}

/// kill -9 at random instants while events flow: a writer keeps uploading files under two
/// sibling prefixes while a continuous daemon running three streams on the location (both
/// prefixes and their parent) is started and killed again and again. After the last kill,
/// once the messages the killed consumers held are visible again, one drain: every file's
/// rows exactly once in each stream that matches it.
#[test]
fn kill_9_at_random_instants_while_events_flow_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let bucket = unique("fkill");
    let wired = aws(&["wire", &bucket, &bucket, "raw/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let streams = vec![s("all", "raw"), s("a", "raw/a"), s("b", "raw/b")];
    let cfg = config(
        &root,
        &bucket,
        &format!("queue_url = \"{q}\"\nreceivers = 2"),
        &streams,
        "trigger.processing_time = \"0s\"\npoll_interval = \"1s\"",
    );
    // File i (rows 3i..3i+3) under raw/a for even i, raw/b for odd i.
    let writer = FlowingWriter::start(&bucket, "'raw/%s/f%06d.json' % ('ab'[i % 2], i)", 3);
    let progressed = kill_9_repeatedly(&cfg, 8, 500, 2000);
    // The daemons were alive at every kill (checked by the helper) and committed between
    // kills: the table holds more than the final drain.
    assert!(
        progressed >= 2,
        "only {progressed} of 8 runs committed a batch"
    );
    let n = writer.stop();
    assert!(n > 20, "only {n} files written");
    // Messages the killed consumers held come back after their visibility timeout (10 s).
    std::thread::sleep(std::time::Duration::from_secs(11));
    run(&cfg, &[]);
    let ids_of = |parity: Option<u64>| -> Vec<u64> {
        (0..n)
            .filter(|i| parity.is_none_or(|p| i % 2 == p))
            .flat_map(|i| 3 * i..3 * i + 3)
            .collect()
    };
    assert_exactly(&table_ids(&root, "all"), &ids_of(None));
    assert_exactly(&table_ids(&root, "a"), &ids_of(Some(0)));
    assert_exactly(&table_ids(&root, "b"), &ids_of(Some(1)));
}

/// A location whose consumer cannot read its queue (it does not exist) stops no stream: the
/// streams list their own prefixes once `fallback_after` passed, ingest what is there, and
/// say so in `landfall streams`; `landfall locations` shows the consumer's error.
#[test]
fn a_failing_consumer_stops_no_stream_they_list_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("fail");
    aws(&["mkbucket", &bucket]);
    let missing = format!("{}/000000000000/no-such-queue-{bucket}", moto_endpoint());
    let streams = vec![s("a", "raw/a")];
    let cfg = config(
        root,
        &bucket,
        &format!("queue_url = \"{missing}\"\nfallback_after = \"1s\""),
        &streams,
        "",
    );
    put_files(root, &bucket, &[("raw/a/1.json".into(), 0)]);
    run(&cfg, &[]);
    put_files(root, &bucket, &[("raw/a/2.json".into(), 3)]);
    run(&cfg, &[]);
    assert_exactly(&table_ids(root, "a"), &[0, 1, 2, 3, 4, 5]);
    let o = landfall(&[
        "streams",
        "--config",
        cfg.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let status = v[0]["status"].as_str().unwrap();
    assert!(
        status.starts_with("ok (") && status.contains("listing"),
        "{status}"
    );
    let l = locations(&cfg);
    let err = l[0]["consumer_error"]["error"].as_str().unwrap_or_default();
    assert!(err.contains("location `raw`"), "{}", l[0]);
}

/// listing -> file_events -> notifications -> file_events -> listing on one stream: each
/// switch loses and duplicates nothing (the per-file state decides, and entering a mode lists).
#[test]
fn switching_between_listing_file_events_and_notifications_keeps_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("fswitch");
    let wired = aws(&["wire", &bucket, &bucket, "raw/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let streams = vec![s("s", "raw/s")];
    let location = format!("queue_url = \"{q}\"");
    let mode = |m: &str| {
        let cfg = config(root, &bucket, &location, &streams, "");
        let text = std::fs::read_to_string(&cfg).unwrap().replace(
            "discovery = \"file_events\"",
            &format!("discovery = \"{m}\""),
        );
        // A notification stream reads the queue itself: the location (which would read the
        // same queue) is left out of that configuration.
        let text = if m == "notifications" {
            let (a, b) = (
                text.find("[locations.raw]").unwrap(),
                text.find("[streams.s]").unwrap(),
            );
            format!("{}{}", &text[..a], &text[b..])
                + &format!(
                    "\n[streams.s.notifications]\nqueue_url = \"{q}\"\nwait_time = \"1s\"\nvisibility_timeout = \"10s\"\n"
                )
        } else {
            text
        };
        write_config(root, &text)
    };
    let mut expect = Vec::new();
    for (i, m) in [
        "listing",
        "file_events",
        "file_events",
        "notifications",
        "file_events",
        "listing",
        "file_events",
    ]
    .iter()
    .enumerate()
    {
        let i = i as u64;
        put_files(root, &bucket, &[(format!("raw/s/{i}.json"), 3 * i)]);
        expect.extend(3 * i..3 * i + 3);
        run(&mode(m), &[]);
        assert_exactly(&table_ids(root, "s"), &expect);
    }
}

/// Azure: a location on an Azurite container with one Storage Queue (created by `landfall
/// notifications setup --location`; the test plays Event Grid and enqueues BlobCreated events,
/// base64-encoded as Event Grid delivers them, twice each). Two streams on sibling prefixes
/// each get exactly their blobs; a blob without an event is not ingested.
#[test]
fn azure_location_on_azurite_feeds_two_streams_exactly_once() {
    let (_, queue_url) = azurite();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let tag = unique("azfe");
    let queue = tag.to_ascii_lowercase();
    let container = "landfall-test";
    let stream = |name: &str| {
        format!(
            r#"
[streams.{name}]
source = "az://{container}/{tag}/{name}"
source_store = "azurite"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "auto"
[streams.{name}.sink]
path = "{root}/tables/{name}"
"#,
            root = root.display()
        )
    };
    let cfg = write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{root}/state"

[stores.azurite]
use_emulator = true
allow_http = true

[locations.landing]
url = "az://{container}/{tag}"
store = "azurite"
file_events = true
queue_name = "{queue}"
endpoint = "{queue_url}/devstoreaccount1"
wait_time = "1s"
visibility_timeout = "10s"
{a}{b}"#,
            root = root.display(),
            a = stream("a"),
            b = stream("b"),
        ),
    );
    let o = landfall(&[
        "notifications",
        "setup",
        "--location",
        "landing",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert!(
        text(&o).contains("created the Azure Storage Queue"),
        "{}",
        text(&o)
    );
    run(&cfg, &[]);
    let upload = |name: &str, first: u64| {
        let f = root.join("blob.json");
        std::fs::write(&f, (first..first + 3).map(row).collect::<String>()).unwrap();
        let v = az(&[
            "put",
            container,
            &format!("{tag}/{name}"),
            f.to_str().unwrap(),
        ]);
        let etag = v["etag"].as_str().unwrap().to_string();
        let size = v["size"].as_u64().unwrap();
        format!(
            r#"{{"topic":"/subscriptions/x/resourceGroups/y/providers/Microsoft.Storage/storageAccounts/devstoreaccount1","subject":"/blobServices/default/containers/{container}/blobs/{tag}/{name}","eventType":"Microsoft.Storage.BlobCreated","eventTime":"2026-11-30T12:00:00Z","id":"{name}","data":{{"api":"PutBlob","eTag":"{etag}","contentLength":{size},"blobType":"BlockBlob","url":"{url}"}},"dataVersion":"","metadataVersion":"1"}}"#,
            url = event_blob_url(container, &format!("{tag}/{name}"))
        )
    };
    let events = [
        upload("a/1.json", 0),
        upload("a/x/2.json", 3),
        upload("b/3.json", 6),
        upload("ab/4.json", 9),
    ];
    upload("b/silent.json", 100);
    for e in events.iter().chain(events.iter()) {
        let f = root.join("message.txt");
        std::fs::write(&f, base64(e.as_bytes())).unwrap();
        az(&["send", &queue, f.to_str().unwrap()]);
    }
    run(&cfg, &[]);
    assert_exactly(&table_ids(root, "a"), &[0, 1, 2, 3, 4, 5]);
    assert_exactly(&table_ids(root, "b"), &[6, 7, 8]);
    assert_eq!(az(&["peek", &queue])["count"], 0);
    let v = locations(&cfg);
    assert_eq!(v[0]["cache"]["events"], 4, "{}", v[0]);
}

/// A location without queue_url owns its resources: the first start creates one queue and one
/// bucket notification for the whole location (not one per stream), `notifications list
/// --location` shows them, and `teardown` removes exactly them.
#[test]
fn a_location_sets_up_one_queue_for_all_its_streams() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("fsetup");
    aws(&["mkbucket", &bucket]);
    let streams = streams_on_raw();
    let cfg = config(
        root,
        &bucket,
        &format!("queue_name = \"{bucket}\""),
        &streams,
        "",
    );
    run(&cfg, &[]);
    let conf = aws(&["notification", &bucket]);
    let queues = conf["QueueConfigurations"].as_array().unwrap();
    assert_eq!(queues.len(), 1, "one notification for the location: {conf}");
    let files = vec![
        ("raw/a/b/1.json".to_string(), 0u64),
        ("raw/b/2.json".into(), 3),
    ];
    put_files(root, &bucket, &files);
    run(&cfg, &[]);
    for s in &streams {
        assert_exactly(&table_ids(root, s.name), &expected(s, &files));
    }
    let cli = |action: &str| {
        landfall(&[
            "notifications",
            action,
            "--location",
            "raw",
            "--config",
            cfg.to_str().unwrap(),
        ])
    };
    let o = cli("list");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("queue http") && text(&o).contains("landfall-stream=location:raw"),
        "{}",
        text(&o)
    );
    let o = cli("teardown");
    assert!(o.status.success(), "{}", text(&o));
    let conf = aws(&["notification", &bucket]);
    assert!(
        conf.get("QueueConfigurations")
            .is_none_or(|q| q.as_array().unwrap().is_empty()),
        "{conf}"
    );
}

/// The event cache restored from an older copy while the streams' states are newer: events
/// cached after the copy (their messages deleted) are not in the restored cache. The location
/// knows the last number it gave, finds the cache below it, and every stream lists its prefix
/// once: nothing is missed, nothing doubled.
#[test]
fn an_event_cache_restored_from_an_older_copy_misses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("frestore");
    let wired = aws(&["wire", &bucket, &bucket, "raw/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let streams = vec![s("a", "raw/a"), s("b", "raw/b")];
    let cfg = config(root, &bucket, &format!("queue_url = \"{q}\""), &streams, "");
    let mut files = vec![
        ("raw/a/0.json".to_string(), 0u64),
        ("raw/b/1.json".into(), 3),
    ];
    put_files(root, &bucket, &files);
    run(&cfg, &[]);
    let cache = root.join("state/_locations/raw");
    let copy = root.join("cache-backup");
    copy_dir(&cache, &copy);
    let more = vec![
        ("raw/a/2.json".to_string(), 6u64),
        ("raw/b/3.json".into(), 9),
    ];
    put_files(root, &bucket, &more);
    files.extend(more);
    // Only `a` runs: the events of both files are cached (and their messages deleted), `b`
    // has not read its own yet.
    run(&cfg, &["a"]);
    std::fs::remove_dir_all(&cache).unwrap();
    copy_dir(&copy, &cache);
    let more = vec![("raw/b/4.json".to_string(), 12u64)];
    put_files(root, &bucket, &more);
    files.extend(more);
    let o = run(&cfg, &[]);
    assert!(text(&o).contains("restored from a copy"), "{}", text(&o));
    for st in &streams {
        assert_exactly(&table_ids(root, st.name), &expected(st, &files));
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}
