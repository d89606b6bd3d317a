//! The RocksDB store under the ledger: batched reads, the order of changes inside one write,
//! and ledgers written before the current options and record form.

use landfall_core::{FileKey, FileState, StateStore};
use landfall_state::{Kv, KvOp, RocksKv, open_rocks};

fn put(k: &str, v: &str) -> KvOp {
    KvOp::Put(k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

fn del(k: &str) -> KvOp {
    KvOp::Delete(k.as_bytes().to_vec())
}

fn get(kv: &RocksKv, k: &str) -> Option<String> {
    kv.get(k.as_bytes())
        .unwrap()
        .map(|v| String::from_utf8(v).unwrap())
}

#[test]
fn get_many_answers_in_the_order_asked_from_memtable_and_table_files() {
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<Vec<u8>> = ["f/c", "f/a", "f/missing", "f/b", "f/a", "p/1", "f/"]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    let expected: Vec<Option<Vec<u8>>> = vec![
        Some(b"3".to_vec()),
        Some(b"1".to_vec()),
        None,
        Some(b"2".to_vec()),
        Some(b"1".to_vec()),
        Some(b"p".to_vec()),
        None,
    ];
    {
        let kv = RocksKv::open(dir.path()).unwrap();
        kv.write(vec![put("f/a", "1"), put("f/b", "2"), put("p/1", "p")])
            .unwrap();
        kv.write(vec![put("f/c", "3")]).unwrap();
        // From the memtable.
        assert_eq!(kv.get_many(&keys).unwrap(), expected);
        let one_by_one: Vec<_> = keys.iter().map(|k| kv.get(k).unwrap()).collect();
        assert_eq!(one_by_one, expected);
    }
    // A reopen flushes the recovered log into a table file: the same answers from there.
    let kv = RocksKv::open(dir.path()).unwrap();
    assert!(
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".sst")),
        "the reopen wrote a table file"
    );
    assert_eq!(kv.get_many(&keys).unwrap(), expected);
    let mut sorted = keys.clone();
    sorted.sort();
    let answers = kv.get_many(&sorted).unwrap();
    for (k, v) in sorted.iter().zip(answers) {
        assert_eq!(v, kv.get(k).unwrap(), "{}", String::from_utf8_lossy(k));
    }
    assert_eq!(kv.get_many(&[]).unwrap(), Vec::<Option<Vec<u8>>>::new());
}

#[test]
fn one_write_keeps_the_order_of_changes_to_one_key() {
    // The store writes a batch in key order; changes to the same key must keep their order.
    let dir = tempfile::tempdir().unwrap();
    let kv = RocksKv::open(dir.path()).unwrap();
    kv.write(vec![put("k/gone", "x"), put("k/kept", "x")])
        .unwrap();
    kv.write(vec![
        put("z/last", "1"),
        put("k/put-then-deleted", "v"),
        del("k/put-then-deleted"),
        del("k/kept"),
        put("a/first", "1"),
        put("k/kept", "again"),
        put("k/twice", "first"),
        del("k/gone"),
        put("k/twice", "second"),
    ])
    .unwrap();
    assert_eq!(get(&kv, "k/put-then-deleted"), None);
    assert_eq!(get(&kv, "k/kept").as_deref(), Some("again"));
    assert_eq!(get(&kv, "k/twice").as_deref(), Some("second"));
    assert_eq!(get(&kv, "k/gone"), None);
    assert_eq!(get(&kv, "a/first").as_deref(), Some("1"));
    assert_eq!(get(&kv, "z/last").as_deref(), Some("1"));
}

#[test]
fn a_ledger_written_with_the_earlier_options_and_full_records_opens_and_reads() {
    // Before: a plain `DB::open` (no column family named, zstd at every level, 4 KiB blocks,
    // filters outside the cache) and file records with every empty field written as null.
    let dir = tempfile::tempdir().unwrap();
    let old_record = r#"{"key":"in/a.json","meta":{"path":"in/a.json","size":10,"modified":"2026-01-01T00:00:00Z"},"state":"committed","seq":1,"discovery_time":"2026-01-01T00:00:01Z","batch_id":0,"processed_time":"2026-01-01T00:00:02Z","commit_time":"2026-01-01T00:00:03Z","table_version":4,"archive_time":null,"archive_mode":null,"move_location":null,"error":null}"#;
    {
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Zstd);
        let db = rocksdb::DB::open(&opts, dir.path()).unwrap();
        db.put(b"f/in/a.json", old_record).unwrap();
        db.put(b"m/seq", b"1").unwrap();
        db.put(b"m/format", b"2").unwrap();
        db.flush().unwrap();
    }
    let ledger = open_rocks("s", dir.path()).unwrap();
    let rec = ledger
        .file(&FileKey("in/a.json".into()))
        .unwrap()
        .expect("the old record");
    assert_eq!(rec.state, FileState::Committed);
    assert_eq!(rec.table_version, Some(4));
    assert_eq!(rec.archive_time, None);
    // Known, so not admitted again.
    let meta = rec.meta.clone();
    assert_eq!(ledger.may_be_new(&[meta], false).unwrap(), vec![false]);
}

