//! VACUUM on a local Delta table whose log is written by hand (as another writer's OPTIMIZE
//! or DELETE would leave it): live files, their deletion vectors, removes inside and outside
//! the retention, orphans old and new, hidden paths and partition directories. Each file's
//! fate is checked, for the dry run and the real one.

use chrono::{Duration, Utc};
use landfall_sink::delta::vacuum::vacuum;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::SystemTime;

const DAY_MS: i64 = 24 * 3600 * 1000;

fn uri(dir: &Path) -> String {
    url::Url::from_directory_path(dir).unwrap().to_string()
}

/// A file at `rel` under `dir`, modified `days_ago` days ago.
fn file(dir: &Path, rel: &str, days_ago: u64) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, rel.as_bytes()).unwrap();
    let t = SystemTime::now() - std::time::Duration::from_secs(days_ago * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

fn files(dir: &Path) -> BTreeSet<String> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.insert(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

fn add(path: &str, dv: Option<&str>) -> String {
    let dv = dv
        .map(|p| {
            format!(
                r#","deletionVector":{{"storageType":"u","pathOrInlineDv":"{p}","offset":1,"sizeInBytes":36,"cardinality":2}}"#
            )
        })
        .unwrap_or_default();
    format!(
        r#"{{"add":{{"path":"{path}","partitionValues":{{}},"size":10,"modificationTime":0,"dataChange":true{dv}}}}}"#
    )
}

fn remove(path: &str, deleted_ms: i64) -> String {
    format!(
        r#"{{"remove":{{"path":"{path}","deletionTimestamp":{deleted_ms},"dataChange":true}}}}"#
    )
}

/// A table with deletion vectors: version 0 adds five files, version 1 removes two (one
/// eight days ago, one yesterday). `properties` go into its metaData.
fn table(dir: &Path, properties: &str) {
    let now = Utc::now().timestamp_millis();
    let schema = r#"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}"#;
    let v0 = [
        r#"{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],"writerFeatures":["deletionVectors"]}}"#.to_string(),
        format!(
            r#"{{"metaData":{{"id":"t","format":{{"provider":"parquet","options":{{}}}},"schemaString":"{schema}","partitionColumns":[],"configuration":{{{properties}}},"createdTime":0}}}}"#
        ),
        add("live.parquet", Some("ab00000000000000000000")),
        add("k=a%20b/live%20space.parquet", None),
        add("gone-long-ago.parquet", None),
        add("gone-yesterday.parquet", None),
        add("_p=1/live.parquet", None),
    ];
    let v1 = [
        remove("gone-long-ago.parquet", now - 8 * DAY_MS),
        remove("gone-yesterday.parquet", now - DAY_MS),
    ];
    let log = dir.join("_delta_log");
    std::fs::create_dir_all(&log).unwrap();
    std::fs::write(log.join("00000000000000000000.json"), v0.join("\n")).unwrap();
    std::fs::write(log.join("00000000000000000001.json"), v1.join("\n")).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn only_files_no_retained_version_needs_are_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    table(dir, "");
    let dv = "ab/deletion_vector_00000000-0000-0000-0000-000000000000.bin";
    let kept = [
        "live.parquet",
        dv,
        "k=a b/live space.parquet",
        "gone-yesterday.parquet",
        "_p=1/live.parquet",
        "fresh-orphan.parquet",
        "_tmp/old.parquet",
        ".old.parquet.crc",
        "x/.hidden/old.parquet",
        // `_p` is no partition column of this table: hidden, as Delta has it.
        "_p=3/orphan.parquet",
    ];
    let deleted = [
        "gone-long-ago.parquet",
        "orphan.parquet",
        "p=2/orphan.parquet",
        "ab/deletion_vector_11111111-0000-0000-0000-000000000000.bin",
    ];
    for f in kept.iter().chain(&deleted) {
        file(dir, f, if *f == "fresh-orphan.parquet" { 0 } else { 30 });
    }
    let before = files(dir);

    let dry = vacuum(&uri(dir), &HashMap::new(), true, Utc::now())
        .await
        .unwrap();
    let listed: BTreeSet<String> = dry.deleted.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(
        listed,
        deleted
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>()
    );
    assert_eq!(files(dir), before, "a dry run deletes nothing");
    assert_eq!(dry.version, 1);
    assert_eq!(dry.retention, std::time::Duration::from_secs(7 * 24 * 3600));
    assert_eq!(
        dry.live_files, 4,
        "3 data files and a deletion vector: {dry:?}"
    );
    assert_eq!(dry.tombstoned_files, 1, "{dry:?}");
    assert_eq!(dry.recent_files, 1);

    let done = vacuum(&uri(dir), &HashMap::new(), false, Utc::now())
        .await
        .unwrap();
    assert_eq!(done.deleted, dry.deleted);
    let left = files(dir);
    for k in kept {
        assert!(left.contains(k), "{k} was deleted");
    }
    for d in deleted {
        assert!(!left.contains(d), "{d} is still there");
    }
    assert!(left.iter().any(|f| f.starts_with("_delta_log/")));
    // Nothing more to do.
    let again = vacuum(&uri(dir), &HashMap::new(), false, Utc::now())
        .await
        .unwrap();
    assert!(again.deleted.is_empty(), "{again:?}");
    // Eight days later, yesterday's remove has expired too; the fresh orphan is old enough.
    let later = vacuum(
        &uri(dir),
        &HashMap::new(),
        true,
        Utc::now() + Duration::days(8),
    )
    .await
    .unwrap();
    let names: Vec<&str> = later.deleted.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["fresh-orphan.parquet", "gone-yesterday.parquet"]);
}

/// A retention under Delta's 7-day safety check is refused, naming the property; a longer
/// one is honoured.
#[tokio::test(flavor = "multi_thread")]
async fn the_table_s_retention_is_honoured_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    table(
        tmp.path(),
        r#""delta.deletedFileRetentionDuration":"interval 1 hours""#,
    );
    let e = vacuum(&uri(tmp.path()), &HashMap::new(), true, Utc::now())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("delta.deletedFileRetentionDuration") && e.contains("under 7 days"),
        "{e}"
    );

    let tmp = tempfile::tempdir().unwrap();
    table(
        tmp.path(),
        r#""delta.deletedFileRetentionDuration":"interval 40 days""#,
    );
    file(tmp.path(), "orphan.parquet", 30);
    file(tmp.path(), "gone-long-ago.parquet", 30);
    let r = vacuum(&uri(tmp.path()), &HashMap::new(), true, Utc::now())
        .await
        .unwrap();
    assert!(r.deleted.is_empty(), "{r:?}");
    assert_eq!(r.retention, std::time::Duration::from_secs(40 * 24 * 3600));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_without_a_table_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    file(tmp.path(), "orphan.parquet", 30);
    let e = vacuum(&uri(tmp.path()), &HashMap::new(), false, Utc::now())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no Delta table here"), "{e}");
    assert!(tmp.path().join("orphan.parquet").exists());
}
