//! One stream's loop: discover, plan, run, commit, record (docs/exactly-once.md).
//!
//! Each step is durable before the next starts: files are admitted to the ledger before a plan
//! takes them, the plan (exact files, batch id) is recorded before any data file is written,
//! every data file's name is recorded before it is created, and the batch is recorded as
//! committed only after the table holds it. Shutdown is honoured between batches only.

use crate::events::StreamEvents;
use crate::failpoint;
use crate::pipeline::{self, DecodeJob, Decoded};
use crate::recovery::{Recovered, recover};
use crate::schema::{self, StreamSchema};
use chrono::Utc;
use landfall_config::{StreamSpec, Trigger};
use landfall_core::seams::{SeamResult, StagedHook};
use landfall_core::{
    BatchPlan, CommitReceipt, Committer, Discovery, FileMeta, SeamError, StateStore,
};
use landfall_discovery::ListingDiscovery;
use landfall_formats::DecodeOptions;
use object_store::ObjectStore;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Why a worker's `run` returned without error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// available_now: everything present at start is committed.
    Drained,
    /// Shutdown was requested; the batch in flight (if any) finished first.
    Stopped,
}

pub struct StreamWorker {
    spec: StreamSpec,
    state: Arc<dyn StateStore>,
    discovery: ListingDiscovery,
    committer: Arc<dyn Committer>,
    events: Arc<StreamEvents>,
    schema: Option<StreamSchema>,
    available_now: bool,
    last_expiry: Option<Instant>,
}

/// How often `max_file_age` expiry runs.
const EXPIRY_EVERY: Duration = Duration::from_secs(3600);

impl StreamWorker {
    /// Open the stream's state, source and table. `available_now` overrides the trigger.
    pub fn open(
        spec: StreamSpec,
        events: Arc<StreamEvents>,
        available_now: bool,
    ) -> SeamResult<Self> {
        let state = crate::wiring::open_state(&spec)?;
        let discovery = crate::wiring::open_discovery(&spec)?;
        let committer = crate::wiring::open_committer(&spec)?;
        let available_now = available_now || spec.trigger == Trigger::AvailableNow;
        Ok(StreamWorker {
            spec,
            state,
            discovery,
            committer,
            events,
            schema: None,
            available_now,
            last_expiry: None,
        })
    }

    pub fn state(&self) -> &Arc<dyn StateStore> {
        &self.state
    }

    pub fn committer(&self) -> &Arc<dyn Committer> {
        &self.committer
    }

    fn store(&self) -> &Arc<dyn ObjectStore> {
        self.discovery.store()
    }

    /// Fix the `include_existing_files = false` cutoff at first start.
    fn apply_existing_cutoff(&mut self) -> SeamResult<()> {
        if self.spec.include_existing_files {
            return Ok(());
        }
        let cutoff = match self.state.meta("existing_files_cutoff")? {
            Some(t) => chrono::DateTime::parse_from_rfc3339(&t)
                .map(|d| d.with_timezone(&Utc))
                .map_err(|e| {
                    SeamError::fatal(format!(
                        "stream `{}`: stored cutoff `{t}` unreadable: {e}",
                        self.spec.name
                    ))
                })?,
            None => {
                let now = Utc::now();
                self.state
                    .set_meta("existing_files_cutoff", &now.to_rfc3339())?;
                now
            }
        };
        self.discovery.set_modified_after(cutoff);
        Ok(())
    }

    /// List, and admit unknown files with the cursor in one write. Returns the candidates.
    async fn discover(&self) -> SeamResult<Vec<FileMeta>> {
        let t = Instant::now();
        let cursor = self.state.cursor()?;
        let found = self.discovery.discover(cursor.as_deref()).await?;
        let keyed: Vec<_> = found
            .files
            .iter()
            .map(|m| (m.key(self.spec.allow_overwrites), m.clone()))
            .collect();
        let admitted = self
            .state
            .admit(&keyed, found.cursor.as_deref(), Utc::now())?;
        self.discovery.acknowledge(found.ack).await?;
        self.events
            .discovered(found.files.len(), admitted, found.filtered, t.elapsed());
        Ok(found.files)
    }

