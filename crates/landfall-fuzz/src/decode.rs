//! Targets over the file decoders and schema inference: every format, every codec, the parse
//! modes and the schema policies, as `landfall_formats::decoder` builds them for a stream.

use arrow::array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;
use landfall_core::{Decoder, FileMeta};
use landfall_formats::{
    CsvFormat, DecodeOptions, FileFormat, JsonLeniency, ParseMode, SchemaMerger, SchemaPolicy,
};
use std::sync::Arc;

/// Formats of [`decode`] and [`infer`], by the first knob byte ([`decode_orc`] fuzzes ORC
/// alone, its seeds all ORC files).
const FORMATS: [(FileFormat, &str); 8] = [
    (FileFormat::Json, "json"),
    (FileFormat::Csv, "csv"),
    (FileFormat::Text, "txt"),
    (FileFormat::Xml, "xml"),
    (FileFormat::Avro, "avro"),
    (FileFormat::Parquet, "parquet"),
    (FileFormat::BinaryFile, "bin"),
    (FileFormat::Orc, "orc"),
];

/// Compression by extension, as the decoders pick it from the path.
const CODECS: [&str; 9] = [
    "", ".gz", ".bz2", ".xz", ".zst", ".lz4", ".snappy", ".zip", ".deflate",
];

/// Stream schemas a decoder may be built with: flat ones for every format, nested ones where
/// the format can hold them.
const SCHEMAS: [&str; 3] = [
    "a BIGINT, b STRING, c DOUBLE, d BOOLEAN",
    "ts TIMESTAMP, d DATE, n DECIMAL(10,2), s STRING, i INT",
    "o STRUCT<x: INT, y: ARRAY<STRING>>, m MAP<STRING, BIGINT>, l ARRAY<STRUCT<z: DOUBLE>>",
];

const RESCUED: &str = "_rescued_data";

/// One file through the stream's decoder. Knobs: format, codec, schema and batch size,
/// options (bits: mode x2, multi-line JSON, lenient JSON, rescued column, new-column
/// detection, CSV without header, whole-text), where to cut the bytes into two chunks. The
/// file decodes to the same outcome whole and cut.
pub fn decode(data: &[u8]) {
    let ([fmt, codec, shape, bits, cut], body) = crate::knobs::<5>(data);
    let (format, ext) = FORMATS[fmt as usize % FORMATS.len()];
    run(format, ext, codec, shape, bits, cut, body);
}

/// [`decode`] for ORC files (orc-rust panics on some damaged files, which the decoder catches
/// and reports as a corrupt file: the target runs without the fuzzer's abort-on-panic hook).
pub fn decode_orc(data: &[u8]) {
    let ([codec, shape, bits, cut], body) = crate::knobs::<4>(data);
    run(FileFormat::Orc, "orc", codec, shape, bits, cut, body);
}

fn run(format: FileFormat, ext: &str, codec: u8, shape: u8, bits: u8, cut: u8, body: &[u8]) {
    let binary = matches!(
        format,
        FileFormat::Avro | FileFormat::Parquet | FileFormat::Orc
    );
    let codec = if binary {
        ""
    } else {
        CODECS[codec as usize % CODECS.len()]
    };
    let path = format!("in/f.{ext}{codec}");
    let nested_ok = matches!(format, FileFormat::Json | FileFormat::Xml) || binary;
    let schemas = if nested_ok { 3 } else { 2 };
    let (schema, opts) = build(format, shape as usize % schemas, shape / 16, bits);
    let at = body.len() * cut as usize / 255;
    let whole = outcome(format, &path, body, &schema, &opts, &[body]);
    let split = outcome(
        format,
        &path,
        body,
        &schema,
        &opts,
        &[&body[..at], &body[at..]],
    );
    assert_eq!(
        whole, split,
        "{path}: whole and cut at {at} decode differently ({opts:?})"
    );
}

