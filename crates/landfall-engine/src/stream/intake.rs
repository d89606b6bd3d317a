//! Discovery and admission: entering a discovery mode, rounds of discovery with each round's
//! files admitted (and queue messages acknowledged only after), request counts, expiry, and
//! re-admitting a file whose listed version changed.

use super::*;

impl StreamWorker {
    /// List, and admit unknown files with the cursor in one write. Returns the candidates:
    /// every listed file while the schema is not resolved yet (inference samples them), else
    /// only the files the state did not know (the listing is checked page by page, so a
    /// round's memory follows the new files, not the size of the prefix).
    pub(super) async fn discover(&self) -> SeamResult<Vec<FileMeta>> {
        let mut candidates = Vec::new();
        // A queue with more messages: an available-now run takes everything in before
        // planning (it must see all that is present at its start), but not more than was
        // queued at its start (plus a round), so a busy producer cannot keep it from ever
        // planning; a continuous one plans a batch between rounds and discovers again at
        // once (`source_more`).
        let budget = match self.available_now {
            true => self.discovery.drain_budget().await,
            false => None,
        };
        let mut received = 0u64;
        loop {
            let (more, got) = self.discover_round(&mut candidates).await?;
            received += got;
            self.source_more
                .store(more, std::sync::atomic::Ordering::Relaxed);
            if !more || !self.available_now || budget.is_some_and(|b| received >= b) {
                break;
            }
        }
        Ok(candidates)
    }

    /// One discovery round: admit, then acknowledge. Returns whether the source has more, and
    /// how many queue messages the round received.
    pub(super) async fn discover_round(
        &self,
        candidates: &mut Vec<FileMeta>,
    ) -> SeamResult<(bool, u64)> {
        let t = Instant::now();
        let t_listing = Utc::now();
        let cursor = self.state.cursor()?;
        let found = if self.schema.is_none() {
            self.discovery.discover(cursor.as_deref()).await?
        } else {
            let state = self.state.clone();
            let overwrites = self.spec.allow_overwrites;
            self.discovery
                .discover_new(cursor.as_deref(), &move |files| {
                    off_async(|| state.may_be_new(files, overwrites))
                })
                .await?
        };
        if found.queue.is_some() {
            failpoint::hit("after_receive");
        }
        let keyed: Vec<_> = found
            .files
            .iter()
            .map(|m| (m.key(self.spec.allow_overwrites), m.clone()))
            .collect();
        let admitted = off_async(|| {
            self.state
                .admit(&keyed, found.cursor.as_deref(), Utc::now())
        })?;
        drop(keyed);
        if found.queue.is_some() {
            failpoint::hit("after_admit");
        }
        self.discovery
            .round_admitted(&self.memory, found.full_listing, t_listing)?;
        self.discovery.acknowledge(found.ack).await?;
        for (reason, path) in &found.passed_over {
            self.events.passed_over(reason, &self.shown(path));
        }
        if let Some(round) = &found.queue {
            self.events.queue_round(round);
            self.note_queue().await?;
        }
        self.events.discovered(
            found.listed as usize,
            admitted,
            found.filtered,
            found.incremental,
            t.elapsed(),
        );
        candidates.extend(found.files);
        self.save_request_counts(false);
        Ok((found.more, found.queue.map_or(0, |q| q.received)))
    }

    /// Keep the stream's request counts (earlier runs plus this one) in the state, at most
    /// every [`QUEUE_NOTE_EVERY`] unless `now`. Best effort: a count is not worth a failure.
    pub fn save_request_counts(&self, now: bool) {
        {
            let mut last = self
                .requests_saved
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if !now && last.is_some_and(|t| t.elapsed() < QUEUE_NOTE_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let mut all = self.requests_base.clone();
        for (op, n) in self.events.request_counts() {
            *all.entry(op.to_string()).or_default() += n;
        }
        if let Err(e) = self.memory.set_request_counts(&all) {
            tracing::debug!(stream = %self.spec.name, error = %e.message, "could not record request counts");
        }
    }

    /// After a queue round, at most every [`QUEUE_NOTE_EVERY`]: record that the queue was
    /// read, and refresh the queue depth gauge.
    pub(super) async fn note_queue(&self) -> SeamResult<()> {
        {
            let mut last = self.queue_noted.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < QUEUE_NOTE_EVERY) {
                return Ok(());
            }
            *last = Some(Instant::now());
        }
        self.memory.set_last_receive(Utc::now())?;
        match self.discovery.queue_depth().await {
            Ok(Some(d)) => self.events.queue_depth(d),
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(stream = %self.spec.name, error = %e, "queue depth unavailable")
            }
        }
        Ok(())
    }

    /// Before the first discovery: the discovery enters its mode from the stream's memory (a
    /// notification or file-events stream entering the mode lists first; a listing stream
    /// notes that it lists, so a later switch lists again), with the
    /// `include_existing_files = false` cutoff fixed at the first start.
    pub(super) fn prepare_discovery(&mut self) -> SeamResult<()> {
        let modified_after = match self.spec.include_existing_files {
            true => None,
            false => Some(self.memory.existing_cutoff(Utc::now())?),
        };
        let list_on_start = match &self.spec.discovery {
            landfall_config::DiscoverySpec::FileEvents(s) => s.list_on_start,
            _ => false,
        };
        self.discovery.prepare(
            &self.memory,
            landfall_core::RunStart {
                available_now: self.available_now,
                modified_after,
                list_on_start,
            },
        )
    }

    /// `discover`, timed, with the ledger's counts reported after it.
    pub(super) async fn timed_discover(&mut self) -> SeamResult<Vec<FileMeta>> {
        let t = Instant::now();
        let found = self.discover().await?;
        *self
            .discover_credit
            .get_mut()
            .unwrap_or_else(|e| e.into_inner()) += t.elapsed();
        if let Ok(s) = self.state.counts() {
            self.events.listing_done(&s);
        }
        Ok(found)
    }

    pub(super) fn expire(&mut self) -> SeamResult<()> {
        let Some(age) = self.spec.max_file_age else {
            return Ok(());
        };
        if self.last_expiry.is_some_and(|t| t.elapsed() < EXPIRY_EVERY) {
            return Ok(());
        }
        self.last_expiry = Some(Instant::now());
        let cutoff = Utc::now() - chrono::Duration::from_std(age).unwrap_or(chrono::Duration::MAX);
        let n = self
            .state
            .expire(cutoff, self.spec.clean_source.is_some())?;
        self.events.files_expired(n);
        Ok(())
    }

    /// Admit the version of `path` that is there now, after its listed version turned out to
    /// have changed: it is ingested in a later batch, even by a run that lists only once
    /// (`available_now`). A file gone meanwhile, or empty, is left to discovery.
    pub(super) async fn readmit(&self, path: &str) -> SeamResult<()> {
        let Ok(object) = object_store::path::Path::parse(path) else {
            return Ok(());
        };
        let now = match self.store().head(&object).await {
            Ok(m) => m,
            Err(object_store::Error::NotFound { .. }) => return Ok(()),
            Err(e) => {
                return Err(SeamError::retryable(format!(
                    "stream `{}`: {}: {e}",
                    self.spec.name,
                    self.shown(path)
                )));
            }
        };
        if now.size == 0 {
            return Ok(());
        }
        let meta = landfall_discovery::file_meta(now);
        let key = meta.key(self.spec.allow_overwrites);
        self.state.admit(&[(key, meta)], None, Utc::now())?;
        Ok(())
    }
}
