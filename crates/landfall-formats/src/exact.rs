//! Whether a conversion kept each value: landfall never writes a value a cast changed. A value
//! that would change is a misfit: rescued, or null and counted, or an error, as the caller's
//! policy says ([`crate::conform`]).
//!
//! A value lands when its column holds exactly the value it was:
//!
//! - Between numbers (integers, floats, decimals, booleans as 0 and 1), and between dates and
//!   timestamps, the cast value is cast back to the source's type and compared, NaN equal to
//!   NaN and -0.0 to 0.0. So `3.7` is no BIGINT, `2` no BOOLEAN, `2^53 + 1` no DOUBLE, a
//!   DOUBLE `0.1` or `1e300` no FLOAT, `3.70` no INT, `12:00` no DATE, and a nanosecond no
//!   TIMESTAMP (microseconds). A float and a decimal are compared through the standard
//!   library's exact formatting and parsing, not arrow's float arithmetic: a DOUBLE lands in a
//!   decimal when the decimal reads back as that DOUBLE, a decimal in a DOUBLE when the DOUBLE,
//!   at the decimal's scale, is that decimal.
//! - Text is read by its meaning, not compared as text (`007` is 7, exactly): into an integer
//!   or a decimal it must keep every digit (arrow refuses `3.7` for an integer itself); into a
//!   FLOAT or DOUBLE it is the nearest float, unless it overflows to infinity or a non-zero
//!   reads as zero; into a DATE it has no time of day; into a TIMESTAMP no digits past the
//!   column's unit.
//! - A number is no date or timestamp, nor the reverse (arrow would take it as days or
//!   microseconds since the epoch): every such value is a misfit.
//! - A list or a map is one value: an element, key or value that would change (or be lost)
//!   makes it a misfit; struct members inside follow the rules of their own types, and a
//!   struct whose members are not the same names (one dropped, added or renamed) changed.
//! - Text is a BOOLEAN only as `true` or `false` (any case), as in Spark; timestamp text with
//!   a zone or an offset is no TIMESTAMP_NTZ; a fraction of a second is checked digit by
//!   digit, past the ninth too.
//! - Anything cast to text is its display, exact. Other pairs are taken as arrow casts them.
//!
//! A value that became null is not kept either; a null is never a misfit.

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::buffer::{BooleanBuffer, NullBuffer};
use arrow::compute::kernels::cast_utils::string_to_datetime;
use arrow::datatypes::{Decimal128Type, Decimal256Type, Float64Type};
use arrow_schema::{DataType, TimeUnit};
use chrono::{NaiveTime, Utc};

/// The rows whose non-null value `cast` (a cast of `src`, row for row) does not hold exactly:
/// nulled, or changed.
pub(crate) fn not_kept(src: &ArrayRef, cast: &ArrayRef) -> Vec<usize> {
    if src.data_type() == cast.data_type() || src.logical_null_count() == src.len() {
        return Vec::new();
    }
    mask(src, cast).set_indices().collect()
}

/// Per row: the value of `src` is valid and `cast` does not hold it.
fn mask(src: &ArrayRef, cast: &ArrayRef) -> BooleanBuffer {
    let n = src.len();
    let src_valid = valid(src.logical_nulls(), n);
    let cast_valid = valid(cast.logical_nulls(), n);
    let nulled = &src_valid & &!&cast_valid;
    match changed(src, cast) {
        Some(changed) => &nulled | &(&(&changed & &src_valid) & &cast_valid),
        None => nulled,
    }
}

fn valid(nulls: Option<NullBuffer>, n: usize) -> BooleanBuffer {
    nulls.map_or_else(|| BooleanBuffer::new_set(n), |b| b.inner().clone())
}

#[derive(PartialEq, Eq)]
enum Kind {
    Number,
    Temporal,
    Text,
    Other,
}

fn kind(t: &DataType) -> Kind {
    match t {
        DataType::Boolean => Kind::Number,
        t if t.is_numeric() => Kind::Number,
        DataType::Date32 | DataType::Date64 | DataType::Timestamp(..) => Kind::Temporal,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Kind::Text,
        _ => Kind::Other,
    }
}

