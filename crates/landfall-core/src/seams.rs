//! The four seams the engine is written against.
//!
//! - [`Discovery`] yields candidate files and, for queues, acknowledgement tokens that are
//!   acknowledged only after the files are durably admitted.
//! - [`StateStore`] is the per-stream ledger; every call is one atomic, synced change.
//! - [`Decoder`] turns the bytes of one file into Arrow record batches under a given schema.
//! - [`Committer`] stages data files for a batch and commits them atomically with the batch id.
//!
//! Errors crossing a seam are [`SeamError`]: the implementing crates keep their own rich error
//! enums and convert at the boundary, keeping the context (stream, path, batch) in the message.

use crate::file::{FileKey, FileMeta, FileRecord, FileState, SkipReason};
use crate::plan::{BatchLimits, BatchPlan, CommitReceipt, StagedFile};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// An error crossing a seam. `retryable` tells the supervisor whether a restart can help
/// (a network error) or not (a corrupt file under FAILFAST, an incompatible table); `kind`
/// names the refusals that matter most, so callers and tests match them by kind, not text.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SeamError {
    pub message: String,
    pub retryable: bool,
    pub kind: ErrorKind,
}

/// What kind of failure crossed a seam.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// Retrying may heal it (a network error, throttling, a lock held by a dying process).
    Transient,
    /// Retrying cannot heal it, and no kind below says more.
    Fatal,
    /// The table holds a batch of the stream that this state never planned: the state is
    /// older than the table (a restored backup, a second instance, a reused stream name).
    TableAhead,
    /// The table lacks a batch this state recorded as committed (the table was replaced or
    /// restored, or the sink points elsewhere).
    TableBehind,
    /// A new, empty state facing a table that already holds the stream's batches: the state
    /// was lost, or its volume did not mount.
    StateLost,
    /// The table holds the batch, committed by another state (another instance's commit).
    ForeignCommit,
    /// The state directory cannot be used as it is (damaged, or from a newer landfall).
    StateUnusable,
}

impl SeamError {
    pub fn retryable(message: impl Into<String>) -> Self {
        SeamError::of(ErrorKind::Transient, message)
    }
    pub fn fatal(message: impl Into<String>) -> Self {
        SeamError::of(ErrorKind::Fatal, message)
    }
    /// An error of `kind`: retryable only when [`ErrorKind::Transient`].
    pub fn of(kind: ErrorKind, message: impl Into<String>) -> Self {
        SeamError {
            message: message.into(),
            retryable: kind == ErrorKind::Transient,
            kind,
        }
    }
}

pub type SeamResult<T> = Result<T, SeamError>;

/// An opaque token that acknowledges a queue message (a receipt handle, a pop receipt). Listing
/// discovery produces none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckToken(pub String);

/// One round of discovery.
#[derive(Debug, Default, Clone)]
pub struct DiscoveryBatch {
    pub files: Vec<FileMeta>,
    /// Position to store with the admitted files (listing: last key; queues: none).
    pub cursor: Option<String>,
    pub ack: Vec<AckToken>,
    /// Files the filters passed over, for the logs and metrics.
    pub filtered: u64,
    /// Listed objects that are not files to ingest at all, by reason (`empty`,
    /// `directory_marker`, `unrepresentable_key`), for the logs and metrics.
    pub passed_over: Vec<(&'static str, String)>,
    /// Objects listed (or events received) in this round, before any filter.
    pub listed: u64,
    /// The round listed only the keys after the cursor (an incremental listing).
    pub incremental: bool,
    /// This round listed the whole source (listing mode, or a notification stream's initial
    /// or backfill listing), so every file present when it started is admitted.
    pub full_listing: bool,
    /// The source has more right now (a queue returned full receives): discover again
    /// before concluding that everything available was seen.
    pub more: bool,
    /// Notification mode: what the round's queue messages held.
    pub queue: Option<QueueRound>,
}

impl DiscoveryBatch {
    /// Keep only the files `may_be_new` does not rule out.
    pub fn retain_new(&mut self, may_be_new: NewFilter<'_>) -> SeamResult<()> {
        if self.files.is_empty() {
            return Ok(());
        }
        let mut keep = may_be_new(&self.files)?.into_iter();
        self.files.retain(|_| keep.next().unwrap_or(true));
        Ok(())
    }
}

/// What one round of queue messages held, for the logs and metrics.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct QueueRound {
    pub received: u64,
    /// Messages that could not be parsed: left in the queue (its redrive policy moves them
    /// aside after its max receive count).
    pub malformed: Vec<MalformedMessage>,
    /// Well-formed messages without object events (S3 test events, SNS confirmations).
    pub ignored_messages: u64,
    /// Object-removed events (counted; the ledger keeps what was ingested).
    pub removed_events: u64,
    /// Events of other kinds, or about another bucket or container.
    pub other_events: u64,
    /// Deliveries whose visibility could not be extended: their files are admitted, but the
    /// messages are not deleted (they come back, and the ledger keeps them from duplicating).
    pub extension_failures: u64,
    /// Directories renamed into the source (Azure `DirectoryRenamed`), which name none of
    /// their files: each was listed in the round.
    pub directories_listed: u64,
}

