//! A table that keeps its commits in memory and can be told to fail the way production fails.
//!
//! [`MemoryCommitter`] keeps what a Delta table keeps for the protocol: one commit per batch
//! id (its data files and the state identity stamped on it), the files it references, and the
//! files attempts staged beside them. Its faults are the ones the protocol must survive:
//! [`Fault::LoseAnswer`] commits and then reports a failure (an ambiguous network error: the
//! commit landed, the caller cannot tell), [`Fault::LandLate`] fails and lands at the next
//! commit call (after recovery looked), [`Fault::Refuse`] fails before committing.

use crate::plan::StagedFile;
use crate::seams::{
    BatchCommit, BatchWriter, Committed, Committer, SeamError, SeamResult, StagedHook,
};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use async_trait::async_trait;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// One commit of the in-memory table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryCommit {
    pub batch_id: u64,
    pub version: i64,
    pub files: Vec<String>,
    pub owner: Option<String>,
    pub rows: u64,
}

/// How the next commit call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The commit lands, and the call reports a (retryable) failure.
    LoseAnswer,
    /// The call fails (retryably) without committing.
    Refuse,
    /// The call fails (retryably), and its commit lands later: at the start of the next
    /// commit call (a slow write that lands after the caller gave up and recovery looked).
    LandLate,
}

#[derive(Default)]
struct Table {
    commits: Vec<MemoryCommit>,
    /// Staged data files by path: their rows.
    staged: BTreeMap<String, u64>,
    removed: BTreeSet<String>,
    owner: Option<String>,
    faults: Vec<Fault>,
    /// A commit that lands at the next commit call ([`Fault::LandLate`]).
    late: Option<MemoryCommit>,
    schema: Option<SchemaRef>,
}

/// A table in memory (see the module doc). Clones share the table.
#[derive(Clone, Default)]
pub struct MemoryCommitter {
    table: Arc<Mutex<Table>>,
}

impl MemoryCommitter {
    pub fn new() -> Self {
        Self::default()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fail the next commit calls, in order.
    pub fn fail_next(&self, faults: &[Fault]) {
        self.table().faults.extend_from_slice(faults);
    }

    /// The commits, in table order.
    pub fn commits(&self) -> Vec<MemoryCommit> {
        self.table().commits.clone()
    }

    /// Add a commit as another writer would (another state's identity, or none).
    pub fn commit_as(&self, owner: Option<&str>, batch_id: u64, files: &[&str]) {
        let mut t = self.table();
        let version = t.commits.len() as i64;
        t.commits.push(MemoryCommit {
            batch_id,
            version,
            files: files.iter().map(|f| f.to_string()).collect(),
            owner: owner.map(str::to_string),
            rows: 0,
        });
    }

    /// Staged data files not referenced by any commit and not removed: what a crash or a
    /// failed attempt left behind.
    pub fn stray_files(&self) -> Vec<String> {
        let t = self.table();
        let live: BTreeSet<&String> = t.commits.iter().flat_map(|c| &c.files).collect();
        t.staged
            .keys()
            .filter(|f| !live.contains(f) && !t.removed.contains(*f))
            .cloned()
            .collect()
    }

    /// Rows in the table (the sum over its commits).
    pub fn rows(&self) -> u64 {
        self.table().commits.iter().map(|c| c.rows).sum()
    }
}

struct MemoryWriter {
    table: Arc<Mutex<Table>>,
    batch_id: u64,
    attempt: u32,
    hook: StagedHook,
    /// Files by partition values, with their rows.
    files: Vec<(Vec<Option<String>>, String, u64)>,
}

#[async_trait]
impl BatchWriter for MemoryWriter {
    async fn write(
        &mut self,
        partition_values: &[Option<String>],
        batch: RecordBatch,
    ) -> SeamResult<()> {
        let at = match self
            .files
            .iter()
            .position(|(p, _, _)| p.as_slice() == partition_values)
        {
            Some(i) => i,
            None => {
                let name = format!(
                    "part-{:05}-a{}-mem-c{:03}.snappy.parquet",
                    self.batch_id,
                    self.attempt,
                    self.files.len()
                );
                // Recorded before the file exists, as the real writer does.
                (self.hook)(&name)?;
                self.table
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .staged
                    .insert(name.clone(), 0);
                self.files.push((partition_values.to_vec(), name, 0));
                self.files.len() - 1
            }
        };
        self.files[at].2 += batch.num_rows() as u64;
        Ok(())
    }

