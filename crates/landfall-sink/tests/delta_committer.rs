//! `DeltaCommitter` against real local Delta tables: where a batch landed, ambiguous commits,
//! the table-creation race, schemas that round-trip, tables it must refuse, and two streams
//! appending to one table at once.

use arrow::array::{
    ArrayRef, DictionaryArray, Int32Array, Int64Array, LargeStringArray, ListArray, RecordBatch,
    StringArray, StructArray, TimestampMillisecondArray, TimestampNanosecondArray, UInt32Array,
};
use arrow::datatypes::{Int32Type, TimeUnit};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use landfall_core::{Committed, Committer, SeamError, StagedFile};
use landfall_sink::DeltaCommitter;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

fn uri(dir: &Path) -> String {
    url::Url::from_directory_path(dir).unwrap().to_string()
}

fn committer(stream: &str, dir: &Path) -> DeltaCommitter {
    DeltaCommitter::new(stream, &uri(dir), HashMap::new(), 64 << 20)
}

fn simple_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn simple_batch(ids: std::ops::Range<i64>) -> RecordBatch {
    let names: Vec<String> = ids.clone().map(|i| format!("n{i}")).collect();
    RecordBatch::try_new(
        simple_schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap()
}

/// Write one batch attempt's data files.
async fn stage(c: &DeltaCommitter, batch_id: u64, batch: RecordBatch) -> Vec<StagedFile> {
    let mut w = c
        .writer(batch_id, 1, Arc::new(|_: &str| Ok(())))
        .await
        .unwrap();
    w.write(&[], batch).await.unwrap();
    w.finish().await.unwrap()
}

/// Commit, retrying what the supervisor would retry.
async fn commit(c: &DeltaCommitter, batch_id: u64, files: &[StagedFile]) -> i64 {
    let mut last = None;
    for _ in 0..10 {
        match c.commit(batch_id, files).await {
            Ok(v) => return v.version,
            Err(e) if e.retryable => last = Some(e),
            Err(e) => panic!("fatal commit error: {e}"),
        }
    }
    panic!("commit kept failing: {last:?}")
}

/// Every commit file of the table: (version, actions).
fn log(dir: &Path) -> Vec<(i64, Vec<serde_json::Value>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir.join("_delta_log")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        let Some(v) = name
            .strip_suffix(".json")
            .and_then(|v| v.parse::<i64>().ok())
        else {
            continue;
        };
        let text = std::fs::read_to_string(dir.join("_delta_log").join(&name)).unwrap();
        let actions = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        out.push((v, actions));
    }
    out.sort_by_key(|(v, _)| *v);
    out
}

fn count_actions(dir: &Path, kind: &str) -> usize {
    log(dir)
        .iter()
        .flat_map(|(_, a)| a)
        .filter(|a| a.get(kind).is_some())
        .count()
}

fn latest_version(dir: &Path) -> i64 {
    log(dir).last().unwrap().0
}

/// The version of the commit holding `txn {stream, batch}` according to the log files.
fn txn_commit(dir: &Path, stream: &str, batch: i64) -> Option<(i64, serde_json::Value)> {
    log(dir).into_iter().find_map(|(v, actions)| {
        actions.into_iter().find_map(|a| {
            let t = a.get("txn")?;
            (t["appId"] == stream && t["version"] == batch).then(|| (v, t.clone()))
        })
    })
}

