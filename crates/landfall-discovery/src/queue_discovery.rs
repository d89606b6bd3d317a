//! Notification discovery: candidates come from storage events on a queue; a listing runs when
//! asked (entering notification mode, `backfill_interval`, an admin backfill).
//!
//! One round receives with `receivers` concurrent long polls (10 messages each), continuing
//! without waiting while receives come back full, up to [`MAX_MESSAGES_PER_ROUND`]. Each body
//! is parsed ([`crate::parse_notification`]); object-created events about the source's bucket
//! or container, under its prefix and through its filters, become candidates. The candidates
//! are returned with one acknowledgement token per message; the worker admits the files to
//! the ledger (one synced write) and only then acknowledges, which deletes the messages. So a
//! crash between receive and record loses nothing (the messages come back after their
//! visibility timeout), and one between record and delete duplicates nothing (the ledger
//! already knows the files).
//!
//! - A message that cannot be parsed is reported with its id and receive count and is not
//!   deleted: the queue's redrive policy moves it aside after its max receive count. It never
//!   stops the stream.
//! - Test events, SNS confirmations, removed events, other event kinds, other buckets, keys
//!   outside the prefix or the filters: counted, and the message is deleted.
//! - The same key and etag in several messages (duplicates, redeliveries, moto's two events
//!   of a multipart upload) is one candidate; the ledger admits a file once.
//! - While messages are held (between receive and acknowledgement) a heartbeat extends their
//!   visibility every half timeout. A delivery whose extension failed may already be with
//!   another consumer: its files are admitted (the ledger is the arbiter) but the message is
//!   not deleted.
//! - Events carry no size on some Azure APIs: a HEAD fills it in (a file gone by then is left
//!   out: its removal event follows).
//! - Event etags arrive without quotes; they are quoted as object_store reports them, so a
//!   file's identity is the same whether a listing or an event found it.

use crate::listing::ListingDiscovery;
use crate::notification::{EventKind, Notification, StorageEvent, StoreRef};
use crate::queue::{MessageQueue, QueueMessage};
use chrono::{DateTime, Utc};
use futures::future::join_all;
use landfall_core::seams::{NewFilter, SeamResult};
use landfall_core::{
    AckToken, Discovery, DiscoveryBatch, FileMeta, MalformedMessage, QueueRound, SeamError,
};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// At most this many messages are received before the round's files are recorded.
pub const MAX_MESSAGES_PER_ROUND: usize = 1000;

/// Long-poll wait of an available-now run's receives.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// How a notification stream reads its queue.
#[derive(Debug, Clone)]
pub struct QueueOptions {
    pub receivers: usize,
    pub visibility: Duration,
    /// Long-poll wait of the first receive of a round.
    pub wait: Duration,
    pub backfill_interval: Option<Duration>,
}

/// A received delivery not yet acknowledged.
struct Held {
    receipt: String,
    extension_failed: bool,
}

type HeldMap = Arc<Mutex<HashMap<String, Held>>>;

pub struct NotificationDiscovery {
    stream: String,
    listing: ListingDiscovery,
    queue: Arc<dyn MessageQueue>,
    /// The bucket or container events must be about.
    source: StoreRef,
    options: QueueOptions,
    held: HeldMap,
    heartbeat: tokio::task::JoinHandle<()>,
    list_next: AtomicBool,
    /// The last full listing (kept in the stream's state across restarts by the worker).
    last_listing: Mutex<Option<DateTime<Utc>>>,
    /// The last round listed: the next one reads the queue, whatever is due.
    just_listed: AtomicBool,
    /// Receive without waiting (available-now runs: an empty receive means drained).
    no_wait: AtomicBool,
    /// Messages not deleted since the last round because their extension failed (reported
    /// with the next round).
    kept: AtomicU64,
    /// The last time this stream read its queue (from the state, at start).
    last_receive: Mutex<Option<DateTime<Utc>>>,
    gap_checked: AtomicBool,
}

