//! Admission: which listed files may be new, and admitting them (with the discovery cursor)
//! in one write.

use super::*;

impl<K: Kv> Ledger<K> {
    /// Whether `meta`, not recorded under its own `key`, is known under a key of the other
    /// kind (`allow_overwrites` was toggled): a file ingested under its plain path is not
    /// ingested again because overwrites became allowed, unless its content changed; and with
    /// overwrites off again, any version of a path makes the path known.
    pub(super) fn known_other_kind(
        &self,
        key: &FileKey,
        meta: &FileMeta,
        kinds: (bool, bool),
    ) -> Result<Known, StateError> {
        let (plain, versioned) = kinds;
        let overwrites = key.0 != meta.path;
        if overwrites
            && plain
            && let Some(rec) = self.get_record(&file_key(&FileKey(meta.path.clone())))?
            && rec.meta.same_version(meta)
        {
            return Ok(Known::Yes(Box::new(rec)));
        }
        if versioned {
            // Versioned keys of this path (written under either key format).
            let prefix = file_key(&FileKey(format!("{}@", meta.path)));
            let mut found = None;
            let mut damaged = None;
            self.kv
                .scan(&prefix, &prefix, &mut |k, v| {
                    match self.decode_record(k, v) {
                        Ok(r)
                            if r.meta.path == meta.path
                                && (!overwrites || r.meta.same_version(meta)) =>
                        {
                            found = Some(r)
                        }
                        Ok(_) => {}
                        Err(e) => damaged = Some(e),
                    }
                    found.is_none() && damaged.is_none()
                })
                .map_err(self.backend("scan versions"))?;
            if let Some(e) = damaged {
                return Err(e);
            }
            if let Some(r) = found {
                return Ok(if overwrites {
                    Known::Yes(Box::new(r))
                } else {
                    Known::OtherVersion
                });
            }
        }
        Ok(Known::No)
    }

    /// Whether a listed file is admitted: `None` when it is known, `Some(previous)` when it
    /// is new, with the record it replaces (a path whose listed version changed before it was
    /// read, and was never ingested: its current version is ingested, once, under the same key).
    ///
    /// `stored` is what the ledger holds under the key, read by the caller for a whole page
    /// at once (`stored_records`); the common case (known and not skipped) decodes only the
    /// record's state.
    pub(super) fn admission(
        &self,
        key: &FileKey,
        meta: &FileMeta,
        kinds: (bool, bool),
        stored: Option<Vec<u8>>,
    ) -> Result<Option<Option<Box<FileRecord>>>, StateError> {
        // An empty version not read yet gives way to a version with content (a writer that
        // creates the key empty, then fills it: both events may come in one round, in
        // either order, and the empty one must not hide the content).
        let empty_gives_way = |state: FileState, size: u64| {
            state == FileState::Discovered && size == 0 && meta.size > 0
        };
        let known = match stored {
            Some(raw)
                if self
                    .record_head(&file_key(key), &raw)
                    .is_ok_and(|(state, _, size)| {
                        state != FileState::Skipped && !empty_gives_way(state, size)
                    }) =>
            {
                return Ok(None);
            }
            Some(raw) => Known::Yes(Box::new(self.decode_record(&file_key(key), &raw)?)),
            None => self.known_other_kind(key, meta, kinds)?,
        };
        Ok(match known {
            Known::Yes(rec)
                if rec.state == FileState::Skipped
                    && rec.key == *key
                    && rec.skip.as_ref().is_some_and(|s| {
                        matches!(s.kind, SkipKind::ChangedAfterListing | SkipKind::Empty)
                    })
                    && !rec.meta.same_version(meta) =>
            {
                Some(Some(rec))
            }
            Known::Yes(rec) if rec.key == *key && empty_gives_way(rec.state, rec.meta.size) => {
                Some(Some(rec))
            }
            Known::Yes(_) | Known::OtherVersion => None,
            Known::No => Some(None),
        })
    }

