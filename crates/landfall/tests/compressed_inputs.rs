//! Compressed inputs by extension (gz, bz2, xz, deflate, zst, lz4, snappy, zip), made by
//! independent encoders (tests/formats/compressed.py: Python's codecs and cramjam), plus a
//! two-member gzip, UTF-8 BOMs, and a truncated gzip: every row of every whole file lands once,
//! values as written (embedded delimiters and quotes included), checked by the independent
//! reader; the cut file is corrupt, never half-ingested.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Write the fixtures of `fmt` into `dir`; the expected ids of the whole files.
fn fixtures(dir: &Path, fmt: &str, first: u64) -> (Vec<u64>, Value) {
    let o = Command::new("python3")
        .arg(repo_root().join("tests/formats/compressed.py"))
        .arg(dir)
        .arg(fmt)
        .arg(first.to_string())
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "compressed.py failed:\n{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids = v["files"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|r| {
            let (first, rows) = (r[0].as_u64().unwrap(), r[1].as_u64().unwrap());
            first..first + rows
        })
        .collect();
    (ids, v)
}

fn check_values(v: &Value, ids: &[u64]) {
    for &id in ids.iter().step_by(37) {
        let row = row_by_id(v, id);
        assert_eq!(row["name"], format!("n{id}, \"q\""), "row {id}");
        let amount: f64 = row["amount"].as_str().unwrap().parse().unwrap();
        assert_eq!(amount, id as f64 / 4.0, "row {id}");
    }
}

#[test]
fn every_codec_json_and_csv_with_boms_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (json_ids, _) = fixtures(&root.join("json"), "json", 0);
    let (csv_ids, _) = fixtures(&root.join("csv"), "csv", 10_000);
    let cfg = config_in(
        root,
        r#"
[streams.json]
source = "{root}/json"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
ignore_corrupt_files = true
sink.path = "{root}/json_table"

# Inferred from compressed samples: a BOM must not rename the first column.
[streams.csv]
source = "{root}/csv"
format = "csv"
infer_column_types = true
ignore_corrupt_files = true
sink.path = "{root}/csv_table"
"#,
    );
    drain_stream(&cfg, "json");
    drain_stream(&cfg, "csv");
    let v = verify("delta", &root.join("json_table"), Some("json"));
    assert_exactly(&ids(&v, "id"), &json_ids);
    check_values(&v, &json_ids);
    let v = verify("delta", &root.join("csv_table"), Some("csv"));
    assert_exactly(&ids(&v, "id"), &csv_ids);
    check_values(&v, &csv_ids);
    // The truncated file is skipped as corrupt, with the codec's complaint.
    for stream in ["json", "csv"] {
        let rows = state_rows(&cfg, stream);
        let cut = rows
            .iter()
            .find(|r| r["path"].as_str().unwrap().contains("cut."))
            .expect("the cut file is in the state");
        assert_eq!(cut["state"], "skipped", "{cut}");
        let reason = cut["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("corrupt") && reason.contains("gzip stream"),
            "{reason}"
        );
    }
}

/// Without ignore_corrupt_files, a cut compressed file stops the stream with its path and
/// the codec's error, and nothing of it lands.
#[test]
fn a_cut_compressed_file_stops_the_stream_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (_, v) = fixtures(&root.join("in"), "json", 0);
    let cfg = config_in(
        root,
        r#"
[streams.s]
source = "{root}/in"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
path_glob_filter = "cut.*"
sink.path = "{root}/table"
"#,
    );
    assert!(v["corrupt"]["cut.json.gz"].is_string());
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert!(!o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("cut.json.gz") && out.contains("gzip stream"),
        "{out}"
    );
}

/// The same files through the streaming path (files decoded chunk by chunk, as large files
/// are): every codec's decoder fed piece by piece.
#[test]
fn compressed_files_stream_chunk_by_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (ids_expected, _) = fixtures(&root.join("in"), "csv", 0);
    let cfg = config_in(
        root,
        r#"
[streams.s]
source = "{root}/in"
format = "csv"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
ignore_corrupt_files = true
sink.path = "{root}/table"
"#,
    );
    let o = landfall_env(
        &["run", "--config", cfg.to_str().unwrap(), "--available-now"],
        &[("LANDFALL_STREAM_FILES_FROM", "64")],
    );
    // The knob was read: the streaming (ranged) path ran, not the whole-file one.
    assert!(
        text(&o).contains("LANDFALL_STREAM_FILES_FROM: files from this size are streamed"),
        "{}",
        text(&o)
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = verify("delta", &root.join("table"), Some("s"));
    assert_exactly(&ids(&v, "id"), &ids_expected);
    check_values(&v, &ids_expected);
}

/// `json.multi_line`: pretty-printed documents and arrays of documents (one gzipped, one with
/// nested values and separators inside strings), read with inference; a file cut inside its
/// array keeps the records before the cut and counts the cut one malformed.
#[test]
fn multi_line_json_documents_and_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("in");
    std::fs::create_dir_all(&src).unwrap();
    let doc = |id: u64| {
        format!(
            "{{\n  \"id\": {id},\n  \"name\": \"n{id}, ]}}\\\"\",\n  \"amount\": {},\n  \"nested\": {{\"k\": [1, 2]}}\n}}",
            id as f64 / 4.0
        )
    };
    let array = |ids: std::ops::Range<u64>| {
        format!("[\n{}\n]\n", ids.map(doc).collect::<Vec<_>>().join(",\n"))
    };
    std::fs::write(src.join("one.json"), doc(0)).unwrap();
    std::fs::write(src.join("many.json"), array(1..40)).unwrap();
    std::fs::write(src.join("more.json.gz"), gzip(array(40..60).as_bytes())).unwrap();
    let cut = array(60..70);
    let at = cut.find("\"id\": 65").unwrap();
    std::fs::write(src.join("cut.json"), &cut[..at]).unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.s]
source = "{root}/in"
format = "json"
json.multi_line = true
infer_column_types = true
sink.path = "{root}/table"
"#,
    );
    let o = drain_stream(&cfg, "s");
    let v = verify("delta", &root.join("table"), Some("s"));
    let want: Vec<u64> = (0..65).collect();
    assert_exactly(&ids(&v, "id"), &want);
    for id in [0u64, 7, 45, 64] {
        let row = row_by_id(&v, id);
        assert_eq!(row["name"], format!("n{id}, ]}}\""), "{row}");
        let amount: f64 = row["amount"].as_str().unwrap().parse().unwrap();
        assert_eq!(amount, id as f64 / 4.0);
    }
    assert_eq!(malformed_rows(&o), 1, "{}", text(&o));
}
