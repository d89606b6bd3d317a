//! Parquet input, conformed to the stream schema by column name.
//!
//! Two ways in: [`ParquetDecoder`] buffers a small file (its footer is at the end) and decodes
//! it at `finish`; [`parquet_batches`] reads a file of any size through an
//! [`AsyncFileReader`] (ranged reads): the footer first, then one row group at a time, so
//! memory follows the largest row group, not the file.

use crate::conform::Conformer;
use crate::error::FormatError;
use crate::rescue::SchemaPolicy;
use arrow::array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::{Bytes, BytesMut};
use futures::stream::StreamExt;
use landfall_core::seams::SeamResult;
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::async_reader::AsyncFileReader;
use std::sync::{Arc, Mutex};

pub struct ParquetDecoder {
    path: String,
    batch_size: usize,
    buf: BytesMut,
    conformer: Conformer,
}

impl ParquetDecoder {
    pub fn new(path: &str, schema: SchemaRef, batch_size: usize, policy: SchemaPolicy) -> Self {
        ParquetDecoder {
            path: path.to_string(),
            batch_size,
            buf: BytesMut::new(),
            conformer: Conformer::new(path, schema, policy),
        }
    }
}

/// The Arrow schema stored in a Parquet file's footer.
pub fn parquet_schema(path: &str, bytes: Bytes) -> Result<SchemaRef, FormatError> {
    ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map(|b| b.schema().clone())
        .map_err(|e| unreadable(path, &e))
}

fn unreadable(path: &str, e: &dyn std::fmt::Display) -> FormatError {
    FormatError::Unreadable {
        path: path.to_string(),
        reason: format!("not a readable Parquet file: {e}"),
    }
}

/// The Arrow schema of a Parquet file, from its footer only (one or two ranged reads).
pub async fn parquet_footer_schema<R>(path: &str, reader: R) -> Result<SchemaRef, FormatError>
where
    R: AsyncFileReader + Unpin + Send + 'static,
{
    ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map(|b| b.schema().clone())
        .map_err(|e| unreadable(path, &e))
}

/// Read a Parquet file row group by row group, in batches of `batch_size` rows conformed to
/// `schema` under `policy`. An error of the reader (the object changed, the network) ends the
/// stream as an `Unreadable` error; the caller's reader may record what it was. The
/// conformer counts rescued rows and new columns as the stream goes.
pub async fn parquet_batches<R>(
    path: &str,
    reader: R,
    schema: SchemaRef,
    batch_size: usize,
    policy: SchemaPolicy,
) -> Result<crate::conform::ConformedBatches, FormatError>
where
    R: AsyncFileReader + Unpin + Send + 'static,
{
    let stream = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| unreadable(path, &e))?
        .with_batch_size(batch_size)
        .build()
        .map_err(|e| unreadable(path, &e))?;
    let conformer = Arc::new(Mutex::new(Conformer::new(path, schema, policy)));
    let shared = conformer.clone();
    let path = path.to_string();
    let batches = stream
        .map(move |b| match b {
            Ok(b) => shared.lock().unwrap_or_else(|e| e.into_inner()).conform(b),
            Err(e) => Err(unreadable(&path, &e)),
        })
        .boxed();
    Ok((batches, conformer))
}

impl landfall_core::Decoder for ParquetDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        self.buf.extend_from_slice(&chunk);
        Ok(Vec::new())
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let bytes = std::mem::take(&mut self.buf).freeze();
        let unreadable = |e: &dyn std::fmt::Display| unreadable(&self.path, e);
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(|e| unreadable(&e))?
            .with_batch_size(self.batch_size)
            .build()
            .map_err(|e| unreadable(&e))?;
        let mut out = Vec::new();
        for b in reader {
            let b = b.map_err(|e| unreadable(&e))?;
            out.push(self.conformer.conform(b)?);
        }
        Ok(out)
    }

    fn rescued_rows(&self) -> u64 {
        self.conformer.rescued_rows
    }

    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        self.conformer.new_columns.fields().to_vec()
    }
}
