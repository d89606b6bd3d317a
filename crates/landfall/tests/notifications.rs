//! Notification discovery against moto server's real S3 -> SQS and S3 -> SNS -> SQS event
//! delivery (wired with boto3 by tests/notify/aws.py): files found through the queue land in a
//! local Delta table exactly once, checked by the independent reader.
//!
//! Each test uses its own bucket and queue (a bucket has one notification configuration).
//! `wait_time = "1s"` keeps available-now runs short; they stop once a receive comes back
//! empty.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Upload rows `ids` to `key` (plain PUT, or multipart).
fn put(root: &Path, bucket: &str, key: &str, ids: std::ops::Range<u64>, multipart: bool) {
    let body: String = ids.map(row).collect();
    let f = root.join("upload.json");
    std::fs::write(&f, body).unwrap();
    let cmd = if multipart { "multipart" } else { "put" };
    aws(&[cmd, bucket, key, f.to_str().unwrap()]);
}

fn send(root: &Path, queue_url: &str, body: &str) {
    let f = root.join("message.json");
    std::fs::write(&f, body).unwrap();
    aws(&["send", queue_url, f.to_str().unwrap()]);
}

fn config(root: &Path, bucket: &str, queue_url: &str, mode: &str, extra: &str) -> PathBuf {
    let notifications = if mode == "notifications" {
        format!(
            "queue_url = \"{queue_url}\"\nwait_time = \"1s\"\nvisibility_timeout = \"10s\"\nreceivers = 2\n"
        )
    } else {
        String::new()
    };
    s3_stream(root, bucket, "landing", mode, extra, &notifications)
}

/// Stream `ev` from s3://`bucket`/`prefix` on moto into `root`/table, in discovery `mode`, with
/// `extra` stream keys and, in notification mode, `notifications` as the body of its
/// `[streams.ev.notifications]`.
fn s3_stream(
    root: &Path,
    bucket: &str,
    prefix: &str,
    mode: &str,
    extra: &str,
    notifications: &str,
) -> PathBuf {
    let section = if mode == "notifications" {
        format!("\n[streams.ev.notifications]\n{notifications}\n")
    } else {
        String::new()
    };
    write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{root}/state"

[stores.moto]
{store}

[streams.ev]
source = "s3://{bucket}/{prefix}"
source_store = "moto"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "{mode}"
{extra}
{section}
[streams.ev.sink]
path = "{root}/table"
"#,
            root = root.display(),
            store = moto_store_toml(&moto_endpoint()),
        ),
    )
}

fn run(cfg: &Path) -> std::process::Output {
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert!(o.status.success(), "{}", text(&o));
    o
}

fn table_ids(root: &Path) -> Vec<u64> {
    ids(&verify("delta", &root.join("table"), Some("ev")), "id")
}

fn range(r: std::ops::Range<u64>) -> Vec<u64> {
    r.collect()
}

fn peek(queue_url: &str) -> (u64, u64) {
    let v = aws(&["peek", queue_url]);
    (
        v["visible"].as_u64().unwrap(),
        v["in_flight"].as_u64().unwrap(),
    )
}

