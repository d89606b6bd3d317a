//! Notification discovery: candidates come from storage events on a queue; a listing runs when
//! asked (entering notification mode, `backfill_interval`, an admin backfill).
//!
//! A round receives through a [`QueueReader`] (concurrent long polls, up to
//! [`crate::MAX_MESSAGES_PER_ROUND`] messages, a visibility heartbeat). Each body is parsed ([`crate::parse_notification`]); object-created events about the source's bucket
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
//! - A directory renamed into the source (ADLS Gen2, SFTP) names none of its files: the round
//!   lists the part of it under the prefix (the whole prefix if the store cannot list it) and
//!   its files join the round's candidates, so the message is deleted only once they are
//!   admitted. A file created in a round that also removes its directory is admitted only if
//!   a HEAD still finds it.
//! - The same key and etag in several messages (duplicates, redeliveries, moto's two events
//!   of a multipart upload) is one candidate; the ledger admits a file once.
//! - While messages are held (between receive and acknowledgement) a heartbeat extends their
//!   visibility every half timeout. A delivery held past its timeout (every extension
//!   failed) may already be with another consumer: its files are admitted (the ledger is the
//!   arbiter) but the message is not deleted ([`crate::queue_reader`]).
//! - Events carry no size on some Azure APIs: a HEAD fills it in (a file gone by then is left
//!   out: its removal event follows).
//! - Event etags arrive without quotes; they are quoted as object_store reports them, so a
//!   file's identity is the same whether a listing or an event found it.

use crate::listing::ListingDiscovery;
use crate::notification::{StorageEvent, StoreRef};
use crate::queue::MessageQueue;
use crate::queue_reader::{
    QueueReader, Removal, list_directory, nests, quoted, same_etag, seq_after, sort_messages,
};
use chrono::{DateTime, Utc};
use landfall_core::seams::{NewFilter, SeamResult};
use landfall_core::{
    AckToken, Discovery, DiscoveryBatch, DiscoveryMemory, FileMeta, QueueRound, RecordedMode,
    RunStart, SeamError,
};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a notification stream reads its queue.
#[derive(Debug, Clone)]
pub struct QueueOptions {
    pub receivers: usize,
    pub visibility: Duration,
    /// Long-poll wait of the first receive of a round.
    pub wait: Duration,
    pub backfill_interval: Option<Duration>,
}

pub struct NotificationDiscovery {
    stream: String,
    listing: ListingDiscovery,
    reader: QueueReader,
    /// The bucket or container events must be about.
    source: StoreRef,
    options: QueueOptions,
    list_next: AtomicBool,
    /// The last full listing (kept in the stream's state across restarts by the worker).
    last_listing: Mutex<Option<DateTime<Utc>>>,
    /// The last round listed: the next one reads the queue, whatever is due.
    just_listed: AtomicBool,
    /// The last time this stream read its queue (from the state, at start).
    last_receive: Mutex<Option<DateTime<Utc>>>,
    gap_checked: AtomicBool,
    /// The bucket entry setup created, checked at the first round and periodically.
    entry: Option<crate::EntryGuard>,
}

impl NotificationDiscovery {
    pub fn new(
        stream: &str,
        listing: ListingDiscovery,
        queue: Arc<dyn MessageQueue>,
        source: StoreRef,
        options: QueueOptions,
    ) -> Self {
        NotificationDiscovery {
            stream: stream.to_string(),
            listing,
            reader: QueueReader::new(
                format!("stream `{stream}`"),
                queue,
                options.receivers,
                options.visibility,
                options.wait,
            ),
            source,
            options,
            list_next: AtomicBool::new(false),
            last_listing: Mutex::new(None),
            just_listed: AtomicBool::new(false),
            last_receive: Mutex::new(None),
            gap_checked: AtomicBool::new(false),
            entry: None,
        }
    }

    /// Check the bucket notification entry setup created at the first round and every
    /// interval after; one found gone is written again and the source listed once.
    pub fn with_entry_guard(mut self, guard: Option<crate::EntryGuard>) -> Self {
        self.entry = guard;
        self
    }

    /// When due, check the bucket entry; a restored one asks for a listing (the files
    /// published while it was gone sent no event).
    /// A failed check is reported by the guard's hooks (logged, counted, in [`Self::note`]).
    async fn check_entry(&self) {
        let Some(guard) = &self.entry else { return };
        if let Ok(true) = guard.check_if_due().await {
            landfall_core::failpoint::hit("after_entry_restored");
            self.request_listing();
        }
    }