#[test]
fn a_format_2_ledger_moves_to_binary_records_as_its_files_move() {
    // Format 2 held JSON records; format 3 writes binary ones and reads both, so a ledger
    // carried over holds a mix until every old record has been rewritten.
    let dir = tempfile::tempdir().unwrap();
    let committed = r#"{"key":"in/a.json","meta":{"path":"in/a.json","size":10,"modified":"2026-01-01T00:00:00Z"},"state":"committed","seq":1,"discovery_time":"2026-01-01T00:00:01Z","batch_id":0,"commit_time":"2026-01-01T00:00:03Z","table_version":4}"#;
    let discovered = r#"{"key":"in/b c.json","meta":{"path":"in/b c.json","size":5,"modified":"2026-01-01T00:00:00.5Z","etag":"\"b\""},"state":"discovered","seq":2,"discovery_time":"2026-01-01T00:00:01.25Z"}"#;
    {
        // Written as format 2 did: one column family.
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        let db = rocksdb::DB::open(&opts, dir.path()).unwrap();
        for (k, v) in [
            ("f/in/a.json", committed),
            ("f/in/b c.json", discovered),
            ("p/00000000000000000002", "in/b c.json"),
            ("x/00000000000000000001/in/a.json", ""),
            ("x/00000000000000000002/in/b c.json", ""),
            ("m/seq", "2"),
            ("m/last_batch", "0"),
            ("m/format", "2"),
        ] {
            db.put(k, v).unwrap();
        }
    }
    let now = chrono::Utc::now();
    {
        let l = open_rocks("s", dir.path()).unwrap();
        let plan = l
            .plan_batch(
                landfall_core::BatchLimits {
                    max_files: 10,
                    max_bytes: None,
                },
                0,
                now,
            )
            .unwrap()
            .expect("the discovered file is planned");
        let planned: Vec<&str> = plan.files.iter().map(|(k, _)| k.0.as_str()).collect();
        assert_eq!(planned, ["in/b c.json"]);
        l.record_committed(
            plan.batch_id,
            landfall_core::CommitReceipt {
                table_version: 5,
                rows: 1,
                data_files: 1,
                data_bytes: 1,
                committed_at: now,
                recovered: false,
            },
        )
        .unwrap();
        let files = l.files(None).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].table_version, Some(4));
        let b = &files[1];
        assert_eq!(b.state, FileState::Committed);
        assert_eq!(b.table_version, Some(5));
        assert_eq!(b.meta.etag.as_deref(), Some("\"b\""));
        assert_eq!(
            b.meta.modified.to_rfc3339(),
            "2026-01-01T00:00:00.500+00:00"
        );
        assert_eq!(
            b.discovery_time.to_rfc3339(),
            "2026-01-01T00:00:01.250+00:00"
        );
        let b_meta = b.meta.clone();
        assert_eq!(l.may_be_new(&[b_meta], false).unwrap(), vec![false]);
    }
    let kv = RocksKv::open(dir.path()).unwrap();
    // Marked as format 3 at the first open: a landfall that reads JSON only refuses it.
    assert_eq!(get(&kv, "m/format").as_deref(), Some("3"));
    let raw = |k: &str| kv.get(k.as_bytes()).unwrap().unwrap();
    assert_eq!(
        raw("f/in/a.json")[0],
        b'{',
        "an untouched record stays as it was"
    );
    assert_eq!(raw("f/in/b c.json")[0], 1, "a rewritten record is binary");
    drop(kv);
    // The expiry index went into its own family with the queue: expiry finds both files.
    let l = open_rocks("s", dir.path()).unwrap();
    let expired = l.expire(chrono::Utc::now(), false).unwrap();
    assert_eq!(expired, 2);
    assert!(l.files(None).unwrap().is_empty());
}

/// The keys in each column family of the ledger at `dir`, by family, counted by prefix.
fn family_counts(dir: &std::path::Path) -> Vec<(String, usize, usize)> {
    let opts = rocksdb::Options::default();
    let names = rocksdb::DB::list_cf(&opts, dir).unwrap();
    let db = rocksdb::DB::open_cf_for_read_only(&opts, dir, &names, false).unwrap();
    let mut out = Vec::new();
    for name in &names {
        let cf = db.cf_handle(name).unwrap();
        let (mut p, mut x) = (0, 0);
        for item in db.iterator_cf(cf, rocksdb::IteratorMode::Start) {
            let (k, _) = item.unwrap();
            p += usize::from(k.starts_with(b"p/"));
            x += usize::from(k.starts_with(b"x/"));
        }
        out.push((name.clone(), p, x));
    }
    out.sort();
    out
}

