//! Schema inference over a sample of files: per-file schemas merged in sample order.
//!
//! JSON, CSV and XML are typed as Spark types them, which is what Auto Loader does
//! ([`crate::infer_json`], [`crate::infer_csv`]); without `infer_column_types` their leaves are
//! strings (nested structure kept), as in Auto Loader. Parquet, Avro and ORC files carry their
//! schema; conflicting types between files are widened ([`crate::merge_widen`]).

use crate::error::FormatError;
use crate::types::{merge_fields, merge_fields_with};
use crate::{CsvFormat, FileFormat};
use arrow_schema::{DataType, Field, Fields, Schema};
use bytes::Bytes;

/// The schema of a file that carries one (Avro, Parquet, ORC) or of a fixed-schema format.
fn file_schema(format: FileFormat, path: &str, bytes: &Bytes) -> Result<Schema, FormatError> {
    match format {
        FileFormat::Avro => crate::avro::avro_schema(path, bytes),
        FileFormat::Parquet => Ok(crate::parquet_file::parquet_schema(path, bytes.clone())?
            .as_ref()
            .clone()),
        FileFormat::Orc => Ok(crate::orc_file::orc_schema(path, bytes.clone())?
            .as_ref()
            .clone()),
        // Fixed schemas: nothing to infer. JSON, CSV and XML are inferred from their values.
        FileFormat::Text
        | FileFormat::BinaryFile
        | FileFormat::Json
        | FileFormat::Csv
        | FileFormat::Xml => Ok(format.fixed_schema().unwrap_or_else(Schema::empty)),
    }
}

/// Infer one schema from sample files (path, whole content), merged in order.
pub fn infer_schema(
    format: FileFormat,
    csv: &CsvFormat,
    samples: &[(String, Bytes)],
    infer_types: bool,
) -> Result<Schema, FormatError> {
    let mut merger = SchemaMerger::new(format, csv.clone(), infer_types);
    for (path, bytes) in samples {
        merger.add(path, bytes)?;
    }
    merger.finish()
}

/// Inference one file at a time: only the merged schema is kept between files, so a sample
/// of thousands of files never sits in memory together.
///
/// JSON and XML follow Spark's JSON and XML inference ([`crate::infer_json`]: fields sorted by
/// name, nulls giving way to any type until the whole sample is merged); CSV Spark's CSV
/// inference ([`crate::infer_csv`]: columns in header order, a file's new columns after the
/// ones seen before); self-describing formats merge their files' schemas, conflicting types
/// widened ([`crate::merge_widen`]).
pub struct SchemaMerger {
    format: FileFormat,
    csv: CsvFormat,
    infer_types: bool,
    /// CSV and self-describing formats: the columns so far, in first-seen order.
    merged: Fields,
    /// JSON and XML: the root struct so far (Spark's types, NullType included).
    root: DataType,
    files: usize,
    json_multi_line: bool,
    json_leniency: crate::JsonLeniency,
    /// `json.prefers_decimal`: fractions are DECIMAL where they fit one.
    json_prefers_decimal: bool,
    xml: crate::XmlFormat,
}

impl SchemaMerger {
    pub fn new(format: FileFormat, csv: CsvFormat, infer_types: bool) -> Self {
        SchemaMerger {
            format,
            csv,
            infer_types,
            merged: Fields::empty(),
            root: crate::infer_json::empty_root(),
            files: 0,
            json_multi_line: false,
            json_leniency: crate::JsonLeniency::default(),
            json_prefers_decimal: false,
            xml: crate::XmlFormat::default(),
        }
    }

    /// JSON fractions are DECIMAL where every value of the column fits one
    /// (`json.prefers_decimal`; only with typed inference).
    pub fn with_json_prefers_decimal(mut self, prefers: bool) -> Self {
        self.json_prefers_decimal = prefers;
        self
    }

    /// JSON samples may have comments, single quotes, unquoted field names.
    pub fn with_json_leniency(mut self, l: crate::JsonLeniency) -> Self {
        self.json_leniency = l;
        self
    }

    /// XML samples: their row tag and field names.
    pub fn with_xml(mut self, xml: crate::XmlFormat) -> Self {
        self.xml = xml;
        self
    }

    /// JSON samples are multi-line documents (`json.multi_line`).
    pub fn with_json_multi_line(mut self, multi_line: bool) -> Self {
        self.json_multi_line = multi_line;
        self
    }

    fn value_rules(&self) -> crate::infer_json::ValueRules {
        crate::infer_json::ValueRules {
            typed: self.infer_types,
            prefers_decimal: self.json_prefers_decimal && self.format == FileFormat::Json,
        }
    }

