//! Paging the ledger's file records (`GET .../files`, `landfall state`): every record exactly
//! once, in key order, with and without a filter; and a page reads what it returns, not the
//! ledger (a counting store sees every record the ledger reads).

use chrono::{DateTime, TimeZone, Utc};
use landfall_core::seams::{FileFilter, FilesPage};
use landfall_core::{BatchLimits, FileKey, FileMeta, FileState, SkipKind, SkipReason, StateStore};
use landfall_state::{Kv, KvError, KvOp, Ledger, MemoryKv, open_rocks};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const FILES: u64 = 3_000;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

/// A store that counts the entries scans hand to the ledger.
struct Counting<K> {
    inner: K,
    visited: Arc<AtomicU64>,
}

impl<K: Kv> Kv for Counting<K> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.inner.get(key)
    }
    fn scan(
        &self,
        prefix: &[u8],
        from: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), KvError> {
        self.inner.scan(prefix, from, &mut |k, v| {
            self.visited.fetch_add(1, Ordering::Relaxed);
            visit(k, v)
        })
    }
    fn write(&self, ops: Vec<KvOp>) -> Result<(), KvError> {
        self.inner.write(ops)
    }
}

/// Admit `FILES` files in an order unlike their keys' (discovery order is not key order), put
/// the first 1,000 discovered in a committed batch and skip every 7th of the rest. The keys,
/// sorted, and the committed ones.
fn fill<K: Kv>(l: &Ledger<K>) -> (Vec<String>, Vec<String>) {
    let now = t0();
    let files: Vec<(FileKey, FileMeta)> = (0..FILES)
        .map(|i| {
            // Reversed digits: discovery order differs from key order.
            let n: String = format!("{i:05}").chars().rev().collect();
            let m = FileMeta {
                path: format!("landing/part-{n}.json"),
                size: 100 + i,
                modified: now,
                etag: None,
                version: None,
            };
            (m.key(false), m)
        })
        .collect();
    assert_eq!(l.admit(&files, None, now).unwrap(), FILES);
    let limits = BatchLimits {
        max_files: 1_000,
        max_bytes: None,
    };
    let plan = l.plan_batch(limits, 0, now).unwrap().unwrap();
    l.record_committed(
        plan.batch_id,
        landfall_core::CommitReceipt {
            table_version: 1,
            rows: 1_000,
            data_files: 1,
            data_bytes: 1,
            committed_at: now,
            recovered: false,
        },
    )
    .unwrap();
    let mut committed: Vec<String> = plan.files.iter().map(|(k, _)| k.0.clone()).collect();
    committed.sort();
    for (i, (k, _)) in files.iter().enumerate().skip(1_000) {
        if i % 7 == 0 {
            let reason = SkipReason {
                kind: SkipKind::Manual,
                detail: "test".into(),
            };
            l.skip_file(k, reason, now).unwrap();
        }
    }
    let mut keys: Vec<String> = files.into_iter().map(|(k, _)| k.0).collect();
    keys.sort();
    (keys, committed)
}

