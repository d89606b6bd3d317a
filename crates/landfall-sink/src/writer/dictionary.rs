//! Which columns of a data file get a Parquet dictionary: decided on the file's first rows, as
//! parquet-mr (Spark's writer) decides on a column's first page.
//!
//! arrow-rs dictionary-encodes every column until its dictionary outgrows the page limit
//! (1 MiB), so a column of unique values (ids, amounts, timestamps) is hashed into a
//! dictionary of 131,072 values per row group before it falls back to plain encoding: work
//! that makes the file no smaller. parquet-mr keeps the dictionary only when, on the first page,
//! the dictionary and the encoded indices together are smaller than the plain values
//! (`DictionaryValuesWriter.isCompressionSatisfying`). This module applies the same test
//! to the first rows written to a file ([`choose`]): a top-level column of fixed-width numbers or strings
//! whose sample says the dictionary does not pay is written plain from its first row; every
//! other column keeps arrow-rs's default (dictionary, with its own fallback).
//!
//! The choice changes only the encoding, never the values: every reader decodes both.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::*;
use arrow_schema::DataType;
use parquet::file::properties::WriterPropertiesBuilder;
use parquet::schema::types::ColumnPath;
use std::collections::HashSet;

/// Rows a sample must hold to decide: fewer say too little about a column's repetition, and
/// the column keeps the dictionary.
pub(crate) const SAMPLE_ROWS: usize = 4096;

/// `props` with no dictionary for the columns of a file whose first rows are `first` that
/// [`dictionary_pays`] rejects.
pub(crate) fn choose(
    mut props: WriterPropertiesBuilder,
    first: &RecordBatch,
) -> WriterPropertiesBuilder {
    if first.num_rows() >= SAMPLE_ROWS {
        for (field, column) in first.schema().fields().iter().zip(first.columns()) {
            if dictionary_pays(column) == Some(false) {
                props = props.set_column_dictionary_enabled(
                    ColumnPath::new(vec![field.name().clone()]),
                    false,
                );
            }
        }
    }
    props
}

/// Whether a dictionary makes `a` smaller, parquet-mr's test: the distinct values plus one
/// index of `bit_width(distinct)` bits per value, against the plain values (byte arrays with
/// their 4-byte lengths). `None` for a column it does not judge (nested, boolean, decimal,
/// all null).
pub(crate) fn dictionary_pays(a: &ArrayRef) -> Option<bool> {
    let n = a.len() - a.null_count();
    if n == 0 {
        return None;
    }
    let (plain, dictionary, distinct) = match a.data_type() {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::Date32
        | DataType::Float32 => fixed(a, 4)?,
        DataType::Int64
        | DataType::UInt64
        | DataType::Date64
        | DataType::Float64
        | DataType::Timestamp(_, _) => fixed(a, 8)?,
        DataType::Utf8 => bytes(a.as_string::<i32>().iter().map(|v| v.map(str::as_bytes))),
        DataType::LargeUtf8 => bytes(a.as_string::<i64>().iter().map(|v| v.map(str::as_bytes))),
        DataType::Binary => bytes(a.as_binary::<i32>().iter()),
        DataType::LargeBinary => bytes(a.as_binary::<i64>().iter()),
        _ => return None,
    };
    let index_bits = usize::BITS - distinct.saturating_sub(1).leading_zeros();
    let indices = (n * index_bits as usize).div_ceil(8);
    Some(dictionary + indices < plain)
}

/// (plain bytes, dictionary bytes, distinct values) of a column of fixed-width values, each
/// stored in `width` bytes in Parquet (8- and 16-bit integers are INT32 there). Values are
/// told apart by their bits, as Parquet's dictionary tells them apart.
fn fixed(a: &ArrayRef, width: usize) -> Option<(usize, usize, usize)> {
    let mut seen = HashSet::with_capacity(a.len());
    macro_rules! bits {
        ($t:ty, $f:expr) => {{
            let p = a.as_primitive::<$t>();
            for v in p.iter().flatten() {
                seen.insert($f(v));
            }
        }};
    }
    match a.data_type() {
        DataType::Int8 => bits!(Int8Type, |v: i8| v as u64),
        DataType::Int16 => bits!(Int16Type, |v: i16| v as u64),
        DataType::Int32 => bits!(Int32Type, |v: i32| v as u64),
        DataType::UInt8 => bits!(UInt8Type, |v: u8| v as u64),
        DataType::UInt16 => bits!(UInt16Type, |v: u16| v as u64),
        DataType::UInt32 => bits!(UInt32Type, |v: u32| v as u64),
        DataType::Date32 => bits!(Date32Type, |v: i32| v as u64),
        DataType::Float32 => bits!(Float32Type, |v: f32| v.to_bits() as u64),
        DataType::Int64 => bits!(Int64Type, |v: i64| v as u64),
        DataType::UInt64 => bits!(UInt64Type, |v: u64| v),
        DataType::Date64 => bits!(Date64Type, |v: i64| v as u64),
        DataType::Float64 => bits!(Float64Type, |v: f64| v.to_bits()),
        DataType::Timestamp(TimeUnit::Second, _) => bits!(TimestampSecondType, |v: i64| v as u64),
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            bits!(TimestampMillisecondType, |v: i64| v as u64)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            bits!(TimestampMicrosecondType, |v: i64| v as u64)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            bits!(TimestampNanosecondType, |v: i64| v as u64)
        }
        _ => return None,
    }
    let n = a.len() - a.null_count();
    Some((n * width, seen.len() * width, seen.len()))
}