/// Per row, whether the value changed (meaningful where both are valid); `None`: no rule for
/// this pair, or nothing changed that can be told.
fn changed(src: &ArrayRef, cast: &ArrayRef) -> Option<BooleanBuffer> {
    let n = src.len();
    if let DataType::Dictionary(_, values) = src.data_type() {
        let plain = arrow::compute::cast(src, values).ok()?;
        return Some(mask(&plain, cast));
    }
    match (src.data_type(), cast.data_type()) {
        (a, b) if a == b => None,
        (
            DataType::List(_) | DataType::LargeList(_),
            DataType::List(_) | DataType::LargeList(_),
        ) => lists(src, cast),
        (DataType::Map(..), DataType::Map(..)) => maps(src, cast),
        (DataType::Struct(from), DataType::Struct(to)) => {
            // arrow casts members by name when the target's are all in the source (dropping
            // the source's others), else by position when the counts agree. Kept: the same
            // names (by name), or names that differ only in case at the same places (by
            // position). Any other pairing loses or moves a value: every value changed.
            let by_name =
                from.len() == to.len() && to.iter().all(|t| from.find(t.name()).is_some());
            let by_place = from.len() == to.len()
                && from
                    .iter()
                    .zip(to.iter())
                    .all(|(f, t)| f.name().eq_ignore_ascii_case(t.name()));
            if !by_name && !by_place {
                return Some(BooleanBuffer::new_set(n));
            }
            let (s, c) = (src.as_struct(), cast.as_struct());
            let mut out = BooleanBuffer::new_unset(n);
            for (j, t) in to.iter().enumerate() {
                let i = if by_name { from.find(t.name())?.0 } else { j };
                out = &out | &mask(s.column(i), c.column(j));
            }
            Some(out)
        }
        (a, b) => match (kind(a), kind(b)) {
            (_, Kind::Text) => None,
            (Kind::Text, _) => text(src, cast),
            (Kind::Number, Kind::Temporal) | (Kind::Temporal, Kind::Number) => {
                Some(BooleanBuffer::new_set(n))
            }
            (Kind::Number, Kind::Number) | (Kind::Temporal, Kind::Temporal) => {
                round_trip(src, cast)
            }
            _ => None,
        },
    }
}

/// A list changed when one of its elements was not kept; elements line up with the source's
/// (arrow casts a list's values and keeps its offsets).
fn lists(src: &ArrayRef, cast: &ArrayRef) -> Option<BooleanBuffer> {
    fn parts(a: &ArrayRef) -> Option<(Vec<usize>, ArrayRef)> {
        match a.data_type() {
            DataType::List(_) => {
                let l = a.as_list::<i32>();
                Some((
                    l.offsets().iter().map(|&o| o as usize).collect(),
                    l.values().clone(),
                ))
            }
            DataType::LargeList(_) => {
                let l = a.as_list::<i64>();
                Some((
                    l.offsets().iter().map(|&o| o as usize).collect(),
                    l.values().clone(),
                ))
            }
            _ => None,
        }
    }
    let (src_offsets, src_values) = parts(src)?;
    let (cast_offsets, cast_values) = parts(cast)?;
    if src_offsets != cast_offsets || src_values.len() != cast_values.len() {
        return None;
    }
    Some(any_in(&src_offsets, &mask(&src_values, &cast_values)))
}

/// Per entry of `offsets`, whether one of its items is set.
fn any_in(offsets: &[usize], items: &BooleanBuffer) -> BooleanBuffer {
    offsets
        .windows(2)
        .map(|w| (w[0]..w[1]).any(|k| items.value(k)))
        .collect()
}

/// A map changed when one of its keys or values was not kept (arrow casts a map's entries
/// and keeps its offsets).
fn maps(src: &ArrayRef, cast: &ArrayRef) -> Option<BooleanBuffer> {
    let (s, c) = (src.as_map(), cast.as_map());
    if s.offsets() != c.offsets() || s.keys().len() != c.keys().len() {
        return Some(BooleanBuffer::new_set(src.len()));
    }
    let items = &mask(s.keys(), c.keys()) | &mask(s.values(), c.values());
    let offsets: Vec<usize> = s.offsets().iter().map(|&o| o as usize).collect();
    Some(any_in(&offsets, &items))
}

