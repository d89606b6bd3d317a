//! Per-file column statistics for the `stats` of a Delta `add` action, so readers can skip
//! files by value (PROTOCOL.md, "Per-file Statistics").
//!
//! The contract:
//! - `numRecords`, then `minValues`, `maxValues` and `nullCount`, each an object mirroring the
//!   data file's schema (struct columns are nested objects).
//! - Only the first [`NUM_INDEXED_COLS`] leaf columns of the data file, in schema order, get
//!   statistics: Delta's default `delta.dataSkippingNumIndexedCols`, where every leaf of a
//!   struct counts as a column. Partition columns are not in the data file and get none.
//! - `nullCount` for every indexed leaf (for a struct leaf, a null parent makes the leaf null).
//! - `minValues`/`maxValues` for integers, floats, decimals, strings, dates and timestamps; none
//!   for booleans, binary, lists and maps. A bound that cannot be stated safely is left out,
//!   which only means the file is never skipped on it: float columns holding a NaN, infinite
//!   floats, out-of-range dates, strings whose truncated max cannot be bumped.
//! - Formats: integers and floats as JSON numbers; decimals as JSON numbers with their exact
//!   digits and scale (`12.30`, as Spark writes a `BigDecimal`; deltalake's own writer goes
//!   through `f64`, which can round a bound the wrong way); dates `yyyy-MM-dd`; timestamps
//!   `yyyy-MM-ddTHH:mm:ss.SSSZ` (no `Z` without a time zone) at millisecond precision, min
//!   rounded down and max rounded up so both still bound the microsecond values; strings cut to
//!   [`STRING_PREFIX`] characters, the max then bumped with a tie-breaker character so that it
//!   stays >= every value (Delta Spark's `truncateMaxStringAgg`).
//!
//! Where the bounds come from:
//! - Numbers, dates and timestamps from the Arrow batches as they are written, one vectorised
//!   kernel pass per indexed column per batch. The footer could not tell whether a float
//!   column held a NaN (arrow-rs leaves NaN out of its statistics), and unsigned and decimal
//!   columns would need their logical type re-applied to its bytes.
//! - Strings from the Parquet footer ([`FileStats::to_json`]): arrow-rs compares every value
//!   for its own column statistics anyway, and comparing them a second time here was a
//!   twentieth of a large ingest's CPU. [`footer_bounds`] sets the writer's statistics to keep
//!   [`FOOTER_STRING_BYTES`] bytes, more than the [`KEY_BYTES`] the Delta bounds are cut from.
//!   A cut min is a prefix of the least value; a cut max is a prefix with its last character
//!   bumped, and arrow-rs bumps an earlier character only when the last ones cannot be bumped
//!   (U+007F, U+07FF, U+FFFF, U+D7FF, U+10FFFF). Either way the Delta max stays >= every value,
//!   and it is Delta Spark's own unless more than 256 bytes of such characters end the cut.
//!   A row group with values but no statistics leaves the column's string bounds out.

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use arrow::compute::{max, min, nullif};
use arrow::datatypes::*;
use arrow_schema::{DataType, Fields, Schema, TimeUnit};
use chrono::{DateTime, NaiveDate};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::{EnabledStatistics, WriterPropertiesBuilder};

/// Delta's default `delta.dataSkippingNumIndexedCols`.
pub const NUM_INDEXED_COLS: usize = 32;
/// Delta's default string prefix length for min/max (`stringPrefixLength`).
pub const STRING_PREFIX: usize = 32;

/// How a leaf's bounds are kept and written.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Int,
    Decimal(i8),
    Float32,
    Float64,
    Date32,
    Date64,
    Timestamp {
        unit: TimeUnit,
        zoned: bool,
    },
    String,
    /// `nullCount` only.
    CountOnly,
}

fn kind_of(dt: &DataType) -> Kind {
    use DataType::*;
    match dt {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => Kind::Int,
        Decimal128(_, scale) => Kind::Decimal(*scale),
        Float32 => Kind::Float32,
        Float64 => Kind::Float64,
        Date32 => Kind::Date32,
        Date64 => Kind::Date64,
        Timestamp(unit, tz) => Kind::Timestamp {
            unit: *unit,
            zoned: tz.is_some(),
        },
        Utf8 | LargeUtf8 | Utf8View => Kind::String,
        _ => Kind::CountOnly,
    }
}