/// S3 -> SQS end to end: keys with spaces, `+`, `%`, unicode and nested prefixes, a multipart
/// upload (moto sends two created events for it), each message duplicated three times, a
/// removal event, a malformed message, and a file outside the prefix. After the first run (which
/// lists, as the stream enters notification mode) files are found only through the queue: a
/// file uploaded while the bucket sends no events is not ingested until a backfill.
#[test]
fn s3_to_sqs_exactly_once_with_duplicates_and_odd_keys() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("sqs");
    let wired = aws(&["wire", &bucket, &bucket, "landing/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    put(root, &bucket, "landing/first.json", 0..5, false);
    let cfg = config(root, &bucket, &q, "notifications", "");
    let o = run(&cfg);
    assert_exactly(&table_ids(root), &range(0..5));
    assert!(text(&o).contains("this run:  1 file(s)"), "{}", text(&o));

    put(root, &bucket, "landing/a b+c%d é.json", 10..15, false);
    put(
        root,
        &bucket,
        "landing/2026/11/30/nested.json",
        20..25,
        false,
    );
    put(root, &bucket, "landing/big/multi.json", 30..35, true);
    put(root, &bucket, "outside/ignored.json", 40..45, false);
    // Duplicate every event message twice more, as an at-least-once queue may.
    let msgs = drain_bodies(&q);
    assert!(
        msgs.len() >= 4,
        "expected the events of 4 uploads, got {msgs:?}"
    );
    for body in &msgs {
        for _ in 0..3 {
            send(root, &q, body);
        }
    }
    send(root, &q, "this is not an event");
    send(
        root,
        &q,
        &format!(
            r#"{{"Records":[{{"eventName":"ObjectRemoved:Delete","eventTime":"2026-11-30T00:00:00Z","s3":{{"bucket":{{"name":"{bucket}"}},"object":{{"key":"landing/first.json"}}}}}}]}}"#
        ),
    );
    // Written while the bucket sends no events: only a listing finds it.
    aws(&["unwire", &bucket]);
    put(root, &bucket, "landing/silent.json", 50..55, false);

    let o = run(&cfg);
    let mut expected = range(0..5);
    expected.extend(10..15);
    expected.extend(20..25);
    expected.extend(30..35);
    assert_exactly(&table_ids(root), &expected);
    let log = text(&o);
    assert!(log.contains("queue message not understood"), "{log}");
    // The malformed message stays (invisible for its visibility timeout), everything else
    // was deleted after its files were recorded.
    let (visible, in_flight) = peek(&q);
    assert_eq!(visible + in_flight, 1, "{log}");

    // A backfill listing (due at once: the interval since the last listing has passed)
    // admits the file no event announced, and nothing twice.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let cfg = config(
        root,
        &bucket,
        &q,
        "notifications",
        "backfill_interval = \"1s\"",
    );
    run(&cfg);
    expected.extend(50..55);
    assert_exactly(&table_ids(root), &expected);
}

/// Receive every visible event body once (making them invisible for a second), for re-sending.
fn drain_bodies(queue_url: &str) -> Vec<String> {
    let v = aws(&["drain", queue_url]);
    // Let them become visible again.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    serde_json::from_value(v["bodies"].clone()).unwrap()
}

/// S3 -> SNS -> SQS, with and without raw message delivery.
#[test]
fn s3_to_sns_to_sqs_raw_and_enveloped() {
    for raw in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bucket = unique(if raw { "snsraw" } else { "sns" });
        let mut args = vec!["wire", &bucket, &bucket, "landing/", "--sns"];
        if raw {
            args.push("--raw");
        }
        let wired = aws(&args);
        let q = wired["queue_url"].as_str().unwrap().to_string();
        let cfg = config(root, &bucket, &q, "notifications", "");
        run(&cfg);
        put(root, &bucket, "landing/x y.json", 0..5, false);
        put(root, &bucket, "landing/sub/z.json", 5..10, false);
        let o = run(&cfg);
        assert_exactly(&table_ids(root), &range(0..10));
        assert!(
            text(&o).contains("this run:  2 file(s)"),
            "raw={raw}: {}",
            text(&o)
        );
    }
}

