//! Splitting a batch by the table's partition columns.
//!
//! A partition value is the string the Delta log stores in `partitionValues` (and the writer
//! escapes into the directory name), in the protocol's "Partition Value Serialization" form:
//! strings as they are; numbers in their plain decimal form (decimals keep their scale:
//! `12.30`); booleans `true`/`false`; dates `yyyy-MM-dd`; timestamps without a time zone
//! (TIMESTAMP_NTZ) `yyyy-MM-dd HH:mm:ss`, their wall-clock value, with `.SSSSSS` when there is a
//! fraction (nine digits if a nanosecond timestamp has one below the microsecond).
//!
//! Timestamps with a time zone (TIMESTAMP) are instants. In a Delta table they are written in
//! the protocol's ISO 8601 form adjusted to UTC, `yyyy-MM-ddTHH:mm:ss[.SSSSSS]Z`
//! ([`Style::Delta`]): the zone-less form is read in the reader's session time zone, so a Spark
//! session outside UTC would shift every value. A Parquet directory's readers infer partition
//! types from directory names, where only the zone-less form reads as a timestamp
//! ([`Style::Hive`]); it is formatted in UTC. Binary values are their
//! bytes as a string (they must be UTF-8). Null stays null (the writer names its directory
//! `__HIVE_DEFAULT_PARTITION__`).

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray, UInt32Array};
use arrow::compute::{CastOptions, cast_with_options, take_record_batch};
use arrow::datatypes::{
    Date64Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_schema::{ArrowError, DataType};
use chrono::DateTime;
use std::collections::HashMap;

/// Partition values (in `partition_by` order; `None` is null) and the rows that have them.
pub type PartitionedRows = Vec<(Vec<Option<String>>, RecordBatch)>;

/// How zoned timestamps are written (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Delta `partitionValues`: `2024-01-02T03:04:05Z`.
    #[default]
    Delta,
    /// Hive directory names of a Parquet directory: `2024-01-02 03:04:05` (UTC).
    Hive,
}

/// Group the rows of `batch` by the string form of `columns`, keeping first-seen order.
pub fn split(
    batch: &RecordBatch,
    columns: &[String],
    style: Style,
) -> Result<PartitionedRows, ArrowError> {
    if columns.is_empty() {
        return Ok(vec![(Vec::new(), batch.clone())]);
    }
    let strings: Vec<StringArray> = columns
        .iter()
        .map(|c| {
            let col = batch.column(batch.schema().index_of(c)?);
            partition_strings(col, style)
                .map_err(|e| ArrowError::CastError(format!("partition column `{c}`: {e}")))
        })
        .collect::<Result<_, ArrowError>>()?;
    let mut groups: HashMap<Vec<Option<String>>, Vec<u32>> = HashMap::new();
    let mut order = Vec::new();
    for row in 0..batch.num_rows() {
        let key: Vec<Option<String>> = strings
            .iter()
            .map(|s| s.is_valid(row).then(|| s.value(row).to_string()))
            .collect();
        let entry = groups.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            Vec::new()
        });
        entry.push(row as u32);
    }
    if order.len() == 1 {
        return Ok(vec![(order.pop().expect("one group"), batch.clone())]);
    }
    order
        .into_iter()
        .map(|k| {
            let idx = UInt32Array::from(groups.remove(&k).expect("group exists"));
            Ok((k, take_record_batch(batch, &idx)?))
        })
        .collect()
}

