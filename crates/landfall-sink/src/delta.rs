//! The Delta committer: data files through [`PartitionedWriter`], then one Delta commit per
//! batch with the Add actions and `txn { appId = stream, version = batch id, lastUpdated }`.
//!
//! Why this is exactly-once: the txn and the Adds are one atomic log entry. Before committing,
//! the table is refreshed and a batch whose id is already at or below the stream's txn version
//! is not committed again; the version returned is then the one of the commit that holds the
//! batch (found by scanning the log, [`crate::delta_log`]), not the table's latest. The log
//! entry is written put-if-absent: a commit that loses its version (to another writer, or to
//! our own PUT whose answer was lost and whose retry found the version taken) refreshes and
//! looks for the stream's txn before trying again; finding it at this batch, it reports the
//! batch landed (`landed_before`) instead of a failure, so the batch is recorded once without
//! a restart. Right after our own commit the next one starts from its snapshot without
//! listing the log (one HEAD checks the log did not go backwards); a newer commit by anyone
//! makes the put conflict, which refreshes. The Delta work itself is delta_kernel's
//! ([`kernel`]).
//!
//! `prepare` normalises the stream schema ([`delta_normalize`]), creates the table if there is
//! none — version 0 is written put-if-absent, so that of several streams racing to create it
//! exactly one writes it and the others load that table — then refuses tables it cannot write
//! ([`crate::delta_protocol`]) or whose schema the stream does not fit ([`crate::delta_schema`]),
//! all before any data file is written. Data files are written in the normalised schema; batches
//! in the stream's own Arrow types are cast on the way ([`ConformingWriter`]).
//!
//! `remove_files` never deletes a file the table's latest version references: after an
//! ambiguous commit, the attempt the caller believes failed may be the one that landed.
//!
//! [`PartitionedWriter`]: crate::writer::PartitionedWriter

pub(crate) mod column_mapping;
pub mod compact;
pub(crate) mod kernel;
mod landed;
mod log_cleanup;
mod row_ids;
pub(crate) mod stats_struct;
pub(crate) mod type_change;
pub mod vacuum;

use crate::delta_protocol::{Writability, check_writable};
use crate::delta_schema::{
    ConformingWriter, check_fits, check_fits_growing, check_fits_widening, new_fields,
};
use crate::error::SinkError;
use crate::writer::TableLayout;
use arrow_schema::{Schema, SchemaRef};
use async_trait::async_trait;
use delta_kernel::SnapshotRef;
use kernel::{Append, Attempt, Kernel};
use landfall_core::delta_types::delta_normalize;
use landfall_core::seams::{SeamResult, StagedHook};
use landfall_core::{BatchCommit, BatchWriter, Committed, Committer, StagedFile};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::{Mutex, MutexGuard, OnceCell};

/// Commits that lose the race for a log version in a row before the batch is given back to
/// the stream's retry (each loss is another writer's commit: progress, not a fault).
const MAX_CONFLICTS: u32 = 20;

/// Delta's default `delta.checkpointInterval`.
const CHECKPOINT_INTERVAL: u64 = 100;

pub struct DeltaCommitter {
    stream: String,
    uri: String,
    options: HashMap<String, String>,
    kernel: OnceCell<Kernel>,
    /// The table's latest snapshot as last seen (`None`: no table yet).
    table: Mutex<Option<SnapshotRef>>,
    /// `table` is the snapshot our own last commit returned, and no call failed since: the
    /// next commit starts from it without listing the log (see `commit`).
    own_latest: std::sync::atomic::AtomicBool,
    /// The stream's txn in the version our own last commit made: (version, batch id).
    own_txn: std::sync::Mutex<Option<(u64, i64)>>,
    layout: TableLayout,
    /// The normalised stream schema data files are written in (set by `prepare`).
    schema: std::sync::Mutex<Option<SchemaRef>>,
    /// The state identity stamped on commits.
    owner: std::sync::Mutex<Option<String>>,
    /// The table's column mapping (set by `prepare`): data files are written in its physical
    /// columns.
    physical: std::sync::Mutex<Option<Arc<column_mapping::Physical>>>,
    /// The partition columns by their logical names (the layout holds the physical ones), as
    /// `commitInfo` names them.
    partition_by: std::sync::Mutex<Vec<String>>,
    /// `add_new_columns_with_type_widening`: `evolve` widens the table's columns the stream's
    /// schema widened ([`type_change`]).
    type_widening: bool,
}

