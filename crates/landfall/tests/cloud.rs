//! Object stores on loopback emulators: S3 on moto server -> Delta on S3, and Azure Blob on
//! Azurite -> Delta on Azurite. Inputs are uploaded with object_store; the resulting table is
//! copied down and checked by the independent reader. The emulators are started by
//! scripts/test.sh (LANDFALL_TEST_S3_ENDPOINT, LANDFALL_TEST_AZURITE=1).

mod common;
use common::*;
use futures::TryStreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt};
use std::collections::BTreeMap;
use std::sync::Arc;

fn unique() -> String {
    format!(
        "run-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

fn store(url: &str, opts: &BTreeMap<&str, &str>) -> Arc<dyn ObjectStore> {
    let (s, _) = object_store::parse_url_opts(
        &url::Url::parse(url).unwrap(),
        opts.iter().map(|(k, v)| (*k, *v)),
    )
    .unwrap();
    Arc::from(s)
}

async fn upload(s: &Arc<dyn ObjectStore>, path: &str, ids: std::ops::Range<u64>) {
    let body: String = ids.map(row).collect();
    s.put(&ObjPath::from(path), body.into_bytes().into())
        .await
        .unwrap();
}

async fn download(s: &Arc<dyn ObjectStore>, prefix: &str, to: &std::path::Path) {
    let p = ObjPath::from(prefix);
    let metas: Vec<_> = s.list(Some(&p)).try_collect().await.unwrap();
    assert!(!metas.is_empty(), "nothing under {prefix}");
    for m in metas {
        let rel = m
            .location
            .as_ref()
            .strip_prefix(prefix)
            .unwrap()
            .trim_start_matches('/');
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        let bytes = s.get(&m.location).await.unwrap().bytes().await.unwrap();
        std::fs::write(dest, bytes).unwrap();
    }
}

/// Upload files, ingest, check; ingest again (idempotent), add one, check again.
async fn roundtrip(scheme_root: &str, store_toml: &str, opts: BTreeMap<&str, &str>) {
    let run = unique();
    let s = store(scheme_root, &opts);
    for f in 0..6u64 {
        upload(
            &s,
            &format!("{run}/landing/part={}/f{f}.json", f % 2),
            f * 10..f * 10 + 10,
        )
        .await;
    }
    upload(&s, &format!("{run}/landing/_SUCCESS"), 0..0).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{local}/state"

[stores.emu]
{store_toml}

[streams.cloud]
source = "{scheme_root}/{run}/landing"
source_store = "emu"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
partition_columns = ["part"]
max_files_per_trigger = 4

[streams.cloud.sink]
path = "{scheme_root}/{run}/table"
store = "emu"
partition_by = ["part"]
"#,
            local = root.display()
        ),
    );
    let out = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("this run:  6 file(s), 60 row(s)"),
        "{}",
        text(&out)
    );
    let first = root.join("copy1");
    download(&s, &format!("{run}/table"), &first).await;
    let v = verify("delta", &first, None);
    assert_exactly(&ids(&v, "id"), &(0..60).collect::<Vec<_>>());
    let r = row_by_id(&v, 15);
    assert_eq!(r["part"], "1");
    let version = delta_version(&first);
    assert_eq!(version, 2, "create + 2 batches");

    let out = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("this run:  0 file(s)"),
        "{}",
        text(&out)
    );
    upload(&s, &format!("{run}/landing/part=0/g.json"), 100..103).await;
    drain(&cfg);
    let second = root.join("copy2");
    download(&s, &format!("{run}/table"), &second).await;
    assert_eq!(
        delta_version(&second),
        3,
        "one more commit for the one new file, none for the re-run"
    );
    let mut expected: Vec<u64> = (0..60).collect();
    expected.extend(100..103);
    assert_exactly(&ids(&verify("delta", &second, None), "id"), &expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_on_moto_to_delta_on_s3() {
    let endpoint = std::env::var("LANDFALL_TEST_S3_ENDPOINT")
        .expect("LANDFALL_TEST_S3_ENDPOINT is not set: run the suite with scripts/test.sh, which starts moto server");
    let opts = BTreeMap::from([
        ("aws_endpoint", endpoint.as_str()),
        ("aws_access_key_id", "test"),
        ("aws_secret_access_key", "test"),
        ("aws_region", "us-east-1"),
        ("allow_http", "true"),
    ]);
    let store_toml = format!(
        "endpoint = \"{endpoint}\"\nregion = \"us-east-1\"\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\nallow_http = true"
    );
    roundtrip("s3://landfall-test", &store_toml, opts).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_blob_on_azurite_to_delta_on_azurite() {
    assert_eq!(
        std::env::var("LANDFALL_TEST_AZURITE").as_deref(),
        Ok("1"),
        "LANDFALL_TEST_AZURITE is not set: run the suite with scripts/test.sh, which starts Azurite"
    );
    let opts = BTreeMap::from([
        ("azure_storage_use_emulator", "true"),
        ("allow_http", "true"),
    ]);
    roundtrip(
        "az://landfall-test",
        "use_emulator = true\nallow_http = true",
        opts,
    )
    .await;
}
