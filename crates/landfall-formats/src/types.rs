//! Type helpers every other module builds on: merging and widening types as Spark's inference
//! merges them, leaves as strings, Spark's field order and integer digits. Inference
//! ([`crate::infer`]) and rescue ([`crate::rescue`]) both sit on top; this module calls
//! neither.

use arrow_schema::{DataType, Field, Fields, TimeUnit};
use std::cmp::Ordering;
use std::sync::Arc;

/// The most digits a DECIMAL holds (Spark's and Delta's DecimalType.MAX_PRECISION).
pub(crate) const MAX_PRECISION: u8 = 38;

/// Replace every leaf type with `Utf8`, keeping structs and lists.
pub fn stringify_leaves(ty: &DataType) -> DataType {
    match ty {
        DataType::Struct(fs) => DataType::Struct(
            fs.iter()
                .map(|f| stringify_field(f))
                .collect::<Vec<_>>()
                .into(),
        ),
        DataType::List(f) => DataType::List(Arc::new(stringify_field(f))),
        DataType::Null => DataType::Utf8,
        _ => DataType::Utf8,
    }
}

fn stringify_field(f: &Field) -> Field {
    Field::new(f.name(), stringify_leaves(f.data_type()), true)
}

/// The narrowest type both `a` and `b` fit in; strings when nothing narrower does.
pub fn merge_widen(a: &DataType, b: &DataType) -> DataType {
    use DataType::*;
    match (a, b) {
        _ if a == b => a.clone(),
        (Null, t) | (t, Null) => t.clone(),
        (Int8 | Int16 | Int32 | Int64, Int8 | Int16 | Int32 | Int64) => Int64,
        // Decimals merge as Spark merges them: the most integer digits and the largest scale; an
        // integer counts as the digits of its type (BIGINT: 20). Past 38 digits, or with a
        // floating-point type, no number type holds both exactly: strings (Spark's JSON
        // inference would pick DOUBLE and round).
        (Decimal128(p1, s1), Decimal128(p2, s2)) => {
            let scale = (*s1).max(*s2).max(0) as u8;
            let int = (*p1 as i16 - *s1 as i16)
                .max(*p2 as i16 - *s2 as i16)
                .max(0) as u8;
            match int.checked_add(scale) {
                Some(p) if p <= 38 => Decimal128(p.max(1), scale as i8),
                _ => Utf8,
            }
        }
        (Decimal128(..), Int8 | Int16 | Int32 | Int64) => merge_widen(a, &integer_decimal(b)),
        (Int8 | Int16 | Int32 | Int64, Decimal128(..)) => merge_widen(&integer_decimal(a), b),
        (Int8 | Int16 | Int32 | Int64 | Float32 | Float64, Float32 | Float64)
        | (Float32 | Float64, Int8 | Int16 | Int32 | Int64) => Float64,
        (Struct(x), Struct(y)) => Struct(merge_fields(x, y)),
        (List(x), List(y)) => List(Arc::new(Field::new(
            x.name(),
            merge_widen(x.data_type(), y.data_type()),
            true,
        ))),
        _ => Utf8,
    }
}

/// An integer type as the decimal that holds all its values (Spark's `DecimalType.forType`).
fn integer_decimal(t: &DataType) -> DataType {
    DataType::Decimal128(integer_digits(t).unwrap_or(20), 0)
}

/// Decimal digits of every value of an integer type (Spark's `DecimalType.forType`).
pub(crate) fn integer_digits(t: &DataType) -> Option<u8> {
    match t {
        DataType::Int8 => Some(3),
        DataType::Int16 => Some(5),
        DataType::Int32 => Some(10),
        DataType::Int64 => Some(20),
        _ => None,
    }
}

