//! Reading a notification queue in rounds, shared by notification streams
//! ([`crate::NotificationDiscovery`]) and file-events location consumers
//! ([`crate::LocationConsumer`]).
//!
//! One round receives with `receivers` concurrent long polls (10 messages each), continuing
//! without waiting while receives come back full, up to [`MAX_MESSAGES_PER_ROUND`]. The
//! messages are held until the caller acknowledges them, which deletes them; the caller does
//! so only once what they carry is durably recorded. While messages are held a heartbeat
//! extends their visibility every half timeout. A delivery whose extension failed may already
//! be with another consumer: it is not deleted (its content is recorded, and recording is
//! idempotent), and the next round reports it.
//!
//! A new round lets go of deliveries an earlier round never acknowledged (that round failed
//! before recording): they become visible again and are received anew.

use crate::queue::{MessageQueue, QueueMessage};
use futures::future::join_all;
use landfall_core::seams::SeamResult;
use landfall_core::{AckToken, SeamError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// At most this many messages are received before the round's content is recorded.
pub const MAX_MESSAGES_PER_ROUND: usize = 1000;

/// Long-poll wait of a draining run's receives.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// A received delivery not yet acknowledged.
struct Held {
    receipt: String,
    extension_failed: bool,
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
    heartbeat: tokio::task::JoinHandle<()>,
    /// Receive with a short wait (runs that stop once the queue is drained).
    no_wait: AtomicBool,
    /// Deliveries not deleted since the last round because their extension failed.
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
        let heartbeat = tokio::spawn(heartbeat(
            owner.clone(),
            queue.clone(),
            held.clone(),
            visibility,
        ));
        QueueReader {
            owner,
            queue,
            receivers: receivers.max(1),
            visibility,
            wait,
            held,
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

    /// Deliveries left undeleted since the last call because their extension failed.
    pub fn take_kept(&self) -> u64 {
        self.kept.swap(0, Ordering::SeqCst)
    }

    /// One round: up to [`MAX_MESSAGES_PER_ROUND`] messages, held until acknowledged.
    pub async fn receive(&self) -> SeamResult<Vec<QueueMessage>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let mut out: Vec<QueueMessage> = Vec::new();
        // Draining runs still long-poll briefly: a short poll samples only some SQS servers
        // and may come back empty while messages wait.
        let mut wait = if self.no_wait.load(Ordering::SeqCst) {
            self.wait.min(DRAIN_WAIT)
        } else {
            self.wait
        };
        loop {
            let calls = (0..self.receivers).map(|_| self.queue.receive(10, wait, self.visibility));
            let mut all_full = true;
            let mut any = false;
            for r in join_all(calls).await {
                match r {
                    Ok(msgs) => {
                        all_full &= msgs.len() == 10;
                        any |= !msgs.is_empty();
                        out.extend(msgs);
                    }
                    // Messages already received stay held and are returned; the error is
                    // reported when nothing was received.
                    Err(e) if out.is_empty() => {
                        let msg = format!("{}: {e}", self.owner);
                        return Err(if e.retryable {
                            SeamError::retryable(msg)
                        } else {
                            SeamError::fatal(msg)
                        });
                    }
                    Err(e) => {
                        tracing::warn!(owner = %self.owner, error = %e, "a receive failed; the messages already received are recorded first");
                        all_full = false;
                    }
                }
            }
            if !any || !all_full || out.len() >= MAX_MESSAGES_PER_ROUND {
                break;
            }
            wait = Duration::ZERO;
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        for m in &out {
            held.insert(
                m.receipt.clone(),
                Held {
                    receipt: m.receipt.clone(),
                    extension_failed: false,
                },
            );
        }
        Ok(out)
    }

    /// Delete the messages whose content is recorded. Deliveries whose visibility could not
    /// be extended are left (another consumer may hold them now). Failed deletes are retried
    /// twice; a message still not deleted comes back and is recognised as known.
    pub async fn acknowledge(&self, tokens: Vec<AckToken>) -> SeamResult<()> {
        let mut receipts = Vec::with_capacity(tokens.len());
        let mut kept = 0u64;
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            for t in tokens {
                match held.remove(&t.0) {
                    Some(h) if !h.extension_failed => receipts.push(h.receipt),
                    Some(_) => kept += 1,
                    // Released by a later round: it will be received again.
                    None => {}
                }
            }
        }
        if kept > 0 {
            self.kept.fetch_add(kept, Ordering::SeqCst);
            tracing::warn!(owner = %self.owner, messages = kept, "messages whose visibility could not be extended are not deleted; they will be received again and recognised as known");
        }
        let mut delay = Duration::from_millis(200);
        for attempt in 0..3 {
            if receipts.is_empty() {
                break;
            }
            match self.queue.delete(&receipts).await {
                Ok(failed) => receipts = failed,
                Err(e) if attempt == 2 || !e.retryable => {
                    tracing::warn!(owner = %self.owner, error = %e, messages = receipts.len(), "could not delete messages whose content is recorded; they will be received again and recognised as known");
                    return Ok(());
                }
                Err(_) => {}
            }
            if !receipts.is_empty() {
                tokio::time::sleep(delay).await;
                delay *= 4;
            }
        }
        if !receipts.is_empty() {
            tracing::warn!(owner = %self.owner, messages = receipts.len(), "some messages whose content is recorded could not be deleted; they will be received again and recognised as known");
        }
        Ok(())
    }
}

/// Every half visibility timeout, extend what is held.
async fn heartbeat(owner: String, queue: Arc<dyn MessageQueue>, held: HeldMap, every: Duration) {
    let period = (every / 2).max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(period).await;
        let receipts: Vec<(String, String)> = held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, h)| !h.extension_failed)
            .map(|(k, h)| (k.clone(), h.receipt.clone()))
            .collect();
        if receipts.is_empty() {
            continue;
        }
        let current: Vec<String> = receipts.iter().map(|(_, r)| r.clone()).collect();
        let outcome = queue.extend(&current, every).await;
        let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
        match outcome {
            Ok(renewed) => {
                for ((token, _), new) in receipts.iter().zip(renewed) {
                    if let Some(h) = held.get_mut(token) {
                        match new {
                            Some(r) => h.receipt = r,
                            None => h.extension_failed = true,
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(owner = %owner, error = %e, "could not extend the visibility of held messages; they will not be deleted");
                for (token, _) in &receipts {
                    if let Some(h) = held.get_mut(token) {
                        h.extension_failed = true;
                    }
                }
            }
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
                EventKind::Other(_) => round.other_events += 1,
            }
        }
        out.ack.push(AckToken(m.receipt.clone()));
    }
    out
}

pub(crate) use landfall_state::seq_after;

/// An etag as object_store reports it: in double quotes.
pub(crate) fn quoted(etag: &str) -> String {
    if etag.starts_with('"') || etag.starts_with("W/\"") {
        etag.to_string()
    } else {
        format!("\"{etag}\"")
    }
}
