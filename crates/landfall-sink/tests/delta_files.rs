//! Data files written through `DeltaCommitter` and read back by deltalake: the `add` stats
//! deltalake parses, partition directories on disk agreeing with the paths in the log, and
//! partition values typed by the table schema.

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::util::display::array_value_to_string;
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use landfall_core::seams::StagedHook;
use landfall_core::{Committer, StagedFile};
use landfall_sink::DeltaCommitter;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

fn table_uri(dir: &std::path::Path) -> String {
    url::Url::from_directory_path(dir).unwrap().to_string()
}

fn recording_hook() -> (StagedHook, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let hook: StagedHook = Arc::new(move |p: &str| {
        s.lock().unwrap().push(p.to_string());
        Ok(())
    });
    (hook, seen)
}

/// Write `parts` (partition values, rows) as batch `batch_id` and commit it.
async fn write_and_commit(
    c: &DeltaCommitter,
    batch_id: u64,
    parts: Vec<(Vec<Option<String>>, RecordBatch)>,
) -> Vec<StagedFile> {
    let (hook, _) = recording_hook();
    let mut w = c.writer(batch_id, 1, hook).await.unwrap();
    for (values, rows) in parts {
        w.write(&values, rows).await.unwrap();
    }
    let staged = w.finish().await.unwrap();
    c.commit(batch_id, &staged).await.unwrap();
    staged
}

async fn load(uri: &str) -> deltalake::DeltaTable {
    let mut t = deltalake::DeltaTableBuilder::from_url(url::Url::parse(uri).unwrap())
        .unwrap()
        .build()
        .unwrap();
    t.load().await.unwrap();
    t
}

/// Each file's flattened add-action row as `column -> displayed value`.
fn add_rows(t: &deltalake::DeltaTable) -> Vec<BTreeMap<String, String>> {
    let adds = t.snapshot().unwrap().add_actions_table(true).unwrap();
    (0..adds.num_rows())
        .map(|row| {
            adds.schema()
                .fields()
                .iter()
                .zip(adds.columns())
                .filter(|(_, c)| c.is_valid(row))
                .map(|(f, c)| (f.name().clone(), array_value_to_string(c, row).unwrap()))
                .collect()
        })
        .collect()
}

fn stats_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("amount", DataType::Decimal128(10, 2), true),
        Field::new(
            "at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("day", DataType::Date32, true),
        Field::new("ok", DataType::Boolean, true),
        Field::new("region", DataType::Utf8, true),
    ]))
}