/// The stream is killed after receiving (files not recorded) and after recording (messages not
/// deleted): the first loses nothing (the messages come back after their visibility timeout),
/// the second duplicates nothing (the ledger knows the files).
#[test]
fn kill_between_receive_record_and_delete_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("kill");
    let wired = aws(&["wire", &bucket, &bucket, "landing/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let cfg = config(root, &bucket, &q, "notifications", "");
    run(&cfg);
    put(root, &bucket, "landing/a.json", 0..5, false);
    crash_at(&cfg, "after_admit");
    // Recorded but not deleted: the message is redelivered and ignored as known.
    put(root, &bucket, "landing/b.json", 5..10, false);
    crash_at(&cfg, "after_receive");
    // Received, not recorded: b.json's message is invisible for 10 s, then comes back.
    std::thread::sleep(std::time::Duration::from_secs(11));
    run(&cfg);
    assert_exactly(&table_ids(root), &range(0..10));
    assert_eq!(peek(&q), (0, 0));
}

/// listing -> notifications -> listing on one stream: each switch loses and duplicates
/// nothing. Files written while listing are found by the listing the stream does on entering
/// notification mode; files announced while in notification mode are known when listing
/// resumes.
#[test]
fn switching_between_listing_and_notifications_keeps_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("switch");
    let wired = aws(&["wire", &bucket, &bucket, "landing/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let listing = config(root, &bucket, &q, "listing", "");
    put(root, &bucket, "landing/1.json", 0..5, false);
    run(&listing);
    put(root, &bucket, "landing/2.json", 5..10, false);
    // Events of 1 and 2 wait in the queue; 2 is not ingested yet.
    let notify = config(root, &bucket, &q, "notifications", "");
    run(&notify);
    assert_exactly(&table_ids(root), &range(0..10));
    put(root, &bucket, "landing/3.json", 10..15, false);
    run(&notify);
    assert_exactly(&table_ids(root), &range(0..15));
    put(root, &bucket, "landing/4.json", 15..20, false);
    let listing = config(root, &bucket, &q, "listing", "");
    run(&listing);
    assert_exactly(&table_ids(root), &range(0..20));
    // Back to notifications: it lists again (the gap while listing), nothing twice.
    put(root, &bucket, "landing/5.json", 20..25, false);
    let notify = config(root, &bucket, &q, "notifications", "");
    let o = run(&notify);
    assert_exactly(&table_ids(root), &range(0..25));
    assert!(text(&o).contains("this run:  1 file(s)"), "{}", text(&o));
    // `landfall streams` shows the requests of all runs by operation.
    let o = landfall(&[
        "streams",
        "--config",
        notify.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let requests = &v[0]["requests"];
    for op in ["LIST", "GET", "ReceiveMessage", "DeleteMessageBatch"] {
        assert!(requests[op].as_u64() > Some(0), "{op} in {requests}");
    }
}

/// A stream without `queue_url` owns its resources. `landfall notifications setup` creates
/// the queue, the SNS topic and the bucket notification, tagged; a second setup changes
/// nothing; `list` shows them; files then arrive through them; a second stream on a nested
/// prefix of the same bucket is refused with the overlap named; `teardown` removes exactly
/// what was created. Without the CLI, the first start sets up by itself.
#[test]
fn setup_list_teardown_and_automatic_setup_on_moto() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let bucket = unique("setup");
    aws(&["mkbucket", &bucket]);
    let owned = |root: &Path, name: &str, prefix: &str, sns: bool| {
        s3_stream(
            root,
            &bucket,
            prefix,
            "notifications",
            "",
            &format!(
                "queue_name = \"{name}\"\nsns = {sns}\nwait_time = \"1s\"\nresource_tags = {{ team = \"data\" }}"
            ),
        )
    };
    let cli = |args: &[&str], cfg: &Path| {
        let mut a = vec!["notifications"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["ev", "--config", cfg.to_str().unwrap()]);
        landfall(&a)
    };
    let cfg = owned(root, &bucket, "landing", true);
    let first = cli(&["setup"], &cfg);
    assert!(first.status.success(), "{}", text(&first));
    let again = cli(&["setup"], &cfg);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(first.stdout, again.stdout, "setup is idempotent");
    let listed = cli(&["list"], &cfg);
    let shown = String::from_utf8_lossy(&listed.stdout).to_string();
    assert_eq!(shown.matches(": exists").count(), 3, "{shown}");
    assert!(
        shown.contains("team=data") && shown.contains("landfall-stream=ev"),
        "{shown}"
    );
    let conf = aws(&["notification", &bucket]);
    assert_eq!(
        conf["TopicConfigurations"][0]["Id"],
        bucket.as_str(),
        "{conf}"
    );
    let q = format!("{}/123456789012/{bucket}", moto_endpoint());
    let tags = aws(&["tags", &q]);
    assert_eq!(tags["team"], "data", "{tags}");

    run(&cfg);
    put(root, &bucket, "landing/a.json", 0..5, false);
    let o = run(&cfg);
    assert!(text(&o).contains("this run:  1 file(s)"), "{}", text(&o));
    assert_exactly(&table_ids(root), &range(0..5));

    // Another stream whose prefix nests in this one's: refused before creating anything.
    let other_dir = tempfile::tempdir().unwrap();
    let other = owned(
        other_dir.path(),
        &format!("{bucket}-2"),
        "landing/sub",
        false,
    );
    let refused = cli(&["setup"], &other);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("overlaps the stream's prefix `landing/sub/`"),
        "{}",
        text(&refused)
    );

    // A queue of that name that landfall did not create is not taken over.
    let taken = format!("{bucket}-taken");
    aws(&["mksqs", &taken]);
    let taken_dir = tempfile::tempdir().unwrap();
    let foreign = owned(taken_dir.path(), &taken, "elsewhere", false);
    let refused = cli(&["setup"], &foreign);
    assert!(
        !refused.status.success() && text(&refused).contains("was not created by landfall"),
        "{}",
        text(&refused)
    );

    let down = cli(&["teardown"], &cfg);
    assert!(down.status.success(), "{}", text(&down));
    assert_eq!(
        String::from_utf8_lossy(&down.stdout).lines().count(),
        4,
        "{}",
        text(&down)
    );
    assert_eq!(aws(&["notification", &bucket]), serde_json::json!({}));
    let gone = cli(&["list"], &cfg);
    assert!(text(&gone).contains("no notification resources recorded"));

    // Automatic setup: the first start in notification mode creates what it needs.
    let auto_dir = tempfile::tempdir().unwrap();
    let auto_root = auto_dir.path();
    let auto = owned(auto_root, &format!("{bucket}-auto"), "auto", false);
    run(&auto);
    put(auto_root, &bucket, "auto/b.json", 5..10, false);
    run(&auto);
    assert_exactly(&table_ids(auto_root), &range(5..10));
    assert!(cli(&["teardown"], &auto).status.success());
}

/// Azure Blob -> (Event Grid) -> Storage Queue on Azurite: the test plays Event Grid and
/// enqueues BlobCreated events for real blobs, in the Event Grid schema and as CloudEvents,
/// base64-encoded (as Event Grid delivers to queues) and raw, one without contentLength (a
/// HEAD finds the size), each twice, plus a malformed message. A blob without an event is not
/// ingested: the files come from the queue, each exactly once.
#[test]
fn azure_event_grid_and_cloudevents_on_azurite_exactly_once() {
    let (_, queue_url) = azurite();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let tag = unique("az");
    let queue = tag.to_ascii_lowercase();
    let container = "landfall-test";
    let cfg = write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{root}/state"

[stores.azurite]
use_emulator = true
allow_http = true

[streams.ev]
source = "az://{container}/{tag}/landing"
source_store = "azurite"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "notifications"

[streams.ev.notifications]
queue_name = "{queue}"
endpoint = "{queue_url}/devstoreaccount1"
wait_time = "1s"
visibility_timeout = "10s"

[streams.ev.sink]
path = "{root}/table"
"#,
            root = root.display()
        ),
    );
    // `landfall notifications setup` creates the queue (the test plays Event Grid).
    let setup = |cfg: &Path| {
        landfall(&[
            "notifications",
            "setup",
            "ev",
            "--config",
            cfg.to_str().unwrap(),
        ])
    };
    let o = setup(&cfg);
    assert!(
        text(&o).contains("created the Azure Storage Queue"),
        "{}",
        text(&o)
    );
    let o = setup(&cfg);
    assert!(
        text(&o).contains("the Azure Storage Queue exists"),
        "{}",
        text(&o)
    );
    // Entering notification mode lists the (empty) prefix.
    run(&cfg);
    let upload = |name: &str, ids: std::ops::Range<u64>| -> (String, u64) {
        let f = root.join("blob.json");
        std::fs::write(&f, ids.map(row).collect::<String>()).unwrap();
        let v = az(&[
            "put",
            container,
            &format!("{tag}/landing/{name}"),
            f.to_str().unwrap(),
        ]);
        (
            v["etag"].as_str().unwrap().to_string(),
            v["size"].as_u64().unwrap(),
        )
    };
    let blob_of = |name: &str| event_blob_url(container, &format!("{tag}/landing/{name}"));
    let event_grid = |name: &str, api: &str, etag: &str, size: Option<u64>| {
        let len = size
            .map(|s| format!(r#","contentLength":{s}"#))
            .unwrap_or_default();
        format!(
            r#"{{"topic":"/subscriptions/x/resourceGroups/y/providers/Microsoft.Storage/storageAccounts/devstoreaccount1","subject":"/blobServices/default/containers/{container}/blobs/{tag}/landing/{name}","eventType":"Microsoft.Storage.BlobCreated","eventTime":"2026-11-30T12:00:00Z","id":"{name}","data":{{"api":"{api}","eTag":"{etag}"{len},"blobType":"BlockBlob","url":"{}"}},"dataVersion":"","metadataVersion":"1"}}"#,
            blob_of(name)
        )
    };
    let cloud_event = |name: &str, etag: &str, size: u64| {
        format!(
            r#"{{"specversion":"1.0","type":"Microsoft.Storage.BlobCreated","source":"/subscriptions/x/resourceGroups/y/providers/Microsoft.Storage/storageAccounts/devstoreaccount1","subject":"/blobServices/default/containers/{container}/blobs/{tag}/landing/{name}","id":"{name}","time":"2026-11-30T12:00:00Z","data":{{"api":"PutBlockList","eTag":"{etag}","contentLength":{size},"url":"{}"}}}}"#,
            blob_of(name)
        )
    };
    let (ea, sa) = upload("a b.json", 0..5);
    let (eb, sb) = upload("sub/b.json", 5..10);
    let (ec, _) = upload("c.json", 10..15);
    let (ed, sd) = upload("d.json", 15..20);
    upload("silent.json", 100..105);
    let messages = [
        base64(event_grid("a b.json", "PutBlob", &ea, Some(sa)).as_bytes()),
        event_grid("sub/b.json", "PutBlockList", &eb, Some(sb)),
        base64(event_grid("c.json", "PutBlob", &ec, None).as_bytes()),
        base64(cloud_event("d.json", &ed, sd).as_bytes()),
        cloud_event("d.json", &ed, sd),
    ];
    let send = |body: &str| {
        let f = root.join("message.txt");
        std::fs::write(&f, body).unwrap();
        az(&["send", &queue, f.to_str().unwrap()]);
    };
    for m in messages.iter().chain(messages.iter()) {
        send(m);
    }
    send("{\"not\": \"an event\"}");
    let o = run(&cfg);
    assert!(text(&o).contains("this run:  4 file(s)"), "{}", text(&o));
    assert_exactly(&table_ids(root), &range(0..20));
    assert!(
        text(&o).contains("queue message not understood"),
        "{}",
        text(&o)
    );
    // Only the malformed message is left (invisible for now).
    assert_eq!(az(&["peek", &queue])["count"], 1);
    let o = run(&cfg);
    assert!(text(&o).contains("this run:  0 file(s)"), "{}", text(&o));
}

/// kill -9 at random instants while messages flow: a writer keeps uploading files (their
/// events reach the queue) while a continuous daemon is started and killed again and again,
/// wherever it is (receiving, recording, deleting, committing). Afterwards, once the messages
/// the killed daemons held are visible again, one drain: every file's rows exactly once.
#[test]
fn kill_9_at_random_instants_while_messages_flow_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let bucket = unique("flow");
    let wired = aws(&["wire", &bucket, &bucket, "landing/"]);
    let q = wired["queue_url"].as_str().unwrap().to_string();
    let cfg = config(
        &root,
        &bucket,
        &q,
        "notifications",
        "trigger.processing_time = \"0s\"",
    );
    let writer = FlowingWriter::start(&bucket, "'landing/f%06d.json' % i", 5);
    let progressed = kill_9_repeatedly(&cfg, 8, 300, 1500);
    // The daemons were alive at every kill (checked by the helper) and committed between
    // kills: the table holds more than the final drain.
    assert!(
        progressed >= 2,
        "only {progressed} of 8 runs committed a batch"
    );
    let n = writer.stop();
    assert!(n > 20, "only {n} files written");
    // Messages the killed daemons held come back after their visibility timeout (10 s).
    std::thread::sleep(std::time::Duration::from_secs(11));
    run(&cfg);
    assert_exactly(&table_ids(&root), &range(0..5 * n));
}

/// A notification stream `ev` on Azurite, its queue created by `landfall notifications setup`
/// (the test plays Event Grid): source `az://landfall-test/<tag>/<prefix>`, no backfill, so only
/// events find files. Returns the config and the queue's name.
fn azurite_stream(root: &Path, tag: &str, prefix: &str) -> (PathBuf, String) {
    let (_, queue_url) = azurite();
    let queue = tag.to_ascii_lowercase();
    let cfg = write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{root}/state"

[stores.azurite]
use_emulator = true
allow_http = true

[streams.ev]
source = "az://landfall-test/{tag}/{prefix}"
source_store = "azurite"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
discovery = "notifications"

[streams.ev.notifications]
queue_name = "{queue}"
endpoint = "{queue_url}/devstoreaccount1"
wait_time = "1s"
visibility_timeout = "10s"

[streams.ev.sink]
path = "{root}/table"
"#,
            root = root.display()
        ),
    );
    let o = landfall(&[
        "notifications",
        "setup",
        "ev",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    (cfg, queue)
}

/// "Rename" blobs on Azurite, which has no dfs endpoint: copy each to its new name, then delete
/// it (object_store, a client independent of the Python SDK that uploaded them).
fn azurite_rename(pairs: &[(String, String)]) {
    use object_store::ObjectStoreExt;
    let (store, _) = object_store::parse_url_opts(
        &url::Url::parse("az://landfall-test").unwrap(),
        [
            ("azure_storage_use_emulator", "true"),
            ("allow_http", "true"),
        ],
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        for (from, to) in pairs {
            let (from, to) = (
                object_store::path::Path::parse(from).unwrap(),
                object_store::path::Path::parse(to).unwrap(),
            );
            store.copy(&from, &to).await.unwrap();
            store.delete(&from).await.unwrap();
        }
    });
}