#[tokio::test]
async fn batch_version_is_the_commit_holding_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let a = committer("a", dir.path());
    let b = committer("b", dir.path());
    a.prepare(simple_schema(), &[]).await.unwrap();
    b.prepare(simple_schema(), &[]).await.unwrap();
    // v1 a:1, v2 b:1, v3 a:2, v4 b:2, v5 a:3
    let mut expected = HashMap::new();
    for (i, (c, name, batch)) in [
        (&a, "a", 1),
        (&b, "b", 1),
        (&a, "a", 2),
        (&b, "b", 2),
        (&a, "a", 3),
    ]
    .into_iter()
    .enumerate()
    {
        let files = stage(c, batch, simple_batch(0..3)).await;
        let v = commit(c, batch, &files).await;
        assert_eq!(v, i as i64 + 1);
        expected.insert((name, batch), v);
    }
    for batch in 1..=3 {
        assert_eq!(
            a.batch_version(batch).await.unwrap(),
            Some(expected[&("a", batch)]),
            "batch {batch}"
        );
    }
    assert_eq!(b.batch_version(2).await.unwrap(), Some(4));
    assert_eq!(a.batch_version(4).await.unwrap(), None, "never committed");
    assert_eq!(
        committer("c", dir.path()).batch_version(1).await.unwrap(),
        None
    );

    // Checkpoint, then clean the oldest entries: batch 1's commit is gone, later ones remain.
    let mut table =
        deltalake::DeltaTableBuilder::from_url(url::Url::parse(&uri(dir.path())).unwrap())
            .unwrap()
            .build()
            .unwrap();
    table.load().await.unwrap();
    deltalake::checkpoints::create_checkpoint(&table, None)
        .await
        .unwrap();
    for v in 0..=1 {
        std::fs::remove_file(dir.path().join(format!("_delta_log/{v:020}.json"))).unwrap();
    }
    let fresh = committer("a", dir.path());
    assert_eq!(fresh.batch_version(1).await.unwrap(), None, "cleaned");
    assert_eq!(fresh.batch_version(2).await.unwrap(), Some(3));
    assert_eq!(fresh.last_committed().await.unwrap(), Some(3));
    // Committing batch 1 again: not committed twice, and its version is unknown, not the latest.
    fresh.prepare(simple_schema(), &[]).await.unwrap();
    let files = stage(&fresh, 1, simple_batch(0..3)).await;
    assert_eq!(
        fresh.commit(1, &files).await.unwrap(),
        Committed {
            version: -1,
            landed_before: true
        }
    );
    assert_eq!(latest_version(dir.path()), 5);
}

#[tokio::test]
async fn an_ambiguous_commit_is_not_committed_again_and_reports_its_own_version() {
    let dir = tempfile::tempdir().unwrap();
    let first = committer("s", dir.path());
    first.prepare(simple_schema(), &[]).await.unwrap();
    let files = stage(&first, 5, simple_batch(0..10)).await;
    let landed = commit(&first, 5, &files).await;
    assert_eq!(landed, 1);
    // The txn carries when it was written.
    let (_, txn) = txn_commit(dir.path(), "s", 5).unwrap();
    assert!(
        txn["lastUpdated"].as_i64().unwrap() > 1_600_000_000_000,
        "{txn}"
    );

    // Another stream moves the table on.
    let other = committer("other", dir.path());
    other.prepare(simple_schema(), &[]).await.unwrap();
    let f = stage(&other, 1, simple_batch(0..1)).await;
    assert_eq!(commit(&other, 1, &f).await, 2);

    // The call "failed" from the engine's point of view; a fresh process retries batch 5
    // (a new attempt, new data files).
    let retry = committer("s", dir.path());
    retry.prepare(simple_schema(), &[]).await.unwrap();
    let files2 = stage(&retry, 5, simple_batch(0..10)).await;
    let before = log(dir.path()).len();
    assert_eq!(
        retry.commit(5, &files2).await.unwrap(),
        Committed {
            version: landed,
            landed_before: true
        },
        "the engine learns that this attempt's files are not in the table"
    );
    assert_eq!(log(dir.path()).len(), before, "no second commit");
    assert_eq!(count_actions(dir.path(), "txn"), 2);
    assert_eq!(retry.batch_version(5).await.unwrap(), Some(landed));
}

