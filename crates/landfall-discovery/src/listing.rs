//! Directory listing discovery: one flat recursive LIST of the source prefix per round (not
//! one call per directory), then the filters, sorted by path so discovery order is stable
//! across stores.
//!
//! The listing is consumed as a stream and checked against the state a page (1,000 files) at
//! a time: a round holds one page and the files new to the stream, never the whole prefix, so
//! memory does not grow with the number of files already ingested.
//!
//! Skipped without being tracked: directory markers, hidden paths (any level starting with `_`
//! or `.`, as Spark does: `_SUCCESS`, `.crc`, `_landfall/`), files outside the glob or the
//! modification window, and files older than `max_file_age`.
//!
//! Passed over with a counted reason (not tracked, so a file that gets content later is still
//! ingested): zero-byte objects (`empty`; this includes S3 console "folder/" markers, whose
//! trailing slash object_store strips), and S3 keys object_store cannot address
//! (`unrepresentable_key`, e.g. `a//b`: it could be neither read nor committed).

use crate::s3_list::{Listed, S3Lister};
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use landfall_core::seams::{NewFilter, SeamResult};
use landfall_core::{Discovery, DiscoveryBatch, FileMeta, SeamError};
use object_store::ObjectStore;
use object_store::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Which listed files are candidates.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub glob: Option<globset::GlobMatcher>,
    pub modified_after: Option<DateTime<Utc>>,
    pub modified_before: Option<DateTime<Utc>>,
    pub max_file_age: Option<Duration>,
}

impl Filters {
    /// Whether a file at `relative` (below the source) modified at `modified` is a candidate.
    pub fn accepts(&self, relative: &str, modified: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        if relative.is_empty() || relative.ends_with('/') {
            return false;
        }
        if relative
            .split('/')
            .any(|part| part.starts_with('_') || part.starts_with('.'))
        {
            return false;
        }
        if let Some(g) = &self.glob {
            let name = relative.rsplit('/').next().unwrap_or(relative);
            if !g.is_match(relative) && !g.is_match(name) {
                return false;
            }
        }
        if self.modified_after.is_some_and(|t| modified <= t)
            || self.modified_before.is_some_and(|t| modified >= t)
        {
            return false;
        }
        if let Some(age) = self.max_file_age
            && let Ok(age) = chrono::Duration::from_std(age)
            && modified < now - age
        {
            return false;
        }
        true
    }
}

pub struct ListingDiscovery {
    stream: String,
    store: Arc<dyn ObjectStore>,
    /// S3 sources are listed with our own ListObjectsV2 (see [`S3Lister`]).
    s3: Option<S3Lister>,
    prefix: Path,
    filters: Filters,
}

impl ListingDiscovery {
    pub fn new(stream: &str, store: Arc<dyn ObjectStore>, prefix: Path, filters: Filters) -> Self {
        ListingDiscovery {
            stream: stream.to_string(),
            store,
            s3: None,
            prefix,
            filters,
        }
    }

