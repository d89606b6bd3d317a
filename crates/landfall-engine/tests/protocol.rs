//! The exactly-once protocol driven with in-memory seams, no binary: a stream worker over an
//! in-memory object store, an in-memory ledger and an in-memory table (`testkit`), in
//! milliseconds. Each test breaks the protocol the way production does (an ambiguous commit,
//! a refused one, another instance's commit, a state that does not describe the table) and
//! checks the outcome in the table and the ledger, and refusals by kind. A scripted discovery
//! (`testkit`) plays queue rounds: redeliveries, a producer faster than the run.

use landfall_core::seams::{ErrorKind, SeamResult};
use landfall_core::testkit::{Fault, MemoryCommitter, ScriptEvent, ScriptedDiscovery};
use landfall_core::{AckToken, Discovery, FileMeta, RecordedMode, SeamError, StateStore};
use landfall_discovery::{Filters, ListingDiscovery};
use landfall_engine::StreamParts;
use landfall_engine::events::StreamEvents;
use landfall_engine::metrics::Metrics;
use landfall_engine::stream::SourceStore;
use landfall_engine::{RunEnd, StreamWorker};
use landfall_state::{Ledger, MemoryKv};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::sync::Arc;

/// Files land in `landing/` of an in-memory store; batches take two files at most.
struct Stream {
    store: Arc<InMemory>,
    state: Arc<dyn StateStore>,
    table: MemoryCommitter,
}

impl Stream {
    fn new() -> Self {
        Stream {
            store: Arc::new(InMemory::new()),
            state: Arc::new(Ledger::new("s", MemoryKv::default())),
            table: MemoryCommitter::new(),
        }
    }

    /// The same source and table with a new, empty state (a lost state volume).
    fn with_new_state(&self) -> Self {
        Stream {
            store: self.store.clone(),
            state: Arc::new(Ledger::new("s", MemoryKv::default())),
            table: self.table.clone(),
        }
    }

    /// A file's listed metadata, as an event would name it.
    async fn meta(&self, name: &str) -> FileMeta {
        let path = Path::from(format!("landing/{name}"));
        landfall_discovery::file_meta(self.store.head(&path).await.unwrap())
    }

    async fn put(&self, name: &str, ids: std::ops::Range<u64>) {
        let body: String = ids.map(|i| format!("{{\"id\":{i}}}\n")).collect();
        self.store
            .put(
                &Path::from(format!("landing/{name}")),
                PutPayload::from(body.into_bytes()),
            )
            .await
            .unwrap();
    }

    /// One `--available-now` run, listing the source.
    async fn drain(&self) -> SeamResult<RunEnd> {
        let store: Arc<dyn ObjectStore> = self.store.clone();
        let listing = ListingDiscovery::new("s", store, Path::from("landing"), Filters::default());
        self.drain_with(Box::new(listing)).await
    }

    /// One `--available-now` run over `discovery`.
    async fn drain_with(&self, discovery: Box<dyn Discovery>) -> SeamResult<RunEnd> {
        let spec = landfall_config::load_str(
            r#"
[streams.s]
source = "/landfall-protocol-test/landing"
format = "json"
schema = "id BIGINT"
max_files_per_trigger = 2

[streams.s.sink]
path = "/landfall-protocol-test/table"
"#,
            "protocol.rs",
        )
        .unwrap()
        .streams
        .remove(0);
        let parts = StreamParts {
            state: self.state.clone(),
            discovery,
            source: SourceStore {
                store: self.store.clone(),
                prefix: Path::from("landing"),
            },
            committer: Arc::new(self.table.clone()),
        };
        let events = Arc::new(StreamEvents::new("s", Arc::new(Metrics::new())));
        let mut worker = StreamWorker::new(spec, events, true, parts)?;
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        worker.run(stopped).await
    }

    fn committed_files(&self) -> usize {
        self.state.counts().unwrap().committed_files as usize
    }

