//! A large JSON-lines file cut at newlines and decoded in parts on every core
//! (crates/landfall-engine/src/split.rs) against the same file decoded in one go. Forced here
//! with `LANDFALL_STREAM_FILES_FROM=1`, which also makes parts of 16 KiB, so a 460 KB file is
//! about 28 parts. The same rows, the same rescued values, the same malformed records at the same
//! lines and bytes, the same new column found in the last part (schema evolution reads the
//! batch again), one `FileDone` for the file; and a `fail_fast` error names the file's line.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;

const LINES: u64 = 6000;

/// The big file's lines: mostly good rows; every 997th line (from 500) not JSON, every
/// 1,499th (from 700) an id that is no BIGINT (rescued), and near the end one row with a
/// column no earlier row has. Returns the text and the 1-based lines that are not JSON.
fn big_file() -> (String, Vec<u64>) {
    let mut text = String::new();
    let mut bad = Vec::new();
    for i in 0..LINES {
        let line = if i % 997 == 500 {
            bad.push(i + 1);
            format!("not json {i}")
        } else if i % 1499 == 700 {
            format!("{{\"id\":\"x{i}\",\"seq\":{i},\"note\":\"misfit\"}}")
        } else if i == LINES - 3 {
            format!("{{\"id\":{i},\"seq\":{i},\"note\":\"late\",\"extra\":\"e{i}\"}}")
        } else {
            format!("{{\"id\":{i},\"seq\":{i},\"note\":\"row number {i:08} of the big file\"}}")
        };
        text.push_str(&line);
        text.push('\n');
    }
    (text, bad)
}

/// One stream over `root/src` (schema inferred from the first file, new columns added), its
/// bad records under `root/bad`; `env` for the process.
fn ingest(root: &Path, env: &[(&str, &str)]) -> String {
    let src = root.join("src");
    put_file(
        &src,
        "a-first.json",
        "{\"id\":-1,\"seq\":-1,\"note\":\"first\"}\n",
    );
    let cfg = Config::in_dir(root)
        .stream(
            Stream::local("s", src.as_path(), "json", root.join("table").as_path())
                .set("infer_column_types", true)
                .set("bad_records_path", root.join("bad").to_str().unwrap()),
        )
        .write();
    let run = |env: &[(&str, &str)]| text(&drain_env(&cfg, env));
    run(&[]);
    put_file(&src, "b-big.json", big_file().0);
    let out = run(env);
    let history = schema_history(&cfg, "s");
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[1]["reason"], "new columns: extra", "{history:?}");
    assert!(history[1]["file"].as_str().unwrap().ends_with("b-big.json"));
    out
}

/// The table's rows by `seq`, and every bad record (file, line, byte, text), as text.
fn outcome(root: &Path) -> (Vec<Value>, Vec<(u64, u64, String)>) {
    let v = verify("delta", &root.join("table"), Some("s"));
    let mut rows = v["data"].as_array().unwrap().clone();
    // Rescued values name their file, which lies under each run's own directory.
    let here = root.to_str().unwrap();
    for r in &mut rows {
        if let Some(s) = r["_rescued_data"].as_str() {
            r["_rescued_data"] = s.replace(here, "<root>").into();
        }
    }
    rows.sort_by_key(|r| r["seq"].as_str().unwrap().parse::<i64>().unwrap());
    let mut bad = Vec::new();
    for f in std::fs::read_dir(root.join("bad/s")).unwrap() {
        for l in std::fs::read_to_string(f.unwrap().path()).unwrap().lines() {
            let b: Value = serde_json::from_str(l).unwrap();
            bad.push((
                b["line"].as_u64().unwrap(),
                b["offset"].as_u64().unwrap(),
                b["record"].as_str().unwrap().to_string(),
            ));
        }
    }
    bad.sort();
    (rows, bad)
}

