//! `[streams.<name>.sink.compaction]` and `[streams.<name>.sink.vacuum]`: defaults and each
//! rule's message.

use landfall_config::{ConfigError, load_str};
use std::time::Duration;

fn errors(toml: &str) -> Vec<String> {
    match load_str(toml, "test.toml") {
        Err(ConfigError::Invalid(errs)) => errs.iter().map(|e| e.to_string()).collect(),
        Err(other) => vec![other.to_string()],
        Ok(_) => vec![],
    }
}

fn stream(sink: &str) -> String {
    format!(
        "[streams.a]\nsource = \"/in\"\nformat = \"json\"\n[streams.a.sink]\npath = \"/out\"\n{sink}\n"
    )
}

#[test]
fn off_by_default_and_databricks_defaults_when_on() {
    let cfg = load_str(&stream(""), "t").unwrap();
    assert_eq!(cfg.streams[0].sink.compaction, None);
    assert_eq!(cfg.streams[0].sink.vacuum_every, None);
    let cfg = load_str(&stream("compaction.auto = true\nvacuum.auto = true"), "t").unwrap();
    let c = cfg.streams[0].sink.compaction.unwrap();
    assert_eq!(c.min_files, 50);
    assert_eq!(c.check_interval, Duration::from_secs(300));
    assert_eq!(
        cfg.streams[0].sink.vacuum_every,
        Some(Duration::from_secs(24 * 3600))
    );
    let cfg = load_str(
        &stream("compaction = { auto = true, min_files = 3, check_interval = \"10s\" }\nvacuum = { auto = true, interval = \"6h\" }"),
        "t",
    )
    .unwrap();
    let c = cfg.streams[0].sink.compaction.unwrap();
    assert_eq!(
        (c.min_files, c.check_interval),
        (3, Duration::from_secs(10))
    );
    assert_eq!(
        cfg.streams[0].sink.vacuum_every,
        Some(Duration::from_secs(6 * 3600))
    );
}

#[test]
fn each_rule_names_its_reason() {
    assert_eq!(
        errors(&stream("compaction = { auto = true, min_files = 1 }")),
        [
            "streams.a.sink.compaction.min_files: must be at least 2: a compaction rewrites two small files or more into one"
        ]
    );
    assert_eq!(
        errors(&stream(
            "format = \"parquet\"\ncompaction.auto = true\nvacuum.auto = true"
        )),
        [
            "streams.a.sink.compaction.auto: compaction is for Delta tables; a Parquet directory has no log to swap files in",
            "streams.a.sink.vacuum.auto: vacuum is for Delta tables; a Parquet directory has no log of removed files",
        ]
    );
    let e = errors(&stream(
        "compaction = { auto = true, check_interval = \"often\" }",
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("streams.a.sink.compaction.check_interval: `often` is not a duration"),
        "{e:?}"
    );
    let e = errors(&stream("vacuum = { auto = true, every = \"1d\" }"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("unknown field `every`"), "{e:?}");
}
