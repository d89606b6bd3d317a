//! Batches: planning from the pending queue, attempts, recording a commit, skipping a file,
//! and pruning settled plans.

use super::*;

/// Pending-queue entries read per batched lookup while planning.
const PLAN_CHUNK: usize = 512;

impl<K: Kv> Ledger<K> {
    pub(super) fn plan_inner(
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
        // The pending queue in order, a chunk of keys at a time, each chunk's records read in
        // one batched lookup.
        let mut from = b"p/".to_vec();
        'queue: loop {
            let mut chunk: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(PLAN_CHUNK);
            self.kv
                .scan(b"p/", &from, &mut |pk, fk| {
                    chunk.push((
                        pk.to_vec(),
                        file_key(&FileKey(String::from_utf8_lossy(fk).into_owned())),
                    ));
                    chunk.len() < PLAN_CHUNK
                })
                .map_err(self.backend("scan pending"))?;
            let full = chunk.len() == PLAN_CHUNK;
            let last = chunk.last().map(|(pk, _)| pk.clone());
            let keys: Vec<Vec<u8>> = chunk.iter().map(|(_, fk)| fk.clone()).collect();
            let stored = self.kv.get_many(&keys).map_err(self.backend("read"))?;
            for ((pk, fk), raw) in chunk.into_iter().zip(stored) {
                let rec = match raw {
                    Some(raw) => Some(self.decode_record(&fk, &raw)?),
                    None => None,
                };
                match rec {
                    Some(rec) if rec.state == FileState::Discovered => {
                        if !limits.admits(picked.len(), bytes, rec.meta.size) {
                            break 'queue;
                        }
                        bytes += rec.meta.size;
                        picked.push((pk, rec));
                    }
                    // A queue entry whose record moved on or expired: drop it.
                    _ => orphans.push(pk),
                }
            }
            match last {
                Some(last) if full => {
                    from = last;
                    from.push(0);
                }
                _ => break,
            }
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
            ops.push(Self::put_record(file_key(&rec.key), &rec));
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

    pub(super) fn update_plan(
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

    pub(super) fn committed_inner(
        &self,
        batch_id: u64,
        receipt: CommitReceipt,
    ) -> Result<(), StateError> {
        let _g = self.guard();
        let mut plan = self.load_batch(batch_id)?;
        if plan.committed.is_some() {
            return Ok(());
        }
        let mut stats = self.stats()?;
        let mut ops = Vec::new();
        let (mut files, mut bytes) = (0u64, 0u64);
        let keys: Vec<Vec<u8>> = plan.files.iter().map(|(key, _)| file_key(key)).collect();
        let stored = self.kv.get_many(&keys).map_err(self.backend("read"))?;
        for (fk, raw) in keys.into_iter().zip(stored) {
            let rec = match raw {
                Some(raw) => Some(self.decode_record(&fk, &raw)?),
                None => None,
            };
            if let Some(mut rec) = rec {
                // Files skipped during the batch stay skipped: the table does not hold them.
                if rec.state != FileState::InBatch || rec.batch_id != Some(batch_id) {
                    continue;
                }
                stats.moved(Some(rec.state), Some(FileState::Committed));
                rec.state = FileState::Committed;
                rec.commit_time = Some(receipt.committed_at);
                rec.table_version = Some(receipt.table_version);
                if let Some(entry) = super::archive::archive_entry(&rec) {
                    ops.push(KvOp::Put(entry, Vec::new()));
                }
                files += 1;
                bytes += rec.meta.size;
                ops.push(Self::put_record(fk, &rec));
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

    pub(super) fn skip_inner(
        &self,
        key: &FileKey,
        reason: SkipReason,
        now: DateTime<Utc>,
    ) -> Result<FileRecord, StateError> {
        let _g = self.guard();
        let fk = file_key(key);
        let mut rec = self
            .get_record(&fk)?
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
        ops.push(Self::put_record(fk, &rec));
        ops.push(Self::put_json(STATS.to_vec(), &stats));
        self.write(ops)?;
        Ok(rec)
    }

    pub(super) fn prune_inner(&self, batch_id: u64, keep_plans: u64) -> Result<(), StateError> {
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
}