/// Running bounds of one leaf.
#[derive(Debug)]
enum Bounds {
    None,
    /// Integers, decimals (unscaled), dates and timestamps (in their unit).
    Int(Option<(i128, i128)>),
    Float {
        range: Option<(f64, f64)>,
        nan: bool,
    },
    /// Strings: nothing while writing; the least and greatest [`string_key`] are read from
    /// the footer ([`footer_string_keys`]).
    String,
}

#[derive(Debug)]
struct Leaf {
    /// Names from the top-level column down to the leaf.
    path: Vec<String>,
    /// Column indices along the same path.
    indices: Vec<usize>,
    kind: Kind,
    nulls: u64,
    bounds: Bounds,
}

/// The statistics of one data file, updated batch by batch.
#[derive(Debug)]
pub struct FileStats {
    leaves: Vec<Leaf>,
}

impl FileStats {
    /// Statistics for files of `schema` (the data file's schema, without partition columns).
    pub fn new(schema: &Schema) -> Self {
        let mut leaves = Vec::new();
        collect_leaves(
            schema.fields(),
            &mut Vec::new(),
            &mut Vec::new(),
            &mut leaves,
        );
        FileStats { leaves }
    }

    /// Account for the rows of `batch` (which has the schema given to [`FileStats::new`]).
    pub fn update(&mut self, batch: &RecordBatch) {
        for leaf in &mut self.leaves {
            let Some(array) = leaf_array(batch, &leaf.indices) else {
                // A schema mismatch is caught by the Parquet writer; stats just go unknown.
                leaf.bounds = Bounds::None;
                continue;
            };
            leaf.nulls += array.logical_null_count() as u64;
            match &mut leaf.bounds {
                Bounds::None => {}
                Bounds::Int(acc) => {
                    if let Some((lo, hi)) = int_bounds(&array) {
                        *acc = Some(match *acc {
                            Some((a, b)) => (a.min(lo), b.max(hi)),
                            None => (lo, hi),
                        });
                    }
                }
                Bounds::Float { range, nan } => {
                    if let Some((lo, hi)) = float_bounds(&array) {
                        if lo.is_nan() || hi.is_nan() {
                            *nan = true;
                        } else {
                            *range = Some(match *range {
                                Some((a, b)) => (a.min(lo), b.max(hi)),
                                None => (lo, hi),
                            });
                        }
                    }
                }
                Bounds::String => {}
            }
        }
    }

    /// The `stats` JSON of a file holding `num_records` rows, whose Parquet writer returned
    /// `footer` (written with [`footer_bounds`]).
    pub fn to_json(&self, num_records: u64, footer: &ParquetMetaData) -> String {
        let mut mins = Node::object();
        let mut maxes = Node::object();
        let mut nulls = Node::object();
        for leaf in &self.leaves {
            nulls.insert(&leaf.path, leaf.nulls.to_string());
            let (lo, hi) = match leaf.bounds {
                Bounds::String => match footer_string_keys(footer, &leaf.path) {
                    Some((lo, hi)) => (
                        Some(json_string(truncate_min(key_text(&lo)))),
                        truncate_max(key_text(&hi)).map(|s| json_string(&s)),
                    ),
                    None => (None, None),
                },
                _ => leaf.render_bounds(),
            };
            if let Some(lo) = lo {
                mins.insert(&leaf.path, lo);
            }
            if let Some(hi) = hi {
                maxes.insert(&leaf.path, hi);
            }
        }
        format!(
            "{{\"numRecords\":{num_records},\"minValues\":{},\"maxValues\":{},\"nullCount\":{}}}",
            mins.render(),
            maxes.render(),
            nulls.render()
        )
    }
}

fn collect_leaves(
    fields: &Fields,
    path: &mut Vec<String>,
    indices: &mut Vec<usize>,
    out: &mut Vec<Leaf>,
) {
    for (i, f) in fields.iter().enumerate() {
        if out.len() >= NUM_INDEXED_COLS {
            return;
        }
        path.push(f.name().clone());
        indices.push(i);
        if let DataType::Struct(children) = f.data_type() {
            collect_leaves(children, path, indices, out);
        } else {
            let kind = kind_of(f.data_type());
            let bounds = match kind {
                Kind::CountOnly => Bounds::None,
                Kind::Float32 | Kind::Float64 => Bounds::Float {
                    range: None,
                    nan: false,
                },
                Kind::String => Bounds::String,
                _ => Bounds::Int(None),
            };
            out.push(Leaf {
                path: path.clone(),
                indices: indices.clone(),
                kind,
                nulls: 0,
                bounds,
            });
        }
        path.pop();
        indices.pop();
    }
}