/// Names in the order Spark sorts inferred fields (Java's `String.compareTo`).
pub(crate) fn name_order(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

pub(crate) fn merge_fields(a: &Fields, b: &Fields) -> Fields {
    merge_fields_with(a, b, merge_widen)
}

/// `b`'s fields merged into `a`'s by name, in first-seen order, types merged by `merge`.
pub(crate) fn merge_fields_with(
    a: &Fields,
    b: &Fields,
    merge: impl Fn(&DataType, &DataType) -> DataType,
) -> Fields {
    let mut out: Vec<Field> = a
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    for f in b {
        match out.iter_mut().find(|g| g.name() == f.name()) {
            Some(g) => *g = Field::new(g.name(), merge(g.data_type(), f.data_type()), true),
            None => out.push(f.as_ref().clone().with_nullable(true)),
        }
    }
    out.into()
}

/// Spark's timestamp type for inferred values (`spark.sql.timestampType` = TIMESTAMP_LTZ).
pub(crate) fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

pub(crate) fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(item, true)))
}

/// Rank of a type in Spark's numeric precedence (byte < short < int < long < float < double).
fn numeric_rank(t: &DataType) -> Option<u8> {
    match t {
        DataType::Int8 => Some(0),
        DataType::Int16 => Some(1),
        DataType::Int32 => Some(2),
        DataType::Int64 => Some(3),
        DataType::Float32 => Some(4),
        DataType::Float64 => Some(5),
        _ => None,
    }
}

/// Spark's `TypeCoercion.findTightestCommonType` on the types inference produces: the same
/// type, null with anything, the wider of two numbers, an integer inside a wide enough
/// decimal, a date or zone-less timestamp with a timestamp.
pub(crate) fn tightest(a: &DataType, b: &DataType) -> Option<DataType> {
    use DataType::*;
    if a == b {
        return Some(a.clone());
    }
    match (a, b) {
        (Null, t) | (t, Null) => Some(t.clone()),
        _ if numeric_rank(a).is_some() && numeric_rank(b).is_some() => Some(
            if numeric_rank(a) > numeric_rank(b) {
                a
            } else {
                b
            }
            .clone(),
        ),
        (Decimal128(p, s), i) | (i, Decimal128(p, s)) if integer_digits(i).is_some() => {
            let wide = *s >= 0 && (*p as i16 - *s as i16) >= integer_digits(i)? as i16;
            wide.then_some(Decimal128(*p, *s))
        }
        (Timestamp(u, Some(z)), Timestamp(_, None) | Date32)
        | (Timestamp(_, None) | Date32, Timestamp(u, Some(z))) => {
            Some(Timestamp(*u, Some(z.clone())))
        }
        (Timestamp(u, None), Date32) | (Date32, Timestamp(u, None)) => Some(Timestamp(*u, None)),
        _ => None,
    }
}

/// Two decimals as one: the most integer digits and the largest scale; DOUBLE past 38 digits.
pub(crate) fn merge_decimals(p1: u8, s1: i8, p2: u8, s2: i8) -> DataType {
    let scale = s1.max(s2).max(0) as i16;
    let range = (p1 as i16 - s1 as i16).max(p2 as i16 - s2 as i16).max(0);
    if range + scale > MAX_PRECISION as i16 {
        DataType::Float64
    } else {
        DataType::Decimal128((range + scale).max(1) as u8, scale as i8)
    }
}

/// The final form of a merged type (Spark's `canonicalizeType`): a type still null is a
/// string; structs with no fields and fields with empty names disappear.
pub(crate) fn canonical(ty: &DataType) -> Option<DataType> {
    match ty {
        DataType::Null => Some(DataType::Utf8),
        DataType::List(item) => canonical(item.data_type()).map(list_of),
        DataType::Struct(fs) => {
            let kept: Vec<Field> = canonical_fields(fs);
            (!kept.is_empty()).then(|| DataType::Struct(kept.into()))
        }
        other => Some(other.clone()),
    }
}

/// [`canonical`] of each field; the ones that disappear are left out.
pub(crate) fn canonical_fields(fs: &Fields) -> Vec<Field> {
    fs.iter()
        .filter(|f| !f.name().is_empty())
        .filter_map(|f| canonical(f.data_type()).map(|t| Field::new(f.name(), t, true)))
        .collect()
}
