//! File-events discovery: a stream reads its location's event cache from its own position.
//!
//! The position (the last cache sequence number read) is the stream's discovery cursor,
//! written `events:<cache id>:<scope>:<seq>:<tag>` in the same ledger write as the files it
//! admits (`scope`: a hash of the stream's prefix and glob; `tag`: a hash of the path and etag
//! of the event at `seq`), so a crash never
//! moves it past files not yet recorded. A round reads up to [`READ_PER_ROUND`] events after
//! the position, keeps those under the stream's prefix that pass its filters (glob, modified
//! window, age), and returns them with the new position.
//!
//! The stream lists its own prefix instead, once, when:
//! - it has no position (first start, or it comes from another discovery mode), or one that
//!   is not a position in this cache (another cache's id: the directory was deleted or
//!   replaced; a number beyond the cache's last, or an event at that number that is not the
//!   one the stream read: the cache was restored from an older copy), or one taken with
//!   another prefix or glob (files the stream now takes were never looked at),
//! - `list_on_start` is set (every start),
//! - its position lies below the cache's expiry horizon (stopped for longer than the
//!   retention: events it never read are gone).
//!
//! Such a listing takes the cache's last sequence number *before* it starts and stores that as
//! the position with the listed files: a file written during the listing is either listed or
//! has an event after the position (or both: the ledger admits it once). No gap, no
//! duplicate.
//!
//! While the location's consumer has not finished a round for `fallback_after`, the stream
//! lists its prefix on every poll (its position stays), and says so in its status.

use crate::listing::ListingDiscovery;
use crate::location::EventLocation;
use chrono::Utc;
use landfall_core::seams::{NewFilter, SeamResult};
use landfall_core::{
    AckToken, Discovery, DiscoveryBatch, DiscoveryMemory, FileMeta, RecordedMode, RunStart,
};
use object_store::path::Path;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Events read from the cache per round.
pub const READ_PER_ROUND: usize = 10_000;

/// How the stream's discovery cursor spells a cache position.
const POSITION: &str = "events:";

/// A stream's position in a location's cache, as its cursor holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position<'a> {
    /// The cache's id.
    pub cache: &'a str,
    /// What the stream took when it read there (prefix and glob, hashed).
    pub scope: &'a str,
    pub seq: u64,
    /// The event at `seq` (path and etag, hashed; `-`: none).
    pub tag: &'a str,
}

/// The cache position a cursor holds, if it is one.
pub fn parse_position(cursor: Option<&str>) -> Option<Position<'_>> {
    let mut parts = cursor?.strip_prefix(POSITION)?.split(':');
    let (cache, scope, seq, tag) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    Some(Position {
        cache,
        scope,
        seq: seq.parse().ok()?,
        tag,
    })
}

