//! A file-events location: its event cache, shared by the streams under it, and the consumer
//! that fills the cache from the location's queue.
//!
//! The consumer reads the queue in rounds ([`QueueReader`]). Object-created events about the
//! location's bucket or container, under its prefix, go into the cache (one synced write per
//! round; a size the event lacks is read with a HEAD); then the messages are deleted. A crash
//! between the write and the delete leaves the messages to come back, and the cache stores a
//! (path, etag) once, so nothing is cached twice. An object-removed event drops the cached
//! creations of its key that it supersedes (by sequencer, else by a HEAD that no longer finds
//! that version), so streams that have not read them do not admit a file that is gone.
//! A directory renamed into the location (ADLS Gen2, SFTP) names none of its files: the round
//! lists the part of it under the prefix and caches its files before the messages are deleted
//! (if the store cannot list it, every stream lists its prefix once instead). A directory
//! removal is counted, but drops no cached creation: reading classifies a file that is gone.
//!
//! Every `listing_interval` the consumer lists the whole location and caches the files
//! modified inside the retention whose events never came. Events leave the cache after the
//! retention; the cache's horizon ([`EventCache::expired_through`]) tells readers whether
//! their position is still complete.
//!
//! The consumer's health is visible to the streams ([`EventLocation::last_round`]): a stream
//! lists its own prefix while the consumer has not finished a round for `fallback_after`.

use crate::listing::ListingDiscovery;
use crate::notification::StoreRef;
use crate::queue_reader::{
    QueueReader, Removal, list_directory, quoted, same_etag, seq_after, sort_messages,
};
use chrono::{DateTime, Utc};
use landfall_core::seams::SeamResult;
use landfall_core::{QueueRound, SeamError};
use landfall_state::{CachedEvent, EventCache, NewEvent, RocksKv};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The cache's note of the consumer's last finished round (RFC 3339).
pub const LAST_ROUND_META: &str = "last_round";
/// The cache's note of the last location listing (RFC 3339).
pub const LAST_LISTING_META: &str = "last_listing";
/// The cache's note of a listing owed since (RFC 3339): the bucket entry was found gone and
/// written back, so the files published meanwhile sent no event. Cleared by a listing that
/// started after it.
pub const LISTING_OWED_META: &str = "listing_owed";
/// The cache's note of the consumer's last failure (JSON `{error, at}`), cleared by a round.
pub const CONSUMER_ERROR_META: &str = "consumer_error";

/// How often expiry runs.
const EXPIRE_EVERY: Duration = Duration::from_secs(60);

/// What the consumer's last failure was.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ConsumerError {
    pub error: String,
    pub at: DateTime<Utc>,
}

/// One location as this process sees it: the cache and the consumer's progress.
pub struct EventLocation {
    pub name: String,
    /// The cache's identity (positions name it).
    pub id: String,
    pub cache: EventCache<RocksKv>,
    /// The location's bucket or container and prefix.
    pub prefix: Path,
    pub retention: Duration,
    pub fallback_after: Duration,
    /// Rounds finished since the process started, and whether the last found the queue
    /// empty (catching up waits for such a round).
    rounds: watch::Sender<(u64, bool)>,
    last_round: Mutex<Option<DateTime<Utc>>>,
    /// Draining runs: the consumer receives only while a stream waits for it to catch up, so
    /// no receive is in flight when the run ends (a long poll cut off by the process's exit
    /// may still take messages, hiding them for the visibility timeout).
    demand: tokio::sync::Notify,
    /// Draining: rounds the consumer must have finished before it may idle (the largest a
    /// stream waiting in `caught_up` needs).
    needed: std::sync::atomic::AtomicU64,
    /// The consumer is set up (its queue and bucket notification exist): events of files
    /// written from now on are delivered. Streams take a listing's snapshot position only
    /// then.
    ready: watch::Sender<bool>,
    /// When this process opened the location: a consumer is not stale before it had
    /// `fallback_after` to finish a first round.
    opened: DateTime<Utc>,
}