    fn expire(&mut self) -> SeamResult<()> {
        let Some(age) = self.spec.max_file_age else {
            return Ok(());
        };
        if self.last_expiry.is_some_and(|t| t.elapsed() < EXPIRY_EVERY) {
            return Ok(());
        }
        self.last_expiry = Some(Instant::now());
        let cutoff = Utc::now() - chrono::Duration::from_std(age).unwrap_or(chrono::Duration::MAX);
        let n = self.state.expire(cutoff)?;
        self.events.files_expired(n);
        Ok(())
    }

    /// Make sure the schema is known and the table prepared. False: nothing to infer from yet.
    async fn ensure_schema(&mut self, candidates: &[FileMeta]) -> SeamResult<bool> {
        if self.schema.is_some() {
            return Ok(true);
        }
        let prefix = self.discovery.prefix().clone();
        let Some((s, inferred)) = schema::resolve(
            &self.spec,
            self.state.as_ref(),
            self.store(),
            &prefix,
            candidates,
        )
        .await?
        else {
            return Ok(false);
        };
        self.events.schema_resolved(
            s.version,
            &landfall_core::ddl::schema_to_ddl(&s.table),
            inferred,
        );
        for c in &self.spec.sink.partition_by {
            if s.table.field_with_name(c).is_err() {
                return Err(SeamError::fatal(format!(
                    "stream `{}`: sink.partition_by column `{c}` is not in the stream schema",
                    self.spec.name
                )));
            }
        }
        self.committer
            .prepare(s.table.clone(), &self.spec.sink.partition_by)
            .await?;
        if self.state.summary()?.last_batch.is_none()
            && let Some(v) = self.committer.last_committed().await?
        {
            self.state.ensure_batch_floor(v + 1)?;
            self.events.batch_floor_raised(v + 1);
        }
        self.schema = Some(s);
        Ok(true)
    }

    /// Run until drained (available_now) or until `shutdown` turns true.
    pub async fn run(&mut self, mut shutdown: watch::Receiver<bool>) -> SeamResult<RunEnd> {
        self.apply_existing_cutoff()?;
        let mut candidates = self.discover().await?;
        if !self.ensure_schema(&candidates).await? && self.available_now {
            return Ok(RunEnd::Drained);
        }
        if self.schema.is_some()
            && let Recovered::Replay(plan) =
                recover(self.state.as_ref(), self.committer.as_ref(), &self.events).await?
        {
            self.run_batch(plan).await?;
        }
        let mut last_listing = Instant::now();
        // Whether the last round planned a batch: files may still be pending. (A round that
        // plans nothing has drained the pending queue.)
        let mut backlog = true;
        loop {
            if *shutdown.borrow() {
                return Ok(RunEnd::Stopped);
            }
            let round = Instant::now();
            // While a backlog is pending, list at most once per poll interval: each LIST of a
            // large prefix costs time and money, and the backlog is already known.
            if !self.available_now
                && (!backlog || last_listing.elapsed() >= self.spec.poll_interval)
            {
                candidates = self.discover().await?;
                last_listing = Instant::now();
            }
            self.expire()?;
            if !self.ensure_schema(&candidates).await? {
                if wait(&mut shutdown, self.spec.poll_interval).await {
                    return Ok(RunEnd::Stopped);
                }
                continue;
            }
            let version = self.schema.as_ref().map_or(1, |s| s.version);
            match self
                .state
                .plan_batch(self.spec.limits, version, Utc::now())?
            {
                Some(plan) => {
                    backlog = true;
                    self.events.batch_planned(&plan);
                    failpoint::hit("after_plan");
                    self.run_batch(plan).await?;
                }
                None if self.available_now => return Ok(RunEnd::Drained),
                None => {
                    backlog = false;
                    if wait(&mut shutdown, self.spec.poll_interval).await {
                        return Ok(RunEnd::Stopped);
                    }
                    continue;
                }
            }
            if let Trigger::ProcessingTime(every) = self.spec.trigger
                && !self.available_now
                && let Some(rest) = every.checked_sub(round.elapsed())
                && wait(&mut shutdown, rest).await
            {
                return Ok(RunEnd::Stopped);
            }
        }
    }

