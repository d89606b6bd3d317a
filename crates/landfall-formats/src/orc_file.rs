//! ORC input (orc-rust, the Arrow-native reader of datafusion-contrib, on the workspace's
//! arrow major), conformed to the stream schema by column name like Parquet.
//!
//! Two ways in, as for Parquet: [`OrcDecoder`] buffers a small file (the footer and postscript
//! are at the end) and decodes it at `finish`; [`orc_batches`] reads a file of any size through
//! an [`AsyncChunkReader`] (ranged reads): the tail first, then one stripe at a time, so memory
//! follows the largest stripe, not the file.
//!
//! Types: `timestamp` and `timestamp with local time zone` are both TIMESTAMP, as Spark reads
//! them; a plain `timestamp` is the writer's wall clock taken as UTC (what Spark shows in a UTC
//! session), one with a local time zone the instant itself. They are decoded as nanoseconds (orc-rust's DECIMAL(38, 9) form, which neither fails
//! on sub-microsecond digits nor overflows outside 1677-2262 as nanosecond timestamps would)
//! and floored to microseconds, Delta's unit, as Spark truncates them. Each value is checked
//! against the file's own column statistics: one far outside was not read as written (see
//! [`Bounds`]) and makes the file corrupt. `char` and `varchar` are
//! STRING; a `union` has no Delta type (a stream inferring one stops with the column named).
//! The reader is younger than the Parquet one: a panic inside it on a damaged file is caught
//! and the file reported corrupt, never a crashed stream.

use crate::conform::Conformer;
use crate::error::FormatError;
use crate::panic_guard::{guarded_future, guarded_stream};
use crate::rescue::SchemaPolicy;
use arrow::array::{
    Array, ArrayRef, AsArray, ListArray, MapArray, RecordBatch, StructArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::Decimal128Type;
use arrow_schema::{ArrowError, DataType, FieldRef, Fields, Schema, SchemaRef, TimeUnit};
use bytes::{Bytes, BytesMut};
use futures::stream::StreamExt;
use landfall_core::seams::SeamResult;
use orc_rust::ArrowReaderBuilder;
use orc_rust::reader::AsyncChunkReader;
use orc_rust::statistics::{ColumnStatistics, TypeStatistics};
use std::sync::{Arc, Mutex};

/// orc-rust's nanosecond form of a timestamp: seconds with nine decimals.
const NANOS: DataType = DataType::Decimal128(38, 9);

fn has_timestamp(ty: &DataType) -> bool {
    match ty {
        DataType::Timestamp(..) => true,
        DataType::Struct(fs) => fs.iter().any(|f| has_timestamp(f.data_type())),
        DataType::List(f) | DataType::Map(f, _) => has_timestamp(f.data_type()),
        _ => false,
    }
}

/// `ty` with every timestamp replaced by `leaf`.
fn map_timestamps(ty: &DataType, leaf: &DataType) -> DataType {
    let field = |f: &FieldRef| {
        Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(map_timestamps(f.data_type(), leaf)),
        )
    };
    match ty {
        DataType::Timestamp(..) => leaf.clone(),
        DataType::Struct(fs) => DataType::Struct(fs.iter().map(field).collect()),
        DataType::List(f) => DataType::List(field(f)),
        DataType::Map(f, sorted) => DataType::Map(field(f), *sorted),
        other => other.clone(),
    }
}

fn map_schema(schema: &Schema, leaf: &DataType) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| {
                f.as_ref()
                    .clone()
                    .with_data_type(map_timestamps(f.data_type(), leaf))
            })
            .collect::<Vec<_>>(),
    ))
}

fn micros_utc() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// The schema a file is reported with (timestamps as UTC microseconds) and the one it is read
/// with (timestamps as nanosecond decimals), from the file's own.
fn schemas(file: &Schema) -> (SchemaRef, SchemaRef) {
    (map_schema(file, &micros_utc()), map_schema(file, &NANOS))
}

