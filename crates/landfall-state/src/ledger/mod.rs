//! The ledger logic, over any [`Kv`].
//!
//! Key layout (all in one keyspace, see docs/state-layout.md):
//! - `f/<file key>`           -> [`FileRecord`] (binary, see `record`; JSON before format 3)
//! - `p/<seq, 20 digits>`      -> file key: the pending queue, in discovery order
//! - `x/<modified ms, 20 digits>/<file key>` -> empty: expiry index for `max_file_age`
//! - `b/<batch id, 20 digits>` -> [`BatchPlan`] (JSON)
//! - `t/<batch id, 20 digits>/<path>` -> empty: data files staged by the batch's attempts
//! - `a/<commit ms, 20 digits>/<file key>` -> empty: committed files in commit order, for
//!   `clean_source` (see `archive`)
//! - `s/<version, 10 digits>`  -> stream schema (Arrow schema JSON)
//! - `m/cursor`, `m/seq`, `m/last_batch`, `m/open_batch`, `m/stats`, `m/format`,
//!   `m/archive_index`
//! - `m/keys_plain`, `m/keys_versioned`: which kinds of file key were ever admitted, so that
//!   toggling `allow_overwrites` looks up the other kind only when it exists
//!
//! Every public method reads, then writes all its changes in one atomic write. A mutex
//! serialises the read-modify-write cycles of one process; RocksDB's directory lock keeps a
//! second process out.

use crate::error::StateError;
use crate::kv::{Kv, KvError, KvOp};
use chrono::{DateTime, Utc};
use landfall_core::seams::{FileFilter, FilesPage, SeamResult};
use landfall_core::{
    BatchLimits, BatchPlan, CommitReceipt, FileKey, FileMeta, FileRecord, FileState, SkipKind,
    SkipReason, StateStore, StreamSummary,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

const CURSOR: &[u8] = b"m/cursor";
const SEQ: &[u8] = b"m/seq";
const LAST_BATCH: &[u8] = b"m/last_batch";
const OPEN_BATCH: &[u8] = b"m/open_batch";
const STATS: &[u8] = b"m/stats";
const FORMAT: &[u8] = b"m/format";
const KEYS_PLAIN: &[u8] = b"m/keys_plain";
const KEYS_VERSIONED: &[u8] = b"m/keys_versioned";

/// The ledger layout this code reads and writes. Bumped on any incompatible change; a ledger
/// written by a newer landfall is refused rather than misread. Format 3: file records are
/// binary ([`record`]); the JSON records of format 2 read the same, and are rewritten as
/// binary at their next transition.
pub const LEDGER_FORMAT: u64 = 3;

fn file_key(k: &FileKey) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + k.0.len());
    key.extend_from_slice(b"f/");
    key.extend_from_slice(k.0.as_bytes());
    key
}
fn pending_key(seq: u64) -> Vec<u8> {
    let mut key = b"p/".to_vec();
    push_padded(&mut key, seq);
    key
}
fn expiry_key(meta: &FileMeta, k: &FileKey) -> Vec<u8> {
    let mut key = Vec::with_capacity(23 + k.0.len());
    key.extend_from_slice(b"x/");
    push_padded(&mut key, meta.modified.timestamp_millis().max(0) as u64);
    key.push(b'/');
    key.extend_from_slice(k.0.as_bytes());
    key
}
/// `n` in 20 decimal digits, zero-padded (what `{n:020}` writes, without the formatter: a
/// page of admissions writes two such keys a file).
fn push_padded(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [b'0'; 20];
    for d in digits.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out.extend_from_slice(&digits);
}
fn batch_key(id: u64) -> Vec<u8> {
    format!("b/{id:020}").into_bytes()
}
/// Staged data files of a batch live beside the plan, one key each, so recording one is a
/// small write rather than a rewrite of a plan that may list thousands of files.
fn staged_prefix(id: u64) -> Vec<u8> {
    format!("t/{id:020}/").into_bytes()
}
fn schema_key(v: u32) -> Vec<u8> {
    format!("s/{v:010}").into_bytes()
}

/// Running counters, kept in step with every transition so summaries need no scan.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct Stats {
    counts: BTreeMap<String, u64>,
    pending_bytes: u64,
    committed_batches: u64,
    committed_rows: u64,
    committed_bytes: u64,
    committed_files: u64,
}

impl Stats {
    fn moved(&mut self, from: Option<FileState>, to: Option<FileState>) {
        if let Some(f) = from {
            let c = self.counts.entry(f.as_str().to_string()).or_default();
            *c = c.saturating_sub(1);
        }
        if let Some(t) = to {
            *self.counts.entry(t.as_str().to_string()).or_default() += 1;
        }
    }
}

