//! ORC input (orc-rust, the Arrow-native reader of datafusion-contrib, on the workspace's
//! arrow major), conformed to the stream schema by column name like Parquet.
//!
//! Two ways in, as for Parquet: [`OrcDecoder`] buffers a small file (the footer and postscript
//! are at the end) and decodes it at `finish`; [`orc_batches`] reads a file of any size through
//! an [`AsyncChunkReader`] (ranged reads): the tail first, then one stripe at a time, so memory
//! follows the largest stripe, not the file.
//!
//! Types as orc-rust maps them: `timestamp` is a zone-less TIMESTAMP_NTZ and `timestamp with
//! local time zone` a UTC TIMESTAMP, both read at microsecond precision (Delta's); `char` and
//! `varchar` are STRING; a `union` has no Delta type (a stream inferring one stops with the
//! column named). The reader is younger than the Parquet one: a panic inside it on a damaged
//! file is caught and the file reported corrupt, never a crashed stream.

use crate::conform::Conformer;
use crate::error::FormatError;
use crate::rescue::SchemaPolicy;
use arrow::array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, StreamExt};
use landfall_core::seams::SeamResult;
use orc_rust::ArrowReaderBuilder;
use orc_rust::reader::AsyncChunkReader;
use orc_rust::schema::TimestampPrecision;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

fn unreadable(path: &str, e: &dyn std::fmt::Display) -> FormatError {
    FormatError::Unreadable {
        path: path.to_string(),
        reason: format!("not a readable ORC file: {e}"),
    }
}

/// The message of a caught panic.
fn panicked(payload: Box<dyn std::any::Any + Send>) -> String {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    format!("the ORC reader failed on this file ({msg})")
}

/// Run `f`, turning a panic of the reader into an error of the file.
fn guarded<T>(path: &str, f: impl FnOnce() -> Result<T, FormatError>) -> Result<T, FormatError> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(unreadable(path, &panicked(p))))
}

/// The Arrow schema of an ORC file held in memory (timestamps at microsecond precision).
pub fn orc_schema(path: &str, bytes: Bytes) -> Result<SchemaRef, FormatError> {
    guarded(path, || {
        ArrowReaderBuilder::try_new(bytes)
            .map(|b| {
                b.with_timestamp_precision(TimestampPrecision::Microsecond)
                    .schema()
            })
            .map_err(|e| unreadable(path, &e))
    })
}

/// The Arrow schema of an ORC file, from its tail only (ranged reads).
pub async fn orc_footer_schema<R>(path: &str, reader: R) -> Result<SchemaRef, FormatError>
where
    R: AsyncChunkReader + 'static,
{
    let open = AssertUnwindSafe(ArrowReaderBuilder::try_new_async(reader));
    match futures::FutureExt::catch_unwind(open).await {
        Ok(Ok(b)) => Ok(b
            .with_timestamp_precision(TimestampPrecision::Microsecond)
            .schema()),
        Ok(Err(e)) => Err(unreadable(path, &e)),
        Err(p) => Err(unreadable(path, &panicked(p))),
    }
}

/// Read an ORC file stripe by stripe, in batches of `batch_size` rows conformed to `schema`
/// under `policy`. An error of the reader (the object changed, the network, a damaged stripe)
/// ends the stream as an `Unreadable` error; the caller's reader may record what it was.
#[allow(clippy::type_complexity)]
pub async fn orc_batches<R>(
    path: &str,
    reader: R,
    schema: SchemaRef,
    batch_size: usize,
    policy: SchemaPolicy,
) -> Result<
    (
        BoxStream<'static, Result<RecordBatch, FormatError>>,
        Arc<Mutex<Conformer>>,
    ),
    FormatError,
>
where
    R: AsyncChunkReader + 'static,
{
    let open = AssertUnwindSafe(ArrowReaderBuilder::try_new_async(reader));
    let builder = match futures::FutureExt::catch_unwind(open).await {
        Ok(b) => b.map_err(|e| unreadable(path, &e))?,
        Err(p) => return Err(unreadable(path, &panicked(p))),
    };
    let stream = builder
        .with_batch_size(batch_size)
        .with_timestamp_precision(TimestampPrecision::Microsecond)
        .build_async();
    let conformer = Arc::new(Mutex::new(Conformer::new(path, schema, policy)));
    let shared = conformer.clone();
    let path = path.to_string();
    // After a panic the stream ends (catch_unwind does not poll it again).
    let batches = AssertUnwindSafe(stream)
        .catch_unwind()
        .map(move |b| match b {
            Ok(Ok(b)) => shared.lock().unwrap_or_else(|e| e.into_inner()).conform(b),
            Ok(Err(e)) => Err(unreadable(&path, &e)),
            Err(p) => Err(unreadable(&path, &panicked(p))),
        })
        .boxed();
    Ok((batches, conformer))
}

/// A small ORC file buffered whole and decoded at `finish`.
pub struct OrcDecoder {
    path: String,
    batch_size: usize,
    buf: BytesMut,
    conformer: Conformer,
}

impl OrcDecoder {
    pub fn new(path: &str, schema: SchemaRef, batch_size: usize, policy: SchemaPolicy) -> Self {
        OrcDecoder {
            path: path.to_string(),
            batch_size,
            buf: BytesMut::new(),
            conformer: Conformer::new(path, schema, policy),
        }
    }
}

impl landfall_core::Decoder for OrcDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        self.buf.extend_from_slice(&chunk);
        Ok(Vec::new())
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let bytes = std::mem::take(&mut self.buf).freeze();
        let (path, batch_size) = (self.path.clone(), self.batch_size);
        let conformer = &mut self.conformer;
        Ok(guarded(&path, || {
            let reader = ArrowReaderBuilder::try_new(bytes)
                .map_err(|e| unreadable(&path, &e))?
                .with_batch_size(batch_size)
                .with_timestamp_precision(TimestampPrecision::Microsecond)
                .build();
            let mut out = Vec::new();
            for b in reader {
                out.push(conformer.conform(b.map_err(|e| unreadable(&path, &e))?)?);
            }
            Ok(out)
        })?)
    }

    fn rescued_rows(&self) -> u64 {
        self.conformer.rescued_rows
    }

    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        self.conformer.new_columns.fields().to_vec()
    }
}

#[cfg(test)]
#[path = "orc_tests.rs"]
mod tests;