/// Cast back to the source's type and compare.
fn round_trip(src: &ArrayRef, cast: &ArrayRef) -> Option<BooleanBuffer> {
    let (from, to) = (src.data_type(), cast.data_type());
    if from.is_floating() && is_decimal(to) {
        return Some(float_in_decimal(src, cast));
    }
    if is_decimal(from) && to.is_floating() {
        return Some(decimal_in_float(src, cast));
    }
    let back = arrow::compute::cast(cast, from).ok()?;
    if from.is_floating() {
        let as_f64 = |a: &ArrayRef| arrow::compute::cast(a, &DataType::Float64).ok();
        let (before, after) = (as_f64(src)?, as_f64(&back)?);
        let (before, after) = (
            before.as_primitive::<Float64Type>(),
            after.as_primitive::<Float64Type>(),
        );
        return Some(
            (0..src.len())
                .map(|i| {
                    let (x, y) = (before.value(i), after.value(i));
                    after.is_null(i) || !(x == y || (x.is_nan() && y.is_nan()))
                })
                .collect(),
        );
    }
    let differ = arrow::compute::kernels::cmp::distinct(src, &back).ok()?;
    Some(differ.values().clone())
}

fn is_decimal(t: &DataType) -> bool {
    matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..))
}

/// Each decimal of `a` as text (`None`: null), in plain notation.
fn decimal_texts(a: &ArrayRef) -> Vec<Option<String>> {
    fn texts<T>(a: &ArrayRef, s: i8) -> Vec<Option<String>>
    where
        T: arrow::datatypes::DecimalType,
        T::Native: std::fmt::Display,
    {
        let d = a.as_primitive::<T>();
        (0..a.len())
            .map(|i| {
                d.is_valid(i)
                    .then(|| format!("{}e{}", d.value(i), -i32::from(s)))
            })
            .collect()
    }
    match a.data_type() {
        DataType::Decimal128(_, s) => texts::<Decimal128Type>(a, *s),
        DataType::Decimal256(_, s) => texts::<Decimal256Type>(a, *s),
        _ => vec![None; a.len()],
    }
}

fn floats(a: &ArrayRef) -> Option<Vec<f64>> {
    let f = arrow::compute::cast(a, &DataType::Float64).ok()?;
    Some(f.as_primitive::<Float64Type>().values().to_vec())
}

/// A float in a decimal column lands when the decimal reads back as the same float (parsed
/// in the source's own width: `0.1f32` is DECIMAL `0.10`).
fn float_in_decimal(src: &ArrayRef, cast: &ArrayRef) -> BooleanBuffer {
    let narrow = src.data_type() != &DataType::Float64;
    let (Some(before), texts) = (floats(src), decimal_texts(cast)) else {
        return BooleanBuffer::new_set(src.len());
    };
    texts
        .iter()
        .zip(before)
        .map(|(t, x)| {
            let Some(t) = t else { return false };
            let back = if narrow {
                t.parse::<f32>().map(f64::from)
            } else {
                t.parse::<f64>()
            };
            back != Ok(x)
        })
        .collect()
}

/// A decimal in a float column lands when the float, formatted exactly at the decimal's
/// scale, is the decimal.
fn decimal_in_float(src: &ArrayRef, cast: &ArrayRef) -> BooleanBuffer {
    let scale = match src.data_type() {
        DataType::Decimal128(_, s) | DataType::Decimal256(_, s) => *s,
        _ => 0,
    };
    let back = floats(cast).unwrap_or_default();
    let texts = decimal_texts(src);
    (0..src.len())
        .map(|i| {
            let (Some(t), Some(&y)) = (&texts[i], back.get(i)) else {
                return false;
            };
            if !y.is_finite() {
                return true;
            }
            // `t` is `<mantissa>e-<scale>`; `y` at that scale, without its point, must be the
            // mantissa (a scale below zero is compared through the value).
            let mantissa = t.split('e').next().unwrap_or("");
            if scale < 0 {
                return t.parse::<f64>() != Ok(y);
            }
            let shown = format!("{:.*}", scale as usize, y).replace('.', "");
            let trim = |s: &str| {
                let (neg, digits) = s.strip_prefix('-').map_or((false, s), |d| (true, d));
                let digits = digits.trim_start_matches('0');
                (neg && !digits.is_empty(), digits.to_string())
            };
            trim(&shown) != trim(mantissa)
        })
        .collect()
}

