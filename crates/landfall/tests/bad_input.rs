//! Bad input never crashes the daemon or another stream: a corrupt file fails its own stream's
//! batch with the path in the error; an invalid config exits non-zero naming the key.

mod common;
use common::*;

#[test]
fn corrupt_file_fails_only_its_stream_and_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_rows(&root.join("good"), "a.json", 0..10);
    write_parquet_rows(&root.join("bad"), "a.parquet", 0..3);
    write_corrupt_parquet(&root.join("bad"), "broken.parquet");
    let cfg = config_in(
        root,
        r#"
[streams.good]
source = "{root}/good"
format = "json"
schema = "id BIGINT, name STRING"
sink.path = "{root}/good_table"

[streams.bad]
source = "{root}/bad"
format = "parquet"
schema = "id BIGINT, name STRING"
sink.path = "{root}/bad_table"
"#,
    );
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a failed stream makes --available-now exit 1:\n{}",
        text(&o)
    );
    let out = text(&o);
    assert!(out.contains("stream bad: FAILED"), "{out}");
    assert!(
        out.contains(&format!(
            "{}: corrupt: ",
            root.join("bad/broken.parquet").display()
        )),
        "the error names the file as the user wrote it: {out}"
    );
    assert!(out.contains("stream good: ok"), "{out}");
    assert_exactly(
        &ids(
            &verify("delta", &root.join("good_table"), Some("good")),
            "id",
        ),
        &(0..10).collect::<Vec<_>>(),
    );
    // Nothing of the failed batch is visible, and its staged files were removed.
    let bad_files: Vec<_> = std::fs::read_dir(root.join("bad_table"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "parquet"))
        .collect();
    assert!(
        bad_files.is_empty(),
        "no orphaned data files: {bad_files:?}"
    );

    // Once the file is replaced by a good one, the batch runs again without the listed (corrupt)
    // version, which is recorded changed_after_listing; the next listing ingests the new one.
    write_parquet_rows(&root.join("bad"), "broken.parquet", 100..101);
    drain(&cfg);
    drain(&cfg);
    assert_exactly(
        &ids(&verify("delta", &root.join("bad_table"), Some("bad")), "id"),
        &[0, 1, 2, 100],
    );
}

#[test]
fn invalid_config_names_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = write_config(
        root,
        r#"
[streams.a]
source = "ftp://x/y"
format = "orc"
bad_records_path = "/tmp/bad"
max_files_per_trigger = 0
max_file_age = "3d"
trigger.processing_time = "10 parsecs"
sink.path = "/tmp/t"
"#,
    );
    let o = landfall(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    for expected in [
        "streams.a.source: unsupported scheme `ftp://`",
        "streams.a.bad_records_path: format `orc` has no malformed records to write (json, csv, xml)",
        "streams.a.max_files_per_trigger: must be at least 1",
        "streams.a.max_file_age: `3d` is shorter than the minimum of 14 days",
        "streams.a.trigger.processing_time: `10 parsecs` is not a duration",
    ] {
        assert!(err.contains(expected), "missing `{expected}` in:\n{err}");
    }

    let cfg = write_config(
        root,
        "[streams.a]\nsource = \"/x\"\nformat = \"json\"\nsink.path = \"/t\"\nmax_file_per_trigger = 3\n",
    );
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown field `max_file_per_trigger`")
            && err.contains("(did you mean `max_files_per_trigger`?)"),
        "{err}"
    );

    let cfg = write_config(
        root,
        "[streams.a]\nsource = \"${LANDFALL_TEST_SURELY_UNSET}\"\n",
    );
    let o = landfall(&["check", "--config", cfg.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("line 2: environment variable `LANDFALL_TEST_SURELY_UNSET` is not set")
    );
}