#[test]
fn a_file_decoded_in_parts_lands_as_the_file_decoded_in_one_go() {
    let split = tempfile::tempdir().unwrap();
    let whole = tempfile::tempdir().unwrap();
    let out = ingest(
        split.path(),
        &[
            ("LANDFALL_STREAM_FILES_FROM", "1"),
            ("LANDFALL_LOG", "info,landfall_engine::split=debug"),
        ],
    );
    // The split path ran, in many parts.
    let parts: u64 = out
        .lines()
        .find(|l| l.contains("decoded in parts") && l.contains("b-big.json"))
        .and_then(|l| l.split("parts=").nth(1))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no `decoded in parts` line for the big file:\n{out}"));
    assert!(parts >= 20, "{parts} parts");
    ingest(whole.path(), &[]);

    let (rows, bad) = outcome(split.path());
    let (rows_whole, bad_whole) = outcome(whole.path());
    assert_eq!(
        bad, bad_whole,
        "the same malformed records at the same places"
    );
    assert_eq!(rows, rows_whole, "the same rows");

    // And both are right, not merely equal.
    let (content, bad_lines) = big_file();
    let expected_bad: Vec<(u64, u64, String)> = content
        .lines()
        .scan(0u64, |offset, l| {
            let at = *offset;
            *offset += l.len() as u64 + 1;
            Some((at, l))
        })
        .enumerate()
        .filter(|(i, _)| bad_lines.contains(&(*i as u64 + 1)))
        .map(|(i, (at, l))| (i as u64 + 1, at, l.to_string()))
        .collect();
    assert_eq!(bad, expected_bad);
    assert_eq!(rows.len() as u64, 1 + LINES - bad_lines.len() as u64);
    let seqs: Vec<i64> = rows
        .iter()
        .map(|r| r["seq"].as_str().unwrap().parse().unwrap())
        .collect();
    let mut want: Vec<i64> = vec![-1];
    want.extend((0..LINES as i64).filter(|i| !bad_lines.contains(&(*i as u64 + 1))));
    assert_eq!(seqs, want, "every good row once");
    let late = rows.iter().find(|r| r["note"] == "late").unwrap();
    assert_eq!(late["extra"], format!("e{}", LINES - 3));
    let misfit = rows.iter().find(|r| r["seq"] == "700").unwrap();
    assert!(misfit["id"].is_null(), "{misfit}");
    assert!(
        misfit["_rescued_data"].as_str().unwrap().contains("x700"),
        "{misfit}"
    );
}

/// Under `fail_fast` a malformed line in a late part stops the stream with the file's line
/// and byte, as decoding in one go reports them.
#[test]
fn fail_fast_in_a_late_part_names_the_files_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    let mut body = String::new();
    for i in 0..4000u64 {
        if i == 3210 {
            body.push_str("{broken\n");
        } else {
            body.push_str(&format!(
                "{{\"id\":{i},\"note\":\"some text to fill the line\"}}\n"
            ));
        }
    }
    let offset = body.find("{broken").unwrap();
    put_file(&src, "a.json", &body);
    let cfg = Config::in_dir(root)
        .stream(
            Stream::local("s", src.as_path(), "json", root.join("table").as_path())
                .set("schema", "id BIGINT, note STRING")
                .set("mode", "fail_fast"),
        )
        .write();
    let o = landfall_env(
        &["run", "--config", cfg.to_str().unwrap(), "--available-now"],
        &[("LANDFALL_STREAM_FILES_FROM", "1")],
    );
    let all = text(&o);
    assert!(!o.status.success(), "{all}");
    assert!(
        all.contains(&format!("line 3211 (byte {offset})")),
        "the file's own line and byte:\n{all}"
    );
}

