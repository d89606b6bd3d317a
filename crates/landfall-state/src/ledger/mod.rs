//! The ledger logic, over any [`Kv`].
//!
//! Key layout (all in one keyspace, see docs/state-layout.md):
//! - `f/<file key>`           -> [`FileRecord`] (JSON)
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
/// written by a newer landfall is refused rather than misread.
pub const LEDGER_FORMAT: u64 = 2;

fn file_key(k: &FileKey) -> Vec<u8> {
    format!("f/{}", k.0).into_bytes()
}
fn pending_key(seq: u64) -> Vec<u8> {
    format!("p/{seq:020}").into_bytes()
}
fn expiry_key(meta: &FileMeta, k: &FileKey) -> Vec<u8> {
    format!("x/{:020}/{}", meta.modified.timestamp_millis().max(0), k.0).into_bytes()
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
        serde_json::from_slice(raw).map_err(|e| StateError::Corrupt {
            stream: self.stream.clone(),
            key: String::from_utf8_lossy(key).into_owned(),
            reason: e.to_string(),
        })
    }

    pub(super) fn get_u64(&self, key: &[u8]) -> Result<Option<u64>, StateError> {
        self.get_json(key)
    }

    pub(super) fn put_json<T: Serialize>(key: Vec<u8>, value: &T) -> KvOp {
        KvOp::Put(
            key,
            serde_json::to_vec(value).expect("state records serialise"),
        )
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

    /// Record the ledger format at first open; refuse a ledger written by a newer landfall.
    pub fn check_format(&self) -> Result<(), StateError> {
        let _g = self.guard();
        match self.get_u64(FORMAT)? {
            Some(v) if v > LEDGER_FORMAT => Err(StateError::Format {
                stream: self.stream.clone(),
                found: v,
                supported: LEDGER_FORMAT,
            }),
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
