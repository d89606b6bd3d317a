//! The ledger logic, over any [`Kv`].
//!
//! Key layout (all in one keyspace, see docs/state-layout.md):
//! - `f/<file key>`           -> [`FileRecord`] (JSON)
//! - `p/<seq, 20 digits>`      -> file key: the pending queue, in discovery order
//! - `x/<modified ms, 20 digits>/<file key>` -> empty: expiry index for `max_file_age`
//! - `b/<batch id, 20 digits>` -> [`BatchPlan`] (JSON)
//! - `t/<batch id, 20 digits>/<path>` -> empty: data files staged by the batch's attempts
//! - `s/<version, 10 digits>`  -> stream schema (Arrow schema JSON)
//! - `m/cursor`, `m/seq`, `m/last_batch`, `m/open_batch`, `m/stats`, `m/format`
//! - `m/keys_plain`, `m/keys_versioned`: which kinds of file key were ever admitted, so that
//!   toggling `allow_overwrites` looks up the other kind only when it exists
//!
//! Every public method reads, then writes all its changes in one atomic write. A mutex
//! serialises the read-modify-write cycles of one process; RocksDB's directory lock keeps a
//! second process out.

use crate::error::StateError;
use crate::kv::{Kv, KvOp};
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
struct Stats {
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

    fn backend(&self, op: &'static str) -> impl Fn(String) -> StateError + '_ {
        move |reason| StateError::Backend {
            stream: self.stream.clone(),
            op,
            reason,
        }
    }

    fn get_json<T: for<'de> Deserialize<'de>>(&self, key: &[u8]) -> Result<Option<T>, StateError> {
        match self.kv.get(key).map_err(self.backend("read"))? {
            None => Ok(None),
            Some(raw) => self.decode(key, &raw).map(Some),
        }
    }

    /// The JSON value stored under `key`; an unreadable one is reported as corrupt.
    fn decode<T: for<'de> Deserialize<'de>>(
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

    fn get_u64(&self, key: &[u8]) -> Result<Option<u64>, StateError> {
        self.get_json(key)
    }

    fn put_json<T: Serialize>(key: Vec<u8>, value: &T) -> KvOp {
        KvOp::Put(
            key,
            serde_json::to_vec(value).expect("state records serialise"),
        )
    }

    fn stats(&self) -> Result<Stats, StateError> {
        Ok(self.get_json(STATS)?.unwrap_or_default())
    }

    fn write(&self, ops: Vec<KvOp>) -> Result<(), StateError> {
        self.kv.write(ops).map_err(self.backend("write"))
    }

    fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn load_batch(&self, batch_id: u64) -> Result<BatchPlan, StateError> {
        let mut plan: BatchPlan =
            self.get_json(&batch_key(batch_id))?
                .ok_or(StateError::UnknownBatch {
                    stream: self.stream.clone(),
                    batch_id,
                })?;
        plan.staged = self.staged(batch_id)?;
        Ok(plan)
    }

    fn staged(&self, batch_id: u64) -> Result<Vec<String>, StateError> {
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
    fn put_plan(plan: &BatchPlan) -> KvOp {
        let mut stored = plan.clone();
        stored.staged.clear();
        Self::put_json(batch_key(plan.batch_id), &stored)
    }

    /// Whether `meta`, not recorded under its own `key`, is known under a key of the other
    /// kind (`allow_overwrites` was toggled): a file ingested under its plain path is not
    /// ingested again because overwrites became allowed, unless its content changed; and with
    /// overwrites off again, any version of a path makes the path known.
    fn known_other_kind(
        &self,
        key: &FileKey,
        meta: &FileMeta,
        kinds: (bool, bool),
    ) -> Result<Known, StateError> {
        let (plain, versioned) = kinds;
        let overwrites = key.0 != meta.path;
        if overwrites
            && plain
            && let Some(rec) =
                self.get_json::<FileRecord>(&file_key(&FileKey(meta.path.clone())))?
            && rec.meta.same_version(meta)
        {
            return Ok(Known::Yes(Box::new(rec)));
        }
        if versioned {
            // Versioned keys of this path (written under either key format).
            let prefix = file_key(&FileKey(format!("{}@", meta.path)));
            let mut found = None;
            self.kv
                .scan(&prefix, &prefix, &mut |_, v| {
                    if let Ok(r) = serde_json::from_slice::<FileRecord>(v)
                        && r.meta.path == meta.path
                        && (!overwrites || r.meta.same_version(meta))
                    {
                        found = Some(r);
                    }
                    found.is_none()
                })
                .map_err(self.backend("scan versions"))?;
            if let Some(r) = found {
                return Ok(if overwrites {
                    Known::Yes(Box::new(r))
                } else {
                    Known::OtherVersion
                });
            }
        }
        Ok(Known::No)
    }

    /// Whether a listed file is admitted: `None` when it is known, `Some(previous)` when it
    /// is new, with the record it replaces (a path whose listed version changed before it was
    /// read, and was never ingested: its current version is ingested, once, under the same key).
    ///
    /// The key is read once; the common case (known and not skipped) decodes only the
    /// record's state.
    fn admission(
        &self,
        key: &FileKey,
        meta: &FileMeta,
        kinds: (bool, bool),
    ) -> Result<Option<Option<Box<FileRecord>>>, StateError> {
        #[derive(Deserialize)]
        struct SizeOnly {
            size: u64,
        }
        #[derive(Deserialize)]
        struct StateOnly {
            state: FileState,
            meta: SizeOnly,
        }
        // An empty version not read yet gives way to a version with content (a writer that
        // creates the key empty, then fills it: both events may come in one round, in
        // either order, and the empty one must not hide the content).
        let empty_gives_way = |state: FileState, size: u64| {
            state == FileState::Discovered && size == 0 && meta.size > 0
        };
        let at_key = file_key(key);
        let known = match self.kv.get(&at_key).map_err(self.backend("read"))? {
            Some(raw)
                if serde_json::from_slice::<StateOnly>(&raw).is_ok_and(|r| {
                    r.state != FileState::Skipped && !empty_gives_way(r.state, r.meta.size)
                }) =>
            {
                return Ok(None);
            }
            Some(raw) => Known::Yes(Box::new(self.decode(&at_key, &raw)?)),
            None => self.known_other_kind(key, meta, kinds)?,
        };
        Ok(match known {
            Known::Yes(rec)
                if rec.state == FileState::Skipped
                    && rec.key == *key
                    && rec.skip.as_ref().is_some_and(|s| {
                        matches!(s.kind, SkipKind::ChangedAfterListing | SkipKind::Empty)
                    })
                    && !rec.meta.same_version(meta) =>
            {
                Some(Some(rec))
            }
            Known::Yes(rec) if rec.key == *key && empty_gives_way(rec.state, rec.meta.size) => {
                Some(Some(rec))
            }
            Known::Yes(_) | Known::OtherVersion => None,
            Known::No => Some(None),
        })
    }

    fn key_kinds(&self) -> Result<(bool, bool), StateError> {
        Ok((
            self.get_u64(KEYS_PLAIN)?.is_some(),
            self.get_u64(KEYS_VERSIONED)?.is_some(),
        ))
    }

    fn may_be_new_inner(
        &self,
        files: &[FileMeta],
        allow_overwrites: bool,
    ) -> Result<Vec<bool>, StateError> {
        let kinds = self.key_kinds()?;
        files
            .iter()
            .map(|m| {
                Ok(self
                    .admission(&m.key(allow_overwrites), m, kinds)?
                    .is_some())
            })
            .collect()
    }

    fn admit_inner(
        &self,
        files: &[(FileKey, FileMeta)],
        cursor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<u64, StateError> {
        let _g = self.guard();
        let mut seq = self.get_u64(SEQ)?.unwrap_or(0);
        let mut stats = self.stats()?;
        let mut ops = Vec::new();
        let mut admitted = 0;
        let kinds = self.key_kinds()?;
        let mut new_kind = (false, false);
        // One version per key in a call: the first with content, else the first.
        let mut chosen: HashMap<&FileKey, usize> = HashMap::new();
        for (i, (key, meta)) in files.iter().enumerate() {
            let e = chosen.entry(key).or_insert(i);
            if files[*e].1.size == 0 && meta.size > 0 {
                *e = i;
            }
        }
        for (i, (key, meta)) in files.iter().enumerate() {
            if chosen.get(key) != Some(&i) {
                continue;
            }
            let Some(previous) = self.admission(key, meta, kinds)? else {
                continue;
            };
            seq += 1;
            let mut rec = FileRecord::discovered(key.clone(), meta.clone(), seq, now);
            if let Some(prev) = previous {
                stats.moved(Some(prev.state), None);
                ops.push(KvOp::Delete(expiry_key(&prev.meta, key)));
                rec.error = Some(if prev.state == FileState::Discovered {
                    // Not read yet: its place in the queue goes to the new version.
                    ops.push(KvOp::Delete(pending_key(prev.seq)));
                    format!(
                        "an earlier empty version (modified {}) was replaced before it was read",
                        prev.meta.modified
                    )
                } else {
                    format!(
                        "an earlier version ({} bytes, modified {}) changed after listing and was skipped",
                        prev.meta.size, prev.meta.modified
                    )
                });
            }
            if key.0 == meta.path {
                new_kind.0 = !kinds.0;
            } else {
                new_kind.1 = !kinds.1;
            }
            ops.push(Self::put_json(file_key(key), &rec));
            ops.push(KvOp::Put(pending_key(seq), key.0.clone().into_bytes()));
            ops.push(KvOp::Put(expiry_key(meta, key), Vec::new()));
            stats.moved(None, Some(FileState::Discovered));
            stats.pending_bytes += meta.size;
            admitted += 1;
        }
        let cursor_changed = match cursor {
            Some(c) => {
                self.kv
                    .get(CURSOR)
                    .map_err(self.backend("read"))?
                    .as_deref()
                    != Some(c.as_bytes())
            }
            None => false,
        };
        if admitted == 0 && !cursor_changed {
            return Ok(0);
        }
        if let Some(c) = cursor {
            ops.push(KvOp::Put(CURSOR.to_vec(), c.as_bytes().to_vec()));
        }
        if new_kind.0 {
            ops.push(Self::put_json(KEYS_PLAIN.to_vec(), &1u64));
        }
        if new_kind.1 {
            ops.push(Self::put_json(KEYS_VERSIONED.to_vec(), &1u64));
        }
        ops.push(Self::put_json(SEQ.to_vec(), &seq));
        ops.push(Self::put_json(STATS.to_vec(), &stats));
        self.write(ops)?;
        Ok(admitted)
    }

    fn plan_inner(
        &self,
        limits: BatchLimits,
        schema_version: u32,
        now: DateTime<Utc>,
    ) -> Result<Option<BatchPlan>, StateError> {
        let _g = self.guard();
        if let Some(open) = self.get_u64(OPEN_BATCH)? {
            return Err(StateError::BatchOpen {
                stream: self.stream.clone(),
                batch_id: open,
            });
        }
        let mut picked: Vec<(Vec<u8>, FileRecord)> = Vec::new();
        let mut orphans: Vec<Vec<u8>> = Vec::new();
        let mut bytes = 0u64;
        let mut scan_err = None;
        self.kv
            .scan(b"p/", b"p/", &mut |pk, fk| {
                let key = FileKey(String::from_utf8_lossy(fk).into_owned());
                match self.get_json::<FileRecord>(&file_key(&key)) {
                    Ok(Some(rec)) if rec.state == FileState::Discovered => {
                        if !limits.admits(picked.len(), bytes, rec.meta.size) {
                            return false;
                        }
                        bytes += rec.meta.size;
                        picked.push((pk.to_vec(), rec));
                        true
                    }
                    Ok(_) => {
                        // A queue entry whose record moved on or expired: drop it.
                        orphans.push(pk.to_vec());
                        true
                    }
                    Err(e) => {
                        scan_err = Some(e);
                        false
                    }
                }
            })
            .map_err(self.backend("scan pending"))?;
        if let Some(e) = scan_err {
            return Err(e);
        }
        let mut ops: Vec<KvOp> = orphans.into_iter().map(KvOp::Delete).collect();
        if picked.is_empty() {
            if !ops.is_empty() {
                self.write(ops)?;
            }
            return Ok(None);
        }
        let batch_id = self.get_u64(LAST_BATCH)?.map_or(0, |b| b + 1);
        let mut stats = self.stats()?;
        let mut files = Vec::with_capacity(picked.len());
        for (pk, mut rec) in picked {
            ops.push(KvOp::Delete(pk));
            rec.state = FileState::InBatch;
            rec.batch_id = Some(batch_id);
            rec.processed_time = Some(now);
            stats.moved(Some(FileState::Discovered), Some(FileState::InBatch));
            stats.pending_bytes = stats.pending_bytes.saturating_sub(rec.meta.size);
            files.push((rec.key.clone(), rec.meta.clone()));
            ops.push(Self::put_json(file_key(&rec.key), &rec));
        }
        let plan = BatchPlan {
            batch_id,
            files,
            schema_version,
            planned_at: now,
            attempts: 0,
            staged: Vec::new(),
            committed: None,
            commit_attempts: Vec::new(),
        };
        ops.push(Self::put_json(batch_key(batch_id), &plan));
        ops.push(Self::put_json(LAST_BATCH.to_vec(), &batch_id));
        ops.push(Self::put_json(OPEN_BATCH.to_vec(), &batch_id));
        ops.push(Self::put_json(STATS.to_vec(), &stats));
        self.write(ops)?;
        Ok(Some(plan))
    }

    fn update_plan(
        &self,
        batch_id: u64,
        f: impl FnOnce(&mut BatchPlan),
    ) -> Result<BatchPlan, StateError> {
        let _g = self.guard();
        let mut plan = self.load_batch(batch_id)?;
        f(&mut plan);
        self.write(vec![Self::put_plan(&plan)])?;
        Ok(plan)
    }

    fn committed_inner(&self, batch_id: u64, receipt: CommitReceipt) -> Result<(), StateError> {
        let _g = self.guard();
        let mut plan = self.load_batch(batch_id)?;
        if plan.committed.is_some() {
            return Ok(());
        }
        let mut stats = self.stats()?;
        let mut ops = Vec::new();
        let (mut files, mut bytes) = (0u64, 0u64);
        for (key, _) in &plan.files {
            let fk = file_key(key);
            if let Some(mut rec) = self.get_json::<FileRecord>(&fk)? {
                // Files skipped during the batch stay skipped: the table does not hold them.
                if rec.state != FileState::InBatch || rec.batch_id != Some(batch_id) {
                    continue;
                }
                stats.moved(Some(rec.state), Some(FileState::Committed));
                rec.state = FileState::Committed;
                rec.commit_time = Some(receipt.committed_at);
                rec.table_version = Some(receipt.table_version);
                files += 1;
                bytes += rec.meta.size;
                ops.push(Self::put_json(fk, &rec));
            }
        }
        stats.committed_batches += 1;
        stats.committed_rows += receipt.rows;
        stats.committed_bytes += bytes;
        stats.committed_files += files;
        plan.committed = Some(receipt);
        ops.push(Self::put_plan(&plan));
        if self.get_u64(OPEN_BATCH)? == Some(batch_id) {
            ops.push(KvOp::Delete(OPEN_BATCH.to_vec()));
        }
        ops.push(Self::put_json(STATS.to_vec(), &stats));
        self.write(ops)
    }

    fn skip_inner(
        &self,
        key: &FileKey,
        reason: SkipReason,
        now: DateTime<Utc>,
    ) -> Result<FileRecord, StateError> {
        let _g = self.guard();
        let fk = file_key(key);
        let mut rec = self
            .get_json::<FileRecord>(&fk)?
            .ok_or_else(|| StateError::UnknownFile {
                stream: self.stream.clone(),
                key: key.0.clone(),
            })?;
        match rec.state {
            FileState::Discovered | FileState::InBatch | FileState::Failed => {}
            FileState::Skipped => return Ok(rec),
            other => {
                return Err(StateError::NotSkippable {
                    stream: self.stream.clone(),
                    key: key.0.clone(),
                    state: other.as_str(),
                });
            }
        }
        let mut stats = self.stats()?;
        let mut ops = Vec::new();
        if rec.state == FileState::Discovered {
            ops.push(KvOp::Delete(pending_key(rec.seq)));
            stats.pending_bytes = stats.pending_bytes.saturating_sub(rec.meta.size);
        }
        stats.moved(Some(rec.state), Some(FileState::Skipped));
        rec.state = FileState::Skipped;
        rec.processed_time.get_or_insert(now);
        rec.skip = Some(reason);
        ops.push(Self::put_json(fk, &rec));
        ops.push(Self::put_json(STATS.to_vec(), &stats));
        self.write(ops)?;
        Ok(rec)
    }

    fn prune_inner(&self, batch_id: u64, keep_plans: u64) -> Result<(), StateError> {
        let _g = self.guard();
        let mut ops = Vec::new();
        let collect = |prefix: &[u8], ops: &mut Vec<KvOp>| {
            self.kv
                .scan(prefix, prefix, &mut |k, _| {
                    ops.push(KvOp::Delete(k.to_vec()));
                    true
                })
                .map_err(self.backend("scan for pruning"))
        };
        collect(&staged_prefix(batch_id), &mut ops)?;
        // Plans older than the newest `keep_plans` (never the open one).
        let oldest_kept = batch_id.saturating_sub(keep_plans.saturating_sub(1));
        let open = self.get_u64(OPEN_BATCH)?;
        let mut old = Vec::new();
        self.kv
            .scan(b"b/", b"b/", &mut |k, _| {
                let id = std::str::from_utf8(&k[2..])
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok());
                match id {
                    Some(id) if id < oldest_kept => {
                        if Some(id) != open {
                            old.push(id);
                        }
                        true
                    }
                    _ => false,
                }
            })
            .map_err(self.backend("scan plans"))?;
        for id in old {
            ops.push(KvOp::Delete(batch_key(id)));
            collect(&staged_prefix(id), &mut ops)?;
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.write(ops)
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

    fn files_inner(&self, state: Option<FileState>) -> Result<Vec<FileRecord>, StateError> {
        let mut out = Vec::new();
        let mut err = None;
        self.kv
            .scan(
                b"f/",
                b"f/",
                &mut |k, v| match serde_json::from_slice::<FileRecord>(v) {
                    Ok(rec) => {
                        if state.is_none_or(|s| s == rec.state) {
                            out.push(rec);
                        }
                        true
                    }
                    Err(e) => {
                        err = Some(StateError::Corrupt {
                            stream: self.stream.clone(),
                            key: String::from_utf8_lossy(k).into_owned(),
                            reason: e.to_string(),
                        });
                        false
                    }
                },
            )
            .map_err(self.backend("scan files"))?;
        if let Some(e) = err {
            return Err(e);
        }
        out.sort_by_key(|r| r.seq);
        Ok(out)
    }

    /// One page of file records in key order (see [`StateStore::files_page`]). The scan
    /// seeks to the key after `after` and reads one record past the page, undecoded, to tell
    /// whether there is a next page; with a filter, a record is decoded whole only if it passes.
    fn files_page_inner(
        &self,
        filter: FileFilter,
        after: Option<&FileKey>,
        limit: usize,
        max_scanned: u64,
    ) -> Result<FilesPage, StateError> {
        #[derive(Deserialize)]
        struct Head {
            state: FileState,
            seq: u64,
        }
        let (limit, max_scanned) = (limit.max(1), max_scanned.max(1));
        let from = match after {
            // The least key after `f/<after>`.
            Some(k) => {
                let mut from = file_key(k);
                from.push(0);
                from
            }
            None => b"f/".to_vec(),
        };
        let mut page = FilesPage::default();
        let mut last_key = Vec::new();
        let mut more = false;
        let mut err = None;
        let corrupt = |k: &[u8], e: serde_json::Error| StateError::Corrupt {
            stream: self.stream.clone(),
            key: String::from_utf8_lossy(k).into_owned(),
            reason: e.to_string(),
        };
        self.kv
            .scan(b"f/", &from, &mut |k, v| {
                if page.files.len() >= limit || page.scanned >= max_scanned {
                    more = true;
                    return false;
                }
                page.scanned += 1;
                last_key.clear();
                last_key.extend_from_slice(k);
                let passes = filter.is_all()
                    || match serde_json::from_slice::<Head>(v) {
                        Ok(h) => filter.passes(h.state, h.seq),
                        Err(e) => {
                            err = Some(corrupt(k, e));
                            return false;
                        }
                    };
                if passes {
                    match serde_json::from_slice::<FileRecord>(v) {
                        Ok(rec) => page.files.push(rec),
                        Err(e) => {
                            err = Some(corrupt(k, e));
                            return false;
                        }
                    }
                }
                true
            })
            .map_err(self.backend("scan files"))?;
        if let Some(e) = err {
            return Err(e);
        }
        // `more`: a record follows the last one read (`last_key`, never empty then).
        page.next = more.then(|| FileKey(String::from_utf8_lossy(&last_key[2..]).into_owned()));
        Ok(page)
    }

    /// Every file record passing `filter`, in key order, read a page at a time: memory stays
    /// that of one page however many files the ledger tracks (`landfall state` prints 10 million
    /// rows in constant memory). A record written or removed while the iteration runs may or
    /// may not be seen; no record is seen twice.
    pub fn file_records(&self, filter: FileFilter) -> FileRecords<'_, K> {
        FileRecords {
            ledger: self,
            filter,
            page: Vec::new().into_iter(),
            next: None,
            done: false,
        }
    }

    fn expire_inner(&self, cutoff: DateTime<Utc>) -> Result<u64, StateError> {
        let _g = self.guard();
        let end = format!("x/{:020}", cutoff.timestamp_millis().max(0));
        let mut index = Vec::new();
        self.kv
            .scan(b"x/", b"x/", &mut |k, _| {
                if k >= end.as_bytes() {
                    return false;
                }
                index.push(k.to_vec());
                true
            })
            .map_err(self.backend("scan expiry index"))?;
        let mut stats = self.stats()?;
        let mut ops = Vec::new();
        let mut expired = 0;
        for ik in index {
            let text = String::from_utf8_lossy(&ik).into_owned();
            // x/<20 digits>/<key>
            let key = FileKey(text[23..].to_string());
            match self.get_json::<FileRecord>(&file_key(&key))? {
                Some(rec) if rec.state.is_terminal() => {
                    stats.moved(Some(rec.state), None);
                    ops.push(KvOp::Delete(file_key(&key)));
                    ops.push(KvOp::Delete(ik));
                    expired += 1;
                }
                Some(_) => {}
                None => ops.push(KvOp::Delete(ik)),
            }
        }
        if ops.is_empty() {
            return Ok(0);
        }
        ops.push(Self::put_json(STATS.to_vec(), &stats));
        self.write(ops)?;
        Ok(expired)
    }
}

impl<K: Kv> StateStore for Ledger<K> {
    fn admit(
        &self,
        files: &[(FileKey, FileMeta)],
        cursor: Option<&str>,
        now: DateTime<Utc>,
    ) -> SeamResult<u64> {
        Ok(self.admit_inner(files, cursor, now)?)
    }

    fn may_be_new(&self, files: &[FileMeta], allow_overwrites: bool) -> SeamResult<Vec<bool>> {
        Ok(self.may_be_new_inner(files, allow_overwrites)?)
    }

    fn cursor(&self) -> SeamResult<Option<String>> {
        let raw = self.kv.get(CURSOR).map_err(self.backend("read"))?;
        Ok(raw.map(|r| String::from_utf8_lossy(&r).into_owned()))
    }

    fn is_new(&self) -> SeamResult<bool> {
        Ok(self.get_u64(SEQ)?.is_none())
    }

    fn open_batch(&self) -> SeamResult<Option<BatchPlan>> {
        match self.get_u64(OPEN_BATCH)? {
            Some(id) => Ok(Some(self.load_batch(id)?)),
            None => Ok(None),
        }
    }

    fn plan_batch(
        &self,
        limits: BatchLimits,
        schema_version: u32,
        now: DateTime<Utc>,
    ) -> SeamResult<Option<BatchPlan>> {
        Ok(self.plan_inner(limits, schema_version, now)?)
    }

    fn start_attempt(&self, batch_id: u64) -> SeamResult<BatchPlan> {
        Ok(self.update_plan(batch_id, |p| p.attempts += 1)?)
    }

    fn commit_started(&self, batch_id: u64, attempt: u32) -> SeamResult<()> {
        self.update_plan(batch_id, |p| {
            if !p.commit_attempts.contains(&attempt) {
                p.commit_attempts.push(attempt);
            }
        })?;
        Ok(())
    }

    fn record_staged(&self, batch_id: u64, path: &str) -> SeamResult<()> {
        let mut key = staged_prefix(batch_id);
        key.extend_from_slice(path.as_bytes());
        Ok(self.write(vec![KvOp::Put(key, Vec::new())])?)
    }

    fn record_committed(&self, batch_id: u64, receipt: CommitReceipt) -> SeamResult<()> {
        Ok(self.committed_inner(batch_id, receipt)?)
    }

    fn batch(&self, batch_id: u64) -> SeamResult<Option<BatchPlan>> {
        match self.load_batch(batch_id) {
            Ok(p) => Ok(Some(p)),
            Err(StateError::UnknownBatch { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn files(&self, state: Option<FileState>) -> SeamResult<Vec<FileRecord>> {
        Ok(self.files_inner(state)?)
    }

    fn files_page(
        &self,
        filter: FileFilter,
        after: Option<&FileKey>,
        limit: usize,
        max_scanned: u64,
    ) -> SeamResult<FilesPage> {
        Ok(self.files_page_inner(filter, after, limit, max_scanned)?)
    }

    fn summary(&self) -> SeamResult<StreamSummary> {
        let mut summary = self.counts()?;
        summary.last_batch = match self.get_u64(LAST_BATCH)? {
            Some(id) => self.get_json(&batch_key(id))?,
            None => None,
        };
        Ok(summary)
    }

    fn counts(&self) -> SeamResult<StreamSummary> {
        let stats = self.stats()?;
        let files_by_state = FileState::ALL
            .into_iter()
            .map(|s| (s, stats.counts.get(s.as_str()).copied().unwrap_or(0)))
            .collect();
        Ok(StreamSummary {
            pending_files: stats
                .counts
                .get(FileState::Discovered.as_str())
                .copied()
                .unwrap_or(0),
            pending_bytes: stats.pending_bytes,
            files_by_state,
            last_batch: None,
            committed_batches: stats.committed_batches,
            committed_rows: stats.committed_rows,
            committed_bytes: stats.committed_bytes,
            committed_files: stats.committed_files,
        })
    }

    fn expire(&self, cutoff: DateTime<Utc>) -> SeamResult<u64> {
        Ok(self.expire_inner(cutoff)?)
    }

    fn schema(&self, version: u32) -> SeamResult<Option<String>> {
        let raw = self
            .kv
            .get(&schema_key(version))
            .map_err(self.backend("read"))?;
        Ok(raw.map(|r| String::from_utf8_lossy(&r).into_owned()))
    }

    fn latest_schema_version(&self) -> SeamResult<Option<u32>> {
        let mut latest = None;
        self.kv
            .scan(b"s/", b"s/", &mut |k, _| {
                latest = std::str::from_utf8(&k[2..])
                    .ok()
                    .and_then(|s| s.parse().ok());
                true
            })
            .map_err(self.backend("scan schemas"))?;
        Ok(latest)
    }

    fn put_schema(&self, version: u32, schema_json: &str) -> SeamResult<()> {
        let _g = self.guard();
        Ok(self.write(vec![KvOp::Put(
            schema_key(version),
            schema_json.as_bytes().to_vec(),
        )])?)
    }

    fn meta(&self, name: &str) -> SeamResult<Option<String>> {
        let raw = self
            .kv
            .get(format!("m/user/{name}").as_bytes())
            .map_err(self.backend("read"))?;
        Ok(raw.map(|r| String::from_utf8_lossy(&r).into_owned()))
    }

    fn set_meta(&self, name: &str, value: &str) -> SeamResult<()> {
        let _g = self.guard();
        Ok(self.write(vec![KvOp::Put(
            format!("m/user/{name}").into_bytes(),
            value.as_bytes().to_vec(),
        )])?)
    }

    fn last_batch_id(&self) -> SeamResult<Option<u64>> {
        Ok(self.get_u64(LAST_BATCH)?)
    }

    fn file(&self, key: &FileKey) -> SeamResult<Option<FileRecord>> {
        Ok(self.get_json(&file_key(key))?)
    }

    fn skip_file(
        &self,
        key: &FileKey,
        reason: SkipReason,
        now: DateTime<Utc>,
    ) -> SeamResult<FileRecord> {
        Ok(self.skip_inner(key, reason, now)?)
    }

    fn prune_batch(&self, batch_id: u64, keep_plans: u64) -> SeamResult<()> {
        Ok(self.prune_inner(batch_id, keep_plans)?)
    }

    fn ensure_batch_floor(&self, next: u64) -> SeamResult<()> {
        let _g = self.guard();
        let last = self.get_u64(LAST_BATCH)?;
        if next > 0 && last.is_none_or(|l| l + 1 < next) {
            self.write(vec![Self::put_json(LAST_BATCH.to_vec(), &(next - 1))])?;
        }
        Ok(())
    }
}

/// Records per read of [`Ledger::file_records`].
const RECORDS_PER_READ: usize = 1_000;

/// The iterator of [`Ledger::file_records`]. After an error it ends.
pub struct FileRecords<'a, K: Kv> {
    ledger: &'a Ledger<K>,
    filter: FileFilter,
    page: std::vec::IntoIter<FileRecord>,
    /// Where the next read starts after; `None` before the first.
    next: Option<FileKey>,
    done: bool,
}

impl<K: Kv> Iterator for FileRecords<'_, K> {
    type Item = Result<FileRecord, StateError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(rec) = self.page.next() {
                return Some(Ok(rec));
            }
            if self.done {
                return None;
            }
            let page = match self.ledger.files_page_inner(
                self.filter,
                self.next.as_ref(),
                RECORDS_PER_READ,
                // A read that finds nothing passing the filter still ends, and goes on.
                (RECORDS_PER_READ * 100) as u64,
            ) {
                Ok(p) => p,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            self.done = page.next.is_none();
            self.next = page.next;
            self.page = page.files.into_iter();
        }
    }
}
