//! Reading a notification queue in rounds, shared by notification streams
//! ([`crate::NotificationDiscovery`]) and file-events location consumers
//! ([`crate::LocationConsumer`]).
//!
//! One round receives with `receivers` concurrent long polls (10 messages each), continuing
//! without waiting while receives come back full, up to [`MAX_MESSAGES_PER_ROUND`] or half a
//! visibility timeout after its first message (counted from when the receive that brought it
//! was sent: the queue started the message's timeout after that), whichever comes first;
//! calls still unanswered at three quarters of it are let go (what they would deliver comes to
//! a later round). The messages are held from the moment they arrive until the caller
//! acknowledges them, which deletes them; the caller does so only once what they carry is
//! durably recorded. While messages are held (during the round too) a heartbeat extends their
//! visibility about every half timeout.
//!
//! Each held delivery carries the instant before which it is surely invisible to every other
//! consumer: the moment its receive (or last successful extension) was *sent*, plus the
//! visibility timeout it asked for in whole seconds, less a margin (a tenth of the timeout, at
//! least half a second) for the time a delete takes to land. A delivery acknowledged before
//! that instant is deleted even if an extension failed: nobody else can have received it. One
//! acknowledged after it may already be with another consumer: it is not deleted (its content
//! is recorded, and recording is idempotent), it comes back and is recognised as known, and
//! the next round reports it as kept. The heartbeat tries again at its next tick for
//! deliveries whose extension was refused while at least a sixth of a timeout is left.
//!
//! A new round lets go of deliveries an earlier round never acknowledged (that round failed
//! before recording): they become visible again and are received anew.