    /// Whether the bucket entry may be missing still (see [`crate::EntryGuard::unsettled`]).
    pub fn entry_unsettled(&self) -> bool {
        self.entry.as_ref().is_some_and(|g| g.unsettled())
    }

    /// What keeps the stream's events from being trusted, for `landfall streams`: the bucket
    /// entry could not be checked (events may have stopped coming).
    pub fn note(&self) -> Option<String> {
        let guard = self.entry.as_ref()?;
        let problem = guard.problem()?;
        Some(format!(
            "the bucket notification entry in `{}` could not be checked (events may not arrive; checking again): {problem}",
            guard.bucket()
        ))
    }

    pub fn listing(&self) -> &ListingDiscovery {
        &self.listing
    }

    pub fn listing_mut(&mut self) -> &mut ListingDiscovery {
        &mut self.listing
    }

    pub fn queue(&self) -> &Arc<dyn MessageQueue> {
        self.reader.queue()
    }

    /// List the source on the next round (entering notification mode; a backfill asked for).
    pub fn request_listing(&self) {
        self.list_next.store(true, Ordering::SeqCst);
    }

    /// Receive without long polling: for runs that stop once the queue is drained.
    pub fn set_no_wait(&self, no_wait: bool) {
        self.reader.set_no_wait(no_wait);
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
        let retention = match self.queue().retention().await {
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

    /// One round from the queue.
    async fn queue_round(&self, may_be_new: NewFilter<'_>) -> SeamResult<DiscoveryBatch> {
        let messages = self.reader.receive().await?;
        let mut batch = DiscoveryBatch::default();
        let mut round = QueueRound {
            received: messages.len() as u64,
            extension_failures: self.reader.take_kept(),
            ..QueueRound::default()
        };
        // Any message means there may be more: the worker discovers again (an available-now
        // run before planning, a continuous one right after its next batch); a round whose
        // long poll found nothing ends that.
        batch.more = !messages.is_empty();
        let now = Utc::now();
        // Creations with their sequencers, and per key the latest removal, to settle once the
        // whole round is read (SQS standard queues do not keep order).
        let sorted = sort_messages(&messages, &self.source, &mut round);
        batch.listed = sorted.events;
        batch.ack = sorted.ack;
        let removed = sorted.removed;
        let removed_dirs = sorted.removed_dirs;
        let mut created: Vec<(FileMeta, Option<String>)> = Vec::new();
        for ev in sorted.created {
            let sequencer = ev.sequencer.clone();
            match self.candidate(ev, now).await? {
                Candidate::File(f) => created.push((f, sequencer)),
                Candidate::Filtered => batch.filtered += 1,
                Candidate::PassedOver(reason, path) => batch.passed_over.push((reason, path)),
            }
        }
        self.list_renamed(&sorted.listings, may_be_new, &mut batch, &mut created)
            .await?;
        round.directories_listed = sorted.listings.len() as u64;
        // A directory removal names no file: the store says what is left under it.
        let dir_removal = Removal {
            sequencer: None,
            ask_store: true,
        };
        let mut seen: HashSet<(String, Option<String>)> = HashSet::new();
        for (f, seq) in created {
            if !seen.insert((f.path.clone(), f.etag.clone())) {
                continue;
            }
            let removal = if removed_dirs.iter().any(|d| nests(d, &f.path)) {
                Some(&dir_removal)
            } else {
                removed.get(&f.path)
            };
            if let Some(removal) = removal
                && !self.outlives_removal(&f, seq.as_deref(), removal).await
            {
                batch.filtered += 1;
                continue;
            }
            batch.files.push(f);
        }
        batch.retain_new(may_be_new)?;
        batch.queue = Some(round);
        Ok(batch)
    }

    /// The files of directories renamed into the source, which no event names: the part of
    /// each under the prefix is listed, or the whole prefix when the store cannot list it
    /// (object_store fails on a key it cannot represent; the stream's listing survives it).
    /// The files join the round's candidates, so they are admitted before its messages are
    /// deleted: a crash repeats the listing, never loses it.
    async fn list_renamed(
        &self,
        dirs: &[String],
        may_be_new: NewFilter<'_>,
        batch: &mut DiscoveryBatch,
        created: &mut Vec<(FileMeta, Option<String>)>,
    ) -> SeamResult<()> {
        let mut merge = |listed: DiscoveryBatch| {
            batch.filtered += listed.filtered;
            batch.passed_over.extend(listed.passed_over);
            created.extend(listed.files.into_iter().map(|f| (f, None)));
        };
        for dir in dirs {
            match list_directory(&self.stream, &self.listing, dir).await {
                Ok(None) => merge(DiscoveryBatch {
                    filtered: 1,
                    ..DiscoveryBatch::default()
                }),
                Ok(Some(listed)) => {
                    tracing::info!(stream = %self.stream, directory = %dir, files = listed.files.len(), "a directory was renamed into the source; listed it");
                    merge(listed);
                }
                Err(e) => {
                    tracing::warn!(stream = %self.stream, directory = %dir, error = %e, "cannot list a directory renamed into the source; listing the whole source");
                    merge(self.listing.discover_new(None, may_be_new).await?);
                    return Ok(());
                }
            }
        }
        Ok(())
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
        removal: &Removal,
    ) -> bool {
        if let Some((c, r)) = removal.by_sequencer(created) {
            return seq_after(c, r);
        }
        let path = Path::parse(&f.path).unwrap_or_else(|_| Path::from(f.path.as_str()));
        match self.listing.store().head(&path).await {
            Ok(h) => f.etag.is_none() || same_etag(h.e_tag.as_deref(), f.etag.as_deref()),
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
        Ok(Candidate::File(meta))
    }
}

enum Candidate {
    File(FileMeta),
    Filtered,
    PassedOver(&'static str, String),
}

#[async_trait::async_trait]
impl Discovery for NotificationDiscovery {
    /// A stream entering notification mode (new, switched from another mode, or owing a
    /// listing) lists first; the last listing and receive times come back from the memory
    /// (`backfill_interval` and the retention gap hold across restarts).
    fn prepare(&mut self, memory: &dyn DiscoveryMemory, run: RunStart) -> SeamResult<()> {
        if let Some(t) = run.modified_after {
            self.listing.set_modified_after(t);
        }
        if memory.mode()? != Some(RecordedMode::Notifications) {
            self.request_listing();
        }
        if let Some(t) = memory.last_listing()? {
            self.set_last_listing(t);
        }
        if let Some(t) = memory.last_receive()? {
            self.set_last_receive(t);
        }
        self.set_no_wait(run.available_now);
        Ok(())
    }

    /// A full listing pays a listing owed for a bucket entry, unless the entry may be missing
    /// still (its checks fail): then files published later sent no event either.
    fn round_admitted(
        &self,
        memory: &dyn DiscoveryMemory,
        full_listing: bool,
        started: DateTime<Utc>,
    ) -> SeamResult<()> {
        if full_listing && !self.entry_unsettled() {
            memory.set_mode(RecordedMode::Notifications)?;
            memory.set_last_listing(started)?;
        }
        memory.set_discovery_note(self.note())
    }

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
        self.check_entry().await;
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

    /// Delete the messages whose files are recorded (see [`QueueReader::acknowledge`]).
    async fn acknowledge(&self, tokens: Vec<AckToken>) -> SeamResult<()> {
        self.reader.acknowledge(tokens).await
    }

    fn request_full_listing(&self) {
        self.listing.request_full_listing();
        self.request_listing();
    }

    fn long_polls(&self) -> bool {
        true
    }

    async fn drain_budget(&self) -> Option<u64> {
        let depth = self.queue().approximate_depth().await.ok().flatten()?;
        Some(depth + crate::MAX_MESSAGES_PER_ROUND as u64)
    }

    async fn queue_depth(&self) -> SeamResult<Option<u64>> {
        self.queue().approximate_depth().await.map_err(|e| {
            if e.retryable {
                SeamError::retryable(e.to_string())
            } else {
                SeamError::fatal(e.to_string())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Filters;
    use crate::fake_queue::FakeQueue;

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
        queue.hold(bodies);
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
        // The zero-byte object is a candidate: the worker records it (skipped, `empty`).
        assert_eq!(
            paths,
            ["landing/a b.json", "landing/x/c.json", "landing/empty.json"]
        );
        assert_eq!(b.files[0].etag.as_deref(), Some("\"e1\""));
        assert_eq!(b.filtered, 1);
        assert!(b.passed_over.is_empty(), "{:?}", b.passed_over);
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

    /// Every extension is refused. A message acknowledged while it is surely still invisible
    /// to others (its 4 s timeout less the 0.5 s margin) is deleted all the same; one
    /// acknowledged later may be with another consumer: it is kept and reported.
    #[tokio::test]
    async fn a_message_whose_visibility_could_not_be_extended_is_deleted_only_in_time() {
        let q = Arc::new(FakeQueue::default());
        q.fail_extend.store(true, Ordering::SeqCst);
        let bodies = vec![s3_event("ObjectCreated:Put", "landing/a.json", 5, "e1")];
        let d = discovery(q.clone(), &bodies, Duration::from_secs(4));
        let b = d.discover(None).await.unwrap();
        assert_eq!(b.files.len(), 1);
        // The heartbeat ticks every second and extends from 1.1 s on: the tick at 2 s tried
        // (and was refused); the bound is 3.5 s after the receive.
        tokio::time::sleep(Duration::from_millis(2300)).await;
        assert!(
            q.extends.load(Ordering::SeqCst) >= 1,
            "an extension was tried"
        );
        d.acknowledge(b.ack).await.unwrap();
        assert_eq!(*q.deleted.lock().unwrap(), ["r0"]);

        let bodies = vec![s3_event("ObjectCreated:Put", "landing/b.json", 5, "e2")];
        let d = discovery(q.clone(), &bodies, Duration::from_secs(4));
        let b = d.discover(None).await.unwrap();
        assert_eq!(b.files.len(), 1);
        tokio::time::sleep(Duration::from_millis(4500)).await;
        d.acknowledge(b.ack).await.unwrap();
        assert_eq!(*q.deleted.lock().unwrap(), ["r0"], "kept, not deleted");
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

    /// A stream on Azure container `lake`, prefix `landing zone/é`, over `store`.
    fn azure_discovery(
        queue: Arc<FakeQueue>,
        bodies: &[String],
        store: Arc<dyn object_store::ObjectStore>,
    ) -> NotificationDiscovery {
        queue.hold(bodies);
        let prefix = Path::parse("landing zone/é").unwrap();
        let listing = ListingDiscovery::new("s", store, prefix, Filters::default());
        NotificationDiscovery::new(
            "s",
            listing,
            queue,
            StoreRef::Azure {
                account: "myaccount".into(),
                container: "lake".into(),
            },
            QueueOptions {
                receivers: 1,
                visibility: Duration::from_secs(60),
                wait: Duration::ZERO,
                backfill_interval: None,
            },
        )
    }

    /// An Event Grid event about blobs of container `lake` (names percent-encoded as Azure
    /// sends them): `url` for one, `from` and `to` for a rename.
    fn azure_event(
        kind: &str,
        api: &str,
        url: Option<&str>,
        rename: Option<(&str, &str)>,
    ) -> String {
        let blob = |name: &str| format!("https://myaccount.dfs.core.windows.net/lake/{name}");
        let mut data = format!(
            r#""api":"{api}","sequencer":"0000000000000442000000000002896{}""#,
            kind.len() % 10
        );
        if let Some(name) = url {
            data += &format!(
                r#","url":"{}","contentLength":3,"eTag":"0x8D1""#,
                blob(name)
            );
        }
        if let Some((from, to)) = rename {
            data += &format!(
                r#","sourceUrl":"{}","destinationUrl":"{}""#,
                blob(from),
                blob(to)
            );
        }
        format!(
            r#"{{"topic":"/subscriptions/x/resourceGroups/y/providers/Microsoft.Storage/storageAccounts/myaccount","subject":"/blobServices/default/containers/lake/blobs/x","eventType":"Microsoft.Storage.{kind}","eventTime":"2026-11-30T00:00:00Z","id":"1","data":{{{data}}},"dataVersion":"1","metadataVersion":"1"}}"#
        )
    }

    async fn put(store: &Arc<dyn object_store::ObjectStore>, path: &str) {
        store
            .put(&Path::parse(path).unwrap(), b"{}\n".to_vec().into())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_renamed_file_is_admitted_at_its_destination_and_its_source_never() {
        let store: Arc<dyn object_store::ObjectStore> =
            Arc::new(object_store::memory::InMemory::new());
        // Written as `x.json.tmp` (a name the stream takes), then renamed: only the final name
        // is in the store.
        put(&store, "landing zone/é/x.json").await;
        let q = Arc::new(FakeQueue::default());
        let bodies = vec![
            azure_event(
                "BlobCreated",
                "FlushWithClose",
                Some("landing%20zone/%C3%A9/x.json.tmp"),
                None,
            ),
            azure_event(
                "BlobRenamed",
                "RenameFile",
                None,
                Some((
                    "landing%20zone/%C3%A9/x.json.tmp",
                    "landing%20zone/%C3%A9/x.json",
                )),
            ),
            // Renamed out of the source: the destination is not the stream's.
            azure_event(
                "BlobRenamed",
                "RenameFile",
                None,
                Some(("landing%20zone/%C3%A9/y.json", "elsewhere/y.json")),
            ),
        ];
        let d = azure_discovery(q.clone(), &bodies, store.clone());
        let b = d.discover(None).await.unwrap();
        let paths: Vec<_> = b.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["landing zone/é/x.json"]);
        // The rename event has neither: a HEAD read them.
        let head = store
            .head(&Path::parse("landing zone/é/x.json").unwrap())
            .await
            .unwrap();
        assert_eq!(
            (b.files[0].size, b.files[0].etag.as_deref()),
            (3, head.e_tag.as_deref())
        );
        assert_eq!(b.queue.as_ref().unwrap().removed_events, 2);
        assert_eq!(b.ack.len(), 3);
    }

    #[tokio::test]
    async fn a_directory_renamed_into_the_source_is_listed_before_its_message_is_deleted() {
        let store: Arc<dyn object_store::ObjectStore> =
            Arc::new(object_store::memory::InMemory::new());
        for p in [
            "landing zone/é/out/part=1/a.json",
            "landing zone/é/out/part=1/sub/b.json",
            "landing zone/é/out/part=1/_SUCCESS",
            "landing zone/é/old.json",
            "elsewhere/part=1/c.json",
            "landing zone/é/kept/k.json",
        ] {
            put(&store, p).await;
        }
        let kept = store
            .head(&Path::parse("landing zone/é/kept/k.json").unwrap())
            .await
            .unwrap()
            .e_tag
            .unwrap();
        let q = Arc::new(FakeQueue::default());
        let bodies = vec![
            azure_event(
                "DirectoryRenamed",
                "RenameDirectory",
                None,
                Some((
                    "landing%20zone/%C3%A9/_temporary/0/task_1/part%3D1",
                    "landing%20zone/%C3%A9/out/part%3D1",
                )),
            ),
            // Outside the source: nothing to list.
            azure_event(
                "DirectoryRenamed",
                "RenameDirectory",
                None,
                Some(("tmp/part%3D1", "elsewhere/part%3D1")),
            ),
            // Created, then its directory deleted: gone from the store, so not admitted; one
            // the store still holds (the directory was written again) is.
            azure_event(
                "BlobCreated",
                "PutBlob",
                Some("landing%20zone/%C3%A9/gone/g.json"),
                None,
            ),
            azure_event(
                "DirectoryDeleted",
                "DeleteDirectory",
                Some("landing%20zone/%C3%A9/gone"),
                None,
            ),
            azure_event(
                "BlobCreated",
                "PutBlob",
                Some("landing%20zone/%C3%A9/kept/k.json"),
                None,
            )
            .replace("0x8D1", kept.trim_matches('"')),
            azure_event(
                "DirectoryDeleted",
                "DeleteDirectory",
                Some("landing%20zone/%C3%A9/kept"),
                None,
            ),
        ];
        let d = azure_discovery(q.clone(), &bodies, store);
        let b = d.discover(None).await.unwrap();
        let mut paths: Vec<_> = b.files.iter().map(|f| f.path.as_str()).collect();
        paths.sort();
        assert_eq!(
            paths,
            [
                "landing zone/é/kept/k.json",
                "landing zone/é/out/part=1/a.json",
                "landing zone/é/out/part=1/sub/b.json",
            ]
        );
        assert!(b.files.iter().all(|f| f.size == 3 && f.etag.is_some()));
        // `_SUCCESS` (hidden), the directory outside the source, `gone/g.json`.
        assert_eq!(b.filtered, 3);
        assert!(!b.full_listing);
        // Acknowledged only now, with the listed files in the same batch.
        assert!(q.deleted.lock().unwrap().is_empty());
        assert_eq!(b.ack.len(), 6);
        d.acknowledge(b.ack).await.unwrap();
        assert_eq!(q.deleted.lock().unwrap().len(), 6);
    }
}