impl Drop for NotificationDiscovery {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

impl NotificationDiscovery {
    pub fn new(
        stream: &str,
        listing: ListingDiscovery,
        queue: Arc<dyn MessageQueue>,
        source: StoreRef,
        options: QueueOptions,
    ) -> Self {
        let held: HeldMap = Arc::default();
        let heartbeat = tokio::spawn(heartbeat(
            stream.to_string(),
            queue.clone(),
            held.clone(),
            options.visibility,
        ));
        NotificationDiscovery {
            stream: stream.to_string(),
            listing,
            queue,
            source,
            options,
            held,
            heartbeat,
            list_next: AtomicBool::new(false),
            last_listing: Mutex::new(None),
            just_listed: AtomicBool::new(false),
            no_wait: AtomicBool::new(false),
            kept: AtomicU64::new(0),
            last_receive: Mutex::new(None),
            gap_checked: AtomicBool::new(false),
        }
    }

    pub fn listing(&self) -> &ListingDiscovery {
        &self.listing
    }

    pub fn listing_mut(&mut self) -> &mut ListingDiscovery {
        &mut self.listing
    }

    pub fn queue(&self) -> &Arc<dyn MessageQueue> {
        &self.queue
    }

    /// List the source on the next round (entering notification mode; a backfill asked for).
    pub fn request_listing(&self) {
        self.list_next.store(true, Ordering::SeqCst);
    }

    /// Receive without long polling: for runs that stop once the queue is drained.
    pub fn set_no_wait(&self, no_wait: bool) {
        self.no_wait.store(no_wait, Ordering::SeqCst);
    }

    /// When the stream last read its queue (from the stream's state, at start).
    pub fn set_last_receive(&self, t: DateTime<Utc>) {
        *self.last_receive.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
    }

