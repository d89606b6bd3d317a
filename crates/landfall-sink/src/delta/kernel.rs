//! The Delta kernel (delta-io/delta-kernel-rs) behind [`super::DeltaCommitter`]: snapshots,
//! table creation and append transactions, run off the async workers.
//!
//! Contract:
//! - A snapshot holds the table's protocol and metadata only, never its file list: loading one
//!   reads `_last_checkpoint`, lists the log from that checkpoint and replays the commits after
//!   it for protocol and metadata; refreshing one ([`Kernel::refresh`]) reads only the commits
//!   added since. A commit therefore costs the same on a table of ten files or of a million
//!   (docs/architecture.md, "Delta library").
//! - Every kernel call blocks its thread (the kernel's engine API is synchronous), so each runs
//!   on tokio's blocking pool ([`Kernel::run`]). On a multi-threaded runtime the engine's I/O
//!   runs on that runtime; elsewhere (unit tests on a current-thread runtime) on a runtime of
//!   its own, dropped off the async context.
//! - The object store is rooted at the bucket (or file system) root, as the kernel resolves
//!   every path from the full table URL; [`crate::table_store`] gives the writers a store rooted
//!   at the table.
//! - An append ([`Kernel::append`]) is one transaction: the stream's `txn`, the batch's `add`
//!   actions (stats as Delta states them), new nullable columns, and the state identity in
//!   `commitInfo`. The kernel adds what the table's features ask of writers: row ids and their
//!   high-water mark (`rowTracking`), a monotonic `inCommitTimestamp`. The commit is one
//!   put-if-absent of `_delta_log/<version>.json`; losing that race is [`Attempt::Conflicted`],
//!   which the caller answers by refreshing and deciding again.

use crate::error::SinkError;
use arrow::array::{
    ArrayRef, Int64Array, MapBuilder, MapFieldNames, RecordBatch, StringArray, StringBuilder,
};
use arrow_schema::{DataType, Field, Schema};
use delta_kernel::committer::FileSystemCommitter;
use delta_kernel::engine::arrow_conversion::{TryIntoArrow, TryIntoKernel};
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::expressions::ColumnName;
use delta_kernel::schema::{StructField, StructType};
use delta_kernel::snapshot::IncrementalReplay;
use delta_kernel::transaction::create_table::create_table;
use delta_kernel::transaction::data_layout::DataLayout;
use delta_kernel::transaction::{CommitResult, UpdateTableOperation};
use delta_kernel::{Engine, KernelError, Snapshot, SnapshotRef};
use delta_kernel_default_engine::DefaultEngineBuilder;
use delta_kernel_default_engine::executor::tokio::TokioMultiThreadExecutor;
use landfall_core::StagedFile;
use object_store::ObjectStore;
use object_store::path::Path;
use std::collections::HashMap;
use std::sync::Arc;
use url::Url;

/// What the kernel writes as `engineInfo`.
pub(crate) const ENGINE_INFO: &str = concat!("landfall/", env!("CARGO_PKG_VERSION"));

/// The kernel's engine over one table's store, and where the table lies in it.
pub(crate) struct Kernel {
    engine: Option<Arc<dyn Engine>>,
    /// The table URL, ending in `/`.
    pub root: Url,
    /// The store, rooted at the bucket (file system) root.
    pub store: Arc<dyn ObjectStore>,
    /// The table's path in `store`.
    pub prefix: Path,
    /// The table as it may be shown.
    pub location: String,
}

/// How one append transaction ended (failures are the `Err` of [`Kernel::append`]).
pub(crate) enum Attempt {
    Committed {
        version: i64,
        snapshot: SnapshotRef,
    },
    /// Another commit took the version first: refresh and decide again.
    Conflicted {
        version: i64,
    },
}

/// One batch's commit, as [`Kernel::append`] builds it.
pub(crate) struct Append {
    pub stream: String,
    pub batch_id: i64,
    pub owner: Option<String>,
    pub files: Vec<StagedFile>,
    pub now_ms: i64,
    pub partition_by: Vec<String>,
    /// Columns the table gains: the parent struct's path (empty: top level) and the field.
    pub new_fields: Vec<(Vec<String>, StructField)>,
}