#[test]
fn an_older_ledger_is_moved_into_families_even_after_a_move_was_cut_short() {
    // 25,000 pending files (more than one write of the move), part of them already moved by
    // an open that stopped half way: the first 5,000 queue entries in their family, the rest
    // still in the default one.
    const N: usize = 25_000;
    let dir = tempfile::tempdir().unwrap();
    {
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let db = rocksdb::DB::open_cf(&opts, dir.path(), ["pending", "expiry"]).unwrap();
        let pending = db.cf_handle("pending").unwrap();
        for i in 1..=N {
            let path = format!("in/part {i:05}.json");
            let rec = format!(
                r#"{{"key":"{path}","meta":{{"path":"{path}","size":1,"modified":"2026-01-01T00:00:00Z"}},"state":"discovered","seq":{i},"discovery_time":"2026-01-01T00:00:01Z"}}"#
            );
            db.put(format!("f/{path}"), rec).unwrap();
            let key = format!("p/{i:020}");
            if i <= 5_000 {
                db.put_cf(pending, key, &path).unwrap();
            } else {
                db.put(key, &path).unwrap();
            }
            db.put(format!("x/{:020}/{path}", 1_767_225_600_000u64), b"")
                .unwrap();
        }
        db.put("m/seq", N.to_string()).unwrap();
        db.put("m/format", "2").unwrap();
    }
    // Every file planned once, in discovery order.
    assert_eq!(
        plan_everything(dir.path(), N),
        (1..=N as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        family_counts(dir.path()),
        vec![
            ("default".into(), 0, 0),
            ("expiry".into(), 0, N),
            // Planned: the queue is empty.
            ("pending".into(), 0, 0),
        ]
    );
}

#[test]
fn keys_of_a_family_are_found_by_every_read_and_a_scan_names_its_family() {
    let dir = tempfile::tempdir().unwrap();
    let kv = RocksKv::open(dir.path()).unwrap();
    kv.write(vec![
        put("p/1", "a"),
        put("p/2", "b"),
        put("x/1/a", ""),
        put("f/a", "r"),
        put("pz", "default"),
    ])
    .unwrap();
    assert_eq!(get(&kv, "p/2").as_deref(), Some("b"));
    let keys: Vec<Vec<u8>> = ["p/1", "f/a", "x/1/a", "p/3"]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    let got: Vec<Option<Vec<u8>>> = kv.get_many(&keys).unwrap();
    assert_eq!(
        got,
        vec![
            Some(b"a".to_vec()),
            Some(b"r".to_vec()),
            Some(Vec::new()),
            None
        ]
    );
    let mut seen = Vec::new();
    kv.scan(b"p/", b"p/", &mut |k, _| {
        seen.push(String::from_utf8(k.to_vec()).unwrap());
        true
    })
    .unwrap();
    assert_eq!(seen, ["p/1", "p/2"]);
    kv.write(vec![del("p/1")]).unwrap();
    assert_eq!(get(&kv, "p/1"), None);
    let err = kv.scan(b"p", b"p", &mut |_, _| true).unwrap_err();
    assert!(err.to_string().contains("one key family"), "{err}");
    drop(kv);
    assert_eq!(
        family_counts(dir.path()),
        vec![
            ("default".into(), 0, 0),
            ("expiry".into(), 0, 1),
            ("pending".into(), 1, 0),
        ]
    );
}

/// An older, one-family ledger of `n` discovered files: each with its file record, queue entry
/// and expiry entry in the default family, format 2.
fn older_ledger(dir: &std::path::Path, n: usize) {
    let mut opts = rocksdb::Options::default();
    opts.create_if_missing(true);
    let db = rocksdb::DB::open(&opts, dir).unwrap();
    let mut batch = rocksdb::WriteBatch::default();
    for i in 1..=n {
        let path = format!("in/part {i:06}.json");
        let rec = format!(
            r#"{{"key":"{path}","meta":{{"path":"{path}","size":1,"modified":"2026-01-01T00:00:00Z"}},"state":"discovered","seq":{i},"discovery_time":"2026-01-01T00:00:01Z"}}"#
        );
        batch.put(format!("f/{path}"), rec);
        batch.put(format!("p/{i:020}"), &path);
        batch.put(format!("x/{:020}/{path}", 1_767_225_600_000u64), b"");
    }
    batch.put("m/seq", n.to_string());
    batch.put("m/format", "2");
    db.write(batch).unwrap();
}

const MOVE_FILES: usize = 35_000;

/// The child of [`a_move_killed_between_its_writes_loses_nothing`]: opens the ledger in
/// `LANDFALL_TEST_MOVE_DIR` with a failpoint armed, and is killed by it.
#[test]
#[ignore = "run as a child process by a_move_killed_between_its_writes_loses_nothing"]
fn move_child() {
    let Ok(dir) = std::env::var("LANDFALL_TEST_MOVE_DIR") else {
        return;
    };
    let _ = open_rocks("s", std::path::Path::new(&dir));
    panic!("the failpoint did not fire");
}

/// A process killed (abort, no destructors) after the second write of the move: those writes
/// are whole, nothing is lost or doubled, and the next open finishes the move with one walk.
#[test]
fn a_move_killed_between_its_writes_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    older_ledger(dir.path(), MOVE_FILES);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "move_child", "--ignored", "--nocapture"])
        .env("LANDFALL_TEST_MOVE_DIR", dir.path())
        .env("LANDFALL_FAILPOINTS", "state_move_chunk=#2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the child was not killed: {stderr}");
    assert!(
        stderr.contains("failpoint state_move_chunk"),
        "killed by the failpoint: {stderr}"
    );
    // Exactly two writes of 10,000 moved; each key in exactly one family.
    assert_eq!(
        family_counts(dir.path()),
        vec![
            ("default".into(), MOVE_FILES - 20_000, MOVE_FILES),
            ("expiry".into(), 0, 0),
            ("pending".into(), 20_000, 0),
        ]
    );
    assert_eq!(
        plan_everything(dir.path(), MOVE_FILES),
        (1..=MOVE_FILES as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        family_counts(dir.path()),
        vec![
            ("default".into(), 0, 0),
            ("expiry".into(), 0, MOVE_FILES),
            ("pending".into(), 0, 0),
        ]
    );
}

