//! The Delta committer: data files through [`PartitionedWriter`], then one Delta commit per
//! batch with the Add actions and `txn { appId = stream, version = batch id }`.
//!
//! Why this is exactly-once: the txn and the Adds are one atomic log entry. Before committing,
//! the table is refreshed and a batch whose id is already at or below the stream's txn version
//! is not committed again. If our own earlier attempt won a race we could not see (an
//! ambiguous network failure), deltalake's conflict check rejects the retry because the
//! winning commit carries the same app id (`ConcurrentTransaction`), and the next refresh sees
//! the txn.

use crate::error::SinkError;
use crate::writer::TableLayout;
use arrow_schema::{Schema, SchemaRef};
use async_trait::async_trait;
use deltalake::kernel::engine::arrow_conversion::{TryFromArrow, TryIntoArrow};
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, Add, StructType, Transaction};
use deltalake::protocol::{DeltaOperation, OutputMode, SaveMode};
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError};
use landfall_core::seams::{SeamResult, StagedHook};
use landfall_core::{BatchWriter, Committer, StagedFile};
use std::collections::HashMap;
use tokio::sync::Mutex;

pub struct DeltaCommitter {
    stream: String,
    uri: String,
    options: HashMap<String, String>,
    table: Mutex<Option<DeltaTable>>,
    layout: TableLayout,
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
        }
    }

    fn open_err(&self, source: DeltaTableError) -> SinkError {
        SinkError::Open {
            location: self.uri.clone(),
            source,
        }
    }

    fn builder(&self) -> Result<DeltaTableBuilder, SinkError> {
        let url = url::Url::parse(&self.uri).map_err(|e| SinkError::Location {
            location: self.uri.clone(),
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

    async fn create(
        &self,
        schema: &Schema,
        partition_by: &[String],
    ) -> Result<DeltaTable, SinkError> {
        let st = StructType::try_from_arrow(schema).map_err(|e| SinkError::Incompatible {
            location: self.uri.clone(),
            reason: e.to_string(),
        })?;
        let table = deltalake::operations::create::CreateBuilder::new()
            .with_location(self.uri.clone())
            .with_storage_options(self.options.clone())
            .with_columns(st.fields().cloned())
            .with_partition_columns(partition_by.to_vec())
            .with_save_mode(SaveMode::Ignore)
            .await;
        match table {
            Ok(t) => Ok(t),
            // Another stream created it first.
            Err(_) => self.load().await?.ok_or_else(|| SinkError::Io {
                location: self.uri.clone(),
                op: "create table",
                reason: "creation failed and no table exists".into(),
            }),
        }
    }

    fn check_compatible(
        &self,
        table: &DeltaTable,
        schema: &Schema,
        partition_by: &[String],
    ) -> Result<(), SinkError> {
        let snapshot = table.snapshot().map_err(|e| self.open_err(e))?;
        let metadata = snapshot.metadata();
        let table_schema: Schema =
            (&metadata
                .parse_schema()
                .map_err(|e| SinkError::Incompatible {
                    location: self.uri.clone(),
                    reason: e.to_string(),
                })?)
                .try_into_arrow()
                .map_err(|e| SinkError::Incompatible {
                    location: self.uri.clone(),
                    reason: e.to_string(),
                })?;
        let incompatible = |reason: String| SinkError::Incompatible {
            location: self.uri.clone(),
            reason,
        };
        for f in schema.fields() {
            match table_schema.field_with_name(f.name()) {
                Ok(t) if t.data_type() == f.data_type() => {}
                Ok(t) => {
                    return Err(incompatible(format!(
                        "column `{}` is {} in the table but {} in the stream",
                        f.name(),
                        landfall_core::ddl::type_to_ddl(t.data_type()),
                        landfall_core::ddl::type_to_ddl(f.data_type())
                    )));
                }
                Err(_) => {
                    return Err(incompatible(format!(
                        "column `{}` is not in the table",
                        f.name()
                    )));
                }
            }
        }
        for t in table_schema.fields() {
            if schema.field_with_name(t.name()).is_err() && !t.is_nullable() {
                return Err(incompatible(format!(
                    "NOT NULL column `{}` of the table is not produced by the stream",
                    t.name()
                )));
            }
        }
        if metadata.partition_columns()[..] != partition_by[..] {
            return Err(incompatible(format!(
                "the table is partitioned by {:?}, the stream by {:?}",
                metadata.partition_columns(),
                partition_by
            )));
        }
        Ok(())
    }

    fn add_action(file: &StagedFile, now_ms: i64) -> Action {
        Action::Add(Add {
            path: file.path.clone(),
            partition_values: file.partition_values.iter().cloned().collect(),
            size: file.size as i64,
            modification_time: now_ms,
            data_change: true,
            stats: file.stats.clone(),
            ..Default::default()
        })
    }

    async fn txn_version(&self, table: &DeltaTable) -> Result<Option<i64>, SinkError> {
        let snapshot = table.snapshot().map_err(|e| self.open_err(e))?;
        snapshot
            .transaction_version(table.log_store().as_ref(), &self.stream)
            .await
            .map_err(|e| self.open_err(e))
    }
}

#[async_trait]
impl Committer for DeltaCommitter {
    fn location(&self) -> String {
        self.uri.clone()
    }

    async fn prepare(&self, schema: SchemaRef, partition_by: &[String]) -> SeamResult<()> {
        let mut guard = self.refreshed().await?;
        let table = match guard.take() {
            Some(t) => t,
            None => self.create(&schema, partition_by).await?,
        };
        self.check_compatible(&table, &schema, partition_by)?;
        *guard = Some(table);
        self.layout.set(schema, partition_by);
        Ok(())
    }

    async fn last_committed(&self) -> SeamResult<Option<u64>> {
        let guard = self.refreshed().await?;
        match guard.as_ref() {
            Some(t) => Ok(self.txn_version(t).await?.map(|v| v as u64)),
            None => Ok(None),
        }
    }

    async fn batch_version(&self, _batch_id: u64) -> SeamResult<Option<i64>> {
        // Placeholder until the log scan lands (issue 5): unknown.
        Ok(None)
    }

    async fn writer(
        &self,
        batch_id: u64,
        attempt: u32,
        on_new_file: StagedHook,
    ) -> SeamResult<Box<dyn BatchWriter>> {
        let store = crate::table_store(&self.uri, &self.options)?;
        Ok(Box::new(self.layout.writer(
            store,
            batch_id,
            attempt,
            String::new(),
            on_new_file,
        )?))
    }

    async fn commit(&self, batch_id: u64, files: &[StagedFile]) -> SeamResult<i64> {
        let partition_by = self.layout.partition_by()?;
        let mut guard = self.refreshed().await?;
        let table = guard.as_mut().ok_or_else(|| SinkError::Commit {
            location: self.uri.clone(),
            batch_id,
            reason: "the table disappeared".into(),
        })?;
        if let Some(v) = self.txn_version(table).await?
            && v >= batch_id as i64
        {
            // Already landed (an earlier attempt whose outcome we did not see).
            return Ok(table.version().unwrap_or_default() as i64);
        }
        let now = chrono::Utc::now().timestamp_millis();
        let actions: Vec<Action> = files.iter().map(|f| Self::add_action(f, now)).collect();
        let props = CommitProperties::default()
            .with_application_transaction(Transaction::new(&self.stream, batch_id as i64));
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
        let finalized = CommitBuilder::from(props)
            .with_actions(actions)
            .build(Some(snapshot), table.log_store(), operation)
            .await
            .map_err(|e| SinkError::Commit {
                location: self.uri.clone(),
                batch_id,
                reason: e.to_string(),
            })?;
        let version = finalized.version();
        table
            .update_incremental(None)
            .await
            .map_err(|e| self.open_err(e))?;
        Ok(version as i64)
    }

    async fn remove_files(&self, paths: &[String]) -> SeamResult<u64> {
        let store = crate::table_store(&self.uri, &self.options)?;
        Ok(crate::parquet_dir::delete_all(&self.uri, store.as_ref(), paths).await?)
    }

    async fn table_version(&self) -> SeamResult<Option<i64>> {
        let guard = self.refreshed().await?;
        Ok(guard.as_ref().and_then(|t| t.version()).map(|v| v as i64))
    }

    async fn complete(&self, _batch_id: u64) -> SeamResult<()> {
        Ok(())
    }
}

impl std::fmt::Debug for DeltaCommitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaCommitter")
            .field("stream", &self.stream)
            .field("uri", &self.uri)
            .finish()
    }
}
