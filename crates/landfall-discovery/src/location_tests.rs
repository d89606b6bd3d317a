//! The location consumer and file-events discovery over an in-memory queue and store, with a
//! real RocksDB cache.

use crate::fake_queue::FakeQueue;
use crate::file_events::{FileEventsDiscovery, parse_position};
use crate::listing::{Filters, ListingDiscovery};
use crate::location::{EventLocation, LocationConsumer};
use crate::notification::StoreRef;
use crate::queue::QueueMessage;
use crate::queue_reader::QueueReader;
use landfall_core::{Discovery, DiscoveryBatch};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::sync::Arc;
use std::time::Duration;

fn event(kind: &str, key: &str, size: u64, etag: &str, seq: &str) -> String {
    format!(
        r#"{{"Records":[{{"eventName":"{kind}","eventTime":"2026-11-30T00:00:00Z","s3":{{"bucket":{{"name":"b"}},"object":{{"key":"{key}","size":{size},"eTag":"{etag}","sequencer":"{seq}"}}}}}}]}}"#
    )
}

struct Fixture {
    _dir: tempfile::TempDir,
    queue: Arc<FakeQueue>,
    store: Arc<dyn ObjectStore>,
    location: Arc<EventLocation>,
    consumer: LocationConsumer,
}

fn fixture(retention: Duration) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let cache = landfall_state::open_event_cache("raw", dir.path()).unwrap();
    let location = Arc::new(
        EventLocation::new(
            "raw",
            cache,
            Path::from("landing"),
            retention,
            Duration::from_secs(600),
        )
        .unwrap(),
    );
    location.set_ready();
    let queue = Arc::new(FakeQueue::default());
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let consumer = LocationConsumer::new(
        location.clone(),
        QueueReader::new(
            "location `raw`".into(),
            queue.clone(),
            1,
            Duration::from_secs(30),
            Duration::ZERO,
        ),
        StoreRef::S3 { bucket: "b".into() },
        ListingDiscovery::new(
            "raw",
            store.clone(),
            Path::from("landing"),
            Filters::default(),
        ),
        None,
    );
    Fixture {
        _dir: dir,
        queue,
        store,
        location,
        consumer,
    }
}

impl Fixture {
    fn send(&self, bodies: &[String]) {
        let mut q = self.queue.queued.lock().unwrap();
        let base = q.len() + self.queue.deleted.lock().unwrap().len();
        for (i, b) in bodies.iter().enumerate() {
            q.push(QueueMessage {
                id: format!("m{}", base + i),
                body: b.clone(),
                receipt: format!("r{}", base + i),
                receive_count: 1,
            });
        }
    }

    fn stream(&self, prefix: &str, glob: Option<&str>) -> FileEventsDiscovery {
        let filters = Filters {
            glob: glob.map(|g| globset::Glob::new(g).unwrap().compile_matcher()),
            ..Filters::default()
        };
        let listing = ListingDiscovery::new("s", self.store.clone(), Path::from(prefix), filters);
        FileEventsDiscovery::new("s", listing, self.location.clone())
    }
}

/// Discover from position `seq` of stream `s`.
async fn read_from(s: &FileEventsDiscovery, seq: u64) -> DiscoveryBatch {
    s.discover(Some(&s.position_at(seq).unwrap()))
        .await
        .unwrap()
}

fn seq(b: &DiscoveryBatch) -> Option<u64> {
    parse_position(b.cursor.as_deref()).map(|p| p.seq)
}

fn paths(b: &DiscoveryBatch) -> Vec<&str> {
    b.files.iter().map(|f| f.path.as_str()).collect()
}