impl DeltaCommitter {
    pub fn new(
        stream: &str,
        uri: &str,
        options: HashMap<String, String>,
        target_file_size: u64,
    ) -> Self {
        DeltaCommitter {
            stream: stream.to_string(),
            uri: uri.to_string(),
            options,
            kernel: OnceCell::new(),
            table: Mutex::new(None),
            own_latest: std::sync::atomic::AtomicBool::new(false),
            own_txn: std::sync::Mutex::new(None),
            layout: TableLayout::new(uri, target_file_size),
            schema: std::sync::Mutex::new(None),
            owner: std::sync::Mutex::new(None),
            physical: std::sync::Mutex::new(None),
            partition_by: std::sync::Mutex::new(Vec::new()),
            type_widening: false,
        }
    }

    /// Let `evolve` widen the table's columns to the stream's wider types where Delta's type
    /// widening allows (`schema_evolution_mode = "add_new_columns_with_type_widening"`).
    pub fn with_type_widening(mut self, on: bool) -> Self {
        self.type_widening = on;
        self
    }

    /// The kernel's engine, started on first use (inside the runtime that will drive it).
    async fn kernel(&self) -> Result<&Kernel, SinkError> {
        self.kernel
            .get_or_try_init(|| async { Kernel::open(&self.uri, &self.options) })
            .await
    }