/// What the ledger knows of a listed file.
enum Known {
    No,
    /// Known under this key (or as the same version under the other kind of key).
    Yes(Box<FileRecord>),
    /// Another version of the path is known, and overwrites are not allowed.
    OtherVersion,
}

pub struct Ledger<K: Kv> {
    stream: String,
    kv: K,
    lock: Mutex<()>,
}

mod admit;
mod archive;
mod batches;
mod read;
mod record;
mod store;

pub use read::FileRecords;

impl<K: Kv> Ledger<K> {
    pub fn new(stream: &str, kv: K) -> Self {
        Ledger {
            stream: stream.to_string(),
            kv,
            lock: Mutex::new(()),
        }
    }

    pub fn stream(&self) -> &str {
        &self.stream
    }

    pub(super) fn backend(&self, op: &'static str) -> impl Fn(KvError) -> StateError + '_ {
        move |e| match e {
            KvError::Damaged { dir, reason } => StateError::Corrupted { dir, reason },
            KvError::Failed(reason) => StateError::Backend {
                stream: self.stream.clone(),
                op,
                reason,
            },
        }
    }

    pub(super) fn get_json<T: for<'de> Deserialize<'de>>(
        &self,
        key: &[u8],
    ) -> Result<Option<T>, StateError> {
        match self.kv.get(key).map_err(self.backend("read"))? {
            None => Ok(None),
            Some(raw) => self.decode(key, &raw).map(Some),
        }
    }

    /// The JSON value stored under `key`; an unreadable one is reported as corrupt.
    pub(super) fn decode<T: for<'de> Deserialize<'de>>(
        &self,
        key: &[u8],
        raw: &[u8],
    ) -> Result<T, StateError> {
        serde_json::from_slice(raw).map_err(|e| self.corrupt(key, e))
    }

    pub(super) fn get_u64(&self, key: &[u8]) -> Result<Option<u64>, StateError> {
        self.get_json(key)
    }

    pub(super) fn put_json<T: Serialize>(key: Vec<u8>, value: &T) -> KvOp {
        let mut out = Vec::with_capacity(256);
        serde_json::to_writer(&mut out, value).expect("state records serialise");
        KvOp::Put(key, out)
    }

    /// A file record as the ledger stores it: the binary record of [`record`] (JSON records
    /// written by format 2 and earlier read the same, see [`Ledger::decode_record`]).
    pub(super) fn put_record(key: Vec<u8>, rec: &FileRecord) -> KvOp {
        let mut out = Vec::with_capacity(128);
        record::encode(rec, &mut out);
        KvOp::Put(key, out)
    }

    /// The file record stored as `raw` under `key`, binary or JSON; an unreadable one is
    /// reported as corrupt.
    pub(super) fn decode_record(&self, key: &[u8], raw: &[u8]) -> Result<FileRecord, StateError> {
        if record::is_binary(raw) {
            record::decode(raw).map_err(|reason| self.corrupt(key, reason))
        } else {
            self.decode(key, raw)
        }
    }

    /// The state, seq and size of the record stored as `raw`, without decoding it whole
    /// where it is binary.
    pub(super) fn record_head(
        &self,
        key: &[u8],
        raw: &[u8],
    ) -> Result<(FileState, u64, u64), StateError> {
        if record::is_binary(raw) {
            return record::head(raw).map_err(|reason| self.corrupt(key, reason));
        }
        #[derive(Deserialize)]
        struct Size {
            size: u64,
        }
        #[derive(Deserialize)]
        struct Head {
            state: FileState,
            seq: u64,
            meta: Size,
        }
        let h: Head = self.decode(key, raw)?;
        Ok((h.state, h.seq, h.meta.size))
    }

    /// The file record under `key`, if any.
    pub(super) fn get_record(&self, key: &[u8]) -> Result<Option<FileRecord>, StateError> {
        match self.kv.get(key).map_err(self.backend("read"))? {
            None => Ok(None),
            Some(raw) => self.decode_record(key, &raw).map(Some),
        }
    }

    pub(super) fn corrupt(&self, key: &[u8], reason: impl ToString) -> StateError {
        StateError::Corrupt {
            stream: self.stream.clone(),
            key: String::from_utf8_lossy(key).into_owned(),
            reason: reason.to_string(),
        }
    }

    pub(super) fn stats(&self) -> Result<Stats, StateError> {
        Ok(self.get_json(STATS)?.unwrap_or_default())
    }

    pub(super) fn write(&self, ops: Vec<KvOp>) -> Result<(), StateError> {
        self.kv.write(ops).map_err(self.backend("write"))
    }

    pub(super) fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn load_batch(&self, batch_id: u64) -> Result<BatchPlan, StateError> {
        let mut plan: BatchPlan =
            self.get_json(&batch_key(batch_id))?
                .ok_or(StateError::UnknownBatch {
                    stream: self.stream.clone(),
                    batch_id,
                })?;
        plan.staged = self.staged(batch_id)?;
        Ok(plan)
    }

    pub(super) fn staged(&self, batch_id: u64) -> Result<Vec<String>, StateError> {
        let prefix = staged_prefix(batch_id);
        let mut out = Vec::new();
        self.kv
            .scan(&prefix, &prefix, &mut |k, _| {
                out.push(String::from_utf8_lossy(&k[prefix.len()..]).into_owned());
                true
            })
            .map_err(self.backend("scan staged files"))?;
        Ok(out)
    }

    /// Write a plan back; its `staged` list lives under its own keys, not in the plan record.
    pub(super) fn put_plan(plan: &BatchPlan) -> KvOp {
        let mut stored = plan.clone();
        stored.staged.clear();
        Self::put_json(batch_key(plan.batch_id), &stored)
    }

    /// Refuse a ledger written by a newer landfall (its format above [`LEDGER_FORMAT`]),
    /// writing nothing.
    pub fn refuse_newer(&self) -> Result<(), StateError> {
        match self.get_u64(FORMAT)? {
            Some(v) if v > LEDGER_FORMAT => Err(StateError::Format {
                stream: self.stream.clone(),
                found: v,
                supported: LEDGER_FORMAT,
            }),
            _ => Ok(()),
        }
    }

    /// The store, given back (to reopen it in another layout).
    pub(crate) fn into_kv(self) -> K {
        self.kv
    }

    /// Record the ledger format at first open; refuse a ledger written by a newer landfall.
    pub fn check_format(&self) -> Result<(), StateError> {
        let _g = self.guard();
        self.refuse_newer()?;
        match self.get_u64(FORMAT)? {
            Some(v) if v == LEDGER_FORMAT => Ok(()),
            found => {
                let mut ops = vec![Self::put_json(FORMAT.to_vec(), &LEDGER_FORMAT)];
                if found.is_none() && self.get_u64(SEQ)?.is_some() {
                    // Format 1 did not record which key kinds exist, and keyed versions as
                    // `path@<ms>`: look up both kinds from now on.
                    ops.push(Self::put_json(KEYS_PLAIN.to_vec(), &1u64));
                    ops.push(Self::put_json(KEYS_VERSIONED.to_vec(), &1u64));
                }
                self.write(ops)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::MemoryKv;

    fn stored(rec: &FileRecord) -> Vec<u8> {
        match Ledger::<MemoryKv>::put_record(file_key(&rec.key), rec) {
            KvOp::Put(_, v) => v,
            KvOp::Delete(_) => unreachable!(),
        }
    }

    #[test]
    fn stored_records_read_back_whole_binary_or_json() {
        let t = DateTime::parse_from_rfc3339("2026-12-03T10:00:00.123Z")
            .unwrap()
            .to_utc();
        let meta = FileMeta {
            path: "in/a b.json".into(),
            size: 7,
            modified: t,
            etag: Some("\"e\"".into()),
            version: Some("v1".into()),
        };
        let fresh = FileRecord::discovered(FileKey("in/a b.json@v1".into()), meta, 3, t);
        let full = FileRecord {
            state: FileState::Skipped,
            batch_id: Some(4),
            processed_time: Some(t),
            commit_time: Some(t),
            table_version: Some(9),
            archive_time: Some(t),
            archive_mode: Some("move".into()),
            move_location: Some("s3://b/archive/a".into()),
            error: Some("why".into()),
            skip: Some(SkipReason {
                kind: SkipKind::Corrupt,
                detail: "bad".into(),
            }),
            ..fresh.clone()
        };
        let ledger = Ledger::new("s", MemoryKv::default());
        for rec in [fresh, full] {
            let raw = stored(&rec);
            assert_eq!(ledger.decode_record(b"f/k", &raw).unwrap(), rec);
            // A record of format 2 (JSON) reads the same.
            let json = serde_json::to_vec(&rec).unwrap();
            assert_eq!(ledger.decode_record(b"f/k", &json).unwrap(), rec);
            let head = (rec.state, rec.seq, rec.meta.size);
            assert_eq!(ledger.record_head(b"f/k", &raw).unwrap(), head);
            assert_eq!(ledger.record_head(b"f/k", &json).unwrap(), head);
        }
        let err = ledger.decode_record(b"f/k", b"\x01\x00").unwrap_err();
        assert!(err.to_string().contains("f/k"), "{err}");
    }

    #[test]
    fn padded_numbers_match_the_formatter() {
        for n in [0, 1, 9, 10, 12345, u64::MAX / 3, u64::MAX] {
            let mut out = Vec::new();
            push_padded(&mut out, n);
            assert_eq!(out, format!("{n:020}").into_bytes());
        }
    }
}