impl EventLocation {
    pub fn new(
        name: &str,
        cache: EventCache<RocksKv>,
        prefix: Path,
        retention: Duration,
        fallback_after: Duration,
    ) -> Result<Self, landfall_state::StateError> {
        let id = cache.id()?;
        let last_round = cache
            .meta(LAST_ROUND_META)
            .ok()
            .flatten()
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.with_timezone(&Utc));
        Ok(EventLocation {
            name: name.to_string(),
            id,
            cache,
            prefix,
            retention,
            fallback_after,
            rounds: watch::channel((0, false)).0,
            last_round: Mutex::new(last_round),
            ready: watch::channel(false).0,
            demand: tokio::sync::Notify::new(),
            needed: std::sync::atomic::AtomicU64::new(0),
            opened: Utc::now(),
        })
    }

    /// When the consumer last finished a round (also from earlier runs).
    pub fn last_round(&self) -> Option<DateTime<Utc>> {
        *self.last_round.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the consumer has not finished a round for `fallback_after`: readers then list.
    pub fn stale(&self, now: DateTime<Utc>) -> bool {
        let since = self
            .last_round()
            .map_or(self.opened, |t| t.max(self.opened));
        (now - since).to_std().unwrap_or(Duration::ZERO) >= self.fallback_after
    }

    fn round_done(&self, empty: bool, now: DateTime<Utc>) {
        *self.last_round.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
        self.rounds.send_modify(|(all, last_empty)| {
            *all += 1;
            *last_empty = empty;
        });
    }

    /// Wait until the consumer has found the queue empty in a round that started after this
    /// call (everything queued now is cached), at most `limit`. False: it did not.
    pub async fn caught_up(&self, limit: Duration) -> bool {
        let mut rx = self.rounds.subscribe();
        let all0 = rx.borrow().0;
        self.needed
            .fetch_max(all0 + 2, std::sync::atomic::Ordering::SeqCst);
        self.demand.notify_waiters();
        let wait = async {
            loop {
                if rx.changed().await.is_err() {
                    return false;
                }
                let (all, empty) = *rx.borrow();
                // The round that was running at the call may have started before it; the
                // one after started after it.
                if empty && all >= all0 + 2 {
                    return true;
                }
            }
        };
        tokio::time::timeout(limit, wait).await.unwrap_or(false)
    }

    /// The consumer is set up: events of files written from now on reach the cache.
    pub fn set_ready(&self) {
        self.ready.send_replace(true);
    }

    /// Keep the consumer's failure in the cache, for `landfall locations` (best effort).
    pub fn record_error(&self, e: &SeamError) {
        let json = serde_json::to_string(&ConsumerError {
            error: e.message.clone(),
            at: Utc::now(),
        })
        .expect("error serialises");
        if let Err(err) = self.cache.set_meta(CONSUMER_ERROR_META, &json) {
            tracing::warn!(location = %self.name, error = %err, "could not record the consumer's error");
        }
    }

    /// Wait until the consumer is set up, at most `limit`. False: it is not.
    pub async fn ready_within(&self, limit: Duration) -> bool {
        let mut rx = self.ready.subscribe();
        tokio::time::timeout(limit, rx.wait_for(|r| *r))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// A draining consumer whose last round was empty waits here until a stream waiting to
    /// catch up needs another round.
    pub async fn demanded(&self) {
        loop {
            let notified = self.demand.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.rounds.borrow().0 < self.needed.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }

    /// Wait until the consumer finishes another round (readers wake on new events).
    pub async fn next_round(&self) {
        let mut rx = self.rounds.subscribe();
        let _ = rx.changed().await;
    }
}

/// What one consumer round did, for the logs and metrics.
#[derive(Debug, Default, Clone)]
pub struct LocationRound {
    pub queue: QueueRound,
    /// Events new to the cache.
    pub cached: u64,
    /// Cached events dropped because their object was removed.
    pub dropped: u64,
    /// Events outside the location's prefix, or objects that are not files.
    pub passed_over: u64,
    pub expired: u64,
    /// Files a listing in this round cached (the bucket entry was restored).
    pub listed: Option<u64>,
}

/// Fills one location's cache from its queue.
pub struct LocationConsumer {
    location: Arc<EventLocation>,
    reader: QueueReader,
    /// The bucket or container events must be about.
    source: StoreRef,
    /// A full listing of the whole location (its store also serves the HEADs).
    listing: ListingDiscovery,
    listing_interval: Option<Duration>,
    last_expiry: Mutex<Option<std::time::Instant>>,
    /// The bucket entry setup created, checked at the first round and periodically.
    entry: Option<crate::EntryGuard>,
}

impl LocationConsumer {
    pub fn new(
        location: Arc<EventLocation>,
        reader: QueueReader,
        source: StoreRef,
        listing: ListingDiscovery,
        listing_interval: Option<Duration>,
    ) -> Self {
        LocationConsumer {
            location,
            reader,
            source,
            listing,
            listing_interval,
            last_expiry: Mutex::new(None),
            entry: None,
        }
    }

    /// Check the bucket notification entry setup created at the first round and every
    /// interval after; one found gone is written again and the location listed at once.
    pub fn with_entry_guard(mut self, guard: Option<crate::EntryGuard>) -> Self {
        self.entry = guard;
        self
    }

    pub fn reader(&self) -> &QueueReader {
        &self.reader
    }

    pub fn location(&self) -> &Arc<EventLocation> {
        &self.location
    }

    fn name(&self) -> &str {
        &self.location.name
    }

    /// Cache writes are synced RocksDB writes: off the async threads.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&EventLocation) -> Result<T, landfall_state::StateError> + Send + 'static,
    ) -> SeamResult<T> {
        let loc = self.location.clone();
        tokio::task::spawn_blocking(move || f(&loc))
            .await
            .map_err(|e| SeamError::retryable(format!("cache task failed: {e}")))?
            .map_err(SeamError::from)
    }

    /// Before a round: a consumer that did not finish a round for about as long as the queue
    /// keeps messages (stopped for days, or a draining consumer idle that long) may have lost
    /// events for good. Every stream's position is then outdated, so each lists its prefix
    /// once. Call it before the location is marked ready, too.
    pub async fn check_gap(&self) -> SeamResult<()> {
        let Some(last) = self.location.last_round() else {
            return Ok(());
        };
        let away = (Utc::now() - last).to_std().unwrap_or(Duration::ZERO);
        // Cheap test first: no queue keeps messages less than a minute.
        if away < Duration::from_secs(60) && away < self.location.retention {
            return Ok(());
        }
        let keeps = match self.reader.queue().retention().await {
            Ok(Some(r)) => r,
            // Unknown (Azure queues do not say; the attribute may be denied): SQS's default,
            // 4 days, unless the location keeps events less long.
            Ok(None) | Err(_) => self.location.retention.min(Duration::from_secs(4 * 86400)),
        };
        // Allow for clock skew and for events sent while the consumer was stopping.
        let slack = (keeps / 4).min(Duration::from_secs(3600));
        if away + slack >= keeps {
            let h = self.blocking(|l| l.cache.outdate_positions()).await?;
            tracing::warn!(location = %self.name(), away_s = away.as_secs(), queue_keeps_s = keeps.as_secs(), horizon = h, "the queue was not read for about as long as it keeps messages; every stream reading the location lists its prefix once");
        }
        Ok(())
    }

    /// One round of the queue.
    pub async fn round(&self) -> SeamResult<LocationRound> {
        let mut out = LocationRound::default();
        if let Some(guard) = &self.entry {
            // The files published while the entry was gone sent no event. (A failed check is
            // reported by the guard's hooks.)
            if let Ok(true) = guard.check_if_due().await {
                out.listed = Some(self.list().await?);
            }
        }
        let messages = self.reader.receive().await?;
        out.queue = QueueRound {
            received: messages.len() as u64,
            extension_failures: self.reader.take_kept(),
            ..QueueRound::default()
        };
        let sorted = sort_messages(&messages, &self.source, &mut out.queue);
        let now = Utc::now();
        let mut events = Vec::with_capacity(sorted.created.len());
        for ev in sorted.created {
            match self.event(ev, now).await? {
                Some(e) => events.push(e),
                None => out.passed_over += 1,
            }
        }
        out.cached = self.blocking(move |l| l.cache.append(&events, now)).await?;
        out.queue.directories_listed = sorted.listings.len() as u64;
        for dir in &sorted.listings {
            match self.cache_renamed(dir).await? {
                Some(n) => out.cached += n,
                None => out.passed_over += 1,
            }
        }
        for (key, removal) in sorted.removed {
            out.dropped += self.settle_removal(key, removal).await?;
        }
        self.reader.acknowledge(sorted.ack).await?;
        let expire = {
            let mut last = self.last_expiry.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|t| t.elapsed() >= EXPIRE_EVERY);
            if due {
                *last = Some(std::time::Instant::now());
            }
            due
        };
        if expire {
            let cutoff =
                now - chrono::Duration::from_std(self.location.retention).unwrap_or_default();
            out.expired = self.blocking(move |l| l.cache.expire(cutoff)).await?;
        }
        let stamp = now.to_rfc3339();
        self.blocking(move |l| {
            l.cache.set_meta(LAST_ROUND_META, &stamp)?;
            l.cache.set_meta(CONSUMER_ERROR_META, "")
        })
        .await?;
        self.location.round_done(messages.is_empty(), now);
        Ok(out)
    }

    /// The cache entry of an object-created event, or `None` when it is no file of the
    /// location (outside the prefix, a folder marker, an empty or vanished object).
    async fn event(
        &self,
        ev: crate::StorageEvent,
        now: DateTime<Utc>,
    ) -> SeamResult<Option<NewEvent>> {
        let prefix = self.location.prefix.as_ref();
        let under = prefix.is_empty()
            || ev
                .key
                .strip_prefix(prefix)
                .is_some_and(|r| r.starts_with('/'));
        // object_store would drop a trailing `/` and address another object.
        let Some(path) = Path::parse(&ev.key)
            .ok()
            .filter(|_| under && !ev.key.ends_with('/'))
        else {
            return Ok(None);
        };
        let mut e = NewEvent {
            path: path.to_string(),
            size: ev.size.unwrap_or(0),
            modified: ev.event_time.unwrap_or(now),
            etag: ev.etag.as_deref().map(quoted),
            version: if ev.etag.is_some() { None } else { ev.version },
            sequencer: ev.sequencer,
        };
        if ev.size.is_none() {
            match self.listing.store().head(&path).await {
                Ok(h) => {
                    e.size = h.size;
                    e.modified = h.last_modified;
                    e.etag = h.e_tag.or(e.etag);
                    e.version = h.version.or(e.version);
                }
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                // No stream could read it either: pass it over, said loudly, rather than
                // stall the queue on it.
                Err(
                    err @ (object_store::Error::PermissionDenied { .. }
                    | object_store::Error::Unauthenticated { .. }),
                ) => {
                    tracing::warn!(location = %self.name(), key = %ev.key, error = %err, "cannot read an object's size; its event is passed over");
                    return Ok(None);
                }
                Err(err) => {
                    return Err(SeamError::retryable(format!(
                        "location `{}`: HEAD {}: {err}",
                        self.name(),
                        ev.key
                    )));
                }
            }
        }
        // A zero-byte object is cached too: its streams record it (skipped, `empty`), and a
        // later version with content is a new file to them.
        Ok(Some(e))
    }

    /// Cache the files of a directory renamed into the location, which no event names (the
    /// part of it under the location's prefix; `None`: it is not under it). When the store
    /// cannot list it, every stream's position is outdated instead, so each lists its prefix
    /// once. This runs before the round's messages are deleted: a crash repeats it.
    async fn cache_renamed(&self, dir: &str) -> SeamResult<Option<u64>> {
        match list_directory(self.name(), &self.listing, dir).await {
            Ok(None) => Ok(None),
            Ok(Some(listed)) => {
                let events: Vec<NewEvent> = listed.files.iter().map(to_event).collect();
                let n = self
                    .blocking(move |l| l.cache.append(&events, Utc::now()))
                    .await?;
                tracing::info!(location = %self.name(), directory = %dir, files = n, "a directory was renamed into the location; its files are cached");
                Ok(Some(n))
            }
            Err(e) => {
                let h = self.blocking(|l| l.cache.outdate_positions()).await?;
                tracing::warn!(location = %self.name(), directory = %dir, error = %e, horizon = h, "cannot list a directory renamed into the location; every stream reading the location lists its prefix once");
                Ok(Some(0))
            }
        }
    }

    /// Drop the cached creations of `key` that a removal supersedes. Returns how many.
    async fn settle_removal(&self, key: String, removal: Removal) -> SeamResult<u64> {
        let Ok(path) = Path::parse(&key) else {
            return Ok(0);
        };
        let p = path.to_string();
        let cached = self.blocking(move |l| l.cache.events_of(&p)).await?;
        if cached.is_empty() {
            return Ok(0);
        }
        let mut gone: Vec<CachedEvent> = Vec::new();
        // What the store holds at the key now (asked once, when needed).
        enum Held {
            Nothing,
            Object(Option<String>),
            Unknown,
        }
        let mut head: Option<Held> = None;
        for c in cached {
            let superseded = match removal.by_sequencer(c.event.sequencer.as_deref()) {
                Some((created, removed)) => seq_after(removed, created),
                None => {
                    if head.is_none() {
                        head = Some(match self.listing.store().head(&path).await {
                            Ok(h) => Held::Object(h.e_tag),
                            Err(object_store::Error::NotFound { .. }) => Held::Nothing,
                            // Unknown: keep every event; reading classifies a missing file.
                            Err(_) => Held::Unknown,
                        });
                    }
                    match head.as_ref().expect("set") {
                        Held::Nothing => true,
                        Held::Unknown => false,
                        Held::Object(etag) => {
                            c.event.etag.is_some()
                                && !same_etag(etag.as_deref(), c.event.etag.as_deref())
                        }
                    }
                }
            };
            if superseded {
                gone.push(c);
            }
        }
        let n = gone.len() as u64;
        self.blocking(move |l| l.cache.remove(&gone)).await?;
        Ok(n)
    }

    /// List the location when `listing_interval` has passed since the last listing (kept in
    /// the cache across restarts). Runs beside the rounds, so a long listing never holds up
    /// the queue. Returns how many files it cached, when it ran.
    pub async fn list_if_due(&self) -> SeamResult<Option<u64>> {
        if !self.listing_due()? {
            return Ok(None);
        }
        self.list().await.map(Some)
    }

    fn listing_due(&self) -> SeamResult<bool> {
        let Some(every) = self.listing_interval else {
            return Ok(false);
        };
        let last = self.location.cache.meta(LAST_LISTING_META)?;
        let Some(last) = last.filter(|t| !t.is_empty()) else {
            // The first run: the streams list their own prefixes when they start reading;
            // the location's first listing comes one interval later.
            self.location
                .cache
                .set_meta(LAST_LISTING_META, &Utc::now().to_rfc3339())?;
            return Ok(false);
        };
        Ok(DateTime::parse_from_rfc3339(&last)
            .map(|t| {
                (Utc::now() - t.with_timezone(&Utc))
                    .to_std()
                    .unwrap_or_default()
                    >= every
            })
            .unwrap_or(true))
    }

    /// List the location and cache the files modified inside the retention that the cache
    /// does not hold (events the cloud never delivered). Returns how many.
    pub async fn list(&self) -> SeamResult<u64> {
        let started = Utc::now();
        let retention = chrono::Duration::from_std(self.location.retention).unwrap_or_default();
        let cutoff = started - retention;
        let loc = self.location.clone();
        let found = landfall_core::Discovery::discover_new(&self.listing, None, &move |files| {
            Ok(files
                .iter()
                .map(|f| f.modified >= cutoff && !loc.cache.contains(&to_event(f)).unwrap_or(false))
                .collect())
        })
        .await?;
        let events: Vec<NewEvent> = found.files.iter().map(to_event).collect();
        let n = self
            .blocking(move |l| l.cache.append(&events, Utc::now()))
            .await?;
        let stamp = started.to_rfc3339();
        // A listing pays the listing owed only while the bucket entry is known in place.
        let settled = !self.entry.as_ref().is_some_and(|g| g.unsettled());
        self.blocking(move |l| {
            l.cache.set_meta(LAST_LISTING_META, &stamp)?;
            // An owed listing is paid by one that started after the debt was recorded.
            let owed = l.cache.meta(LISTING_OWED_META)?.unwrap_or_default();
            if settled && DateTime::parse_from_rfc3339(&owed).is_ok_and(|t| t <= started) {
                l.cache.set_meta(LISTING_OWED_META, "")?;
            }
            Ok(())
        })
        .await?;
        if n > 0 {
            tracing::warn!(location = %self.name(), files = n, "the location listing found files whose events never came; they are cached now");
        }
        Ok(n)
    }
}

/// A listed file as a cache entry.
fn to_event(f: &landfall_core::FileMeta) -> NewEvent {
    NewEvent {
        path: f.path.clone(),
        size: f.size,
        etag: f.etag.clone(),
        version: if f.etag.is_some() {
            None
        } else {
            f.version.clone()
        },
        modified: f.modified,
        sequencer: None,
    }
}