    /// The table's snapshot, refreshed to its latest version (`None`: no table yet).
    async fn refreshed(&self) -> Result<MutexGuard<'_, Option<SnapshotRef>>, SinkError> {
        let k = self.kernel().await?;
        let mut guard = self.table.lock().await;
        *guard = match guard.take() {
            Some(s) => Some(k.refresh(s).await?),
            None => k.load().await?,
        };
        Ok(guard)
    }

    /// Create the table from the (normalised) schema, or load the one another writer created
    /// first: of several streams racing to create it, exactly one writes version 0 (a
    /// put-if-absent) and the others load that table.
    async fn create(
        &self,
        schema: &Schema,
        partition_by: &[String],
    ) -> Result<SnapshotRef, SinkError> {
        // The kernel refuses these names with an error that looks transient; say why now.
        crate::delta_schema::plain_schema_names(schema).map_err(|e| self.incompatible(e))?;
        let k = self.kernel().await?;
        if let Some(created) = k.create(schema, partition_by).await? {
            return Ok(created);
        }
        k.load().await?.ok_or_else(|| SinkError::Commit {
            location: crate::shown(&self.uri),
            batch_id: 0,
            reason: "the table could not be created and there is none: its _delta_log holds \
                     files but no commit"
                .into(),
        })
    }

    fn incompatible(&self, reason: String) -> SinkError {
        SinkError::Incompatible {
            location: crate::shown(&self.uri),
            reason,
        }
    }

    /// The table's schema as Arrow reads it back.
    fn table_schema(&self, table: &SnapshotRef) -> Result<Schema, SinkError> {
        kernel::to_arrow(&table.schema()).map_err(|e| {
            self.incompatible(format!("the table schema has no Arrow equivalent: {e}"))
        })
    }

    /// `schema` must be normalised.
    fn check_compatible(
        &self,
        table: &SnapshotRef,
        schema: &Schema,
        partition_by: &[String],
        grow: bool,
    ) -> Result<(), SinkError> {
        let table_schema = self.table_schema(table)?;
        if grow && self.type_widening {
            check_fits_widening(schema, &table_schema).map_err(|e| self.incompatible(e))?;
        } else if grow {
            check_fits_growing(schema, &table_schema).map_err(|e| self.incompatible(e))?;
        } else {
            check_fits(schema, &table_schema).map_err(|e| self.incompatible(e))?;
        }
        let partitioned = table.table_configuration().metadata().partition_columns();
        if partitioned[..] != partition_by[..] {
            return Err(self.incompatible(format!(
                "the table is partitioned by {partitioned:?}, the stream by {partition_by:?}"
            )));
        }
        Ok(())
    }

    /// `prepare`, or with `grow` `evolve`: nullable columns the table lacks are allowed, and
    /// the next commit adds them.
    async fn prepare_with(
        &self,
        schema: SchemaRef,
        partition_by: &[String],
        grow: bool,
    ) -> SeamResult<()> {
        // Idempotent: the engine may already have normalised it.
        let schema = Arc::new(delta_normalize(&schema));
        let mut guard = self.refreshed().await?;
        let table = match guard.take() {
            Some(t) => t,
            None => self.create(&schema, partition_by).await?,
        };
        *guard = Some(table.clone());
        self.writability(&table)?;
        self.check_compatible(&table, &schema, partition_by, grow)?;
        let mut table = table;
        if grow && self.type_widening {
            // The data files are written in the widened types: the table's columns change
            // first, in a commit of their own.
            table = self.widen_columns(table, &schema).await?;
            *guard = Some(table.clone());
        }
        if grow
            && column_mapping::Physical::of(&table)
                .ok()
                .flatten()
                .is_some()
        {
            // The new columns' physical names and ids come from the commit that adds them,
            // and the data files need them before they are written: add them first.
            table = self.add_mapped_columns(table, &schema).await?;
            *guard = Some(table.clone());
        }
        // Columns the table holds wider (widened by another writer) are written in its types;
        // the stream's widening marks stay out of the table and its files.
        let schema = Arc::new(landfall_core::type_widening::without_marks(
            &crate::delta_schema::raised_to_table(&schema, &self.table_schema(&table)?),
        ));
        let physical = column_mapping::Physical::of(&table)
            .map_err(|e| self.incompatible(format!("its column mapping: {e}")))?
            .map(Arc::new);
        match &physical {
            Some(p) => {
                let names = p
                    .partition_names(partition_by)
                    .map_err(|e| self.incompatible(e))?;
                self.layout.set(p.schema(), &names);
            }
            None => self.layout.set(schema.clone(), partition_by),
        }
        *self.physical.lock().expect("physical lock") = physical;
        *self.partition_by.lock().expect("partition lock") = partition_by.to_vec();
        *self.schema.lock().expect("schema lock") = Some(schema);
        Ok(())
    }

    /// Add the stream's columns a column-mapped table lacks, in a commit of their own (the
    /// kernel assigns physical names and ids); returns the table after it. Another writer's
    /// commit in between refreshes and looks again; columns already there are not added twice.
    async fn add_mapped_columns(
        &self,
        mut table: SnapshotRef,
        schema: &Schema,
    ) -> Result<SnapshotRef, SinkError> {
        let k = self.kernel().await?;
        // The kernel keeps ids and physical names it is given: a stream field carrying some
        // (read from another table's files) could take a dropped column's identity.
        let clean = column_mapping::without_mapping_metadata(schema);
        let want = kernel::to_kernel(&clean)
            .map_err(|e| self.incompatible(format!("cannot be stored in Delta: {e}")))?;
        for _ in 0..MAX_CONFLICTS {
            let grown = new_fields(&table.schema(), &want);
            if grown.is_empty() {
                return Ok(table);
            }
            let owner = self.owner.lock().expect("owner lock").clone();
            match k.add_columns(&table, grown, owner).await {
                Ok(Attempt::Committed { version, snapshot }) => {
                    tracing::info!(table = %crate::shown(&self.uri), version, "columns added to the column-mapped table before the batch's files are written");
                    return Ok(snapshot);
                }
                Ok(Attempt::Conflicted { .. }) => table = k.refresh(table).await?,
                Err(e) => return Err(k.kernel_err("add columns", e)),
            }
        }
        Err(SinkError::Io {
            location: crate::shown(&self.uri),
            op: "add columns",
            reason: format!("lost the race for the next version {MAX_CONFLICTS} times"),
        })
    }

    /// Widen the table's columns that the stream's schema widened, in a commit of their own
    /// ([`type_change`]); returns the table after it. Another writer's commit in between
    /// refreshes and looks again (it may have widened them already).
    async fn widen_columns(
        &self,
        mut table: SnapshotRef,
        schema: &Schema,
    ) -> Result<SnapshotRef, SinkError> {
        let k = self.kernel().await?;
        for round in 0..MAX_CONFLICTS {
            let changes = type_change::widenings(schema, &self.table_schema(&table)?);
            if changes.is_empty() {
                return Ok(table);
            }
            // Features enabled since the last look may forbid it.
            self.writability(&table)?;
            let owner = self.owner.lock().expect("owner lock").clone();
            match type_change::commit(k, &table, &changes, owner.as_deref()).await? {
                Attempt::Committed { version, snapshot } => {
                    let columns: Vec<String> = changes
                        .iter()
                        .map(type_change::Widening::describe)
                        .collect();
                    tracing::warn!(table = %crate::shown(&self.uri), version, columns = %columns.join(", "), "columns widened (typeWidening) before the batch's files are written");
                    landfall_core::failpoint::hit("after_type_change");
                    table = snapshot;
                }
                Attempt::Conflicted { .. } => {
                    conflict_backoff(round).await;
                    table = k.refresh(table).await?;
                }
            }
        }
        Err(SinkError::Io {
            location: crate::shown(&self.uri),
            op: "widen columns",
            reason: format!("lost the race for the next version {MAX_CONFLICTS} times"),
        })
    }

    /// On a column-mapped table, the batch's files were written in the physical columns
    /// `prepare` saw. A column dropped, renamed or added since (another writer's ALTER TABLE)
    /// changes them: committing would leave the files' values where no reader looks. The
    /// attempt fails, retryably: the worker starts again, `prepare` reads the mapping anew and
    /// the batch is written again.
    fn check_mapping(&self, table: &SnapshotRef, batch_id: u64) -> Result<(), SinkError> {
        let written = self.physical.lock().expect("physical lock").clone();
        let now = column_mapping::Physical::of(table)
            .map_err(|e| self.incompatible(format!("its column mapping: {e}")))?;
        let same = match (&written, &now) {
            (None, None) => true,
            (Some(a), Some(b)) => a.schema() == b.schema(),
            _ => false,
        };
        if same {
            return Ok(());
        }
        Err(SinkError::Commit {
            location: crate::shown(&self.uri),
            batch_id,
            reason: "the table's columns changed (added, dropped or renamed by another writer) while the batch's files were written in its column mapping; the batch is written again with the table's new mapping".into(),
        })
    }

    /// The stream's columns the table lacks (added by the batch's commit).
    fn schema_growth(
        &self,
        table: &SnapshotRef,
        batch_id: u64,
    ) -> Result<Vec<(Vec<String>, delta_kernel::schema::StructField)>, SinkError> {
        let Some(stream) = self.schema.lock().expect("schema lock").clone() else {
            return Ok(Vec::new());
        };
        // The table as it is now (another writer may have changed it since `evolve`): every
        // column the stream shares with it must still fit.
        let now = self.table_schema(table)?;
        check_fits_growing(&stream, &now).map_err(|e| self.incompatible(e))?;
        if crate::delta_schema::raised_to_table(&stream, &now).fields() != stream.fields() {
            // Widened by another writer since `prepare`: the files hold the narrower type.
            // Write the batch again, in the table's new types.
            return Err(SinkError::Commit {
                location: crate::shown(&self.uri),
                batch_id,
                reason: "a column of the table was widened by another writer while the batch's files were written; the batch is written again in the table's new types".into(),
            });
        }
        let want = kernel::to_kernel(&stream)
            .map_err(|e| self.incompatible(format!("cannot be stored in Delta: {e}")))?;
        let grown = new_fields(&table.schema(), &want);
        if !grown.is_empty() {
            // A schema change re-checks every name of the table, old ones included.
            crate::delta_schema::plain_schema_names(&self.table_schema(table)?).map_err(|e| {
                self.incompatible(format!(
                    "new columns cannot be added to this table: its {e}"
                ))
            })?;
        }
        Ok(grown)
    }

    fn writability(&self, table: &SnapshotRef) -> Result<Writability, SinkError> {
        check_writable(&crate::shown(&self.uri), table)
    }

    /// After a commit: a checkpoint every `delta.checkpointInterval` versions (counting the
    /// creation, as deltalake did: versions 99, 199, ...), then expired log entries cleaned.
    /// Neither can undo the commit, so failures are logged, not returned. Returns the snapshot
    /// to go on from: after a checkpoint, the one reading from it (older entries may be gone).
    async fn after_commit(
        &self,
        k: &Kernel,
        table: SnapshotRef,
        writability: &Writability,
    ) -> SnapshotRef {
        let props = table.table_properties();
        let interval = props
            .checkpoint_interval
            .map(|n| n.get())
            .unwrap_or(CHECKPOINT_INTERVAL);
        if !(table.version() + 1).is_multiple_of(interval) {
            return table;
        }
        let checkpointed = match k.checkpoint(&table).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(table = %crate::shown(&self.uri), version = table.version(), error = %e, "checkpoint failed; the next interval tries again");
                return table;
            }
        };
        let props = checkpointed.table_properties();
        if !writability.cleanup_expired_logs || props.enable_expired_log_cleanup == Some(false) {
            return checkpointed;
        }
        let retention = props
            .log_retention_duration
            .unwrap_or(log_cleanup::DEFAULT_LOG_RETENTION);
        match log_cleanup::clean_expired(k, retention).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(table = %crate::shown(&self.uri), removed = n, "expired log entries cleaned")
            }
            Err(e) => {
                tracing::warn!(table = %crate::shown(&self.uri), error = %e, "log cleanup failed; the next checkpoint tries again")
            }
        }
        checkpointed
    }

    async fn remove_unreferenced(&self, paths: &[String]) -> Result<(Vec<String>, u64), SinkError> {
        if paths.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let referenced = self.referenced_paths().await?;
        let (kept, doomed): (Vec<String>, Vec<String>) = paths
            .iter()
            .cloned()
            .partition(|p| referenced.contains(p) || referenced.contains(&percent_decode(p)));
        let store = crate::table_store(&self.uri, &self.options)?;
        let removed =
            crate::parquet_dir::delete_all(&crate::shown(&self.uri), store.as_ref(), &doomed)
                .await?;
        Ok((kept, removed))
    }

    /// Every data file a version still in the log references: the latest version's, and those
    /// of every `remove` in the log (a compaction removed them; older versions still read
    /// them), as stored and decoded.
    async fn referenced_paths(&self) -> Result<HashSet<String>, SinkError> {
        let guard = self.refreshed().await?;
        let Some(table) = guard.clone() else {
            return Ok(HashSet::new());
        };
        drop(guard);
        let k = self.kernel().await?;
        let (live, removed) = vacuum::referenced(k, &table, i64::MIN).await?;
        Ok(live.paths.into_iter().chain(removed.paths).collect())
    }
}

