//! The `avro` format end to end into Delta: files written by fastavro (an independent writer)
//! with deflate and snappy blocks and a writer-schema change, ingested in two steps so the
//! second file's new fields evolve the table; every value is compared with what fastavro reads
//! back from the same files, through the independent reader.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;

#[test]
fn avro_files_with_a_writer_schema_change_land_as_fastavro_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let made = root.join("made");
    let o = Command::new("python3")
        .arg(repo_root().join("tests/formats/avro_files.py"))
        .arg(&made)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", text(&o));
    let want: Value = serde_json::from_slice(&o.stdout).unwrap();
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::copy(made.join("a.avro"), src.join("a.avro")).unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.av]
source = "{root}/src"
format = "avro"
sink.path = "{root}/table"
"#,
    );
    drain_stream(&cfg, "av");
    std::fs::copy(made.join("b.avro"), src.join("b.avro")).unwrap();
    drain_stream(&cfg, "av");

    let v = verify("delta", &root.join("table"), Some("av"));
    let schema = &v["schema"];
    assert_eq!(schema["id"], "long", "{schema}");
    assert_eq!(schema["score"], "double");
    assert_eq!(
        schema["city"], "string",
        "b.avro's new field became a column: {schema}"
    );
    let mut got = v["data"].as_array().unwrap().clone();
    got.sort_by_key(|r| r["id"].as_str().unwrap().parse::<u64>().unwrap());
    let want = want["rows"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g["id"], w["id"].to_string(), "{g} vs {w}");
        assert_eq!(g["name"], w["name"], "{g} vs {w}");
        match w.get("score").and_then(Value::as_f64) {
            Some(s) => assert_eq!(g["score"].as_str().unwrap().parse::<f64>().unwrap(), s),
            None => assert!(g["score"].is_null(), "{g}"),
        }
        match w.get("city") {
            Some(c) => assert_eq!(g["city"], *c, "{g}"),
            None => assert!(g["city"].is_null(), "{g}"),
        }
        if let Some(tags) = w.get("tags") {
            let g_tags: Value = serde_json::from_str(g["tags"].as_str().unwrap()).unwrap();
            assert_eq!(&g_tags, tags, "{g}");
        }
    }
    assert!(got[0]["_rescued_data"].is_null());
    let history = schema_history(&cfg, "av");
    assert_eq!(history[1]["reason"], "new columns: tags, city");
}
