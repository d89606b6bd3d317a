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
    batch_size: usize,
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
            batch_size,
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
            if self.inner.len() >= self.batch_size || (used == 0 && !rest.is_empty()) {
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
