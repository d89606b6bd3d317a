//! Targets over the parsers of text a user writes: DDL and the config file.

use landfall_core::ddl;

/// A `schema` or `schema_hints` DDL string. A schema that parses prints back to DDL that
/// parses to the same schema.
pub fn ddl(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ddl::parse_hints(text);
    let Ok(schema) = ddl::parse_schema(text) else {
        return;
    };
    let printed = ddl::schema_to_ddl(&schema);
    let again = ddl::parse_schema(&printed)
        .unwrap_or_else(|e| panic!("{text:?} parsed, its DDL {printed:?} does not: {e}"));
    assert_eq!(
        schema.fields(),
        again.fields(),
        "{text:?} and its DDL {printed:?} differ"
    );
}

/// A config file: interpolated, parsed and validated.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = landfall_config::load_str(text, "fuzz.toml");
}
