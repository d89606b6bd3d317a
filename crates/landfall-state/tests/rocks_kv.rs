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