#[tokio::test]
async fn events_are_cached_once_and_each_stream_reads_its_own() {
    let f = fixture(Duration::from_secs(3600));
    f.send(&[
        event("ObjectCreated:Put", "landing/a/1.json", 5, "e1", "01"),
        event("ObjectCreated:Put", "landing/a/1.json", 5, "e1", "01"),
        event("ObjectCreated:Put", "landing/a/x/2.csv", 5, "e2", "02"),
        event("ObjectCreated:Put", "landing/b/3.json", 5, "e3", "03"),
        event("ObjectCreated:Put", "elsewhere/4.json", 5, "e4", "04"),
        event("ObjectCreated:Put", "landing/a/empty.json", 0, "e5", "05"),
        "not json".into(),
    ]);
    let r = f.consumer.round().await.unwrap();
    // The zero-byte object is cached (its streams record it as skipped, `empty`).
    assert_eq!((r.cached, r.passed_over), (4, 1));
    assert_eq!(r.queue.malformed.len(), 1);
    // Every message but the malformed one is deleted.
    assert_eq!(f.queue.deleted.lock().unwrap().len(), 6);

    let a = f.stream("landing/a", Some("**/*.json"));
    // A stream without a position lists (nothing is in the store) and takes the position
    // the cache had before the listing.
    let first = a.discover(None).await.unwrap();
    assert!(first.full_listing && first.files.is_empty());
    assert_eq!(seq(&first), Some(4));
    // From position 0 (as if the events came after its listing) it reads its own.
    let b = read_from(&a, 0).await;
    assert_eq!(paths(&b), ["landing/a/1.json", "landing/a/empty.json"]);
    assert_eq!(seq(&b), Some(4));
    let c = read_from(&f.stream("landing", None), 0).await;
    assert_eq!(
        paths(&c),
        [
            "landing/a/1.json",
            "landing/a/x/2.csv",
            "landing/b/3.json",
            "landing/a/empty.json"
        ]
    );
    // Nothing new after the position.
    let d = read_from(&a, 4).await;
    assert!(d.files.is_empty() && d.cursor.is_none());
}

#[tokio::test]
async fn a_listing_position_taken_before_the_listing_leaves_no_gap() {
    let f = fixture(Duration::from_secs(3600));
    f.store
        .put(&Path::from("landing/old.json"), PutPayload::from("{}\n"))
        .await
        .unwrap();
    f.send(&[event("ObjectCreated:Put", "landing/new.json", 3, "n", "01")]);
    f.consumer.round().await.unwrap();
    let s = f.stream("landing", None);
    let listed = s.discover(None).await.unwrap();
    assert_eq!(paths(&listed), ["landing/old.json"]);
    assert_eq!(seq(&listed), Some(1));
    // An event cached after the listing's snapshot is read next.
    f.send(&[event(
        "ObjectCreated:Put",
        "landing/later.json",
        3,
        "l",
        "02",
    )]);
    f.consumer.round().await.unwrap();
    let next = s.discover(listed.cursor.as_deref()).await.unwrap();
    assert_eq!(paths(&next), ["landing/later.json"]);
}

#[tokio::test]
async fn a_position_older_than_the_retention_lists_again() {
    let f = fixture(Duration::from_secs(1));
    f.send(&[event("ObjectCreated:Put", "landing/1.json", 3, "a", "01")]);
    f.consumer.round().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    f.location
        .cache
        .expire(chrono::Utc::now() - chrono::Duration::seconds(1))
        .unwrap();
    assert_eq!(f.location.cache.expired_through().unwrap(), 1);
    let s = f.stream("landing", None);
    let b = read_from(&s, 0).await;
    assert!(b.full_listing, "a position below the horizon must list");
    assert_eq!(seq(&b), Some(1));
    // At the horizon, reading is complete again.
    let b = read_from(&s, 1).await;
    assert!(!b.full_listing);
}

#[tokio::test]
async fn a_removal_drops_the_creation_it_supersedes_but_not_a_later_upload() {
    let f = fixture(Duration::from_secs(3600));
    f.send(&[
        event("ObjectCreated:Put", "landing/gone.json", 3, "g", "01"),
        event("ObjectCreated:Put", "landing/back.json", 3, "b1", "02"),
    ]);
    f.consumer.round().await.unwrap();
    // Removed after its creation (sequencer 03 > 01); `back.json` removed (03) and uploaded
    // again (04) in one round, delivered out of order.
    f.send(&[
        event("ObjectCreated:Put", "landing/back.json", 3, "b2", "04"),
        event("ObjectRemoved:Delete", "landing/gone.json", 0, "", "03"),
        event("ObjectRemoved:Delete", "landing/back.json", 0, "", "03"),
    ]);
    let r = f.consumer.round().await.unwrap();
    assert_eq!(r.dropped, 2, "{r:?}");
    let b = read_from(&f.stream("landing", None), 0).await;
    assert_eq!(paths(&b), ["landing/back.json"]);
    assert_eq!(b.files[0].etag.as_deref(), Some("\"b2\""));
}

