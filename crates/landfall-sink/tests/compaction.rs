//! Compaction against real local Delta tables, read back by an independent reader (deltalake
//! replays the log; the parquet crate reads the files it names): every row once, the small
//! files replaced per partition in one `dataChange = false` commit, files of an older schema
//! given nulls, appends racing the compaction, and a stream committing on after it.

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use landfall_core::{Committer, StagedFile};
use landfall_sink::DeltaCommitter;
use landfall_sink::delta::compact::CompactOptions;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

fn uri(dir: &Path) -> String {
    url::Url::from_directory_path(dir).unwrap().to_string()
}

fn committer(stream: &str, dir: &Path) -> DeltaCommitter {
    DeltaCommitter::new(stream, &uri(dir), HashMap::new(), 64 << 20)
}

fn schema(with_note: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("id", DataType::Int64, true),
        Field::new("part", DataType::Utf8, true),
    ];
    if with_note {
        fields.push(Field::new("note", DataType::Utf8, true));
    }
    Arc::new(Schema::new(fields))
}

fn batch(ids: std::ops::Range<i64>, part: &str, with_note: bool) -> RecordBatch {
    let n = ids.clone().count();
    let mut cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(Int64Array::from_iter_values(ids.clone())),
        Arc::new(StringArray::from(vec![part; n])),
    ];
    if with_note {
        cols.push(Arc::new(StringArray::from_iter_values(
            ids.map(|i| format!("note {i}")),
        )));
    }
    RecordBatch::try_new(schema(with_note), cols).unwrap()
}

async fn append(c: &DeltaCommitter, batch_id: u64, b: RecordBatch, part: &str) {
    let mut w = c
        .writer(batch_id, 1, Arc::new(|_: &str| Ok(())))
        .await
        .unwrap();
    w.write(&[Some(part.to_string())], b).await.unwrap();
    let files: Vec<StagedFile> = w.finish().await.unwrap();
    for _ in 0..20 {
        match c.commit(batch_id, &files).await {
            Ok(_) => return,
            Err(e) if e.retryable => continue,
            Err(e) => panic!("{e:?}"),
        }
    }
    panic!("batch {batch_id} never committed");
}

/// The table as an independent reader sees it: (live files, every row's id, part and note).
async fn read(dir: &Path) -> (usize, Vec<(i64, String, Option<String>)>) {
    let mut table = deltalake::DeltaTableBuilder::from_url(url::Url::parse(&uri(dir)).unwrap())
        .unwrap()
        .build()
        .unwrap();
    table.load().await.unwrap();
    let uris: Vec<String> = table.get_file_uris().unwrap().collect();
    let mut rows = Vec::new();
    for u in &uris {
        let path = url::Url::parse(u)
            .map(|u| u.to_file_path().unwrap())
            .unwrap_or_else(|_| std::path::PathBuf::from(u));
        let part = path
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .trim_start_matches("part=")
            .to_string();
        let file = std::fs::File::open(&path).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        for b in reader {
            let b = b.unwrap();
            let ids = b
                .column_by_name("id")
                .unwrap()
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .clone();
            let notes = b
                .column_by_name("note")
                .map(|c| c.as_any().downcast_ref::<StringArray>().unwrap().clone());
            for i in 0..b.num_rows() {
                let note = notes
                    .as_ref()
                    .and_then(|n| (!n.is_null(i)).then(|| n.value(i).to_string()));
                rows.push((ids.value(i), part.clone(), note));
            }
        }
    }
    rows.sort();
    (uris.len(), rows)
}