impl Kernel {
    /// The engine for the table at `uri` (a URL) with the store `options`.
    pub fn open(uri: &str, options: &HashMap<String, String>) -> Result<Self, SinkError> {
        let location = crate::shown(uri);
        let bad = |reason: String| SinkError::Location {
            location: location.clone(),
            reason,
        };
        let mut root = Url::parse(uri).map_err(|e| bad(e.to_string()))?;
        if !root.path().ends_with('/') {
            let path = format!("{}/", root.path());
            root.set_path(&path);
        }
        let (store, prefix) = crate::bucket_store(&root, options)?;
        let builder = DefaultEngineBuilder::new(store.clone());
        let executor = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                TokioMultiThreadExecutor::new(h)
            }
            _ => TokioMultiThreadExecutor::new_owned_runtime(Some(2), None)
                .map_err(|e| bad(format!("cannot start the Delta engine: {e}")))?,
        };
        let engine: Arc<dyn Engine> =
            Arc::new(builder.with_task_executor(Arc::new(executor)).build());
        Ok(Kernel {
            engine: Some(engine),
            root,
            store,
            prefix,
            location,
        })
    }

    /// Run `f` with the engine on the blocking pool.
    pub async fn run<T, F>(&self, f: F) -> Result<T, KernelError>
    where
        F: FnOnce(&dyn Engine) -> Result<T, KernelError> + Send + 'static,
        T: Send + 'static,
    {
        let engine = self.engine.clone().expect("engine until dropped");
        tokio::task::spawn_blocking(move || f(engine.as_ref()))
            .await
            .unwrap_or_else(|e| Err(KernelError::Generic(format!("Delta task failed: {e}"))))
    }

    pub fn kernel_err(&self, op: &str, source: KernelError) -> SinkError {
        SinkError::Kernel {
            location: self.location.clone(),
            op: op.to_string(),
            source: Box::new(source),
        }
    }

    /// The latest snapshot, or `None` when no table exists at the location yet.
    pub async fn load(&self) -> Result<Option<SnapshotRef>, SinkError> {
        let root = self.root.to_string();
        let loaded = self
            .run(move |engine| {
                Snapshot::builder_for(root)
                    .with_incremental_crc_replay(IncrementalReplay::Unlimited)
                    .build(engine)
            })
            .await;
        match loaded {
            Ok(s) => Ok(Some(s)),
            Err(e) => match e.without_backtrace() {
                KernelError::EmptyLog => Ok(None),
                KernelError::InvalidTableLocation(_) if self.root.scheme() == "file" => Ok(None),
                // The kernel loads catalog-managed tables only through their catalog.
                KernelError::MaxCatalogVersion(_) => Err(SinkError::Unsupported {
                    location: self.location.clone(),
                    feature: "catalogManaged".into(),
                    reason: "commits must go through the table's catalog, while landfall \
                             commits to the object store; write to a table without it"
                        .into(),
                }),
                _ => Err(self.kernel_err("cannot open", e)),
            },
        }
    }

    /// `snapshot` brought to the table's latest version (only newer commits are read).
    pub async fn refresh(&self, snapshot: SnapshotRef) -> Result<SnapshotRef, SinkError> {
        self.run(move |engine| Snapshot::builder_from(snapshot).build(engine))
            .await
            .map_err(|e| self.kernel_err("cannot refresh", e))
    }

    /// Create the table; `Ok(None)` when another writer created it first (or anything is in
    /// its `_delta_log` already).
    pub async fn create(
        &self,
        schema: &Schema,
        partition_by: &[String],
    ) -> Result<Option<SnapshotRef>, SinkError> {
        let st = to_kernel(schema).map_err(|e| SinkError::Incompatible {
            location: self.location.clone(),
            reason: format!("cannot be stored in Delta: {e}"),
        })?;
        let root = self.root.to_string();
        let partition_by = partition_by.to_vec();
        let created = self
            .run(move |engine| {
                let mut b = create_table(root, Arc::new(st), ENGINE_INFO, true);
                if !partition_by.is_empty() {
                    b = b.with_data_layout(DataLayout::partitioned(partition_by));
                }
                let txn = b.build(engine, Box::new(FileSystemCommitter::new()))?;
                txn.commit(engine)
            })
            .await;
        match created {
            Ok(CommitResult::Committed(c)) => Ok(c.post_commit_snapshot().cloned()),
            Ok(CommitResult::Conflicted(_)) => Ok(None),
            Ok(CommitResult::Retryable(r)) => Err(self.kernel_err("create table", r.error)),
            Err(e) => match e.without_backtrace() {
                KernelError::TableAlreadyExistsAtPath(_) => Ok(None),
                _ => Err(self.kernel_err("create table", e)),
            },
        }
    }

    /// The stream's txn version in `snapshot`.
    pub async fn txn_version(
        &self,
        snapshot: &SnapshotRef,
        stream: &str,
    ) -> Result<Option<i64>, SinkError> {
        let (snapshot, stream) = (snapshot.clone(), stream.to_string());
        self.run(move |engine| snapshot.get_app_id_version(&stream, engine))
            .await
            .map_err(|e| self.kernel_err("read the stream's txn", e))
    }

    /// One append transaction on `snapshot`.
    pub async fn append(
        &self,
        snapshot: &SnapshotRef,
        append: Append,
    ) -> Result<Attempt, KernelError> {
        let snapshot = snapshot.clone();
        self.run(move |engine| {
            let batch = append.batch_id.to_string();
            let (op, params): (_, Vec<(&str, Option<String>)>) = if append.partition_by.is_empty() {
                (
                    UpdateTableOperation::StreamingUpdate,
                    vec![
                        ("outputMode", Some("Append".into())),
                        ("queryId", Some(append.stream.clone())),
                        ("epochId", Some(batch)),
                    ],
                )
            } else {
                (
                    UpdateTableOperation::Write,
                    vec![
                        ("mode", Some("Append".into())),
                        (
                            "partitionBy",
                            Some(serde_json::to_string(&append.partition_by).unwrap_or_default()),
                        ),
                    ],
                )
            };
            let mut b = snapshot
                .update_table(op, ENGINE_INFO, true)
                .with_transaction_id(append.stream.clone(), append.batch_id)
                .with_operation_parameters(params);
            if let Some(owner) = &append.owner {
                let (row, schema) = owner_commit_info(owner)?;
                b = b.with_commit_info(row, schema);
            }
            if append.new_fields.is_empty() && !append.files.is_empty() {
                b = b.with_blind_append();
            }
            for (parent, field) in append.new_fields {
                b = if parent.is_empty() {
                    b.add_column(field)
                } else {
                    b.add_column_at(ColumnName::new(parent), field)
                };
            }
            let mut txn = b.build(engine, Box::new(FileSystemCommitter::new()))?;
            if !append.files.is_empty() {
                let stats_schema = txn.stats_schema()?;
                let adds = adds_batch(&append.files, append.now_ms, &stats_schema)?;
                txn.add_files(Box::new(ArrowEngineData::new(adds)));
            }
            attempt(txn.commit(engine)?)
        })
        .await
    }

    /// A commit that only adds columns (`ALTER TABLE ... ADD COLUMNS`): on a column-mapped
    /// table the kernel assigns each its physical name and id, which the data files of the
    /// next batch need before they are written. No `txn`: it is no batch of the stream.
    pub async fn add_columns(
        &self,
        snapshot: &SnapshotRef,
        new_fields: Vec<(Vec<String>, StructField)>,
        owner: Option<String>,
    ) -> Result<Attempt, KernelError> {
        let snapshot = snapshot.clone();
        self.run(move |engine| {
            let mut b = snapshot.update_table(UpdateTableOperation::AlterTable, ENGINE_INFO, false);
            if let Some(owner) = &owner {
                let (row, schema) = owner_commit_info(owner)?;
                b = b.with_commit_info(row, schema);
            }
            for (parent, field) in new_fields {
                b = if parent.is_empty() {
                    b.add_column(field)
                } else {
                    b.add_column_at(ColumnName::new(parent), field)
                };
            }
            let txn = b.build(engine, Box::new(FileSystemCommitter::new()))?;
            attempt(txn.commit(engine)?)
        })
        .await
    }

    /// Write a checkpoint of `snapshot` (its version), as Delta's writers do every
    /// `delta.checkpointInterval` commits; classic or v2 as the table's features say.
    /// Returns the snapshot that reads from the new checkpoint.
    pub async fn checkpoint(&self, snapshot: &SnapshotRef) -> Result<SnapshotRef, SinkError> {
        let snapshot = snapshot.clone();
        self.run(move |engine| snapshot.checkpoint(engine, None).map(|(_, s)| s))
            .await
            .map_err(|e| self.kernel_err("write a checkpoint", e))
    }

    /// Whether commit `version` is still in the log (`false` also when the store cannot say).
    pub async fn has_commit(&self, version: u64) -> bool {
        use object_store::ObjectStoreExt;
        let log = self.path("_delta_log");
        self.store
            .head(&crate::delta_log::commit_path(&log, version as i64))
            .await
            .is_ok()
    }

    /// The object path of the table-relative `rel` (`_delta_log/...`).
    pub fn path(&self, rel: &str) -> Path {
        // The prefix's parts stay as they are (already encoded); only `rel` is new.
        rel.split('/')
            .fold(self.prefix.clone(), |p, seg| p.join(seg))
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // An engine owning its runtime must not be dropped on an async worker.
        if let Some(engine) = self.engine.take() {
            let _ = std::thread::Builder::new()
                .name("delta-engine-drop".into())
                .spawn(move || drop(engine));
        }
    }
}