use crate::queue::{Extension, MessageQueue, QueueMessage};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use landfall_core::seams::SeamResult;
use landfall_core::{AckToken, SeamError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// At most this many messages are received before the round's content is recorded.
pub const MAX_MESSAGES_PER_ROUND: usize = 1000;

/// Long-poll wait of a draining run's receives.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// A received delivery not yet acknowledged.
struct Held {
    receipt: String,
    /// Until when no other consumer can have received it (see the module docs).
    ours_until: Instant,
}

/// What is taken off a visibility timeout: a tenth, at least 0.5 s. It covers the time between
/// the check and the queue applying a delete, which the checks bound by it.
fn margin(visibility: Duration) -> Duration {
    (visibility / 10).max(Duration::from_millis(500))
}

/// Until when a delivery received (or extended) by a request sent at `sent` asking for
/// `visibility` is surely invisible to other consumers. The queues take whole seconds.
fn ours_until(sent: Instant, visibility: Duration) -> Instant {
    let asked = Duration::from_secs(visibility.as_secs());
    sent + asked.saturating_sub(margin(visibility))
}

type HeldMap = Arc<Mutex<HashMap<String, Held>>>;

pub struct QueueReader {
    /// Who reads (`stream \`x\`` or `location \`raw\``), for messages.
    owner: String,
    queue: Arc<dyn MessageQueue>,
    receivers: usize,
    visibility: Duration,
    wait: Duration,
    held: HeldMap,
    /// Held by the heartbeat from an extension's call until its answers are applied, and by
    /// an acknowledgement while it takes its deliveries: a delete never races an update that
    /// would replace its receipt (Azure).
    extending: Arc<tokio::sync::Mutex<()>>,
    heartbeat: tokio::task::JoinHandle<()>,
    /// Receive with a short wait (runs that stop once the queue is drained).
    no_wait: AtomicBool,
    /// Deliveries not deleted since the last round: held past their visibility timeout.
    kept: AtomicU64,
}

impl Drop for QueueReader {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

impl QueueReader {
    pub fn new(
        owner: String,
        queue: Arc<dyn MessageQueue>,
        receivers: usize,
        visibility: Duration,
        wait: Duration,
    ) -> Self {
        let held: HeldMap = Arc::default();
        let extending: Arc<tokio::sync::Mutex<()>> = Arc::default();
        let heartbeat = tokio::spawn(heartbeat(
            owner.clone(),
            queue.clone(),
            (held.clone(), extending.clone()),
            visibility,
        ));
        QueueReader {
            owner,
            queue,
            receivers: receivers.max(1),
            visibility,
            wait,
            held,
            extending,
            heartbeat,
            no_wait: AtomicBool::new(false),
            kept: AtomicU64::new(0),
        }
    }

    pub fn queue(&self) -> &Arc<dyn MessageQueue> {
        &self.queue
    }

    /// Receive with a short wait: for runs that stop once the queue is drained.
    pub fn set_no_wait(&self, no_wait: bool) {
        self.no_wait.store(no_wait, Ordering::SeqCst);
    }

    /// Deliveries left undeleted since the last call: held past their visibility timeout.
    pub fn take_kept(&self) -> u64 {
        self.kept.swap(0, Ordering::SeqCst)
    }

    /// One round: up to [`MAX_MESSAGES_PER_ROUND`] messages, held until acknowledged.
    pub async fn receive(&self) -> SeamResult<Vec<QueueMessage>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).clear();
        // When the receive that brought the round's first message was sent (its visibility
        // timeout started after that): the round is bounded by that message's age.
        let mut first_held: Option<Instant> = None;
        let mut out: Vec<QueueMessage> = Vec::new();
        // Draining runs still long-poll briefly: a short poll samples only some SQS servers
        // and may come back empty while messages wait.
        let mut wait = if self.no_wait.load(Ordering::SeqCst) {
            self.wait.min(DRAIN_WAIT)
        } else {
            self.wait
        };
        loop {
            // The server starts a delivery's visibility timeout after this instant.
            let sent = Instant::now();
            let mut calls: FuturesUnordered<_> = (0..self.receivers)
                .map(|_| self.queue.receive(10, wait, self.visibility))
                .collect();
            let mut all_full = true;
            let mut any = false;
            let mut failed = None;
            // Every call's messages are held as soon as that call returns (the heartbeat
            // extends them while the calls beside it still run), and taken before any error
            // is looked at: a failed call must not drop what the calls beside it received
            // (they would stay invisible for a visibility timeout, unheld).
            // No call starts later than half a visibility timeout after the round's first
            // message (below); calls already out are waited for until three quarters of it,
            // before that message can expire even if no extension succeeds. Calls still out
            // then (a silent connection) are let go: what they would have delivered becomes
            // visible again and comes to a later round.
            let mut abandoned = 0;
            loop {
                let next = match first_held {
                    Some(t) => {
                        let deadline = t + self.visibility * 3 / 4;
                        match tokio::time::timeout_at(deadline, calls.next()).await {
                            Ok(next) => next,
                            Err(_) => {
                                abandoned = calls.len();
                                break;
                            }
                        }
                    }
                    None => calls.next().await,
                };
                let Some(r) = next else { break };
                match r {
                    Ok(msgs) => {
                        all_full &= msgs.len() == 10;
                        any |= !msgs.is_empty();
                        if !msgs.is_empty() {
                            first_held.get_or_insert(sent);
                        }
                        self.hold(&msgs, ours_until(sent, self.visibility));
                        out.extend(msgs);
                    }
                    Err(e) => {
                        all_full = false;
                        failed.get_or_insert(e);
                    }
                }
            }
            if abandoned > 0 {
                all_full = false;
                tracing::warn!(owner = %self.owner, calls = abandoned, "receives still unanswered three quarters of a visibility timeout after the round's first message are let go; the round records what it has");
            }
            if let Some(e) = failed {
                // Messages already received stay held and are returned; the error is
                // reported when nothing was received.
                if out.is_empty() {
                    let msg = format!("{}: {e}", self.owner);
                    return Err(if e.retryable {
                        SeamError::retryable(msg)
                    } else {
                        SeamError::fatal(msg)
                    });
                }
                tracing::warn!(owner = %self.owner, error = %e, "a receive failed; the messages already received are recorded first");
            }
            // A round whose first message arrived half a visibility timeout ago records what
            // it has: its first messages must not become visible again (and come back to
            // this very round) before they are recorded, however slow the receives are.
            if !any
                || !all_full
                || out.len() >= MAX_MESSAGES_PER_ROUND
                || first_held.is_some_and(|t| t.elapsed() >= self.visibility / 2)
            {
                break;
            }
            wait = Duration::ZERO;
        }
        Ok(out)
    }

    /// Hold `msgs` as they arrive: the heartbeat extends them from then on, also while the
    /// round goes on receiving.
    fn hold(&self, msgs: &[QueueMessage], ours_until: Instant) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        for m in msgs {
            held.insert(
                m.receipt.clone(),
                Held {
                    receipt: m.receipt.clone(),
                    ours_until,
                },
            );
        }
    }

    /// Delete the messages whose content is recorded. Deliveries that may have become visible
    /// again (their visibility could not be extended in time) are left: another consumer may
    /// hold them now. Failed deletes are retried twice; a message still not deleted comes back
    /// and is recognised as known.
    pub async fn acknowledge(&self, tokens: Vec<AckToken>) -> SeamResult<()> {
        let mut bounds: HashMap<String, Instant> = HashMap::with_capacity(tokens.len());
        {
            // Where an extension replaces receipts (Azure), after one in flight has applied
            // its answers: the delete uses the newest receipt.
            let _extending = match self.queue.renews_receipts() {
                true => Some(self.extending.lock().await),
                false => None,
            };
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            for t in tokens {
                // None: released by a later round; it will be received again.
                if let Some(h) = held.remove(&t.0) {
                    bounds.insert(h.receipt, h.ours_until);
                }
            }
        }
        let mut receipts: Vec<String> = bounds.keys().cloned().collect();
        let mut kept = 0u64;
        let mut delay = Duration::from_millis(200);
        for attempt in 0..3 {
            // Each attempt deletes only what is surely still this consumer's, and is given
            // until the first of those bounds (less than the margin before it lands).
            let now = Instant::now();
            let before = receipts.len();
            receipts.retain(|r| bounds.get(r).is_some_and(|&b| now < b));
            kept += (before - receipts.len()) as u64;
            let Some(&until) = receipts.iter().filter_map(|r| bounds.get(r)).min() else {
                break;
            };
            match tokio::time::timeout_at(until, self.queue.delete(&receipts)).await {
                Ok(Ok(failed)) => receipts = failed,
                Ok(Err(e)) if attempt == 2 || !e.retryable => {
                    tracing::warn!(owner = %self.owner, error = %e, messages = receipts.len(), "could not delete messages whose content is recorded; they will be received again and recognised as known");
                    receipts.clear();
                    break;
                }
                Ok(Err(_)) | Err(_) => {}
            }
            if !receipts.is_empty() && attempt < 2 {
                tokio::time::sleep(delay).await;
                delay *= 4;
            }
        }
        if kept > 0 {
            self.kept.fetch_add(kept, Ordering::SeqCst);
            tracing::warn!(owner = %self.owner, messages = kept, "messages not deleted before their visibility timeout could have run out (extensions failed or deletes were slow) are left: another consumer may hold them; they will be received again and recognised as known");
        }
        if !receipts.is_empty() {
            tracing::warn!(owner = %self.owner, messages = receipts.len(), "some messages whose content is recorded could not be deleted; they will be received again and recognised as known");
        }
        Ok(())
    }
}