#[tokio::test]
async fn files_the_table_references_are_never_removed() {
    // After an ambiguous commit the engine may believe the landed attempt failed and ask for
    // its files to be removed: they are the table's data.
    let dir = tempfile::tempdir().unwrap();
    let c = committer("s", dir.path());
    c.prepare(simple_schema(), &[]).await.unwrap();
    let live = stage(&c, 1, simple_batch(0..3)).await;
    commit(&c, 1, &live).await;
    let orphan = stage(&c, 2, simple_batch(0..3)).await;
    let mut paths: Vec<String> = live.iter().map(|f| f.path.clone()).collect();
    paths.extend(orphan.iter().map(|f| f.path.clone()));
    assert_eq!(c.remove_files(&paths).await.unwrap(), orphan.len() as u64);
    for f in &live {
        assert!(dir.path().join(&f.path).exists(), "{} was deleted", f.path);
    }
    for f in &orphan {
        assert!(!dir.path().join(&f.path).exists());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creation_writes_metadata_once() {
    const STREAMS: usize = 6;
    for iteration in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(STREAMS));
        let tasks: Vec<_> = (0..STREAMS)
            .map(|i| {
                let path = dir.path().to_path_buf();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let c = committer(&format!("stream{i}"), &path);
                    barrier.wait().await;
                    c.prepare(simple_schema(), &[]).await
                })
            })
            .collect();
        for t in tasks {
            t.await
                .unwrap()
                .unwrap_or_else(|e| panic!("iteration {iteration}: {e}"));
        }
        assert_eq!(
            count_actions(dir.path(), "metaData"),
            1,
            "iteration {iteration}: {:?}",
            log(dir.path())
        );
        assert_eq!(latest_version(dir.path()), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creation_with_different_schemas_fails_only_as_incompatible() {
    for iteration in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let barrier = Arc::new(tokio::sync::Barrier::new(4));
        let tasks: Vec<_> = (0..4)
            .map(|i| {
                let path = dir.path().to_path_buf();
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let c = committer(&format!("stream{i}"), &path);
                    let schema = if i % 2 == 0 {
                        simple_schema()
                    } else {
                        Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, true)]))
                    };
                    barrier.wait().await;
                    c.prepare(schema, &[]).await
                })
            })
            .collect();
        let mut ok = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(()) => ok += 1,
                Err(e) => {
                    assert!(!e.retryable, "{e}");
                    assert!(e.message.contains("does not fit"), "{e}");
                    assert!(e.message.contains("`id`"), "{e}");
                }
            }
        }
        assert_eq!(
            ok, 2,
            "iteration {iteration}: the winner's schema and its twin"
        );
        assert_eq!(count_actions(dir.path(), "metaData"), 1);
    }
}

fn awkward_schema() -> SchemaRef {
    let nested_list = DataType::List(Arc::new(Field::new("item", DataType::UInt32, true)));
    Arc::new(Schema::new(vec![
        Field::new(
            "ts_ntz",
            DataType::Timestamp(TimeUnit::Nanosecond, None),
            true,
        ),
        Field::new(
            "ts_tz",
            DataType::Timestamp(TimeUnit::Millisecond, Some("+02:00".into())),
            true,
        ),
        Field::new("u", DataType::UInt32, true),
        Field::new("s", DataType::LargeUtf8, true),
        Field::new(
            "d",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new("day", DataType::Date64, true),
        Field::new(
            "l",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        ),
        Field::new(
            "st",
            DataType::Struct(Fields::from(vec![
                Field::new("x", DataType::Int32, false),
                Field::new("inner", nested_list, true),
            ])),
            true,
        ),
    ]))
}

fn awkward_batch() -> RecordBatch {
    let schema = awkward_schema();
    let DataType::Struct(st_fields) = schema.field(7).data_type().clone() else {
        unreachable!()
    };
    let inner = ListArray::new(
        Arc::new(Field::new("item", DataType::UInt32, true)),
        arrow::buffer::OffsetBuffer::from_lengths([1, 0]),
        Arc::new(UInt32Array::from(vec![u32::MAX])),
        None,
    );
    let st = StructArray::new(
        st_fields,
        vec![
            Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef,
            Arc::new(inner),
        ],
        None,
    );
    let dict: DictionaryArray<Int32Type> = vec!["x", "y"].into_iter().collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(TimestampNanosecondArray::from(vec![1_000, 2_000])),
            Arc::new(TimestampMillisecondArray::from(vec![1, 2]).with_timezone("+02:00")),
            Arc::new(UInt32Array::from(vec![u32::MAX, 0])),
            Arc::new(LargeStringArray::from(vec!["a", "b"])),
            Arc::new(dict),
            Arc::new(arrow::array::Date64Array::from(vec![86_400_000, 0])),
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
                Some(vec![Some(1), None]),
                None,
            ])),
            Arc::new(st),
        ],
    )
    .unwrap()
}

