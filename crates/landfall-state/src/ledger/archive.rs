//! The archive index of `clean_source`: which committed files wait to be deleted or moved,
//! in commit order.
//!
//! `a/<commit ms, 20 digits>/<file key>` (empty value) is written in the same atomic write
//! that marks a file committed, and deleted in the one that marks it archived or forgets it
//! (expiry). The archiver reads the index from its start up to `now - retention_duration`
//! and stops at the first entry that is not due: an idle pass reads one key.
//!
//! Ledgers written before the index existed hold committed files without an entry; the
//! first start with `clean_source` on indexes them once (`m/archive_index` records that it
//! happened). An entry whose file is no longer committed (archived, expired, or a record
//! damaged by hand) is dropped when a pass meets it.

use super::*;
use landfall_core::ArchiveStep;

const INDEXED: &[u8] = b"m/archive_index";
/// Records indexed per write while indexing an old ledger.
const INDEX_CHUNK: usize = 10_000;

pub(super) fn archive_key(commit_time: DateTime<Utc>, k: &FileKey) -> Vec<u8> {
    format!("a/{:020}/{}", commit_time.timestamp_millis().max(0), k.0).into_bytes()
}

/// The index entry of a committed record (`None` for any other record).
pub(super) fn archive_entry(rec: &FileRecord) -> Option<Vec<u8>> {
    match (rec.state, rec.commit_time) {
        (FileState::Committed, Some(t)) => Some(archive_key(t, &rec.key)),
        _ => None,
    }
}

impl<K: Kv> Ledger<K> {
    pub(super) fn index_for_archive_inner(&self) -> Result<u64, StateError> {
        if self.get_u64(INDEXED)?.is_some() {
            return Ok(0);
        }
        // Commits index their own files from now on whatever this finds; entries are
        // idempotent, so indexing a file twice is harmless.
        let mut indexed = 0u64;
        let mut ops = Vec::new();
        for rec in self.file_records(FileFilter {
            state: Some(FileState::Committed),
            discovered_after: None,
        }) {
            if let Some(k) = archive_entry(&rec?) {
                ops.push(KvOp::Put(k, Vec::new()));
                indexed += 1;
            }
            if ops.len() >= INDEX_CHUNK {
                self.write(std::mem::take(&mut ops))?;
            }
        }
        ops.push(Self::put_json(INDEXED.to_vec(), &1u64));
        self.write(ops)?;
        Ok(indexed)
    }

    pub(super) fn due_for_archive_inner(
        &self,
        cutoff: DateTime<Utc>,
        limit: usize,
        skip: &dyn Fn(&FileKey) -> bool,
    ) -> Result<Vec<FileRecord>, StateError> {
        let end = format!("a/{:020}/", cutoff.timestamp_millis().max(0) + 1).into_bytes();
        let mut entries = Vec::new();
        self.kv
            .scan(b"a/", b"a/", &mut |k, _| {
                if k >= end.as_slice() || entries.len() >= limit {
                    return false;
                }
                // a/<20 digits>/<key>
                let key = FileKey(String::from_utf8_lossy(&k[23..]).into_owned());
                if !skip(&key) {
                    entries.push((k.to_vec(), key));
                }
                true
            })
            .map_err(self.backend("scan archive index"))?;
        let mut due = Vec::new();
        let mut stale = Vec::new();
        for (ik, key) in entries {
            match self.get_record(&file_key(&key))? {
                Some(rec) if archive_entry(&rec).as_deref() == Some(ik.as_slice()) => due.push(rec),
                _ => stale.push(KvOp::Delete(ik)),
            }
        }
        if !stale.is_empty() {
            let _g = self.guard();
            // Only entries still stale under the lock: a commit may have re-indexed a key.
            let mut ops = Vec::new();
            for op in stale {
                let KvOp::Delete(ik) = &op else { continue };
                let key = FileKey(String::from_utf8_lossy(&ik[23..]).into_owned());
                let rec = self.get_record(&file_key(&key))?;
                if rec.as_ref().and_then(archive_entry).as_deref() != Some(ik.as_slice()) {
                    ops.push(op);
                }
            }
            self.write(ops)?;
        }
        Ok(due)
    }