    /// Merge the schema of one sampled file (its whole content). A JSON or XML record that
    /// cannot be read adds nothing (the decoder counts it malformed).
    pub fn add(&mut self, path: &str, bytes: &Bytes) -> Result<(), FormatError> {
        match self.format {
            FileFormat::Json => {
                crate::infer_json::merge_json_text(bytes, self.value_rules(), &mut self.root)
            }
            FileFormat::Xml => {
                let (rows, _, _) = crate::xml::XmlRows::new(self.xml.clone(), self.infer_types)
                    .scan(bytes, 1, true);
                for (_, row) in &rows {
                    crate::infer_json::merge_xml_row(
                        row,
                        self.value_rules(),
                        &self.xml.value_tag,
                        &mut self.root,
                    );
                }
            }
            FileFormat::Csv => {
                let fields = crate::infer_csv::csv_fields(bytes, &self.csv, self.infer_types);
                self.merged = merge_fields_with(&self.merged, &fields.into(), |a, b| {
                    crate::infer_csv::compatible(a, b).unwrap_or(DataType::Utf8)
                });
            }
            _ => {
                let s = file_schema(self.format, path, bytes)?;
                self.merged = merge_fields(&self.merged, s.fields());
            }
        }
        self.files += 1;
        Ok(())
    }

    /// Add a text file's sampled head as read from the store: decompressed by its extension,
    /// without a BOM, at most `cap` bytes, cut back to its last complete line unless
    /// `complete` (the sample is the whole file).
    pub fn add_sample(
        &mut self,
        path: &str,
        raw: &[u8],
        cap: usize,
        complete: bool,
    ) -> Result<(), FormatError> {
        let (mut text, _whole) = crate::input::sample_text(path, raw, cap, complete)?;
        if self.format == FileFormat::Csv {
            // As the decoder sees the file: transcoded, its first `skip_rows` lines gone.
            text = crate::encoding::transcode_all(self.csv.encoding, &text);
            let at = crate::csv_tokenize::pass_lines(&text, &mut self.csv.skip_rows.clone());
            text.drain(..at);
        }
        if self.format == FileFormat::Json && self.json_leniency.any() {
            text =
                crate::json_lenient::lenient_text(&text, self.json_leniency, !self.json_multi_line);
        }
        if self.json_multi_line && self.format == FileFormat::Json {
            // Only whole records: a sample that stops inside the file ends in a cut one.
            text = crate::json_multiline::to_ndjson(&text);
        }
        self.add(path, &Bytes::from(text))
    }

    /// Merge a schema read from a file's own metadata (Parquet's footer), without its data.
    pub fn add_schema(&mut self, schema: &Schema) {
        self.merged = merge_fields(&self.merged, schema.fields());
        self.files += 1;
    }

    pub fn finish(self) -> Result<Schema, FormatError> {
        let fields: Vec<Field> = match (&self.format, &self.root) {
            (FileFormat::Json | FileFormat::Xml, DataType::Struct(root)) => {
                crate::infer_json::canonical_fields(root)
            }
            _ => self
                .merged
                .iter()
                .map(|f| {
                    // Columns without a single value have no type yet: strings hold anything.
                    if f.data_type() == &DataType::Null {
                        Field::new(f.name(), DataType::Utf8, true)
                    } else {
                        f.as_ref().clone()
                    }
                })
                .collect(),
        };
        if fields.is_empty() {
            return Err(FormatError::Inference {
                reason: format!(
                    "the {} sampled file(s) hold no columns; give the stream an explicit `schema`",
                    self.files
                ),
            });
        }
        Ok(Schema::new(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_inference_defaults_to_strings_and_widens_when_typed() {
        let a = (
            String::from("a.json"),
            Bytes::from_static(b"{\"id\":1,\"x\":{\"y\":2}}\n"),
        );
        let b = (
            String::from("b.json"),
            Bytes::from_static(b"{\"id\":1.5,\"z\":true}\n"),
        );
        let s = infer_schema(
            FileFormat::Json,
            &CsvFormat::default(),
            &[a.clone(), b.clone()],
            false,
        )
        .unwrap();
        assert_eq!(
            landfall_core::ddl::schema_to_ddl(&s),
            "id STRING, x STRUCT<y: STRING>, z STRING"
        );
        let s = infer_schema(FileFormat::Json, &CsvFormat::default(), &[a, b], true).unwrap();
        assert_eq!(
            landfall_core::ddl::schema_to_ddl(&s),
            "id DOUBLE, x STRUCT<y: BIGINT>, z BOOLEAN"
        );
    }

    fn ddl(s: &Schema) -> String {
        landfall_core::ddl::schema_to_ddl(s)
    }

    fn files(texts: &[&str], ext: &str) -> Vec<(String, Bytes)> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("f{i}.{ext}"), Bytes::from(t.to_string())))
            .collect()
    }