/// Slack around a file's timestamp statistics: orc-rust reads a plain timestamp as the writer's
/// wall clock, statistics may be in UTC, and no time zone is more than a day off.
const STATS_SLACK_MS: i64 = 2 * 86_400_000;

/// Where the file's own statistics say its timestamps lie (milliseconds, widened by
/// [`STATS_SLACK_MS`]), in the shape of its schema. A decoded value outside was not read as
/// written: orc-rust 0.9 misreads the negative nanoseconds the ORC C++ writer (pyarrow) stores
/// before 1970, by about 73 years and without an error.
#[derive(Debug, Clone)]
enum Bounds {
    Leaf(Option<(i64, i64)>),
    /// Struct members, a list's item, or a map's key and value.
    Nested(Vec<Bounds>),
    Other,
}

impl Bounds {
    fn of(ty: &orc_rust::schema::DataType, stats: &[ColumnStatistics]) -> Bounds {
        use orc_rust::schema::DataType as Orc;
        match ty {
            Orc::Timestamp { column_index } | Orc::TimestampWithLocalTimezone { column_index } => {
                Bounds::Leaf(
                    stats
                        .get(*column_index)
                        .and_then(|s| match s.type_statistics()? {
                            TypeStatistics::Timestamp {
                                min,
                                max,
                                min_utc,
                                max_utc,
                            } => Some((
                                (*min).min(*min_utc).saturating_sub(STATS_SLACK_MS),
                                (*max).max(*max_utc).saturating_add(STATS_SLACK_MS),
                            )),
                            _ => None,
                        }),
                )
            }
            Orc::Struct { children, .. } => Bounds::Nested(
                children
                    .iter()
                    .map(|c| Bounds::of(c.data_type(), stats))
                    .collect(),
            ),
            Orc::List { child, .. } => Bounds::Nested(vec![Bounds::of(child, stats)]),
            Orc::Map { key, value, .. } => {
                Bounds::Nested(vec![Bounds::of(key, stats), Bounds::of(value, stats)])
            }
            _ => Bounds::Other,
        }
    }

    fn child(&self, i: usize) -> &Bounds {
        match self {
            Bounds::Nested(c) => c.get(i).unwrap_or(&Bounds::Other),
            _ => &Bounds::Other,
        }
    }
}

/// How one file's timestamps are read and reported: its own schema, the schema it is
/// reported with, and its statistics' bounds per top-level column.
struct Timestamps {
    file: SchemaRef,
    reported: SchemaRef,
    bounds: Vec<Bounds>,
}

impl Timestamps {
    /// The plan for the file `builder` opened, and the schema to read it with.
    fn plan<R>(builder: &ArrowReaderBuilder<R>) -> (Self, SchemaRef) {
        let file = builder.schema();
        let (reported, read) = schemas(&file);
        let meta = builder.file_metadata();
        let stats = meta.column_file_statistics();
        let bounds = meta
            .root_data_type()
            .children()
            .iter()
            .map(|c| Bounds::of(c.data_type(), stats))
            .collect();
        (
            Timestamps {
                file,
                reported,
                bounds,
            },
            read,
        )
    }

