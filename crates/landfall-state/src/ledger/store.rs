//! The [`StateStore`] seam over the ledger: each method one atomic change.

use super::*;

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

    fn expire(&self, cutoff: DateTime<Utc>, keep_unarchived: bool) -> SeamResult<u64> {
        Ok(self.expire_inner(cutoff, keep_unarchived)?)
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
        Ok(self.get_record(&file_key(key))?)
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

    fn index_for_archive(&self) -> SeamResult<u64> {
        Ok(self.index_for_archive_inner()?)
    }

    fn due_for_archive(
        &self,
        cutoff: DateTime<Utc>,
        limit: usize,
        skip: &dyn Fn(&FileKey) -> bool,
    ) -> SeamResult<Vec<FileRecord>> {
        Ok(self.due_for_archive_inner(cutoff, limit, skip)?)
    }

    fn record_archive(&self, steps: &[(FileKey, landfall_core::ArchiveStep)]) -> SeamResult<u64> {
        Ok(self.record_archive_inner(steps)?)
    }
}
