//! Ledger transitions, run against both the in-memory map and a real RocksDB directory.

use chrono::{DateTime, Duration, TimeZone, Utc};
use landfall_core::{BatchLimits, CommitReceipt, FileKey, FileMeta, FileState, StateStore};
use landfall_state::{Kv, Ledger, MemoryKv, open_rocks};

fn meta(path: &str, size: u64, modified: DateTime<Utc>) -> (FileKey, FileMeta) {
    let m = FileMeta {
        path: path.into(),
        size,
        modified,
        etag: None,
        version: None,
    };
    (m.key(false), m)
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

fn receipt(rows: u64, at: DateTime<Utc>) -> CommitReceipt {
    CommitReceipt {
        table_version: 7,
        rows,
        data_files: 1,
        data_bytes: 10,
        committed_at: at,
        recovered: false,
    }
}

fn lifecycle<K: Kv>(l: &Ledger<K>) {
    let now = t0();
    assert!(l.is_new().unwrap());
    let files = vec![
        meta("a.json", 10, now),
        meta("b.json", 20, now),
        meta("c.json", 30, now),
        meta("a.json", 10, now),
    ];
    assert_eq!(
        l.admit(&files, Some("c.json"), now).unwrap(),
        3,
        "duplicates in one call are admitted once"
    );
    assert_eq!(
        l.admit(&files, Some("c.json"), now).unwrap(),
        0,
        "known files are not admitted again"
    );
    assert_eq!(l.cursor().unwrap().as_deref(), Some("c.json"));
    assert!(!l.is_new().unwrap());

    let s = l.summary().unwrap();
    assert_eq!((s.pending_files, s.pending_bytes), (3, 60));

    // The byte cap is soft: b (20) would pass 25 after a (10), so the batch stops at a.
    let limits = BatchLimits {
        max_files: 10,
        max_bytes: Some(25),
    };
    let plan = l.plan_batch(limits, 1, now).unwrap().unwrap();
    assert_eq!(plan.batch_id, 0);
    assert_eq!(
        plan.files
            .iter()
            .map(|f| f.1.path.as_str())
            .collect::<Vec<_>>(),
        ["a.json"]
    );
    let err = l.plan_batch(limits, 1, now).unwrap_err();
    assert!(
        err.message.contains("batch 0 is still open"),
        "{}",
        err.message
    );
    assert_eq!(l.open_batch().unwrap().unwrap().batch_id, 0);

    let p = l.start_attempt(0).unwrap();
    assert_eq!(p.attempts, 1);
    l.record_staged(0, "part-0.parquet").unwrap();
    assert_eq!(l.batch(0).unwrap().unwrap().staged, ["part-0.parquet"]);

    l.record_committed(0, receipt(5, now)).unwrap();
    l.record_committed(0, receipt(5, now)).unwrap();
    assert!(l.open_batch().unwrap().is_none());
    let a = &l.files(Some(FileState::Committed)).unwrap()[0];
    assert_eq!(
        (a.meta.path.as_str(), a.batch_id, a.table_version),
        ("a.json", Some(0), Some(7))
    );
    assert_eq!(a.state.ingestion_state(), Some("INGESTED"));

    let plan = l
        .plan_batch(
            BatchLimits {
                max_files: 1,
                max_bytes: None,
            },
            1,
            now,
        )
        .unwrap()
        .unwrap();
    assert_eq!((plan.batch_id, plan.files.len()), (1, 1));
    assert_eq!(plan.files[0].1.path, "b.json", "discovery order");
    l.record_committed(1, receipt(1, now)).unwrap();
    let plan = l
        .plan_batch(
            BatchLimits {
                max_files: 5,
                max_bytes: None,
            },
            1,
            now,
        )
        .unwrap()
        .unwrap();
    assert_eq!(plan.files[0].1.path, "c.json");
    assert_eq!(l.files(Some(FileState::InBatch)).unwrap().len(), 1);
    l.record_committed(2, receipt(1, now)).unwrap();
    assert!(l.plan_batch(limits, 1, now).unwrap().is_none());

    let s = l.summary().unwrap();
    assert_eq!(
        (
            s.committed_batches,
            s.committed_rows,
            s.committed_files,
            s.committed_bytes
        ),
        (3, 7, 3, 60)
    );
    assert_eq!(s.last_batch.unwrap().batch_id, 2);
    assert_eq!(s.pending_files, 0);
}

fn expiry<K: Kv>(l: &Ledger<K>) {
    let old = t0() - Duration::days(100);
    let now = t0();
    l.admit(
        &[
            meta("old.json", 1, old),
            meta("new.json", 1, now),
            meta("old-pending.json", 1, old),
        ],
        None,
        now,
    )
    .unwrap();
    l.plan_batch(
        BatchLimits {
            max_files: 1,
            max_bytes: None,
        },
        1,
        now,
    )
    .unwrap();
    l.record_committed(0, receipt(1, now)).unwrap();
    // old.json is committed and old: expired. old-pending.json is old but not yet ingested: kept.
    assert_eq!(l.expire(now - Duration::days(30)).unwrap(), 1);
    let left: Vec<_> = l
        .files(None)
        .unwrap()
        .into_iter()
        .map(|r| r.meta.path)
        .collect();
    assert_eq!(left, ["new.json", "old-pending.json"]);
    assert_eq!(l.expire(now - Duration::days(30)).unwrap(), 0);
}

fn schemas<K: Kv>(l: &Ledger<K>) {
    assert_eq!(l.latest_schema_version().unwrap(), None);
    l.put_schema(1, "{\"fields\":[]}").unwrap();
    l.put_schema(2, "{\"fields\":[1]}").unwrap();
    assert_eq!(l.latest_schema_version().unwrap(), Some(2));
    assert_eq!(l.schema(1).unwrap().as_deref(), Some("{\"fields\":[]}"));
}

#[test]
fn memory_lifecycle() {
    lifecycle(&Ledger::new("s", MemoryKv::default()));
    expiry(&Ledger::new("s", MemoryKv::default()));
    schemas(&Ledger::new("s", MemoryKv::default()));
}

#[test]
fn rocks_lifecycle_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let l = open_rocks("s", &dir.path().join("a")).unwrap();
        lifecycle(&l);
        let second = open_rocks("s", &dir.path().join("a"));
        assert!(
            second.is_err(),
            "a second open of the same directory must fail"
        );
        assert!(second.err().unwrap().to_string().contains("locked"));
    }
    let l = open_rocks("s", &dir.path().join("a")).unwrap();
    assert_eq!(
        l.summary().unwrap().committed_batches,
        3,
        "state survives a reopen"
    );
    expiry(&open_rocks("s", &dir.path().join("b")).unwrap());
    schemas(&open_rocks("s", &dir.path().join("c")).unwrap());
}
