//! The per-stream ledger: every call is one atomic, synced change.

use super::SeamResult;
use crate::file::{ArchiveStep, FileKey, FileMeta, FileRecord, FileState, SkipReason};
use crate::plan::{BatchLimits, BatchPlan, CommitReceipt};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Counts over one stream's ledger.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamSummary {
    pub files_by_state: Vec<(FileState, u64)>,
    pub pending_files: u64,
    pub pending_bytes: u64,
    pub last_batch: Option<BatchPlan>,
    pub committed_batches: u64,
    pub committed_rows: u64,
    pub committed_bytes: u64,
    pub committed_files: u64,
}

/// Which file records a page of [`StateStore::files_page`] holds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FileFilter {
    /// Only files in this state.
    pub state: Option<FileState>,
    /// Only files discovered after this sequence number.
    pub discovered_after: Option<u64>,
}

impl FileFilter {
    pub fn passes(&self, state: FileState, seq: u64) -> bool {
        self.state.is_none_or(|s| s == state) && self.discovered_after.is_none_or(|a| seq > a)
    }

    /// Whether every record passes (a page then reads no record it does not return).
    pub fn is_all(&self) -> bool {
        self.state.is_none() && self.discovered_after.is_none()
    }
}

/// One page of file records, in key order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FilesPage {
    pub files: Vec<FileRecord>,
    /// The key the next page starts after, or `None` when the ledger has no more records. A
    /// page may hold fewer than `limit` records (even none) and still have a `next`: it stopped
    /// after reading `max_scanned` records that did not pass the filter.
    pub next: Option<FileKey>,
    /// Records read for this page, passing the filter or not.
    pub scanned: u64,
}

/// The per-stream ledger. Every method is one atomic change, durable when it returns.
pub trait StateStore: Send + Sync {
    /// Admit the files not yet known, in order, together with the new discovery cursor.
    /// Returns how many were new.
    fn admit(
        &self,
        files: &[(FileKey, FileMeta)],
        cursor: Option<&str>,
        now: DateTime<Utc>,
    ) -> SeamResult<u64>;
    /// For each listed file (under the key `allow_overwrites` gives it), whether `admit`
    /// could take it: `false` only for files the ledger already knows. Discovery calls this
    /// on each page of a listing, so a poll holds the new files, not the whole prefix.
    fn may_be_new(&self, files: &[FileMeta], allow_overwrites: bool) -> SeamResult<Vec<bool>>;
    /// The discovery cursor last admitted with files. Listing keeps it at the greatest path it
    /// has seen, so a listed path after it is new without a `may_be_new` lookup.
    fn cursor(&self) -> SeamResult<Option<String>>;
    /// Whether the ledger has ever admitted anything (for `include_existing_files`).
    fn is_new(&self) -> SeamResult<bool>;
    /// The planned batch not yet recorded as committed, if any.
    fn open_batch(&self) -> SeamResult<Option<BatchPlan>>;
    /// Plan the next batch from pending files (discovery order), or `None` when nothing is
    /// pending. Fails if a batch is still open.
    fn plan_batch(
        &self,
        limits: BatchLimits,
        schema_version: u32,
        now: DateTime<Utc>,
    ) -> SeamResult<Option<BatchPlan>>;
    /// Count one more attempt of the open batch and return the updated plan.
    fn start_attempt(&self, batch_id: u64) -> SeamResult<BatchPlan>;
    /// Record that `attempt` of the open batch is about to call commit (see
    /// `BatchPlan::commit_attempts`).
    fn commit_started(&self, batch_id: u64, attempt: u32) -> SeamResult<()>;
    /// Remember a data file an attempt is about to create (before it exists).
    fn record_staged(&self, batch_id: u64, path: &str) -> SeamResult<()>;
    /// The batch landed: mark it and its files committed.
    fn record_committed(&self, batch_id: u64, receipt: CommitReceipt) -> SeamResult<()>;
    fn batch(&self, batch_id: u64) -> SeamResult<Option<BatchPlan>>;
    /// File records, optionally of one state, in discovery order.
    fn files(&self, state: Option<FileState>) -> SeamResult<Vec<FileRecord>>;
    /// Up to `limit` records passing `filter`, in key order, after the key `after` (from the
    /// first without it), reading at most `max_scanned` records: the ledger seeks to `after`,
    /// so a page costs what it reads, not the size of the ledger. `limit` and `max_scanned`
    /// count as at least 1.
    fn files_page(
        &self,
        filter: FileFilter,
        after: Option<&FileKey>,
        limit: usize,
        max_scanned: u64,
    ) -> SeamResult<FilesPage>;
    fn summary(&self) -> SeamResult<StreamSummary>;
    /// The summary without `last_batch`: the counts only, one small read (for every round).
    fn counts(&self) -> SeamResult<StreamSummary>;
    /// Forget terminal files modified before `cutoff` (max_file_age). Returns how many.
    /// `keep_unarchived`: committed files still in the archive index stay until archived
    /// (`clean_source` is on).
    fn expire(&self, cutoff: DateTime<Utc>, keep_unarchived: bool) -> SeamResult<u64>;
    /// The stream schema by version (Arrow schema JSON), and the latest version.
    fn schema(&self, version: u32) -> SeamResult<Option<String>>;
    fn latest_schema_version(&self) -> SeamResult<Option<u32>>;
    fn put_schema(&self, version: u32, schema_json: &str) -> SeamResult<()>;
    /// Small named stream settings fixed at first start (e.g. the `include_existing_files` cutoff).
    fn meta(&self, name: &str) -> SeamResult<Option<String>>;
    fn set_meta(&self, name: &str, value: &str) -> SeamResult<()>;
    /// Make the next planned batch id at least `next` (a table that already holds batches of
    /// this stream while the ledger is new: batch ids must never be reused).
    fn ensure_batch_floor(&self, next: u64) -> SeamResult<()>;
    /// The id of the last planned batch (open or committed), if any.
    fn last_batch_id(&self) -> SeamResult<Option<u64>>;
    /// One file's record.
    fn file(&self, key: &FileKey) -> SeamResult<Option<FileRecord>>;
    /// Mark a discovered or in-batch file `Skipped` with its reason, durably. An open batch
    /// holding it reads its other files only, on this attempt and every later one. Fails for a
    /// file already committed.
    fn skip_file(
        &self,
        key: &FileKey,
        reason: SkipReason,
        now: DateTime<Utc>,
    ) -> SeamResult<FileRecord>;
    /// A committed batch's leftovers are settled (orphaned data files removed): forget its
    /// staged-file names, and plans older than the newest `keep_plans`.
    fn prune_batch(&self, batch_id: u64, keep_plans: u64) -> SeamResult<()>;
    /// Make sure every committed file is in the archive index (`clean_source`). Commits
    /// index their files themselves; this indexes those committed before the index existed,
    /// once per ledger. Returns how many it indexed now.
    fn index_for_archive(&self) -> SeamResult<u64>;
    /// Committed files committed at or before `cutoff`, oldest commit first, at most `limit`,
    /// passing over the keys `skip` names (files whose archiving failed and waits to be
    /// retried). Index entries of files no longer committed are dropped on the way.
    fn due_for_archive(
        &self,
        cutoff: DateTime<Utc>,
        limit: usize,
        skip: &dyn Fn(&FileKey) -> bool,
    ) -> SeamResult<Vec<FileRecord>>;
    /// Record archive steps of committed files, all in one durable write. Steps of files no
    /// longer committed (expired, archived already) are passed over. Returns how many were
    /// recorded.
    fn record_archive(&self, steps: &[(FileKey, ArchiveStep)]) -> SeamResult<u64>;
}