/// Page through with `limit`, checking each page's cost; the keys in the order received.
fn page_all(l: &dyn StateStore, filter: FileFilter, limit: usize, max_scanned: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut after: Option<FileKey> = None;
    let mut pages = 0;
    loop {
        let FilesPage {
            files,
            next,
            scanned,
        } = l
            .files_page(filter, after.as_ref(), limit, max_scanned)
            .unwrap();
        assert!(files.len() <= limit && scanned <= max_scanned.max(limit as u64));
        assert!(files.iter().all(|r| filter.passes(r.state, r.seq)));
        if filter.is_all() {
            assert_eq!(
                scanned,
                files.len() as u64,
                "an unfiltered page reads its rows"
            );
        }
        out.extend(files.into_iter().map(|r| r.key.0));
        pages += 1;
        assert!(pages <= 10 * FILES, "paging does not end");
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    out
}

fn pages_every_file_once_in_order<K: Kv>(l: &Ledger<K>) {
    let (keys, committed) = fill(l);
    for limit in [1, 7, 1_000, 5_000] {
        assert_eq!(
            page_all(l, FileFilter::default(), limit, u64::MAX),
            keys,
            "{limit}"
        );
    }
    let only = |state| FileFilter {
        state: Some(state),
        discovered_after: None,
    };
    assert_eq!(page_all(l, only(FileState::Committed), 7, 50), committed);
    // A budget smaller than the gaps between matches: pages come back empty, with a `next`.
    assert_eq!(page_all(l, only(FileState::Committed), 7, 3), committed);
    let skipped = page_all(l, only(FileState::Skipped), 5, 40);
    assert_eq!(
        skipped.len(),
        l.files(Some(FileState::Skipped)).unwrap().len()
    );
    assert!(skipped.is_sorted());
    assert!(page_all(l, only(FileState::Failed), 10, 100).is_empty());
    let late = FileFilter {
        state: Some(FileState::Discovered),
        discovered_after: Some(2_500),
    };
    let mut expected: Vec<String> = l
        .files(Some(FileState::Discovered))
        .unwrap()
        .into_iter()
        .filter(|r| r.seq > 2_500)
        .map(|r| r.key.0)
        .collect();
    expected.sort();
    assert!(!expected.is_empty());
    assert_eq!(page_all(l, late, 9, 200), expected);
    // The iterator `landfall state` prints from gives the same.
    let all: Vec<String> = l
        .file_records(FileFilter::default())
        .map(|r| r.unwrap().key.0)
        .collect();
    assert_eq!(all, keys);
    let c: Vec<String> = l
        .file_records(only(FileState::Committed))
        .map(|r| r.unwrap().key.0)
        .collect();
    assert_eq!(c, committed);
}

#[test]
fn memory_pages_every_file_once_in_order() {
    pages_every_file_once_in_order(&landfall_state::memory("s"));
}

#[test]
fn rocks_pages_every_file_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    pages_every_file_once_in_order(&open_rocks("s", &dir.path().join("s")).unwrap());
}

/// A page deep into the ledger reads the page and one record more: the old implementation
/// read every record for every page (3,000 here, 200,000 in the issue).
fn a_page_reads_only_the_page<K: Kv>(inner: K) {
    let counter = Arc::new(AtomicU64::new(0));
    let l = &Ledger::new(
        "s",
        Counting {
            inner,
            visited: counter.clone(),
        },
    );
    let (keys, _) = fill(l);
    let visited = || counter.load(Ordering::Relaxed);
    let before = visited();
    let after = FileKey(keys[2_000].clone());
    let page = l
        .files_page(FileFilter::default(), Some(&after), 10, u64::MAX)
        .unwrap();
    let read = visited() - before;
    let got: Vec<&str> = page.files.iter().map(|r| r.key.0.as_str()).collect();
    assert_eq!(
        got,
        keys[2_001..2_011]
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    assert_eq!(page.next, Some(FileKey(keys[2_010].clone())));
    assert!(read <= 11, "a page of 10 read {read} records");
    // The last page knows it is the last without reading further.
    let before = visited();
    let tail = FileKey(keys[FILES as usize - 4].clone());
    let page = l
        .files_page(FileFilter::default(), Some(&tail), 10, u64::MAX)
        .unwrap();
    assert_eq!((page.files.len(), page.next), (3, None));
    assert!(visited() - before <= 3);
    // A filtered page reads at most its budget (and one more to know there is a next).
    let before = visited();
    let filter = FileFilter {
        state: Some(FileState::Failed),
        discovered_after: None,
    };
    let page = l.files_page(filter, None, 10, 500).unwrap();
    assert!(page.files.is_empty() && page.next.is_some() && page.scanned == 500);
    assert!(visited() - before <= 501);
    // So does `landfall state`'s iterator until it is asked for more.
    let before = visited();
    let first: Vec<_> = l.file_records(FileFilter::default()).take(5).collect();
    assert_eq!(first.len(), 5);
    assert!(visited() - before <= 1_001);
}

#[test]
fn memory_page_reads_only_the_page() {
    a_page_reads_only_the_page(MemoryKv::default());
}

#[test]
fn rocks_page_reads_only_the_page() {
    let dir = tempfile::tempdir().unwrap();
    a_page_reads_only_the_page(landfall_state::RocksKv::open(&dir.path().join("s")).unwrap());
}