/// The partition value of every row of `col` (see the module docs for the format).
pub fn partition_strings(col: &ArrayRef, style: Style) -> Result<StringArray, ArrowError> {
    match col.data_type() {
        // Arrow's own cast writes `2024-01-02T03:04:05` (and an offset for zoned values).
        DataType::Timestamp(unit, zone) => {
            let iso = zone.is_some() && style == Style::Delta;
            let nanos_per_unit: i64 = match unit {
                TimeUnit::Second => 1_000_000_000,
                TimeUnit::Millisecond => 1_000_000,
                TimeUnit::Microsecond => 1_000,
                TimeUnit::Nanosecond => 1,
            };
            let values: Vec<Option<i64>> = match unit {
                TimeUnit::Second => col.as_primitive::<TimestampSecondType>().iter().collect(),
                TimeUnit::Millisecond => col
                    .as_primitive::<TimestampMillisecondType>()
                    .iter()
                    .collect(),
                TimeUnit::Microsecond => col
                    .as_primitive::<TimestampMicrosecondType>()
                    .iter()
                    .collect(),
                TimeUnit::Nanosecond => col
                    .as_primitive::<TimestampNanosecondType>()
                    .iter()
                    .collect(),
            };
            values
                .into_iter()
                .map(|v| {
                    v.map(|v| format_timestamp(v, nanos_per_unit, iso))
                        .transpose()
                })
                .collect()
        }
        // Arrow's cast writes a Date64 as a timestamp; the partition value is the day.
        DataType::Date64 => col
            .as_primitive::<Date64Type>()
            .iter()
            .map(|v| {
                v.map(|ms| {
                    DateTime::from_timestamp_millis(ms)
                        .map(|d| d.format("%Y-%m-%d").to_string())
                        .ok_or_else(|| {
                            ArrowError::CastError(format!("date {ms} ms is out of range"))
                        })
                })
                .transpose()
            })
            .collect(),
        _ => {
            // Not `safe`: a value that has no string form (binary that is not UTF-8) must fail
            // the batch, not become a null partition.
            let options = CastOptions {
                safe: false,
                ..Default::default()
            };
            let s = cast_with_options(col, &DataType::Utf8, &options)?;
            Ok(s.as_string::<i32>().clone())
        }
    }
}

