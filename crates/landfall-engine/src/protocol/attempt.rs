//! One attempt of a batch, as types that consume themselves (docs/exactly-once.md, steps 3 to
//! 6). A [`Started`] attempt (counted in the ledger, its files known) is read and written by
//! the stream into a [`Staged`] one (every data file written, each name recorded before the
//! file existed), which commits into a [`Landed`] one (the table holds it) or finds that an
//! earlier attempt landed ([`Commit::LandedBefore`], settled by [`super::settle`]), and a
//! landed attempt records into a [`Recorded`] one.
//!
//! Each step takes the one before by value, so the order is the type's: an attempt commits
//! only once it is staged, records only what a commit call reported landed, and cannot
//! commit twice; the files to read are handed out once, with the started attempt. An attempt
//! that fails before its commit call is discarded ([`Started::discard`],
//! [`Staged::discard`]), and nothing is left to call on it. The types are `#[must_use]`, so
//! a started, staged or landed attempt dropped unused is a warning; a [`Commit`] is matched
//! by the caller, whose `LandedBefore` arm must settle the batch (stream/batch.rs does). What
//! the types cannot tell is whether the staged files are every file the reader read: the
//! reader checks that it read every file it was handed before it stages.

use crate::events::{BatchTimings, StreamEvents};
use crate::failpoint;
use crate::protocol::settle::KEEP_PLANS;
use chrono::Utc;
use landfall_core::seams::SeamResult;
use landfall_core::{
    BatchPlan, CommitReceipt, Committer, FileKey, FileMeta, FileState, StagedFile, StateStore,
};

/// Step 3: an attempt of a recorded plan, counted in the ledger.
#[must_use]
pub struct Started {
    plan: BatchPlan,
    /// Data files earlier attempts of the batch staged (the ledger's list at the start).
    earlier_staged: Vec<String>,
    timings: BatchTimings,
}

impl Started {
    /// Count one more attempt of `plan` and find the files it still holds: not skipped, and
    /// not admitted again since (a path whose listed version changed is discovered again
    /// under the same key; that new record belongs to a later batch, and this plan's version
    /// of it is gone). Returns the attempt and the files it reads, handed out once.
    pub fn start(
        state: &dyn StateStore,
        plan: &BatchPlan,
    ) -> SeamResult<(Started, Vec<(FileKey, FileMeta)>)> {
        let plan = state.start_attempt(plan.batch_id)?;
        let batch_id = plan.batch_id;
        let mut to_read = Vec::with_capacity(plan.files.len());
        let mut timings = BatchTimings::default();
        for (key, meta) in &plan.files {
            let record = state.file(key)?;
            let held = record
                .as_ref()
                .is_some_and(|r| r.state == FileState::InBatch && r.batch_id == Some(batch_id));
            if let Some(r) = record.filter(|_| held) {
                timings.discovered.push(r.discovery_time);
                let (first, last) = &mut timings.offsets;
                *first = Some(first.map_or(r.seq, |f: u64| f.min(r.seq)));
                *last = Some(last.map_or(r.seq, |l: u64| l.max(r.seq)));
                to_read.push((key.clone(), meta.clone()));
            }
        }
        let started = Started {
            earlier_staged: plan.staged.clone(),
            plan,
            timings,
        };
        Ok((started, to_read))
    }

    pub fn batch_id(&self) -> u64 {
        self.plan.batch_id
    }

    /// The batch's timings and counts, for the reader to add its files and bytes to.
    pub fn timings_mut(&mut self) -> &mut BatchTimings {
        &mut self.timings
    }

    /// This attempt's number (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.plan.attempts
    }

    /// Step 4 done: every data file of the attempt written, `rows` rows in them.
    pub fn staged(self, files: Vec<StagedFile>, rows: u64) -> Staged {
        Staged {
            attempt: self,
            files,
            rows,
        }
    }

    /// Nothing of this attempt will be committed (it failed, or met new columns): remove the
    /// data files it wrote. Best effort: the ledger lists them, so recovery removes them too.
    pub async fn discard(self, stream: &str, state: &dyn StateStore, committer: &dyn Committer) {
        let batch_id = self.batch_id();
        let mine = match state.batch(batch_id) {
            Ok(p) => p.map(|p| p.staged).unwrap_or_default(),
            Err(e) => {
                tracing::warn!(stream, batch_id, error = %e.message, "could not read the failed attempt's data files; recovery removes them");
                return;
            }
        };
        let fresh: Vec<String> = mine
            .into_iter()
            .filter(|p| !self.earlier_staged.contains(p))
            .collect();
        if fresh.is_empty() {
            return;
        }
        if let Err(e) = committer.remove_files(&fresh).await {
            tracing::warn!(stream, batch_id, error = %e.message, "could not remove the failed attempt's data files yet");
        }
    }
}

