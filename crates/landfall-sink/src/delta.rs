//! The Delta committer: data files through [`PartitionedWriter`], then one Delta commit per
//! batch with the Add actions and `txn { appId = stream, version = batch id, lastUpdated }`.
//!
//! Why this is exactly-once: the txn and the Adds are one atomic log entry. Before committing,
//! the table is refreshed and a batch whose id is already at or below the stream's txn version
//! is not committed again; the version returned is then the one of the commit that holds the
//! batch (found by scanning the log, [`crate::delta_log`]), not the table's latest. If our own
//! commit landed unseen (an ambiguous network failure: the PUT of the log entry landed, its
//! answer was lost, the client's retry found the version taken), deltalake's conflict check
//! rejects the commit because the winning entry carries the same app id; the committer then
//! refreshes and, finding the stream's txn at this batch, reports the batch landed
//! (`landed_before`) instead of a failure, so the batch is recorded once without a restart.
//!
//! `prepare` normalises the stream schema ([`delta_normalize`]), creates the table if there is
//! none — with no commit retries, so that of several streams racing to create it exactly one
//! writes version 0 and the others load that table — then refuses tables it cannot write
//! ([`crate::delta_protocol`]) or whose schema the stream does not fit ([`crate::delta_schema`]),
//! all before any data file is written. Data files are written in the normalised schema; batches
//! in the stream's own Arrow types are cast on the way ([`ConformingWriter`]).
//!
//! `remove_files` never deletes a file the table's latest version references: after an
//! ambiguous commit, the attempt the caller believes failed may be the one that landed.
//!
//! [`PartitionedWriter`]: crate::writer::PartitionedWriter

mod landed;

use crate::delta_protocol::{Writability, check_writable};
use crate::delta_schema::{ConformingWriter, check_fits, check_fits_growing, merge_new_fields};
use crate::error::SinkError;
use crate::writer::TableLayout;
use arrow_schema::{Schema, SchemaRef};
use async_trait::async_trait;
use deltalake::kernel::engine::arrow_conversion::{TryFromArrow, TryIntoArrow};
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, Add, MetadataExt, StructType, Transaction};
use deltalake::protocol::{DeltaOperation, OutputMode, SaveMode};
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use landfall_core::delta_types::delta_normalize;
use landfall_core::seams::{SeamResult, StagedHook};
use landfall_core::{BatchCommit, BatchWriter, Committed, Committer, StagedFile};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::Mutex;

pub struct DeltaCommitter {
    stream: String,
    uri: String,
    options: HashMap<String, String>,
    table: Mutex<Option<DeltaTable>>,
    layout: TableLayout,
    /// The normalised stream schema data files are written in (set by `prepare`).
    schema: std::sync::Mutex<Option<SchemaRef>>,
    /// The state identity stamped on commits.
    owner: std::sync::Mutex<Option<String>>,
}

impl DeltaCommitter {
    pub fn new(
        stream: &str,
        uri: &str,
        options: HashMap<String, String>,
        target_file_size: u64,
    ) -> Self {
        crate::register_handlers();
        DeltaCommitter {
            stream: stream.to_string(),
            uri: uri.to_string(),
            options,
            table: Mutex::new(None),
            layout: TableLayout::new(uri, target_file_size),
            schema: std::sync::Mutex::new(None),
            owner: std::sync::Mutex::new(None),
        }
    }

    fn open_err(&self, source: DeltaTableError) -> SinkError {
        SinkError::Open {
            location: crate::shown(&self.uri),
            source,
        }
    }

    fn builder(&self) -> Result<DeltaTableBuilder, SinkError> {
        let url = url::Url::parse(&self.uri).map_err(|e| SinkError::Location {
            location: crate::shown(&self.uri),
            reason: e.to_string(),
        })?;
        Ok(DeltaTableBuilder::from_url(url)
            .map_err(|e| self.open_err(e))?
            .with_storage_options(self.options.clone()))
    }

