//! Validation: each rule's message, checked word for word.

use landfall_config::{ConfigError, IncrementalListing, Trigger, load_str};

fn errors(toml: &str) -> Vec<String> {
    match load_str(toml, "test.toml") {
        Err(ConfigError::Invalid(errs)) => errs.iter().map(|e| e.to_string()).collect(),
        Err(other) => vec![other.to_string()],
        Ok(_) => vec![],
    }
}

#[test]
fn a_minimal_stream_gets_the_auto_loader_defaults() {
    let cfg = load_str(
        "[streams.s]\nsource = \"/data/in\"\nformat = \"json\"\nsink.path = \"/data/out\"\n",
        "t",
    )
    .unwrap();
    let s = &cfg.streams[0];
    assert_eq!(s.limits.max_files, 1000);
    assert_eq!(s.limits.max_bytes, None);
    assert!(s.include_existing_files && !s.allow_overwrites && !s.infer_column_types);
    assert_eq!(s.trigger, Trigger::Continuous);
    assert_eq!(s.state_dir, std::path::Path::new(".landfall/state/s"));
    assert_eq!(s.sink.target_file_size, 128 << 20);
    assert_eq!(s.incremental_listing, IncrementalListing::Auto);
    assert_eq!(s.full_listing_interval, 7);
}

/// `incremental_listing` takes auto/on/off (and Auto Loader's true/false, as a string or a
/// TOML boolean); `full_listing_interval` is at least 1 and means nothing with `off`.
#[test]
fn incremental_listing_options() {
    let stream = |extra: &str| {
        format!("[streams.a]\nsource = \"/in\"\nformat = \"json\"\nsink.path = \"/out\"\n{extra}\n")
    };
    for (written, mode) in [
        ("\"auto\"", IncrementalListing::Auto),
        ("\"on\"", IncrementalListing::On),
        ("\"off\"", IncrementalListing::Off),
        ("\"true\"", IncrementalListing::On),
        ("true", IncrementalListing::On),
        ("false", IncrementalListing::Off),
    ] {
        let cfg = load_str(&stream(&format!("incremental_listing = {written}")), "t")
            .unwrap_or_else(|e| panic!("{written}: {e}"));
        assert_eq!(cfg.streams[0].incremental_listing, mode, "{written}");
    }
    let cfg = load_str(
        &stream("incremental_listing = \"on\"\nfull_listing_interval = 3"),
        "t",
    )
    .unwrap();
    assert_eq!(cfg.streams[0].full_listing_interval, 3);
    assert_eq!(
        errors(&stream(
            "incremental_listing = \"sometimes\"\nfull_listing_interval = 0"
        )),
        vec![
            "streams.a.incremental_listing: `sometimes` is not `auto`, `on` or `off`",
            "streams.a.full_listing_interval: must be at least 1 (incremental_listing = \"off\" lists in full every time)",
        ]
    );
    assert_eq!(
        errors(&stream(
            "incremental_listing = \"off\"\nfull_listing_interval = 7"
        )),
        vec![
            "streams.a.full_listing_interval: has no effect with incremental_listing = \"off\" (every listing is a full one); remove one of them",
        ]
    );
}

#[test]
fn state_directories_are_private_and_outside_tables() {
    let errs = errors(
        r#"
[streams.a]
source = "/in/a"
format = "json"
state_dir = "/st/shared"
sink.path = "/out/a"

[streams.b]
source = "/in/b"
format = "json"
state_dir = "/st/shared"
sink.path = "/out/b"

[streams.c]
source = "/in/c"
format = "json"
state_dir = "/out/a/_state"
sink.path = "/out/c"
"#,
    );
    assert_eq!(
        errs,
        vec![
            "streams.b.state_dir: /st/shared is also the state directory of stream `a`; two streams sharing one corrupt each other",
            "streams.c.state_dir: /out/a/_state lies inside the table /out/a of stream `a`; keep state outside tables",
        ]
    );
}

/// One wrong schema option does not hide the checks made against the others: a bad hint and
/// a bad sample size still let `partition_by` be checked against the explicit schema, and a
/// fixed-schema format's `schema` is reported before the record options.
#[test]
fn schema_errors_do_not_hide_each_other() {
    let errs = errors(
        r#"
[streams.a]
source = "/data"
format = "json"
schema = "id BIGINT"
schema_hints = "id INT"
schema_sample_bytes = "lots"
sink = { path = "/table", partition_by = ["region"] }
"#,
    );
    assert_eq!(
        errs,
        vec![
            "streams.a.schema_hints: hints shape an inferred schema; with an explicit `schema` (or a fixed one) write the types there",
            "streams.a.schema_sample_bytes: `lots` is not a byte size (expected e.g. 512m, 10g, 1048576)",
            "streams.a.sink.partition_by: column `region` is not in the schema or partition_columns",
        ]
    );
    let errs = errors(
        "[streams.t]\nsource = \"/in\"\nformat = \"text\"\nschema = \"v STRING\"\nmode = \"lenient\"\nsink.path = \"/out\"\n",
    );
    assert_eq!(
        errs,
        vec![
            "streams.t.schema: format `text` has a fixed schema (value STRING); remove `schema`",
            "streams.t.mode: `lenient` is not a mode (permissive, drop_malformed, fail_fast)",
        ]
    );
}