    /// At the first round: a stream that did not read its queue for longer than the queue
    /// keeps messages (stopped for days; a dead-letter move is not seen here) lost events for
    /// good; a listing finds their files.
    async fn check_gap(&self) {
        if self.gap_checked.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(last) = *self.last_receive.lock().unwrap_or_else(|e| e.into_inner()) else {
            return;
        };
        let retention = match self.queue.retention().await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(stream = %self.stream, error = %e, "could not read the queue's retention; listing to be safe");
                self.request_listing();
                return;
            }
        };
        let away = (Utc::now() - last).to_std().unwrap_or(Duration::ZERO);
        // Events are kept `retention` after they are sent; allow an hour for clock skew and
        // for events sent while the stream was stopping.
        if away + Duration::from_secs(3600) >= retention {
            tracing::warn!(stream = %self.stream, away_s = away.as_secs(), retention_s = retention.as_secs(), "the queue was not read for about as long as it keeps messages; listing the source for files whose events expired");
            self.request_listing();
        }
    }

    /// When the last full listing ran (from the stream's state, at start).
    pub fn set_last_listing(&self, t: DateTime<Utc>) {
        *self.last_listing.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
    }

    /// A listing is due when asked for, or when `backfill_interval` has passed since the last
    /// one (also across restarts); never twice in a row, so the queue is read in between.
    fn listing_due(&self) -> bool {
        if self.just_listed.swap(false, Ordering::SeqCst) {
            return false;
        }
        if self.list_next.swap(false, Ordering::SeqCst) {
            return true;
        }
        let Some(every) = self.options.backfill_interval else {
            return false;
        };
        let last = *self.last_listing.lock().unwrap_or_else(|e| e.into_inner());
        last.is_none_or(|t| (Utc::now() - t).to_std().unwrap_or(Duration::ZERO) >= every)
    }

    /// Receive up to [`MAX_MESSAGES_PER_ROUND`] messages.
    async fn receive(&self) -> SeamResult<Vec<QueueMessage>> {
        let mut out: Vec<QueueMessage> = Vec::new();
        // Available-now runs still long-poll briefly: a short poll samples only some SQS
        // servers and may come back empty while messages wait.
        let mut wait = if self.no_wait.load(Ordering::SeqCst) {
            self.options.wait.min(DRAIN_WAIT)
        } else {
            self.options.wait
        };
        loop {
            let calls = (0..self.options.receivers.max(1))
                .map(|_| self.queue.receive(10, wait, self.options.visibility));
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
                        let msg = format!("stream `{}`: {e}", self.stream);
                        return Err(if e.retryable {
                            SeamError::retryable(msg)
                        } else {
                            SeamError::fatal(msg)
                        });
                    }
                    Err(e) => {
                        tracing::warn!(stream = %self.stream, error = %e, "a receive failed; the messages already received are recorded first");
                        all_full = false;
                    }
                }
            }
            if !any || !all_full || out.len() >= MAX_MESSAGES_PER_ROUND {
                return Ok(out);
            }
            wait = Duration::ZERO;
        }
    }

    /// One round from the queue.
    async fn queue_round(&self, may_be_new: NewFilter<'_>) -> SeamResult<DiscoveryBatch> {
        // Deliveries of an earlier round that were never acknowledged (the round failed before
        // recording) are let go: they become visible again and are received anew.
        self.held.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let messages = self.receive().await?;
        let mut batch = DiscoveryBatch::default();
        let mut round = QueueRound {
            received: messages.len() as u64,
            extension_failures: self.kept.swap(0, Ordering::SeqCst),
            ..QueueRound::default()
        };
        // Any message means there may be more: the worker discovers again (an available-now
        // run before planning, a continuous one right after its next batch); a round whose
        // long poll found nothing ends that.
        batch.more = !messages.is_empty();
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            for m in &messages {
                held.insert(
                    m.receipt.clone(),
                    Held {
                        receipt: m.receipt.clone(),
                        extension_failed: false,
                    },
                );
            }
        }
        let now = Utc::now();
        // Creations with their sequencers, and per key the latest removal, to settle once the
        // whole round is read (SQS standard queues do not keep order).
        let mut created: Vec<(FileMeta, Option<String>)> = Vec::new();
        let mut removed: HashMap<String, Option<String>> = HashMap::new();
        for m in &messages {
            let events = match crate::parse_notification(&m.body) {
                Err(e) => {
                    round.malformed.push(MalformedMessage {
                        id: m.id.clone(),
                        receive_count: m.receive_count,
                        error: e.to_string(),
                    });
                    continue;
                }
                Ok(Notification::Ignored(_)) => {
                    round.ignored_messages += 1;
                    batch.ack.push(AckToken(m.receipt.clone()));
                    continue;
                }
                Ok(Notification::Events(events)) => events,
            };
            batch.listed += events.len() as u64;
            for ev in events {
                if ev.store != self.source {
                    round.other_events += 1;
                    continue;
                }
                match ev.kind {
                    EventKind::Created => {}
                    EventKind::Removed => {
                        round.removed_events += 1;
                        let latest = removed.entry(ev.key.clone()).or_insert(None);
                        if let Some(s) = ev.sequencer
                            && latest.as_deref().is_none_or(|l| seq_after(&s, l))
                        {
                            *latest = Some(s);
                        }
                        continue;
                    }
                    EventKind::Other(_) => {
                        round.other_events += 1;
                        continue;
                    }
                }
                let sequencer = ev.sequencer.clone();
                match self.candidate(ev, now).await? {
                    Candidate::File(f) => created.push((f, sequencer)),
                    Candidate::Filtered => batch.filtered += 1,
                    Candidate::PassedOver(reason, path) => batch.passed_over.push((reason, path)),
                }
            }
            batch.ack.push(AckToken(m.receipt.clone()));
        }
        let mut seen: HashSet<(String, Option<String>)> = HashSet::new();
        for (f, seq) in created {
            if !seen.insert((f.path.clone(), f.etag.clone())) {
                continue;
            }
            if let Some(removal) = removed.get(&f.path)
                && !self
                    .outlives_removal(&f, seq.as_deref(), removal.as_deref())
                    .await
            {
                batch.filtered += 1;
                continue;
            }
            batch.files.push(f);
        }
        if !batch.files.is_empty() {
            let keep = may_be_new(&batch.files)?;
            let mut keep = keep.into_iter();
            batch.files.retain(|_| keep.next().unwrap_or(true));
        }
        batch.queue = Some(round);
        Ok(batch)
    }

    /// Whether a created file is still there although the round also holds a removal of its
    /// key: by the events' sequencers when both have one (S3), else by asking the store (a
    /// HEAD that finds the same version). A file created and deleted before it was read must
    /// not be admitted (it would be recorded as skipped and, without allow_overwrites, block
    /// a later upload of the key); one deleted and uploaded again must be.
    async fn outlives_removal(
        &self,
        f: &FileMeta,
        created: Option<&str>,
        removed: Option<&str>,
    ) -> bool {
        if let (Some(c), Some(r)) = (created, removed) {
            return seq_after(c, r);
        }
        let path = Path::parse(&f.path).unwrap_or_else(|_| Path::from(f.path.as_str()));
        match self.listing.store().head(&path).await {
            Ok(h) => f.etag.is_none() || h.e_tag == f.etag,
            Err(object_store::Error::NotFound { .. }) => false,
            // Unknown: admit it; reading it classifies a missing file.
            Err(_) => true,
        }
    }

    /// What an object-created event about the source's store amounts to.
    async fn candidate(
        &self,
        ev: StorageEvent,
        now: chrono::DateTime<Utc>,
    ) -> SeamResult<Candidate> {
        let prefix = self.listing.prefix().as_ref();
        let under = prefix.is_empty()
            || ev
                .key
                .strip_prefix(prefix)
                .is_some_and(|r| r.starts_with('/'));
        if !under {
            return Ok(Candidate::Filtered);
        }
        // object_store would drop a trailing `/` and address another object.
        let parsed = Path::parse(&ev.key).ok().filter(|_| !ev.key.ends_with('/'));
        let Some(path) = parsed else {
            return Ok(Candidate::PassedOver("unrepresentable_key", ev.key));
        };
        let relative = crate::relative_path(self.listing.prefix(), path.as_ref());
        let modified = ev.event_time.unwrap_or(now);
        if !self.listing.filters().accepts(relative, modified, now) {
            return Ok(Candidate::Filtered);
        }
        let mut meta = FileMeta {
            path: path.to_string(),
            size: ev.size.unwrap_or(0),
            modified,
            etag: ev.etag.as_deref().map(quoted),
            // With an etag the version adds nothing to the identity, and reading by version
            // needs s3:GetObjectVersion, which listing mode never needed.
            version: if ev.etag.is_some() { None } else { ev.version },
        };
        if ev.size.is_none() {
            match self.listing.store().head(&path).await {
                Ok(h) => {
                    meta.size = h.size;
                    meta.modified = h.last_modified;
                    meta.etag = h.e_tag.or(meta.etag);
                    meta.version = h.version.or(meta.version);
                }
                Err(object_store::Error::NotFound { .. }) => return Ok(Candidate::Filtered),
                Err(e) => {
                    return Err(SeamError::retryable(format!(
                        "stream `{}`: HEAD {}: {e}",
                        self.stream, ev.key
                    )));
                }
            }
        }
        if meta.size == 0 {
            return Ok(Candidate::PassedOver("empty", meta.path));
        }
        Ok(Candidate::File(meta))
    }
}

