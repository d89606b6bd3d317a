//! Reading the ledger: file records whole, by page, or as an iterator that reads a page at a
//! time; and `max_file_age` expiry over the expiry index.

use super::*;

impl<K: Kv> Ledger<K> {
    pub(super) fn files_inner(
        &self,
        state: Option<FileState>,
    ) -> Result<Vec<FileRecord>, StateError> {
        let mut out = Vec::new();
        let mut err = None;
        self.kv
            .scan(b"f/", b"f/", &mut |k, v| match self.decode_record(k, v) {
                Ok(rec) => {
                    if state.is_none_or(|s| s == rec.state) {
                        out.push(rec);
                    }
                    true
                }
                Err(e) => {
                    err = Some(e);
                    false
                }
            })
            .map_err(self.backend("scan files"))?;
        if let Some(e) = err {
            return Err(e);
        }
        out.sort_by_key(|r| r.seq);
        Ok(out)
    }

    /// One page of file records in key order (see [`StateStore::files_page`]). The scan
    /// seeks to the key after `after` and reads one record past the page, undecoded, to tell
    /// whether there is a next page; with a filter, a record is decoded whole only if it passes.
    pub(super) fn files_page_inner(
        &self,
        filter: FileFilter,
        after: Option<&FileKey>,
        limit: usize,
        max_scanned: u64,
    ) -> Result<FilesPage, StateError> {
        let (limit, max_scanned) = (limit.max(1), max_scanned.max(1));
        let from = match after {
            // The least key after `f/<after>`.
            Some(k) => {
                let mut from = file_key(k);
                from.push(0);
                from
            }
            None => b"f/".to_vec(),
        };
        let mut page = FilesPage::default();
        let mut last_key = Vec::new();
        let mut more = false;
        let mut err = None;
        self.kv
            .scan(b"f/", &from, &mut |k, v| {
                if page.files.len() >= limit || page.scanned >= max_scanned {
                    more = true;
                    return false;
                }
                page.scanned += 1;
                last_key.clear();
                last_key.extend_from_slice(k);
                let passes = filter.is_all()
                    || match self.record_head(k, v) {
                        Ok((state, seq, _)) => filter.passes(state, seq),
                        Err(e) => {
                            err = Some(e);
                            return false;
                        }
                    };
                if passes {
                    match self.decode_record(k, v) {
                        Ok(rec) => page.files.push(rec),
                        Err(e) => {
                            err = Some(e);
                            return false;
                        }
                    }
                }
                true
            })
            .map_err(self.backend("scan files"))?;
        if let Some(e) = err {
            return Err(e);
        }
        // `more`: a record follows the last one read (`last_key`, never empty then).
        page.next = more.then(|| FileKey(String::from_utf8_lossy(&last_key[2..]).into_owned()));
        Ok(page)
    }

    /// Every file record passing `filter`, in key order, read a page at a time: memory stays
    /// that of one page however many files the ledger tracks (`landfall state` prints 10 million
    /// rows in constant memory). A record written or removed while the iteration runs may or
    /// may not be seen; no record is seen twice.
    pub fn file_records(&self, filter: FileFilter) -> FileRecords<'_, K> {
        FileRecords {
            ledger: self,
            filter,
            page: Vec::new().into_iter(),
            next: None,
            done: false,
        }
    }

    pub(super) fn expire_inner(
        &self,
        cutoff: DateTime<Utc>,
        keep_unarchived: bool,
    ) -> Result<u64, StateError> {
        let _g = self.guard();
        let end = format!("x/{:020}", cutoff.timestamp_millis().max(0));
        let mut index = Vec::new();
        self.kv
            .scan(b"x/", b"x/", &mut |k, _| {
                if k >= end.as_bytes() {
                    return false;
                }
                index.push(k.to_vec());
                true
            })
            .map_err(self.backend("scan expiry index"))?;
        let mut stats = self.stats()?;
        let mut ops = Vec::new();
        let mut expired = 0;
        for ik in index {
            let text = String::from_utf8_lossy(&ik).into_owned();
            // x/<20 digits>/<key>
            let key = FileKey(text[23..].to_string());
            match self.get_record(&file_key(&key))? {
                Some(rec) if rec.state.is_terminal() => {
                    let entry = super::archive::archive_entry(&rec);
                    let indexed = match &entry {
                        Some(e) => self.kv.get(e).map_err(self.backend("read"))?.is_some(),
                        None => false,
                    };
                    if keep_unarchived && indexed {
                        // Waits for clean_source; expired once archived.
                        continue;
                    }
                    stats.moved(Some(rec.state), None);
                    if let Some(entry) = entry.filter(|_| indexed) {
                        ops.push(KvOp::Delete(entry));
                    }
                    ops.push(KvOp::Delete(file_key(&key)));
                    ops.push(KvOp::Delete(ik));
                    expired += 1;
                }
                Some(_) => {}
                None => ops.push(KvOp::Delete(ik)),
            }
        }
        if ops.is_empty() {
            return Ok(0);
        }
        ops.push(Self::put_json(STATS.to_vec(), &stats));
        self.write(ops)?;
        Ok(expired)
    }
}

/// Records per read of [`Ledger::file_records`].
const RECORDS_PER_READ: usize = 1_000;

/// The iterator of [`Ledger::file_records`]. After an error it ends.
pub struct FileRecords<'a, K: Kv> {
    ledger: &'a Ledger<K>,
    filter: FileFilter,
    page: std::vec::IntoIter<FileRecord>,
    /// Where the next read starts after; `None` before the first.
    next: Option<FileKey>,
    done: bool,
}

impl<K: Kv> Iterator for FileRecords<'_, K> {
    type Item = Result<FileRecord, StateError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(rec) = self.page.next() {
                return Some(Ok(rec));
            }
            if self.done {
                return None;
            }
            let page = match self.ledger.files_page_inner(
                self.filter,
                self.next.as_ref(),
                RECORDS_PER_READ,
                // A read that finds nothing passing the filter still ends, and goes on.
                (RECORDS_PER_READ * 100) as u64,
            ) {
                Ok(p) => p,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            self.done = page.next.is_none();
            self.next = page.next;
            self.page = page.files.into_iter();
        }
    }
}