    /// List with `lister` instead of the store (S3 sources).
    pub fn with_s3_lister(mut self, lister: Option<S3Lister>) -> Self {
        self.s3 = lister;
        self
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    pub fn filters(&self) -> &Filters {
        &self.filters
    }

    /// Narrow the modification window (used for `include_existing_files = false`).
    pub fn set_modified_after(&mut self, t: DateTime<Utc>) {
        self.filters.modified_after = Some(self.filters.modified_after.map_or(t, |x| x.max(t)));
    }
}

/// Listed candidates are checked against the state this many at a time.
const PAGE: usize = 1000;

impl ListingDiscovery {
    /// One pass over the listing stream: filter, and keep what `may_be_new` does not rule out,
    /// a page at a time, so the round holds one page plus the new files.
    async fn list(&self, may_be_new: NewFilter<'_>) -> SeamResult<DiscoveryBatch> {
        let prefix = (!self.prefix.as_ref().is_empty()).then_some(&self.prefix);
        let mut listing = match &self.s3 {
            Some(s3) => s3.list(prefix),
            None => self
                .store
                .list(prefix)
                .map(|r| r.map(Listed::Object).map_err(|e| e.to_string()))
                .boxed(),
        };
        let now = Utc::now();
        let mut batch = DiscoveryBatch::default();
        let mut page = Vec::with_capacity(PAGE);
        let mut last: Option<String> = None;
        loop {
            let next = listing.try_next().await.map_err(|e| {
                SeamError::retryable(format!(
                    "stream `{}`: listing {}: {e}",
                    self.stream, self.prefix
                ))
            })?;
            let m = match next {
                None => break,
                Some(Listed::Object(m)) => m,
                Some(Listed::Unrepresentable(key, modified)) => {
                    batch.listed += 1;
                    let relative = crate::relative_path(&self.prefix, &key);
                    if self.filters.accepts(relative, modified, now) {
                        batch.passed_over.push(("unrepresentable_key", key));
                    } else {
                        batch.filtered += 1;
                    }
                    continue;
                }
            };
            batch.listed += 1;
            let path = m.location.as_ref();
            let relative = crate::relative_path(&self.prefix, path);
            if !self.filters.accepts(relative, m.last_modified, now) {
                batch.filtered += 1;
            } else if m.size == 0 {
                batch.passed_over.push(("empty", path.to_string()));
            } else {
                if last.as_deref().is_none_or(|l| l < path) {
                    last = Some(path.to_string());
                }
                page.push(crate::file_meta(m));
                if page.len() == PAGE {
                    keep_new(&mut page, &mut batch.files, may_be_new)?;
                }
            }
        }
        keep_new(&mut page, &mut batch.files, may_be_new)?;
        batch.files.sort_by(|a, b| a.path.cmp(&b.path));
        batch.cursor = last;
        batch.full_listing = true;
        Ok(batch)
    }
}

/// Move the files of `page` that may be new into `out`.
fn keep_new(
    page: &mut Vec<FileMeta>,
    out: &mut Vec<FileMeta>,
    may_be_new: NewFilter<'_>,
) -> SeamResult<()> {
    if page.is_empty() {
        return Ok(());
    }
    let keep = may_be_new(page)?;
    out.extend(
        page.drain(..)
            .zip(keep.into_iter().chain(std::iter::repeat(true)))
            .filter_map(|(m, k)| k.then_some(m)),
    );
    Ok(())
}

#[async_trait::async_trait]
impl Discovery for ListingDiscovery {
    async fn discover(&self, _cursor: Option<&str>) -> SeamResult<DiscoveryBatch> {
        self.list(&|files| Ok(vec![true; files.len()])).await
    }

    async fn discover_new(
        &self,
        _cursor: Option<&str>,
        may_be_new: NewFilter<'_>,
    ) -> SeamResult<DiscoveryBatch> {
        self.list(may_be_new).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn filters() {
        let now = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
        let glob = globset::Glob::new("*.json").unwrap().compile_matcher();
        let f = Filters {
            glob: Some(glob),
            modified_after: Some(now - chrono::Duration::days(10)),
            modified_before: None,
            max_file_age: None,
        };
        assert!(f.accepts("a/b.json", now, now));
        assert!(!f.accepts("a/b.csv", now, now));
        assert!(!f.accepts("_SUCCESS", now, now));
        assert!(!f.accepts("a/.b.json.crc", now, now));
        assert!(!f.accepts("_landfall/x.json", now, now));
        assert!(!f.accepts("a/b.json", now - chrono::Duration::days(11), now));
        let f = Filters {
            max_file_age: Some(Duration::from_secs(14 * 86400)),
            ..Default::default()
        };
        assert!(!f.accepts("old.json", now - chrono::Duration::days(15), now));
        assert!(f.accepts("new.json", now - chrono::Duration::days(13), now));
    }
}