/// A queue message that could not be parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct MalformedMessage {
    pub id: String,
    pub receive_count: u32,
    pub error: String,
}

/// Decides, for one page of listed candidates, which may be new to the stream's state (see
/// [`StateStore::may_be_new`]).
pub type NewFilter<'a> = &'a (dyn Fn(&[FileMeta]) -> SeamResult<Vec<bool>> + Send + Sync);

#[async_trait]
pub trait Discovery: Send + Sync {
    /// Find candidate files, resuming from `cursor` where the mode supports it.
    async fn discover(&self, cursor: Option<&str>) -> SeamResult<DiscoveryBatch>;
    /// Like `discover`, keeping only the candidates `may_be_new` does not rule out. Listing
    /// modes apply it page by page, so memory follows the new files, not the prefix size.
    async fn discover_new(
        &self,
        cursor: Option<&str>,
        may_be_new: NewFilter<'_>,
    ) -> SeamResult<DiscoveryBatch> {
        let mut batch = self.discover(cursor).await?;
        batch.retain_new(may_be_new)?;
        Ok(batch)
    }
    /// Acknowledge messages whose files are durably admitted. A no-op for listing.
    async fn acknowledge(&self, _tokens: Vec<AckToken>) -> SeamResult<()> {
        Ok(())
    }
}

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
    fn expire(&self, cutoff: DateTime<Utc>) -> SeamResult<u64>;
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
}

/// Decodes one file. Text formats are fed chunk by chunk and decode as they go; formats that
/// need the whole file (Parquet's footer) buffer until `finish`.
pub trait Decoder: Send {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>>;
    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>>;
    /// Rows decoded so far that did not fit the schema in permissive mode (kept, with the
    /// misfit values null; the rescued-data column will carry them). Counted, never dropped.
    fn malformed_rows(&self) -> u64 {
        0
    }
    /// Where the first malformed row starts and why (`line L (byte B): reason`), when the
    /// decoder knows.
    fn first_malformed(&self) -> Option<String> {
        None
    }
    /// The malformed records met since the last call, in detail (only when the decoder was
    /// asked to keep them: `bad_records_path`).
    fn take_malformed(&mut self) -> Vec<MalformedRecord> {
        Vec::new()
    }
    /// Rows decoded so far with a value in the rescued-data column.
    fn rescued_rows(&self) -> u64 {
        0
    }
    /// Columns the file holds and the schema lacks, as a tree of only the new parts (a new
    /// nested field `a.b` is `a STRUCT<b ...>`), when the decoder was asked to look for them.
    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        Vec::new()
    }
}

/// The key of the state identity on commits.
pub const OWNER_KEY: &str = "landfall.state";

/// What a commit says about who made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchCommit {
    pub files: Vec<String>,
    /// The state identity stamped on it (commits of landfall before the stamp have none).
    pub owner: Option<String>,
}

/// A boxed decoder is a decoder (wrappers hold `Box<dyn Decoder>`).
impl<T: Decoder + ?Sized> Decoder for Box<T> {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        (**self).push(chunk)
    }
    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        (**self).finish()
    }
    fn malformed_rows(&self) -> u64 {
        (**self).malformed_rows()
    }
    fn first_malformed(&self) -> Option<String> {
        (**self).first_malformed()
    }
    fn take_malformed(&mut self) -> Vec<MalformedRecord> {
        (**self).take_malformed()
    }
    fn rescued_rows(&self) -> u64 {
        (**self).rescued_rows()
    }
    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        (**self).new_columns()
    }
}

/// A record that did not fit in permissive mode: where it starts, why, and its text when the
/// decoder has it (cut to [`MalformedRecord::MAX_TEXT`] bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MalformedRecord {
    pub path: String,
    /// 1-based line on which the record starts.
    pub line: u64,
    /// Byte offset of the record's first byte in the file.
    pub offset: u64,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
}

