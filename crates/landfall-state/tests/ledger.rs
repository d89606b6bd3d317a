//! Ledger transitions, run against both the in-memory map and a real RocksDB directory.

use chrono::{DateTime, Duration, TimeZone, Utc};
use landfall_core::{
    BatchLimits, CommitReceipt, FileKey, FileMeta, FileState, SkipKind, SkipReason, StateStore,
};
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
    assert_eq!(l.expire(now - Duration::days(30), false).unwrap(), 1);
    let left: Vec<_> = l
        .files(None)
        .unwrap()
        .into_iter()
        .map(|r| r.meta.path)
        .collect();
    assert_eq!(left, ["new.json", "old-pending.json"]);
    assert_eq!(l.expire(now - Duration::days(30), false).unwrap(), 0);
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

fn etagged(path: &str, size: u64, etag: &str) -> FileMeta {
    FileMeta {
        path: path.into(),
        size,
        modified: t0(),
        etag: Some(format!("\"{etag}\"")),
        version: None,
    }
}

/// A skipped file stays out of its batch's commit and counts; a committed one cannot be
/// skipped.
fn skips<K: Kv>(l: &Ledger<K>) {
    let now = t0();
    let files = vec![
        meta("a.json", 10, now),
        meta("b.json", 20, now),
        meta("c.json", 5, now),
    ];
    l.admit(&files, None, now).unwrap();
    // A pending file skipped before planning never enters a plan.
    let manual = SkipReason {
        kind: SkipKind::Manual,
        detail: "by hand".into(),
    };
    l.skip_file(&files[2].0, manual, now).unwrap();
    let limits = BatchLimits {
        max_files: 10,
        max_bytes: None,
    };
    let plan = l.plan_batch(limits, 1, now).unwrap().unwrap();
    assert_eq!(plan.files.len(), 2);
    let missing = SkipReason {
        kind: SkipKind::Missing,
        detail: "gone".into(),
    };
    let rec = l.skip_file(&files[0].0, missing.clone(), now).unwrap();
    assert_eq!(
        (rec.state, rec.skip.clone()),
        (FileState::Skipped, Some(missing))
    );
    l.record_committed(plan.batch_id, receipt(2, now)).unwrap();
    let s = l.summary().unwrap();
    assert_eq!(
        (s.committed_files, s.committed_bytes),
        (1, 20),
        "only b landed"
    );
    let counts: std::collections::HashMap<_, _> = s.files_by_state.into_iter().collect();
    assert_eq!(counts[&FileState::Skipped], 2);
    assert_eq!(counts[&FileState::Committed], 1);
    assert_eq!(
        l.file(&files[0].0).unwrap().unwrap().state,
        FileState::Skipped
    );
    let err = l
        .skip_file(
            &files[1].0,
            SkipReason {
                kind: SkipKind::Manual,
                detail: String::new(),
            },
            now,
        )
        .unwrap_err();
    assert!(err.message.contains("is committed"), "{}", err.message);
}

/// Toggling allow_overwrites: unchanged files stay known under either kind of key; a changed
/// one is a new version only with overwrites on.
fn toggled_keys<K: Kv>(l: &Ledger<K>) {
    let now = t0();
    let a1 = etagged("a.json", 10, "1");
    assert_eq!(
        l.admit(&[(a1.key(false), a1.clone())], None, now).unwrap(),
        1
    );
    // Overwrites on, same version: known.
    assert_eq!(
        l.admit(&[(a1.key(true), a1.clone())], None, now).unwrap(),
        0
    );
    // Overwrites on, new version: admitted under its versioned key.
    let a2 = etagged("a.json", 12, "2");
    assert_eq!(
        l.admit(&[(a2.key(true), a2.clone())], None, now).unwrap(),
        1
    );
    assert_eq!(a2.key(true).0, "a.json@e:2");
    // Overwrites off again: any version of the path is known.
    let a3 = etagged("a.json", 14, "3");
    assert_eq!(
        l.admit(&[(a3.key(false), a3.clone())], None, now).unwrap(),
        0
    );
    // A file first seen with overwrites on, then with them off: known.
    let b1 = etagged("b.json", 10, "1");
    assert_eq!(
        l.admit(&[(b1.key(true), b1.clone())], None, now).unwrap(),
        1
    );
    assert_eq!(
        l.admit(&[(b1.key(false), b1.clone())], None, now).unwrap(),
        0
    );
    // A path that only shares a prefix with a versioned key is not mistaken for it.
    let c = etagged("b.json@e:1x", 3, "9");
    assert_eq!(l.admit(&[(c.key(false), c.clone())], None, now).unwrap(), 1);
}