fn log_actions(dir: &Path, version: i64) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join(format!("_delta_log/{version:020}.json"))).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn small_files_become_one_per_partition_with_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let c = committer("s", dir.path());
    c.prepare(schema(false), &["part".to_string()])
        .await
        .unwrap();
    for b in 0..6u64 {
        let part = if b % 2 == 0 { "a" } else { "b" };
        let start = b as i64 * 10;
        append(&c, b, batch(start..start + 10, part, false), part).await;
    }
    // The table gains a column; the next files have it.
    c.evolve(schema(true), &["part".to_string()]).await.unwrap();
    for b in 6..8u64 {
        let part = if b % 2 == 0 { "a" } else { "b" };
        let start = b as i64 * 10;
        append(&c, b, batch(start..start + 10, part, true), part).await;
    }
    let (files_before, rows_before) = read(dir.path()).await;
    assert_eq!(files_before, 8);
    assert_eq!(rows_before.len(), 80);

    let opts = CompactOptions::for_target(64 << 20);
    assert_eq!(c.small_files(&opts).await.unwrap(), (8, 8));
    let report = c.compact(&opts).await.unwrap();
    assert_eq!(report.files_removed, 8, "{report:?}");
    assert_eq!(report.files_added, 2, "{report:?}");
    assert_eq!(report.rows, 80, "{report:?}");
    assert!(!report.dropped);
    let version = report.version.unwrap();

    let (files_after, rows_after) = read(dir.path()).await;
    assert_eq!(files_after, 2);
    // The same rows; the older files' rows have no note.
    let strip = |rows: &[(i64, String, Option<String>)]| {
        rows.iter()
            .map(|(i, p, n)| (*i, p.clone(), n.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&rows_after), strip(&rows_before));
    assert!(rows_after.iter().any(|(i, _, n)| *i < 60 && n.is_none()));
    assert!(
        rows_after
            .iter()
            .any(|(i, _, n)| *i >= 60 && n.as_deref() == Some(&format!("note {i}")[..]))
    );
    // One commit: 8 removes and 2 adds, none a data change, with OPTIMIZE's operation.
    let actions = log_actions(dir.path(), version);
    let of = |kind: &str| -> Vec<&serde_json::Value> {
        actions.iter().filter_map(|a| a.get(kind)).collect()
    };
    assert_eq!(of("remove").len(), 8);
    assert_eq!(of("add").len(), 2);
    for a in of("remove").into_iter().chain(of("add")) {
        assert_eq!(a["dataChange"], false, "{a}");
    }
    assert_eq!(of("commitInfo")[0]["operation"], "OPTIMIZE");
    assert!(
        of("txn").is_empty(),
        "a compaction is no batch of the stream"
    );

    // The stream goes on: its next batch lands after the compaction, once.
    append(&c, 8, batch(80..90, "a", true), "a").await;
    let (files, rows) = read(dir.path()).await;
    assert_eq!(files, 3);
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..90).collect::<Vec<_>>()
    );
    // Nothing more to compact in `b` (one file); `a` has two small files now.
    let again = c.compact(&opts).await.unwrap();
    assert_eq!(
        (again.files_removed, again.files_added),
        (2, 1),
        "{again:?}"
    );
    // The files compacted away are still referenced by older versions: never deleted as
    // orphans.
    let removed: Vec<String> = of("remove")
        .iter()
        .map(|r| {
            percent_encoding::percent_decode_str(r["path"].as_str().unwrap())
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(c.remove_files(&removed).await.unwrap(), 0);
    for p in &removed {
        assert!(dir.path().join(p).exists(), "{p}");
    }
}

/// A compaction racing a stream's appends: both go through, every row once, the appends'
/// batches each committed once.
#[tokio::test(flavor = "multi_thread")]
async fn appends_racing_a_compaction_lose_and_double_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = Arc::new(committer("s", dir.path()));
    c.prepare(schema(false), &["part".to_string()])
        .await
        .unwrap();
    for b in 0..20u64 {
        append(
            &c,
            b,
            batch(b as i64 * 10..b as i64 * 10 + 10, "a", false),
            "a",
        )
        .await;
    }
    let writer = {
        let c = c.clone();
        tokio::spawn(async move {
            for b in 20..40u64 {
                append(
                    &c,
                    b,
                    batch(b as i64 * 10..b as i64 * 10 + 10, "a", false),
                    "a",
                )
                .await;
            }
        })
    };
    let compactor = {
        let path = dir.path().to_path_buf();
        tokio::spawn(async move {
            let other = committer("compactor", &path);
            let mut reports = Vec::new();
            for _ in 0..3 {
                reports.push(
                    other
                        .compact(&CompactOptions::for_target(64 << 20))
                        .await
                        .unwrap(),
                );
            }
            reports
        })
    };
    writer.await.unwrap();
    let reports = compactor.await.unwrap();
    assert!(
        reports.iter().any(|r| r.version.is_some()),
        "no compaction committed: {reports:?}"
    );
    let (_, rows) = read(dir.path()).await;
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..400).collect::<Vec<_>>()
    );
    assert_eq!(c.last_committed().await.unwrap(), Some(39));
}