    /// Each batch id at most once in the table, and the rows in it.
    fn table_rows(&self) -> u64 {
        let commits = self.table.commits();
        let mut ids: Vec<u64> = commits.iter().map(|c| c.batch_id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(
            ids.len(),
            commits.len(),
            "a batch committed twice: {commits:?}"
        );
        self.table.rows()
    }
}

#[tokio::test]
async fn a_drain_commits_every_file_once_and_a_rerun_nothing() {
    let s = Stream::new();
    for f in 0..5 {
        s.put(&format!("f{f}.json"), f * 2..f * 2 + 2).await;
    }
    assert_eq!(s.drain().await.unwrap(), RunEnd::Drained);
    assert_eq!(s.table.commits().len(), 3, "two files a batch");
    assert_eq!((s.table_rows(), s.committed_files()), (10, 5));
    assert_eq!(s.drain().await.unwrap(), RunEnd::Drained);
    assert_eq!(s.table.commits().len(), 3, "nothing new, nothing committed");
    assert!(s.table.stray_files().is_empty());
}

/// The commit lands and its answer is lost: the run fails, and the next one finds the batch in
/// the table and records it from there, without committing it again.
#[tokio::test]
async fn an_ambiguous_commit_is_recorded_from_the_table_not_committed_twice() {
    let s = Stream::new();
    for f in 0..3 {
        s.put(&format!("f{f}.json"), f * 3..f * 3 + 3).await;
    }
    s.table.fail_next(&[Fault::LoseAnswer]);
    let e = s.drain().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transient, "{e}");
    assert_eq!(s.table.commits().len(), 1, "it landed");
    assert_eq!(s.state.open_batch().unwrap().map(|p| p.batch_id), Some(0));
    assert_eq!(s.drain().await.unwrap(), RunEnd::Drained);
    assert_eq!((s.table_rows(), s.committed_files()), (9, 3));
    let b0 = s.state.batch(0).unwrap().unwrap();
    assert!(
        b0.committed.is_some_and(|r| r.recovered),
        "recorded from the table"
    );
    assert!(
        s.table.stray_files().is_empty(),
        "{:?}",
        s.table.stray_files()
    );
}

/// A commit refused before it landed: the same plan runs again under the same batch id, and
/// the refused attempt's files do not stay behind.
#[tokio::test]
async fn a_refused_commit_runs_again_under_the_same_id() {
    let s = Stream::new();
    s.put("a.json", 0..4).await;
    s.table.fail_next(&[Fault::Refuse]);
    assert!(s.drain().await.unwrap_err().retryable);
    assert!(s.table.commits().is_empty());
    assert_eq!(s.drain().await.unwrap(), RunEnd::Drained);
    let commits = s.table.commits();
    assert_eq!(commits.iter().map(|c| c.batch_id).collect::<Vec<_>>(), [0]);
    assert_eq!((s.table_rows(), s.committed_files()), (4, 1));
    assert!(
        s.table.stray_files().is_empty(),
        "{:?}",
        s.table.stray_files()
    );
}

/// An earlier attempt's commit lands late, after recovery looked and a new attempt started:
/// the new attempt's commit call finds it, and it is settled as recovery settles a landed
/// batch (this state's commit, recorded from the table; the new attempt's files removed).
#[tokio::test]
async fn a_commit_that_finds_its_earlier_attempt_landed_settles_it() {
    let s = Stream::new();
    s.put("a.json", 0..2).await;
    s.put("b.json", 2..4).await;
    s.put("c.json", 4..6).await;
    s.table.fail_next(&[Fault::LandLate]);
    assert!(s.drain().await.unwrap_err().retryable);
    assert!(s.table.commits().is_empty(), "not landed yet");
    assert_eq!(s.drain().await.unwrap(), RunEnd::Drained);
    let commits = s.table.commits();
    assert_eq!(
        commits[0].files[0].split('-').nth(2),
        Some("a1"),
        "{commits:?}"
    );
    assert_eq!((s.table_rows(), s.committed_files()), (6, 3));
    let b0 = s.state.batch(0).unwrap().unwrap();
    assert!(b0.committed.is_some_and(|r| r.recovered));
    assert_eq!(b0.attempts, 2);
    assert!(
        s.table.stray_files().is_empty(),
        "{:?}",
        s.table.stray_files()
    );
}