/// Closed plans beyond the newest N are pruned with their staged-file names.
fn pruning<K: Kv>(l: &Ledger<K>) {
    let now = t0();
    let limits = BatchLimits {
        max_files: 1,
        max_bytes: None,
    };
    for i in 0..5 {
        let f = meta(&format!("f{i}.json"), 1, now);
        l.admit(&[f], None, now).unwrap();
        let plan = l.plan_batch(limits, 1, now).unwrap().unwrap();
        l.record_staged(plan.batch_id, &format!("part-{i}.parquet"))
            .unwrap();
        l.record_committed(plan.batch_id, receipt(1, now)).unwrap();
        l.prune_batch(plan.batch_id, 2).unwrap();
        assert!(l.batch(plan.batch_id).unwrap().unwrap().staged.is_empty());
    }
    assert!(l.batch(2).unwrap().is_none(), "plan 2 pruned");
    assert!(l.batch(3).unwrap().is_some() && l.batch(4).unwrap().is_some());
    assert_eq!(l.last_batch_id().unwrap(), Some(4));
}

/// A writer that creates a key empty and then fills it: the version with content is the one
/// ingested, whether both come in one call (either order) or the filled one comes after the
/// empty one was admitted and before it was read; once planned, the empty version stays.
fn empty_then_filled<K: Kv>(l: &Ledger<K>) {
    let now = t0();
    let later = now + Duration::seconds(1);
    // One call, the empty version first.
    let both = vec![meta("a.json", 0, now), meta("a.json", 42, later)];
    assert_eq!(l.admit(&both, None, now).unwrap(), 1);
    // Later calls: the empty version first, then the filled one.
    assert_eq!(l.admit(&[meta("b.json", 0, now)], None, now).unwrap(), 1);
    assert_eq!(l.admit(&[meta("b.json", 0, now)], None, now).unwrap(), 0);
    assert_eq!(l.admit(&[meta("b.json", 7, later)], None, now).unwrap(), 1);
    // The filled one first: an empty version coming after it is known.
    assert_eq!(l.admit(&[meta("c.json", 9, later)], None, now).unwrap(), 1);
    assert_eq!(l.admit(&[meta("c.json", 0, now)], None, now).unwrap(), 0);
    let s = l.summary().unwrap();
    assert_eq!(
        (s.pending_files, s.pending_bytes),
        (3, 58),
        "one entry per key"
    );
    let plan = l
        .plan_batch(
            BatchLimits {
                max_files: 10,
                max_bytes: None,
            },
            1,
            now,
        )
        .unwrap()
        .unwrap();
    let mut sizes: Vec<_> = plan
        .files
        .iter()
        .map(|f| (f.1.path.clone(), f.1.size))
        .collect();
    sizes.sort();
    assert_eq!(
        sizes,
        [
            ("a.json".into(), 42),
            ("b.json".into(), 7),
            ("c.json".into(), 9)
        ],
        "each key planned once, with its content"
    );
}

#[test]
fn empty_then_filled_keeps_the_content() {
    empty_then_filled(&Ledger::new("s", MemoryKv::default()));
    let dir = tempfile::tempdir().unwrap();
    empty_then_filled(&open_rocks("s", dir.path()).unwrap());
}

#[test]
fn memory_skips_toggles_pruning() {
    skips(&Ledger::new("s", MemoryKv::default()));
    toggled_keys(&Ledger::new("s", MemoryKv::default()));
    pruning(&Ledger::new("s", MemoryKv::default()));
}