    /// What the ledger holds under each of `keys`, in one batched read.
    fn stored_records<'a>(
        &self,
        keys: impl Iterator<Item = &'a FileKey>,
    ) -> Result<Vec<Option<Vec<u8>>>, StateError> {
        let keys: Vec<Vec<u8>> = keys.map(file_key).collect();
        self.kv.get_many(&keys).map_err(self.backend("read"))
    }

    pub(super) fn key_kinds(&self) -> Result<(bool, bool), StateError> {
        Ok((
            self.get_u64(KEYS_PLAIN)?.is_some(),
            self.get_u64(KEYS_VERSIONED)?.is_some(),
        ))
    }

    pub(super) fn may_be_new_inner(
        &self,
        files: &[FileMeta],
        allow_overwrites: bool,
    ) -> Result<Vec<bool>, StateError> {
        let kinds = self.key_kinds()?;
        let keys: Vec<FileKey> = files.iter().map(|m| m.key(allow_overwrites)).collect();
        let stored = self.stored_records(keys.iter())?;
        files
            .iter()
            .zip(keys.iter().zip(stored))
            .map(|(m, (key, raw))| Ok(self.admission(key, m, kinds, raw)?.is_some()))
            .collect()
    }

    pub(super) fn admit_inner(
        &self,
        files: &[(FileKey, FileMeta)],
        cursor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<u64, StateError> {
        let _g = self.guard();
        let mut seq = self.get_u64(SEQ)?.unwrap_or(0);
        let mut stats = self.stats()?;
        let mut ops = Vec::new();
        let mut admitted = 0;
        let kinds = self.key_kinds()?;
        let mut new_kind = (false, false);
        // One version per key in a call: the first with content, else the first.
        let mut chosen: HashMap<&FileKey, usize> = HashMap::new();
        for (i, (key, meta)) in files.iter().enumerate() {
            let e = chosen.entry(key).or_insert(i);
            if files[*e].1.size == 0 && meta.size > 0 {
                *e = i;
            }
        }
        let stored = self.stored_records(files.iter().map(|(k, _)| k))?;
        for (i, ((key, meta), raw)) in files.iter().zip(stored).enumerate() {
            if chosen.get(key) != Some(&i) {
                continue;
            }
            let Some(previous) = self.admission(key, meta, kinds, raw)? else {
                continue;
            };
            seq += 1;
            let mut rec = FileRecord::discovered(key.clone(), meta.clone(), seq, now);
            if let Some(prev) = previous {
                stats.moved(Some(prev.state), None);
                ops.push(KvOp::Delete(expiry_key(&prev.meta, key)));
                rec.error = Some(if prev.state == FileState::Discovered {
                    // Not read yet: its place in the queue goes to the new version.
                    ops.push(KvOp::Delete(pending_key(prev.seq)));
                    format!(
                        "an earlier empty version (modified {}) was replaced before it was read",
                        prev.meta.modified
                    )
                } else {
                    format!(
                        "an earlier version ({} bytes, modified {}) changed after listing and was skipped",
                        prev.meta.size, prev.meta.modified
                    )
                });
            }
            if key.0 == meta.path {
                new_kind.0 = !kinds.0;
            } else {
                new_kind.1 = !kinds.1;
            }
            ops.push(Self::put_record(file_key(key), &rec));
            ops.push(KvOp::Put(pending_key(seq), key.0.clone().into_bytes()));
            ops.push(KvOp::Put(expiry_key(meta, key), Vec::new()));
            stats.moved(None, Some(FileState::Discovered));
            stats.pending_bytes += meta.size;
            admitted += 1;
        }
        let cursor_changed = match cursor {
            Some(c) => {
                self.kv
                    .get(CURSOR)
                    .map_err(self.backend("read"))?
                    .as_deref()
                    != Some(c.as_bytes())
            }
            None => false,
        };
        if admitted == 0 && !cursor_changed {
            return Ok(0);
        }
        if let Some(c) = cursor {
            ops.push(KvOp::Put(CURSOR.to_vec(), c.as_bytes().to_vec()));
        }
        if new_kind.0 {
            ops.push(Self::put_json(KEYS_PLAIN.to_vec(), &1u64));
        }
        if new_kind.1 {
            ops.push(Self::put_json(KEYS_VERSIONED.to_vec(), &1u64));
        }
        ops.push(Self::put_json(SEQ.to_vec(), &seq));
        ops.push(Self::put_json(STATS.to_vec(), &stats));
        self.write(ops)?;
        Ok(admitted)
    }
}
