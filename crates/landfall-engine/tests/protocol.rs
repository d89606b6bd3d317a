//! The exactly-once protocol driven with in-memory seams, no binary: a stream worker over an
//! in-memory object store, an in-memory ledger and an in-memory table (`testkit`), in
//! milliseconds. Each test breaks the protocol the way production does (an ambiguous commit,
//! a refused one, another instance's commit, a state that does not describe the table) and
//! checks the outcome in the table and the ledger, and refusals by kind.

use landfall_core::StateStore;
use landfall_core::seams::{ErrorKind, SeamResult};
use landfall_core::testkit::{Fault, MemoryCommitter};
use landfall_discovery::{Filters, ListingDiscovery, SourceDiscovery};
use landfall_engine::StreamParts;
use landfall_engine::events::StreamEvents;
use landfall_engine::metrics::Metrics;
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

    /// One `--available-now` run.
    async fn drain(&self) -> SeamResult<RunEnd> {
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
        let store: Arc<dyn ObjectStore> = self.store.clone();
        let parts = StreamParts {
            state: self.state.clone(),
            discovery: SourceDiscovery::Listing(ListingDiscovery::new(
                "s",
                store,
                Path::from("landing"),
                Filters::default(),
            )),
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
