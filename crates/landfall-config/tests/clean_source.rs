//! `[streams.<name>.clean_source]`: Auto Loader's `cleanSource` options, each rule's message.

use landfall_config::{ConfigError, load_str};
use landfall_core::ArchiveMode;
use std::time::Duration;

fn errors(toml: &str) -> Vec<String> {
    match load_str(toml, "test.toml") {
        Err(ConfigError::Invalid(errs)) => errs.iter().map(|e| e.to_string()).collect(),
        Err(other) => vec![other.to_string()],
        Ok(_) => vec![],
    }
}

fn stream(source: &str, clean: &str) -> String {
    format!(
        "[streams.a]\nsource = \"{source}\"\nformat = \"json\"\nsink.path = \"s3://b/tables/a\"\n[streams.a.clean_source]\n{clean}\n"
    )
}

#[test]
fn defaults_and_modes() {
    let cfg = load_str(
        "[streams.a]\nsource = \"/in\"\nformat = \"json\"\nsink.path = \"/out\"\n",
        "t",
    )
    .unwrap();
    assert_eq!(cfg.streams[0].clean_source, None);
    let cfg = load_str(&stream("s3://b/in", "mode = \"DELETE\""), "t").unwrap();
    let c = cfg.streams[0].clean_source.clone().unwrap();
    assert_eq!(c.mode, ArchiveMode::Delete);
    assert_eq!(c.retention, Duration::from_secs(30 * 24 * 3600));
    assert_eq!(c.move_destination, None);
    let cfg = load_str(
        &stream(
            "s3://b/in",
            "mode = \"move\"\nmove_destination = \"s3://b/archive\"\nretention_duration = \"0s\"",
        ),
        "t",
    )
    .unwrap();
    let c = cfg.streams[0].clean_source.clone().unwrap();
    assert_eq!(c.mode, ArchiveMode::Move);
    assert_eq!(c.retention, Duration::ZERO);
    assert_eq!(c.move_destination.unwrap().url.as_str(), "s3://b/archive/");
    // Off keeps the other keys without using them.
    let cfg = load_str(
        &stream(
            "s3://b/in",
            "mode = \"off\"\nmove_destination = \"s3://b/archive\"\nretention_duration = \"1d\"",
        ),
        "t",
    )
    .unwrap();
    assert_eq!(cfg.streams[0].clean_source, None);
}

#[test]
fn each_rule_names_its_reason() {
    let one = |toml: String| {
        let e = errors(&toml);
        assert_eq!(e.len(), 1, "{e:?}");
        e[0].clone()
    };
    assert_eq!(
        one(stream("s3://b/in", "mode = \"archive\"")),
        "streams.a.clean_source.mode: `archive` is not `off`, `delete` or `move`"
    );
    assert_eq!(
        one(stream(
            "s3://b/in",
            "mode = \"delete\"\nretention_duration = \"6d\""
        )),
        "streams.a.clean_source.retention_duration: `6d` is shorter than the 7 days `delete` needs (as Auto Loader): a file deleted sooner cannot be read again to repair the table"
    );
    assert_eq!(
        one(stream("s3://b/in", "mode = \"move\"")),
        "streams.a.clean_source.move_destination: `mode = \"move\"` needs a `move_destination`: where the ingested files go"
    );
    assert_eq!(
        one(stream(
            "s3://b/in",
            "mode = \"delete\"\nmove_destination = \"s3://b/x\""
        )),
        "streams.a.clean_source.move_destination: is only for `mode = \"move\"`; `delete` moves nothing"
    );
    assert_eq!(
        one(stream(
            "s3://b/in",
            "mode = \"move\"\nmove_destination = \"s3://other/x\""
        )),
        "streams.a.clean_source.move_destination: s3://other/x/ is not in the source's bucket (s3://b/in/); files are moved by a copy inside one store (write both locations in the same form)"
    );
    assert_eq!(
        one(stream(
            "s3://b/in",
            "mode = \"move\"\nmove_destination = \"s3://b/in/done\""
        )),
        "streams.a.clean_source.move_destination: s3://b/in/done/ lies in the source s3://b/in/; moved files would be listed and ingested again"
    );
    assert_eq!(
        one(stream(
            "s3://b/in",
            "mode = \"move\"\nmove_destination = \"s3://b/in\""
        )),
        "streams.a.clean_source.move_destination: s3://b/in/ lies in the source s3://b/in/; moved files would be listed and ingested again"
    );
    assert_eq!(
        one(stream(
            "s3://b/in",
            "mode = \"move\"\nmove_destination = \"s3://b/tables\""
        )),
        "streams.a.clean_source.move_destination: s3://b/tables/ overlaps the table s3://b/tables/a/; moved files would sit among its data files"
    );
    assert_eq!(
        one(stream("s3://b/in", "mode = \"move\"\nretention = \"1d\"")),
        "test.toml: unknown field `retention`, expected one of `mode`, `move_destination`, `retention_duration` for key `streams.a.clean_source`"
    );
    // A sibling whose name starts like the source is not below it.
    assert!(
        errors(&stream(
            "s3://b/in",
            "mode = \"move\"\nmove_destination = \"s3://b/in_archive\""
        ))
        .is_empty()
    );
}