/// The URL of blob `name` of container landfall-test, as Event Grid writes it.
fn azurite_blob_url(name: &str) -> String {
    event_blob_url("landfall-test", name)
}

/// An Azure storage event (`kind` `Microsoft.Storage.<kind>`) with the envelope and `data`
/// fields Event Grid sends, in the Event Grid schema or as a CloudEvent.
fn azure_event(cloud: bool, kind: &str, subject: &str, data: &str) -> String {
    let topic = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/landfall/providers/Microsoft.Storage/storageAccounts/devstoreaccount1";
    let subject = format!("/blobServices/default/containers/landfall-test/blobs/{subject}");
    let id = unique("ev");
    if cloud {
        format!(
            r#"{{"source":"{topic}","subject":"{subject}","type":"Microsoft.Storage.{kind}","time":"2026-11-30T12:00:00.1234567Z","id":"{id}","data":{data},"specversion":"1.0"}}"#
        )
    } else {
        format!(
            r#"{{"topic":"{topic}","subject":"{subject}","eventType":"Microsoft.Storage.{kind}","eventTime":"2026-11-30T12:00:00.1234567Z","id":"{id}","data":{data},"dataVersion":"1","metadataVersion":"1"}}"#
        )
    }
}

/// `data` of a BlobRenamed or DirectoryRenamed event from `from` to `to`.
fn rename_data(api: &str, from: &str, to: &str) -> String {
    format!(
        r#"{{"api":"{api}","clientRequestId":"6d79dbfb-0e37-4fc4-981f-442c9ca65760","requestId":"831e1650-001e-001b-66ab-eeb76e000000","destinationUrl":"{}","sourceUrl":"{}","sequencer":"00000000000004420000000000028963","storageDiagnostics":{{"batchId":"b68529f3-68cd-4744-baa4-3c0498ec19f0"}}}}"#,
        azurite_blob_url(to),
        azurite_blob_url(from)
    )
}