/// Every quarter visibility timeout, extend what is held and has between a sixth and 0.6 of a
/// timeout left before its bound (a delivery is extended about every half timeout, and one
/// refused is tried again at the next tick). Every call is answered by the earliest bound among
/// them and within a quarter timeout (so the ticks keep their pace): what it extends was surely
/// still this consumer's. One whose outcome is unknown (Azure: the pop receipt may have
/// changed) ends its bound: it is neither extended nor deleted any more.
async fn heartbeat(
    owner: String,
    queue: Arc<dyn MessageQueue>,
    (held, extending): (HeldMap, Arc<tokio::sync::Mutex<()>>),
    every: Duration,
) {
    let period = (every / 4).max(Duration::from_millis(250));
    let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let _extending = extending.lock().await;
        let now = Instant::now();
        let due: Vec<(String, String, Instant)> = held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, h)| {
                let left = h.ours_until.saturating_duration_since(now);
                left >= every / 6 && left <= every * 6 / 10
            })
            .map(|(k, h)| (k.clone(), h.receipt.clone(), h.ours_until))
            .collect();
        let Some(first_bound) = due.iter().map(|(_, _, b)| *b).min() else {
            continue;
        };
        let current: Vec<String> = due.iter().map(|(_, r, _)| r.clone()).collect();
        let deadline = first_bound.min(now + period);
        let sent = Instant::now();
        let outcome = match queue.extend(&current, every, deadline).await {
            Ok(outcome) if outcome.len() == current.len() => outcome,
            Ok(_) => vec![Extension::Unknown; current.len()],
            // No call made (no client): nothing changed.
            Err(e) => {
                tracing::warn!(owner = %owner, error = %e, "could not extend the visibility of held messages");
                vec![Extension::Refused; current.len()]
            }
        };
        let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
        let (mut refused, mut unknown) = (0, 0);
        for ((token, _, _), ext) in due.iter().zip(outcome) {
            let Some(h) = held.get_mut(token) else {
                continue;
            };
            match ext {
                Extension::Renewed(r) => {
                    h.receipt = r;
                    h.ours_until = ours_until(sent, every);
                }
                Extension::Refused => refused += 1,
                Extension::Unknown => {
                    unknown += 1;
                    h.ours_until = now;
                }
            }
        }
        if refused + unknown > 0 {
            tracing::warn!(owner = %owner, refused, unknown, "could not extend the visibility of held messages; a refused one is tried again while a sixth of a timeout is left before its bound, and none is deleted once it may have become visible");
        }
    }
}

