//! How a stream reads records: `metadata_columns`, `mode`, and the xml, json, text and csv
//! options, each only for its format.

use super::{Ctx, K, single_char};
use crate::model::*;
use crate::spec::RecordMode;

/// How records are read: metadata columns, `mode`, and the xml, json and text options (each
/// only for its format; the csv options are [`csv_options`]).
pub(super) fn record_options(ctx: &mut Ctx, k: K, s: &StreamConfig) -> RecordMode {
    const METADATA: [&str; 6] = landfall_core::METADATA_FIELDS;
    let mut seen_meta = std::collections::HashSet::new();
    for m in &s.metadata_columns {
        if !METADATA.contains(&m.as_str()) {
            ctx.err(
                k("metadata_columns"),
                format!(
                    "`{m}` is not a file metadata field (one of: {})",
                    METADATA.join(", ")
                ),
            );
        } else if !seen_meta.insert(m) {
            ctx.err(k("metadata_columns"), format!("`{m}` is listed twice"));
        }
    }
    let mode = match s.mode.as_str() {
        "permissive" => RecordMode::Permissive,
        "fail_fast" => RecordMode::FailFast,
        "drop_malformed" => RecordMode::DropMalformed,
        other => {
            ctx.err(
                k("mode"),
                format!("`{other}` is not a mode (permissive, drop_malformed, fail_fast)"),
            );
            RecordMode::Permissive
        }
    };
    match (&s.xml.row_tag, s.format) {
        (None, Format::Xml) => ctx.err(
            k("xml.row_tag"),
            "is required for format = \"xml\" (the element that is one row)",
        ),
        (Some(t), Format::Xml)
            if t.is_empty() || t.contains(|c: char| c.is_whitespace() || "<>/:".contains(c)) =>
        {
            ctx.err(
                k("xml.row_tag"),
                format!("{t:?} is not an element name (without a namespace prefix)"),
            )
        }
        (Some(_), f) if f != Format::Xml => ctx.err(k("xml.row_tag"), "is for format = \"xml\""),
        _ => {}
    }
    let j = &s.json;
    if (j.allow_comments
        || j.allow_single_quotes
        || j.allow_unquoted_field_names
        || j.primitives_as_string
        || j.prefers_decimal
        || j.timestamp_format.is_some()
        || j.date_format.is_some())
        && s.format != Format::Json
    {
        ctx.err(k("json"), "the json options are for format = \"json\"");
    }
    if s.json.multi_line && s.format != Format::Json {
        ctx.err(k("json.multi_line"), "is for format = \"json\"");
    }
    if let Some(sep) = &s.text.line_sep
        && sep.is_empty()
    {
        ctx.err(k("text.line_sep"), "must not be empty");
    }
    mode
}

/// The csv options: encoding, date and time patterns (json's too), column limit and the
/// one-character options. Checked after the listing options, as `landfall check` has always
/// listed them.
pub(super) fn csv_options(ctx: &mut Ctx, k: K, s: &StreamConfig) {
    if let Some(e) = &s.csv.encoding
        && landfall_core::TextEncoding::parse(e).is_none()
    {
        ctx.err(
            k("csv.encoding"),
            format!("`{e}` is not supported (UTF-8, ISO-8859-1, UTF-16, UTF-16LE, UTF-16BE)"),
        );
    }
    for (key, pattern) in [
        ("csv.timestamp_format", &s.csv.timestamp_format),
        ("csv.date_format", &s.csv.date_format),
        ("json.timestamp_format", &s.json.timestamp_format),
        ("json.date_format", &s.json.date_format),
    ] {
        if let Some(p) = pattern
            && let Err(e) = landfall_core::datetime_pattern::chrono_format(p)
        {
            ctx.err(k(key), e);
        }
    }
    if s.csv.max_columns == Some(0) {
        ctx.err(k("csv.max_columns"), "must be at least 1");
    }
    ctx.ok(k("csv.sep"), single_char(&s.csv.sep));
    ctx.ok(k("csv.quote"), single_char(&s.csv.quote));
    if let Some(e) = &s.csv.escape {
        ctx.ok(k("csv.escape"), single_char(e));
    }
    if let Some(c) = &s.csv.comment {
        ctx.ok(k("csv.comment"), single_char(c));
    }
}