/// Step 4: every data file of the attempt written, each name in the ledger before the file
/// existed.
#[must_use]
pub struct Staged {
    attempt: Started,
    files: Vec<StagedFile>,
    rows: u64,
}

/// What a commit call found.
#[must_use]
pub enum Commit {
    /// The table holds this attempt's files (boxed: the plan it carries is large).
    Landed(Box<Landed>),
    /// An earlier attempt's commit landed after all (its outcome was not seen): its data
    /// files are the live ones, and the batch is settled as recovery settles a landed batch.
    LandedBefore { version: i64 },
}

impl Staged {
    pub fn batch_id(&self) -> u64 {
        self.attempt.batch_id()
    }

    pub fn attempt(&self) -> u32 {
        self.attempt.attempt()
    }

    /// The attempt fails before its commit call (its bad records could not be written):
    /// remove its data files, as [`Started::discard`].
    pub async fn discard(self, stream: &str, state: &dyn StateStore, committer: &dyn Committer) {
        self.attempt.discard(stream, state, committer).await
    }

    /// Step 5: record that the attempt calls commit (recovery then knows a commit may have
    /// landed), and commit its files with the batch id. A failure leaves the outcome unknown
    /// (the commit may have landed): the files stay, and recovery decides from the table.
    pub async fn commit(
        self,
        state: &dyn StateStore,
        committer: &dyn Committer,
    ) -> SeamResult<Commit> {
        let batch_id = self.batch_id();
        failpoint::hit("after_stage");
        state.commit_started(batch_id, self.attempt())?;
        failpoint::hit("before_commit");
        let committed = committer.commit(batch_id, &self.files).await?;
        failpoint::hit("after_commit");
        if committed.landed_before {
            return Ok(Commit::LandedBefore {
                version: committed.version,
            });
        }
        Ok(Commit::Landed(Box::new(Landed {
            staged: self,
            version: committed.version,
        })))
    }
}

/// The table holds the attempt's files; the ledger does not know yet.
#[must_use]
pub struct Landed {
    staged: Staged,
    version: i64,
}

impl Landed {
    /// Step 6: remove earlier attempts' data files the commit does not hold (before the batch
    /// is recorded: once recorded, no recovery looks at this batch again, and a stop in
    /// between would leave them for good), record the batch, and prune its plan.
    pub async fn record(
        self,
        state: &dyn StateStore,
        committer: &dyn Committer,
        events: &StreamEvents,
    ) -> SeamResult<Recorded> {
        let Landed { staged, version } = self;
        let Staged {
            attempt,
            files,
            rows,
        } = staged;
        let batch_id = attempt.batch_id();
        let receipt = CommitReceipt {
            table_version: version,
            rows,
            data_files: files.len() as u64,
            data_bytes: files.iter().map(|f| f.size).sum(),
            committed_at: Utc::now(),
            recovered: false,
        };
        let orphans: Vec<String> = attempt
            .earlier_staged
            .into_iter()
            .filter(|p| !files.iter().any(|f| &f.path == p))
            .collect();
        if !orphans.is_empty() {
            let n = committer.remove_files(&orphans).await?;
            events.orphans_removed(batch_id, n);
        }
        state.record_committed(batch_id, receipt.clone())?;
        failpoint::hit("after_record");
        state.prune_batch(batch_id, KEEP_PLANS)?;
        Ok(Recorded {
            plan: attempt.plan,
            receipt,
            timings: attempt.timings,
        })
    }
}

/// The batch is committed and recorded.
#[must_use]
pub struct Recorded {
    pub plan: BatchPlan,
    pub receipt: CommitReceipt,
    pub timings: BatchTimings,
}
