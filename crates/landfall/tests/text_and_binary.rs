//! The `text` and `binary_file` formats end to end into Delta, checked by the independent
//! reader: lines (any newline, a custom separator, a BOM, gzip), whole files, and binary files
//! with their metadata; a binary file over the size cap is skipped as `too_large`.

mod common;
use common::*;
use serde_json::Value;

fn column(v: &Value, name: &str) -> Vec<String> {
    let mut out: Vec<String> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[name].as_str().unwrap_or("<null>").to_string())
        .collect();
    out.sort();
    out
}

#[test]
fn text_lines_whole_files_and_custom_separators() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let lines = root.join("lines");
    std::fs::create_dir_all(&lines).unwrap();
    std::fs::write(lines.join("a.txt"), "one\r\ntwo\n\nfour").unwrap();
    std::fs::write(lines.join("b.txt.gz"), gzip(b"five\nsix\n")).unwrap();
    std::fs::write(lines.join("c.txt"), b"\xef\xbb\xbfseven\rnine\n").unwrap();
    let sep = root.join("sep");
    std::fs::create_dir_all(&sep).unwrap();
    std::fs::write(sep.join("s.txt"), "x|y||z\n|").unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.lines]
source = "{root}/lines"
format = "text"
sink.path = "{root}/lines_table"

[streams.whole]
source = "{root}/lines"
format = "text"
text.whole_text = true
sink.path = "{root}/whole_table"

[streams.sep]
source = "{root}/sep"
format = "text"
text.line_sep = "||"
sink.path = "{root}/sep_table"
"#,
    );
    for s in ["lines", "whole", "sep"] {
        drain_stream(&cfg, s);
    }
    let v = verify("delta", &root.join("lines_table"), Some("lines"));
    let mut want = vec!["one", "two", "", "four", "five", "six", "seven", "nine"];
    want.sort();
    assert_eq!(column(&v, "value"), want);
    let v = verify("delta", &root.join("whole_table"), Some("whole"));
    let mut want = vec!["one\r\ntwo\n\nfour", "five\nsix\n", "seven\rnine\n"];
    want.sort();
    assert_eq!(column(&v, "value"), want);
    let v = verify("delta", &root.join("sep_table"), Some("sep"));
    let mut want = vec!["x|y", "z\n|"];
    want.sort();
    assert_eq!(column(&v, "value"), want);
}

#[test]
fn binary_files_with_metadata_and_a_size_cap() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("bin");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("hello.bin"), b"hello").unwrap();
    // Not decompressed: a .gz file's bytes are its content, as in Spark.
    let gz = gzip(b"zipped");
    std::fs::write(src.join("z.gz"), &gz).unwrap();
    std::fs::write(src.join("big.bin"), vec![7u8; 5000]).unwrap();
    let cfg = config_in(
        root,
        r#"
[streams.bin]
source = "{root}/bin"
format = "binary_file"
binary_file.max_file_size = "4k"
sink.path = "{root}/table"
"#,
    );
    drain_stream(&cfg, "bin");
    let v = verify("delta", &root.join("table"), Some("bin"));
    let rows = v["data"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v}");
    let hello = rows
        .iter()
        .find(|r| r["path"].as_str().unwrap().ends_with("hello.bin"))
        .unwrap();
    assert_eq!(hello["length"], "5");
    assert_eq!(hello["content"], "b'hello'");
    assert!(
        hello["modification_time"]
            .as_str()
            .unwrap()
            .starts_with("20")
    );
    let z = rows
        .iter()
        .find(|r| r["path"].as_str().unwrap().ends_with("z.gz"))
        .unwrap();
    assert_eq!(z["length"], gz.len().to_string());
    let state = state_rows(&cfg, "bin");
    let big = state_of(&state, "big.bin");
    assert_eq!(big["state"], "skipped", "{big}");
    assert!(
        big["reason"].as_str().unwrap().starts_with("too_large"),
        "{big}"
    );
}

