//! What the stream's options mean to the decoders: its format, the csv, json, xml and text
//! options, the date and time patterns and the parse mode, as `landfall-formats` takes them.
//! Inference (schema.rs) and every batch (stream/batch.rs) read files with the same ones.

use landfall_config::{Format, RecordMode, StreamSpec};
use landfall_formats::{CsvFormat, DecodeOptions, FileFormat, ParseMode, SchemaPolicy};

/// The options every file of a batch is decoded with, under the schema's `policy`.
pub fn decode_options(spec: &StreamSpec, policy: SchemaPolicy) -> DecodeOptions {
    DecodeOptions {
        csv: csv_format(spec),
        text: text_format(spec),
        json_multi_line: spec.json.multi_line,
        json_leniency: json_leniency(spec),
        json_temporal: temporal_formats(&spec.json.timestamp_format, &spec.json.date_format),
        xml: xml_format(spec),
        mode: match spec.mode {
            RecordMode::Permissive => ParseMode::Permissive,
            RecordMode::DropMalformed => ParseMode::DropMalformed,
            RecordMode::FailFast => ParseMode::FailFast,
        },
        collect_malformed: spec.bad_records.is_some(),
        policy,
        ..Default::default()
    }
}

pub fn file_format(f: Format) -> FileFormat {
    match f {
        Format::Json => FileFormat::Json,
        Format::Csv => FileFormat::Csv,
        Format::Parquet => FileFormat::Parquet,
        Format::Text => FileFormat::Text,
        Format::BinaryFile => FileFormat::BinaryFile,
        Format::Xml => FileFormat::Xml,
        Format::Avro => FileFormat::Avro,
        Format::Orc => FileFormat::Orc,
    }
}

/// Whether inference types values (`infer_column_types`, unless JSON's
/// `primitives_as_string` keeps every primitive a string).
pub(crate) fn infer_types(spec: &StreamSpec) -> bool {
    spec.infer_column_types && !(spec.format == Format::Json && spec.json.primitives_as_string)
}

/// `timestamp_format` and `date_format` as chrono formats (validated with the configuration).
pub fn temporal_formats(
    timestamp: &Option<String>,
    date: &Option<String>,
) -> landfall_formats::TemporalFormats {
    let chrono = |p: &Option<String>| {
        p.as_deref()
            .and_then(|p| landfall_formats::chrono_format(p).ok())
    };
    landfall_formats::TemporalFormats {
        timestamp: chrono(timestamp),
        date: chrono(date),
    }
}

/// The JSON leniencies of the stream.
pub fn json_leniency(spec: &StreamSpec) -> landfall_formats::JsonLeniency {
    landfall_formats::JsonLeniency {
        allow_comments: spec.json.allow_comments,
        allow_single_quotes: spec.json.allow_single_quotes,
        allow_unquoted_field_names: spec.json.allow_unquoted_field_names,
    }
}

/// The XML options of the stream.
pub fn xml_format(spec: &StreamSpec) -> landfall_formats::XmlFormat {
    let d = landfall_formats::XmlFormat::default();
    let x = &spec.xml;
    landfall_formats::XmlFormat {
        row_tag: x.row_tag.clone().unwrap_or(d.row_tag),
        attribute_prefix: x.attribute_prefix.clone().unwrap_or(d.attribute_prefix),
        value_tag: x.value_tag.clone().unwrap_or(d.value_tag),
    }
}

/// The text options of the stream.
pub fn text_format(spec: &StreamSpec) -> landfall_formats::TextFormat {
    landfall_formats::TextFormat {
        whole_text: spec.text.whole_text,
        line_sep: spec.text.line_sep.as_ref().map(|s| s.as_bytes().to_vec()),
    }
}

pub fn csv_format(spec: &StreamSpec) -> CsvFormat {
    let c = &spec.csv;
    let one = |s: &str| s.as_bytes().first().copied();
    CsvFormat {
        header: c.header,
        delimiter: one(&c.sep).unwrap_or(b','),
        quote: one(&c.quote).unwrap_or(b'"'),
        escape: c.escape.as_deref().and_then(one),
        comment: c.comment.as_deref().and_then(one),
        null_value: c.null_value.clone(),
        skip_rows: c.skip_rows,
        empty_value: c.empty_value.clone(),
        nan_value: c.nan_value.clone().unwrap_or_else(|| "NaN".into()),
        ignore_leading_white_space: c.ignore_leading_white_space,
        ignore_trailing_white_space: c.ignore_trailing_white_space,
        max_columns: c.max_columns.unwrap_or(20480),
        temporal: temporal_formats(&c.timestamp_format, &c.date_format),
        // Validated with the configuration.
        encoding: c
            .encoding
            .as_deref()
            .and_then(landfall_formats::TextEncoding::parse)
            .unwrap_or_default(),
    }
}