/// The events of one round's messages about one bucket or container, sorted.
#[derive(Default)]
pub(crate) struct Sorted {
    /// Object-created events, in message order.
    pub created: Vec<crate::StorageEvent>,
    /// Per key, the round's removals of it.
    pub removed: HashMap<String, Removal>,
    /// The messages that were read (malformed ones stay, for the redrive policy).
    pub ack: Vec<AckToken>,
    /// Events in the messages, of any kind and store.
    pub events: u64,
    /// Directories files appeared under that no event names (renamed into place), in message
    /// order: the caller lists them before it acknowledges the messages.
    pub listings: Vec<String>,
    /// Directories removed with everything under them (deleted, or renamed away).
    pub removed_dirs: Vec<String>,
}

/// The removals of one key in a round.
#[derive(Debug, Default, Clone)]
pub(crate) struct Removal {
    /// The latest removal's sequencer (`None`: one came without).
    pub sequencer: Option<String>,
    /// Sequencers do not settle it, the store does: one removal came without a sequencer,
    /// or removed a specific version (a versioned bucket, where the current object may live
    /// on).
    pub ask_store: bool,
}

impl Removal {
    /// Whether this removal settles by sequencer against a creation with `created`.
    pub fn by_sequencer<'a>(&'a self, created: Option<&'a str>) -> Option<(&'a str, &'a str)> {
        match (created, self.sequencer.as_deref()) {
            (Some(c), Some(r)) if !self.ask_store => Some((c, r)),
            _ => None,
        }
    }
}

/// Etags compare without quotes and weak markers: stores and events disagree on quoting.
pub(crate) fn same_etag(a: Option<&str>, b: Option<&str>) -> bool {
    a.map(landfall_state::bare_etag) == b.map(landfall_state::bare_etag)
}

