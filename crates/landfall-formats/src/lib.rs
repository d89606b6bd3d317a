//! Decoders from file bytes to Arrow, schema inference over a sample, and conforming decoded
//! batches to the stream schema.
//!
//! Text formats (json, csv) decode incrementally as chunks arrive, so memory stays bounded by
//! the batch size rather than the file size; compressed files (by extension, [`Codec`]) are
//! decompressed as they arrive, and a leading UTF-8 BOM is skipped ([`TextInput`]). Parquet
//! and ORC need their footers: a small file decodes at `finish`, a large one through ranged
//! reads ([`parquet_batches`], [`orc_batches`]).

/// The reports of a decoder that wraps another in `self.inner` (malformed rows, rescued rows,
/// new columns), passed through unchanged.
macro_rules! forward_reports {
    () => {
        fn malformed_rows(&self) -> u64 {
            landfall_core::Decoder::malformed_rows(&self.inner)
        }

        fn first_malformed(&self) -> Option<String> {
            landfall_core::Decoder::first_malformed(&self.inner)
        }

        fn take_malformed(&mut self) -> Vec<landfall_core::MalformedRecord> {
            landfall_core::Decoder::take_malformed(&mut self.inner)
        }

        fn rescued_rows(&self) -> u64 {
            landfall_core::Decoder::rescued_rows(&self.inner)
        }

        fn new_columns(&self) -> Vec<arrow_schema::Field> {
            landfall_core::Decoder::new_columns(&self.inner)
        }
    };
}

mod avro;
mod binary_file;
mod compression;
mod compression_blocks;
mod conform;
mod csv;
mod csv_tokenize;
mod encoding;
mod error;
mod exact;
mod infer;
mod infer_csv;
mod infer_json;
mod input;
mod json;
mod json_decimal;
mod json_exact;
mod json_fast;
mod json_lenient;
mod json_multiline;
mod json_permissive;
mod metadata;
mod orc_file;
mod orc_tail;
mod panic_guard;
mod parquet_file;
mod rescue;
mod temporal;
mod text;
mod types;
mod xml;
mod xml_shape;

pub use avro::{AvroDecoder, avro_schema};
pub use binary_file::{BinaryFileDecoder, binary_file_schema};
pub use compression::{Codec, Decompressor, decompress_head};
pub use conform::{Conformer, Constant, conform, with_constant_columns};
pub use csv::CsvDecoder;
pub use encoding::TextEncoding;
pub use error::FormatError;
pub use infer::{SchemaMerger, infer_schema};
pub use input::{BomStrip, TextInput, sample_text};
pub use json::JsonDecoder;
pub use json_decimal::DecimalStats;
pub use json_lenient::{JsonLeniency, lenient_text};
pub use landfall_core::MalformedRecord;
pub use metadata::{METADATA_COLUMN, METADATA_FIELDS, metadata_field, metadata_row};
pub use orc_file::{OrcDecoder, orc_batches, orc_footer_schema, orc_schema};
pub use parquet_file::{parquet_batches, parquet_footer_schema};
pub use rescue::{NewColumns, RESCUED_FILE_KEY, SchemaPolicy, append_new_columns, widen_columns};
pub use temporal::{TemporalFormats, chrono_format};
pub use text::{TextDecoder, TextFormat};
pub use types::{merge_widen, stringify_leaves};
pub use xml::{XmlDecoder, XmlFormat, xml_to_ndjson};

use arrow_schema::SchemaRef;
use landfall_core::Decoder;

/// Options a decoder needs beside the schema.
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    pub batch_size: usize,
    pub csv: CsvFormat,
    pub text: TextFormat,
    /// JSON: a file is one document or an array of documents over many lines.
    pub json_multi_line: bool,
    /// JSON: comments, single quotes, unquoted field names.
    pub json_leniency: JsonLeniency,
    /// JSON: `timestamp_format` and `date_format` (chrono formats).
    pub json_temporal: TemporalFormats,
    /// XML: the row tag and names of attribute and text fields.
    pub xml: XmlFormat,
    /// What a malformed record does (json, csv, text).
    pub mode: ParseMode,
    /// Rescued data and new-column detection (json, csv, parquet).
    pub policy: SchemaPolicy,
    /// Keep every malformed record's detail for `bad_records_path` (json, csv).
    pub collect_malformed: bool,
}