#[async_trait]
impl Committer for DeltaCommitter {
    fn location(&self) -> String {
        crate::shown(&self.uri)
    }

    async fn prepare(&self, schema: SchemaRef, partition_by: &[String]) -> SeamResult<()> {
        self.prepare_with(schema, partition_by, false).await
    }

    async fn evolve(&self, schema: SchemaRef, partition_by: &[String]) -> SeamResult<()> {
        self.prepare_with(schema, partition_by, true).await
    }

    async fn widening_refused(&self, schema: SchemaRef) -> SeamResult<Option<String>> {
        if !self.type_widening {
            return Ok(Some(
                "the stream's schema_evolution_mode does not widen columns".into(),
            ));
        }
        let guard = self.refreshed().await?;
        let Some(table) = guard.clone() else {
            return Ok(None);
        };
        drop(guard);
        if let Err(e) = self.writability(&table) {
            return Ok(Some(e.to_string()));
        }
        if let Some(why) = type_change::refusal(&table) {
            return Ok(Some(why));
        }
        // The widened types against the table's as they are now (another writer may have
        // changed a column another way).
        let schema = delta_normalize(&schema);
        Ok(check_fits_widening(&schema, &self.table_schema(&table)?).err())
    }

    async fn last_committed(&self) -> SeamResult<Option<u64>> {
        let table = self.refreshed().await?.clone();
        match table {
            Some(t) => Ok(self
                .kernel()
                .await?
                .txn_version(&t, &self.stream)
                .await?
                .map(|v| v as u64)),
            None => Ok(None),
        }
    }