/// Upload rows `ids` as blob `name` of container landfall-test (Azure's Python SDK).
fn az_upload(root: &Path, name: &str, ids: std::ops::Range<u64>) -> (String, u64) {
    let f = root.join("blob.json");
    std::fs::write(&f, ids.map(row).collect::<String>()).unwrap();
    let v = az(&["put", "landfall-test", name, f.to_str().unwrap()]);
    (
        v["etag"].as_str().unwrap().to_string(),
        v["size"].as_u64().unwrap(),
    )
}

fn az_send(root: &Path, queue: &str, body: &str) {
    let f = root.join("message.txt");
    std::fs::write(&f, body).unwrap();
    az(&["send", queue, f.to_str().unwrap()]);
}

/// ADLS Gen2 writers (Spark, Hadoop, Data Factory) publish a file by writing it elsewhere and
/// renaming it into place, which Event Grid reports as one `BlobRenamed` event and no
/// `BlobCreated` at the final name. On Azurite, under a prefix with a space and an `é`: a
/// writer flushes `_temporary/0/part-0.json` (its BlobCreated event arrives too) and
/// `part-1.json.inprogress`, then renames them to `part-0.json` and `part-1.json` (the test
/// copies and deletes, and enqueues the BlobRenamed events Event Grid would: the Event Grid
/// schema for one, a base64 CloudEvent for the other, each twice, the names percent-encoded).
/// Each renamed file lands exactly once, and neither temporary name is ingested.
///
/// Before BlobRenamed was understood, both renames were counted as `other` events and deleted:
/// no file was ingested.
#[test]
fn azure_blob_renamed_on_azurite_lands_once_at_its_destination() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let tag = unique("azren");
    let (cfg, queue) = azurite_stream(root, &tag, "landing zone/é");
    // Entering notification mode lists the (empty) prefix.
    run(&cfg);
    let at = |name: &str| format!("{tag}/landing zone/é/{name}");
    let (temp0, final0) = (at("_temporary/0/part-0.json"), at("part-0.json"));
    let (temp1, final1) = (at("part-1.json.inprogress"), at("part-1.json"));
    let (etag, size) = az_upload(root, &temp0, 0..5);
    az_upload(root, &temp1, 5..10);
    azurite_rename(&[
        (temp0.clone(), final0.clone()),
        (temp1.clone(), final1.clone()),
    ]);
    let flushed = azure_event(
        false,
        "BlobCreated",
        &temp0,
        &format!(
            r#"{{"api":"FlushWithClose","clientRequestId":"6d79dbfb-0e37-4fc4-981f-442c9ca65760","requestId":"831e1650-001e-001b-66ab-eeb76e000000","eTag":"{etag}","contentType":"application/octet-stream","contentLength":{size},"contentOffset":0,"blobType":"BlockBlob","url":"{}","sequencer":"00000000000004420000000000028962","storageDiagnostics":{{"batchId":"b68529f3-68cd-4744-baa4-3c0498ec19f0"}}}}"#,
            azurite_blob_url(&temp0)
        ),
    );
    let renamed0 = azure_event(
        false,
        "BlobRenamed",
        &final0,
        &rename_data("RenameFile", &temp0, &final0),
    );
    let renamed1 = base64(
        azure_event(
            true,
            "BlobRenamed",
            &final1,
            &rename_data("RenameFile", &temp1, &final1),
        )
        .as_bytes(),
    );
    assert!(renamed0.contains("landing%20zone/%C3%A9/part-0.json"));
    az_send(root, &queue, &base64(flushed.as_bytes()));
    for m in [&renamed0, &renamed1, &renamed0, &renamed1] {
        az_send(root, &queue, m);
    }
    let o = run(&cfg);
    assert!(text(&o).contains("this run:  2 file(s)"), "{}", text(&o));
    assert_exactly(&table_ids(root), &range(0..10));
    // The ledger knows the two final names only: no temporary one, not even as skipped.
    let rows = state_rows(&cfg, "ev");
    let mut paths: Vec<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
    paths.sort();
    assert!(
        paths.len() == 2
            && paths[0].ends_with("/landing zone/é/part-0.json")
            && paths[1].ends_with("/landing zone/é/part-1.json"),
        "{rows:?}"
    );
    assert!(
        rows.iter().all(|r| r["ingestion_state"] == "INGESTED"),
        "{rows:?}"
    );
    assert_eq!(az(&["peek", &queue])["count"], 0);
    let o = run(&cfg);
    assert!(text(&o).contains("this run:  0 file(s)"), "{}", text(&o));
}

