//! The `binary_file` format: one row per file with Spark's fixed schema
//! `path STRING, modification_time TIMESTAMP, length BIGINT, content BINARY`.
//!
//! The whole file is the `content` value, so it is held in memory: files larger than
//! `binary_file.max_file_size` are skipped with the reason `too_large` before they are read
//! (by the engine; see `landfall_core::SkipKind::TooLarge`). Compressed files are not
//! decompressed: their bytes are the content, as in Spark.

use crate::error::FormatError;
use arrow::array::TimestampMicrosecondArray;
use arrow::array::{ArrayRef, BinaryArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use landfall_core::Decoder;
use landfall_core::seams::SeamResult;
use std::sync::Arc;

/// The fixed schema of `binary_file`.
pub fn binary_file_schema() -> Schema {
    Schema::new(vec![
        Field::new("path", DataType::Utf8, true),
        Field::new(
            "modification_time",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("length", DataType::Int64, true),
        Field::new("content", DataType::Binary, true),
    ])
}

pub struct BinaryFileDecoder {
    path: String,
    modified: DateTime<Utc>,
    schema: SchemaRef,
    content: Vec<u8>,
}

impl BinaryFileDecoder {
    /// `path`: the file as the user wrote the source (the `path` column).
    pub fn new(
        path: &str,
        modified: DateTime<Utc>,
        schema: SchemaRef,
    ) -> Result<Self, FormatError> {
        if schema.fields().len() != 4 {
            return Err(FormatError::Column {
                path: path.to_string(),
                column: "content".into(),
                reason: "binary_file has the fixed schema path STRING, modification_time TIMESTAMP, length BIGINT, content BINARY".into(),
            });
        }
        Ok(BinaryFileDecoder {
            path: path.to_string(),
            modified,
            schema,
            content: Vec::new(),
        })
    }
}

impl Decoder for BinaryFileDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        self.content.extend_from_slice(&chunk);
        Ok(Vec::new())
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let content = std::mem::take(&mut self.content);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![self.path.clone()])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![self.modified.timestamp_micros()])
                    .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from(vec![content.len() as i64])),
            Arc::new(BinaryArray::from(vec![content.as_slice()])),
        ];
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| {
            FormatError::Unreadable {
                path: self.path.clone(),
                reason: e.to_string(),
            }
        })?;
        Ok(vec![batch])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Array;

    #[test]
    fn one_row_with_the_bytes_as_they_are() {
        let t = DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut d =
            BinaryFileDecoder::new("s3://b/x.bin", t, Arc::new(binary_file_schema())).unwrap();
        let input = b"\x00\xff\x01binary\n";
        let batches = crate::decode_in_two(&mut d, input, 3);
        assert_eq!(batches.len(), 1);
        let b = &batches[0];
        assert_eq!(b.num_rows(), 1);
        let content = b.column(3).as_any().downcast_ref::<BinaryArray>().unwrap();
        assert_eq!(content.value(0), input);
        let len = b.column(2).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(len.value(0), input.len() as i64);
        let ts = b
            .column(1)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(ts.value(0), t.timestamp_micros());
        assert!(!b.column(0).is_null(0));
    }
}
