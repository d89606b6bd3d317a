//! Every file a stream sees has a row in `landfall state`, and every value keeps its meaning in
//! the table: a zero-byte file is recorded (skipped, reason `empty`) and a later version of it
//! with content is ingested (a writer that creates the object first and fills it after); a
//! timestamp partition value is written with its UTC zone, so a reader in any session time
//! zone reads the same instant.

mod common;
use common::*;
use serde_json::Value;

#[test]
fn a_zero_byte_file_is_recorded_and_its_later_content_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let landing = root.join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(landing.join("placeholder.json"), b"").unwrap();
    write_rows(&landing, "a.json", 0..3);
    let cfg = config_in(
        root,
        r#"
[streams.ev]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
sink.path = "{root}/table"
"#,
    );
    drain(&cfg);
    let rows = state_rows(&cfg, "ev");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let empty = state_of(&rows, "placeholder.json");
    assert_eq!(empty["state"], "skipped", "{empty}");
    assert!(
        empty["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("empty")),
        "{empty}"
    );
    assert_eq!(state_of(&rows, "a.json")["state"], "committed");
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("ev")), "id"),
        &[0, 1, 2],
    );

    // A second run does not record it again; once it has content it is a new file.
    drain(&cfg);
    assert_eq!(state_rows(&cfg, "ev").len(), 2);
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_rows(&landing, "placeholder.json", 10..13);
    drain(&cfg);
    let rows = state_rows(&cfg, "ev");
    assert_eq!(
        state_of(&rows, "placeholder.json")["state"],
        "committed",
        "{rows:?}"
    );
    assert_exactly(
        &ids(&verify("delta", &root.join("table"), Some("ev")), "id"),
        &[0, 1, 2, 10, 11, 12],
    );
}

/// A zero-byte Parquet file is no Parquet file, but it is not corrupt either: recorded as
/// `empty`, it does not stop a stream that does not ignore corrupt files.
#[test]
fn a_zero_byte_parquet_file_does_not_stop_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let landing = root.join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(landing.join("empty.parquet"), b"").unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.pq]
source = "{root}/landing"
format = "parquet"
schema = "id BIGINT"
ignore_corrupt_files = false
sink.path = "{root}/table"
"#,
    );
    drain(&cfg);
    let rows = state_rows(&cfg, "pq");
    let empty = state_of(&rows, "empty.parquet");
    assert_eq!(empty["state"], "skipped", "{empty}");
    assert!(
        empty["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("empty")),
        "{empty}"
    );
}

/// The `partitionValues` of the adds in the Delta log.
fn partition_values(table: &std::path::Path, column: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(table.join("_delta_log")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            for line in std::fs::read_to_string(&p).unwrap().lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                if let Some(s) = v["add"]["partitionValues"][column].as_str() {
                    out.push(s.to_string());
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn timestamp_partition_values_carry_their_utc_zone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let landing = root.join("landing");
    std::fs::create_dir_all(&landing).unwrap();
    std::fs::write(
        landing.join("a.json"),
        concat!(
            "{\"id\":1,\"ts\":\"2024-01-02T03:04:05Z\",\"wall\":\"2024-01-02T03:04:05\"}\n",
            "{\"id\":2,\"ts\":\"2024-01-02T03:04:05.123456+05:30\",\"wall\":\"2024-01-02T03:04:05.5\"}\n",
        ),
    )
    .unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.ev]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, ts TIMESTAMP, wall TIMESTAMP_NTZ"
sink.path = "{root}/table"
sink.partition_by = ["ts", "wall"]
"#,
    );
    drain(&cfg);
    let table = root.join("table");
    // TIMESTAMP: an instant, in the protocol's ISO 8601 form adjusted to UTC. TIMESTAMP_NTZ:
    // its wall-clock value, zone-less.
    assert_eq!(
        partition_values(&table, "ts"),
        ["2024-01-01T21:34:05.123456Z", "2024-01-02T03:04:05Z"]
    );
    assert_eq!(
        partition_values(&table, "wall"),
        ["2024-01-02 03:04:05", "2024-01-02 03:04:05.500000"]
    );
    // Both readers (the log replayed by hand, and the deltalake package) agree on the values.
    let v = verify("delta", &table, Some("ev"));
    let mut ts: Vec<(String, String)> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["ts"].as_str().unwrap().to_string(),
                r["wall"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    ts.sort();
    assert_eq!(
        ts,
        [
            (
                "2024-01-01T21:34:05.123456".to_string(),
                "2024-01-02T03:04:05.500000".to_string()
            ),
            (
                "2024-01-02T03:04:05".to_string(),
                "2024-01-02T03:04:05".to_string()
            )
        ]
    );
}