/// A local Delta table (a stream's or the health table) under a directory holding a
/// backslash is refused: delta-rs would write it and then not find it.
#[test]
fn a_backslash_in_a_local_delta_path_is_refused() {
    let errs = errors(
        "[monitoring]\nhealth_table = \"/h\\\\x\"\n\n[streams.a]\nsource = \"/in\"\nformat = \"json\"\nsink.path = \"/out/a\\\\b\"\n",
    );
    assert_eq!(
        errs,
        vec![
            "monitoring.health_table: /h\\x holds a `\\`, which the Delta library reads as a path separator on a local file system (the table would be written and then not found); use a directory without one",
            "streams.a.sink.path: /out/a\\b holds a `\\`, which the Delta library reads as a path separator on a local file system (the table would be written and then not found); use a directory without one",
        ]
    );
    let parquet = errors(
        "[streams.a]\nsource = \"/in\"\nformat = \"json\"\nsink = { path = \"/out/a\\\\b\", format = \"parquet\" }\n",
    );
    assert!(parquet.is_empty(), "{parquet:?}");
}

#[test]
fn cross_field_rules() {
    let errs = errors(
        r#"
[streams.a]
source = "/data"
format = "csv"
schema = "id BIGINT"
source_store = "nope"
modified_after = "2025-01-02T00:00:00Z"
modified_before = "2025-01-01T00:00:00Z"
max_bytes_per_trigger = "10 gallons"
csv.sep = ";;"
trigger = { processing_time = "1m", available_now = true }
sink = { path = "/data/table", partition_by = ["region", "region"] }
"#,
    );
    assert_eq!(
        errs,
        vec![
            "streams.a.source_store: store `nope` is not defined (defined: none)",
            "streams.a.sink.partition_by: column `region` is listed twice",
            "streams.a.sink.partition_by: column `region` is not in the schema or partition_columns",
            "streams.a.sink.partition_by: column `region` is not in the schema or partition_columns",
            "streams.a.trigger: processing_time and available_now are mutually exclusive",
            "streams.a.max_bytes_per_trigger: `10 gallons` has an unknown unit `gallons` (use b, k, m, g or t)",
            "streams.a.modified_before: must be later than modified_after",
            "streams.a.csv.sep: `;;` must be exactly one ASCII character",
        ]
    );
    let errs =
        errors("[streams.a]\nsource = \"/data\"\nformat = \"json\"\nsink.path = \"/data/table\"\n");
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with("streams.a.sink.path: the table file:///data/table/ and the source file:///data/ overlap"), "{errs:?}");
    assert_eq!(
        errors(""),
        vec!["streams: no stream is defined (add a [streams.<name>] table)"]
    );
    assert_eq!(
        errors(
            "[server]\nlisten = \"nowhere\"\nchart_step = \"1h\"\n[streams.\"bad name\"]\nsource = \"/a\"\nformat = \"json\"\nsink.path = \"/b\"\n[streams.\"..\"]\nsource = \"/c\"\nformat = \"json\"\nsink.path = \"/d\"\n"
        ),
        vec![
            "server.listen: `nowhere` is not a socket address (e.g. 127.0.0.1:8686)",
            "server.chart_step: `1h` is outside 100ms to 10m (the default is 10s)",
            "streams...: stream names may use only letters, digits, `_`, `-` and `.` (at most 100), and not dots only",
            "streams.bad name: stream names may use only letters, digits, `_`, `-` and `.` (at most 100), and not dots only",
        ]
    );
}