/// How a transaction's commit ended, as [`Attempt`] (a retryable failure is its error).
fn attempt(result: CommitResult) -> Result<Attempt, KernelError> {
    Ok(match result {
        CommitResult::Committed(c) => Attempt::Committed {
            version: c.commit_version() as i64,
            snapshot: c
                .post_commit_snapshot()
                .cloned()
                .ok_or_else(|| KernelError::generic("no post-commit snapshot"))?,
        },
        CommitResult::Conflicted(c) => Attempt::Conflicted {
            version: c.conflict_version() as i64,
        },
        CommitResult::Retryable(r) => return Err(r.error),
    })
}

/// `commitInfo`'s extra field: the state identity ([`landfall_core::OWNER_KEY`]).
pub(crate) fn owner_commit_info(
    owner: &str,
) -> Result<
    (
        Box<dyn delta_kernel::EngineData>,
        delta_kernel::schema::SchemaRef,
    ),
    KernelError,
> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        landfall_core::OWNER_KEY,
        DataType::Utf8,
        true,
    )]));
    let row = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(StringArray::from(vec![owner])) as ArrayRef],
    )?;
    let kernel: StructType = schema.as_ref().try_into_kernel()?;
    Ok((Box::new(ArrowEngineData::new(row)), Arc::new(kernel)))
}