#[tokio::test]
async fn the_location_listing_caches_only_what_the_events_missed() {
    let f = fixture(Duration::from_secs(3600));
    for k in ["landing/seen.json", "landing/lost.json", "other/x.json"] {
        f.store
            .put(&Path::from(k), PutPayload::from("{}\n"))
            .await
            .unwrap();
    }
    let etag = f
        .store
        .head(&Path::from("landing/seen.json"))
        .await
        .unwrap()
        .e_tag
        .unwrap();
    let bare = etag.trim_matches('"').to_string();
    f.send(&[event(
        "ObjectCreated:Put",
        "landing/seen.json",
        3,
        &bare,
        "01",
    )]);
    f.consumer.round().await.unwrap();
    assert_eq!(f.consumer.list().await.unwrap(), 1);
    assert_eq!(
        f.consumer.list().await.unwrap(),
        0,
        "a second listing adds nothing"
    );
    let b = read_from(&f.stream("landing", None), 0).await;
    assert_eq!(paths(&b), ["landing/seen.json", "landing/lost.json"]);
}

#[tokio::test]
async fn a_position_of_another_or_an_older_cache_lists_again() {
    let f = fixture(Duration::from_secs(3600));
    f.send(&[event("ObjectCreated:Put", "landing/1.json", 3, "a", "01")]);
    f.consumer.round().await.unwrap();
    let s = f.stream("landing", None);
    let at1 = s.position_at(1).unwrap();
    // The cache directory was replaced: the stream's position names another cache.
    let other = at1.replacen(&f.location.id, "0123456789abcdef", 1);
    let b = s.discover(Some(&other)).await.unwrap();
    assert!(b.full_listing);
    assert_eq!(seq(&b), Some(1));
    // Restored from an older copy: the position is beyond the cache's last number ...
    let b = read_from(&s, 7).await;
    assert!(b.full_listing);
    // ... or the event at it is another than the one the stream read.
    let p = parse_position(Some(&at1)).unwrap();
    let forged = at1.replacen(p.tag, "ffffffffffffffff", 1);
    assert!(s.discover(Some(&forged)).await.unwrap().full_listing);
    assert!(!s.discover(Some(&at1)).await.unwrap().full_listing);
    // The stream's prefix or glob changed since it took the position.
    let narrower = f.stream("landing", Some("*.csv"));
    assert!(narrower.discover(Some(&at1)).await.unwrap().full_listing);
    // A listing cursor (from listing mode) is no position either.
    let b = s.discover(Some("landing/zzz.json")).await.unwrap();
    assert!(b.full_listing);
}

/// Deleted and uploaded again with the same bytes (same etag): the later creation moves the
/// held event's sequencer, so the removal between the two does not drop the file that exists.
/// A removal of one version (a versioned bucket) is settled by the store, not by sequencers.
#[tokio::test]
async fn a_re_upload_of_the_same_bytes_and_a_version_removal_keep_the_event() {
    let f = fixture(Duration::from_secs(3600));
    let key = Path::from("landing/same.json");
    f.store.put(&key, PutPayload::from("{}\n")).await.unwrap();
    let etag = f.store.head(&key).await.unwrap().e_tag.unwrap();
    let bare = etag.trim_matches('"').to_string();
    f.send(&[event(
        "ObjectCreated:Put",
        "landing/same.json",
        3,
        &bare,
        "01",
    )]);
    f.consumer.round().await.unwrap();
    f.send(&[
        event("ObjectRemoved:Delete", "landing/same.json", 0, "", "02"),
        event("ObjectCreated:Put", "landing/same.json", 3, &bare, "03"),
    ]);
    let r = f.consumer.round().await.unwrap();
    assert_eq!(r.dropped, 0, "{r:?}");
    let b = read_from(&f.stream("landing", None), 0).await;
    assert_eq!(paths(&b), ["landing/same.json"]);
    // An old version deleted for good (its event names the version, with a later sequencer):
    // the current object lives on.
    let versioned = r#"{"Records":[{"eventName":"ObjectRemoved:Delete","eventTime":"2026-11-30T00:00:00Z","s3":{"bucket":{"name":"b"},"object":{"key":"landing/same.json","versionId":"v1","sequencer":"09"}}}]}"#;
    f.send(&[versioned.to_string()]);
    let r = f.consumer.round().await.unwrap();
    assert_eq!(r.dropped, 0, "{r:?}");
    // Deleted for real: the store no longer has it.
    f.store.delete(&key).await.unwrap();
    f.send(&[versioned.to_string()]);
    let r = f.consumer.round().await.unwrap();
    assert_eq!(r.dropped, 1, "{r:?}");
}