/// Parser modes of json, csv and text (Spark's `mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ParseMode {
    /// Keep going: a value that does not fit is null and its row counted malformed; a record
    /// that cannot be read is counted and the file's other records land.
    #[default]
    Permissive,
    /// The first malformed record makes the file corrupt (`ignore_corrupt_files` decides).
    FailFast,
    /// Malformed records are counted and left out: no row of a record with a value lost to
    /// null (a value the rescued column keeps does not make its record malformed).
    DropMalformed,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            batch_size: 8192,
            csv: CsvFormat::default(),
            text: TextFormat::default(),
            json_multi_line: false,
            json_leniency: JsonLeniency::default(),
            json_temporal: TemporalFormats::default(),
            xml: XmlFormat::default(),
            mode: ParseMode::Permissive,
            policy: SchemaPolicy::default(),
            collect_malformed: false,
        }
    }
}

/// CSV dialect.
#[derive(Debug, Clone)]
pub struct CsvFormat {
    pub header: bool,
    pub delimiter: u8,
    pub quote: u8,
    pub escape: Option<u8>,
    pub comment: Option<u8>,
    pub null_value: Option<String>,
    /// Lines passed over at the start of each file, before the header.
    pub skip_rows: usize,
    /// What an empty field of a string column is (default: null).
    pub empty_value: Option<String>,
    /// The text that means NaN in a floating-point column.
    pub nan_value: String,
    pub ignore_leading_white_space: bool,
    pub ignore_trailing_white_space: bool,
    /// A header or record with more fields makes the file corrupt.
    pub max_columns: usize,
    /// The files' character set (transcoded to UTF-8 before tokenizing).
    pub encoding: TextEncoding,
    /// How TIMESTAMP and DATE columns are written (chrono formats; none: ISO 8601).
    pub temporal: TemporalFormats,
}

impl Default for CsvFormat {
    fn default() -> Self {
        CsvFormat {
            header: true,
            delimiter: b',',
            quote: b'"',
            escape: None,
            comment: None,
            null_value: None,
            skip_rows: 0,
            empty_value: None,
            nan_value: "NaN".into(),
            ignore_leading_white_space: false,
            ignore_trailing_white_space: false,
            max_columns: 20480,
            encoding: TextEncoding::Utf8,
            temporal: TemporalFormats::default(),
        }
    }
}

/// The formats that decode today.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Json,
    Csv,
    Parquet,
    Text,
    BinaryFile,
    Xml,
    Avro,
    Orc,
}

impl FileFormat {
    /// The fixed schema of a format that has one (text, binary_file).
    pub fn fixed_schema(self) -> Option<arrow_schema::Schema> {
        match self {
            FileFormat::Text => Some(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                "value",
                arrow_schema::DataType::Utf8,
                true,
            )])),
            FileFormat::BinaryFile => Some(binary_file_schema()),
            _ => None,
        }
    }
}

/// Fails the file at its first malformed record (`mode = "fail_fast"`).
struct FailFast {
    path: String,
    inner: Box<dyn Decoder>,
}

impl FailFast {
    fn check(&self) -> landfall_core::seams::SeamResult<()> {
        let n = self.inner.malformed_rows();
        if n == 0 {
            return Ok(());
        }
        let at = self
            .inner
            .first_malformed()
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        Err(FormatError::Unreadable {
            path: self.path.clone(),
            reason: format!("malformed record in fail_fast mode{at}"),
        }
        .into())
    }
}

impl Decoder for FailFast {
    fn push(
        &mut self,
        chunk: bytes::Bytes,
    ) -> landfall_core::seams::SeamResult<Vec<arrow::array::RecordBatch>> {
        let out = self.inner.push(chunk)?;
        self.check()?;
        Ok(out)
    }

    fn finish(&mut self) -> landfall_core::seams::SeamResult<Vec<arrow::array::RecordBatch>> {
        let out = self.inner.finish()?;
        self.check()?;
        Ok(out)
    }

    fn start_at(&mut self, line: u64, offset: u64) {
        self.inner.start_at(line, offset);
    }
    forward_reports!();
}

/// Whether a file of `format` named `path` may be cut at newlines between records and its
/// parts decoded apart, each by a decoder told where its part starts
/// ([`landfall_core::Decoder::start_at`]; the engine picks the cuts), uncompressed: JSON
/// lines without `multi_line` (a file is one document) or leniency (a comment may hold
/// anything), and text with the default line separators and without `whole_text` (every `\n`
/// ends a line, so a cut just after one is exact). CSV files are decoded in order (a quoted
/// value may hold a newline, and later parts would lack the header).
pub fn splits_at_newlines(format: FileFormat, path: &str, opts: &DecodeOptions) -> bool {
    let splits = match format {
        FileFormat::Json => !opts.json_multi_line && !opts.json_leniency.any(),
        FileFormat::Text => !opts.text.whole_text && opts.text.line_sep.is_none(),
        _ => false,
    };
    splits && Codec::of(path).is_none()
}