/// The leaf's values in `batch`, null wherever the leaf or any struct above it is null.
fn leaf_array(batch: &RecordBatch, indices: &[usize]) -> Option<ArrayRef> {
    let (first, rest) = indices.split_first()?;
    let mut array = batch.columns().get(*first)?.clone();
    for &i in rest {
        let parent = array.as_struct_opt()?;
        let child = parent.columns().get(i)?.clone();
        array = match parent.nulls() {
            // A struct's child keeps arbitrary values under a null parent: mask them.
            Some(n) if n.null_count() > 0 => {
                let parent_null = BooleanArray::new(!n.inner(), None);
                nullif(child.as_ref(), &parent_null).ok()?
            }
            _ => child,
        };
    }
    Some(array)
}

fn int_bounds(a: &ArrayRef) -> Option<(i128, i128)> {
    macro_rules! prim {
        ($t:ty) => {{
            let p = a.as_primitive::<$t>();
            Some((i128::from(min(p)?), i128::from(max(p)?)))
        }};
    }
    use DataType::*;
    match a.data_type() {
        Int8 => prim!(Int8Type),
        Int16 => prim!(Int16Type),
        Int32 => prim!(Int32Type),
        Int64 => prim!(Int64Type),
        UInt8 => prim!(UInt8Type),
        UInt16 => prim!(UInt16Type),
        UInt32 => prim!(UInt32Type),
        UInt64 => prim!(UInt64Type),
        Decimal128(_, _) => prim!(Decimal128Type),
        Date32 => prim!(Date32Type),
        Date64 => prim!(Date64Type),
        Timestamp(TimeUnit::Second, _) => prim!(TimestampSecondType),
        Timestamp(TimeUnit::Millisecond, _) => prim!(TimestampMillisecondType),
        Timestamp(TimeUnit::Microsecond, _) => prim!(TimestampMicrosecondType),
        Timestamp(TimeUnit::Nanosecond, _) => prim!(TimestampNanosecondType),
        _ => None,
    }
}

/// Min and max; NaN in either when the array holds a NaN (arrow's kernels order NaN last).
fn float_bounds(a: &ArrayRef) -> Option<(f64, f64)> {
    match a.data_type() {
        DataType::Float32 => {
            let p = a.as_primitive::<Float32Type>();
            Some((min(p)? as f64, max(p)? as f64))
        }
        DataType::Float64 => {
            let p = a.as_primitive::<Float64Type>();
            Some((min(p)?, max(p)?))
        }
        _ => None,
    }
}

/// Bytes of a string that decide its truncated bounds: [`truncate_min`] reads at most
/// [`STRING_PREFIX`] + 1 characters and [`truncate_max`] at most 2 x [`STRING_PREFIX`] + 1,
/// which fit in 4 bytes each.
const KEY_BYTES: usize = 4 * (2 * STRING_PREFIX + 1);

/// The first [`KEY_BYTES`] bytes of `s` (cut anywhere, even inside a character). Cutting a
/// prefix keeps the byte order (`a <= b` gives `key(a) <= key(b)`), so the least and greatest
/// keys are the keys of the least and greatest strings, and their truncated bounds are the
/// same.
fn string_key(s: &[u8]) -> &[u8] {
    &s[..s.len().min(KEY_BYTES)]
}

/// Parquet writer properties that keep what [`FileStats::to_json`] reads from the footer:
/// column statistics, with strings cut at [`FOOTER_STRING_BYTES`].
pub(crate) fn footer_bounds(props: WriterPropertiesBuilder) -> WriterPropertiesBuilder {
    props
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_statistics_truncate_length(Some(FOOTER_STRING_BYTES))
}

/// The bytes of a string statistic the footer keeps: twice [`KEY_BYTES`], so a cut max
/// (bumped at its end) still holds the key's bytes unless a long run of characters that
/// cannot be bumped ends it (see the module docs).
pub(crate) const FOOTER_STRING_BYTES: usize = 2 * KEY_BYTES;