enum Candidate {
    File(FileMeta),
    Filtered,
    PassedOver(&'static str, String),
}

/// Whether S3 sequencer `a` orders after `b`: hexadecimal strings of varying length,
/// compared after padding the shorter with leading zeros.
fn seq_after(a: &str, b: &str) -> bool {
    let n = a.len().max(b.len());
    format!("{a:0>n$}") > format!("{b:0>n$}")
}

/// An etag as object_store reports it: in double quotes.
fn quoted(etag: &str) -> String {
    if etag.starts_with('"') || etag.starts_with("W/\"") {
        etag.to_string()
    } else {
        format!("\"{etag}\"")
    }
}

/// Every half visibility timeout, extend what is held.
async fn heartbeat(stream: String, queue: Arc<dyn MessageQueue>, held: HeldMap, every: Duration) {
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
                tracing::warn!(stream = %stream, error = %e, "could not extend the visibility of held messages; they will not be deleted");
                for (token, _) in &receipts {
                    if let Some(h) = held.get_mut(token) {
                        h.extension_failed = true;
                    }
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl Discovery for NotificationDiscovery {
    async fn discover(&self, cursor: Option<&str>) -> SeamResult<DiscoveryBatch> {
        self.discover_new(cursor, &|files| Ok(vec![true; files.len()]))
            .await
    }

    async fn discover_new(
        &self,
        _cursor: Option<&str>,
        may_be_new: NewFilter<'_>,
    ) -> SeamResult<DiscoveryBatch> {
        self.check_gap().await;
        if self.listing_due() {
            let started = Utc::now();
            // Without the cursor: files admitted from the queue do not move it, so keys after
            // it are not known to be new, and every listed file is looked up.
            let batch = self.listing.discover_new(None, may_be_new).await?;
            *self.last_listing.lock().unwrap_or_else(|e| e.into_inner()) = Some(started);
            self.just_listed.store(true, Ordering::SeqCst);
            // The queue's messages come next round (the listing's cursor is not the queue's).
            return Ok(DiscoveryBatch {
                cursor: None,
                more: true,
                ..batch
            });
        }
        self.queue_round(may_be_new).await
    }

    /// Delete the messages whose files are recorded. Deliveries whose visibility could not be
    /// extended are left (another consumer may hold them now). Failed deletes are retried
    /// twice; a message still not deleted comes back and is ignored as known.
    async fn acknowledge(&self, tokens: Vec<AckToken>) -> SeamResult<()> {
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
            tracing::warn!(stream = %self.stream, messages = kept, "messages whose visibility could not be extended are not deleted; they will be received again and ignored as known");
        }
        let mut delay = Duration::from_millis(200);
        for attempt in 0..3 {
            if receipts.is_empty() {
                break;
            }
            match self.queue.delete(&receipts).await {
                Ok(failed) => receipts = failed,
                Err(e) if attempt == 2 || !e.retryable => {
                    tracing::warn!(stream = %self.stream, error = %e, messages = receipts.len(), "could not delete messages whose files are recorded; they will be received again and ignored as known");
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
            tracing::warn!(stream = %self.stream, messages = receipts.len(), "some messages whose files are recorded could not be deleted; they will be received again and ignored as known");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Filters;
    use crate::queue::QueueError;
    use async_trait::async_trait;

    /// An in-memory queue: `receive` hands out what is queued (once), `delete` records what
    /// was deleted, `extend` fails when told to.
    #[derive(Default)]
    struct FakeQueue {
        queued: Mutex<Vec<QueueMessage>>,
        deleted: Mutex<Vec<String>>,
        fail_extend: AtomicBool,
        retention: Option<Duration>,
    }

    #[async_trait]
    impl MessageQueue for FakeQueue {
        fn describe(&self) -> String {
            "fake".into()
        }
        async fn receive(
            &self,
            max: usize,
            _wait: Duration,
            _visibility: Duration,
        ) -> Result<Vec<QueueMessage>, QueueError> {
            let mut q = self.queued.lock().unwrap();
            let n = max.min(q.len());
            Ok(q.drain(..n).collect())
        }
        async fn delete(&self, receipts: &[String]) -> Result<Vec<String>, QueueError> {
            self.deleted
                .lock()
                .unwrap()
                .extend(receipts.iter().cloned());
            Ok(Vec::new())
        }
        async fn extend(
            &self,
            receipts: &[String],
            _visibility: Duration,
        ) -> Result<Vec<Option<String>>, QueueError> {
            let fail = self.fail_extend.load(Ordering::SeqCst);
            Ok(receipts
                .iter()
                .map(|r| (!fail).then(|| r.clone()))
                .collect())
        }
        async fn approximate_depth(&self) -> Result<Option<u64>, QueueError> {
            Ok(None)
        }
        async fn retention(&self) -> Result<Option<Duration>, QueueError> {
            Ok(self.retention)
        }
    }

    fn s3_event(kind: &str, key: &str, size: u64, etag: &str) -> String {
        format!(
            r#"{{"Records":[{{"eventName":"{kind}","eventTime":"2026-11-30T00:00:00Z","s3":{{"bucket":{{"name":"b"}},"object":{{"key":"{key}","size":{size},"eTag":"{etag}"}}}}}}]}}"#
        )
    }

    fn discovery(
        queue: Arc<FakeQueue>,
        bodies: &[String],
        visibility: Duration,
    ) -> NotificationDiscovery {
        *queue.queued.lock().unwrap() = bodies
            .iter()
            .enumerate()
            .map(|(i, b)| QueueMessage {
                id: format!("m{i}"),
                body: b.clone(),
                receipt: format!("r{i}"),
                receive_count: 1,
            })
            .collect();
        let store: Arc<dyn object_store::ObjectStore> =
            Arc::new(object_store::memory::InMemory::new());
        let listing = ListingDiscovery::new("s", store, Path::from("landing"), Filters::default());
        NotificationDiscovery::new(
            "s",
            listing,
            queue,
            StoreRef::S3 { bucket: "b".into() },
            QueueOptions {
                receivers: 2,
                visibility,
                wait: Duration::ZERO,
                backfill_interval: None,
            },
        )
    }

    #[tokio::test]
    async fn a_round_admits_created_events_once_and_acknowledges_all_but_malformed() {
        let q = Arc::new(FakeQueue::default());
        let bodies = vec![
            s3_event("ObjectCreated:Put", "landing/a+b.json", 5, "e1"),
            s3_event("ObjectCreated:Put", "landing/a+b.json", 5, "e1"),
            s3_event(
                "ObjectCreated:CompleteMultipartUpload",
                "landing/x/c.json",
                7,
                "e2",
            ),
            s3_event("ObjectCreated:Put", "landing2/not-under.json", 5, "e3"),
            s3_event("ObjectCreated:Put", "landing/empty.json", 0, "e4"),
            s3_event("ObjectRemoved:Delete", "landing/other.json", 0, "e9"),
            r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Bucket":"b"}"#.to_string(),
            "not json at all".to_string(),
        ];
        let d = discovery(q.clone(), &bodies, Duration::from_secs(60));
        let b = d.discover(None).await.unwrap();
        let paths: Vec<_> = b.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["landing/a b.json", "landing/x/c.json"]);
        assert_eq!(b.files[0].etag.as_deref(), Some("\"e1\""));
        assert_eq!(b.filtered, 1);
        assert_eq!(
            b.passed_over,
            vec![("empty", "landing/empty.json".to_string())]
        );
        let r = b.queue.clone().unwrap();
        assert_eq!(r.received, 8);
        assert_eq!(r.malformed.len(), 1);
        assert_eq!(r.malformed[0].id, "m7");
        assert_eq!((r.ignored_messages, r.removed_events), (1, 1));
        assert_eq!(b.ack.len(), 7);
        d.acknowledge(b.ack).await.unwrap();
        let mut deleted = q.deleted.lock().unwrap().clone();
        deleted.sort();
        assert_eq!(deleted, ["r0", "r1", "r2", "r3", "r4", "r5", "r6"]);
    }

    #[tokio::test]
    async fn a_message_whose_visibility_could_not_be_extended_is_not_deleted() {
        let q = Arc::new(FakeQueue::default());
        q.fail_extend.store(true, Ordering::SeqCst);
        let bodies = vec![s3_event("ObjectCreated:Put", "landing/a.json", 5, "e1")];
        let d = discovery(q.clone(), &bodies, Duration::from_secs(2));
        let b = d.discover(None).await.unwrap();
        assert_eq!(b.files.len(), 1);
        // Held past half the visibility timeout (the heartbeat's period, at least 1 s): the
        // extension fails.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        d.acknowledge(b.ack).await.unwrap();
        assert!(q.deleted.lock().unwrap().is_empty());
        let next = d.discover(None).await.unwrap();
        assert_eq!(next.queue.unwrap().extension_failures, 1);
    }

    #[test]
    fn etags_are_quoted_like_object_store() {
        assert_eq!(quoted("abc"), "\"abc\"");
        assert_eq!(quoted("\"abc\""), "\"abc\"");
        assert_eq!(quoted("0x8D9"), "\"0x8D9\"");
    }

    #[tokio::test]
    async fn a_file_created_and_removed_before_the_round_is_not_a_candidate() {
        let q = Arc::new(FakeQueue::default());
        let with_seq = |kind: &str, key: &str, seq: &str| {
            s3_event(kind, key, 5, "e").replace(
                r#""eTag":"e""#,
                &format!(r#""eTag":"e","sequencer":"{seq}""#),
            )
        };
        let bodies = vec![
            with_seq("ObjectCreated:Put", "landing/tmp.json", "0A"),
            with_seq("ObjectRemoved:Delete", "landing/tmp.json", "0B"),
            // A removal of an older version does not cancel a newer creation.
            with_seq("ObjectCreated:Put", "landing/kept.json", "0FF"),
            with_seq("ObjectRemoved:Delete", "landing/kept.json", "0FE"),
        ];
        let d = discovery(q.clone(), &bodies, Duration::from_secs(60));
        let b = d.discover(None).await.unwrap();
        let paths: Vec<_> = b.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["landing/kept.json"]);
        assert!(seq_after("100", "FF") && !seq_after("0FE", "0FF"));

        // Deleted and uploaded again with the same bytes (same etag), the messages out of
        // order: the upload after the removal wins.
        let bodies = vec![
            with_seq("ObjectCreated:Put", "landing/again.json", "03"),
            with_seq("ObjectRemoved:Delete", "landing/again.json", "02"),
            with_seq("ObjectCreated:Put", "landing/again.json", "01"),
        ];
        let d = discovery(q.clone(), &bodies, Duration::from_secs(60));
        let b = d.discover(None).await.unwrap();
        assert_eq!(b.files.len(), 1, "{:?}", b.files);

        // Without sequencers (moto, Azure) the store decides: gone, or there.
        let bodies = vec![
            s3_event("ObjectCreated:Put", "landing/gone.json", 5, "e"),
            s3_event("ObjectRemoved:Delete", "landing/gone.json", 0, "e"),
        ];
        let d = discovery(q, &bodies, Duration::from_secs(60));
        assert!(d.discover(None).await.unwrap().files.is_empty());
    }

    #[tokio::test]
    async fn a_stream_away_longer_than_the_queue_keeps_messages_lists_first() {
        let q = Arc::new(FakeQueue {
            retention: Some(Duration::from_secs(4 * 86400)),
            ..FakeQueue::default()
        });
        let d = discovery(q.clone(), &[], Duration::from_secs(60));
        d.set_last_receive(Utc::now() - chrono::Duration::days(5));
        assert!(d.discover(None).await.unwrap().full_listing);
        let fresh = discovery(q, &[], Duration::from_secs(60));
        fresh.set_last_receive(Utc::now() - chrono::Duration::hours(1));
        assert!(!fresh.discover(None).await.unwrap().full_listing);
    }
}