/// A decoder for one file of `format`, producing batches of `schema` (the stream schema
/// without path partition columns). `path`: the file as the user wrote the source (errors name
/// it; binary_file's `path` column holds it); `file`: its listed metadata.
pub fn decoder(
    format: FileFormat,
    path: &str,
    file: &landfall_core::FileMeta,
    schema: SchemaRef,
    opts: &DecodeOptions,
) -> Result<Box<dyn Decoder>, FormatError> {
    let d = plain_decoder(format, path, file, schema, opts)?;
    Ok(match opts.mode {
        ParseMode::FailFast
            if matches!(
                format,
                FileFormat::Json | FileFormat::Csv | FileFormat::Text | FileFormat::Xml
            ) =>
        {
            Box::new(FailFast {
                path: path.to_string(),
                inner: d,
            })
        }
        _ => d,
    })
}

fn plain_decoder(
    format: FileFormat,
    path: &str,
    file: &landfall_core::FileMeta,
    schema: SchemaRef,
    opts: &DecodeOptions,
) -> Result<Box<dyn Decoder>, FormatError> {
    Ok(match format {
        FileFormat::Text => Box::new(TextInput::new(
            path,
            Box::new(
                TextDecoder::new(path, schema, opts.text.clone(), opts.batch_size)?
                    .with_drop_malformed(opts.mode == ParseMode::DropMalformed),
            ),
        )?),
        FileFormat::BinaryFile => Box::new(BinaryFileDecoder::new(path, file.modified, schema)?),
        FileFormat::Json => {
            let json = json::JsonDecoder::configured(
                path,
                schema,
                opts.batch_size,
                opts.policy.clone(),
                &opts.json_temporal,
            )?
            .with_malformed(
                opts.mode == ParseMode::DropMalformed,
                opts.collect_malformed,
            );
            let mut inner: Box<dyn Decoder> = if opts.json_multi_line {
                Box::new(json_multiline::MultiLineJson::new(json))
            } else {
                Box::new(json)
            };
            if opts.json_leniency.any() {
                inner = Box::new(json_lenient::LenientDecoder::new(
                    opts.json_leniency,
                    !opts.json_multi_line,
                    inner,
                ));
            }
            Box::new(TextInput::new(path, inner)?)
        }
        FileFormat::Xml => {
            let json = json::JsonDecoder::new(path, schema.clone(), opts.batch_size)?
                .with_policy(opts.policy.clone())?
                .with_malformed(
                    opts.mode == ParseMode::DropMalformed,
                    opts.collect_malformed,
                );
            Box::new(TextInput::new(
                path,
                Box::new(
                    xml::XmlDecoder::new(path, schema, opts.xml.clone(), json)
                        .collecting(opts.collect_malformed),
                ),
            )?)
        }
        FileFormat::Csv => {
            let csv: Box<dyn Decoder> = Box::new(csv::CsvDecoder::new(path, schema, opts));
            Box::new(TextInput::new(
                path,
                encoding::transcoding(opts.csv.encoding, csv),
            )?)
        }
        FileFormat::Avro => Box::new(avro::AvroDecoder::new(
            path,
            schema,
            opts.batch_size,
            opts.policy.clone(),
        )),
        FileFormat::Parquet => Box::new(parquet_file::ParquetDecoder::new(
            path,
            schema,
            opts.batch_size,
            opts.policy.clone(),
        )),
        FileFormat::Orc => Box::new(orc_file::OrcDecoder::new(
            path,
            schema,
            opts.batch_size,
            opts.policy.clone(),
        )),
    })
}

/// Test helper: feed `input` to `d` in two chunks cut at byte `cut`, then finish.
#[cfg(test)]
pub(crate) fn decode_in_two(
    d: &mut dyn Decoder,
    input: &[u8],
    cut: usize,
) -> Vec<arrow::array::RecordBatch> {
    let mut batches = d
        .push(bytes::Bytes::copy_from_slice(&input[..cut]))
        .expect("first chunk decodes");
    batches.extend(
        d.push(bytes::Bytes::copy_from_slice(&input[cut..]))
            .expect("second chunk decodes"),
    );
    batches.extend(d.finish().expect("finish decodes"));
    batches
}