    /// Load the table, or `None` when no table exists at the location yet.
    async fn load(&self) -> Result<Option<DeltaTable>, SinkError> {
        let mut table = self.builder()?.build().map_err(|e| self.open_err(e))?;
        match table.load().await {
            Ok(()) => Ok(Some(table)),
            Err(DeltaTableError::NotATable(_)) => Ok(None),
            Err(e) => {
                // A missing _delta_log shows up as several error kinds across stores.
                if table.verify_deltatable_existence().await.ok() == Some(false) {
                    Ok(None)
                } else {
                    Err(self.open_err(e))
                }
            }
        }
    }

    /// The open table, refreshed to its latest version.
    async fn refreshed(
        &self,
    ) -> Result<tokio::sync::MutexGuard<'_, Option<DeltaTable>>, SinkError> {
        let mut guard = self.table.lock().await;
        match guard.as_mut() {
            Some(t) => t
                .update_incremental(None)
                .await
                .map_err(|e| self.open_err(e))?,
            None => *guard = self.load().await?,
        }
        Ok(guard)
    }

    /// Create the table from the (normalised) schema, or load the one another writer created
    /// first. No commit retries: deltalake's retry after losing the race for version 0 would
    /// commit our protocol and metaData again as version 1 over the winner's table.
    async fn create(
        &self,
        schema: &Schema,
        partition_by: &[String],
    ) -> Result<DeltaTable, SinkError> {
        let st = StructType::try_from_arrow(schema).map_err(|e| SinkError::Incompatible {
            location: crate::shown(&self.uri),
            reason: format!("cannot be stored in Delta: {e}"),
        })?;
        let created = deltalake::operations::create::CreateBuilder::new()
            .with_location(self.uri.clone())
            .with_storage_options(self.options.clone())
            .with_columns(st.fields().cloned())
            .with_partition_columns(partition_by.to_vec())
            .with_save_mode(SaveMode::Ignore)
            .with_commit_properties(CommitProperties::default().with_max_retries(0))
            .await;
        match created {
            Ok(t) => Ok(t),
            // Another writer created it first (or creation failed and there is no table).
            Err(source) => self.load().await?.ok_or_else(|| SinkError::Delta {
                location: crate::shown(&self.uri),
                op: "create table".into(),
                source: Box::new(source),
            }),
        }
    }

    /// The table's schema as Arrow reads it back.
    fn table_schema(&self, table: &DeltaTable) -> Result<Schema, SinkError> {
        Ok(self.parsed_schema(table)?.1)
    }

    /// The table's schema as Delta states it, and as Arrow reads it back.
    fn parsed_schema(&self, table: &DeltaTable) -> Result<(StructType, Schema), SinkError> {
        let incompatible = |reason: String| SinkError::Incompatible {
            location: crate::shown(&self.uri),
            reason,
        };
        let snapshot = table.snapshot().map_err(|e| self.open_err(e))?;
        let parsed = snapshot
            .metadata()
            .parse_schema()
            .map_err(|e| incompatible(e.to_string()))?;
        let arrow = (&parsed)
            .try_into_arrow()
            .map_err(|e| incompatible(format!("the table schema has no Arrow equivalent: {e}")))?;
        Ok((parsed, arrow))
    }

    /// `schema` must be normalised.
    fn check_compatible(
        &self,
        table: &DeltaTable,
        schema: &Schema,
        partition_by: &[String],
        grow: bool,
    ) -> Result<(), SinkError> {
        let incompatible = |reason: String| SinkError::Incompatible {
            location: crate::shown(&self.uri),
            reason,
        };
        let table_schema = self.table_schema(table)?;
        if grow {
            check_fits_growing(schema, &table_schema).map_err(incompatible)?;
        } else {
            check_fits(schema, &table_schema).map_err(incompatible)?;
        }
        let snapshot = table.snapshot().map_err(|e| self.open_err(e))?;
        let metadata = snapshot.metadata();
        if metadata.partition_columns()[..] != partition_by[..] {
            return Err(incompatible(format!(
                "the table is partitioned by {:?}, the stream by {:?}",
                metadata.partition_columns(),
                partition_by
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
        self.writability(&table)?;
        let checked = self.check_compatible(&table, &schema, partition_by, grow);
        *guard = Some(table);
        checked?;
        *self.schema.lock().expect("schema lock") = Some(schema.clone());
        self.layout.set(schema, partition_by);
        Ok(())
    }

    /// A metaData action adding the stream's columns the table lacks, if it lacks any.
    fn schema_growth(
        &self,
        table: &DeltaTable,
        batch_id: u64,
    ) -> Result<Option<Action>, SinkError> {
        let Some(stream) = self.schema.lock().expect("schema lock").clone() else {
            return Ok(None);
        };
        let snapshot = table.snapshot().map_err(|e| self.open_err(e))?;
        let metadata = snapshot.metadata();
        let incompatible = |reason: String| SinkError::Incompatible {
            location: crate::shown(&self.uri),
            reason,
        };
        let (have, have_arrow) = self.parsed_schema(table)?;
        // The table as it is now (another writer may have changed it since `evolve`): every
        // column the stream shares with it must still fit.
        check_fits_growing(&stream, &have_arrow).map_err(incompatible)?;
        let want = StructType::try_from_arrow(stream.as_ref())
            .map_err(|e| incompatible(format!("cannot be stored in Delta: {e}")))?;
        let Some(merged) = merge_new_fields(&have, &want) else {
            return Ok(None);
        };
        let grown = metadata
            .clone()
            .with_schema(&merged)
            .map_err(|e| SinkError::Commit {
                location: crate::shown(&self.uri),
                batch_id,
                reason: format!("new table schema: {e}"),
            })?;
        Ok(Some(Action::Metadata(grown)))
    }

    fn writability(&self, table: &DeltaTable) -> Result<Writability, SinkError> {
        let snapshot = table.snapshot().map_err(|e| self.open_err(e))?;
        check_writable(&crate::shown(&self.uri), snapshot)
    }

    fn add_action(file: &StagedFile, now_ms: i64, owner: Option<&String>) -> Action {
        Action::Add(Add {
            path: file.path.clone(),
            partition_values: file.partition_values.iter().cloned().collect(),
            size: file.size as i64,
            modification_time: now_ms,
            data_change: true,
            stats: file.stats.clone(),
            // Kept by checkpoints: the owner stays known after the commit's JSON is cleaned.
            tags: owner.map(|o| {
                std::iter::once((landfall_core::OWNER_KEY.to_string(), Some(o.clone()))).collect()
            }),
            ..Default::default()
        })
    }

    /// The data files of the table's latest version, as stored in the log (decoded).
    async fn live_paths(&self) -> Result<HashSet<String>, SinkError> {
        let guard = self.refreshed().await?;
        let Some(table) = guard.as_ref() else {
            return Ok(HashSet::new());
        };
        let snapshot = table.snapshot().map_err(|e| self.open_err(e))?;
        Ok(snapshot
            .log_data()
            .iter()
            .map(|f| f.path().into_owned())
            .collect())
    }

    /// Delete the files among `paths` the table does not reference; returns the referenced
    /// ones (kept) and how many were deleted.
    async fn remove_unreferenced(&self, paths: &[String]) -> Result<(Vec<String>, u64), SinkError> {
        let live = self.live_paths().await?;
        let (kept, doomed): (Vec<String>, Vec<String>) = paths
            .iter()
            .cloned()
            .partition(|p| live.contains(p) || live.contains(&percent_decode(p)));
        let store = crate::table_store(&self.uri, &self.options)?;
        let removed =
            crate::parquet_dir::delete_all(&crate::shown(&self.uri), store.as_ref(), &doomed)
                .await?;
        Ok((kept, removed))
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

    async fn last_committed(&self) -> SeamResult<Option<u64>> {
        let guard = self.refreshed().await?;
        match guard.as_ref() {
            Some(t) => Ok(self.txn_version(t).await?.map(|v| v as u64)),
            None => Ok(None),
        }
    }

    async fn batch_version(&self, batch_id: u64) -> SeamResult<Option<i64>> {
        let guard = self.refreshed().await?;
        match guard.as_ref() {
            Some(t) => Ok(self.find_batch(t, batch_id).await?),
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
                location: crate::shown(&self.uri),
                batch_id,
            }),
            // Unreachable: layout.writer already failed with "prepare() was not called".
            None => inner,
        })
    }

    async fn commit(&self, batch_id: u64, files: &[StagedFile]) -> SeamResult<Committed> {
        let partition_by = self.layout.partition_by()?;
        let mut guard = self.refreshed().await?;
        let table = guard.as_mut().ok_or_else(|| SinkError::Commit {
            location: crate::shown(&self.uri),
            batch_id,
            reason: "the table disappeared".into(),
        })?;
        if let Some(settled) = self.already_landed(table, batch_id).await? {
            return Ok(settled);
        }
        // Features may have been enabled since prepare; refuse before committing.
        let writability = self.writability(table)?;
        let now = chrono::Utc::now().timestamp_millis();
        let owner = self.owner.lock().expect("owner lock").clone();
        let mut actions: Vec<Action> = files
            .iter()
            .map(|f| Self::add_action(f, now, owner.as_ref()))
            .collect();
        // Columns the stream's schema gained: the table schema grows in the batch's own commit.
        if let Some(grown) = self.schema_growth(table, batch_id)? {
            actions.insert(0, grown);
        }
        let props = CommitProperties::default()
            .with_application_transaction(Transaction::new_with_last_update(
                &self.stream,
                batch_id as i64,
                Some(now),
            ))
            .with_metadata(owner.iter().map(|o| {
                (
                    landfall_core::OWNER_KEY.to_string(),
                    serde_json::Value::String(o.clone()),
                )
            }))
            .with_create_checkpoint(writability.create_checkpoint)
            .with_cleanup_expired_logs(writability.cleanup_expired_logs);
        let operation = if partition_by.is_empty() {
            DeltaOperation::StreamingUpdate {
                output_mode: OutputMode::Append,
                query_id: self.stream.clone(),
                epoch_id: batch_id as i64,
            }
        } else {
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: Some(partition_by),
                predicate: None,
            }
        };
        let snapshot = table.snapshot().map_err(|e| self.open_err(e))?;
        let built = CommitBuilder::from(props)
            .with_actions(actions)
            .build(Some(snapshot), table.log_store(), operation)
            .await;
        let finalized = match built {
            Ok(f) => f,
            Err(source) => {
                // The commit's own PUT may have landed with its answer lost: the client's retry
                // then finds the version taken, and deltalake's conflict check rejects our
                // commit for the winner's txn, which is ours. Look before calling it failed.
                if let Some(version) = self.landed_unseen(table, batch_id).await {
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
                return Err(SinkError::DeltaCommit {
                    location: crate::shown(&self.uri),
                    batch_id,
                    source: Box::new(source),
                }
                .into());
            }
        };
        let version = finalized.version();
        // The commit landed: a refresh failing now changes nothing of that (every later use
        // refreshes the table first), so it is no reason to report the batch failed.
        if let Err(e) = table.update_incremental(None).await {
            tracing::warn!(table = %crate::shown(&self.uri), batch_id, version, error = %e, "refresh after a landed commit failed; the next use refreshes again");
        }
        Ok(Committed {
            version: version as i64,
            landed_before: false,
        })
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

    async fn table_version(&self) -> SeamResult<Option<i64>> {
        let guard = self.refreshed().await?;
        Ok(guard.as_ref().and_then(|t| t.version()).map(|v| v as i64))
    }

    fn set_owner(&self, owner: &str) {
        *self.owner.lock().expect("owner lock") = Some(owner.to_string());
    }

    async fn batch_commit(&self, batch_id: u64) -> SeamResult<Option<BatchCommit>> {
        let guard = self.refreshed().await?;
        let Some(table) = guard.as_ref() else {
            return Ok(None);
        };
        let Some(version) = self.find_batch(table, batch_id).await? else {
            return Ok(None);
        };
        let bytes = table
            .log_store()
            .read_commit_entry(version as u64)
            .await
            .map_err(|e| SinkError::Delta {
                location: crate::shown(&self.uri),
                op: format!("read log entry {version}"),
                source: Box::new(e),
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