fn build(format: FileFormat, schema: usize, size: u8, bits: u8) -> (SchemaRef, DecodeOptions) {
    let mut schema = match format.fixed_schema() {
        Some(s) => s,
        None => landfall_core::ddl::parse_schema(SCHEMAS[schema]).expect("fixture DDL parses"),
    };
    let mut opts = DecodeOptions {
        batch_size: [1, 7, 8192][size as usize % 3],
        ..DecodeOptions::default()
    };
    opts.mode = match bits & 3 {
        1 => ParseMode::FailFast,
        2 => ParseMode::DropMalformed,
        _ => ParseMode::Permissive,
    };
    opts.json_multi_line = bits & 4 != 0;
    if bits & 8 != 0 {
        opts.json_leniency = JsonLeniency {
            allow_comments: true,
            allow_single_quotes: true,
            allow_unquoted_field_names: true,
        };
    }
    let rescue = bits & 16 != 0 && format.fixed_schema().is_none();
    if rescue {
        let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
        fields.push(Arc::new(arrow_schema::Field::new(
            RESCUED,
            arrow_schema::DataType::Utf8,
            true,
        )));
        schema = Schema::new(fields);
    }
    opts.policy = SchemaPolicy {
        rescued_column: rescue.then(|| RESCUED.to_string()),
        detect_new_columns: bits & 32 != 0,
        infer_types: bits & 32 != 0,
        ..SchemaPolicy::default()
    };
    opts.csv.header = bits & 64 == 0;
    opts.text.whole_text = bits & 128 != 0;
    opts.collect_malformed = true;
    (Arc::new(schema), opts)
}

/// What a decode comes to: the rows (one batch), malformed and rescued counts and the new
/// columns; or that it failed.
#[derive(Debug, PartialEq)]
enum Outcome {
    Rows {
        rows: Option<RecordBatch>,
        malformed: u64,
        rescued: u64,
        new_columns: Vec<arrow_schema::Field>,
    },
    Failed,
}

fn outcome(
    format: FileFormat,
    path: &str,
    body: &[u8],
    schema: &SchemaRef,
    opts: &DecodeOptions,
    chunks: &[&[u8]],
) -> Outcome {
    let meta = FileMeta {
        path: path.to_string(),
        size: body.len() as u64,
        modified: chrono::DateTime::UNIX_EPOCH,
        etag: None,
        version: None,
    };
    let Ok(mut d) = landfall_formats::decoder(format, path, &meta, schema.clone(), opts) else {
        return Outcome::Failed;
    };
    let mut batches = Vec::new();
    for chunk in chunks {
        match d.push(Bytes::copy_from_slice(chunk)) {
            Ok(b) => batches.extend(b),
            Err(_) => return Outcome::Failed,
        }
    }
    match d.finish() {
        Ok(b) => batches.extend(b),
        Err(_) => return Outcome::Failed,
    }
    for b in &batches {
        let got: Vec<_> = b
            .schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        let want: Vec<_> = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        assert_eq!(got, want, "{path}: a batch does not have the stream schema");
    }
    let malformed = d.malformed_rows();
    let rows = (!batches.is_empty()).then(|| {
        arrow::compute::concat_batches(&batches[0].schema(), &batches).expect("same schema")
    });
    Outcome::Rows {
        rows,
        malformed,
        rescued: d.rescued_rows(),
        new_columns: d.new_columns(),
    }
}

/// Schema inference over one sample file. Knobs: format, codec, whether types are inferred.
pub fn infer(data: &[u8]) {
    let ([fmt, codec, bits], body) = crate::knobs::<3>(data);
    let (format, ext) = FORMATS[fmt as usize % FORMATS.len()];
    let codec = CODECS[codec as usize % CODECS.len()];
    let path = format!("in/f.{ext}{codec}");
    let mut merger = SchemaMerger::new(format, CsvFormat::default(), bits & 1 != 0)
        .with_json_multi_line(bits & 2 != 0)
        .with_json_prefers_decimal(bits & 4 != 0);
    let added = if format.fixed_schema().is_some()
        || matches!(
            format,
            FileFormat::Avro | FileFormat::Parquet | FileFormat::Orc
        ) {
        merger.add(&path, &Bytes::copy_from_slice(body))
    } else {
        merger.add_sample(&path, body, 1 << 20, bits & 8 == 0)
    };
    if added.is_ok() {
        let _ = merger.finish();
    }
}
