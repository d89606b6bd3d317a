//! One attempt of a batch (docs/exactly-once.md, steps 3 to 6), driven through the protocol's
//! attempt types ([`crate::protocol::attempt`]): read the plan's files, write and stage data
//! files (each name recorded before the file exists), skip unreadable files by policy, keep
//! bad records, commit with the batch id, and record; or settle a batch an earlier attempt
//! landed.

use super::*;
use crate::protocol::attempt::{Commit, Recorded, Started};
use landfall_core::FileKey;

impl StreamWorker {
    /// Whether a file that could not be read may be skipped under the stream's options.
    pub(super) fn may_skip(&self, reason: &SkipReason) -> bool {
        match reason.kind {
            SkipKind::Missing => self.spec.ignore_missing_files,
            SkipKind::Corrupt => self.spec.ignore_corrupt_files,
            // What was listed no longer exists: nothing to ingest under this identity.
            SkipKind::ChangedAfterListing | SkipKind::Manual => true,
            // A limit of the format: reading it cannot succeed.
            SkipKind::TooLarge => true,
            // Nothing to read; a version with content is a new file.
            SkipKind::Empty => true,
        }
    }

    /// The stop message for a file that may not be skipped: what happened and the two ways on.
    pub(super) fn unreadable_error(
        &self,
        batch_id: u64,
        path: &str,
        reason: &SkipReason,
    ) -> SeamError {
        let option = match reason.kind {
            SkipKind::Missing => "ignore_missing_files",
            _ => "ignore_corrupt_files",
        };
        SeamError::fatal(format!(
            "stream `{s}`: batch {batch_id}: {path}: {reason}. The stream stopped; to go on without this file, run `landfall skip {s} {path}` (or set {option} = true to skip such files), then start it again",
            s = self.spec.name,
            path = self.shown(path),
        ))
    }