/// Records spread over several lines (pretty-printed; arrow-json reads them without
/// `multi_line`) are never cut between parts: every record lands once, as in one go. Among
/// them one record of 30,000 lines (about 190 KB, past four parts of 16 KiB without a record
/// boundary): the rest of the file from there is decoded in order, after the parts before it.
#[test]
fn records_spanning_lines_are_never_cut() {
    let mut body = String::new();
    let record = |i: u64| {
        format!("{{\n  \"id\": {i},\n  \"inner\": {{\n    \"note\": \"record {i}\"\n  }}\n}}\n")
    };
    for i in 0..2000u64 {
        body.push_str(&record(i));
    }
    body.push_str("{\n  \"id\": 2000,\n  \"list\": [\n");
    for i in 0..30_000 {
        body.push_str(&format!("    {i},\n"));
    }
    body.push_str("    0\n  ]\n}\n");
    for i in 2001..3000u64 {
        body.push_str(&record(i));
    }
    let mut seen = Vec::new();
    let split = [
        ("LANDFALL_STREAM_FILES_FROM", "1"),
        ("LANDFALL_LOG", "info,landfall_engine::split=debug"),
    ];
    for env in [&split[..], &[][..]] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        put_file(&root.join("src"), "a.json", &body);
        let cfg = Config::in_dir(root)
            .stream(
                Stream::local(
                    "s",
                    root.join("src").as_path(),
                    "json",
                    root.join("table").as_path(),
                )
                .set("schema", "id BIGINT, inner STRUCT<note: STRING>"),
            )
            .write();
        let o = drain_env(&cfg, env);
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("this run:  1 file(s), 3000 row(s)"),
            "{}",
            text(&o)
        );
        assert_eq!(malformed_rows(&o), 0, "{}", text(&o));
        assert_eq!(
            text(&o).contains("decoded in parts"),
            !env.is_empty(),
            "split only when forced:\n{}",
            text(&o)
        );
        let v = verify("delta", &root.join("table"), Some("s"));
        assert_exactly(&ids(&v, "id"), &(0..3000).collect::<Vec<_>>());
        seen.push(ids(&v, "id"));
    }
    assert_eq!(seen[0], seen[1]);
}

/// A large text file (the `text` format, default separators) cut at newlines and decoded in
/// parts lands as in one go: every line once, in order, with `\r\n` and lone `\r` endings,
/// empty lines, a last line without a separator, and a line that is not UTF-8 (replaced and
/// counted malformed, in either run).
#[test]
fn a_text_file_decoded_in_parts_lands_as_in_one_go() {
    let mut body: Vec<u8> = Vec::new();
    for i in 0..5000u64 {
        match i % 7 {
            0 => body.extend_from_slice(format!("line {i} crlf\r\n").as_bytes()),
            1 => body.extend_from_slice(format!("line {i} cr\rline {i} after cr\n").as_bytes()),
            2 => body.extend_from_slice(b"\n"),
            _ => body.extend_from_slice(format!("line {i} with some text to fill it\n").as_bytes()),
        }
        if i == 2500 {
            body.extend_from_slice(b"bad \xff byte\n");
        }
    }
    body.extend_from_slice(b"last line without a separator");
    let run = |env: &[(&str, &str)]| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let src = root.join("src");
        put_file(&src, "big.txt", &body);
        let cfg = Config::in_dir(root)
            .stream(Stream::local(
                "t",
                src.as_path(),
                "text",
                root.join("table").as_path(),
            ))
            .write();
        let mut env = env.to_vec();
        env.push(("LANDFALL_LOG", "info,landfall_engine::split=debug"));
        let out = text(&drain_env(&cfg, &env));
        let v = verify("delta", &root.join("table"), Some("t"));
        let values: Vec<String> = v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["value"].as_str().unwrap().to_string())
            .collect();
        (out, values, v["rows"].as_u64().unwrap())
    };
    let (out, split, rows) = run(&[("LANDFALL_STREAM_FILES_FROM", "1")]);
    assert!(
        out.lines()
            .any(|l| l.contains("decoded in parts") && l.contains("big.txt")),
        "the split path ran:\n{out}"
    );
    let (_, whole, whole_rows) = run(&[]);
    assert_eq!(rows, whole_rows);
    let mut a = split.clone();
    let mut b = whole.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b, "the same lines");
    // 5000 records: 715 of them two lines (cr), one more bad line, the last line.
    assert_eq!(rows, 5000 + 715 + 1 + 1);
    assert!(split.iter().any(|v| v == "last line without a separator"));
    assert!(split.iter().any(|v| v == "bad \u{fffd} byte"));
}
