//! Committers: stage the data files of a batch and commit them atomically with the batch id.

use super::SeamResult;
use crate::plan::StagedFile;
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use async_trait::async_trait;
use std::sync::Arc;

/// The key of the state identity on commits.
pub const OWNER_KEY: &str = "landfall.state";

/// What a commit says about who made it.
/// What one compaction of the table found and did ([`Committer::compact`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compaction {
    /// The commit that holds it (`None`: nothing to do, too few small files, or dropped).
    pub version: Option<i64>,
    /// Live files before, and the small ones among them.
    pub files: u64,
    pub small_files: u64,
    pub files_removed: u64,
    pub files_added: u64,
    pub bytes_rewritten: u64,
    pub rows: u64,
    /// Dropped after losing to a commit that removed one of its files (tried again later).
    pub dropped: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchCommit {
    pub files: Vec<String>,
    /// The state identity stamped on it (commits of landfall before the stamp have none).
    pub owner: Option<String>,
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
    /// Give the attempt up without finishing it: every upload still open is abandoned (an
    /// S3 or Azure multipart upload would otherwise stay, billed and unseen, until a bucket
    /// lifecycle rule expires it). Files already complete are staged files, which the batch's
    /// cleanup removes. Best effort: nothing to report, the caller already has its error.
    async fn abort(self: Box<Self>) {}
}

#[async_trait]
pub trait Committer: Send + Sync {
    /// The table location, for messages and summaries (without a password or query string).
    fn location(&self) -> String;
    /// Create the table if it does not exist, or check that `schema` can be written to it.
    async fn prepare(&self, schema: SchemaRef, partition_by: &[String]) -> SeamResult<()>;
    /// `prepare` for a schema that may have grown: nullable columns (and nested struct fields)
    /// the table lacks are allowed, and the next commit adds them to the table's schema
    /// atomically with its data (Delta: a metaData action in the batch's commit).
    async fn evolve(&self, schema: SchemaRef, partition_by: &[String]) -> SeamResult<()>;
    /// Why the table cannot take `schema`, a stream schema whose columns were widened
    /// (`add_new_columns_with_type_widening`), if it cannot: asked before the widened schema is
    /// stored, so a table that refuses (widening disabled, a protocol the feature cannot join,
    /// a column another writer changed another way) keeps the stream's schema as it is (the
    /// values stay rescued) instead of stopping the stream at every start. `None` by default:
    /// sinks that cannot widen refuse the mode at validation.
    async fn widening_refused(&self, _schema: SchemaRef) -> SeamResult<Option<String>> {
        Ok(None)
    }
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
    /// Compact the table's small files when it holds at least `min_small_files` of them
    /// (Delta's OPTIMIZE); `None` when the sink does not compact.
    async fn compact(&self, _min_small_files: u64) -> SeamResult<Option<Compaction>> {
        Ok(None)
    }
    /// What the commit holding batch `batch_id` of this stream says about who made it: its
    /// data files (as the staged hook named them) and the state identity stamped on it, when
    /// the table can still tell (`None`: no such commit, or its log entry is gone).
    async fn batch_commit(&self, batch_id: u64) -> SeamResult<Option<BatchCommit>>;
    /// The identity of the state this committer commits for, stamped on every commit (Delta:
    /// `commitInfo` under [`OWNER_KEY`]; Parquet directory: the
    /// manifest).
    fn set_owner(&self, owner: &str);
    /// Finish the publication of a batch the table already holds (after a crash between
    /// commit and record). Idempotent; a no-op for Delta.
    async fn complete(&self, batch_id: u64) -> SeamResult<()>;
}
