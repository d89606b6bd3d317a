//! Parquet input: the file is buffered (its footer is at the end), then read batch by batch
//! and conformed to the stream schema by column name.

use crate::conform::conform;
use crate::error::FormatError;
use arrow::array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::{Bytes, BytesMut};
use landfall_core::seams::SeamResult;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

pub struct ParquetDecoder {
    path: String,
    schema: SchemaRef,
    batch_size: usize,
    buf: BytesMut,
}

impl ParquetDecoder {
    pub fn new(path: &str, schema: SchemaRef, batch_size: usize) -> Self {
        ParquetDecoder {
            path: path.to_string(),
            schema,
            batch_size,
            buf: BytesMut::new(),
        }
    }
}

/// The Arrow schema stored in a Parquet file's footer.
pub fn parquet_schema(path: &str, bytes: Bytes) -> Result<SchemaRef, FormatError> {
    ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map(|b| b.schema().clone())
        .map_err(|e| FormatError::Unreadable {
            path: path.to_string(),
            reason: format!("not a readable Parquet file: {e}"),
        })
}

impl landfall_core::Decoder for ParquetDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        self.buf.extend_from_slice(&chunk);
        Ok(Vec::new())
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let bytes = std::mem::take(&mut self.buf).freeze();
        let unreadable = |e: &dyn std::fmt::Display| FormatError::Unreadable {
            path: self.path.clone(),
            reason: format!("not a readable Parquet file: {e}"),
        };
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(|e| unreadable(&e))?
            .with_batch_size(self.batch_size)
            .build()
            .map_err(|e| unreadable(&e))?;
        let mut out = Vec::new();
        for b in reader {
            let b = b.map_err(|e| unreadable(&e))?;
            out.push(conform(&self.path, b, &self.schema)?);
        }
        Ok(out)
    }
}
