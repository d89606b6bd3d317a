//! The type changes of `schema_evolution_mode = "add_new_columns_with_type_widening"`: Auto
//! Loader's rules, which are the changes Delta's `typeWidening` table feature allows (Delta
//! PROTOCOL.md, "Type Widening"). One place decides them, for the decoders (which note a
//! column a value does not fit, with the type that would hold it), the engine (which stores the
//! widened schema) and the Delta sink (which changes the table's column).
//!
//! | column | widens to |
//! |---|---|
//! | BYTE, SHORT, INT | a wider integer, DOUBLE, or a DECIMAL with at least 10 integer digits |
//! | LONG | a DECIMAL with at least 20 integer digits |
//! | FLOAT | DOUBLE |
//! | DECIMAL(p, s) | DECIMAL(p', s') with s' >= s and p' - s' >= p - s (the precision grows at least as much as the scale) |
//! | DATE | TIMESTAMP_NTZ |
//!
//! Not widenings (the value stays rescued, as Auto Loader keeps it): LONG to DOUBLE or FLOAT
//! (a double does not hold every long), any integer to FLOAT, DECIMAL to DOUBLE, anything to
//! STRING, and DATE to a zoned TIMESTAMP.
//!
//! A value's type merges with its column's as Auto Loader merges them: an integer column and a
//! decimal value meet at the decimal with the integer's digits and the decimal's scale (INT and
//! DECIMAL(5,2) give DECIMAL(12,2), since an INT needs 10 integer digits), two decimals at the
//! most integer digits and the largest scale; past 38 digits there is no decimal and so no
//! widening.

use arrow_schema::{DataType, TimeUnit};

/// The integer digits a DECIMAL needs to be a widening of an integer type: Delta allows
/// BYTE, SHORT and INT to `DECIMAL(10 + k1, k2)` and LONG to `DECIMAL(20 + k1, k2)`
/// (PROTOCOL.md, "Type Widening"; Spark checks `isWiderThan(IntegerType)`), so a BYTE or SHORT
/// column needs 10 too, not the 3 or 5 its values have.
fn integer_digits(t: &DataType) -> Option<i16> {
    match t {
        DataType::Int8 | DataType::Int16 | DataType::Int32 => Some(10),
        DataType::Int64 => Some(20),
        _ => None,
    }
}

/// Field metadata of a stream column that the stream widened (schema evolution under
/// `add_new_columns_with_type_widening`), with the type it had (DDL). The Delta sink widens
/// only such columns: a table column narrower than a stream's inferred or given type is not
/// widened without a value that needed it.
pub const WIDENED_FROM: &str = "landfall.widened_from";

/// Field metadata of a noted column (`NewColumns`) that is an existing column's widened
/// type, not a new column: its notes merge by the widening rules.
pub const WIDENING_NOTE: &str = "landfall.widening_note";

/// `schema` without [`WIDENED_FROM`] marks (at every level of structs), as tables and data
/// files are to hold it.
pub fn without_marks(schema: &arrow_schema::Schema) -> arrow_schema::Schema {
    use arrow_schema::{Field, Fields};
    fn field(f: &Field) -> Field {
        let mut f = f.clone();
        if f.metadata().contains_key(WIDENED_FROM) {
            let mut meta = f.metadata().clone();
            meta.remove(WIDENED_FROM);
            f = f.with_metadata(meta);
        }
        match f.data_type().clone() {
            DataType::Struct(children) => {
                let children: Fields = children.iter().map(|c| field(c)).collect();
                f.with_data_type(DataType::Struct(children))
            }
            _ => f,
        }
    }
    arrow_schema::Schema::new_with_metadata(
        schema.fields().iter().map(|f| field(f)).collect::<Vec<_>>(),
        schema.metadata().clone(),
    )
}

/// A widening as messages and schema versions name it: `user.score INT -> DOUBLE`.
pub fn describe(path: &str, from: &DataType, to: &DataType) -> String {
    format!(
        "{path} {} -> {}",
        crate::ddl::type_to_ddl(from),
        crate::ddl::type_to_ddl(to)
    )
}

/// Two widened types noted for one column merged: the one that widens to the other, or when
/// neither does (a DOUBLE and a DECIMAL), the first (the other's values stay rescued on the
/// read that follows).
pub fn merge_noted(first: &DataType, second: &DataType) -> DataType {
    if first == second {
        return first.clone();
    }
    widened(first, second)
        .or_else(|| widened(second, first))
        .unwrap_or_else(|| first.clone())
}

/// The decimal holding every value of a decimal or integer type, and of another, with the
/// most integer digits and the largest scale; `None` past 38 digits.
fn decimal_holding(a: &DataType, b: &DataType) -> Option<DataType> {
    let parts = |t: &DataType| -> Option<(i16, i16)> {
        match t {
            DataType::Decimal128(p, s) if *s >= 0 => Some((*p as i16 - *s as i16, *s as i16)),
            t => integer_digits(t).map(|d| (d, 0)),
        }
    };
    let (ia, sa) = parts(a)?;
    let (ib, sb) = parts(b)?;
    let scale = sa.max(sb);
    let precision = ia.max(ib) + scale;
    (precision <= 38).then(|| DataType::Decimal128(precision.max(1) as u8, scale as i8))
}

