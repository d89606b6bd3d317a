//! The schema's lifecycle in a stream: resolved before the first plan (stored, explicit or
//! inferred), checked against the table at every start, grown when a batch meets new columns.

use super::*;

impl StreamWorker {
    /// Make sure the schema is known and the table prepared. False: nothing to infer from yet.
    pub(super) async fn ensure_schema(
        &mut self,
        candidates: &[FileMeta],
    ) -> SeamResult<Option<StreamSchema>> {
        if let Some(s) = &self.schema {
            return Ok(Some(s.clone()));
        }
        // Files admitted by an earlier run whose inference failed (a corrupt sample, a GET
        // error): a queue mode has deleted their messages and recorded the mode, so no round
        // finds them again. The ledger holds them: infer from its pending files.
        let pending;
        let candidates = if candidates.is_empty()
            && self.spec.schema.is_none()
            && self.state.latest_schema_version()?.is_none()
        {
            let state = self.state.clone();
            let sample = self.spec.sample_files.max(1);
            // A page at a time (the ledger may hold millions), until the sample is full.
            pending = off_async(move || -> SeamResult<Vec<FileMeta>> {
                let filter = landfall_core::seams::FileFilter {
                    state: Some(FileState::Discovered),
                    ..Default::default()
                };
                let mut out = Vec::new();
                let mut after = None;
                loop {
                    let page = state.files_page(filter, after.as_ref(), sample, 100_000)?;
                    out.extend(
                        page.files
                            .into_iter()
                            .map(|r| r.meta)
                            .filter(|m| m.size > 0),
                    );
                    match page.next {
                        Some(next) if out.len() < sample => after = Some(next),
                        _ => break,
                    }
                }
                out.truncate(sample);
                Ok(out)
            })?;
            &pending[..]
        } else {
            candidates
        };
        let prefix = self.source.prefix.clone();
        let Some((s, inferred)) = schema::resolve(
            &self.spec,
            self.state.as_ref(),
            self.store(),
            &prefix,
            candidates,
        )
        .await?
        else {
            return Ok(None);
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
        if self.spec.evolution.adds_columns() || s.evolved {
            // The table may lack columns of an evolved schema (a stop between storing the
            // version and the commit that adds them): the next commit adds them.
            self.committer
                .evolve(s.table.clone(), &self.spec.sink.partition_by)
                .await?;
        } else {
            self.committer
                .prepare(s.table.clone(), &self.spec.sink.partition_by)
                .await?;
        }
        crate::protocol::recovery::check_table(
            &self.spec,
            self.state.as_ref(),
            self.committer.as_ref(),
            &self.events,
        )
        .await?;
        self.schema = Some(s.clone());
        Ok(Some(s))
    }

    /// Store the grown schema and prepare the table for it (the next commit adds the columns).
    pub(super) async fn evolve_schema(
        &mut self,
        current: &StreamSchema,
        batch_id: u64,
        new: &NewColumns,
        file: &str,
    ) -> SeamResult<StreamSchema> {
        // A table that cannot change a column's type keeps the stream's types: the values
        // that needed a wider column stay rescued, and only new columns are added. Asked
        // before the version is stored, so the refusal never stops the stream at a start.
        let only_columns;
        let new = if new.has_widenings()
            && let Some(proposed) = schema::grown_schema(current, new)
            && let Some(why) = self.committer.widening_refused(Arc::new(proposed)).await?
        {
            self.events.widening_refused(batch_id, file, &why);
            self.widening_refused = Some(why);
            only_columns = new.without_widenings();
            if schema::grown_schema(current, &only_columns).is_none() {
                // Nothing else changes: the batch is read again on the same schema, its
                // decoders now noting no widenings (the values rescued as in add_new_columns).
                return Ok(current.clone());
            }
            &only_columns
        } else {
            new
        };
        let Some((next, changes)) = schema::evolve(self.state.as_ref(), current, new, file)? else {
            return Err(SeamError::fatal(format!(
                "stream `{}`: batch {batch_id}: new columns {} cannot be added to the schema",
                self.spec.name,
                new.paths().join(", ")
            )));
        };
        self.events.schema_evolved(
            batch_id,
            next.version,
            &changes,
            file,
            &landfall_core::ddl::schema_to_ddl(&next.table),
        );
        self.committer
            .evolve(next.table.clone(), &self.spec.sink.partition_by)
            .await?;
        self.schema = Some(next.clone());
        Ok(next)
    }
}