    async fn batch_version(&self, batch_id: u64) -> SeamResult<Option<i64>> {
        let table = self.refreshed().await?.clone();
        match table {
            Some(t) => Ok(self.find_batch(&t, batch_id).await?),
            None => Ok(None),
        }
    }

    async fn writer(
        &self,
        batch_id: u64,
        attempt: u32,
        on_new_file: StagedHook,
    ) -> SeamResult<Box<dyn BatchWriter>> {
        let store = crate::table_store(&self.uri, &self.options)?;
        let inner =
            Box::new(
                self.layout
                    .writer(store, batch_id, attempt, String::new(), on_new_file)?,
            );
        let schema = self.schema.lock().expect("schema lock").clone();
        Ok(match schema {
            Some(schema) => Box::new(ConformingWriter {
                inner,
                schema,
                physical: self.physical.lock().expect("physical lock").clone(),
                location: crate::shown(&self.uri),
                batch_id,
            }),
            // Unreachable: layout.writer already failed with "prepare() was not called".
            None => inner,
        })
    }

    async fn commit(&self, batch_id: u64, files: &[StagedFile]) -> SeamResult<Committed> {
        // Fails with "prepare() was not called" before anything else.
        self.layout.partition_by()?;
        let partition_by = self.partition_by.lock().expect("partition lock").clone();
        let k = self.kernel().await?;
        // Right after our own commit, its snapshot is the table's latest unless another writer
        // committed since, and then the put-if-absent of the next version fails as a conflict,
        // which refreshes and decides again. So the common case (one writer, batch after batch)
        // commits without listing the log: on a file system a listing costs one stat per log
        // entry, however old.
        use std::sync::atomic::Ordering;
        let mut guard = if self.own_latest.swap(false, Ordering::SeqCst) {
            let guard = self.table.lock().await;
            // Unless the log went backwards under us (the table deleted or re-created): then
            // our version is gone, and the next version's put could land in another table's
            // log, after a gap. One HEAD, instead of a listing.
            match guard.as_ref() {
                Some(t) if k.has_commit(t.version()).await => guard,
                _ => {
                    drop(guard);
                    self.refreshed().await?
                }
            }
        } else {
            self.refreshed().await?
        };
        let mut lost_race = false;
        for round in 0..MAX_CONFLICTS {
            let table = guard.clone().ok_or_else(|| SinkError::Commit {
                location: crate::shown(&self.uri),
                batch_id,
                reason: "the table disappeared".into(),
            })?;
            if let Some(settled) = self.already_landed(&table, batch_id).await? {
                if lost_race {
                    // Our PUT landed and its answer was lost: the store client's retry of it
                    // found the version taken, by our own entry.
                    tracing::warn!(
                        table = %crate::shown(&self.uri),
                        batch_id,
                        version = settled.version,
                        "the commit landed though its answer was lost; recorded once"
                    );
                }
                return Ok(settled);
            }
            // Features may have been enabled since prepare; refuse before committing.
            let writability = self.writability(&table)?;
            self.check_mapping(&table, batch_id)?;
            let append = Append {
                stream: self.stream.clone(),
                batch_id: batch_id as i64,
                owner: self.owner.lock().expect("owner lock").clone(),
                files: files.to_vec(),
                now_ms: chrono::Utc::now().timestamp_millis(),
                partition_by: partition_by.clone(),
                // Columns the stream's schema gained: the table grows in the batch's commit.
                new_fields: self.schema_growth(&table, batch_id)?,
            };
            match k.append(&table, append).await {
                Ok(Attempt::Committed { version, snapshot }) => {
                    *self.own_txn.lock().expect("txn lock") =
                        Some((version as u64, batch_id as i64));
                    *guard = Some(self.after_commit(k, snapshot, &writability).await);
                    self.own_latest.store(true, Ordering::SeqCst);
                    return Ok(Committed {
                        version,
                        landed_before: false,
                    });
                }
                Ok(Attempt::Conflicted { version }) => {
                    lost_race = true;
                    // Another commit took the version (or our own, its answer lost): the next
                    // round refreshes and looks for our txn before committing again.
                    tracing::debug!(table = %crate::shown(&self.uri), batch_id, version, "lost the race for a log version; deciding again");
                    conflict_backoff(round).await;
                    *guard = Some(k.refresh(table).await?);
                }
                Err(source) => {
                    // The commit's own PUT may have landed with its answer lost. Look before
                    // calling it failed.
                    drop(guard);
                    if let Some(version) = self.landed_unseen(batch_id).await {
                        tracing::warn!(
                            table = %crate::shown(&self.uri),
                            batch_id,
                            version,
                            error = %source,
                            "the commit landed though its answer was lost; recorded once"
                        );
                        return Ok(Committed {
                            version,
                            landed_before: true,
                        });
                    }
                    return Err(k
                        .kernel_err(&format!("commit of batch {batch_id} failed"), source)
                        .into());
                }
            }
        }
        // The last lost race may have been our own landed PUT: look once more.
        if let Some(table) = guard.clone()
            && let Some(settled) = self.already_landed(&table, batch_id).await?
        {
            return Ok(settled);
        }
        Err(SinkError::Commit {
            location: crate::shown(&self.uri),
            batch_id,
            reason: format!(
                "other writers took the next log version {MAX_CONFLICTS} times in a row"
            ),
        }
        .into())
    }

