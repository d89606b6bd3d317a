//! Type helpers every other module builds on: merging and widening types as Spark's inference
//! merges them, leaves as strings, Spark's field order and integer digits. Inference
//! ([`crate::infer`]) and rescue ([`crate::rescue`]) both sit on top; this module calls
//! neither.

use arrow_schema::{DataType, Field, Fields};
use std::cmp::Ordering;
use std::sync::Arc;

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
