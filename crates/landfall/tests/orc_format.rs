//! The `orc` format end to end into Delta: files written by pyarrow (the ORC C++ library, an
//! independent writer) with zstd, snappy and no compression, every type family (decimal, date,
//! timestamps with and without a zone, with nanosecond digits and outside the years a
//! nanosecond timestamp holds, list, struct, map), a second file whose columns come in another
//! order with one gone and one new (the table evolves), a file of 20 stripes read through the
//! ranged path, and a truncated file and one orc-rust cannot decode skipped as corrupt. Every value is compared with what
//! pyarrow reads back from the same files, through the independent reader.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;

#[test]
fn orc_files_land_as_pyarrow_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let made = root.join("made");
    let o = Command::new("python3")
        .arg(repo_root().join("tests/formats/orc_files.py"))
        .arg(&made)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", text(&o));
    let want: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(want["stripes"]["c"], 20, "c.orc has many stripes");
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let copy = |name: &str| std::fs::copy(made.join(name), src.join(name)).unwrap();
    copy("a.orc");
    copy("d.orc");
    copy("e.orc");
    copy("f.orc");
    let cfg = config_in(
        root,
        r#"
[streams.oc]
source = "{root}/src"
format = "orc"
ignore_corrupt_files = true
sink.path = "{root}/table"
"#,
    );
    drain_stream(&cfg, "oc");
    let d = state_of(&state_rows(&cfg, "oc"), "d.orc").clone();
    assert_eq!(d["state"], "skipped", "{d}");
    assert!(
        d["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("corrupt") && r.contains("ORC")),
        "{d}"
    );
    // orc-rust 0.9 cannot decode the C++ writer's negative nanoseconds before 1970: the file is
    // corrupt (a caught overflow), never ingested with wrong values.
    let e = state_of(&state_rows(&cfg, "oc"), "e.orc").clone();
    assert_eq!(e["state"], "skipped", "{e}");
    assert!(
        e["reason"].as_str().is_some_and(|r| r.contains("overflow")),
        "{e}"
    );
    // With nanosecond digits orc-rust reads it decades late without an error: the file's own
    // statistics give it away.
    let f = state_of(&state_rows(&cfg, "oc"), "f.orc").clone();
    assert_eq!(f["state"], "skipped", "{f}");
    assert!(
        f["reason"]
            .as_str()
            .is_some_and(|r| r.contains("statistics")),
        "{f}"
    );
    copy("b.orc");
    drain_stream(&cfg, "oc");
    // c.orc is read stripe by stripe through pinned ranged reads.
    copy("c.orc");
    let o = landfall_env(
        &["run", "--config", cfg.to_str().unwrap(), "--available-now"],
        &[("LANDFALL_STREAM_FILES_FROM", "1")],
    );
    // The knob was read: the streaming (ranged) path ran, not the whole-file one.
    assert!(
        text(&o).contains("LANDFALL_STREAM_FILES_FROM: files from this size are streamed"),
        "{}",
        text(&o)
    );
    assert!(o.status.success(), "{}", text(&o));

    let v = verify("delta", &root.join("table"), Some("oc"));
    let schema = &v["schema"];
    for (col, ty) in [
        ("id", "long"),
        ("name", "string"),
        ("score", "double"),
        ("amount", "decimal(10,2)"),
        ("day", "date"),
        ("ts", "timestamp"),
        ("ts_utc", "timestamp"),
        ("ts_ns", "timestamp"),
        ("ts_far", "timestamp"),
        ("extra", "string"),
    ] {
        assert_eq!(schema[col], ty, "{col}: {schema}");
    }
    let mut got = v["data"].as_array().unwrap().clone();
    got.sort_by_key(|r| r["id"].as_str().unwrap().parse::<u64>().unwrap());
    let mut expected: Vec<Value> = Vec::new();
    for f in ["a", "b", "c"] {
        expected.extend(want[f].as_array().unwrap().iter().cloned());
    }
    assert_eq!(got.len(), expected.len());
    let columns: Vec<&String> = schema.as_object().unwrap().keys().collect();
    for (g, w) in got.iter().zip(&expected) {
        for col in &columns {
            let want = w.get(col.as_str()).cloned().unwrap_or(Value::Null);
            let got = g[col.as_str()].clone();
            let same = match (&got, &want) {
                // Nested values: the same JSON, whatever the key order or spacing.
                (Value::String(a), Value::String(b)) if a.starts_with(['[', '{']) => {
                    serde_json::from_str::<Value>(a).ok() == serde_json::from_str::<Value>(b).ok()
                }
                _ => got == want,
            };
            assert!(same, "column {col}: {got} vs {want}\nrow {g}\nwant {w}");
        }
    }
    let history = schema_history(&cfg, "oc");
    assert_eq!(history[1]["reason"], "new columns: extra", "{history:?}");
}