/// The batch `add_files` takes: `path, partitionValues, size, modificationTime, stats`.
pub(crate) fn adds_batch(
    files: &[StagedFile],
    now_ms: i64,
    stats_schema: &delta_kernel::schema::SchemaRef,
) -> Result<RecordBatch, KernelError> {
    let names = MapFieldNames {
        entry: "key_value".into(),
        key: "key".into(),
        value: "value".into(),
    };
    let mut pv = MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new());
    for f in files {
        for (k, v) in &f.partition_values {
            pv.keys().append_value(k);
            match v {
                Some(v) => pv.values().append_value(v),
                None => pv.values().append_null(),
            }
        }
        pv.append(true)?;
    }
    let pv: ArrayRef = Arc::new(pv.finish());
    let stats: ArrayRef = Arc::new(crate::delta::stats_struct::stats_struct(
        files,
        stats_schema,
    )?);
    let schema = Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("partitionValues", pv.data_type().clone(), false),
        Field::new("size", DataType::Int64, false),
        Field::new("modificationTime", DataType::Int64, false),
        Field::new("stats", stats.data_type().clone(), true),
    ]));
    let paths: Vec<String> = files.iter().map(|f| encode_path(&f.path)).collect();
    Ok(RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(paths)),
            pv,
            Arc::new(Int64Array::from_iter_values(
                files.iter().map(|f| f.size as i64),
            )),
            Arc::new(Int64Array::from_iter_values(files.iter().map(|_| now_ms))),
            stats,
        ],
    )?)
}

/// A data file's key as an `add` path: a relative URI, escaped as Delta writers escape it
/// (RFC 2396 leaves out the space and these characters; `%` itself becomes `%25`).
pub(crate) fn encode_path(key: &str) -> String {
    use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
    const ESCAPED: &AsciiSet = &CONTROLS
        .add(b' ')
        .add(b'\\')
        .add(b'{')
        .add(b'^')
        .add(b'}')
        .add(b'%')
        .add(b'`')
        .add(b']')
        .add(b'"')
        .add(b'>')
        .add(b'[')
        .add(b'<')
        .add(b'#')
        .add(b'|')
        .add(b'\r')
        .add(b'\n')
        .add(b'*')
        .add(b'?');
    utf8_percent_encode(key, ESCAPED).to_string()
}

/// The kernel's schema for an Arrow one (Delta types), without the stream's widening marks.
pub(crate) fn to_kernel(schema: &Schema) -> Result<StructType, String> {
    (&landfall_core::type_widening::without_marks(schema))
        .try_into_kernel()
        .map_err(|e| e.to_string())
}

/// Arrow's schema for a kernel one.
pub(crate) fn to_arrow(schema: &StructType) -> Result<Schema, String> {
    schema.try_into_arrow().map_err(|e| e.to_string())
}