    pub(super) fn record_archive_inner(
        &self,
        steps: &[(FileKey, ArchiveStep)],
    ) -> Result<u64, StateError> {
        let _g = self.guard();
        let mut stats = self.stats()?;
        let mut ops = Vec::new();
        let mut recorded = 0;
        for (key, step) in steps {
            let fk = file_key(key);
            let Some(mut rec) = self.get_record(&fk)? else {
                continue;
            };
            let Some(entry) = archive_entry(&rec) else {
                continue;
            };
            match step {
                ArchiveStep::Target(to) => rec.move_location = Some(to.clone()),
                ArchiveStep::Done(archive) => {
                    stats.moved(Some(rec.state), Some(FileState::Archived));
                    rec.state = FileState::Archived;
                    rec.archive_time = Some(archive.time);
                    rec.archive_mode = Some(archive.mode.as_str().to_string());
                    rec.move_location = archive.move_location.clone();
                    if let Some(note) = &archive.note {
                        rec.error = Some(note.clone());
                    }
                    ops.push(KvOp::Delete(entry));
                }
                ArchiveStep::PassedOver(note) => {
                    rec.error = Some(note.clone());
                    rec.move_location = None;
                    ops.push(KvOp::Delete(entry));
                }
            }
            ops.push(Self::put_record(fk, &rec));
            recorded += 1;
        }
        if recorded > 0 {
            ops.push(Self::put_json(STATS.to_vec(), &stats));
            self.write(ops)?;
        }
        Ok(recorded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::MemoryKv;
    use landfall_core::{Archive, ArchiveMode};

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(ms).unwrap()
    }

    fn meta(path: &str) -> FileMeta {
        FileMeta {
            path: path.into(),
            size: 10,
            modified: at(1_000),
            etag: None,
            version: None,
        }
    }

    /// A ledger with `paths` admitted and committed in one batch at `commit_ms`.
    fn commit(l: &Ledger<MemoryKv>, paths: &[&str], commit_ms: i64) {
        let files: Vec<_> = paths
            .iter()
            .map(|p| (FileKey(p.to_string()), meta(p)))
            .collect();
        l.admit(&files, None, at(1)).unwrap();
        let plan = l
            .plan_batch(
                BatchLimits {
                    max_files: 1000,
                    max_bytes: None,
                },
                0,
                at(2),
            )
            .unwrap()
            .unwrap();
        l.record_committed(
            plan.batch_id,
            CommitReceipt {
                table_version: 1,
                rows: 1,
                data_files: 1,
                data_bytes: 1,
                committed_at: at(commit_ms),
                recovered: false,
            },
        )
        .unwrap();
    }

    fn archive(mode: ArchiveMode) -> Archive {
        Archive {
            time: at(9_000),
            mode,
            move_location: None,
            note: None,
        }
    }

    #[test]
    fn due_files_come_in_commit_order_up_to_the_cutoff() {
        let l = Ledger::new("s", MemoryKv::default());
        commit(&l, &["b.json", "a.json"], 5_000);
        commit(&l, &["c.json"], 6_000);
        let none = |_: &FileKey| false;
        let due = |cutoff| {
            l.due_for_archive(at(cutoff), 10, &none)
                .unwrap()
                .into_iter()
                .map(|r| r.key.0)
                .collect::<Vec<_>>()
        };
        assert!(due(4_999).is_empty());
        assert_eq!(due(5_000), ["a.json", "b.json"]);
        assert_eq!(due(6_000), ["a.json", "b.json", "c.json"]);
        // The limit and the skipped keys.
        assert_eq!(l.due_for_archive(at(6_000), 1, &none).unwrap().len(), 1);
        let skip_a = |k: &FileKey| k.0 == "a.json";
        let got: Vec<_> = l
            .due_for_archive(at(6_000), 10, &skip_a)
            .unwrap()
            .into_iter()
            .map(|r| r.key.0)
            .collect();
        assert_eq!(got, ["b.json", "c.json"]);
    }

    #[test]
    fn archiving_records_the_mode_and_leaves_the_index() {
        let l = Ledger::new("s", MemoryKv::default());
        commit(&l, &["a.json", "b.json"], 5_000);
        let mut moved = archive(ArchiveMode::Move);
        moved.move_location = Some("file:///archive/a.json".into());
        let a = FileKey("a.json".into());
        // The move's target first: still committed, still due.
        let target = ArchiveStep::Target("file:///archive/a.json".into());
        assert_eq!(l.record_archive(&[(a.clone(), target)]).unwrap(), 1);
        let rec = l.file(&a).unwrap().unwrap();
        assert_eq!(rec.state, FileState::Committed);
        assert_eq!(rec.move_location.as_deref(), Some("file:///archive/a.json"));
        assert_eq!(
            l.due_for_archive(at(10_000), 10, &|_| false).unwrap().len(),
            2
        );
        let done = ArchiveStep::Done(moved.clone());
        assert_eq!(l.record_archive(&[(a.clone(), done.clone())]).unwrap(), 1);
        let rec = l.file(&a).unwrap().unwrap();
        assert_eq!(rec.state, FileState::Archived);
        assert_eq!(rec.archive_mode.as_deref(), Some("MOVE"));
        assert_eq!(rec.move_location.as_deref(), Some("file:///archive/a.json"));
        assert_eq!(rec.archive_time, Some(at(9_000)));
        assert_eq!(rec.state.ingestion_state(), Some("INGESTED"));
        // Twice is nothing.
        assert_eq!(l.record_archive(&[(a, done)]).unwrap(), 0);
        let due = l.due_for_archive(at(10_000), 10, &|_| false).unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].key.0, "b.json");
        let counts = l.counts().unwrap();
        let n = |s| {
            counts
                .files_by_state
                .iter()
                .find(|(st, _)| *st == s)
                .unwrap()
                .1
        };
        assert_eq!((n(FileState::Committed), n(FileState::Archived)), (1, 1));
        // Passed over: committed, with its note, and no longer due.
        let b = FileKey("b.json".into());
        let over = ArchiveStep::PassedOver("overwritten".into());
        assert_eq!(l.record_archive(&[(b.clone(), over)]).unwrap(), 1);
        let rec = l.file(&b).unwrap().unwrap();
        assert_eq!(rec.state, FileState::Committed);
        assert_eq!(rec.error.as_deref(), Some("overwritten"));
        assert!(
            l.due_for_archive(at(10_000), 10, &|_| false)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn old_ledgers_are_indexed_once_and_stale_entries_dropped() {
        let l = Ledger::new("s", MemoryKv::default());
        commit(&l, &["a.json", "b.json"], 5_000);
        // A ledger from before the index: drop the entries the commit wrote.
        let mut keys = Vec::new();
        l.kv.scan(b"a/", b"a/", &mut |k, _| {
            keys.push(k.to_vec());
            true
        })
        .unwrap();
        assert_eq!(keys.len(), 2);
        l.kv.write(keys.into_iter().map(KvOp::Delete).collect())
            .unwrap();
        assert!(
            l.due_for_archive(at(9_000), 10, &|_| false)
                .unwrap()
                .is_empty()
        );
        assert_eq!(l.index_for_archive().unwrap(), 2);
        assert_eq!(l.index_for_archive().unwrap(), 0);
        assert_eq!(
            l.due_for_archive(at(9_000), 10, &|_| false).unwrap().len(),
            2
        );
        // Expiry keeps files waiting for clean_source, and with it off forgets a committed
        // file and its entry together.
        assert_eq!(l.expire(at(2_000), true).unwrap(), 0);
        assert_eq!(
            l.due_for_archive(at(9_000), 10, &|_| false).unwrap().len(),
            2
        );
        assert_eq!(l.expire(at(2_000), false).unwrap(), 2);
        let mut left = 0;
        l.kv.scan(b"a/", b"a/", &mut |_, _| {
            left += 1;
            true
        })
        .unwrap();
        assert_eq!(left, 0);
        // A stale entry (its record gone) is dropped by the pass that meets it.
        l.kv.write(vec![KvOp::Put(
            archive_key(at(1), &FileKey("gone.json".into())),
            Vec::new(),
        )])
        .unwrap();
        assert!(
            l.due_for_archive(at(9_000), 10, &|_| false)
                .unwrap()
                .is_empty()
        );
        l.kv.scan(b"a/", b"a/", &mut |_, _| {
            left += 1;
            true
        })
        .unwrap();
        assert_eq!(left, 0);
    }
}