/// `yyyy-MM-dd HH:mm:ss[.SSSSSS]` for `value` units of `nanos_per_unit` since the epoch, or
/// with `iso` `yyyy-MM-ddTHH:mm:ss[.SSSSSS]Z`.
fn format_timestamp(value: i64, nanos_per_unit: i64, iso: bool) -> Result<String, ArrowError> {
    let out_of_range = || ArrowError::CastError(format!("timestamp {value} is out of range"));
    let units_per_sec = 1_000_000_000 / nanos_per_unit;
    let secs = value.div_euclid(units_per_sec);
    let nanos = value.rem_euclid(units_per_sec) * nanos_per_unit;
    let t = DateTime::from_timestamp(secs, nanos as u32).ok_or_else(out_of_range)?;
    let mut s = t
        .format(if iso {
            "%Y-%m-%dT%H:%M:%S"
        } else {
            "%Y-%m-%d %H:%M:%S"
        })
        .to_string();
    if nanos % 1_000 != 0 {
        s.push_str(&format!(".{nanos:09}"));
    } else if nanos != 0 {
        s.push_str(&format!(".{:06}", nanos / 1_000));
    }
    if iso {
        s.push('Z');
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BinaryArray, BooleanArray, Date32Array, Date64Array, Decimal128Array, Int64Array,
        TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
        TimestampSecondArray,
    };
    use std::sync::Arc;

    fn strings(a: ArrayRef) -> Vec<Option<String>> {
        styled(a, Style::Delta)
    }

    fn styled(a: ArrayRef, style: Style) -> Vec<Option<String>> {
        partition_strings(&a, style)
            .unwrap()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect()
    }

    fn some(v: &[&str]) -> Vec<Option<String>> {
        v.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn timestamps_use_the_protocol_form_in_utc() {
        // 2024-01-02 03:04:05 UTC, then with .123456 and with .5
        let base = 1_704_164_645_i64;
        let us = TimestampMicrosecondArray::from(vec![
            Some(base * 1_000_000),
            Some(base * 1_000_000 + 123_456),
            Some(base * 1_000_000 + 500_000),
            None,
        ]);
        let expected = vec![
            Some("2024-01-02 03:04:05".to_string()),
            Some("2024-01-02 03:04:05.123456".to_string()),
            Some("2024-01-02 03:04:05.500000".to_string()),
            None,
        ];
        // A zone-less timestamp is its wall-clock value.
        assert_eq!(strings(Arc::new(us.clone())), expected);
        // A zoned timestamp is an instant: in a Delta table the ISO 8601 form in UTC, with
        // its `Z` (a Spark session in another zone reads the same instant); in a Parquet
        // directory's names the zone-less form in UTC. Whatever the column's zone.
        let iso = vec![
            Some("2024-01-02T03:04:05Z".to_string()),
            Some("2024-01-02T03:04:05.123456Z".to_string()),
            Some("2024-01-02T03:04:05.500000Z".to_string()),
            None,
        ];
        for tz in ["UTC", "+05:30", "America/New_York"] {
            let a: ArrayRef = Arc::new(us.clone().with_timezone(tz));
            assert_eq!(strings(a.clone()), iso, "zone {tz}");
            assert_eq!(styled(a, Style::Hive), expected, "zone {tz}");
        }
        assert_eq!(
            strings(Arc::new(TimestampSecondArray::from(vec![base]))),
            some(&["2024-01-02 03:04:05"])
        );
        assert_eq!(
            strings(Arc::new(TimestampMillisecondArray::from(vec![
                base * 1000 + 7
            ]))),
            some(&["2024-01-02 03:04:05.007000"])
        );
        assert_eq!(
            strings(Arc::new(TimestampNanosecondArray::from(vec![
                base * 1_000_000_000 + 1_000,
                base * 1_000_000_000 + 1,
            ]))),
            some(&[
                "2024-01-02 03:04:05.000001",
                "2024-01-02 03:04:05.000000001"
            ])
        );
        // Before the epoch the fraction still counts forward from the second below.
        assert_eq!(
            strings(Arc::new(TimestampMicrosecondArray::from(vec![-1]))),
            some(&["1969-12-31 23:59:59.999999"])
        );
    }

    #[test]
    fn other_types_use_the_protocol_form() {
        assert_eq!(
            strings(Arc::new(Date32Array::from(vec![Some(19_724), None]))),
            vec![Some("2024-01-02".to_string()), None]
        );
        assert_eq!(
            strings(Arc::new(Date64Array::from(vec![19_724 * 86_400_000]))),
            some(&["2024-01-02"])
        );
        assert_eq!(
            strings(Arc::new(BooleanArray::from(vec![true, false]))),
            some(&["true", "false"])
        );
        let dec = Decimal128Array::from(vec![1230_i128, -5, 0])
            .with_precision_and_scale(10, 2)
            .unwrap();
        assert_eq!(strings(Arc::new(dec)), some(&["12.30", "-0.05", "0.00"]));
        assert_eq!(
            strings(Arc::new(Int64Array::from(vec![-42_i64, i64::MAX]))),
            some(&["-42", "9223372036854775807"])
        );
        assert_eq!(
            strings(Arc::new(BinaryArray::from(vec![
                b"a b".as_ref(),
                "日本".as_bytes()
            ]))),
            some(&["a b", "日本"])
        );
        assert!(
            partition_strings(
                &(Arc::new(BinaryArray::from(vec![[0xff_u8].as_ref()])) as ArrayRef),
                Style::Delta
            )
            .is_err()
        );
    }

    #[test]
    fn split_groups_rows_by_timestamp_partition() {
        use arrow_schema::{Field, Schema};
        let ts = TimestampMicrosecondArray::from(vec![0_i64, 1, 0]).with_timezone("UTC");
        let schema = Arc::new(Schema::new(vec![Field::new(
            "ts",
            ts.data_type().clone(),
            true,
        )]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(ts)]).unwrap();
        let parts = split(&batch, &["ts".to_string()], Style::Delta).unwrap();
        let keys: Vec<_> = parts
            .iter()
            .map(|(k, b)| (k.clone(), b.num_rows()))
            .collect();
        assert_eq!(
            keys,
            vec![
                (vec![Some("1970-01-01T00:00:00Z".to_string())], 2),
                (vec![Some("1970-01-01T00:00:00.000001Z".to_string())], 1)
            ]
        );
    }
}