/// An Event Grid event about container `lake` of account `myaccount` (blob names as Azure
/// percent-encodes them): `url` for one blob, `from` and `to` for a rename.
fn azure(kind: &str, api: &str, url: Option<&str>, rename: Option<(&str, &str)>) -> String {
    let blob = |name: &str| format!("https://myaccount.dfs.core.windows.net/lake/{name}");
    let mut data = format!(r#""api":"{api}","sequencer":"00000000000004420000000000028963""#);
    if let Some(name) = url {
        data += &format!(r#","url":"{}","contentLength":3"#, blob(name));
    }
    if let Some((from, to)) = rename {
        data += &format!(
            r#","sourceUrl":"{}","destinationUrl":"{}""#,
            blob(from),
            blob(to)
        );
    }
    format!(
        r#"{{"topic":"/subscriptions/x/resourceGroups/y/providers/Microsoft.Storage/storageAccounts/myaccount","subject":"/blobServices/default/containers/lake/blobs/x","eventType":"Microsoft.Storage.{kind}","eventTime":"2026-11-30T00:00:00Z","id":"1","data":{{{data}}},"dataVersion":"1","metadataVersion":"1"}}"#
    )
}

#[tokio::test]
async fn renamed_files_and_directories_reach_the_cache_and_their_sources_leave_it() {
    let f = fixture(Duration::from_secs(3600));
    // The location's own consumer on an Azure container (the fixture's is on S3).
    let consumer = LocationConsumer::new(
        f.location.clone(),
        QueueReader::new(
            "location `raw`".into(),
            f.queue.clone(),
            1,
            Duration::from_secs(30),
            Duration::ZERO,
        ),
        StoreRef::Azure {
            account: "myaccount".into(),
            container: "lake".into(),
        },
        ListingDiscovery::new(
            "raw",
            f.store.clone(),
            Path::from("landing"),
            Filters {
                keep_hidden: true,
                ..Filters::default()
            },
        ),
        None,
    );
    for p in [
        "landing/x.json",
        "landing/out/part=1/a.json",
        "landing/out/part=1/_SUCCESS",
        "landing/old.json",
        "elsewhere/part=1/b.json",
    ] {
        f.store
            .put(&Path::from(p), PutPayload::from("{}\n"))
            .await
            .unwrap();
    }
    // A writer flushes `x.json.tmp` (cached: the event has its size), then renames it.
    f.send(&[azure(
        "BlobCreated",
        "FlushWithClose",
        Some("landing/x.json.tmp"),
        None,
    )]);
    assert_eq!(consumer.round().await.unwrap().cached, 1);
    f.send(&[
        azure(
            "BlobRenamed",
            "RenameFile",
            None,
            Some(("landing/x.json.tmp", "landing/x.json")),
        ),
        azure(
            "DirectoryRenamed",
            "RenameDirectory",
            None,
            Some((
                "landing/_temporary/0/task_1/part%3D1",
                "landing/out/part%3D1",
            )),
        ),
        azure(
            "DirectoryRenamed",
            "RenameDirectory",
            None,
            Some(("tmp/part%3D1", "elsewhere/part%3D1")),
        ),
    ]);
    let r = consumer.round().await.unwrap();
    // `x.json` (a HEAD read its size), and what the listing of `out/part=1` found.
    assert_eq!((r.cached, r.dropped, r.passed_over), (3, 1, 1));
    assert_eq!(f.queue.deleted.lock().unwrap().len(), 4);
    let s = f.stream("landing", None);
    let b = read_from(&s, 0).await;
    assert_eq!(paths(&b), ["landing/x.json", "landing/out/part=1/a.json"]);
    assert!(b.files.iter().all(|f| f.size == 3 && f.etag.is_some()));
}
