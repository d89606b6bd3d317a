//! Directory listing discovery: one flat recursive LIST of the source prefix per round (not
//! one call per directory), then the filters, sorted by path so discovery order is stable
//! across stores.
//!
//! A round is either a full listing of the prefix or an incremental one, of the keys after the
//! discovery cursor only (S3 `start-after`, object_store's `list_with_offset`). Which one is
//! decided by `incremental_listing` (`auto`, `on`, `off`) and `full_listing_interval` as
//! [`crate::incremental`] describes: in short, the first listing of a run, a requested
//! backfill and every `full_listing_interval`-th round are full; `on` lists incrementally in
//! between; `auto` does too while the new files full listings find all sort after the cursor
//! they started from, and lists in full for the rest of the run from the first full listing
//! that finds a new file at or before it. Files an incremental listing cannot see (keys before
//! the cursor) are found by the next full listing, late but never lost.
//!
//! The cursor returned with a round is the greatest path of the candidate files seen (filtered
//! out objects excluded), never lower than the stored one: every file the ledger
//! knows sorts at or before it. So a listed file after the stored cursor is new without asking
//! the ledger, and only the files at or before it are looked up: an incremental listing does
//! no lookup at all, a full listing one per file the cursor cannot rule out.
//!
//! The listing is consumed as a stream and checked against the state a page (1,000 files) at
//! a time: a round holds one page and the files new to the stream, never the whole prefix, so
//! memory does not grow with the number of files already ingested.
//!
//! Skipped without being tracked: directory markers, hidden paths (any level starting with `_`
//! or `.`, as Spark does: `_SUCCESS`, `.crc`, `_landfall/`), files outside the glob or the
//! modification window, and files older than `max_file_age`.
//!
//! Zero-byte objects are candidates like any file: the stream records them `skipped` with
//! reason `empty` (so `landfall state` accounts for every file it saw), and a later version of
//! the key with content is a new file to the ledger. (Directory markers, `folder/` keys, are
//! passed over by the raw listers; where object_store lists, it strips their slash, and such a
//! marker is recorded as an empty file.)
//!
//! Passed over with a counted reason (not tracked): S3 keys object_store cannot address
//! (`unrepresentable_key`, e.g. `a//b`: it could be neither read nor committed).

use crate::incremental::{FullListingOutcome, Layout, ListingKind, ListingPolicy};
use crate::raw_list::{Listed, RawLister};
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use landfall_core::seams::{NewFilter, SeamResult};
use landfall_core::{
    Discovery, DiscoveryBatch, DiscoveryMemory, FileMeta, IncrementalListing, RecordedMode,
    RunStart, SeamError,
};
use object_store::ObjectStore;
use object_store::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which listed files are candidates.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub glob: Option<globset::GlobMatcher>,
    pub modified_after: Option<DateTime<Utc>>,
    pub modified_before: Option<DateTime<Utc>>,
    pub max_file_age: Option<Duration>,
    /// Keep paths with a segment starting with `_` or `.` (a location's listing: the streams
    /// under it decide what is hidden to them).
    pub keep_hidden: bool,
}

impl Filters {
    /// Whether a file at `relative` (below the source) modified at `modified` is a candidate.
    pub fn accepts(&self, relative: &str, modified: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        if relative.is_empty() || relative.ends_with('/') {
            return false;
        }
        if !self.keep_hidden
            && relative
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
    /// Cloud sources are listed with our own list requests (see [`RawLister`]).
    raw: Option<RawLister>,
    prefix: Path,
    filters: Filters,
    /// Full or incremental, round by round.
    policy: Mutex<ListingPolicy>,
    /// The stored cursor does not bound the known keys (files were admitted from a queue,
    /// which does not move it): the next round lists in full and looks every file up.
    distrust_cursor: std::sync::atomic::AtomicBool,
    /// The store's own `list_with_offset` may be used (a local directory: object_store
    /// walks the whole tree either way, but checks each entry's name against the offset
    /// before it stats it, so the files before the cursor cost a directory entry each, not
    /// three `statx` calls).
    store_offset: bool,
}

impl ListingDiscovery {
    /// Listing in full every round until [`ListingDiscovery::with_incremental`] says otherwise.
    pub fn new(stream: &str, store: Arc<dyn ObjectStore>, prefix: Path, filters: Filters) -> Self {
        ListingDiscovery {
            stream: stream.to_string(),
            store,
            raw: None,
            prefix,
            filters,
            policy: Mutex::new(ListingPolicy::new(IncrementalListing::Off, 1)),
            distrust_cursor: std::sync::atomic::AtomicBool::new(false),
            store_offset: false,
        }
    }