/// Another instance (another state) committed this stream's open batch: this state must not
/// record it as its own, and says so by kind.
#[tokio::test]
async fn another_instances_commit_is_refused_by_kind() {
    let s = Stream::new();
    s.put("a.json", 0..2).await;
    s.table.fail_next(&[Fault::Refuse]);
    assert!(s.drain().await.is_err());
    s.table.commit_as(
        Some("another-state"),
        0,
        &["part-00000-a1-x-c000.snappy.parquet"],
    );
    let e = s.drain().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::ForeignCommit, "{e}");
    assert!(!e.retryable);
    assert!(
        s.state.batch(0).unwrap().unwrap().committed.is_none(),
        "not recorded"
    );
}

/// A new state facing a table with the stream's batches (a volume that did not mount), a state
/// older than the table (a restored backup), and a table older than the state (a replaced
/// table): each refused by its kind before anything is committed.
#[tokio::test]
async fn states_that_do_not_describe_the_table_are_refused_by_kind() {
    let s = Stream::new();
    s.put("a.json", 0..2).await;
    assert_eq!(s.drain().await.unwrap(), RunEnd::Drained);
    s.put("b.json", 2..4).await;

    let lost = s.with_new_state();
    assert_eq!(lost.drain().await.unwrap_err().kind, ErrorKind::StateLost);

    s.table.commit_as(None, 7, &[]);
    assert_eq!(s.drain().await.unwrap_err().kind, ErrorKind::TableAhead);

    let replaced = Stream {
        store: s.store.clone(),
        state: s.state.clone(),
        table: MemoryCommitter::new(),
    };
    assert_eq!(
        replaced.drain().await.unwrap_err().kind,
        ErrorKind::TableBehind
    );
    assert!(replaced.table.commits().is_empty());
    assert_eq!(s.committed_files(), 1, "b.json never committed");
}

/// A queue on the stream's ledger: acknowledgements are checked against it.
fn queue(s: &Stream) -> ScriptedDiscovery {
    ScriptedDiscovery::new().with_ledger(s.state.clone(), false)
}

/// No message acknowledged before its round's files were in the ledger, and every
/// acknowledgement after the round's `round_admitted`.
fn assert_acknowledged_after_admission(q: &ScriptedDiscovery) {
    let events = q.events();
    for (i, e) in events.iter().enumerate() {
        match e {
            ScriptEvent::AcknowledgedUnadmitted(paths) => {
                panic!("acknowledged before admission: {paths:?} in {events:?}")
            }
            ScriptEvent::Acknowledged(_) => assert!(
                matches!(events[i - 1], ScriptEvent::Admitted { .. }),
                "{events:?}"
            ),
            _ => {}
        }
    }
}

/// Queue rounds: a message redelivered in a later round names a file already admitted, a file
/// named twice in one round is one file, and the run takes in every round the queue has before
/// planning (it ends at the first empty receive). Each round's messages are acknowledged only
/// once its files are in the ledger.
#[tokio::test]
async fn redelivered_messages_duplicate_nothing_and_are_acknowledged_after_admission() {
    let s = Stream::new();
    for f in 0..3 {
        s.put(&format!("f{f}.json"), f * 2..f * 2 + 2).await;
    }
    let q = queue(&s);
    q.push_round(
        vec![s.meta("f0.json").await, s.meta("f1.json").await],
        &["m0", "m1"],
    );
    q.push_round(vec![s.meta("f0.json").await], &["m0-again"]);
    q.push_round(
        vec![s.meta("f2.json").await, s.meta("f2.json").await],
        &["m2", "m2-twin"],
    );
    assert_eq!(
        s.drain_with(Box::new(q.clone())).await.unwrap(),
        RunEnd::Drained
    );
    assert_eq!(q.rounds_taken(), 4, "three rounds and the empty receive");
    assert_eq!((s.table_rows(), s.committed_files()), (6, 3));
    let tokens: Vec<_> = ["m0", "m1", "m0-again", "m2", "m2-twin"]
        .map(|t| AckToken(t.into()))
        .into();
    assert_eq!(q.acknowledged(), tokens);
    assert_acknowledged_after_admission(&q);
    // The next run finds the same messages again (a visibility timeout passed): nothing new.
    let again = queue(&s);
    again.push_round(
        vec![s.meta("f1.json").await, s.meta("f2.json").await],
        &["late"],
    );
    assert_eq!(
        s.drain_with(Box::new(again.clone())).await.unwrap(),
        RunEnd::Drained
    );
    assert_acknowledged_after_admission(&again);
    assert_eq!(
        s.table.commits().len(),
        2,
        "two files a batch, nothing again"
    );
    assert_eq!(s.table_rows(), 6);
}