    /// A decoded batch as the reported schema.
    fn report(&self, b: RecordBatch) -> Result<RecordBatch, ArrowError> {
        if !self
            .file
            .fields()
            .iter()
            .any(|f| has_timestamp(f.data_type()))
        {
            return Ok(b);
        }
        let cols = b
            .columns()
            .iter()
            .zip(self.file.fields())
            .enumerate()
            .map(|(i, (c, f))| {
                to_micros(
                    c,
                    f.data_type(),
                    self.bounds.get(i).unwrap_or(&Bounds::Other),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        RecordBatch::try_new(self.reported.clone(), cols)
    }
}

/// A decoded array of the read schema as the reported one: nanosecond decimals floored to
/// microseconds, at every level, each checked against the file's statistics. `file`: the
/// column's type in the file.
fn to_micros(a: &ArrayRef, file: &DataType, bounds: &Bounds) -> Result<ArrayRef, ArrowError> {
    if !has_timestamp(file) {
        return Ok(a.clone());
    }
    let reported = |f: &FieldRef| {
        Arc::new(
            f.as_ref()
                .clone()
                .with_data_type(map_timestamps(f.data_type(), &micros_utc())),
        )
    };
    Ok(match file {
        DataType::Timestamp(..) => {
            let nanos = a.as_primitive::<Decimal128Type>();
            let micros: TimestampMicrosecondArray = nanos.try_unary(|n| {
                i64::try_from(n.div_euclid(1000)).map_err(|_| {
                    ArrowError::ComputeError(format!("timestamp {n} ns is out of range"))
                })
            })?;
            if let Bounds::Leaf(Some((lo, hi))) = bounds
                && let Some(v) = micros
                    .iter()
                    .flatten()
                    .find(|v| !(*lo..=*hi).contains(&v.div_euclid(1000)))
            {
                return Err(ArrowError::ComputeError(format!(
                    "a timestamp decoded as {v} us lies outside the file's own statistics \
                     ({lo}..{hi} ms): it cannot be read as written (orc-rust 0.9 misreads \
                     timestamps before 1970 from the ORC C++ writer)"
                )));
            }
            Arc::new(micros.with_timezone("UTC"))
        }
        DataType::Struct(fields) => {
            let s = a.as_struct();
            let cols = s
                .columns()
                .iter()
                .zip(fields)
                .enumerate()
                .map(|(i, (c, f))| to_micros(c, f.data_type(), bounds.child(i)))
                .collect::<Result<Vec<_>, _>>()?;
            let fields: Fields = fields.iter().map(reported).collect();
            Arc::new(StructArray::try_new(fields, cols, s.nulls().cloned())?)
        }
        DataType::List(f) => {
            let l = a.as_list::<i32>();
            let values = to_micros(l.values(), f.data_type(), bounds.child(0))?;
            Arc::new(ListArray::try_new(
                reported(f),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?)
        }
        DataType::Map(f, sorted) => {
            let m = a.as_map();
            let entries: ArrayRef = Arc::new(m.entries().clone());
            // The entries struct's key and value are the map's own.
            let entries = to_micros(&entries, f.data_type(), bounds)?;
            Arc::new(MapArray::try_new(
                reported(f),
                m.offsets().clone(),
                entries.as_struct().clone(),
                m.nulls().cloned(),
                *sorted,
            )?)
        }
        _ => a.clone(),
    })
}

fn unreadable(path: &str, e: &dyn std::fmt::Display) -> FormatError {
    FormatError::Unreadable {
        path: path.to_string(),
        reason: format!("not a readable ORC file: {e}"),
    }
}

/// Run `f`, turning a panic of the reader into an error of the file.
fn guarded<T>(path: &str, f: impl FnOnce() -> Result<T, FormatError>) -> Result<T, FormatError> {
    crate::panic_guard::guarded("ORC", f).unwrap_or_else(|p| Err(unreadable(path, &p)))
}

/// Check the type tree in the file's footer ([`crate::orc_tail`]) through ranged reads: the
/// last 64 KiB, then the whole tail when its footer is longer.
async fn check_tail_of<R: AsyncChunkReader>(path: &str, reader: &mut R) -> Result<(), FormatError> {
    let io = |e: std::io::Error| unreadable(path, &e);
    let len = reader.len().await.map_err(io)?;
    let take = len.min(64 << 10);
    let mut tail = reader.get_bytes(len - take, take).await.map_err(io)?;
    if let Some(n) = crate::orc_tail::tail_len(&tail)
        && n as u64 > take
        && n as u64 <= len
    {
        tail = reader
            .get_bytes(len - n as u64, n as u64)
            .await
            .map_err(io)?;
    }
    crate::orc_tail::check_tail(&tail, len).map_err(|e| unreadable(path, &e))
}

/// The Arrow schema of an ORC file held in memory (timestamps at microsecond precision).
pub fn orc_schema(path: &str, bytes: Bytes) -> Result<SchemaRef, FormatError> {
    crate::orc_tail::check_tail(&bytes, bytes.len() as u64).map_err(|e| unreadable(path, &e))?;
    guarded(path, || {
        ArrowReaderBuilder::try_new(bytes)
            .map(|b| schemas(&b.schema()).0)
            .map_err(|e| unreadable(path, &e))
    })
}

/// The Arrow schema of an ORC file, from its tail only (ranged reads).
pub async fn orc_footer_schema<R>(path: &str, mut reader: R) -> Result<SchemaRef, FormatError>
where
    R: AsyncChunkReader + 'static,
{
    check_tail_of(path, &mut reader).await?;
    match guarded_future("ORC", ArrowReaderBuilder::try_new_async(reader)).await {
        Ok(Ok(b)) => Ok(schemas(&b.schema()).0),
        Ok(Err(e)) => Err(unreadable(path, &e)),
        Err(p) => Err(unreadable(path, &p)),
    }
}

/// Read an ORC file stripe by stripe, in batches of `batch_size` rows conformed to `schema`
/// under `policy`. An error of the reader (the object changed, the network, a damaged stripe)
/// ends the stream as an `Unreadable` error; the caller's reader may record what it was.
pub async fn orc_batches<R>(
    path: &str,
    mut reader: R,
    schema: SchemaRef,
    batch_size: usize,
    policy: SchemaPolicy,
) -> Result<crate::conform::ConformedBatches, FormatError>
where
    R: AsyncChunkReader + 'static,
{
    check_tail_of(path, &mut reader).await?;
    let builder = match guarded_future("ORC", ArrowReaderBuilder::try_new_async(reader)).await {
        Ok(b) => b.map_err(|e| unreadable(path, &e))?,
        Err(p) => return Err(unreadable(path, &p)),
    };
    let (timestamps, read) = Timestamps::plan(&builder);
    let stream = builder
        .with_batch_size(batch_size)
        .with_schema(read)
        .build_async();
    let conformer = Arc::new(Mutex::new(Conformer::new(path, schema, policy)));
    let shared = conformer.clone();
    let path = path.to_string();
    // After a panic the stream ends (it is not polled again).
    let batches = guarded_stream("ORC", stream)
        .map(move |b| match b {
            Ok(Ok(b)) => match timestamps.report(b) {
                Ok(b) => shared.lock().unwrap_or_else(|e| e.into_inner()).conform(b),
                Err(e) => Err(unreadable(&path, &e)),
            },
            Ok(Err(e)) => Err(unreadable(&path, &e)),
            Err(p) => Err(unreadable(&path, &p)),
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
        // Only the reader is guarded: a panic in landfall's own checks and conforming is a
        // bug to see, not a corrupt file.
        crate::orc_tail::check_tail(&bytes, bytes.len() as u64)
            .map_err(|e| unreadable(&path, &e))?;
        let (timestamps, read) = guarded(&path, || {
            let builder = ArrowReaderBuilder::try_new(bytes).map_err(|e| unreadable(&path, &e))?;
            let (timestamps, read) = Timestamps::plan(&builder);
            let batches = builder
                .with_batch_size(batch_size)
                .with_schema(read)
                .build()
                .map(|b| b.map_err(|e| unreadable(&path, &e)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((timestamps, batches))
        })?;
        let mut out = Vec::with_capacity(read.len());
        for b in read {
            let b = timestamps.report(b).map_err(|e| unreadable(&path, &e))?;
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

#[cfg(test)]
#[path = "orc_tests.rs"]
mod tests;
