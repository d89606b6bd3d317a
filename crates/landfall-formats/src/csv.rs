//! CSV, decoded incrementally with arrow-csv. With a header (the default) each file is read by
//! its own header: columns are matched to the stream schema by name (exact, then ignoring
//! case), columns the schema lacks are dropped and columns the file lacks are null. Without a
//! header, columns are taken by position.

use crate::conform::{conform, find_field};
use crate::error::FormatError;
use crate::{CsvFormat, DecodeOptions};
use arrow::array::RecordBatch;
use arrow_csv::reader::{Decoder as CsvInner, Format, ReaderBuilder};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::{Bytes, BytesMut};
use landfall_core::seams::SeamResult;
use std::sync::Arc;

pub struct CsvDecoder {
    path: String,
    schema: SchemaRef,
    format: CsvFormat,
    batch_size: usize,
    inner: Option<CsvInner>,
    /// Bytes held back until the header line is complete.
    head: BytesMut,
    offset: u64,
}

impl CsvDecoder {
    pub fn new(path: &str, schema: SchemaRef, opts: &DecodeOptions) -> Self {
        CsvDecoder {
            path: path.to_string(),
            schema,
            format: opts.csv.clone(),
            batch_size: opts.batch_size,
            inner: None,
            head: BytesMut::new(),
            offset: 0,
        }
    }

    fn malformed(&self, reason: impl ToString) -> FormatError {
        FormatError::Malformed {
            path: self.path.clone(),
            format: "CSV",
            offset: self.offset,
            reason: reason.to_string(),
        }
    }

    fn arrow_format(&self) -> Result<Format, FormatError> {
        let mut f = Format::default()
            .with_header(self.format.header)
            .with_delimiter(self.format.delimiter)
            .with_quote(self.format.quote);
        if let Some(e) = self.format.escape {
            f = f.with_escape(e);
        }
        if let Some(c) = self.format.comment {
            f = f.with_comment(c);
        }
        if let Some(n) = &self.format.null_value {
            let re = regex::Regex::new(&format!("^{}$", regex::escape(n)))
                .map_err(|e| self.malformed(e))?;
            f = f.with_null_regex(re);
        }
        Ok(f)
    }

    /// The schema of this file: its header names, typed as the stream schema types them.
    fn file_schema(&self, header_line: &[u8]) -> Result<SchemaRef, FormatError> {
        if !self.format.header {
            return Ok(self.schema.clone());
        }
        let (names, _) = self
            .arrow_format()?
            .infer_schema(std::io::Cursor::new(header_line), Some(0))
            .map_err(|e| self.malformed(format!("unreadable header: {e}")))?;
        let mut seen = std::collections::HashSet::new();
        let fields: Vec<Field> = names
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let name = if seen.insert(f.name().clone()) {
                    f.name().clone()
                } else {
                    format!("_c{i}")
                };
                let ty = find_field(&self.schema, &name)
                    .map(|t| t.data_type().clone())
                    .unwrap_or(DataType::Utf8);
                Field::new(name, ty, true)
            })
            .collect();
        Ok(Arc::new(Schema::new(fields)))
    }

    fn start(&mut self, header_line: &[u8]) -> Result<(), FormatError> {
        let schema = self.file_schema(header_line)?;
        let mut b = ReaderBuilder::new(schema)
            .with_batch_size(self.batch_size)
            .with_header(self.format.header);
        b = b.with_format(self.arrow_format()?);
        self.inner = Some(b.build_decoder());
        Ok(())
    }

    fn feed(&mut self, mut rest: &[u8], out: &mut Vec<RecordBatch>) -> Result<(), FormatError> {
        while !rest.is_empty() {
            let inner = self.inner.as_mut().expect("decoder started");
            let used = inner.decode(rest).map_err(|e| FormatError::Malformed {
                path: self.path.clone(),
                format: "CSV",
                offset: self.offset,
                reason: e.to_string(),
            })?;
            self.offset += used as u64;
            rest = &rest[used..];
            // As for JSON: flush only when `decode` stopped early because the batch is full.
            if !rest.is_empty() {
                self.flush(out)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut Vec<RecordBatch>) -> Result<(), FormatError> {
        let inner = self.inner.as_mut().expect("decoder started");
        let batch = inner.flush().map_err(|e| FormatError::Malformed {
            path: self.path.clone(),
            format: "CSV",
            offset: self.offset,
            reason: e.to_string(),
        })?;
        if let Some(b) = batch
            && b.num_rows() > 0
        {
            out.push(conform(&self.path, b, &self.schema)?);
        }
        Ok(())
    }
}

impl landfall_core::Decoder for CsvDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        if self.inner.is_none() {
            self.head.extend_from_slice(&chunk);
            let Some(nl) = self.head.iter().position(|&b| b == b'\n') else {
                return Ok(out);
            };
            let head = std::mem::take(&mut self.head).freeze();
            self.start(&head[..=nl])?;
            self.feed(&head, &mut out)?;
        } else {
            self.feed(&chunk, &mut out)?;
        }
        Ok(out)
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        if self.inner.is_none() {
            // A file without a newline: a header alone, or one headerless record.
            let head = std::mem::take(&mut self.head).freeze();
            if head.is_empty() {
                return Ok(out);
            }
            self.start(&head)?;
            self.feed(&head, &mut out)?;
        }
        // A final record without a trailing newline is completed by an empty decode.
        let inner = self.inner.as_mut().expect("decoder started");
        inner.decode(&[]).map_err(|e| self.malformed(e))?;
        self.flush(&mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    #[test]
    fn chunk_boundaries_anywhere() {
        let mut input = String::from("id,s\n");
        for i in 0..7 {
            input.push_str(&format!("{i},\"v{i}, x\"\n"));
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let opts = DecodeOptions {
            batch_size: 2,
            ..Default::default()
        };
        for cut in 0..=input.len() {
            let mut d = CsvDecoder::new("t.csv", schema.clone(), &opts);
            let batches = crate::decode_in_two(&mut d, input.as_bytes(), cut);
            let ids: Vec<i64> = batches
                .iter()
                .flat_map(|b| {
                    b.column(0)
                        .as_any()
                        .downcast_ref::<arrow::array::Int64Array>()
                        .unwrap()
                        .values()
                        .to_vec()
                })
                .collect();
            assert_eq!(ids, (0..7).collect::<Vec<_>>(), "cut at byte {cut}");
        }
    }
}