/// Every unknown key in one run, each with the closest known one: at the root, in a stream,
/// in a nested table.
#[test]
fn every_unknown_key_is_reported_at_once() {
    let e = load_str(
        "[sever]\nlisten = \"x\"\n\n[streams.a]\nsource = \"/a\"\nformat = \"json\"\nmax_file_per_trigger = 3\nsink.path = \"/b\"\nsink.partiton_by = []\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 3, "{e}");
    // In the file's order.
    assert!(
        lines[0].contains("`sever`") && lines[2].contains("`partiton_by`"),
        "{e}"
    );
    for (key, suggestion) in [
        ("sever", "server"),
        ("max_file_per_trigger", "max_files_per_trigger"),
        ("partiton_by", "partition_by"),
    ] {
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("unknown field `{key}`")))
            .unwrap_or_else(|| panic!("`{key}` not reported: {e}"));
        assert!(line.starts_with("x.toml: unknown field `"), "{line}");
        assert!(
            line.ends_with(&format!("(did you mean `{suggestion}`?)")),
            "{line}"
        );
    }
    // A misspelt required key: its stream is set aside (its missing `source` is that typo),
    // and the next stream's typo is still reported; in the file's order.
    let e = load_str(
        "[streams.a]\nsorce = \"/a\"\nformat = \"json\"\nsink.path = \"/b\"\n\n[streams.b]\nsource = \"/c\"\nformat = \"json\"\nsink.path = \"/d\"\npoll_intreval = \"1s\"\n",
        "z.toml",
    )
    .unwrap_err()
    .to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(
        lines[0].contains("unknown field `sorce`")
            && lines[0].ends_with("(did you mean `source`?)"),
        "{e}"
    );
    assert!(
        lines[1].contains("unknown field `poll_intreval`")
            && lines[1].ends_with("(did you mean `poll_interval`?)"),
        "{e}"
    );
    // A wrong type still stops at the first (setting it aside could hide a missing key).
    let e = load_str(
        "[streams.a]\nsource = \"/a\"\nformat = \"json\"\nsink.path = \"/b\"\nmax_files_per_trigger = \"many\"\npoll_interval = 5\n",
        "y.toml",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn unknown_keys_and_bad_schemas_are_named() {
    let e = load_str("[streams.a]\nsource = \"/a\"\nformat = \"json\"\nsink.path = \"/b\"\nsink.partitionBy = []\n", "x.toml").unwrap_err();
    assert!(e.to_string().contains("unknown field `partitionBy`"), "{e}");
    assert!(
        e.to_string().contains("(did you mean `partition_by`?)"),
        "{e}"
    );
    let errs = errors(
        "[streams.a]\nsource = \"/a\"\nformat = \"json\"\nschema = \"id BIGNT\"\nsink.path = \"/b\"\n",
    );
    assert_eq!(
        errs,
        vec!["streams.a.schema: schema DDL at character 3: unknown type `BIGNT`"]
    );
}

#[test]
fn stores_resolve_into_object_store_options() {
    let cfg = load_str(
        r#"
[stores.lake]
endpoint = "http://127.0.0.1:5000"
region = "us-east-1"
access_key_id = "k"
secret_access_key = "s"
allow_http = true

[streams.a]
source = "s3://landing/a"
source_store = "lake"
format = "json"
sink = { path = "s3://lake/a", store = "lake" }
"#,
        "t",
    )
    .unwrap();
    let s = &cfg.streams[0];
    assert_eq!(s.source_options.0["aws_endpoint"], "http://127.0.0.1:5000");
    assert_eq!(s.sink.options.0["allow_http"], "true");
}

/// A misspelt value of a closed choice gets the closest allowed one too.
#[test]
fn a_misspelt_choice_names_the_closest_value() {
    let e = load_str(
        "[streams.a]\nsource = \"/a\"\nformat = \"json\"\nsink.path = \"/b\"\nschema_evolution_mode = \"add_new_column\"\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("add_new_column for key `streams.a.schema_evolution_mode`"),
        "{e}"
    );
    assert!(
        e.ends_with("(one of: add_new_columns, add_new_columns_with_type_widening, rescue, fail_on_new_columns, none; did you mean `add_new_columns`?)"),
        "{e}"
    );
    let e = load_str(
        "[streams.a]\nsource = \"/a\"\nformat = \"json\"\nsink.path = \"/b\"\ndiscovery = \"queue\"\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("(one of: ") && !e.contains("did you mean"),
        "{e}"
    );
}

#[test]
fn an_unknown_format_lists_the_formats() {
    let e = load_str(
        "[streams.a]\nsource = \"/a\"\nformat = \"jsn\"\nsink.path = \"/b\"\n",
        "x.toml",
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "x.toml: `jsn` is not a format (one of: json, csv, parquet, avro, orc, text, binary_file, xml) for key `streams.a.format`"
    );
}

/// `file_events` streams find the file-events location holding their source; `auto` falls
/// back to listing where there is none; nesting locations and misplaced keys are refused.
#[test]
fn file_events_streams_resolve_their_location() {
    use landfall_config::DiscoverySpec;
    let cfg = |streams: &str, locations: &str| {
        format!(
            "[locations.raw]\nurl = \"s3://bkt/landing\"\nfile_events = true\n{locations}\n{streams}"
        )
    };
    let stream = |name: &str, source: &str, mode: &str| {
        format!(
            "[streams.{name}]\nsource = \"{source}\"\nformat = \"json\"\nsink.path = \"/out/{name}\"\ndiscovery = \"{mode}\"\n"
        )
    };
    let c = load_str(
        &cfg(
            &(stream("a", "s3://bkt/landing/a", "file_events")
                + &stream("b", "s3://bkt/other", "auto")
                + &stream("c", "s3://bkt/landing", "auto")),
            "",
        ),
        "t",
    )
    .unwrap();
    let mode = |n: &str| match &c.stream(n).unwrap().discovery {
        DiscoverySpec::FileEvents(f) => format!("events:{}", f.location.name),
        DiscoverySpec::Listing => "listing".into(),
        DiscoverySpec::Notifications(_) => "notifications".into(),
    };
    assert_eq!(
        [mode("a"), mode("b"), mode("c")],
        ["events:raw", "listing", "events:raw"]
    );
    assert_eq!(c.locations[0].retention.as_secs(), 7 * 86400);

    let e = errors(&cfg(&stream("a", "s3://bkt/landing2/a", "file_events"), ""));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("streams.a.discovery: is `file_events` but no [locations.<name>]"),
        "{e:?}"
    );
    let e = errors(&cfg(
        &stream("a", "s3://bkt/landing/a", "file_events"),
        "[locations.inner]\nurl = \"s3://bkt/landing/x\"\nfile_events = true\n",
    ));
    assert!(
        e.iter()
            .any(|m| m.starts_with("locations.raw.url: nests with location `inner`")),
        "{e:?}"
    );
    // One queue, two readers: each would delete the other's events.
    let e = errors(&cfg(
        "",
        "[locations.two]\nurl = \"s3://other/x\"\nfile_events = true\nqueue_name = \"landfall-location-raw\"\n",
    ));
    assert!(
        e.iter().any(|m| m.starts_with("locations.two.queue_name: reads the same queue (landfall-location-raw) as location `raw`")),
        "{e:?}"
    );
    let e = errors(&cfg(
        &(stream("n", "s3://bkt/elsewhere", "notifications")
            + "[streams.n.notifications]\nqueue_name = \"landfall-location-raw\"\n"),
        "",
    ));
    assert!(
        e.iter()
            .any(|m| m.starts_with("streams.n.notifications: reads the same queue")),
        "{e:?}"
    );
    // Same bucket name on another service (endpoint): not the location's files.
    let other_service = format!(
        "[stores.a]\nendpoint = \"http://a:9000\"\n[stores.b]\nendpoint = \"http://b:9000\"\n{}",
        cfg(
            &(stream("x", "s3://bkt/landing/x", "auto") + "source_store = \"b\"\n"),
            "store = \"a\"\n",
        )
    );
    let c = load_str(&other_service, "t").unwrap();
    assert!(matches!(
        c.stream("x").unwrap().discovery,
        DiscoverySpec::Listing
    ));
    let e = errors(&(stream("a", "s3://bkt/landing/a", "listing") + "list_on_start = true\n"));
    assert!(
        e.iter()
            .any(|m| m.starts_with("streams.a.list_on_start: is for discovery")),
        "{e:?}"
    );
}

/// text and binary_file have fixed schemas; their options are checked.
#[test]
fn text_and_binary_file_options() {
    let stream =
        |extra: &str| format!("[streams.t]\nsource = \"/in\"\nsink.path = \"/out\"\n{extra}\n");
    let c = load_str(
        &stream("format = \"text\"\ntext.whole_text = true\ntext.line_sep = \"|\""),
        "t",
    )
    .unwrap();
    assert!(c.streams[0].text.whole_text);
    let c = load_str(&stream("format = \"binary_file\""), "t").unwrap();
    assert_eq!(c.streams[0].binary_max_size, 1 << 30);
    let e = errors(&stream("format = \"text\"\nschema = \"a INT\""));
    assert!(
        e[0].starts_with("streams.t.schema: format `text` has a fixed schema (value STRING)"),
        "{e:?}"
    );
    let e = errors(&stream(
        "format = \"binary_file\"\nbinary_file.max_file_size = \"lots\"",
    ));
    assert!(
        e[0].starts_with("streams.t.binary_file.max_file_size"),
        "{e:?}"
    );
    let e = errors(&stream("format = \"text\"\ntext.line_sep = \"\""));
    assert_eq!(e, ["streams.t.text.line_sep: must not be empty"]);
    let e = errors(&stream(
        "format = \"json\"\nmetadata_columns = [\"file_path\", \"file_path\", \"path\"]",
    ));
    assert_eq!(
        e,
        [
            "streams.t.metadata_columns: `file_path` is listed twice",
            "streams.t.metadata_columns: `path` is not a file metadata field (one of: file_path, file_name, file_size, file_modification_time, file_block_start, file_block_length)"
        ]
    );
}