#[tokio::test]
async fn a_table_created_by_a_stream_accepts_it_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let first = committer("s", dir.path());
    first.prepare(awkward_schema(), &[]).await.unwrap();
    // Batches in the stream's own types are conformed to what the table stores.
    let files = stage(&first, 1, awkward_batch()).await;
    assert_eq!(commit(&first, 1, &files).await, 1);

    let restarted = committer("s", dir.path());
    restarted
        .prepare(awkward_schema(), &[])
        .await
        .unwrap_or_else(|e| panic!("restart refused its own table: {e}"));
    // Normalised by the engine first: the same answer.
    restarted
        .prepare(
            Arc::new(landfall_core::delta_types::delta_normalize(
                &awkward_schema(),
            )),
            &[],
        )
        .await
        .unwrap();

    // The data file holds the normalised types, unsigned values intact.
    let path = dir.path().join(&files[0].path);
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(path).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    let u = batches[0]
        .column_by_name("u")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(u.value(0), u32::MAX as i64);
    assert_eq!(
        batches[0]
            .schema()
            .field_with_name("ts_tz")
            .unwrap()
            .data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
}

#[tokio::test]
async fn a_nullable_stream_column_into_a_not_null_table_column_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let strict = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    committer("owner", dir.path())
        .prepare(strict.clone(), &[])
        .await
        .unwrap();
    let err = committer("loose", dir.path())
        .prepare(simple_schema(), &[])
        .await
        .unwrap_err();
    assert!(!err.retryable);
    assert!(err.message.contains("`id` may be null"), "{err}");
    // Not null into not null is fine.
    committer("also_strict", dir.path())
        .prepare(strict, &[])
        .await
        .unwrap();
}

/// A table whose version 0 is written by hand: a protocol and a metaData line.
fn hand_made_table(
    protocol: serde_json::Value,
    configuration: serde_json::Value,
    id_meta: serde_json::Value,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    // Column-mapped tables annotate every field.
    let name_meta = if id_meta.get("delta.columnMapping.id").is_some() {
        serde_json::json!({"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-2"})
    } else {
        serde_json::json!({})
    };
    let schema = serde_json::json!({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": true, "metadata": id_meta},
        {"name": "name", "type": "string", "nullable": true, "metadata": name_meta},
    ]});
    let metadata = serde_json::json!({"metaData": {
        "id": uuid::Uuid::new_v4().to_string(),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema.to_string(),
        "partitionColumns": [],
        "configuration": configuration,
        "createdTime": 1_700_000_000_000i64,
    }});
    let commit_info = serde_json::json!({"commitInfo": {"timestamp": 1_700_000_000_000i64, "operation": "CREATE TABLE"}});
    std::fs::create_dir(dir.path().join("_delta_log")).unwrap();
    std::fs::write(
        dir.path().join("_delta_log/00000000000000000000.json"),
        format!(
            "{commit_info}\n{}\n{metadata}\n",
            serde_json::json!({ "protocol": protocol })
        ),
    )
    .unwrap();
    dir
}

async fn refused(dir: &tempfile::TempDir) -> SeamError {
    let before = log(dir.path()).len();
    let err = committer("s", dir.path())
        .prepare(simple_schema(), &[])
        .await
        .expect_err("the table must be refused");
    eprintln!("{err}");
    assert!(!err.retryable, "{err}");
    assert_eq!(log(dir.path()).len(), before);
    err
}

#[tokio::test]
async fn tables_needing_writer_work_are_refused_before_any_data_file() {
    use serde_json::json;
    let cases = [
        (
            "checkConstraints",
            hand_made_table(
                json!({"minReaderVersion": 1, "minWriterVersion": 3}),
                json!({"delta.constraints.positive_id": "id > 0"}),
                json!({}),
            ),
            "positive_id",
        ),
        (
            "generatedColumns",
            hand_made_table(
                json!({"minReaderVersion": 1, "minWriterVersion": 4}),
                json!({}),
                json!({"delta.generationExpression": "length(name)"}),
            ),
            "`id`",
        ),
        (
            "identityColumns",
            hand_made_table(
                json!({"minReaderVersion": 1, "minWriterVersion": 6}),
                json!({}),
                json!({"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": false}),
            ),
            "`id`",
        ),
        (
            "invariants",
            hand_made_table(
                json!({"minReaderVersion": 1, "minWriterVersion": 2}),
                json!({}),
                json!({"delta.invariants": "{\"expression\":{\"expression\":\"id > 0\"}}"}),
            ),
            "`id`",
        ),
        (
            "fancyFutureFeature",
            hand_made_table(
                json!({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "fancyFutureFeature"]}),
                json!({}),
                json!({}),
            ),
            "does not know",
        ),
        (
            "catalogManaged",
            hand_made_table(
                json!({"minReaderVersion": 3, "minWriterVersion": 7,
                       "readerFeatures": ["catalogManaged"],
                       "writerFeatures": ["catalogManaged", "inCommitTimestamp"]}),
                json!({"delta.enableInCommitTimestamps": "true"}),
                json!({}),
            ),
            "catalog",
        ),
        (
            "fancyReaderFeature",
            hand_made_table(
                json!({"minReaderVersion": 3, "minWriterVersion": 7,
                       "readerFeatures": ["fancyReaderFeature"],
                       "writerFeatures": ["fancyReaderFeature"]}),
                json!({}),
                json!({}),
            ),
            "fancyReaderFeature",
        ),
    ];
    for (feature, dir, detail) in &cases {
        let err = refused(dir).await;
        assert!(err.message.contains(feature), "{feature}: {err}");
        assert!(err.message.contains(detail), "{feature}: {err}");
    }
}