/// (plain bytes, dictionary bytes, distinct values) of a column of byte strings.
fn bytes<'a>(values: impl Iterator<Item = Option<&'a [u8]>>) -> (usize, usize, usize) {
    let (mut plain, mut dictionary) = (0, 0);
    let mut seen = HashSet::new();
    for v in values.flatten() {
        plain += 4 + v.len();
        if seen.insert(v) {
            dictionary += 4 + v.len();
        }
    }
    (plain, dictionary, seen.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::file_properties as properties;
    use arrow::array::{Float64Array, Int32Array, Int64Array, StringArray};
    use parquet::basic::Compression;
    use std::sync::Arc;

    fn pays(a: impl Array + 'static) -> Option<bool> {
        dictionary_pays(&(Arc::new(a) as ArrayRef))
    }

    #[test]
    fn unique_values_are_plain_and_repeated_ones_keep_the_dictionary() {
        let n = 8192;
        assert_eq!(pays(Int64Array::from_iter_values(0..n)), Some(false));
        assert_eq!(
            pays(Int64Array::from_iter_values((0..n).map(|i| i % 100))),
            Some(true)
        );
        let amounts = (0..n).map(|i| i as f64 * 0.37);
        assert_eq!(pays(Float64Array::from_iter_values(amounts)), Some(false));
        let notes = (0..n).map(|_| "x".repeat(170));
        assert_eq!(pays(StringArray::from_iter_values(notes)), Some(true));
        let ids = (0..n).map(|i| format!("order-{i:08}"));
        assert_eq!(pays(StringArray::from_iter_values(ids)), Some(false));
        // The threshold: 4-byte values, 2,048 distinct in 8,192 (an 11-bit index): 8 KiB of
        // dictionary and 11 KiB of indices against 32 KiB plain.
        assert_eq!(
            pays(Int32Array::from_iter_values(
                (0..n as i32).map(|i| i % 2048)
            )),
            Some(true)
        );
        // 6,000 distinct: 23.4 KiB of dictionary and 13 KiB of indices against 32 KiB.
        assert_eq!(
            pays(Int32Array::from_iter_values(
                (0..n as i32).map(|i| i % 6000)
            )),
            Some(false)
        );
    }

    #[test]
    fn nulls_are_not_values_and_other_types_are_not_judged() {
        let mostly_null = Int64Array::from_iter((0..8192).map(|i| (i % 10 == 0).then_some(i)));
        assert_eq!(pays(mostly_null), Some(false));
        assert_eq!(pays(Int64Array::from(vec![None::<i64>; 10])), None);
        assert_eq!(pays(arrow::array::BooleanArray::from(vec![true; 10])), None);
    }

    #[test]
    fn only_a_large_enough_first_batch_decides() {
        let batch = |n: i64| {
            RecordBatch::try_from_iter([
                (
                    "id",
                    Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
                ),
                (
                    "kind",
                    Arc::new(StringArray::from_iter_values(
                        (0..n).map(|i| format!("k{}", i % 3)),
                    )),
                ),
            ])
            .unwrap()
        };
        let id = ColumnPath::new(vec!["id".into()]);
        let kind = ColumnPath::new(vec!["kind".into()]);
        let big = properties(&batch(SAMPLE_ROWS as i64));
        assert!(!big.dictionary_enabled(&id));
        assert!(big.dictionary_enabled(&kind));
        assert_eq!(big.compression(&id), Compression::SNAPPY);
        let small = properties(&batch(SAMPLE_ROWS as i64 - 1));
        assert!(small.dictionary_enabled(&id));
        assert!(small.dictionary_enabled(&kind));
    }
}