    /// Issue 16: a field null in every record of one file and an array or a struct in another
    /// is that array or struct (Spark's NullType), with and without typed inference and
    /// `json.multi_line`, whichever file comes first.
    #[test]
    fn a_field_null_in_one_file_is_the_array_or_struct_of_another() {
        let nulls = "{\"a\":null,\"id\":1,\"s\":null}\n";
        let values = "{\"a\":[1,2],\"id\":2,\"s\":{\"y\":\"x\"}}\n";
        for typed in [false, true] {
            let want = if typed {
                "a ARRAY<BIGINT>, id BIGINT, s STRUCT<y: STRING>"
            } else {
                "a ARRAY<STRING>, id STRING, s STRUCT<y: STRING>"
            };
            for order in [[nulls, values], [values, nulls]] {
                let csv = CsvFormat::default();
                let s = infer_schema(FileFormat::Json, &csv, &files(&order, "json"), typed);
                assert_eq!(ddl(&s.unwrap()), want, "typed {typed}");
                let mut m =
                    SchemaMerger::new(FileFormat::Json, csv, typed).with_json_multi_line(true);
                for (i, text) in order.iter().enumerate() {
                    let pretty = text.replace(',', ",\n  ");
                    m.add_sample(&format!("m{i}.json"), pretty.as_bytes(), 1 << 20, true)
                        .unwrap();
                }
                assert_eq!(ddl(&m.finish().unwrap()), want, "multi_line, typed {typed}");
            }
        }
    }

    /// Issue 16: DOUBLE and ARRAY<BIGINT> elements have no common type: Spark's is STRING, so
    /// the column is ARRAY<STRING> (not an array of arrays).
    #[test]
    fn arrays_of_mixed_depth_are_arrays_of_strings() {
        let s = infer_schema(
            FileFormat::Json,
            &CsvFormat::default(),
            &files(&["{\"a\":[1.5,2]}\n{\"a\":[[1,2]]}\n"], "json"),
            true,
        )
        .unwrap();
        assert_eq!(ddl(&s), "a ARRAY<STRING>");
    }

    /// Issue 16: CSV inference skips the `null_value` token as the decoder does.
    #[test]
    fn csv_inference_skips_the_null_token() {
        let csv = CsvFormat {
            null_value: Some("NA".into()),
            ..Default::default()
        };
        let s = infer_schema(
            FileFormat::Csv,
            &csv,
            &files(
                &["n,x,day\n1,NA,2013-01-01\nNA,2.5,NA\n3,1,2013-01-02\n"],
                "csv",
            ),
            true,
        )
        .unwrap();
        assert_eq!(ddl(&s), "n BIGINT, x DOUBLE, day DATE");
    }

    /// Issue 16: a CSV column of zone-less timestamps is TIMESTAMP (Spark's default
    /// TIMESTAMP_LTZ, read as UTC), as a new column of the same values already is; JSON keeps
    /// timestamp-looking strings strings (Spark's `inferTimestamp` is off by default).
    #[test]
    fn zone_less_csv_timestamps_are_timestamp_and_json_strings_stay_strings() {
        let csv = CsvFormat::default();
        let s = infer_schema(
            FileFormat::Csv,
            &csv,
            &files(&["at\n2013-01-01 01:00:00\n2013-01-01T02:00:00.5\n"], "csv"),
            true,
        )
        .unwrap();
        assert_eq!(
            s.field(0).data_type(),
            &DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("UTC".into()))
        );
        let s = infer_schema(
            FileFormat::Json,
            &csv,
            &files(
                &["{\"at\":\"2013-01-01 01:00:00\",\"d\":\"2013-01-01\"}\n"],
                "json",
            ),
            true,
        )
        .unwrap();
        assert_eq!(ddl(&s), "at STRING, d STRING");
    }

    /// Issue 16: Spark sorts the fields of inferred JSON and XML structs by name, top-level
    /// columns included; CSV keeps the header's order.
    #[test]
    fn json_and_xml_fields_are_sorted_by_name_csv_keeps_header_order() {
        let csv = CsvFormat::default();
        let s = infer_schema(
            FileFormat::Json,
            &csv,
            &files(
                &["{\"z\":1,\"b\":{\"y\":1,\"x\":2}}\n", "{\"a\":true}\n"],
                "json",
            ),
            true,
        )
        .unwrap();
        assert_eq!(
            ddl(&s),
            "a BOOLEAN, b STRUCT<x: BIGINT, y: BIGINT>, z BIGINT"
        );
        let mut m = SchemaMerger::new(FileFormat::Xml, csv.clone(), true);
        m.add(
            "r.xml",
            &Bytes::from_static(b"<rows><row><z>1</z><a>x</a></row></rows>"),
        )
        .unwrap();
        assert_eq!(ddl(&m.finish().unwrap()), "a STRING, z BIGINT");
        let s = infer_schema(FileFormat::Csv, &csv, &files(&["z,a\n1,2\n"], "csv"), true).unwrap();
        assert_eq!(ddl(&s), "z BIGINT, a BIGINT");
    }

    #[test]
    fn empty_sample_is_a_clear_error() {
        let e = infer_schema(FileFormat::Json, &CsvFormat::default(), &[], false).unwrap_err();
        assert!(
            e.to_string()
                .contains("give the stream an explicit `schema`")
        );
    }
}