/// FNV-1a, 64 bits, in hex: stable across builds and platforms (positions outlive binaries).
fn fnv(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            // A separator no UTF-8 text contains.
            h ^= 0xff;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        for b in p.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The tag of a cached event: its path and etag (without quotes), or version.
fn tag_of(e: &landfall_state::CachedEvent) -> String {
    fnv(&[&e.event.path, e.event.version_tag()])
}

pub struct FileEventsDiscovery {
    stream: String,
    /// The hash of what the stream takes (prefix and glob), part of its positions.
    scope: String,
    listing: ListingDiscovery,
    location: Arc<EventLocation>,
    list_next: AtomicBool,
    /// Draining run: wait (bounded) for the consumer to cache what is queued first.
    drain: AtomicBool,
    caught_up: AtomicBool,
    waited_ready: AtomicBool,
    /// What the stream's discovery does now, when it is not plain reading (for its status).
    note: Mutex<Option<String>>,
}

impl FileEventsDiscovery {
    pub fn new(stream: &str, listing: ListingDiscovery, location: Arc<EventLocation>) -> Self {
        let f = listing.filters();
        let glob = f
            .glob
            .as_ref()
            .map(|g| g.glob().glob().to_string())
            .unwrap_or_default();
        let instant =
            |t: Option<chrono::DateTime<Utc>>| t.map(|t| t.to_rfc3339()).unwrap_or_default();
        // What the stream takes: a position taken with other filters says nothing about
        // files the new ones take.
        let scope = fnv(&[
            listing.prefix().as_ref(),
            &glob,
            &instant(f.modified_after),
            &instant(f.modified_before),
        ]);
        FileEventsDiscovery {
            stream: stream.to_string(),
            scope,
            listing,
            location,
            list_next: AtomicBool::new(false),
            drain: AtomicBool::new(false),
            caught_up: AtomicBool::new(false),
            waited_ready: AtomicBool::new(false),
            note: Mutex::new(None),
        }
    }

    pub fn listing(&self) -> &ListingDiscovery {
        &self.listing
    }

    pub fn listing_mut(&mut self) -> &mut ListingDiscovery {
        &mut self.listing
    }

    pub fn location(&self) -> &Arc<EventLocation> {
        &self.location
    }

    /// List the stream's prefix on the next round (entering the mode, `list_on_start`, an
    /// admin backfill).
    pub fn request_listing(&self) {
        self.list_next.store(true, Ordering::SeqCst);
    }

    /// Draining runs (available-now) wait for the consumer to cache what is queued.
    pub fn set_drain(&self, drain: bool) {
        self.drain.store(drain, Ordering::SeqCst);
    }

    /// What the stream's discovery is doing when it is not reading the cache.
    pub fn note(&self) -> Option<String> {
        self.note.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_note(&self, note: Option<String>) {
        let mut n = self.note.lock().unwrap_or_else(|e| e.into_inner());
        if *n != note {
            match &note {
                Some(text) => {
                    tracing::warn!(stream = %self.stream, location = %self.location.name, "{text}")
                }
                None if n.is_some() => {
                    tracing::info!(stream = %self.stream, location = %self.location.name, "reading the location's event cache again")
                }
                None => {}
            }
            *n = note;
        }
    }

    /// A full listing of the stream's prefix; `position`: store this cache position with it.
    async fn list(
        &self,
        position: Option<u64>,
        may_be_new: NewFilter<'_>,
    ) -> SeamResult<DiscoveryBatch> {
        let batch = self.listing.discover_new(None, may_be_new).await?;
        let cursor = match position {
            Some(p) => Some(self.position_at(p)?),
            None => None,
        };
        Ok(DiscoveryBatch {
            cursor,
            full_listing: position.is_some(),
            more: position.is_some(),
            ..batch
        })
    }

    fn cursor(&self, seq: u64, tag: &str) -> String {
        format!("{POSITION}{}:{}:{seq}:{tag}", self.location.id, self.scope)
    }

    /// The cursor of a position at `seq`, tagged with the event there (if it is held).
    pub fn position_at(&self, seq: u64) -> SeamResult<String> {
        let at = match seq {
            0 => None,
            s => self
                .location
                .cache
                .read_after(s - 1, 1)?
                .pop()
                .filter(|e| e.seq == s),
        };
        Ok(self.cursor(seq, &at.map_or("-".to_string(), |e| tag_of(&e))))
    }

    /// Whether `p` is a position this stream may continue from: in this cache, with this
    /// scope, not beyond the cache's last number, at the event it read there. Why not,
    /// otherwise.
    fn check(&self, p: &Position, last: u64) -> SeamResult<Result<u64, &'static str>> {
        if p.cache != self.location.id {
            return Ok(Err(
                "it names another event cache (the cache directory was replaced)",
            ));
        }
        if p.scope != self.scope {
            return Ok(Err("the stream's prefix or glob changed since"));
        }
        if p.seq > last {
            return Ok(Err(
                "it lies beyond the cache's last event (the cache was restored from an older copy)",
            ));
        }
        if p.seq > 0 && p.tag != "-" {
            let at = self.location.cache.read_after(p.seq - 1, 1)?.pop();
            match at {
                Some(e) if e.seq == p.seq && tag_of(&e) != p.tag => {
                    return Ok(Err(
                        "the event at it is not the one the stream read (the cache was restored from an older copy)",
                    ));
                }
                // Removed since (its object was deleted), or expired (the horizon says so):
                // nothing to compare, the number stands.
                _ => {}
            }
        }
        Ok(Ok(p.seq))
    }

    /// The file an event names, if it is one of the stream's.
    fn candidate(
        &self,
        e: &landfall_state::CachedEvent,
        now: chrono::DateTime<Utc>,
    ) -> Option<FileMeta> {
        let prefix = self.listing.prefix().as_ref();
        let under = prefix.is_empty()
            || e.event
                .path
                .strip_prefix(prefix)
                .is_some_and(|r| r.starts_with('/'));
        if !under {
            return None;
        }
        let path = Path::parse(&e.event.path).ok()?;
        let relative = crate::relative_path(self.listing.prefix(), path.as_ref());
        self.listing
            .filters()
            .accepts(relative, e.event.modified, now)
            .then(|| FileMeta {
                path: e.event.path.clone(),
                size: e.event.size,
                modified: e.event.modified,
                etag: e.event.etag.clone(),
                version: e.event.version.clone(),
            })
    }
}

#[async_trait::async_trait]
impl Discovery for FileEventsDiscovery {
    /// A stream entering file-events mode (new, or switched from another mode) lists its
    /// prefix first, as does one asked to (`list_on_start`).
    fn prepare(&mut self, memory: &dyn DiscoveryMemory, run: RunStart) -> SeamResult<()> {
        if let Some(t) = run.modified_after {
            self.listing.set_modified_after(t);
        }
        if memory.mode()? != Some(RecordedMode::FileEvents) || run.list_on_start {
            self.request_listing();
        }
        self.set_drain(run.available_now);
        Ok(())
    }

    fn round_admitted(
        &self,
        memory: &dyn DiscoveryMemory,
        full_listing: bool,
        _started: chrono::DateTime<Utc>,
    ) -> SeamResult<()> {
        if full_listing {
            memory.set_mode(RecordedMode::FileEvents)?;
        }
        memory.set_discovery_note(self.note())
    }

    fn request_full_listing(&self) {
        self.request_listing();
    }

    async fn wake(&self) {
        self.location.next_round().await
    }

    async fn discover(&self, cursor: Option<&str>) -> SeamResult<DiscoveryBatch> {
        self.discover_new(cursor, &|files| Ok(vec![true; files.len()]))
            .await
    }

    async fn discover_new(
        &self,
        cursor: Option<&str>,
        may_be_new: NewFilter<'_>,
    ) -> SeamResult<DiscoveryBatch> {
        let cache = &self.location.cache;
        let last = cache.last_seq()?;
        let position = match parse_position(cursor) {
            Some(p) => match self.check(&p, last)? {
                Ok(seq) => Some(seq),
                Err(why) => {
                    tracing::warn!(stream = %self.stream, location = %self.location.name, position = p.seq, "the stream's position cannot be used: {why}; listing its prefix once");
                    None
                }
            },
            None => None,
        };
        let horizon = cache.expired_through()?;
        let outdated = position.is_some_and(|p| p < horizon);
        let asked = self.list_next.swap(false, Ordering::SeqCst);
        if position.is_none() || asked || outdated {
            if outdated {
                tracing::warn!(stream = %self.stream, location = %self.location.name, position = ?position, horizon, "the stream's cache position is older than the retention; listing its prefix once");
            }
            // The snapshot is a position only once the location's events flow (its queue and
            // bucket notification set up): a file written before then has no event.
            // Waited for once; afterwards only looked at, so a location that does not set up
            // does not hold every poll of its streams.
            let limit = if self.waited_ready.swap(true, Ordering::SeqCst) {
                Duration::ZERO
            } else {
                self.location.fallback_after.min(Duration::from_secs(60))
            };
            if !self.location.ready_within(limit).await {
                self.set_note(Some(format!(
                    "listing: the consumer of location `{}` is not set up yet",
                    self.location.name
                )));
                return self.list(None, may_be_new).await;
            }
            let snapshot = cache.last_seq()?;
            return self.list(Some(snapshot), may_be_new).await;
        }
        let position = position.expect("checked");
        if self.drain.load(Ordering::SeqCst) && !self.caught_up.swap(true, Ordering::SeqCst) {
            let limit = self.location.fallback_after.min(Duration::from_secs(120));
            if !self.location.caught_up(limit).await {
                self.set_note(Some(format!("the location's consumer did not drain its queue within {}s; listing the prefix for this run", limit.as_secs())));
                return self.list(None, may_be_new).await;
            }
        }
        let now = Utc::now();
        if self.location.stale(now) {
            let since = self
                .location
                .last_round()
                .map_or("it started".to_string(), |t| t.to_rfc3339());
            self.set_note(Some(format!(
                "listing: the consumer of location `{}` has not finished a round since {since} (fallback_after {}s)",
                self.location.name,
                self.location.fallback_after.as_secs()
            )));
            return self.list(None, may_be_new).await;
        }
        self.set_note(None);
        let events = cache.read_after(position, READ_PER_ROUND)?;
        // Expiry may have run while reading: then events after the position may be gone.
        if cache.expired_through()? > position {
            let snapshot = cache.last_seq()?;
            return self.list(Some(snapshot), may_be_new).await;
        }
        let mut batch = DiscoveryBatch {
            listed: events.len() as u64,
            more: events.len() == READ_PER_ROUND,
            cursor: events.last().map(|e| self.cursor(e.seq, &tag_of(e))),
            ..DiscoveryBatch::default()
        };
        let mut seen = HashSet::new();
        for e in &events {
            match self.candidate(e, now) {
                Some(f) if seen.insert((f.path.clone(), f.etag.clone())) => batch.files.push(f),
                _ => batch.filtered += 1,
            }
        }
        batch.retain_new(may_be_new)?;
        Ok(batch)
    }

    async fn acknowledge(&self, _tokens: Vec<AckToken>) -> SeamResult<()> {
        Ok(())
    }
}