/// The actions named `kind` in commit `version` of the table's log.
fn actions(dir: &Path, version: i64, kind: &str) -> Vec<serde_json::Value> {
    log(dir)
        .into_iter()
        .find(|(v, _)| *v == version)
        .map(|(_, a)| a)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|a| a.get(kind).cloned())
        .collect()
}

/// Append `rows` rows as batch `batch` and return the commit's version.
async fn append(c: &DeltaCommitter, batch: u64, rows: std::ops::Range<i64>) -> i64 {
    let files = stage(c, batch, simple_batch(rows)).await;
    commit(c, batch, &files).await
}

/// A table with row tracking (and deletion vectors), as Databricks enables them.
fn row_tracking_table() -> tempfile::TempDir {
    use serde_json::json;
    hand_made_table(
        json!({"minReaderVersion": 3, "minWriterVersion": 7,
               "readerFeatures": ["deletionVectors"],
               "writerFeatures": ["rowTracking", "domainMetadata", "deletionVectors"]}),
        json!({"delta.enableRowTracking": "true",
               "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-1",
               "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-commit-version-col-2"}),
        json!({}),
    )
}

#[tokio::test]
async fn row_tracking_tables_get_row_ids_and_their_high_water_mark() {
    let dir = row_tracking_table();
    let c = committer("s", dir.path());
    c.prepare(simple_schema(), &[]).await.unwrap();
    let v1 = append(&c, 1, 0..5).await;
    let v2 = append(&c, 2, 5..8).await;
    // Protocol: each add gets baseRowId (the high-water mark before it, plus one) and its
    // commit's version; the domain `delta.rowTracking` holds the new high-water mark.
    let add1 = &actions(dir.path(), v1, "add")[0];
    let add2 = &actions(dir.path(), v2, "add")[0];
    assert_eq!(add1["baseRowId"], 0, "{add1}");
    assert_eq!(add1["defaultRowCommitVersion"], v1, "{add1}");
    assert_eq!(add2["baseRowId"], 5, "{add2}");
    assert_eq!(add2["defaultRowCommitVersion"], v2, "{add2}");
    let mark = |v: i64| -> i64 {
        let d = actions(dir.path(), v, "domainMetadata")
            .into_iter()
            .find(|d| d["domain"] == "delta.rowTracking")
            .expect("the row tracking domain");
        let conf: serde_json::Value =
            serde_json::from_str(d["configuration"].as_str().unwrap()).unwrap();
        conf["rowIdHighWaterMark"].as_i64().unwrap()
    };
    assert_eq!(mark(v1), 4);
    assert_eq!(mark(v2), 7);
}