/// A Hadoop job commit on ADLS Gen2 renames a whole task output directory into place: one
/// `DirectoryRenamed` event names none of the files. On Azurite, the test moves
/// `_temporary/0/task_1/part=1/` (two files and a `_SUCCESS`) to `part=1/` under a prefix with a
/// space and an `é`, and enqueues the DirectoryRenamed event (base64 Event Grid schema, twice):
/// the stream lists the destination and each file lands exactly once; a file elsewhere under
/// the prefix, without an event, is not ingested.
#[test]
fn azure_directory_renamed_on_azurite_lists_the_destination_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let tag = unique("azdir");
    let (cfg, queue) = azurite_stream(root, &tag, "landing zone/é");
    run(&cfg);
    let at = |name: &str| format!("{tag}/landing zone/é/{name}");
    let mut moves = Vec::new();
    for (name, ids) in [
        ("a.json", 0..4),
        ("sub/b.json", 4..8),
        ("_SUCCESS", 100..101),
    ] {
        let from = at(&format!("_temporary/0/task_1/part=1/{name}"));
        az_upload(root, &from, ids);
        moves.push((from, at(&format!("part=1/{name}"))));
    }
    az_upload(root, &at("silent.json"), 200..205);
    azurite_rename(&moves);
    let renamed = azure_event(
        false,
        "DirectoryRenamed",
        &at("part=1"),
        &rename_data(
            "RenameDirectory",
            &at("_temporary/0/task_1/part=1"),
            &at("part=1"),
        ),
    );
    assert!(
        renamed.contains("landing%20zone/%C3%A9/part%3D1\""),
        "{renamed}"
    );
    for _ in 0..2 {
        az_send(root, &queue, &base64(renamed.as_bytes()));
    }
    let o = run(&cfg);
    assert!(text(&o).contains("this run:  2 file(s)"), "{}", text(&o));
    assert!(
        text(&o).contains("a directory was renamed into the source"),
        "{}",
        text(&o)
    );
    assert_exactly(&table_ids(root), &range(0..8));
    assert_eq!(az(&["peek", &queue])["count"], 0);
}