#[tokio::test]
async fn stats_written_through_the_writer_are_read_by_deltalake() {
    let dir = tempfile::tempdir().unwrap();
    let uri = table_uri(dir.path());
    let c = DeltaCommitter::new("s", &uri, HashMap::new(), 1 << 30);
    let schema = stats_schema();
    c.prepare(schema.clone(), &["region".to_string()])
        .await
        .unwrap();
    let long = format!("{}tail", "n".repeat(32));
    let batch = |ids: Vec<i64>, names: Vec<Option<&str>>, amounts: Vec<Option<i128>>| {
        let n = ids.len();
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(ids)) as ArrayRef,
                Arc::new(StringArray::from(names)),
                Arc::new(
                    Decimal128Array::from(amounts)
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
                Arc::new(
                    TimestampMicrosecondArray::from(
                        (0..n as i64)
                            .map(|i| 1_704_164_645_000_000 + i * 1_500)
                            .collect::<Vec<_>>(),
                    )
                    .with_timezone("UTC"),
                ),
                Arc::new(Date32Array::from(vec![19_724; n])),
                Arc::new(BooleanArray::from(vec![Some(true); n])),
                Arc::new(StringArray::from(vec![Some("eu"); n])),
            ],
        )
        .unwrap()
    };
    let eu = vec![Some("eu".to_string())];
    // Two batches into the same file: the bounds span both.
    let staged = write_and_commit(
        &c,
        0,
        vec![
            (
                eu.clone(),
                batch(
                    vec![5, 2],
                    vec![Some("m"), None],
                    vec![Some(1230), Some(-5)],
                ),
            ),
            (
                eu.clone(),
                batch(vec![9], vec![Some(long.as_str())], vec![None]),
            ),
        ],
    )
    .await;
    assert_eq!(staged.len(), 1);
    let stats: serde_json::Value =
        serde_json::from_str(staged[0].stats.as_deref().unwrap()).unwrap();
    assert_eq!(
        stats,
        serde_json::json!({
            "numRecords": 3,
            "minValues": {
                "id": 2, "name": "m", "amount": -0.05,
                "at": "2024-01-02T03:04:05.000Z", "day": "2024-01-02"
            },
            "maxValues": {
                "id": 9, "name": format!("{}\u{7F}", "n".repeat(32)), "amount": 12.30,
                // 1.5 ms after the first row, rounded up to the millisecond.
                "at": "2024-01-02T03:04:05.002Z", "day": "2024-01-02"
            },
            "nullCount": {"id": 0, "name": 1, "amount": 1, "at": 0, "day": 0, "ok": 0}
        }),
        "partition column `region` gets no stats; `ok` only a null count"
    );
    assert!(
        staged[0]
            .stats
            .as_deref()
            .unwrap()
            .contains("\"amount\":12.30"),
        "decimals keep their exact digits"
    );

    // deltalake (kernel) parses the stats with the table's types.
    let t = load(&uri).await;
    let rows = add_rows(&t);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r["num_records"], "3");
    assert_eq!(r["min.id"], "2");
    assert_eq!(r["max.id"], "9");
    assert_eq!(r["min.name"], "m");
    assert_eq!(r["min.amount"], "-0.05");
    assert_eq!(r["max.amount"], "12.30");
    assert_eq!(r["min.day"], "2024-01-02");
    assert!(r["min.at"].starts_with("2024-01-02T03:04:05"), "{r:?}");
    assert_eq!(r["null_count.name"], "1");
    assert_eq!(r["partition.region"], "eu");
}

/// All data files under `root`, as paths relative to it.
fn files_on_disk(root: &std::path::Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
            if rel.starts_with("_delta_log") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(rel);
            }
        }
    }
    out
}

#[tokio::test]
async fn partition_paths_on_disk_agree_with_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let uri = table_uri(dir.path());
    let c = DeltaCommitter::new("s", &uri, HashMap::new(), 1 << 30);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("p", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
    ]));
    c.prepare(schema.clone(), &["p".to_string(), "ts".to_string()])
        .await
        .unwrap();
    let rows = |id: i64| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![id])) as ArrayRef,
                Arc::new(StringArray::from(vec![Some("ignored")])),
                Arc::new(TimestampMicrosecondArray::from(vec![0]).with_timezone("UTC")),
            ],
        )
        .unwrap()
    };
    // The partition values as the engine's partition.rs formats them.
    let ts = "2024-01-02 03:04:05.123456";
    let values = ["a b/c:d", "日本語", "%", "x}~<>|+&"];
    let parts = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (
                vec![Some(v.to_string()), Some(ts.to_string())],
                rows(i as i64),
            )
        })
        .chain([(vec![None, None], rows(9))])
        .collect();
    let staged = write_and_commit(&c, 0, parts).await;
    let dirs: BTreeSet<String> = staged
        .iter()
        .map(|f| f.path.rsplit_once('/').unwrap().0.to_string())
        .collect();
    let ts_dir = "ts=2024-01-02 03%3A04%3A05.123456";
    assert_eq!(
        dirs,
        [
            format!("p=a b%2Fc%3Ad/{ts_dir}"),
            format!("p=日本語/{ts_dir}"),
            format!("p=%25/{ts_dir}"),
            format!("p=x}}~<>|+&/{ts_dir}"),
            "p=__HIVE_DEFAULT_PARTITION__/ts=__HIVE_DEFAULT_PARTITION__".to_string(),
        ]
        .into_iter()
        .collect()
    );

    // The files exist exactly where the staged paths say.
    let on_disk = files_on_disk(dir.path());
    let staged_paths: BTreeSet<String> = staged.iter().map(|f| f.path.clone()).collect();
    assert_eq!(on_disk, staged_paths);

    // The log holds the URI-encoded form of those paths (`%` in a name is `%25`).
    let log =
        std::fs::read_to_string(dir.path().join("_delta_log/00000000000000000001.json")).unwrap();
    let logged: BTreeSet<String> = log
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["add"]["path"].as_str().map(str::to_string)
        })
        .collect();
    assert!(
        logged.iter().any(|p| p.starts_with("p=a%20b%252Fc%253Ad/")),
        "{logged:?}"
    );
    assert!(
        logged.iter().any(|p| p.starts_with("p=%2525/")),
        "{logged:?}"
    );
    assert!(
        logged
            .iter()
            .any(|p| p.starts_with("p=%E6%97%A5%E6%9C%AC%E8%AA%9E/")),
        "{logged:?}"
    );
    for p in &logged {
        let decoded = percent_decode(p);
        assert!(staged_paths.contains(&decoded), "{p} decodes to {decoded}");
    }

    // deltalake resolves every add to the file on disk...
    let t = load(&uri).await;
    let uris: BTreeSet<String> = t.get_file_uris().unwrap().collect();
    assert_eq!(uris.len(), staged.len());
    for u in &uris {
        assert!(std::path::Path::new(u).is_file(), "{u} is not a file");
    }
    // ...and reads the partition values with the table's types.
    let mut partitions: Vec<(String, String)> = add_rows(&t)
        .iter()
        .map(|r| {
            (
                r.get("partition.p").cloned().unwrap_or_default(),
                r.get("partition.ts").cloned().unwrap_or_default(),
            )
        })
        .collect();
    partitions.sort();
    let typed_ts = "2024-01-02T03:04:05.123456Z";
    let mut expected: Vec<(String, String)> = values
        .iter()
        .map(|v| (v.to_string(), typed_ts.to_string()))
        .chain([(String::new(), String::new())])
        .collect();
    expected.sort();
    assert_eq!(partitions, expected);
}

