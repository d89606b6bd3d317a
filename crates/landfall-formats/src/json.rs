//! Newline-delimited JSON, decoded incrementally with arrow-json. Primitive values are coerced
//! to strings where the schema asks for strings (Auto Loader's default of string columns).
//! Keys the schema lacks are ignored here (rescued data comes with schema evolution).

use crate::conform::conform;
use crate::error::FormatError;
use arrow::array::RecordBatch;
use arrow_json::reader::{Decoder as JsonInner, ReaderBuilder};
use arrow_schema::SchemaRef;
use bytes::Bytes;
use landfall_core::seams::SeamResult;

pub struct JsonDecoder {
    path: String,
    schema: SchemaRef,
    inner: JsonInner,
    offset: u64,
}

impl JsonDecoder {
    pub fn new(path: &str, schema: SchemaRef, batch_size: usize) -> Result<Self, FormatError> {
        let inner = ReaderBuilder::new(schema.clone())
            .with_batch_size(batch_size)
            .with_coerce_primitive(true)
            .build_decoder()
            .map_err(|e| FormatError::Unreadable {
                path: path.to_string(),
                reason: e.to_string(),
            })?;
        Ok(JsonDecoder {
            path: path.to_string(),
            schema,
            inner,
            offset: 0,
        })
    }

    fn malformed(&self, reason: impl ToString) -> FormatError {
        FormatError::Malformed {
            path: self.path.clone(),
            format: "JSON",
            offset: self.offset,
            reason: reason.to_string(),
        }
    }

    fn flush(&mut self, out: &mut Vec<RecordBatch>) -> Result<(), FormatError> {
        if let Some(b) = self.inner.flush().map_err(|e| self.malformed(e))? {
            out.push(conform(&self.path, b, &self.schema)?);
        }
        Ok(())
    }
}

impl landfall_core::Decoder for JsonDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let mut rest: &[u8] = &chunk;
        while !rest.is_empty() {
            let used = self.inner.decode(rest).map_err(|e| self.malformed(e))?;
            self.offset += used as u64;
            rest = &rest[used..];
            // `decode` stops early only when a batch is full, at a record boundary. When it used
            // the whole chunk, a record may be half read (and counted in `len()`): flushing
            // then would cut it, so wait for the next chunk or `finish`.
            if !rest.is_empty() {
                self.flush(&mut out)?;
            }
        }
        Ok(out)
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        self.flush(&mut out)?;
        if self.inner.has_partial_record() {
            return Err(self.malformed("the file ends inside a record").into());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    /// Every way of cutting the input into two chunks, with batches smaller than the input,
    /// decodes to the same rows.
    #[test]
    fn chunk_boundaries_anywhere() {
        let input: String = (0..7)
            .map(|i| format!("{{\"id\":{i},\"s\":\"v{i} x\"}}\n"))
            .collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        for cut in 0..=input.len() {
            let mut d = JsonDecoder::new("t.json", schema.clone(), 2).unwrap();
            let batches = crate::decode_in_two(&mut d, input.as_bytes(), cut);
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            assert_eq!(rows, 7, "cut at byte {cut}");
        }
    }
}