/// Another stream over the same files would find them gone, or (listing the destination too)
/// ingest them twice; one listing only the destination is an archive reader.
#[test]
fn files_archived_by_one_stream_are_read_by_no_other() {
    let base = "[streams.a]\nsource = \"s3://b/land/in\"\nformat = \"json\"\nsink.path = \"s3://t/a\"\n[streams.a.clean_source]\nmode = \"move\"\nmove_destination = \"s3://b/land/done\"\n";
    let e = errors(&format!(
        "{base}[streams.all]\nsource = \"s3://b/land\"\nformat = \"json\"\nsink.path = \"s3://t/all\"\n"
    ));
    assert_eq!(
        e,
        [
            "streams.a.clean_source.mode: stream `all` also reads s3://b/land/in/ (source s3://b/land/): this stream would move files before that one read them; archive from one stream only"
        ]
    );
    // A second stream on the same files, written with another alias of the scheme.
    let e = errors(&format!(
        "{base}[streams.twin]\nsource = \"s3a://b/land/in/\"\nformat = \"json\"\nsink.path = \"s3://t/twin\"\n"
    ));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("stream `twin` also reads"), "{e:?}");
    assert!(
        errors(&format!(
            "{base}[streams.archive]\nsource = \"s3://b/land/done\"\nformat = \"json\"\nsink.path = \"s3://t/arch\"\n"
        ))
        .is_empty()
    );
    // Destinations clear of other streams' tables and destinations.
    let e = errors(&format!(
        "{base}[streams.c]\nsource = \"s3://b/other\"\nformat = \"json\"\nsink.path = \"s3://b/land/done/t\"\n"
    ));
    assert_eq!(
        e,
        [
            "streams.a.clean_source.move_destination: s3://b/land/done/ overlaps the table of stream `c` (s3://b/land/done/t/); moved files could overwrite or be overwritten there"
        ]
    );
    let e = errors(&format!(
        "{base}[streams.c]\nsource = \"s3://b/other\"\nformat = \"json\"\nsink.path = \"s3://t/c\"\n[streams.c.clean_source]\nmode = \"move\"\nmove_destination = \"s3://b/land/done\"\n"
    ));
    assert_eq!(e.len(), 2, "{e:?}");
}

/// A destination holding the source, or the source written another way, is refused: a file's
/// path below the source put below such a destination can fall back into the source.
#[test]
fn destinations_are_compared_as_object_paths() {
    let one = |toml: String| {
        let e = errors(&toml);
        assert_eq!(e.len(), 1, "{e:?}");
        e[0].clone()
    };
    assert_eq!(
        one(stream(
            "s3://b/landing/orders",
            "mode = \"move\"\nmove_destination = \"s3://b/landing\""
        )),
        "streams.a.clean_source.move_destination: s3://b/landing/ holds the source s3://b/landing/orders/; a file's path below the source, put below the destination, could fall back into the source or onto files not yet ingested"
    );
    assert!(
        one(stream(
            "s3a://b/in",
            "mode = \"move\"\nmove_destination = \"s3://b/in/archive\""
        ))
        .contains("lies in the source")
    );
    assert!(
        one(stream(
            "s3://b/in%2Fx",
            "mode = \"move\"\nmove_destination = \"s3://b/in/x/done\""
        ))
        .contains("lies in the source")
    );
    assert!(
        one(stream(
            "s3://b/a%2a",
            "mode = \"move\"\nmove_destination = \"s3://b/a%2A/done\""
        ))
        .contains("lies in the source")
    );
}