    /// Incremental listings ask the store for the keys after the cursor
    /// (`list_with_offset`) instead of filtering its whole listing: for local directories,
    /// where object_store's offset is exact and saves the stat calls of every older file.
    pub fn with_store_offset(mut self, use_it: bool) -> Self {
        self.store_offset = use_it;
        self
    }

    /// List with `lister` instead of the store (cloud sources).
    pub fn with_raw_lister(mut self, lister: Option<RawLister>) -> Self {
        self.raw = lister;
        self
    }

    /// `incremental_listing` and `full_listing_interval` (see [`crate::incremental`]).
    pub fn with_incremental(mut self, mode: IncrementalListing, full_interval: u32) -> Self {
        self.policy = Mutex::new(ListingPolicy::new(mode, full_interval));
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

    fn policy(&self) -> std::sync::MutexGuard<'_, ListingPolicy> {
        self.policy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stored cursor if it lies under the source prefix (a cursor from another prefix,
    /// after the source changed, says nothing about this one).
    /// Ignore the stored cursor for the next round (see `distrust_cursor`): a stream back
    /// from notification mode.
    pub fn distrust_cursor(&self) {
        self.distrust_cursor
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn usable_cursor<'a>(&self, cursor: Option<&'a str>) -> Option<&'a str> {
        if self
            .distrust_cursor
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return None;
        }
        let c = cursor?;
        let p = self.prefix.as_ref();
        let under = p.is_empty()
            || c.strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1);
        (under && Path::parse(c).is_ok()).then_some(c)
    }
}

/// Listed candidates are checked against the state this many at a time.
const PAGE: usize = 1000;

/// One listing pass: what it found, and for a full listing from a cursor with ledger checks,
/// what it found new relative to that cursor.
struct Pass {
    batch: DiscoveryBatch,
    outcome: Option<FullListingOutcome>,
}