#[test]
fn rocks_skips_toggles_pruning_and_format() {
    let dir = tempfile::tempdir().unwrap();
    skips(&open_rocks("s", &dir.path().join("a")).unwrap());
    toggled_keys(&open_rocks("s", &dir.path().join("b")).unwrap());
    pruning(&open_rocks("s", &dir.path().join("c")).unwrap());
    // A ledger from a newer landfall is refused by name, not misread.
    {
        let l = open_rocks("s", &dir.path().join("d")).unwrap();
        l.set_meta("x", "1").unwrap();
    }
    {
        let kv = landfall_state::RocksKv::open(&dir.path().join("d")).unwrap();
        kv.write(vec![landfall_state::KvOp::Put(
            b"m/format".to_vec(),
            b"99".to_vec(),
        )])
        .unwrap();
    }
    let err = open_rocks("s", &dir.path().join("d"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("ledger format 99"), "{err}");
}

/// Corruption is reported as corruption (naming the directory and the way out), not as a lock.
#[test]
fn rocks_corruption_is_not_reported_as_a_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    {
        let l = open_rocks("s", &path).unwrap();
        let now = t0();
        l.admit(&[meta("a.json", 1, now)], None, now).unwrap();
    }
    // Damage the MANIFEST the CURRENT file points at.
    let current = std::fs::read_to_string(path.join("CURRENT")).unwrap();
    std::fs::write(path.join(current.trim()), b"garbage garbage garbage block").unwrap();
    let err = open_rocks("s", &path).err().unwrap().to_string();
    assert!(!err.contains("locked"), "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("landfall reset"), "{err}");
}

/// Planning reads the pending queue in chunks (crates/landfall-state/src/ledger/batches.rs):
/// limits and passed-over entries across chunk boundaries take files in discovery order,
/// each once.
fn plans_across_chunks<K: Kv>(l: &Ledger<K>) {
    let now = t0();
    let files: Vec<_> = (0..1300)
        .map(|i| meta(&format!("in/f{i:05}.json"), 1 + i % 3, now))
        .collect();
    l.admit(&files, None, now).unwrap();
    // Skipped while pending, on both sides of the first chunk's end (512 entries).
    let skipped = [0usize, 511, 512, 1000];
    for i in skipped {
        l.skip_file(
            &files[i].0,
            SkipReason {
                kind: SkipKind::Manual,
                detail: "test".into(),
            },
            now,
        )
        .unwrap();
    }
    let expected: Vec<FileKey> = (0..1300)
        .filter(|i| !skipped.contains(i))
        .map(|i| files[i].0.clone())
        .collect();
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    for limits in [
        BatchLimits {
            max_files: 600,
            max_bytes: None,
        },
        BatchLimits {
            max_files: 10_000,
            max_bytes: Some(1_100),
        },
        BatchLimits {
            max_files: 10_000,
            max_bytes: None,
        },
    ] {
        let plan = l.plan_batch(limits, 1, now).unwrap().unwrap();
        if let Some(cap) = limits.max_bytes {
            let bytes: u64 = plan.files.iter().map(|(_, m)| m.size).sum();
            assert!(bytes <= cap && bytes + 3 > cap, "{bytes} against {cap}");
        }
        sizes.push(plan.files.len());
        seen.extend(plan.files.iter().map(|(k, _)| k.clone()));
        l.record_committed(plan.batch_id, receipt(1, now)).unwrap();
    }
    assert_eq!(sizes[0], 600);
    assert_eq!(
        seen, expected,
        "every pending file once, in discovery order"
    );
    assert!(
        l.plan_batch(
            BatchLimits {
                max_files: 10,
                max_bytes: None
            },
            1,
            now
        )
        .unwrap()
        .is_none()
    );
}

#[test]
fn plans_across_chunks_in_memory_and_rocks() {
    plans_across_chunks(&Ledger::new("s", MemoryKv::default()));
    let dir = tempfile::tempdir().unwrap();
    plans_across_chunks(&open_rocks("s", dir.path()).unwrap());
}
