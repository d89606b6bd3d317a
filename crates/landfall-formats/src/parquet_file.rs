//! Parquet input, conformed to the stream schema by column name.
//!
//! Two ways in: [`ParquetDecoder`] buffers a small file (its footer is at the end) and decodes
//! it at `finish`; [`parquet_batches`] reads a file of any size through an
//! [`AsyncFileReader`] (ranged reads): the footer first, then one row group at a time, so
//! memory follows the largest row group, not the file.
//!
//! The reader decodes the Arrow schema a writer embeds in the footer with arrow-ipc, which
//! panics on some damaged ones: every entry into the reader is guarded
//! ([`crate::panic_guard`]), a panic reported as a corrupt file.

use crate::conform::Conformer;
use crate::error::FormatError;
use crate::panic_guard::{guarded_future, guarded_stream};
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
    guarded(path, || {
        ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map(|b| b.schema().clone())
            .map_err(|e| unreadable(path, &e))
    })
}

/// Run `f`, turning a panic of the reader into an error of the file.
fn guarded<T>(path: &str, f: impl FnOnce() -> Result<T, FormatError>) -> Result<T, FormatError> {
    crate::panic_guard::guarded("Parquet", f).unwrap_or_else(|p| Err(unreadable(path, &p)))
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
    match guarded_future("Parquet", ParquetRecordBatchStreamBuilder::new(reader)).await {
        Ok(b) => b
            .map(|b| b.schema().clone())
            .map_err(|e| unreadable(path, &e)),
        Err(p) => Err(unreadable(path, &p)),
    }
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
    let builder = guarded_future("Parquet", ParquetRecordBatchStreamBuilder::new(reader))
        .await
        .map_err(|p| unreadable(path, &p))?
        .map_err(|e| unreadable(path, &e))?;
    let stream = builder
        .with_batch_size(batch_size)
        .build()
        .map_err(|e| unreadable(path, &e))?;
    let conformer = Arc::new(Mutex::new(Conformer::new(path, schema, policy)));
    let shared = conformer.clone();
    let path = path.to_string();
    // After a panic the stream ends (it is not polled again).
    let batches = guarded_stream("Parquet", stream)
        .map(move |b| match b {
            Ok(Ok(b)) => shared.lock().unwrap_or_else(|e| e.into_inner()).conform(b),
            Ok(Err(e)) => Err(unreadable(&path, &e)),
            Err(p) => Err(unreadable(&path, &p)),
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
        let (path, batch_size) = (self.path.clone(), self.batch_size);
        // Only the reader is guarded: a panic in landfall's own conforming is a bug to see,
        // not a corrupt file.
        let read = guarded(&path, || {
            let unreadable = |e: &dyn std::fmt::Display| unreadable(&path, e);
            ParquetRecordBatchReaderBuilder::try_new(bytes)
                .map_err(|e| unreadable(&e))?
                .with_batch_size(batch_size)
                .build()
                .map_err(|e| unreadable(&e))?
                .map(|b| b.map_err(|e| unreadable(&e)))
                .collect::<Result<Vec<_>, _>>()
        })?;
        Ok(read
            .into_iter()
            .map(|b| self.conformer.conform(b))
            .collect::<Result<_, _>>()?)
    }

    fn rescued_rows(&self) -> u64 {
        self.conformer.rescued_rows
    }

    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        self.conformer.new_columns.fields().to_vec()
    }
}