/// Whether Delta's type widening may change a column from `from` to `to` (a different type).
pub fn is_widening(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    if from == to {
        return false;
    }
    match (from, to) {
        (Int8, Int16 | Int32 | Int64) | (Int16, Int32 | Int64) | (Int32, Int64) => true,
        (Int8 | Int16 | Int32, Float64) | (Float32, Float64) => true,
        (Int8 | Int16 | Int32 | Int64, Decimal128(p, s)) => {
            *s >= 0 && (*p as i16 - *s as i16) >= integer_digits(from).unwrap_or(i16::MAX)
        }
        (Decimal128(p1, s1), Decimal128(p2, s2)) => {
            *s1 >= 0 && s2 >= s1 && (*p2 as i16 - *s2 as i16) >= (*p1 as i16 - *s1 as i16)
        }
        (Date32, Timestamp(TimeUnit::Microsecond, None)) => true,
        _ => false,
    }
}

/// The type a column of type `column` widens to so that it holds values of type `observed`
/// (a value that does not fit it, or a source file's column), or `None` when no widening does
/// or none is needed.
pub fn widened(column: &DataType, observed: &DataType) -> Option<DataType> {
    use DataType::*;
    let to = match (column, observed) {
        _ if column == observed => return None,
        (Int8 | Int16 | Int32 | Int64, Int8 | Int16 | Int32 | Int64) => observed.clone(),
        (Int8 | Int16 | Int32, Float32 | Float64) | (Float32, Float64) => Float64,
        // A FLOAT column meeting an integer it does not hold exactly (past 2^24).
        (Float32, Int8 | Int16 | Int32 | Int64) => Float64,
        (Int8 | Int16 | Int32 | Int64 | Decimal128(..), Decimal128(..))
        | (Decimal128(..), Int8 | Int16 | Int32 | Int64) => decimal_holding(column, observed)?,
        (Date32, Timestamp(_, None)) => Timestamp(TimeUnit::Microsecond, None),
        _ => return None,
    };
    is_widening(column, &to).then_some(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use DataType::*;

    #[test]
    fn auto_loader_widenings() {
        assert_eq!(widened(&Int32, &Int64), Some(Int64));
        assert_eq!(widened(&Int8, &Int16), Some(Int16));
        assert_eq!(widened(&Int16, &Int64), Some(Int64));
        assert_eq!(widened(&Int32, &Float64), Some(Float64));
        assert_eq!(widened(&Int8, &Float32), Some(Float64));
        // Delta allows a BYTE or SHORT only to a DECIMAL with 10 integer digits, as an INT.
        assert_eq!(widened(&Int8, &Decimal128(2, 1)), Some(Decimal128(11, 1)));
        assert!(!is_widening(&Int8, &Decimal128(4, 1)));
        assert!(!is_widening(&Int16, &Decimal128(9, 3)));
        assert_eq!(merge_noted(&Int64, &Decimal128(23, 0)), Decimal128(23, 0));
        assert_eq!(merge_noted(&Float64, &Decimal128(23, 0)), Float64);
        assert_eq!(merge_noted(&Int64, &Float64), Int64);
        assert_eq!(widened(&Float32, &Float64), Some(Float64));
        assert_eq!(widened(&Float32, &Int64), Some(Float64));
        // int + decimal(5,2) -> decimal(12,2), as Auto Loader widens them.
        assert_eq!(widened(&Int32, &Decimal128(5, 2)), Some(Decimal128(12, 2)));
        assert_eq!(widened(&Int64, &Decimal128(3, 2)), Some(Decimal128(22, 2)));
        assert_eq!(
            widened(&Decimal128(5, 2), &Decimal128(9, 3)),
            Some(Decimal128(9, 3))
        );
        assert_eq!(
            widened(&Decimal128(5, 2), &Decimal128(4, 4)),
            Some(Decimal128(7, 4))
        );
        assert_eq!(widened(&Decimal128(5, 2), &Int64), Some(Decimal128(22, 2)));
        assert_eq!(
            widened(&Date32, &Timestamp(TimeUnit::Microsecond, None)),
            Some(Timestamp(TimeUnit::Microsecond, None))
        );
        assert_eq!(
            widened(&Date32, &Timestamp(TimeUnit::Nanosecond, None)),
            Some(Timestamp(TimeUnit::Microsecond, None))
        );
    }

    #[test]
    fn not_widenings() {
        // A double does not hold every long; Delta does not allow it.
        assert_eq!(widened(&Int64, &Float64), None);
        assert_eq!(widened(&Int64, &Int32), None);
        assert_eq!(widened(&Int32, &Int8), None);
        assert_eq!(widened(&Int32, &Int32), None);
        assert_eq!(widened(&Int32, &Utf8), None);
        assert_eq!(widened(&Decimal128(5, 2), &Float64), None);
        assert_eq!(widened(&Float64, &Decimal128(5, 2)), None);
        assert_eq!(widened(&Utf8, &Int64), None);
        assert_eq!(widened(&Boolean, &Int64), None);
        assert_eq!(
            widened(
                &Date32,
                &Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
            ),
            None
        );
        // Past 38 digits no decimal holds both.
        assert_eq!(widened(&Int64, &Decimal128(38, 20)), None);
        assert_eq!(widened(&Decimal128(5, 2), &Decimal128(5, 2)), None);
        assert!(!is_widening(&Decimal128(10, 2), &Decimal128(10, 3)));
        assert!(!is_widening(&Int32, &Decimal128(11, 2)));
        assert!(is_widening(&Int32, &Decimal128(12, 2)));
        assert!(!is_widening(&Int64, &Float64));
        assert!(!is_widening(&Int32, &Float32));
    }
}
