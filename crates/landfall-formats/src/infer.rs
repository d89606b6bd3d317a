//! Basic schema inference over a sample of files (the full inference and evolution rules come
//! with the formats work): per-file schemas merged in sample order, conflicting types widened.
//!
//! Without `infer_column_types`, json and csv columns are strings (nested structure kept), as in
//! Auto Loader. Parquet files carry their schema.

use crate::error::FormatError;
use crate::{CsvFormat, FileFormat};
use arrow_schema::{DataType, Field, Fields, Schema};
use bytes::Bytes;
use std::sync::Arc;

/// Replace every leaf type with `Utf8`, keeping structs and lists.
pub fn stringify_leaves(ty: &DataType) -> DataType {
    match ty {
        DataType::Struct(fs) => DataType::Struct(
            fs.iter()
                .map(|f| stringify_field(f))
                .collect::<Vec<_>>()
                .into(),
        ),
        DataType::List(f) => DataType::List(Arc::new(stringify_field(f))),
        DataType::Null => DataType::Utf8,
        _ => DataType::Utf8,
    }
}

fn stringify_field(f: &Field) -> Field {
    Field::new(f.name(), stringify_leaves(f.data_type()), true)
}

/// The narrowest type both `a` and `b` fit in; strings when nothing narrower does.
pub fn merge_widen(a: &DataType, b: &DataType) -> DataType {
    use DataType::*;
    match (a, b) {
        _ if a == b => a.clone(),
        (Null, t) | (t, Null) => t.clone(),
        (Int8 | Int16 | Int32 | Int64, Int8 | Int16 | Int32 | Int64) => Int64,
        // Decimals merge as Spark merges them: the most integer digits and the largest scale; an
        // integer counts as the digits of its type (BIGINT: 20). Past 38 digits, or with a
        // floating-point type, no number type holds both exactly: strings (Spark's JSON
        // inference would pick DOUBLE and round).
        (Decimal128(p1, s1), Decimal128(p2, s2)) => {
            let scale = (*s1).max(*s2).max(0) as u8;
            let int = (*p1 as i16 - *s1 as i16)
                .max(*p2 as i16 - *s2 as i16)
                .max(0) as u8;
            match int.checked_add(scale) {
                Some(p) if p <= 38 => Decimal128(p.max(1), scale as i8),
                _ => Utf8,
            }
        }
        (Decimal128(..), Int8 | Int16 | Int32 | Int64) => merge_widen(a, &integer_decimal(b)),
        (Int8 | Int16 | Int32 | Int64, Decimal128(..)) => merge_widen(&integer_decimal(a), b),
        (Int8 | Int16 | Int32 | Int64 | Float32 | Float64, Float32 | Float64)
        | (Float32 | Float64, Int8 | Int16 | Int32 | Int64) => Float64,
        (Struct(x), Struct(y)) => Struct(merge_fields(x, y)),
        (List(x), List(y)) => List(Arc::new(Field::new(
            x.name(),
            merge_widen(x.data_type(), y.data_type()),
            true,
        ))),
        _ => Utf8,
    }
}

/// An integer type as the decimal that holds all its values (Spark's `DecimalType.forType`).
fn integer_decimal(t: &DataType) -> DataType {
    let digits = match t {
        DataType::Int8 => 3,
        DataType::Int16 => 5,
        DataType::Int32 => 10,
        _ => 20,
    };
    DataType::Decimal128(digits, 0)
}

fn merge_fields(a: &Fields, b: &Fields) -> Fields {
    let mut out: Vec<Field> = a
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    for f in b {
        match out.iter_mut().find(|g| g.name() == f.name()) {
            Some(g) => *g = Field::new(g.name(), merge_widen(g.data_type(), f.data_type()), true),
            None => out.push(f.as_ref().clone().with_nullable(true)),
        }
    }
    out.into()
}