    /// Steps 3 to 5 for one recorded plan.
    async fn run_batch(&self, plan: BatchPlan) -> SeamResult<()> {
        let started = Instant::now();
        let plan = self.state.start_attempt(plan.batch_id)?;
        let earlier_staged = plan.staged.clone();
        let state = self.state.clone();
        let batch_id = plan.batch_id;
        let hook: StagedHook = Arc::new(move |path: &str| state.record_staged(batch_id, path));
        let mut writer = self.committer.writer(batch_id, plan.attempts, hook).await?;
        let mut rows = 0u64;
        let written: SeamResult<Vec<_>> = async {
            // Fetching and decoding run in their own task, ahead of the writer: decoding one
            // file overlaps encoding the previous one, and object-store latency overlaps both.
            let job = DecodeJob {
                format: schema::file_format(self.spec.format)?,
                options: DecodeOptions {
                    csv: schema::csv_format(&self.spec),
                    ..Default::default()
                },
                schema: self
                    .schema
                    .clone()
                    .expect("schema resolved before planning"),
                partition_by: self.spec.sink.partition_by.clone(),
                prefix: self.discovery.prefix().clone(),
            };
            let metas: Vec<FileMeta> = plan.files.iter().map(|(_, m)| m.clone()).collect();
            let mut decoded = pipeline::spawn(job, self.store().clone(), metas);
            let mut files_done = 0usize;
            while let Some(item) = decoded.recv().await {
                match item? {
                    Decoded::Rows(values, part) => writer.write(&values, part).await?,
                    Decoded::FileDone { path, rows: n } => {
                        self.events.file_decoded(batch_id, &path, n);
                        rows += n;
                        files_done += 1;
                    }
                }
            }
            // The channel also closes if the read task died (a panic): never commit a batch
            // that did not read every one of its files.
            if files_done != plan.files.len() {
                return Err(SeamError::retryable(format!(
                    "stream `{}`: batch {batch_id}: the read side stopped after {files_done} of {} files",
                    self.spec.name,
                    plan.files.len()
                )));
            }
            writer.finish().await
        }
        .await;
        let staged = match written {
            Ok(s) => s,
            Err(e) => {
                self.events.batch_failed(batch_id, &e.message);
                // Nothing was committed: this attempt's files can go now (recovery would
                // remove them too, from the ledger's list).
                let mine = self
                    .state
                    .batch(batch_id)?
                    .map(|p| p.staged)
                    .unwrap_or_default();
                let fresh: Vec<String> = mine
                    .into_iter()
                    .filter(|p| !earlier_staged.contains(p))
                    .collect();
                let _ = self.committer.remove_files(&fresh).await;
                return Err(e);
            }
        };
        failpoint::hit("after_stage");
        let version = match self.committer.commit(batch_id, &staged).await {
            Ok(v) => v,
            Err(e) => {
                // The outcome may be unknown (the commit may have landed): keep the files;
                // recovery decides from the table.
                self.events.batch_failed(batch_id, &e.message);
                return Err(e);
            }
        };
        failpoint::hit("after_commit");
        let receipt = CommitReceipt {
            table_version: version,
            rows,
            data_files: staged.len() as u64,
            data_bytes: staged.iter().map(|f| f.size).sum(),
            committed_at: Utc::now(),
            recovered: false,
        };
        self.state.record_committed(batch_id, receipt.clone())?;
        failpoint::hit("after_record");
        let keep: Vec<&String> = staged.iter().map(|f| &f.path).collect();
        let orphans: Vec<String> = earlier_staged
            .into_iter()
            .filter(|p| !keep.contains(&p))
            .collect();
        if !orphans.is_empty() {
            let n = self.committer.remove_files(&orphans).await?;
            self.events.orphans_removed(batch_id, n);
        }
        self.events
            .batch_committed(&plan, &receipt, started.elapsed());
        Ok(())
    }
}

/// Sleep for `d` unless shutdown comes first. True when shutting down.
async fn wait(shutdown: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *shutdown.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        r = shutdown.changed() => r.is_err() || *shutdown.borrow(),
    }
}
