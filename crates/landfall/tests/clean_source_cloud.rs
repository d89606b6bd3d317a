//! `clean_source = move` on object stores (moto server for S3, Azurite for Azure Blob): a move
//! there is a server-side copy and a delete, and the process is killed after the copy (the
//! file at both places) and after the delete (the record missing). The next run finishes
//! each file: the source prefix ends empty, the destination holds every file byte for byte
//! at its path below the source, the state says where each went, and the table (local, read
//! by the independent reader) holds every row once.

mod common;
use common::*;
use futures::TryStreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt};
use std::collections::BTreeMap;
use std::sync::Arc;

async fn keys_under(s: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<String> {
    let metas: Vec<_> = s
        .list(Some(&ObjPath::from(prefix)))
        .try_collect()
        .await
        .unwrap();
    let mut keys: Vec<String> = metas
        .into_iter()
        .map(|m| {
            m.location
                .as_ref()
                .strip_prefix(prefix)
                .unwrap()
                .trim_start_matches('/')
                .to_string()
        })
        .collect();
    keys.sort();
    keys
}

fn config(
    root: &std::path::Path,
    store_toml: &str,
    source: &str,
    dest: &str,
) -> std::path::PathBuf {
    cloud_config(
        root,
        store_toml,
        source,
        &format!(
            "max_files_per_trigger = 2\n\n[streams.cloud.clean_source]\nmode = \"move\"\nmove_destination = \"{dest}\"\nretention_duration = \"0s\""
        ),
        &format!("path = \"{}/table\"", root.display()),
    )
}

async fn move_with_kills(scheme_root: &str, store_toml: &str, opts: BTreeMap<&str, &str>) {
    let run = unique("clean");
    let s = store(scheme_root, &opts);
    let src = format!("{run}/landing zone");
    let dest = format!("{run}/archive");
    let names: Vec<String> = (0..5u64)
        .map(|f| format!("day={}/f {f}.json", f % 2))
        .collect();
    let mut bodies = BTreeMap::new();
    for (f, name) in names.iter().enumerate() {
        let f = f as u64;
        let body: String = (f * 10..f * 10 + 10).map(row).collect();
        s.put(&ObjPath::from(format!("{src}/{name}")), body.clone().into())
            .await
            .unwrap();
        bodies.insert(name.clone(), body);
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = config(
        root,
        store_toml,
        &format!("{scheme_root}/{src}"),
        &format!("{scheme_root}/{dest}"),
    );
    // Killed after the first copy: that file is at both places.
    crash_at_hit(&cfg, "archive_after_copy", 1);
    let at_dest = keys_under(&s, &dest).await;
    assert!(!at_dest.is_empty(), "nothing copied before the kill");
    assert_eq!(
        keys_under(&s, &src).await.len(),
        5,
        "nothing deleted before the kill"
    );
    // Killed after a move, before its record.
    crash_at_hit(&cfg, "archive_before_record", 1);
    drain(&cfg);

    assert_eq!(keys_under(&s, &src).await, Vec::<String>::new());
    let mut expected: Vec<String> = names.clone();
    expected.sort();
    assert_eq!(keys_under(&s, &dest).await, expected);
    for (name, body) in &bodies {
        let got = s
            .get(&ObjPath::from(format!("{dest}/{name}")))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(&got[..], body.as_bytes(), "{name}");
    }
    let rows = state_rows(&cfg, "cloud");
    assert_eq!(rows.len(), 5, "{rows:?}");
    for name in &names {
        let file = name.rsplit('/').next().unwrap();
        let r = state_of(&rows, file);
        assert_eq!(r["state"], "archived", "{r}");
        assert_eq!(r["archive_mode"], "MOVE", "{r}");
        assert_eq!(
            r["move_location"],
            format!("{scheme_root}/{dest}/{name}"),
            "{r}"
        );
        assert!(r["reason"].is_null(), "{r}");
    }
    let v = verify("delta", &root.join("table"), Some("cloud"));
    assert_exactly(&ids(&v, "id"), &(0..50).collect::<Vec<_>>());
    // A re-run lists an empty source and ingests nothing.
    let out = drain(&cfg);
    assert!(
        text(&out).contains("this run:  0 file(s), 0 row(s)"),
        "{}",
        text(&out)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_move_on_moto_survives_kills_between_copy_delete_and_record() {
    let endpoint = moto_endpoint();
    let opts = BTreeMap::from([
        ("aws_endpoint", endpoint.as_str()),
        ("aws_access_key_id", "test"),
        ("aws_secret_access_key", "test"),
        ("aws_region", "us-east-1"),
        ("allow_http", "true"),
    ]);
    move_with_kills("s3://landfall-test", &moto_store_toml(&endpoint), opts).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_move_on_azurite_survives_kills_between_copy_delete_and_record() {
    assert_eq!(
        std::env::var("LANDFALL_TEST_AZURITE").as_deref(),
        Ok("1"),
        "LANDFALL_TEST_AZURITE is not set: run the suite with scripts/test.sh, which starts Azurite"
    );
    let opts = BTreeMap::from([
        ("azure_storage_use_emulator", "true"),
        ("allow_http", "true"),
    ]);
    move_with_kills(
        "az://landfall-test",
        "use_emulator = true\nallow_http = true",
        opts,
    )
    .await;
}

/// A notification stream whose bucket sends events for the whole `landing` string prefix:
/// moving its files to the sibling `landing-archive/` (which shares that string prefix, not
/// the `landing/` directory) makes moto send "created" events for every moved file and
/// "removed" events for every source. The next run receives them, ingests nothing and deletes
/// them: a moved file is never seen again as new.
#[test]
fn moved_files_announced_by_bucket_events_are_not_ingested_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("cleanev");
    let wired = aws(&["wire", &bucket, &bucket, "landing"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    for f in 0..3u64 {
        let body: String = (f * 10..f * 10 + 10).map(row).collect();
        let file = root.join("upload.json");
        std::fs::write(&file, body).unwrap();
        aws(&[
            "put",
            &bucket,
            &format!("landing/f{f}.json"),
            file.to_str().unwrap(),
        ]);
    }
    let cfg = write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{local}/state"

[stores.moto]
{store}

[streams.ev]
source = "s3://{bucket}/landing"
source_store = "moto"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "notifications"

[streams.ev.notifications]
queue_url = "{q}"
wait_time = "1s"
visibility_timeout = "10s"

[streams.ev.clean_source]
mode = "move"
move_destination = "s3://{bucket}/landing-archive"
retention_duration = "0s"

[streams.ev.sink]
path = "{local}/table"
"#,
            local = root.display(),
            store = moto_store_toml(&moto_endpoint()),
        ),
    );
    let out = drain(&cfg);
    assert!(
        text(&out).contains("this run:  3 file(s), 30 row(s)"),
        "{}",
        text(&out)
    );
    let s = moto_store(&format!("s3://{bucket}"));
    assert_eq!(
        keys_under(&s, "landing-archive").await_blocking(),
        ["f0.json", "f1.json", "f2.json"]
    );
    // The moves' events (created at the destination, removed at the source) are waiting.
    let waiting = aws(&["peek", &q]);
    assert!(
        waiting["visible"].as_u64().unwrap() + waiting["in_flight"].as_u64().unwrap() > 0,
        "moto sent no events for the moves: {waiting}"
    );
    let out = drain(&cfg);
    assert!(
        text(&out).contains("this run:  0 file(s), 0 row(s)"),
        "{}",
        text(&out)
    );
    let v = verify("delta", &root.join("table"), Some("ev"));
    assert_exactly(&ids(&v, "id"), &(0..30).collect::<Vec<_>>());
    let left = aws(&["peek", &q]);
    assert_eq!(
        left["visible"].as_u64().unwrap() + left["in_flight"].as_u64().unwrap(),
        0,
        "the moves' events were not consumed: {left}"
    );
}

/// Block on a future from a plain test (the emulator helpers are async).
trait AwaitBlocking: std::future::Future + Sized {
    fn await_blocking(self) -> Self::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(self)
    }
}
impl<F: std::future::Future> AwaitBlocking for F {}