    async fn remove_files(&self, paths: &[String]) -> SeamResult<u64> {
        // Never delete a file the table references, whatever the caller believes: after an
        // ambiguous commit the "failed" attempt's files may be the live ones.
        let (kept, removed) = self.remove_unreferenced(paths).await?;
        if !kept.is_empty() {
            tracing::warn!(
                table = %crate::shown(&self.uri),
                files = ?kept,
                "not removing data files the table references"
            );
        }
        Ok(removed)
    }

    async fn remove_orphans(&self, _batch_id: u64, paths: &[String]) -> SeamResult<u64> {
        // The files the table references are the landed attempt's: keeping them is expected.
        Ok(self.remove_unreferenced(paths).await?.1)
    }

    async fn compact(&self, min_small_files: u64) -> SeamResult<Option<landfall_core::Compaction>> {
        let mut opts = compact::CompactOptions::for_target(self.layout.target_file_size());
        opts.min_small_files = min_small_files;
        Ok(Some(DeltaCommitter::compact(self, &opts).await?))
    }

    async fn table_version(&self) -> SeamResult<Option<i64>> {
        let guard = self.refreshed().await?;
        Ok(guard.as_ref().map(|t| t.version() as i64))
    }

    fn set_owner(&self, owner: &str) {
        *self.owner.lock().expect("owner lock") = Some(owner.to_string());
    }