/// The least and greatest [`string_key`] of the string leaf at `path` over the row groups of
/// `footer`; `None` when it has no non-null value or a row group with values has no bounds.
fn footer_string_keys(footer: &ParquetMetaData, path: &[String]) -> Option<(Vec<u8>, Vec<u8>)> {
    let schema = footer.file_metadata().schema_descr();
    let column = (0..schema.num_columns()).find(|&i| schema.column(i).path().parts() == path)?;
    let mut acc: Option<(Vec<u8>, Vec<u8>)> = None;
    for group in footer.row_groups() {
        let chunk = group.column(column);
        let stats = chunk.statistics()?;
        let (Some(lo), Some(hi)) = (stats.min_bytes_opt(), stats.max_bytes_opt()) else {
            // No bounds: fine only when every value of the chunk is null.
            if stats.null_count_opt() == Some(chunk.num_values() as u64) {
                continue;
            }
            return None;
        };
        let (lo, hi) = (string_key(lo), string_key(hi));
        acc = Some(match acc {
            None => (lo.to_vec(), hi.to_vec()),
            Some((a, b)) => (
                if lo < a.as_slice() { lo.to_vec() } else { a },
                if hi > b.as_slice() { hi.to_vec() } else { b },
            ),
        });
    }
    acc
}

/// A [`string_key`] as text: whole characters only (a key cut inside a character drops it;
/// the key still holds every character the truncated bounds read).
fn key_text(k: &[u8]) -> &str {
    match std::str::from_utf8(k) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&k[..e.valid_up_to()]).expect("valid up to here"),
    }
}

impl Leaf {
    /// The JSON text of the min and max, each `None` when it is unknown or unsafe to state.
    fn render_bounds(&self) -> (Option<String>, Option<String>) {
        match (&self.bounds, self.kind) {
            (Bounds::Int(Some((lo, hi))), kind) => match kind {
                Kind::Int => (Some(lo.to_string()), Some(hi.to_string())),
                Kind::Decimal(scale) => (
                    Some(decimal_text(*lo, scale)),
                    Some(decimal_text(*hi, scale)),
                ),
                Kind::Date32 => (date_text(*lo, 1), date_text(*hi, 1)),
                Kind::Date64 => (date_text(*lo, 86_400_000), date_text(*hi, 86_400_000)),
                Kind::Timestamp { unit, zoned } => (
                    timestamp_text(*lo, unit, zoned, false),
                    timestamp_text(*hi, unit, zoned, true),
                ),
                _ => (None, None),
            },
            (
                Bounds::Float {
                    range: Some((lo, hi)),
                    nan: false,
                },
                kind,
            ) => {
                let f32 = matches!(kind, Kind::Float32);
                (float_text(*lo, f32), float_text(*hi, f32))
            }
            _ => (None, None),
        }
    }
}

/// An unscaled decimal as a JSON number with exactly `scale` fraction digits.
fn decimal_text(unscaled: i128, scale: i8) -> String {
    if scale <= 0 {
        let zeros = "0".repeat(scale.unsigned_abs() as usize);
        return if unscaled == 0 {
            "0".to_string()
        } else {
            format!("{unscaled}{zeros}")
        };
    }
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let digits = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = digits.split_at(digits.len() - scale);
    let sign = if unscaled < 0 { "-" } else { "" };
    format!("{sign}{int}.{frac}")
}

/// `yyyy-MM-dd` for a value counted in units of `per_day` per day since the epoch.
fn date_text(value: i128, per_day: i128) -> Option<String> {
    let days = i64::try_from(value.div_euclid(per_day)).ok()?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    let date = epoch.checked_add_signed(chrono::Duration::try_days(days)?)?;
    Some(json_string(&date.format("%Y-%m-%d").to_string()))
}

/// Millisecond ISO-8601; `round_up` for a max so it still bounds sub-millisecond values.
fn timestamp_text(value: i128, unit: TimeUnit, zoned: bool, round_up: bool) -> Option<String> {
    let ms = match unit {
        TimeUnit::Second => value.checked_mul(1_000)?,
        TimeUnit::Millisecond => value,
        TimeUnit::Microsecond | TimeUnit::Nanosecond => {
            let per_ms = if matches!(unit, TimeUnit::Microsecond) {
                1_000
            } else {
                1_000_000
            };
            if round_up {
                -(-value).div_euclid(per_ms)
            } else {
                value.div_euclid(per_ms)
            }
        }
    };
    let t = DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)?;
    let z = if zoned { "Z" } else { "" };
    Some(json_string(&format!(
        "{}{z}",
        t.format("%Y-%m-%dT%H:%M:%S%.3f")
    )))
}