/// `mode = "fail_fast"`: a file with a malformed record is corrupt (it stops the stream, or is
/// skipped with ignore_corrupt_files, naming the record's line); `permissive` ingests the
/// file's good records and counts the bad one.
#[test]
fn fail_fast_mode_makes_a_file_with_a_malformed_record_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("in");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("good.json"), "{\"id\":1}\n{\"id\":2}\n").unwrap();
    std::fs::write(
        src.join("bad.json"),
        "{\"id\":3}\n{\"id\":4,oops}\n{\"id\":5}\n",
    )
    .unwrap();
    let cfg = |mode: &str, skip: bool, table: &str| {
        config_in(
            root,
            &format!(
                r#"
[streams.s]
source = "{{root}}/in"
format = "json"
schema = "id BIGINT"
mode = "{mode}"
ignore_corrupt_files = {skip}
state_dir = "{{root}}/state-{table}"
sink.path = "{{root}}/{table}"
"#
            ),
        )
    };
    let o = landfall(&[
        "run",
        "--config",
        cfg("fail_fast", false, "t1").to_str().unwrap(),
        "--available-now",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("bad.json")
            && text(&o).contains("malformed record in fail_fast mode: line 2"),
        "{}",
        text(&o)
    );
    let skip = cfg("fail_fast", true, "t2");
    drain_stream(&skip, "s");
    let v = verify("delta", &root.join("t2"), Some("s"));
    assert_exactly(&ids(&v, "id"), &[1, 2]);
    let rows = state_rows(&skip, "s");
    assert_eq!(state_of(&rows, "bad.json")["state"], "skipped");
    let permissive = cfg("permissive", false, "t3");
    let o = drain_stream(&permissive, "s");
    let v = verify("delta", &root.join("t3"), Some("s"));
    assert_exactly(&ids(&v, "id"), &[1, 2, 3, 5]);
    assert_eq!(malformed_rows(&o), 1, "{}", text(&o));
}

/// `metadata_columns`: a `_metadata` struct with the file's path, name, size, modification
/// time and block, the same on every row of a file; changing the list after the first start
/// is refused with the reason (schema evolution is not built).
#[test]
fn file_metadata_columns() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_rows(&root.join("in"), "a.json", 0..3);
    write_rows(&root.join("in/sub"), "b.json", 3..5);
    let cfg = |cols: &str| {
        config_in(
            root,
            &format!(
                r#"
[streams.s]
source = "{{root}}/in"
format = "json"
schema = "id BIGINT, name STRING"
metadata_columns = [{cols}]
sink.path = "{{root}}/table"
"#
            ),
        )
    };
    let all = r#""file_path", "file_name", "file_size", "file_modification_time", "file_block_start", "file_block_length""#;
    drain_stream(&cfg(all), "s");
    let v = verify("delta", &root.join("table"), Some("s"));
    let size_b = std::fs::metadata(root.join("in/sub/b.json")).unwrap().len();
    for id in [3u64, 4] {
        let row = row_by_id(&v, id);
        let m: Value = serde_json::from_str(row["_metadata"].as_str().unwrap()).unwrap();
        assert!(
            m["file_path"].as_str().unwrap().ends_with("in/sub/b.json"),
            "{m}"
        );
        assert_eq!(m["file_name"], "b.json");
        assert_eq!(m["file_size"].as_u64(), Some(size_b), "{m}");
        assert_eq!(m["file_block_start"].as_u64(), Some(0));
        assert_eq!(m["file_block_length"].as_u64(), Some(size_b));
        assert!(
            m["file_modification_time"]
                .as_str()
                .unwrap()
                .starts_with("20"),
            "{m}"
        );
    }
    let row = row_by_id(&v, 0);
    let m: Value = serde_json::from_str(row["_metadata"].as_str().unwrap()).unwrap();
    assert_eq!(m["file_name"], "a.json");
    // Another list after the first start: refused, with the way out.
    let o = landfall(&[
        "run",
        "--config",
        cfg(r#""file_name""#).to_str().unwrap(),
        "--available-now",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("metadata_columns (file_name) differ from the stream's schema"),
        "{}",
        text(&o)
    );
}