#[tokio::test]
async fn a_partition_value_too_long_for_a_directory_fails_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let uri = table_uri(dir.path());
    let c = DeltaCommitter::new("s", &uri, HashMap::new(), 1 << 30);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("city", DataType::Utf8, true),
    ]));
    c.prepare(schema.clone(), &["city".to_string()])
        .await
        .unwrap();
    let rows = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1])) as ArrayRef,
            Arc::new(StringArray::from(vec!["x"])),
        ],
    )
    .unwrap();
    let (hook, seen) = recording_hook();
    let mut w = c.writer(0, 1, hook).await.unwrap();
    // 100 Japanese characters: 300 bytes as they are (and 900 percent-encoded).
    let value = "東".repeat(100);
    let err = w.write(&[Some(value)], rows).await.unwrap_err();
    assert!(err.message.contains("partition column `city`"), "{err:?}");
    assert!(err.message.contains(&"東".repeat(64)), "{err:?}");
    assert!(err.message.contains("255-byte limit"), "{err:?}");
    assert!(
        !err.retryable,
        "it can never succeed: the stream stops instead of retrying"
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "no file was recorded or created"
    );
    assert!(files_on_disk(dir.path()).is_empty());
}

#[tokio::test]
async fn a_data_file_that_cannot_be_written_reports_why() {
    let dir = tempfile::tempdir().unwrap();
    let uri = table_uri(dir.path());
    let c = DeltaCommitter::new("s", &uri, HashMap::new(), 1 << 30);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("p", DataType::Utf8, true),
    ]));
    c.prepare(schema.clone(), &["p".to_string()]).await.unwrap();
    let rows = |id: i64| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![id])) as ArrayRef,
                Arc::new(StringArray::from(vec!["-"])),
            ],
        )
        .unwrap()
    };
    // A plain file where partition `x`'s directory has to go.
    std::fs::write(dir.path().join("p=x"), b"in the way").unwrap();
    let (hook, _) = recording_hook();
    let mut w = c.writer(0, 1, hook).await.unwrap();
    w.write(&[Some("y".into())], rows(1)).await.unwrap();
    w.write(&[Some("x".into())], rows(2)).await.unwrap();
    let err = w.finish().await.unwrap_err();
    assert!(err.message.contains("writing p=x/part-"), "{err:?}");
    assert!(
        err.message.to_lowercase().contains("not a directory"),
        "the cause, not a cleanup failure: {err:?}"
    );
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 3 <= b.len()
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap(), 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}