impl ListingDiscovery {
    /// The listing stream: after `cursor` when `incremental`, else the whole prefix.
    fn listing(
        &self,
        incremental: bool,
        cursor: Option<&str>,
    ) -> futures::stream::BoxStream<'static, Result<Listed, String>> {
        let prefix = (!self.prefix.as_ref().is_empty()).then_some(&self.prefix);
        let after = cursor.filter(|_| incremental);
        match (&self.raw, after) {
            (Some(raw), after) => raw.list_after(prefix, after),
            // Stores listed by object_store (local directories, and the configurations the
            // raw lister leaves to it): the whole prefix, filtered after the cursor here.
            // object_store's `list_with_offset` is not trusted for cloud stores: on Fabric
            // OneLake its `startFrom` returns nothing (arrow-rs-object-store#695). A local
            // directory's is exact (`path <= offset` skipped, the same order as here).
            (None, Some(c)) if self.store_offset && Path::parse(c).is_ok() => self
                .store
                .list_with_offset(prefix, &Path::parse(c).expect("checked"))
                .map(|r| r.map(Listed::Object).map_err(|e| e.to_string()))
                .boxed(),
            (None, Some(c)) => {
                let after = c.to_string();
                self.store
                    .list(prefix)
                    .try_filter(move |m| {
                        futures::future::ready(m.location.as_ref() > after.as_str())
                    })
                    .map(|r| r.map(Listed::Object).map_err(|e| e.to_string()))
                    .boxed()
            }
            (None, None) => self
                .store
                .list(prefix)
                .map(|r| r.map(Listed::Object).map_err(|e| e.to_string()))
                .boxed(),
        }
    }

    /// One pass over the listing stream (incremental: after `cursor` only): filter, and keep
    /// what may be new. With `may_be_new`, files after `cursor` are new without a lookup and
    /// the others are checked a page at a time, so the round holds one page plus the new files;
    /// without it every candidate is kept.
    async fn list(
        &self,
        incremental: bool,
        cursor: Option<&str>,
        may_be_new: Option<NewFilter<'_>>,
    ) -> SeamResult<Pass> {
        let cursor = cursor.map(|c| c.to_string());
        let mut listing = self.listing(incremental, cursor.as_deref());
        let now = Utc::now();
        let mut batch = DiscoveryBatch {
            incremental,
            ..Default::default()
        };
        let mut page = Vec::with_capacity(PAGE);
        let mut last: Option<String> = cursor.clone();
        let mut outcome = FullListingOutcome::default();
        let mut check = |page: &mut Vec<FileMeta>, out: &mut Vec<FileMeta>| -> SeamResult<()> {
            let before = out.len();
            match may_be_new {
                Some(f) => keep_new(page, out, f)?,
                None => out.append(page),
            }
            if cursor.is_some() && out.len() > before {
                outcome.new_before += (out.len() - before) as u64;
                if outcome.first_before.is_none() {
                    outcome.first_before = Some(out[before].path.clone());
                }
            }
            Ok(())
        };
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
            } else {
                if last.as_deref().is_none_or(|l| l < path) {
                    last = Some(path.to_string());
                }
                let after_cursor = cursor.as_deref().is_some_and(|c| path > c);
                if after_cursor && may_be_new.is_some() {
                    // Every file the ledger knows sorts at or before the cursor.
                    outcome.new_after += 1;
                    batch.files.push(crate::file_meta(m));
                } else {
                    page.push(crate::file_meta(m));
                    if page.len() == PAGE {
                        check(&mut page, &mut batch.files)?;
                    }
                }
            }
        }
        check(&mut page, &mut batch.files)?;
        batch.files.sort_by(|a, b| a.path.cmp(&b.path));
        batch.cursor = last;
        batch.full_listing = !incremental;
        let informative = !incremental && cursor.is_some() && may_be_new.is_some();
        Ok(Pass {
            batch,
            outcome: informative.then_some(outcome),
        })
    }

    /// One round: full or incremental as the policy says, then the policy told what it found.
    async fn round(
        &self,
        cursor: Option<&str>,
        may_be_new: Option<NewFilter<'_>>,
    ) -> SeamResult<DiscoveryBatch> {
        let cursor = self.usable_cursor(cursor);
        let kind = self.policy().next(cursor.is_some());
        let incremental = kind == ListingKind::Incremental;
        let pass = self.list(incremental, cursor, may_be_new).await?;
        let mut policy = self.policy();
        if incremental {
            policy.incremental_done();
            return Ok(pass.batch);
        }
        let changed = policy.full_done(pass.outcome.as_ref());
        let mode = policy.mode();
        drop(policy);
        if let Some(o) = pass.outcome.as_ref().filter(|o| o.new_before > 0) {
            let first = o.first_before.as_deref().unwrap_or_default();
            match (mode, changed) {
                (IncrementalListing::Auto, Some(Layout::NotLexical)) => tracing::warn!(
                    stream = %self.stream,
                    late = o.new_before,
                    first,
                    "a full listing found new files that sort before the last key seen: the layout is not lexical, so incremental_listing = \"auto\" lists in full for the rest of this run"
                ),
                (IncrementalListing::On, _) => tracing::warn!(
                    stream = %self.stream,
                    late = o.new_before,
                    first,
                    "a full listing found new files that sort before the last key seen, which incremental listings cannot see (they are ingested now, up to full_listing_interval rounds late); for a layout that is not lexical set incremental_listing = \"auto\" or \"off\""
                ),
                _ => {}
            }
        }
        if changed == Some(Layout::Lexical) {
            tracing::info!(
                stream = %self.stream,
                new = pass.outcome.as_ref().map_or(0, |o| o.new_after),
                "the new files of a full listing all sort after the last key seen: listing incrementally (a full listing every full_listing_interval rounds)"
            );
        }
        Ok(pass.batch)
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
    /// A stream whose recorded mode is not listing came back from notification or file-events
    /// mode: its cursor is not a listing's (queue admissions did not move it; file events keep
    /// a cache position in it), so the first listing looks every file up.
    fn prepare(&mut self, memory: &dyn DiscoveryMemory, run: RunStart) -> SeamResult<()> {
        if let Some(t) = run.modified_after {
            self.set_modified_after(t);
        }
        let recorded = memory.mode()?;
        if recorded != Some(RecordedMode::Listing) {
            if recorded.is_some() {
                self.distrust_cursor();
            }
            memory.set_mode(RecordedMode::Listing)?;
        }
        Ok(())
    }

    /// Every candidate, known or not (schema inference samples them): a full listing, which
    /// tells `auto` nothing about the layout.
    async fn discover(&self, cursor: Option<&str>) -> SeamResult<DiscoveryBatch> {
        let cursor = self.usable_cursor(cursor);
        let pass = self.list(false, cursor, None).await?;
        self.policy().full_done(None);
        Ok(pass.batch)
    }

    async fn discover_new(
        &self,
        cursor: Option<&str>,
        may_be_new: NewFilter<'_>,
    ) -> SeamResult<DiscoveryBatch> {
        self.round(cursor, Some(may_be_new)).await
    }

    /// Make the next listing a full one (an operator's backfill).
    fn request_full_listing(&self) {
        self.policy().ask_full();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A source in memory whose LIST calls are counted, and a ledger that is a set of paths
    /// whose lookups are counted.
    struct Rig {
        store: Arc<dyn ObjectStore>,
        lists: Arc<AtomicU64>,
        discovery: ListingDiscovery,
        known: Mutex<HashSet<String>>,
        lookups: AtomicU64,
        cursor: Mutex<Option<String>>,
    }

    /// What one round did.
    #[derive(Debug)]
    struct Round {
        incremental: bool,
        new: Vec<String>,
        lookups: u64,
        lists: u64,
    }

    impl Rig {
        fn new(prefix: &str, mode: IncrementalListing, interval: u32) -> Rig {
            Rig::on(Arc::new(InMemory::new()), false, prefix, mode, interval)
        }

        fn on(
            store: Arc<dyn ObjectStore>,
            store_offset: bool,
            prefix: &str,
            mode: IncrementalListing,
            interval: u32,
        ) -> Rig {
            let lists = Arc::new(AtomicU64::new(0));
            let counter = lists.clone();
            let counted = crate::CountingStore::new(
                store.clone(),
                Arc::new(move |op, n| {
                    if op == "LIST" {
                        counter.fetch_add(n, Ordering::SeqCst);
                    }
                }),
            );
            let discovery = ListingDiscovery::new(
                "s",
                Arc::new(counted),
                Path::from(prefix),
                Filters::default(),
            )
            .with_incremental(mode, interval)
            .with_store_offset(store_offset);
            Rig {
                store,
                lists,
                discovery,
                known: Mutex::new(HashSet::new()),
                lookups: AtomicU64::new(0),
                cursor: Mutex::new(None),
            }
        }

        async fn put(&self, paths: impl IntoIterator<Item = String>) {
            for p in paths {
                self.store
                    .put(&Path::from(p.as_str()), "{}\n".into())
                    .await
                    .unwrap();
            }
        }

        /// One round, then "admit" what it found with its cursor, as the worker does.
        async fn round(&self) -> Round {
            let (lookups, lists) = (
                self.lookups.load(Ordering::SeqCst),
                self.lists.load(Ordering::SeqCst),
            );
            let cursor = self.cursor.lock().unwrap().clone();
            let filter = |files: &[FileMeta]| -> SeamResult<Vec<bool>> {
                self.lookups.fetch_add(files.len() as u64, Ordering::SeqCst);
                let known = self.known.lock().unwrap();
                Ok(files.iter().map(|f| !known.contains(&f.path)).collect())
            };
            let batch = self
                .discovery
                .discover_new(cursor.as_deref(), &filter)
                .await
                .unwrap();
            let mut known = self.known.lock().unwrap();
            let new: Vec<String> = batch
                .files
                .iter()
                .map(|f| f.path.clone())
                .filter(|p| known.insert(p.clone()))
                .collect();
            if batch.cursor.is_some() {
                *self.cursor.lock().unwrap() = batch.cursor.clone();
            }
            Round {
                incremental: batch.incremental,
                new,
                lookups: self.lookups.load(Ordering::SeqCst) - lookups,
                lists: self.lists.load(Ordering::SeqCst) - lists,
            }
        }
    }

    fn keys(r: std::ops::Range<u32>) -> impl Iterator<Item = String> {
        r.map(|i| format!("in/2026/k{i:06}.json"))
    }

    /// On a lexical prefix an incremental round lists the keys after the cursor only and asks
    /// the ledger about none of them; a full round asks only about the keys at or before the
    /// cursor; a key before the cursor waits for the next full listing.
    #[tokio::test]
    async fn incremental_rounds_list_and_look_up_only_what_the_cursor_cannot_rule_out() {
        incremental_rounds(Rig::new("in", IncrementalListing::On, 2)).await;
    }

    /// The same rounds on a local directory, where incremental rounds ask object_store for
    /// the keys after the cursor (`list_with_offset`) instead of filtering the whole listing.
    #[tokio::test]
    async fn incremental_rounds_on_a_local_directory_use_the_stores_offset() {
        let dir = tempfile::tempdir().unwrap();
        let local = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let rig = Rig::on(Arc::new(local), true, "in", IncrementalListing::On, 2);
        incremental_rounds(rig).await;
    }

    /// Keys with a space, `%`, non-ASCII characters and `#`: an incremental round on a local
    /// directory finds exactly the ones after the cursor, as the filtered listing does.
    #[tokio::test]
    async fn a_local_offset_listing_agrees_with_the_filtered_one_on_awkward_names() {
        let dir = tempfile::tempdir().unwrap();
        let names = [
            "in/a b/x.json",
            "in/a%20b.json",
            "in/k 1.json",
            "in/k%25.json",
            "in/k-\u{fc}.json",
            "in/k#1.json",
            "in/k#x.json",
            "in/z/\u{65e5}\u{672c}.json",
        ];
        let mut rounds = Vec::new();
        for offset in [true, false] {
            let sub = dir.path().join(offset.to_string());
            std::fs::create_dir_all(&sub).unwrap();
            let local = object_store::local::LocalFileSystem::new_with_prefix(&sub).unwrap();
            let rig = Rig::on(Arc::new(local), offset, "in", IncrementalListing::On, 100);
            rig.put(["in/k 0.json".to_string()]).await;
            let first = rig.round().await;
            assert!(!first.incremental);
            rig.put(names.iter().map(|n| n.to_string())).await;
            let second = rig.round().await;
            assert!(second.incremental && second.lookups == 0);
            rounds.push((first.new, second.new));
        }
        assert_eq!(rounds[0], rounds[1], "offset listing vs filtered listing");
        assert!(
            rounds[0].1.iter().any(|p| p.contains("k 1")) && rounds[0].1.len() >= 5,
            "{:?}",
            rounds[0]
        );
    }

    async fn incremental_rounds(rig: Rig) {
        rig.put(keys(0..2500)).await;
        let r = rig.round().await;
        assert!(!r.incremental, "the first round of a run is full");
        assert_eq!((r.new.len(), r.lookups, r.lists), (2500, 2500, 1));
        assert_eq!(
            rig.cursor.lock().unwrap().as_deref(),
            Some("in/2026/k002499.json")
        );

        rig.put(keys(2500..2505)).await;
        let r = rig.round().await;
        assert!(r.incremental);
        assert_eq!(r.new, keys(2500..2505).collect::<Vec<_>>());
        assert_eq!((r.lookups, r.lists), (0, 1));

        // Sorts before the cursor: an incremental round cannot see it.
        rig.put(["in/2026/a-late.json".to_string()]).await;
        rig.put(keys(2505..2506)).await;
        let r = rig.round().await;
        assert!(r.incremental);
        assert_eq!(r.new, ["in/2026/k002505.json"]);
        assert_eq!(r.lookups, 0);

        // The forced full listing (after 2 incremental ones) finds it, asking the ledger about
        // every key up to the cursor and about none after it.
        rig.put(keys(2506..2508)).await;
        let r = rig.round().await;
        assert!(!r.incremental);
        let mut expected = vec!["in/2026/a-late.json".to_string()];
        expected.extend(keys(2506..2508));
        assert_eq!(r.new, expected);
        assert_eq!(r.lookups, 2507, "2506 known keys and the late one");
        assert_eq!(rig.known.lock().unwrap().len(), 2509, "nothing lost");
        let r = rig.round().await;
        assert!(r.incremental && r.new.is_empty() && r.lookups == 0);
    }

    /// `auto` goes incremental once a full listing's new files all sort after its cursor, and
    /// back to full listings for good once one finds a new file before it.
    #[tokio::test]
    async fn auto_follows_the_keys_it_sees() {
        let rig = Rig::new("in", IncrementalListing::Auto, 2);
        rig.put(keys(0..10)).await;
        assert!(!rig.round().await.incremental, "first round");
        rig.put(keys(10..12)).await;
        let r = rig.round().await;
        assert!(!r.incremental, "no evidence yet: full");
        assert_eq!(r.new.len(), 2);
        rig.put(keys(12..13)).await;
        let r = rig.round().await;
        assert!(
            r.incremental,
            "the last full listing's new files came after the cursor"
        );
        assert_eq!(r.new, ["in/2026/k000012.json"]);
        rig.put(["in/2026/k000005b.json".to_string()]).await;
        let r = rig.round().await;
        assert!(r.incremental && r.new.is_empty(), "{r:?}");
        let r = rig.round().await;
        assert!(!r.incremental, "forced full listing");
        assert_eq!(r.new, ["in/2026/k000005b.json"]);
        assert_eq!(rig.discovery.policy().layout(), Layout::NotLexical);
        rig.put(keys(13..14)).await;
        for _ in 0..4 {
            assert!(
                !rig.round().await.incremental,
                "full for the rest of the run"
            );
        }
    }

    /// A cursor outside the source prefix (the source was changed) is not used: full listing,
    /// every file looked up; the cursor then moves under the new prefix.
    #[tokio::test]
    async fn a_cursor_from_another_prefix_is_ignored() {
        let rig = Rig::new("in", IncrementalListing::On, 7);
        rig.put(keys(0..3)).await;
        *rig.cursor.lock().unwrap() = Some("zzz/old.json".to_string());
        let r = rig.round().await;
        assert!(!r.incremental);
        assert_eq!((r.new.len(), r.lookups), (3, 3));
        assert_eq!(
            rig.cursor.lock().unwrap().as_deref(),
            Some("in/2026/k000002.json")
        );
        *rig.cursor.lock().unwrap() = Some("input/x.json".to_string());
        assert_eq!(rig.discovery.usable_cursor(Some("input/x.json")), None);
        assert_eq!(rig.discovery.usable_cursor(Some("in/")), None);
        assert_eq!(
            rig.discovery.usable_cursor(Some("in/a.json")),
            Some("in/a.json")
        );
    }

    /// An operator's backfill is a full listing; a cursor never moves back.
    #[tokio::test]
    async fn a_backfill_lists_in_full_and_the_cursor_only_moves_forward() {
        let rig = Rig::new("in", IncrementalListing::On, 7);
        rig.put(keys(0..3)).await;
        rig.round().await;
        assert!(rig.round().await.incremental);
        rig.discovery.request_full_listing();
        let r = rig.round().await;
        assert!(!r.incremental);
        assert_eq!(r.lookups, 3);
        rig.store
            .delete(&Path::from("in/2026/k000002.json"))
            .await
            .unwrap();
        rig.discovery.request_full_listing();
        rig.round().await;
        assert_eq!(
            rig.cursor.lock().unwrap().as_deref(),
            Some("in/2026/k000002.json")
        );
    }

    #[test]
    fn filters() {
        let now = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
        let glob = globset::Glob::new("*.json").unwrap().compile_matcher();
        let f = Filters {
            glob: Some(glob),
            modified_after: Some(now - chrono::Duration::days(10)),
            modified_before: None,
            max_file_age: None,
            keep_hidden: false,
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