impl MalformedRecord {
    /// At most this much of a record's text is kept.
    pub const MAX_TEXT: usize = 64 << 10;

    /// A record's bytes as kept text: lossy UTF-8, cut to `MAX_TEXT`.
    pub fn text_of(bytes: &[u8]) -> String {
        let cut = &bytes[..bytes.len().min(Self::MAX_TEXT)];
        String::from_utf8_lossy(cut).into_owned()
    }
}

impl std::fmt::Display for MalformedRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: line {} (byte {}): {}",
            self.path, self.line, self.offset, self.reason
        )
    }
}

/// What a commit call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// The table version holding the batch (-1 when it landed before and its log entry is
    /// gone; a Parquet directory's batch id).
    pub version: i64,
    /// The batch was already in the table; this call committed nothing.
    pub landed_before: bool,
}

/// Called with a data file's table-relative path before the file is created.
pub type StagedHook = Arc<dyn Fn(&str) -> SeamResult<()> + Send + Sync>;

/// Writes the data files of one attempt of one batch.
#[async_trait]
pub trait BatchWriter: Send {
    /// Write rows that all belong to one partition (`partition_values` in `partition_by` order).
    async fn write(
        &mut self,
        partition_values: &[Option<String>],
        batch: RecordBatch,
    ) -> SeamResult<()>;
    /// Close every open file and return what was written.
    async fn finish(self: Box<Self>) -> SeamResult<Vec<StagedFile>>;
}

#[async_trait]
pub trait Committer: Send + Sync {
    /// The table location, for messages and summaries.
    fn location(&self) -> String;
    /// Create the table if it does not exist, or check that `schema` can be written to it.
    async fn prepare(&self, schema: SchemaRef, partition_by: &[String]) -> SeamResult<()>;
    /// `prepare` for a schema that may have grown: nullable columns (and nested struct fields)
    /// the table lacks are allowed, and the next commit adds them to the table's schema
    /// atomically with its data (Delta: a metaData action in the batch's commit).
    async fn evolve(&self, schema: SchemaRef, partition_by: &[String]) -> SeamResult<()>;
    /// The highest batch id of this stream the table holds.
    async fn last_committed(&self) -> SeamResult<Option<u64>>;
    /// The table version whose commit holds batch `batch_id` of this stream (the commit's own
    /// version, not the latest), if the table can still tell (its log entry not yet cleaned).
    async fn batch_version(&self, batch_id: u64) -> SeamResult<Option<i64>>;
    /// Start writing one attempt of a batch.
    async fn writer(
        &self,
        batch_id: u64,
        attempt: u32,
        on_new_file: StagedHook,
    ) -> SeamResult<Box<dyn BatchWriter>>;
    /// Commit the staged files with the batch id, atomically. When the table already holds the
    /// batch (an earlier attempt whose outcome was not seen), nothing is committed and
    /// `landed_before` says so: the staged files are then NOT in the table, and the earlier
    /// attempt's files are.
    async fn commit(&self, batch_id: u64, files: &[StagedFile]) -> SeamResult<Committed>;
    /// Delete data files of failed attempts. Missing files are not an error.
    async fn remove_files(&self, paths: &[String]) -> SeamResult<u64>;
    /// Once batch `batch_id` is in the table: delete the files among `paths` (every attempt's
    /// staged files) that its commit does not hold. Missing files are not an error.
    async fn remove_orphans(&self, batch_id: u64, paths: &[String]) -> SeamResult<u64>;
    /// The table's current version, for summaries.
    async fn table_version(&self) -> SeamResult<Option<i64>>;
    /// What the commit holding batch `batch_id` of this stream says about who made it: its
    /// data files (as the staged hook named them) and the state identity stamped on it, when
    /// the table can still tell (`None`: no such commit, or its log entry is gone).
    async fn batch_commit(&self, batch_id: u64) -> SeamResult<Option<BatchCommit>>;
    /// The identity of the state this committer commits for, stamped on every commit (Delta:
    /// `commitInfo` and each `add`'s tags under [`OWNER_KEY`]; Parquet directory: the
    /// manifest).
    fn set_owner(&self, owner: &str);
    /// Finish the publication of a batch the table already holds (after a crash between
    /// commit and record). Idempotent; a no-op for Delta.
    async fn complete(&self, batch_id: u64) -> SeamResult<()>;
}