/// A ledger of a newer format is refused by every open, and the writable open changes
/// nothing in it first (no families made, no keys moved).
#[test]
fn a_newer_ledger_is_refused_before_anything_is_changed() {
    let dir = tempfile::tempdir().unwrap();
    older_ledger(dir.path(), 3);
    {
        let db = rocksdb::DB::open_default(dir.path()).unwrap();
        db.put("m/format", "4").unwrap();
    }
    let err = open_rocks("s", dir.path()).err().expect("refused");
    assert!(
        matches!(
            err,
            landfall_state::StateError::Format {
                found: 4,
                supported: 3,
                ..
            }
        ),
        "{err}"
    );
    let err = landfall_state::open_rocks_read_only("s", dir.path())
        .err()
        .expect("refused read-only too");
    assert!(err.to_string().contains("newer landfall"), "{err}");
    assert_eq!(
        family_counts(dir.path()),
        vec![("default".into(), 3, 3)],
        "no family made, nothing moved"
    );
}

/// An event cache keeps the one family it always had; empty ledger families a landfall
/// gave it are dropped, so an older landfall can open it again.
#[test]
fn an_event_cache_has_no_ledger_families() {
    let dir = tempfile::tempdir().unwrap();
    let families = |d: &std::path::Path| {
        let mut n = rocksdb::DB::list_cf(&rocksdb::Options::default(), d).unwrap();
        n.sort();
        n
    };
    drop(landfall_state::open_event_cache("loc", dir.path()).unwrap());
    assert_eq!(families(dir.path()), ["default"]);
    let old = tempfile::tempdir().unwrap();
    {
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let db = rocksdb::DB::open_cf(&opts, old.path(), ["pending", "expiry"]).unwrap();
        db.put("m/id", "\"loc\"").unwrap();
    }
    drop(landfall_state::open_event_cache("loc", old.path()).unwrap());
    assert_eq!(families(old.path()), ["default"]);
    assert!(
        rocksdb::DB::open_default(old.path()).is_ok(),
        "a one-family open works"
    );
}

/// Open the ledger at `dir` and plan one batch of all its `n` queued files: the number of each
/// planned file (`in/part <n>.json`), in plan order.
fn plan_everything(dir: &std::path::Path, n: usize) -> Vec<u64> {
    let l = open_rocks("s", dir).unwrap();
    let limits = landfall_core::BatchLimits {
        max_files: n + 1,
        max_bytes: None,
    };
    let plan = l
        .plan_batch(limits, 0, chrono::Utc::now())
        .unwrap()
        .unwrap();
    plan.files
        .iter()
        .map(|(k, _)| {
            let number =
                k.0.strip_prefix("in/part ")
                    .and_then(|r| r.strip_suffix(".json"));
            number.unwrap().parse().unwrap()
        })
        .collect()
}
