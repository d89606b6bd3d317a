//! One conformance suite for every `Committer`: the Delta table, the Parquet directory, and the
//! in-memory table of `landfall-core`'s testkit that the engine's protocol tests run on (so the
//! fake is held to what the real ones do). It checks what the exactly-once protocol relies on:
//! where a batch landed, an earlier attempt found landed by a later one's commit call, the
//! owner stamp, the files a commit holds, and which staged files are orphans.

use arrow::array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use landfall_core::testkit::MemoryCommitter;
use landfall_core::{Committer, StagedFile};
use landfall_sink::{DeltaCommitter, ParquetDirCommitter};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]))
}

fn rows(ids: std::ops::Range<i64>) -> RecordBatch {
    RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from_iter_values(ids))]).unwrap()
}

/// One attempt's data files, and the names the staged hook was told before each was created.
async fn stage(
    c: &dyn Committer,
    batch_id: u64,
    attempt: u32,
    ids: std::ops::Range<i64>,
) -> (Vec<StagedFile>, Vec<String>) {
    let named = Arc::new(Mutex::new(Vec::new()));
    let hook_names = named.clone();
    let mut w = c
        .writer(
            batch_id,
            attempt,
            Arc::new(move |p: &str| {
                hook_names.lock().unwrap().push(p.to_string());
                Ok(())
            }),
        )
        .await
        .unwrap();
    w.write(&[], rows(ids)).await.unwrap();
    let files = w.finish().await.unwrap();
    let named = named.lock().unwrap().clone();
    (files, named)
}

fn set(v: &[String]) -> BTreeSet<String> {
    v.iter().cloned().collect()
}

async fn conforms(c: &dyn Committer) {
    let what = c.location();
    assert_eq!(c.last_committed().await.unwrap(), None, "{what}");
    assert!(c.batch_commit(0).await.unwrap().is_none(), "{what}");
    c.prepare(schema(), &[]).await.unwrap();
    c.set_owner("state-a");

    // Batch 0, attempt 1: staged under the names the hook was told, then committed.
    let (files, named) = stage(c, 0, 1, 0..10).await;
    assert!(!files.is_empty(), "{what}");
    assert_eq!(
        files.iter().map(|f| f.rows).sum::<u64>(),
        10,
        "{what}: staged rows"
    );
    let first = c.commit(0, &files).await.unwrap();
    assert!(!first.landed_before, "{what}");
    assert_eq!(c.last_committed().await.unwrap(), Some(0), "{what}");
    assert_eq!(
        c.batch_version(0).await.unwrap(),
        Some(first.version),
        "{what}: the version of the commit holding the batch"
    );
    let held = c.batch_commit(0).await.unwrap().unwrap();
    assert_eq!(
        held.owner.as_deref(),
        Some("state-a"),
        "{what}: owner stamp"
    );
    assert_eq!(
        set(&held.files),
        set(&named),
        "{what}: the commit's files, as the hook named them"
    );

    // Attempt 2 of the same batch (its outcome unseen by the caller): nothing is committed,
    // the earlier attempt's commit is reported, and only attempt 2's files are orphans.
    let (again, named2) = stage(c, 0, 2, 0..10).await;
    let second = c.commit(0, &again).await.unwrap();
    assert!(second.landed_before, "{what}");
    assert_eq!(second.version, first.version, "{what}");
    let mut staged = named.clone();
    staged.extend(named2.iter().cloned());
    let removed = c.remove_orphans(0, &staged).await.unwrap();
    assert_eq!(
        removed,
        named2.len() as u64,
        "{what}: only attempt 2's files are orphans"
    );
    let held = c.batch_commit(0).await.unwrap().unwrap();
    assert_eq!(
        set(&held.files),
        set(&named),
        "{what}: the landed files stay"
    );
    c.complete(0).await.unwrap();
    c.complete(0).await.unwrap();

    // The next batch, and removals of files that are gone already.
    let (files, _) = stage(c, 1, 1, 10..15).await;
    let next = c.commit(1, &files).await.unwrap();
    assert!(!next.landed_before, "{what}");
    assert_eq!(c.last_committed().await.unwrap(), Some(1), "{what}");
    assert_eq!(
        c.remove_files(&named2).await.unwrap(),
        0,
        "{what}: already removed"
    );
    assert_eq!(
        c.remove_files(&["part-00009-a1-gone-c000.snappy.parquet".to_string()])
            .await
            .unwrap(),
        0,
        "{what}: a missing file is not an error"
    );
    // Another state's identity is what a later commit carries.
    c.set_owner("state-b");
    let (files, _) = stage(c, 2, 1, 15..16).await;
    c.commit(2, &files).await.unwrap();
    let held = c.batch_commit(2).await.unwrap().unwrap();
    assert_eq!(held.owner.as_deref(), Some("state-b"), "{what}");
}

#[tokio::test]
async fn the_delta_committer_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let uri = url::Url::from_directory_path(dir.path())
        .unwrap()
        .to_string();
    conforms(&DeltaCommitter::new("s", &uri, HashMap::new(), 64 << 20)).await;
}

#[tokio::test]
async fn the_parquet_directory_committer_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let uri = url::Url::from_directory_path(dir.path())
        .unwrap()
        .to_string();
    conforms(&ParquetDirCommitter::new("s", &uri, HashMap::new(), 64 << 20).unwrap()).await;
}

#[tokio::test]
async fn the_in_memory_committer_of_the_protocol_tests_conforms() {
    conforms(&MemoryCommitter::new()).await;
}