#[tokio::test]
async fn in_commit_timestamps_are_written_first_and_only_grow() {
    use serde_json::json;
    let dir = hand_made_table(
        json!({"minReaderVersion": 1, "minWriterVersion": 7,
               "writerFeatures": ["inCommitTimestamp"]}),
        json!({"delta.enableInCommitTimestamps": "true",
               "delta.inCommitTimestampEnablementVersion": "0",
               "delta.inCommitTimestampEnablementTimestamp": "1700000000000"}),
        json!({}),
    );
    // Version 0 as an ICT writer leaves it, with a timestamp far in the future, so
    // "monotonic" has to be the previous one plus one, not the clock.
    let first = dir.path().join("_delta_log/00000000000000000000.json");
    let text = std::fs::read_to_string(&first).unwrap().replacen(
        "{\"commitInfo\":{",
        "{\"commitInfo\":{\"inCommitTimestamp\":4102444800000,",
        1,
    );
    std::fs::write(&first, text).unwrap();
    let c = committer("s", dir.path());
    c.prepare(simple_schema(), &[]).await.unwrap();
    let v1 = append(&c, 1, 0..2).await;
    let v2 = append(&c, 2, 2..4).await;
    let ict = |v: i64| -> i64 {
        let line = std::fs::read_to_string(dir.path().join(format!("_delta_log/{v:020}.json")))
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string();
        assert!(
            line.starts_with("{\"commitInfo\":{"),
            "commitInfo is the commit's first action: {line}"
        );
        actions(dir.path(), v, "commitInfo")[0]["inCommitTimestamp"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(ict(v1), 4102444800001);
    assert_eq!(ict(v2), 4102444800002);
}

#[tokio::test]
async fn clustered_tables_are_refused_before_any_data_file() {
    use serde_json::json;
    let dir = hand_made_table(
        json!({"minReaderVersion": 1, "minWriterVersion": 7,
               "writerFeatures": ["clustering", "domainMetadata"]}),
        json!({}),
        json!({}),
    );
    let first = dir.path().join("_delta_log/00000000000000000000.json");
    let mut text = std::fs::read_to_string(&first).unwrap();
    text.push_str(
        &json!({"domainMetadata": {"domain": "delta.clustering",
            "configuration": "{\"clusteringColumns\":[[\"id\"]]}", "removed": false}})
        .to_string(),
    );
    text.push('\n');
    std::fs::write(&first, text).unwrap();
    let err = refused(&dir).await;
    assert!(err.message.contains("clustering"), "{err}");
    assert!(err.message.contains("stats"), "{err}");
}

#[tokio::test]
async fn column_names_delta_refuses_are_refused_at_prepare() {
    let dir = tempfile::tempdir().unwrap();
    let spaced = Arc::new(Schema::new(vec![Field::new(
        "order id",
        DataType::Int64,
        true,
    )]));
    let err = committer("s", dir.path())
        .prepare(spaced, &[])
        .await
        .unwrap_err();
    assert!(!err.retryable, "{err}");
    assert!(err.message.contains("\"order id\""), "{err}");
    assert!(
        !dir.path().join("_delta_log").exists(),
        "no table was created"
    );
}

#[tokio::test]
async fn unused_legacy_invariants_and_deletion_vectors_are_writable() {
    use serde_json::json;
    // Writer version 2 (every Spark table of old): invariants are in force but unused.
    let legacy = hand_made_table(
        json!({"minReaderVersion": 1, "minWriterVersion": 2}),
        json!({}),
        json!({}),
    );
    // Deletion vectors: a blind append adds files without vectors, which the protocol allows.
    let dv = hand_made_table(
        json!({"minReaderVersion": 3, "minWriterVersion": 7,
               "readerFeatures": ["deletionVectors"],
               "writerFeatures": ["deletionVectors", "appendOnly"]}),
        json!({"delta.enableDeletionVectors": "true"}),
        json!({}),
    );
    for dir in [legacy, dv] {
        let c = committer("s", dir.path());
        c.prepare(simple_schema(), &[]).await.unwrap();
        let files = stage(&c, 1, simple_batch(0..5)).await;
        assert_eq!(commit(&c, 1, &files).await, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_streams_append_concurrently_without_losing_adds() {
    let dir = tempfile::tempdir().unwrap();
    committer("setup", dir.path())
        .prepare(simple_schema(), &[])
        .await
        .unwrap();
    let tasks: Vec<_> = ["left", "right"]
        .into_iter()
        .map(|stream| {
            let path = dir.path().to_path_buf();
            tokio::spawn(async move {
                let c = committer(stream, &path);
                c.prepare(simple_schema(), &[]).await.unwrap();
                for batch in 0..10u64 {
                    let start = batch as i64 * 100;
                    let files = stage(&c, batch, simple_batch(start..start + 100)).await;
                    commit(&c, batch, &files).await;
                }
                c.last_committed().await.unwrap()
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), Some(9));
    }
    assert_eq!(count_actions(dir.path(), "add"), 20);
    assert_eq!(count_actions(dir.path(), "remove"), 0);
    assert_eq!(latest_version(dir.path()), 20);
    for stream in ["left", "right"] {
        for batch in 0..10 {
            let (v, _) = txn_commit(dir.path(), stream, batch).unwrap();
            assert_eq!(
                committer(stream, dir.path())
                    .batch_version(batch as u64)
                    .await
                    .unwrap(),
                Some(v)
            );
        }
    }
    let mut table =
        deltalake::DeltaTableBuilder::from_url(url::Url::parse(&uri(dir.path())).unwrap())
            .unwrap()
            .build()
            .unwrap();
    table.load().await.unwrap();
    assert_eq!(table.get_file_uris().unwrap().count(), 20);
}

#[tokio::test]
async fn a_table_under_a_prefix_with_a_space_a_percent_and_accents_finds_its_own_commits() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("my table 100% [x] é日本");
    std::fs::create_dir(&dir).unwrap();
    let c = committer("s", &dir);
    c.set_owner("state-a");
    c.prepare(simple_schema(), &[]).await.unwrap();
    let v1 = append(&c, 1, 0..3).await;
    append(&c, 2, 3..5).await;
    // The log is read back under the same (escaped) prefix: the batch's commit, its files and
    // its owner stamp.
    assert_eq!(c.batch_version(1).await.unwrap(), Some(v1));
    let b = c.batch_commit(1).await.unwrap().expect("batch 1's commit");
    assert_eq!(b.owner.as_deref(), Some("state-a"));
    assert_eq!(b.files.len(), 1);
    assert!(dir.join("_delta_log/00000000000000000002.json").is_file());
    assert_eq!(
        committer("s", &dir).last_committed().await.unwrap(),
        Some(2)
    );
}

#[tokio::test]
async fn a_table_deleted_under_a_running_committer_gets_no_commit_after_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let c = committer("s", dir.path());
    c.prepare(simple_schema(), &[]).await.unwrap();
    for batch in 1..=3 {
        append(&c, batch, batch as i64 * 10..batch as i64 * 10 + 2).await;
    }
    // Someone deletes the table and creates another at the location (two versions).
    std::fs::remove_dir_all(dir.path().join("_delta_log")).unwrap();
    let other = committer("other", dir.path());
    other.prepare(simple_schema(), &[]).await.unwrap();
    append(&other, 1, 0..1).await;
    let files = stage(&c, 4, simple_batch(40..42)).await;
    let _ = c.commit(4, &files).await;
    // Whatever the committer answers, it never writes version 4 after the new table's 1.
    let versions: Vec<i64> = log(dir.path()).iter().map(|(v, _)| *v).collect();
    assert_eq!(
        versions.iter().copied().max().unwrap() as usize + 1,
        versions.len(),
        "the log stays contiguous: {versions:?}"
    );
    assert!(!versions.contains(&4), "{versions:?}");
}

/// A field new inside a list's struct elements (`items.element.b`) is added to the table by the
/// batch's commit, so readers see its values (before, the fit check took it and the table
/// never got it: the values sat in the files, invisible).
#[tokio::test(flavor = "multi_thread")]
async fn a_new_field_inside_list_elements_is_added_to_the_table() {
    use arrow::array::{Int64Array, ListArray, StructArray};
    let dir = tempfile::tempdir().unwrap();
    let elem = |with_b: bool| {
        let mut f = vec![Field::new("a", DataType::Int64, true)];
        if with_b {
            f.push(Field::new("b", DataType::Utf8, true));
        }
        Fields::from(f)
    };
    let schema = |with_b: bool| {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new(
                "items",
                DataType::List(Arc::new(Field::new(
                    "element",
                    DataType::Struct(elem(with_b)),
                    true,
                ))),
                true,
            ),
        ]))
    };
    let batch = |with_b: bool, ids: Vec<i64>| {
        let n = ids.len();
        let mut cols: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ids.clone()))];
        if with_b {
            cols.push(Arc::new(StringArray::from_iter_values(
                ids.iter().map(|i| format!("b{i}")),
            )));
        }
        let structs = StructArray::new(elem(with_b), cols, None);
        let list = ListArray::try_new(
            Arc::new(Field::new("element", DataType::Struct(elem(with_b)), true)),
            arrow::buffer::OffsetBuffer::from_lengths(vec![1; n]),
            Arc::new(structs),
            None,
        )
        .unwrap();
        RecordBatch::try_new(
            schema(with_b),
            vec![Arc::new(Int64Array::from(ids)), Arc::new(list)],
        )
        .unwrap()
    };
    let c = committer("s", dir.path());
    c.prepare(schema(false), &[]).await.unwrap();
    let files = stage(&c, 0, batch(false, vec![1, 2])).await;
    commit(&c, 0, &files).await;
    c.evolve(schema(true), &[]).await.unwrap();
    let files = stage(&c, 1, batch(true, vec![3, 4])).await;
    commit(&c, 1, &files).await;
    let meta = actions(dir.path(), 2, "metaData");
    assert_eq!(meta.len(), 1, "the batch's commit grows the schema");
    let schema_string = meta[0]["schemaString"].as_str().unwrap();
    assert!(schema_string.contains(r#""name":"b""#), "{schema_string}");
    let script = "import sys, json\nfrom deltalake import DeltaTable\nrows = DeltaTable(sys.argv[1]).to_pyarrow_table().to_pylist()\nprint(json.dumps(sorted(rows, key=lambda r: r['id'])))\n# deltalake may abort at interpreter exit, after the work is done\nimport os; sys.stdout.flush(); os._exit(0)";
    let o = std::process::Command::new("python3")
        .args(["-c", script, dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        rows[0]["items"][0],
        serde_json::json!({"a": 1, "b": null}),
        "{rows}"
    );
    assert_eq!(
        rows[3]["items"][0],
        serde_json::json!({"a": 4, "b": "b4"}),
        "{rows}"
    );
}

/// Compacting a row-tracking table keeps every row's id and commit version: the new file
/// carries them in the table's materialized columns (the kernel gives the new file a fresh
/// baseRowId, which readers use only where the materialized value is null).
#[tokio::test(flavor = "multi_thread")]
async fn compaction_keeps_row_ids_in_the_materialized_columns() {
    use arrow::array::Int64Array;
    let dir = row_tracking_table();
    let c = committer("s", dir.path());
    c.prepare(simple_schema(), &[]).await.unwrap();
    let v1 = append(&c, 1, 0..5).await;
    let v2 = append(&c, 2, 5..8).await;
    let report = c
        .compact(&landfall_sink::delta::compact::CompactOptions::for_target(
            64 << 20,
        ))
        .await
        .unwrap();
    let v = report.version.expect("compacted");
    assert_eq!(
        (report.files_removed, report.files_added, report.rows),
        (2, 1, 8)
    );
    let adds = actions(dir.path(), v, "add");
    assert_eq!(adds.len(), 1);
    let removes = actions(dir.path(), v, "remove");
    assert!(
        removes.iter().all(|r| r["baseRowId"].is_i64()),
        "{removes:?}"
    );
    let read_ids = |v: i64| {
        let adds = actions(dir.path(), v, "add");
        assert_eq!(adds.len(), 1);
        let path = dir.path().join(adds[0]["path"].as_str().unwrap());
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(path).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let mut seen = Vec::new();
        for b in reader {
            let b = b.unwrap();
            let col = |name: &str| {
                b.column_by_name(name)
                    .unwrap_or_else(|| panic!("no {name}"))
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone()
            };
            let (ids, row_ids, versions) = (
                col("id"),
                col("_row-id-col-1"),
                col("_row-commit-version-col-2"),
            );
            for i in 0..b.num_rows() {
                seen.push((ids.value(i), row_ids.value(i), versions.value(i)));
            }
        }
        seen.sort();
        seen
    };
    let expected: Vec<(i64, i64, i64)> = (0..8)
        .map(|id| (id, id, if id < 5 { v1 } else { v2 }))
        .collect();
    assert_eq!(read_ids(v), expected);
    // Once more, with the compacted file (ids materialized) and a new one (ids computed).
    let v3 = append(&c, 3, 8..10).await;
    let again = c
        .compact(&landfall_sink::delta::compact::CompactOptions::for_target(
            64 << 20,
        ))
        .await
        .unwrap();
    let v4 = again.version.expect("compacted again");
    let mut expected = expected;
    // The compaction took ids 8..15 for its file (unused: its rows keep theirs), so batch 3
    // starts at 16.
    expected.extend([(8, 16, v3), (9, 17, v3)]);
    assert_eq!(read_ids(v4), expected);
    // The commit acknowledges the preservation, as the kernel asks.
    let info = &actions(dir.path(), v, "commitInfo")[0];
    assert_eq!(info["operation"], "OPTIMIZE", "{info}");
}