/// A producer that never stops: an available-now run takes in what was queued at its start
/// (the drain budget) and ends, instead of discovering for ever.
#[tokio::test]
async fn a_busy_queue_cannot_keep_an_available_now_run_from_ending() {
    let s = Stream::new();
    s.put("a.json", 0..3).await;
    let q = queue(&s);
    q.push_round(vec![s.meta("a.json").await], &["a"]);
    q.endless(Some(5));
    let run = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        s.drain_with(Box::new(q.clone())),
    )
    .await
    .expect("the run ended");
    assert_eq!(run.unwrap(), RunEnd::Drained);
    assert_eq!(q.rounds_taken(), 5, "rounds up to the budget");
    assert_eq!(s.table_rows(), 3);
}

/// The discovery enters its mode from the stream's memory: a listing run records `listing`,
/// and the next discovery is told so (a queue or file-events stream then lists first). A
/// receive that fails takes nothing in and acknowledges nothing.
#[tokio::test]
async fn discovery_is_prepared_from_the_streams_memory_and_a_failed_receive_takes_nothing() {
    let s = Stream::new();
    s.put("a.json", 0..2).await;
    assert_eq!(s.drain().await.unwrap(), RunEnd::Drained);
    s.put("b.json", 2..4).await;
    let q = queue(&s);
    q.push_round(vec![s.meta("b.json").await], &["b"]);
    q.fail_next(SeamError::retryable("receive timed out"));
    let e = s.drain_with(Box::new(q.clone())).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transient);
    assert!(q.acknowledged().is_empty());
    match &q.events()[0] {
        ScriptEvent::Prepared(mode, run) => {
            assert_eq!(*mode, Some(RecordedMode::Listing));
            assert!(run.available_now);
        }
        e => panic!("prepared first, not {e:?}"),
    }
    assert_eq!(
        s.drain_with(Box::new(q.clone())).await.unwrap(),
        RunEnd::Drained
    );
    assert_eq!(q.acknowledged(), [AckToken("b".into())]);
    assert_eq!((s.table_rows(), s.committed_files()), (4, 2));
}

/// The risky window: the round's files are admitted and deleting its messages fails. The
/// messages come back; their files are not ingested twice, and they are acknowledged then.
#[tokio::test]
async fn a_failed_acknowledgement_is_redelivered_and_duplicates_nothing() {
    let s = Stream::new();
    s.put("a.json", 0..2).await;
    s.put("b.json", 2..5).await;
    let q = queue(&s);
    q.push_round(
        vec![s.meta("a.json").await, s.meta("b.json").await],
        &["a", "b"],
    );
    q.fail_next_acknowledge(SeamError::retryable("DeleteMessageBatch: connection reset"));
    let e = s.drain_with(Box::new(q.clone())).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transient);
    assert!(q.acknowledged().is_empty());
    assert_eq!(s.state.counts().unwrap().pending_files, 2, "admitted, kept");
    assert_eq!(
        s.drain_with(Box::new(q.clone())).await.unwrap(),
        RunEnd::Drained
    );
    assert_eq!(
        q.acknowledged(),
        [AckToken("a".into()), AckToken("b".into())]
    );
    assert_acknowledged_after_admission(&q);
    assert_eq!((s.table_rows(), s.committed_files()), (5, 2));
    assert_eq!(s.table.commits().len(), 1);
}