fn float_text(v: f64, single: bool) -> Option<String> {
    if !v.is_finite() {
        return None;
    }
    // Through serde_json so the text is the shortest that reads back as the same value.
    if single {
        serde_json::to_string(&(v as f32)).ok()
    } else {
        serde_json::to_string(&v).ok()
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// The first [`STRING_PREFIX`] characters: a prefix is never greater than the string.
fn truncate_min(s: &str) -> &str {
    match s.char_indices().nth(STRING_PREFIX) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// A max cut to about [`STRING_PREFIX`] characters that is still >= `s` (and so >= every
/// value), or `None` when none of at most twice that length exists. As Delta Spark does:
/// keep the prefix, skip over U+10FFFF (nothing can follow it upwards), and append U+007F if
/// the first dropped character is below it, else U+10FFFF, the greatest character in UTF-8
/// byte order.
fn truncate_max(s: &str) -> Option<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= STRING_PREFIX {
        return Some(s.to_string());
    }
    let mut len = STRING_PREFIX;
    while len <= 2 * STRING_PREFIX {
        match chars.get(len) {
            None => return Some(s.to_string()),
            Some('\u{10FFFF}') => len += 1,
            Some(&c) => {
                let mut out: String = chars[..len].iter().collect();
                out.push(if c < '\u{7F}' { '\u{7F}' } else { '\u{10FFFF}' });
                return Some(out);
            }
        }
    }
    None
}

/// An ordered JSON object tree whose leaves are JSON text.
enum Node {
    Raw(String),
    Object(Vec<(String, Node)>),
}

impl Node {
    fn object() -> Self {
        Node::Object(Vec::new())
    }

    fn insert(&mut self, path: &[String], value: String) {
        let Node::Object(entries) = self else {
            return;
        };
        let Some((name, rest)) = path.split_first() else {
            return;
        };
        if rest.is_empty() {
            entries.push((name.clone(), Node::Raw(value)));
            return;
        }
        let pos = match entries.iter().position(|(k, _)| k == name) {
            Some(p) => p,
            None => {
                entries.push((name.clone(), Node::object()));
                entries.len() - 1
            }
        };
        entries[pos].1.insert(rest, value);
    }

    fn render(&self) -> String {
        match self {
            Node::Raw(s) => s.clone(),
            Node::Object(entries) => {
                let body: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{}:{}", json_string(k), v.render()))
                    .collect();
                format!("{{{}}}", body.join(","))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
        Int32Array, Int64Array, StringArray, StructArray, TimestampMicrosecondArray, UInt64Array,
    };
    use arrow::buffer::NullBuffer;
    use arrow_schema::{Field, SchemaRef};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use serde_json::{Value, json};
    use std::sync::Arc;

    /// The stats of `batches` written as one Parquet file of `rows_per_group` rows per row
    /// group, as the writer makes them: from the batches and the file's footer.
    fn stats_json(schema: SchemaRef, batches: &[RecordBatch], rows_per_group: usize) -> String {
        let mut s = FileStats::new(&schema);
        let props = footer_bounds(WriterProperties::builder())
            .set_max_row_group_row_count(Some(rows_per_group))
            .build();
        let mut w = ArrowWriter::try_new(Vec::new(), schema, Some(props)).unwrap();
        let mut rows = 0;
        for b in batches {
            w.write(b).unwrap();
            s.update(b);
            rows += b.num_rows() as u64;
        }
        let footer = w.finish().unwrap();
        s.to_json(rows, &footer)
    }

    fn stats_of(batches: &[RecordBatch]) -> Value {
        let text = stats_json(batches[0].schema(), batches, 1024);
        serde_json::from_str(&text).expect("valid JSON")
    }

    /// A batch of nullable columns (as the table's are: a column's first batch may hold no
    /// null and a later one may).
    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, a)| (n, a, true)))
            .unwrap()
    }

    #[test]
    fn stats_of_known_values() {
        let long = "x".repeat(40);
        let ts = TimestampMicrosecondArray::from(vec![
            Some(1_704_164_645_123_456),
            None,
            Some(1_704_164_645_000_000),
        ])
        .with_timezone("UTC");
        let ntz = TimestampMicrosecondArray::from(vec![Some(1_001), Some(-1_001), None]);
        let b = batch(vec![
            (
                "i",
                Arc::new(Int32Array::from(vec![Some(3), None, Some(-7)])) as ArrayRef,
            ),
            (
                "u",
                Arc::new(UInt64Array::from(vec![u64::MAX, 0, 5])) as ArrayRef,
            ),
            (
                "f",
                Arc::new(Float64Array::from(vec![1.5, -0.25, 2.0])) as ArrayRef,
            ),
            (
                "h",
                Arc::new(Float32Array::from(vec![0.1_f32, 0.2, 0.3])) as ArrayRef,
            ),
            (
                "nan",
                Arc::new(Float64Array::from(vec![1.0, f64::NAN, 2.0])) as ArrayRef,
            ),
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![Some(1230_i128), Some(-5), None])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ) as ArrayRef,
            ),
            (
                "big",
                Arc::new(
                    Decimal128Array::from(vec![
                        99_999_999_999_999_999_999_999_999_999_999_999_i128,
                        1,
                        -1,
                    ])
                    .with_precision_and_scale(38, 3)
                    .unwrap(),
                ) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from(vec![
                    Some("b"),
                    Some(long.as_str()),
                    None,
                ])) as ArrayRef,
            ),
            (
                "dt",
                Arc::new(Date32Array::from(vec![19_724, -1, 0])) as ArrayRef,
            ),
            ("ts", Arc::new(ts) as ArrayRef),
            ("ntz", Arc::new(ntz) as ArrayRef),
            (
                "flag",
                Arc::new(BooleanArray::from(vec![Some(true), None, None])) as ArrayRef,
            ),
            (
                "bin",
                Arc::new(BinaryArray::from(vec![b"a".as_ref(), b"b", b"c"])) as ArrayRef,
            ),
            (
                "all_null",
                Arc::new(Int64Array::from(vec![None, None, None])) as ArrayRef,
            ),
        ]);
        let v = stats_of(&[b]);
        let max_long = format!("{}\u{7F}", "x".repeat(32));
        assert_eq!(
            v,
            json!({
                "numRecords": 3,
                "minValues": {
                    "i": -7, "u": 0, "f": -0.25, "h": 0.1, "d": -0.05,
                    "big": -0.001, "s": "b", "dt": "1969-12-31",
                    "ts": "2024-01-02T03:04:05.000Z", "ntz": "1969-12-31T23:59:59.998"
                },
                "maxValues": {
                    "i": 3, "u": u64::MAX, "f": 2.0, "h": 0.3, "d": 12.30,
                    "big": "99999999999999999999999999999999.999".parse::<f64>().unwrap(),
                    "s": max_long, "dt": "2024-01-02",
                    "ts": "2024-01-02T03:04:05.124Z", "ntz": "1970-01-01T00:00:00.002"
                },
                "nullCount": {
                    "i": 1, "u": 0, "f": 0, "h": 0, "nan": 0, "d": 1, "big": 0, "s": 1,
                    "dt": 0, "ts": 1, "ntz": 1, "flag": 2, "bin": 0, "all_null": 3
                }
            })
        );
        // Exact decimal digits in the text, not an f64 rendering.
        let text = stats_json(stats_batch().schema(), &[stats_batch()], 1024);
        assert!(text.contains(r#""d":12.30"#), "{text}");
        assert!(
            text.contains(r#""big":99999999999999999999999999999999.999"#),
            "{text}"
        );
    }

    fn stats_batch() -> RecordBatch {
        batch(vec![
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![1230_i128, 1000])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ) as ArrayRef,
            ),
            (
                "big",
                Arc::new(
                    Decimal128Array::from(vec![
                        99_999_999_999_999_999_999_999_999_999_999_999_i128,
                        0,
                    ])
                    .with_precision_and_scale(38, 3)
                    .unwrap(),
                ) as ArrayRef,
            ),
        ])
    }

    #[test]
    fn bounds_accumulate_across_batches() {
        let a = batch(vec![(
            "i",
            Arc::new(Int32Array::from(vec![5, 6])) as ArrayRef,
        )]);
        let b = batch(vec![(
            "i",
            Arc::new(Int32Array::from(vec![Some(9), None])) as ArrayRef,
        )]);
        let c = batch(vec![("i", Arc::new(Int32Array::from(vec![1])) as ArrayRef)]);
        let v = stats_of(&[a, b, c]);
        assert_eq!(v["minValues"]["i"], 1);
        assert_eq!(v["maxValues"]["i"], 9);
        assert_eq!(v["nullCount"]["i"], 1);
        assert_eq!(v["numRecords"], 5);
        // A NaN in any batch drops the float's bounds for the whole file.
        let f = |x: f64| {
            batch(vec![(
                "f",
                Arc::new(Float64Array::from(vec![x])) as ArrayRef,
            )])
        };
        let v = stats_of(&[f(1.0), f(f64::NAN), f(3.0)]);
        assert_eq!(v["minValues"], json!({}));
        assert_eq!(v["maxValues"], json!({}));
        assert_eq!(v["nullCount"]["f"], 0);
    }

    #[test]
    fn struct_leaves_are_nested_and_count_as_columns() {
        let inner = StructArray::new(
            vec![
                Field::new("x", DataType::Int64, true),
                Field::new("y", DataType::Utf8, true),
            ]
            .into(),
            vec![
                Arc::new(Int64Array::from(vec![10, 999, 30])) as ArrayRef,
                Arc::new(StringArray::from(vec![Some("p"), Some("zzz"), None])),
            ],
            // Row 1's struct is null: its 999 and "zzz" are not values.
            Some(NullBuffer::from(vec![true, false, true])),
        );
        let b = batch(vec![
            ("id", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
            ("s", Arc::new(inner) as ArrayRef),
        ]);
        let v = stats_of(&[b]);
        assert_eq!(v["minValues"], json!({"id": 1, "s": {"x": 10, "y": "p"}}));
        assert_eq!(v["maxValues"], json!({"id": 3, "s": {"x": 30, "y": "p"}}));
        assert_eq!(v["nullCount"], json!({"id": 0, "s": {"x": 1, "y": 2}}));
    }

    #[test]
    fn only_the_first_32_leaf_columns_are_indexed() {
        // 20 top-level columns, then a struct of 20 leaves: the budget ends inside the struct.
        let mut fields: Vec<Field> = (0..20)
            .map(|i| Field::new(format!("c{i}"), DataType::Int32, true))
            .collect();
        let children: Vec<Field> = (0..20)
            .map(|i| Field::new(format!("n{i}"), DataType::Int32, true))
            .collect();
        fields.push(Field::new("st", DataType::Struct(children.into()), true));
        fields.push(Field::new("after", DataType::Int32, true));
        let v: Value =
            serde_json::from_str(&stats_json(Arc::new(Schema::new(fields)), &[], 1024)).unwrap();
        let nulls = v["nullCount"].as_object().unwrap();
        assert_eq!(nulls.len(), 21, "c0..c19 and st");
        assert_eq!(v["nullCount"]["st"].as_object().unwrap().len(), 12);
        assert!(v["nullCount"]["st"].get("n11").is_some());
        assert!(v["nullCount"]["st"].get("n12").is_none());
        assert!(nulls.get("after").is_none());
    }

    #[test]
    fn string_truncation_keeps_bounds_valid() {
        let p = "a".repeat(32);
        assert_eq!(truncate_min(&format!("{p}zzz")), p);
        assert_eq!(truncate_min("short"), "short");
        // Multi-byte characters count as one each and are never split.
        let jp = "日".repeat(40);
        assert_eq!(truncate_min(&jp), "日".repeat(32));
        assert_eq!(
            truncate_max(&jp),
            Some(format!("{}\u{10FFFF}", "日".repeat(32)))
        );
        assert_eq!(truncate_max(&format!("{p}b")), Some(format!("{p}\u{7F}")));
        assert_eq!(truncate_max(&p), Some(p.clone()));
        // U+10FFFF cannot be bumped: the prefix grows past it...
        let tail = format!("{p}\u{10FFFF}b");
        assert_eq!(truncate_max(&tail), Some(format!("{p}\u{10FFFF}\u{7F}")));
        // ...and when it never ends, the max is left out.
        let hopeless = format!("{p}{}", "\u{10FFFF}".repeat(40));
        assert_eq!(truncate_max(&hopeless), None);
        for s in [format!("{p}b"), jp.clone(), tail] {
            let max = truncate_max(&s).unwrap();
            assert!(max.as_bytes() >= s.as_bytes(), "{max:?} >= {s:?}");
        }
    }

    /// Values whose footer max arrow-rs cannot bump at its cut (U+10FFFF, U+7F runs past 520
    /// bytes), so it bumps an earlier character or keeps the whole value: whatever the footer
    /// holds, the bounds written stay below and above every value.
    #[test]
    fn string_bounds_hold_when_the_footer_bumps_an_earlier_character() {
        let cases = [
            format!("a{}", "\u{10FFFF}".repeat(600)),
            format!("a{}", "\u{7F}".repeat(600)),
            format!("{}{}x", "日".repeat(40), "\u{10FFFF}".repeat(200)),
            format!("{}{}", "a".repeat(500), "\u{10FFFF}".repeat(10)),
        ];
        for value in &cases {
            let other = format!("{value}\u{10FFFF}");
            let b = batch(vec![(
                "s",
                Arc::new(StringArray::from(vec![Some(value.as_str()), Some(&other)])) as ArrayRef,
            )]);
            let text = stats_json(b.schema(), std::slice::from_ref(&b), 2);
            let v: Value = serde_json::from_str(&text).unwrap();
            let min = v["minValues"]["s"]
                .as_str()
                .expect("a min is always written");
            assert!(min.as_bytes() <= value.as_bytes(), "{min:?} <= {value:?}");
            if let Some(max) = v["maxValues"]["s"].as_str() {
                assert!(max.as_bytes() >= other.as_bytes(), "{max:?} >= {other:?}");
                assert!(max.chars().count() <= 33, "{max:?} is cut");
            }
        }
    }

    #[test]
    fn string_bounds_from_keys_are_the_bounds_of_the_whole_strings() {
        // Random strings around the key length (ASCII, 3- and 4-byte characters, U+10FFFF
        // and U+7F, long shared prefixes; some past the footer's cut), in random batches with
        // nulls and random row groups: the bounds rendered from the footer's cut keys are
        // those of the whole strings' min and max.
        let alphabet = ['a', 'b', '\u{7F}', '日', '\u{10FFFF}', '\u{10FFFE}'];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for case in 0..400 {
            // Narrow (ASCII) or wide (3- and 4-byte) shared prefixes, or 32 4-byte characters
            // and a run of U+10FFFF, which the max's truncation reads to its end.
            let common: String = match case % 4 {
                0 => (0..next(90)).map(|_| alphabet[next(2)]).collect(),
                1 => (0..next(90)).map(|_| alphabet[3 + next(3)]).collect(),
                2 => (0..FOOTER_STRING_BYTES - 40 + next(90))
                    .map(|_| alphabet[next(2)])
                    .collect(),
                _ => format!(
                    "{}{}",
                    "\u{10FFFE}".repeat(32),
                    "\u{10FFFF}".repeat(next(40))
                ),
            };
            let mut batches = Vec::new();
            let mut all: Vec<String> = Vec::new();
            for _ in 0..1 + next(4) {
                let values: Vec<Option<String>> = (0..1 + next(12))
                    .map(|_| {
                        (next(5) > 0).then(|| {
                            let tail: String = (0..next(70))
                                .map(|_| alphabet[next(alphabet.len())])
                                .collect();
                            format!("{common}{tail}")
                        })
                    })
                    .collect();
                all.extend(values.iter().flatten().cloned());
                batches.push(batch(vec![(
                    "s",
                    Arc::new(StringArray::from(values)) as ArrayRef,
                )]));
            }
            let text = stats_json(batches[0].schema(), &batches, 1 + next(8));
            let v: Value = serde_json::from_str(&text).unwrap();
            let (Some(lo), Some(hi)) = (all.iter().min(), all.iter().max()) else {
                assert_eq!(v["minValues"], json!({}), "case {case}");
                assert_eq!(v["maxValues"], json!({}), "case {case}");
                continue;
            };
            assert_eq!(v["minValues"]["s"], json!(truncate_min(lo)), "case {case}");
            match truncate_max(hi) {
                Some(m) => assert_eq!(v["maxValues"]["s"], json!(m), "case {case}"),
                None => assert!(v["maxValues"].get("s").is_none(), "case {case}"),
            }
        }
    }

    #[test]
    fn decimal_and_timestamp_text() {
        assert_eq!(decimal_text(1230, 2), "12.30");
        assert_eq!(decimal_text(-5, 2), "-0.05");
        assert_eq!(decimal_text(0, 3), "0.000");
        assert_eq!(decimal_text(7, 0), "7");
        assert_eq!(decimal_text(7, -2), "700");
        assert_eq!(
            timestamp_text(1_500, TimeUnit::Microsecond, true, false).as_deref(),
            Some("\"1970-01-01T00:00:00.001Z\"")
        );
        assert_eq!(
            timestamp_text(1_500, TimeUnit::Microsecond, true, true).as_deref(),
            Some("\"1970-01-01T00:00:00.002Z\"")
        );
        assert_eq!(
            timestamp_text(2_000, TimeUnit::Microsecond, true, true).as_deref(),
            Some("\"1970-01-01T00:00:00.002Z\""),
            "an exact millisecond is not bumped"
        );
        assert_eq!(
            timestamp_text(5, TimeUnit::Second, false, true).as_deref(),
            Some("\"1970-01-01T00:00:05.000\"")
        );
    }
}