    async fn batch_commit(&self, batch_id: u64) -> SeamResult<Option<BatchCommit>> {
        let table = self.refreshed().await?.clone();
        let Some(table) = table else {
            return Ok(None);
        };
        let Some(version) = self.find_batch(&table, batch_id).await? else {
            return Ok(None);
        };
        let k = self.kernel().await?;
        let bytes = crate::delta_log::read_commit(k.store.as_ref(), &k.path("_delta_log"), version)
            .await
            .map_err(|e| {
                k.kernel_err(
                    &format!("read log entry {version}"),
                    delta_kernel::KernelError::ObjectStore(e),
                )
            })?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let (adds, owner) =
            crate::delta_log::adds_in_commit(&bytes).map_err(|reason| SinkError::Log {
                location: crate::shown(&self.uri),
                version,
                reason,
            })?;
        Ok(Some(BatchCommit {
            files: adds.iter().map(|p| percent_decode(p)).collect(),
            owner,
        }))
    }

    async fn complete(&self, _batch_id: u64) -> SeamResult<()> {
        Ok(())
    }
}

/// After the `round`th lost race for a log version in a row (from the second on): writers
/// racing for every version (or S3 answering 409 to a conditional write still in flight) get
/// out of each other's way, jittered, before the refresh, so the snapshot is fresh when the
/// commit is tried again.
async fn conflict_backoff(round: u32) {
    if round == 0 {
        return;
    }
    let cap = 10u64 << round.min(6);
    let jitter = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos(),
    ) % cap;
    tokio::time::sleep(std::time::Duration::from_millis(cap / 2 + jitter / 2)).await;
}

/// `%XX` escapes decoded (how the log's paths are compared with staged names).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl std::fmt::Debug for DeltaCommitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaCommitter")
            .field("stream", &self.stream)
            .field("uri", &self.uri)
            .finish()
    }
}
