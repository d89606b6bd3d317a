//! A table written batch after batch stays healthy: deltalake's post-commit hook checkpoints
//! it, the stream's txn survives in the checkpoint once older JSON commits are gone, and
//! expired commits are cleaned up per `delta.logRetentionDuration`.

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use deltalake::TableProperty;
use deltalake::kernel::StructType;
use deltalake::kernel::engine::arrow_conversion::TryFromArrow;
use landfall_core::Committer;
use landfall_core::seams::StagedHook;
use landfall_sink::DeltaCommitter;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

fn table_uri(dir: &Path) -> String {
    url::Url::from_directory_path(dir).unwrap().to_string()
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]))
}

/// One row per batch, written and committed as batch `batch_id`.
async fn commit_batch(c: &DeltaCommitter, batch_id: u64) {
    let hook: StagedHook = Arc::new(|_: &str| Ok(()));
    let mut w = c.writer(batch_id, 1, hook).await.unwrap();
    let rows = RecordBatch::try_new(
        schema(),
        vec![Arc::new(Int64Array::from(vec![batch_id as i64])) as ArrayRef],
    )
    .unwrap();
    w.write(&[], rows).await.unwrap();
    let staged = w.finish().await.unwrap();
    c.commit(batch_id, &staged).await.unwrap();
}

/// Versions of the `_delta_log` files ending in `suffix`.
fn log_versions(dir: &Path, suffix: &str) -> BTreeSet<u64> {
    std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().to_string();
            name.strip_suffix(suffix)?.parse().ok()
        })
        .collect()
}

fn last_checkpoint_version(dir: &Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("_delta_log/_last_checkpoint")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["version"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_txn_survives_in_checkpoints_after_old_commits_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let uri = table_uri(dir.path());
    let c = DeltaCommitter::new("stream", &uri, HashMap::new(), 1 << 30);
    c.prepare(schema(), &[]).await.unwrap();
    c.set_owner("state-a");
    for batch_id in 0..250 {
        commit_batch(&c, batch_id).await;
    }
    // Version 0 created the table; batch n is version n + 1.
    assert_eq!(c.table_version().await.unwrap(), Some(250));

    // deltalake checkpoints after committing version v when (v + 1) % 100 == 0, i.e. every
    // 100 commits counting the creation (Spark instead checkpoints at v % 100 == 0).
    assert_eq!(
        log_versions(dir.path(), ".checkpoint.parquet"),
        BTreeSet::from([99, 199])
    );
    assert!(
        dir.path()
            .join("_delta_log/00000000000000000199.checkpoint.parquet")
            .is_file()
    );
    assert_eq!(last_checkpoint_version(dir.path()), 199);

    // Log cleanup: every commit before the last checkpoint goes, and the older checkpoint.
    let log = dir.path().join("_delta_log");
    for v in log_versions(dir.path(), ".json") {
        if v < 199 {
            std::fs::remove_file(log.join(format!("{v:020}.json"))).unwrap();
        }
    }
    std::fs::remove_file(log.join(format!("{:020}.checkpoint.parquet", 99))).unwrap();
    assert_eq!(
        log_versions(dir.path(), ".json").first().copied(),
        Some(199)
    );

    // A new committer finds the stream's txn through the checkpoint and 200..=250.json.
    let fresh = DeltaCommitter::new("stream", &uri, HashMap::new(), 1 << 30);
    assert_eq!(fresh.last_committed().await.unwrap(), Some(249));
    assert_eq!(fresh.table_version().await.unwrap(), Some(250));
    // And it keeps committing: a replay of batch 249 is a no-op, batch 250 lands.
    fresh.prepare(schema(), &[]).await.unwrap();
    commit_batch(&fresh, 249).await;
    assert_eq!(fresh.table_version().await.unwrap(), Some(250));
    commit_batch(&fresh, 250).await;
    assert_eq!(fresh.last_committed().await.unwrap(), Some(250));
    assert_eq!(fresh.table_version().await.unwrap(), Some(251));

    // The owner stamp: read back from a commit still in the log (commitInfo); a commit whose
    // JSON is gone cannot tell. (The kernel writes no add tags, so checkpoints hold none.)
    let b = c.batch_commit(240).await.unwrap().unwrap();
    assert_eq!(b.owner.as_deref(), Some("state-a"));
    assert_eq!(b.files.len(), 1);
    assert_eq!(c.batch_commit(150).await.unwrap(), None);
    // The checkpoint holds the stream's txn and every live file.
    let cp = std::fs::File::open(log.join(format!("{:020}.checkpoint.parquet", 199))).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(cp)
        .unwrap()
        .build()
        .unwrap();
    let mut json = arrow::json::LineDelimitedWriter::new(Vec::new());
    for b in reader {
        json.write(&b.unwrap()).unwrap();
    }
    json.finish().unwrap();
    let text = String::from_utf8(json.into_inner()).unwrap();
    assert_eq!(
        text.matches("\"add\":{\"path\"").count(),
        199,
        "one add per batch"
    );
    assert!(
        text.contains("\"appId\":\"stream\",\"version\":198"),
        "{}",
        &text[..text.len().min(2000)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_commits_are_cleaned_up_by_our_commits() {
    let dir = tempfile::tempdir().unwrap();
    let uri = table_uri(dir.path());
    // A table whose log retention has always expired and that checkpoints every 5 commits;
    // `delta.enableExpiredLogCleanup` is left at its default (true).
    let columns = StructType::try_from_arrow(schema().as_ref()).unwrap();
    deltalake::operations::create::CreateBuilder::new()
        .with_location(uri.clone())
        .with_columns(columns.fields().cloned())
        .with_configuration_property(TableProperty::CheckpointInterval, Some("5"))
        .with_configuration_property(
            TableProperty::LogRetentionDuration,
            Some("interval 0 seconds"),
        )
        .await
        .unwrap();
    let c = DeltaCommitter::new("stream", &uri, HashMap::new(), 1 << 30);
    c.prepare(schema(), &[]).await.unwrap();
    for batch_id in 0..12 {
        commit_batch(&c, batch_id).await;
    }
    assert_eq!(c.table_version().await.unwrap(), Some(12));
    // Checkpoints at 4 and 9; the post-commit hook of our commits removed every commit and
    // checkpoint older than the newest checkpoint.
    assert_eq!(last_checkpoint_version(dir.path()), 9);
    assert_eq!(
        log_versions(dir.path(), ".checkpoint.parquet"),
        BTreeSet::from([9])
    );
    let commits = log_versions(dir.path(), ".json");
    assert_eq!(commits.first().copied(), Some(9), "{commits:?}");
    assert_eq!(commits.last().copied(), Some(12), "{commits:?}");

    let fresh = DeltaCommitter::new("stream", &uri, HashMap::new(), 1 << 30);
    assert_eq!(fresh.last_committed().await.unwrap(), Some(11));
}