fn file_schema(
    format: FileFormat,
    csv: &CsvFormat,
    xml: &crate::XmlFormat,
    path: &str,
    bytes: &Bytes,
    infer_types: bool,
) -> Result<Schema, FormatError> {
    let unreadable = |e: &dyn std::fmt::Display| FormatError::Unreadable {
        path: path.to_string(),
        reason: e.to_string(),
    };
    let schema = match format {
        FileFormat::Json => {
            let (s, _) = arrow_json::reader::infer_json_schema(std::io::Cursor::new(bytes), None)
                .map_err(|e| unreadable(&e))?;
            s
        }
        FileFormat::Csv => {
            let mut f = arrow_csv::reader::Format::default()
                .with_header(csv.header)
                .with_delimiter(csv.delimiter)
                .with_quote(csv.quote);
            if let Some(e) = csv.escape {
                f = f.with_escape(e);
            }
            if let Some(c) = csv.comment {
                f = f.with_comment(c);
            }
            let (s, _) = f
                .infer_schema(std::io::Cursor::new(bytes), None)
                .map_err(|e| unreadable(&e))?;
            s
        }
        FileFormat::Xml => {
            let ndjson = crate::xml::xml_to_ndjson(bytes, xml);
            let (s, _) = arrow_json::reader::infer_json_schema(std::io::Cursor::new(ndjson), None)
                .map_err(|e| unreadable(&e))?;
            s
        }
        FileFormat::Avro => {
            return crate::avro::avro_schema(path, bytes);
        }
        FileFormat::Parquet => {
            return Ok(crate::parquet_file::parquet_schema(path, bytes.clone())?
                .as_ref()
                .clone());
        }
        FileFormat::Orc => {
            return Ok(crate::orc_file::orc_schema(path, bytes.clone())?
                .as_ref()
                .clone());
        }
        // Fixed schemas: nothing to infer.
        FileFormat::Text | FileFormat::BinaryFile => {
            return Ok(format.fixed_schema().expect("a fixed schema"));
        }
    };
    if infer_types {
        Ok(schema)
    } else {
        Ok(Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| stringify_field(f))
                .collect::<Vec<_>>(),
        ))
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
pub struct SchemaMerger {
    format: FileFormat,
    csv: CsvFormat,
    infer_types: bool,
    merged: Fields,
    files: usize,
    json_multi_line: bool,
    json_leniency: crate::JsonLeniency,
    /// `json.prefers_decimal`: the sample's number literals, by path.
    json_decimals: Option<crate::DecimalStats>,
    xml: crate::XmlFormat,
}

impl SchemaMerger {
    pub fn new(format: FileFormat, csv: CsvFormat, infer_types: bool) -> Self {
        SchemaMerger {
            format,
            csv,
            infer_types,
            merged: Fields::empty(),
            files: 0,
            json_multi_line: false,
            json_leniency: crate::JsonLeniency::default(),
            json_decimals: None,
            xml: crate::XmlFormat::default(),
        }
    }

    /// JSON fractions are DECIMAL where every value of the column fits one
    /// (`json.prefers_decimal`; only with typed inference).
    pub fn with_json_prefers_decimal(mut self, prefers: bool) -> Self {
        self.json_decimals = (prefers && self.infer_types && self.format == FileFormat::Json)
            .then(crate::DecimalStats::default);
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

    /// Merge the schema of one sampled file (its whole content).
    pub fn add(&mut self, path: &str, bytes: &Bytes) -> Result<(), FormatError> {
        let s = file_schema(
            self.format,
            &self.csv,
            &self.xml,
            path,
            bytes,
            self.infer_types,
        )?;
        if let Some(d) = &mut self.json_decimals {
            d.scan(bytes);
        }
        self.merged = merge_fields(&self.merged, s.fields());
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
        if self.merged.is_empty() {
            return Err(FormatError::Inference {
                reason: format!(
                    "the {} sampled file(s) hold no columns; give the stream an explicit `schema`",
                    self.files
                ),
            });
        }
        let merged = match &self.json_decimals {
            Some(d) => d.apply(&self.merged),
            None => self.merged.clone(),
        };
        Ok(Schema::new(
            merged
                .iter()
                .map(|f| {
                    // Columns seen only as JSON null have no type yet: strings hold anything.
                    if f.data_type() == &DataType::Null {
                        Field::new(f.name(), DataType::Utf8, true)
                    } else {
                        f.as_ref().clone()
                    }
                })
                .collect::<Vec<_>>(),
        ))
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

    #[test]
    fn empty_sample_is_a_clear_error() {
        let e = infer_schema(FileFormat::Json, &CsvFormat::default(), &[], false).unwrap_err();
        assert!(
            e.to_string()
                .contains("give the stream an explicit `schema`")
        );
    }
}