/// Text checks: whether reading the text into the cast's type changed its value.
fn text(src: &ArrayRef, cast: &ArrayRef) -> Option<BooleanBuffer> {
    let text = arrow::compute::cast(src, &DataType::Utf8).ok()?;
    let text = text.as_string::<i32>();
    let n = src.len();
    let per_row = |f: &dyn Fn(usize) -> bool| -> BooleanBuffer {
        (0..n)
            .map(|i| text.is_valid(i) && cast.is_valid(i) && f(i))
            .collect()
    };
    Some(match cast.data_type() {
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => per_row(&|i| {
            let v = text.value(i).trim().as_bytes();
            !crate::json_decimal::literal_fits(crate::json_decimal::Literal::Number(v), *p, *s)
                && v.iter().all(|b| b.is_ascii_digit() || b"+-.eE".contains(b))
        }),
        DataType::Float16 | DataType::Float32 | DataType::Float64 => {
            let values = floats(cast)?;
            per_row(&|i| float_out_of_range(text.value(i), values[i]))
        }
        // arrow also reads `1`, `yes`, `on`, `t`, `0`, `no`, `off`...: Spark only the words.
        DataType::Boolean => per_row(&|i| {
            let t = text.value(i).trim();
            !(t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false"))
        }),
        DataType::Date32 | DataType::Date64 => per_row(&|i| date_text_changes(text.value(i))),
        DataType::Timestamp(unit, zone) => {
            per_row(&|i| timestamp_text_misfits(text.value(i), *unit, zone.is_none()))
        }
        _ => return None,
    })
}

/// Whether timestamp text read into a TIMESTAMP of `unit` (`zoneless`: a TIMESTAMP_NTZ) would
/// change: digits past the unit, or a zone the column cannot keep.
pub(crate) fn timestamp_text_misfits(text: &str, unit: TimeUnit, zoneless: bool) -> bool {
    timestamp_text_changes(text, unit) || (zoneless && has_zone(text))
}

/// Whether timestamp text names a zone or an offset (`Z`, `+05:00`, `-0800`, `UTC`,
/// `America/New_York`): read into a zone-less TIMESTAMP_NTZ, arrow would shift it to UTC;
/// Spark refuses it. After the date, only the `T` between date and time is a letter of a
/// zone-less timestamp.
pub(crate) fn has_zone(text: &str) -> bool {
    text.trim().get(10..).is_some_and(|time| {
        time.contains(['+', '-', '/'])
            || time
                .chars()
                .any(|c| c.is_ascii_alphabetic() && !matches!(c, 'T' | 't'))
    })
}

/// Whether `value`, read from `text`, left the text's range: infinity from a finite number,
/// zero from a non-zero one.
pub(crate) fn float_out_of_range(text: &str, value: f64) -> bool {
    let t = text.trim();
    if value.is_infinite() {
        let word = t.trim_start_matches(['+', '-']);
        !(word.eq_ignore_ascii_case("inf") || word.eq_ignore_ascii_case("infinity"))
    } else if value == 0.0 {
        let mantissa = t.split(['e', 'E']).next().unwrap_or("");
        mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b))
    } else {
        false
    }
}

/// Whether a FLOAT (`narrow`) or DOUBLE read from `text` left its range. Only an exponent
/// or more than 38 characters can reach past a FLOAT's range, so most text is not parsed.
pub(crate) fn float_text_changes(text: &str, narrow: bool) -> bool {
    let t = text.trim();
    if t.len() <= 38 && !t.contains(['e', 'E']) {
        return false;
    }
    let value = if narrow {
        t.parse::<f32>().map(f64::from)
    } else {
        t.parse::<f64>()
    };
    value.is_ok_and(|v| float_out_of_range(t, v))
}

/// Whether text read into a DATE has a time of day (arrow keeps the date of a timestamp).
pub(crate) fn date_text_changes(text: &str) -> bool {
    if text.len() <= 10 || text.starts_with(['+', '-']) {
        return false;
    }
    string_to_datetime(&Utc, text).is_ok_and(|t| t.time() != NaiveTime::MIN)
}

/// Whether text read into a TIMESTAMP of `unit` has digits past it (arrow drops them).
pub(crate) fn timestamp_text_changes(text: &str, unit: TimeUnit) -> bool {
    // Only a fraction of a second with non-zero digits past the unit can lose any: told from
    // the text itself (a parser reads nine digits at most and drops the rest).
    let kept = match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    };
    let Some(dot) = text.get(10..).and_then(|t| t.find('.')).map(|i| i + 11) else {
        return false;
    };
    let fraction = text[dot..].bytes().take_while(u8::is_ascii_digit);
    !fraction.skip(kept).all(|b| b == b'0')
}

/// Rows of `cast` to null: the rows of `lost`.
pub(crate) fn null_rows(
    cast: &ArrayRef,
    lost: &[usize],
) -> Result<ArrayRef, arrow_schema::ArrowError> {
    if lost.is_empty() {
        return Ok(cast.clone());
    }
    let mut flags = vec![false; cast.len()];
    for &i in lost {
        flags[i] = true;
    }
    arrow::compute::nullif(cast, &BooleanArray::from(flags))
}