/// Parse a round's messages and keep the events about `source`; what is left out is counted
/// in `round`.
pub(crate) fn sort_messages(
    messages: &[QueueMessage],
    source: &crate::StoreRef,
    round: &mut landfall_core::QueueRound,
) -> Sorted {
    use crate::notification::{EventKind, Notification};
    let mut out = Sorted::default();
    for m in messages {
        let events = match crate::parse_notification(&m.body) {
            Err(e) => {
                round.malformed.push(landfall_core::MalformedMessage {
                    id: m.id.clone(),
                    receive_count: m.receive_count,
                    error: e.to_string(),
                });
                continue;
            }
            Ok(Notification::Ignored(_)) => {
                round.ignored_messages += 1;
                out.ack.push(AckToken(m.receipt.clone()));
                continue;
            }
            Ok(Notification::Events(events)) => events,
        };
        out.events += events.len() as u64;
        for ev in events {
            if &ev.store != source {
                round.other_events += 1;
                continue;
            }
            match ev.kind {
                EventKind::Created => out.created.push(ev),
                EventKind::Removed => {
                    round.removed_events += 1;
                    let r = out.removed.entry(ev.key.clone()).or_default();
                    r.ask_store |= ev.version.is_some();
                    match ev.sequencer {
                        Some(s) if r.sequencer.as_deref().is_none_or(|l| seq_after(&s, l)) => {
                            r.sequencer = Some(s)
                        }
                        Some(_) => {}
                        // One removal without a sequencer: the store settles it.
                        None => r.ask_store = true,
                    }
                }
                EventKind::NeedsListing => {
                    if !out.listings.contains(&ev.key) {
                        out.listings.push(ev.key);
                    }
                }
                EventKind::DirectoryRemoved => {
                    round.removed_events += 1;
                    if !out.removed_dirs.contains(&ev.key) {
                        out.removed_dirs.push(ev.key);
                    }
                }
                EventKind::Other(_) => round.other_events += 1,
            }
        }
        out.ack.push(AckToken(m.receipt.clone()));
    }
    out
}

pub(crate) use landfall_state::seq_after;

/// Whether `inner` is `outer` or lies below it (an empty `outer` holds everything).
pub(crate) fn nests(outer: &str, inner: &str) -> bool {
    outer.is_empty()
        || inner
            .strip_prefix(outer)
            .is_some_and(|r| r.is_empty() || r.starts_with('/'))
}

/// The files under directory `dir` that `listing` takes (below its prefix, through its
/// filters): a directory renamed into place, whose files no event names. `None` when `dir`
/// and the prefix do not nest. It lists through the store (object_store), which fails on a key
/// it cannot represent; the caller then falls back to a listing that survives such keys.
pub(crate) async fn list_directory(
    owner: &str,
    listing: &crate::ListingDiscovery,
    dir: &str,
) -> SeamResult<Option<landfall_core::DiscoveryBatch>> {
    let prefix = listing.prefix();
    let root = if nests(prefix.as_ref(), dir) {
        dir
    } else if nests(dir, prefix.as_ref()) {
        prefix.as_ref()
    } else {
        return Ok(None);
    };
    let root = object_store::path::Path::parse(root)
        .map_err(|e| SeamError::retryable(format!("{owner}: directory {dir:?}: {e}")))?;
    // Every object under the directory; the listing's own filters, relative to its prefix,
    // decide below.
    let all = crate::Filters {
        keep_hidden: true,
        ..crate::Filters::default()
    };
    let under = crate::ListingDiscovery::new(owner, listing.store().clone(), root, all);
    let mut batch = landfall_core::Discovery::discover(&under, None).await?;
    let now = chrono::Utc::now();
    let takes = |path: &str, modified| {
        listing
            .filters()
            .accepts(crate::relative_path(prefix, path), modified, now)
    };
    let before = batch.files.len() + batch.passed_over.len();
    batch.files.retain(|f| takes(&f.path, f.modified));
    batch.passed_over.retain(|(_, path)| takes(path, now));
    batch.filtered += (before - batch.files.len() - batch.passed_over.len()) as u64;
    batch.cursor = None;
    batch.full_listing = false;
    Ok(Some(batch))
}

/// An etag as object_store reports it: in double quotes.
pub(crate) fn quoted(etag: &str) -> String {
    if etag.starts_with('"') || etag.starts_with("W/\"") {
        etag.to_string()
    } else {
        format!("\"{etag}\"")
    }
}