    async fn finish(self: Box<Self>) -> SeamResult<Vec<StagedFile>> {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        Ok(self
            .files
            .into_iter()
            .map(|(_, path, rows)| {
                t.staged.insert(path.clone(), rows);
                StagedFile {
                    path,
                    size: rows,
                    rows,
                    partition_values: Vec::new(),
                    stats: None,
                }
            })
            .collect())
    }
}

#[async_trait]
impl Committer for MemoryCommitter {
    fn location(&self) -> String {
        "memory://table".into()
    }

    async fn prepare(&self, schema: SchemaRef, _partition_by: &[String]) -> SeamResult<()> {
        self.table().schema.get_or_insert(schema);
        Ok(())
    }

    async fn evolve(&self, schema: SchemaRef, _partition_by: &[String]) -> SeamResult<()> {
        self.table().schema = Some(schema);
        Ok(())
    }

    async fn last_committed(&self) -> SeamResult<Option<u64>> {
        Ok(self.table().commits.iter().map(|c| c.batch_id).max())
    }

    async fn batch_version(&self, batch_id: u64) -> SeamResult<Option<i64>> {
        Ok(self
            .table()
            .commits
            .iter()
            .find(|c| c.batch_id == batch_id)
            .map(|c| c.version))
    }

    async fn writer(
        &self,
        batch_id: u64,
        attempt: u32,
        on_new_file: StagedHook,
    ) -> SeamResult<Box<dyn BatchWriter>> {
        Ok(Box::new(MemoryWriter {
            table: self.table.clone(),
            batch_id,
            attempt,
            hook: on_new_file,
            files: Vec::new(),
        }))
    }

    async fn commit(&self, batch_id: u64, files: &[StagedFile]) -> SeamResult<Committed> {
        let mut t = self.table();
        if let Some(mut late) = t.late.take() {
            late.version = t.commits.len() as i64;
            t.commits.push(late);
        }
        if let Some(c) = t.commits.iter().find(|c| c.batch_id == batch_id) {
            return Ok(Committed {
                version: c.version,
                landed_before: true,
            });
        }
        let fault = (!t.faults.is_empty()).then(|| t.faults.remove(0));
        if fault == Some(Fault::Refuse) {
            return Err(SeamError::retryable(format!(
                "batch {batch_id}: the commit was refused (injected)"
            )));
        }
        let version = t.commits.len() as i64;
        let commit = MemoryCommit {
            batch_id,
            version,
            files: files.iter().map(|f| f.path.clone()).collect(),
            owner: t.owner.clone(),
            rows: files.iter().map(|f| f.rows).sum(),
        };
        if fault == Some(Fault::LandLate) {
            t.late = Some(commit);
            return Err(SeamError::retryable(format!(
                "batch {batch_id}: the commit timed out (injected; it lands later)"
            )));
        }
        t.commits.push(commit);
        if fault == Some(Fault::LoseAnswer) {
            return Err(SeamError::retryable(format!(
                "batch {batch_id}: the commit's answer was lost (injected; it landed)"
            )));
        }
        Ok(Committed {
            version,
            landed_before: false,
        })
    }

    async fn remove_files(&self, paths: &[String]) -> SeamResult<u64> {
        let mut t = self.table();
        let mut n = 0;
        for p in paths {
            if t.staged.contains_key(p) && t.removed.insert(p.clone()) {
                n += 1;
            }
        }
        Ok(n)
    }

    async fn remove_orphans(&self, batch_id: u64, paths: &[String]) -> SeamResult<u64> {
        let keep: BTreeSet<String> = self
            .table()
            .commits
            .iter()
            .filter(|c| c.batch_id == batch_id)
            .flat_map(|c| c.files.clone())
            .collect();
        let orphans: Vec<String> = paths
            .iter()
            .filter(|p| !keep.contains(*p))
            .cloned()
            .collect();
        self.remove_files(&orphans).await
    }

    async fn table_version(&self) -> SeamResult<Option<i64>> {
        Ok(self.table().commits.last().map(|c| c.version))
    }

    async fn batch_commit(&self, batch_id: u64) -> SeamResult<Option<BatchCommit>> {
        Ok(self
            .table()
            .commits
            .iter()
            .find(|c| c.batch_id == batch_id)
            .map(|c| BatchCommit {
                files: c.files.clone(),
                owner: c.owner.clone(),
            }))
    }

    fn set_owner(&self, owner: &str) {
        self.table().owner = Some(owner.to_string());
    }

    async fn complete(&self, _batch_id: u64) -> SeamResult<()> {
        Ok(())
    }
}
