//! Managed file events in this process: one event-cache handle and one consumer per
//! `[locations.<name>]`, shared by every stream reading the location.
//!
//! The cache is opened once per process ([`open`]) and kept for the process's life; the
//! consumer starts with the first stream that reads the location ([`ensure_consumer`]) and
//! runs until shutdown. A failing consumer is retried with backoff (1 s doubling to 60 s); it
//! never stops a stream: streams read what the cache has and list their own prefix once the
//! consumer has not finished a round for `fallback_after`. The consumer's error is kept in
//! the cache for `landfall locations`.
//!
//! Each consumer round is reported by [`round`], which logs and counts together.

use crate::metrics::{LocationLabel, Metrics};
use crate::notify_setup::QueueOwner;
use landfall_config::{LocationSpec, StreamSpec, ValidatedConfig};
use landfall_core::SeamError;
use landfall_core::seams::SeamResult;
use landfall_discovery::{
    CONSUMER_ERROR_META, ConsumerError, CountRequests, EventLocation, LocationConsumer,
    LocationRound, QueueReader,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// How often the consumer checks whether a location listing is due.
const LISTING_CHECK: Duration = Duration::from_secs(1);
const LISTING_BACKOFF_MAX: Duration = Duration::from_secs(600);

/// The file-events locations of the process: one cache handle each, opened on first use, and
/// whether its consumer runs here. Owned by the process's [`crate::Hub`] and passed down (no
/// process-wide statics: a reload or a test builds its own).
#[derive(Default)]
pub struct Locations {
    open: Mutex<HashMap<String, Arc<EventLocation>>>,
    consuming: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Locations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("Locations")
            .field("open", &open.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Locations {
    /// The process's handle on a location's cache, opened on first use.
    pub fn open(&self, spec: &LocationSpec) -> SeamResult<Arc<EventLocation>> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = open.get(&spec.name) {
            return Ok(l.clone());
        }
        let cache = landfall_state::open_event_cache(&spec.name, &spec.state_dir)?;
        // The prefix as object_store decodes it from the URL (events name keys decoded).
        let (_, prefix) = landfall_discovery::open_store(&spec.url.url, spec.options.iter())
            .map_err(|e| {
                SeamError::fatal(format!(
                    "location `{}`: {}: {e}",
                    spec.name,
                    spec.url.shown()
                ))
            })?;
        let l = Arc::new(EventLocation::new(
            &spec.name,
            cache,
            prefix,
            spec.retention,
            spec.fallback_after,
        )?);
        // A cache older than the last number this process family gave (restored from a copy,
        // or writes lost): streams positioned at or below its last number may have missed the
        // events cached after the copy, whose messages are deleted. Every position is outdated
        // so each stream lists once.
        let last = l.cache.last_seq()?;
        if let Some(mark) = read_mark(spec)
            && mark > last
        {
            let h = l.cache.outdate_positions()?;
            tracing::warn!(location = %spec.name, last_seq = last, known = mark, horizon = h, "the event cache is older than the last state this location knew (restored from a copy?); every stream reading it lists its prefix once");
        }
        open.insert(spec.name.clone(), l.clone());
        Ok(l)
    }

    /// The handle of a location open in this process, if any.
    fn live(&self, name: &str) -> Option<Arc<EventLocation>> {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Start the location's consumer unless it runs in this process already. `drain`: runs
    /// that stop once drained receive with a short wait.
    pub fn ensure_consumer(
        self: &Arc<Self>,
        spec: &LocationSpec,
        shutdown: watch::Receiver<bool>,
        drain: bool,
        metrics: Arc<Metrics>,
    ) {
        if !self
            .consuming
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(spec.name.clone())
        {
            return;
        }
        tokio::spawn(supervise(
            self.clone(),
            spec.clone(),
            shutdown,
            drain,
            metrics,
        ));
    }
}

/// Beside the cache directory: the highest sequence number the cache ever gave, written after
/// rounds. A cache below it was restored from an older copy.
fn mark_path(spec: &LocationSpec) -> std::path::PathBuf {
    let mut name = spec
        .state_dir
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".last_seq");
    spec.state_dir.with_file_name(name)
}

fn read_mark(spec: &LocationSpec) -> Option<u64> {
    std::fs::read_to_string(mark_path(spec))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// Write the mark (atomically: a temporary file renamed over it). Best effort: a missing mark
/// only weakens the check.
fn write_mark(spec: &LocationSpec, seq: u64) {
    let path = mark_path(spec);
    let tmp = path.with_extension("tmp");
    if std::fs::write(&tmp, seq.to_string())
        .and_then(|_| std::fs::rename(&tmp, &path))
        .is_err()
    {
        tracing::debug!(location = %spec.name, "could not write the cache's sequence mark");
    }
}

/// The file-events location a stream reads, if any.
pub fn of_stream(spec: &StreamSpec) -> Option<&LocationSpec> {
    match &spec.discovery {
        landfall_config::DiscoverySpec::FileEvents(f) => Some(&f.location),
        _ => None,
    }
}

fn label(location: &str, kind: &str) -> LocationLabel {
    LocationLabel {
        location: location.to_string(),
        kind: kind.to_string(),
    }
}

async fn supervise(
    locations: Arc<Locations>,
    spec: LocationSpec,
    mut shutdown: watch::Receiver<bool>,
    drain: bool,
    metrics: Arc<Metrics>,
) {
    let mut backoff = BACKOFF_START;
    let up = metrics
        .location_consumer_up
        .get_or_create(&label(&spec.name, ""))
        .clone();
    loop {
        if *shutdown.borrow() {
            break;
        }
        let err = match build(&locations, &spec, drain, &metrics).await {
            Ok(c) => {
                let c = Arc::new(c);
                // Streams take snapshot positions once the location is ready: outdate stale
                // ones first, or they would list twice.
                if let Err(e) = c.check_gap().await {
                    failed(&spec.name, &e, backoff, &metrics);
                }
                c.location().set_ready();
                // The location listing runs beside the rounds: a long listing never holds up
                // the queue, and a failed one does not stop it. A draining run lists first
                // (when due), so what it finds is cached before the streams catch up.
                let lister = if drain {
                    listed(&spec.name, &c.list_if_due().await, &metrics);
                    None
                } else {
                    let (c, metrics, name) = (c.clone(), metrics.clone(), spec.name.clone());
                    Some(tokio::spawn(async move {
                        // A failing listing (LIST denied, a store outage) backs off, 1 s
                        // doubling to 10 min.
                        let mut pause = LISTING_CHECK;
                        loop {
                            let r = c.list_if_due().await;
                            listed(&name, &r, &metrics);
                            pause = match r {
                                Err(_) => (pause * 2).min(LISTING_BACKOFF_MAX),
                                Ok(_) => LISTING_CHECK,
                            };
                            tokio::time::sleep(pause).await;
                        }
                    }))
                };
                let e = run(&spec, &c, &mut shutdown, &metrics, &up, &mut backoff, drain).await;
                if let Some(l) = lister {
                    l.abort();
                }
                e
            }
            Err(e) => Some(e),
        };
        up.set(0);
        let Some(e) = err else { break };
        failed(&spec.name, &e, backoff, &metrics);
        if let Ok(l) = locations.open(&spec) {
            l.record_error(&e);
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
    locations
        .consuming
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&spec.name);
}

/// Rounds until shutdown (`None`) or an error.
async fn run(
    spec: &LocationSpec,
    c: &LocationConsumer,
    shutdown: &mut watch::Receiver<bool>,
    metrics: &Metrics,
    up: &prometheus_client::metrics::gauge::Gauge,
    backoff: &mut Duration,
    drain: bool,
) -> Option<SeamError> {
    let location = c.location().clone();
    // Draining: the last round found the queue empty (or none ran yet).
    let mut idle = true;
    // The sequence mark last written (see `mark_path`).
    let mut marked = read_mark(spec).unwrap_or(0);
    loop {
        if *shutdown.borrow() {
            return None;
        }
        // Draining runs receive only while a stream waits to catch up (see
        // `EventLocation::demanded`).
        if drain && idle {
            tokio::select! {
                _ = location.demanded() => {}
                _ = shutdown.changed() => return None,
            }
        }
        // A receive may long-poll; dropping it loses nothing (messages are deleted only
        // after their events are cached).
        let r = tokio::select! {
            r = async { c.check_gap().await?; c.round().await } => r,
            _ = shutdown.changed() => return None,
        };
        match r {
            Ok(r) => {
                idle = r.queue.received == 0;
                up.set(1);
                *backoff = BACKOFF_START;
                round(&spec.name, &r, metrics);
                if let Ok(last) = location.cache.last_seq()
                    && last != marked
                {
                    write_mark(spec, last);
                    marked = last;
                }
                if let Ok(s) = location.cache.stats() {
                    metrics
                        .location_cache_events
                        .get_or_create(&label(&spec.name, ""))
                        .set(s.events as i64);
                }
            }
            Err(e) => return Some(e),
        }
    }
}

/// The consumer of a location: its cache, its queue (set up first when landfall owns it),
/// and a plain listing of the whole location.
async fn build(
    locations: &Locations,
    spec: &LocationSpec,
    drain: bool,
    metrics: &Arc<Metrics>,
) -> SeamResult<LocationConsumer> {
    let location = locations.open(spec)?;
    let owner = QueueOwner::of_location(spec).ok_or_else(|| {
        SeamError::fatal(format!(
            "location `{}` has no queue (file_events = false)",
            spec.name
        ))
    })?;
    let count: CountRequests = {
        let (family, name) = (metrics.location_requests.clone(), spec.name.clone());
        Arc::new(move |op, n| {
            family.get_or_create(&label(&name, op)).inc_by(n);
        })
    };
    // The listing owed is noted in the cache, and paid by a location listing that started
    // after it (`LocationConsumer::list`).
    let owed = {
        let (l, m) = (location.clone(), location.clone());
        landfall_discovery::OwedListing {
            owe: Arc::new(move || {
                l.cache
                    .set_meta(
                        landfall_discovery::LISTING_OWED_META,
                        &chrono::Utc::now().to_rfc3339(),
                    )
                    .map_err(|e| e.to_string())
            }),
            owed: Arc::new(move || {
                m.cache
                    .meta(landfall_discovery::LISTING_OWED_META)
                    .ok()
                    .flatten()
                    .is_some_and(|t| !t.is_empty())
            }),
        }
    };
    let (queue, source, guard) = crate::wiring::open_queue(
        &owner,
        &location.cache,
        count.clone(),
        metrics.clone(),
        owed,
    )
    .await?;
    let n = owner.queue;
    let reader = QueueReader::new(
        format!("location `{}`", spec.name),
        queue,
        n.receivers,
        n.visibility_timeout,
        n.wait_time,
    );
    reader.set_no_wait(drain);
    let listing = crate::wiring::open_listing(
        &format!("location `{}`", spec.name),
        &spec.url.url,
        &spec.options,
        None,
        count,
    )?;
    Ok(
        LocationConsumer::new(location, reader, source, listing, spec.listing_interval)
            .with_entry_guard(guard),
    )
}

/// A consumer round: logged and counted together.
pub fn round(location: &str, r: &LocationRound, metrics: &Metrics) {
    let count = |family: &crate::metrics::Counters<LocationLabel>, kind: &str, n: u64| {
        if n > 0 {
            family.get_or_create(&label(location, kind)).inc_by(n);
        }
    };
    let events = &metrics.location_events;
    count(events, "cached", r.cached);
    count(events, "dropped", r.dropped);
    count(events, "passed_over", r.passed_over);
    count(events, "expired", r.expired);
    count(events, "listed", r.listed.unwrap_or(0));
    let q = &r.queue;
    let messages = &metrics.location_messages;
    count(messages, "received", q.received);
    count(messages, "ignored", q.ignored_messages);
    count(messages, "malformed", q.malformed.len() as u64);
    count(messages, "kept", q.extension_failures);
    count(events, "directory_listed", q.directories_listed);
    for m in &q.malformed {
        tracing::warn!(location, message = %m.id, receive_count = m.receive_count, error = %m.error, "a queue message is not a storage event; it stays in the queue for its redrive policy");
    }
    if r.cached > 0 || r.dropped > 0 || r.expired > 0 {
        tracing::info!(
            location,
            received = q.received,
            cached = r.cached,
            dropped = r.dropped,
            passed_over = r.passed_over,
            expired = r.expired,
            "location round"
        );
    } else {
        tracing::debug!(location, received = q.received, "location round");
    }
}

/// A location listing: logged and counted together.
fn listed(location: &str, result: &SeamResult<Option<u64>>, metrics: &Metrics) {
    match result {
        Ok(None) => {}
        Ok(Some(n)) => {
            metrics
                .location_events
                .get_or_create(&label(location, "listed"))
                .inc_by(*n);
            tracing::info!(location, cached = n, "location listing");
        }
        Err(e) => {
            metrics
                .location_events
                .get_or_create(&label(location, "listing_failures"))
                .inc();
            tracing::warn!(location, error = %e.message, "the location listing failed; it runs again at the next check");
        }
    }
}

/// A consumer failure: logged and counted together.
fn failed(location: &str, e: &SeamError, retry_in: Duration, metrics: &Metrics) {
    metrics
        .location_events
        .get_or_create(&label(location, "consumer_failures"))
        .inc();
    tracing::error!(location, error = %e.message, retry_in_s = retry_in.as_secs(), "the location's consumer failed; streams keep reading the cache and list their prefixes after fallback_after");
}

/// What `landfall locations` and `GET /api/v1/locations` show of one location.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LocationReport {
    pub name: String,
    pub url: String,
    pub file_events: bool,
    pub queue: Option<String>,
    pub queue_depth: Option<u64>,
    pub cache: Option<landfall_state::CacheStats>,
    pub last_round: Option<String>,
    pub consumer_error: Option<ConsumerError>,
    /// Streams reading the location: their position and how many events they are behind.
    pub streams: BTreeMap<String, StreamPosition>,
    /// Why the cache could not be read, if it could not.
    pub error: Option<String>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct StreamPosition {
    pub position: Option<u64>,
    pub behind: Option<u64>,
}

/// Report every location of `cfg`. The cache is read through the process's handle when `live`
/// has one (a running daemon's locations), else opened read-only; `positions` gives a stream's discovery
/// cursor. `depth`: also ask each queue how many messages wait.
pub async fn report(
    cfg: &ValidatedConfig,
    live: Option<&Locations>,
    positions: &(dyn Fn(&StreamSpec) -> Option<String> + Sync),
    depth: bool,
) -> Vec<LocationReport> {
    let mut out = Vec::new();
    for l in &cfg.locations {
        let owner = QueueOwner::of_location(l);
        let mut r = LocationReport {
            name: l.name.clone(),
            url: l.url.shown(),
            file_events: l.queue.is_some(),
            queue: None,
            queue_depth: None,
            cache: None,
            last_round: None,
            consumer_error: None,
            streams: BTreeMap::new(),
            error: None,
        };
        let live = live.and_then(|o| o.live(&l.name));
        let read = |cache: &landfall_state::EventCache<landfall_state::RocksKv>| -> Result<_, landfall_state::StateError> {
            Ok((
                cache.stats()?,
                cache.meta(landfall_discovery::LAST_ROUND_META)?,
                cache.meta(CONSUMER_ERROR_META)?,
                cache.meta(crate::notify_setup::RESOURCES_META)?,
            ))
        };
        let got = match &live {
            Some(h) => read(&h.cache),
            None => landfall_state::open_event_cache_read_only(&l.name, &l.state_dir)
                .and_then(|c| read(&c)),
        };
        match got {
            Ok((stats, last, err, resources)) => {
                for s in cfg
                    .streams
                    .iter()
                    .filter(|s| of_stream(s).is_some_and(|sl| sl.name == l.name))
                {
                    let cursor = positions(s);
                    let position =
                        landfall_discovery::parse_position(cursor.as_deref()).map(|p| p.seq);
                    r.streams.insert(
                        s.name.clone(),
                        StreamPosition {
                            position,
                            behind: position.map(|p| stats.last_seq.saturating_sub(p)),
                        },
                    );
                }
                r.cache = Some(stats);
                r.last_round = last.filter(|t| !t.is_empty());
                r.consumer_error = err.and_then(|j| serde_json::from_str(&j).ok());
                r.queue = resources
                    .and_then(|j| {
                        serde_json::from_str::<landfall_discovery::CreatedResources>(&j).ok()
                    })
                    .and_then(|c| c.queue_url);
            }
            Err(e) => r.error = Some(e.to_string()),
        }
        if let Some(o) = &owner {
            match &o.queue.queue {
                landfall_config::QueueSpec::Sqs { url: Some(u), .. } => r.queue = Some(u.clone()),
                landfall_config::QueueSpec::AzureQueue { name } => r.queue = Some(name.clone()),
                _ => {}
            }
            if depth && r.queue.is_some() {
                r.queue_depth = queue_depth(o, r.queue.as_deref()).await;
            }
        }
        out.push(r);
    }
    out
}

/// The approximate number of messages waiting in the owner's queue (best effort).
async fn queue_depth(o: &QueueOwner<'_>, queue: Option<&str>) -> Option<u64> {
    let none: CountRequests = Arc::new(|_, _| {});
    let q: Arc<dyn landfall_discovery::MessageQueue> = match &o.queue.queue {
        landfall_config::QueueSpec::Sqs { .. } => {
            let aws = crate::notify_setup::aws_settings(o);
            Arc::new(landfall_discovery::SqsQueue::new(
                &aws.sdk_config().await,
                queue?,
                none,
            ))
        }
        landfall_config::QueueSpec::AzureQueue { name } => {
            Arc::new(landfall_discovery::AzureQueue::new(
                crate::notify_setup::azure_settings(o, name).ok()?,
                none,
            ))
        }
    };
    tokio::time::timeout(Duration::from_secs(10), q.approximate_depth())
        .await
        .ok()?
        .ok()
        .flatten()
}