    /// Write the batch's malformed records to `bad_records_path` as JSON lines, one file per
    /// batch (`<path>/<stream>/batch_id=<id>.json`). A failed write fails the attempt.
    pub(super) async fn write_bad_records(
        &self,
        batch_id: u64,
        records: &[landfall_core::MalformedRecord],
        over: u64,
        attempt: u32,
    ) -> SeamResult<()> {
        let Some((location, options)) = &self.spec.bad_records else {
            return Ok(());
        };
        // Only a later attempt can find a file of an earlier one to take back.
        if records.is_empty() && attempt <= 1 {
            return Ok(());
        }
        let failed = |e: String| {
            SeamError::retryable(format!(
                "stream `{}`: batch {batch_id}: writing bad records to {}: {e}",
                self.spec.name,
                location.shown()
            ))
        };
        let (store, prefix) =
            landfall_discovery::open_store(&location.url, options.iter()).map_err(failed)?;
        let mut body = Vec::new();
        let mut over = over;
        for r in records {
            if body.len() >= MAX_BAD_RECORDS_BYTES {
                over += 1;
                continue;
            }
            let line = serde_json::json!({
                "stream": self.spec.name,
                "batch_id": batch_id,
                "path": r.path,
                "line": r.line,
                "offset": r.offset,
                "reason": r.reason,
                "record": r.record,
            });
            serde_json::to_writer(&mut body, &line).expect("JSON serialises");
            body.push(b'\n');
        }
        let path = prefix
            .clone()
            .join(self.spec.name.as_str())
            .join(format!("batch_id={batch_id}.json").as_str());
        if records.is_empty() {
            // An earlier attempt of this batch may have written one (with a file skipped
            // since): the batch has none now.
            return match store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(failed(e.to_string())),
            };
        }
        store
            .put(&path, body.into())
            .await
            .map_err(|e| failed(e.to_string()))?;
        if over > 0 {
            tracing::warn!(stream = %self.spec.name, batch_id, written = records.len(), not_written = over, "more malformed records than one batch's bad-records file keeps");
        }
        tracing::info!(stream = %self.spec.name, batch_id, records = records.len(), file = %path, "bad records written");
        Ok(())
    }

    /// The stop message of `fail_on_new_columns`.
    pub(super) fn new_columns_error(
        &self,
        batch_id: u64,
        file: &str,
        new: &NewColumns,
    ) -> SeamError {
        SeamError::fatal(format!(
            "stream `{s}`: batch {batch_id}: {file} has columns the schema lacks: {cols} (schema_evolution_mode = \"fail_on_new_columns\"). The stream stopped; set schema_evolution_mode = \"add_new_columns\" (the table gains them) or \"rescue\" (they go to the rescued-data column), or run `landfall skip {s} {file}`, then start it again",
            s = self.spec.name,
            cols = new.paths().join(", "),
        ))
    }

    /// Steps 3 to 6 for one recorded plan. Files skipped earlier (by an earlier attempt, or by
    /// hand) are not read: the batch commits without them. A batch that met new columns
    /// under `add_new_columns` reads on without writing (to learn every new column of the
    /// batch), discards the attempt and asks for the schema to grow ([`BatchEnd::Evolve`]).
    pub(super) async fn run_batch(
        &self,
        plan: BatchPlan,
        schema: &StreamSchema,
    ) -> SeamResult<BatchEnd> {
        let started = Instant::now();
        let (state, committer) = (self.state.as_ref(), self.committer.as_ref());
        let (mut attempt, to_read) = Started::start(state, &plan)?;
        let batch_id = attempt.batch_id();
        let read = self.read_attempt(&mut attempt, to_read, schema).await;
        // Per-file counts, once the attempt is known not to be read again.
        if !(read.written.is_ok() && read.evolution.is_some()) {
            for (shown, n, malformed, rescued) in &read.decoded_files {
                self.events
                    .file_decoded(batch_id, shown, *n, *malformed, *rescued);
            }
        }
        let staged = match read.written {
            Ok(_) if read.evolution.is_some() => {
                attempt.discard(&self.spec.name, state, committer).await;
                let (new, file) = read.evolution.expect("checked");
                return Ok(BatchEnd::Evolve { new, file });
            }
            Ok(files) => attempt.staged(files, read.rows),
            Err(e) => {
                self.events.batch_failed(batch_id, &e);
                // Nothing was committed: this attempt's files can go now (recovery would
                // remove them too, from the ledger's list). The batch's own error is what the
                // user must see.
                attempt.discard(&self.spec.name, state, committer).await;
                return Err(e);
            }
        };
        // Written (again, whole, under the same name) by every attempt before it commits.
        if let Err(e) = self
            .write_bad_records(
                batch_id,
                &read.bad_records,
                read.bad_records_over,
                staged.attempt(),
            )
            .await
        {
            self.events.batch_failed(batch_id, &e);
            staged.discard(&self.spec.name, state, committer).await;
            return Err(e);
        }
        let committing = Instant::now();
        let landed = match staged.commit(state, committer).await {
            Ok(Commit::Landed(landed)) => landed,
            Ok(Commit::LandedBefore { version }) => {
                crate::protocol::settle::settle_landed(
                    &self.spec.name,
                    state,
                    committer,
                    &self.events,
                    batch_id,
                    Some(version),
                )
                .await?;
                return Ok(BatchEnd::Committed);
            }
            Err(e) => {
                self.events.batch_failed(batch_id, &e);
                return Err(e);
            }
        };
        let commit_took = committing.elapsed();
        let Recorded {
            plan,
            receipt,
            mut timings,
        } = landed.record(state, committer, &self.events).await?;
        let ms = |d: Duration| d.as_millis() as u64;
        // The listing before this batch is credited to it once; later batches of the same
        // backlog did not list.
        let discover = std::mem::take(
            &mut *self
                .discover_credit
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        timings.durations = PhaseDurations {
            discover: ms(discover),
            plan: ms(self.plan_took),
            read: ms(read.read_loop.saturating_sub(read.writing)),
            write: ms(read.writing),
            commit: ms(commit_took),
            total: ms(started.elapsed() + discover + self.plan_took),
        };
        self.events.batch_committed(
            &plan,
            &receipt,
            &timings,
            state.counts().ok().as_ref(),
            &committer.location(),
        );
        Ok(BatchEnd::Committed)
    }

    /// Step 4 for one attempt: read its files (fetching and decoding in their own task,
    /// ahead of the writer), write and stage data files, skip unreadable files by policy, and
    /// collect bad records and new columns.
    async fn read_attempt(
        &self,
        attempt: &mut Started,
        to_read: Vec<(FileKey, FileMeta)>,
        schema: &StreamSchema,
    ) -> AttemptRead {
        let batch_id = attempt.batch_id();
        let attempt_no = attempt.attempt();
        let timings = attempt.timings_mut();
        let state = self.state.clone();
        let hook: StagedHook = Arc::new(move |path: &str| state.record_staged(batch_id, path));
        let mut rows = 0u64;
        // New columns met under add_new_columns, and the first file holding them.
        let mut evolution: Option<(NewColumns, String)> = None;
        let mut decoded_files: Vec<(String, u64, u64, u64)> = Vec::new();
        let mut bad_records: Vec<landfall_core::MalformedRecord> = Vec::new();
        let mut bad_records_over = 0u64;
        let mut bad_bytes = 0usize;
        // Time the writer spent writing; the rest of the read loop is waiting for rows.
        let mut writing = Duration::ZERO;
        let reading = Instant::now();
        // Held outside the read loop so that a loop that fails (a file that may not be
        // skipped, new columns under fail_on_new_columns, a read side that died) abandons the
        // uploads still open instead of leaving them to the store.
        let mut open_writer: Option<Box<dyn landfall_core::BatchWriter>> = None;
        let written: SeamResult<Vec<_>> = async {
            let writer = open_writer.insert(
                self.committer
                    .writer(batch_id, attempt_no, hook)
                    .await?,
            );
            // Fetching and decoding run in their own task, ahead of the writer: decoding one
            // file overlaps encoding the previous one, and object-store latency overlaps both.
            let job = DecodeJob {
                format: crate::decode_options::file_format(self.spec.format),
                options: crate::decode_options::decode_options(
                    &self.spec,
                    schema::policy(&self.spec, schema, self.widening_refused.is_none()),
                ),
                max_file_size: (self.spec.format == landfall_config::Format::BinaryFile)
                    .then_some(self.spec.binary_max_size),
                schema: schema.clone(),
                partition_by: self.spec.sink.partition_by.clone(),
                partition_style: match self.spec.sink.format {
                    landfall_config::SinkFormat::Delta => crate::partition::Style::Delta,
                    landfall_config::SinkFormat::Parquet => crate::partition::Style::Hive,
                },
                prefix: self.source.prefix.clone(),
                source: self.spec.source.url.clone(),
            };
            let expected = to_read.len();
            let sizes: std::collections::HashMap<String, u64> =
                to_read.iter().map(|(_, m)| (m.path.clone(), m.size)).collect();
            let mut decoded = pipeline::spawn(job, self.store().clone(), to_read);
            let mut files_done = 0usize;
            while let Some(item) = decoded.recv().await {
                match item? {
                    Decoded::Malformed(records) => {
                        for r in records {
                            let size = r.path.len()
                                + r.reason.len()
                                + r.record.as_ref().map_or(0, String::len);
                            if bad_records.len() < MAX_BAD_RECORDS
                                && bad_bytes + size <= MAX_BAD_RECORDS_BYTES
                            {
                                bad_bytes += size;
                                bad_records.push(r);
                            } else {
                                bad_records_over += 1;
                            }
                        }
                    }
                    // Rows decoded on a schema about to grow are read again after it did.
                    Decoded::Rows(..) if evolution.is_some() => {}
                    Decoded::Rows(values, part) => {
                        let t = Instant::now();
                        writer.write(&values, part).await?;
                        writing += t.elapsed();
                    }
                    Decoded::FileDone { path, rows: n, malformed, rescued, new_columns } => {
                        let shown = self.shown(&path);
                        // Reported once the batch is known not to be read again.
                        decoded_files.push((shown.clone(), n, malformed, rescued));
                        let found = NewColumns::from_fields(&new_columns);
                        if !found.is_empty() && schema::grown_schema(schema, &found).is_some() {
                            match self.spec.evolution {
                                EvolutionMode::FailOnNewColumns => {
                                    return Err(self.new_columns_error(batch_id, &shown, &found));
                                }
                                m if m.adds_columns() => {
                                    let (all, _) = evolution.get_or_insert_with(|| {
                                        (NewColumns::default(), shown.clone())
                                    });
                                    all.absorb(&found);
                                }
                                _ => {}
                            }
                        }
                        timings.files += 1;
                        timings.bytes += sizes.get(&path).copied().unwrap_or(0);
                        rows += n;
                        files_done += 1;
                    }
                    Decoded::FileUnreadable { key, path, reason, partial } => {
                        if !self.may_skip(&reason) {
                            return Err(self.unreadable_error(batch_id, &path, &reason));
                        }
                        // Durable before the commit: every later attempt of this batch, and
                        // recovery, leave the file out too.
                        self.state.skip_file(&key, reason.clone(), Utc::now())?;
                        self.events.file_skipped(batch_id, &self.shown(&path), &reason);
                        if reason.kind == SkipKind::ChangedAfterListing {
                            self.readmit(&path).await?;
                        }
                        if partial {
                            return Err(SeamError::retryable(format!(
                                "stream `{}`: batch {batch_id}: {} was skipped after part of it was read; the batch runs again without it",
                                self.spec.name,
                                self.shown(&path)
                            )));
                        }
                        files_done += 1;
                    }
                }
            }
            // The channel also closes if the read task died (a panic): never commit a batch
            // that did not read every one of its files.
            if files_done != expected {
                return Err(SeamError::retryable(format!(
                    "stream `{}`: batch {batch_id}: the read side stopped after {files_done} of {expected} files",
                    self.spec.name,
                )));
            }
            let t = Instant::now();
            let staged = open_writer.take().expect("made above").finish().await;
            writing += t.elapsed();
            staged
        }
        .await;
        if let Some(writer) = open_writer.take() {
            writer.abort().await;
        }
        AttemptRead {
            written,
            rows,
            evolution,
            decoded_files,
            bad_records,
            bad_records_over,
            writing,
            read_loop: reading.elapsed(),
        }
    }
}

/// What reading an attempt's files came to.
struct AttemptRead {
    /// The staged data files, or why the attempt failed.
    written: SeamResult<Vec<landfall_core::StagedFile>>,
    rows: u64,
    /// New columns met under `add_new_columns`, and the first file holding them.
    evolution: Option<(NewColumns, String)>,
    /// Per file: its path as shown, rows, malformed rows, rescued rows.
    decoded_files: Vec<(String, u64, u64, u64)>,
    bad_records: Vec<landfall_core::MalformedRecord>,
    bad_records_over: u64,
    /// Time the writer spent writing, and the whole read loop.
    writing: Duration,
    read_loop: Duration,
}

/// At most this many malformed records go to one batch's bad-records file (the rest are
/// counted, and logged as such).
const MAX_BAD_RECORDS: usize = 100_000;
/// ...and at most about this many bytes.
const MAX_BAD_RECORDS_BYTES: usize = 256 << 20;

/// How one attempt of a batch ended.
pub(super) enum BatchEnd {
    Committed,
    /// The batch met columns the schema lacks (`add_new_columns`): grow it and read again.
    Evolve {
        new: NewColumns,
        file: String,
    },
}
