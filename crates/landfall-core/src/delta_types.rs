//! Arrow types a Delta table can store and hands back unchanged.
//!
//! Contract: [`delta_normalize`] maps any Arrow schema to one whose every type is the exact Arrow
//! type that Delta's Arrow conversion (delta-kernel, as linked by deltalake 1.1) produces when a
//! table's schema is read back. So `delta_normalize(s)` is a fixed point of
//! "create a table from it, read its schema back", and a stream that normalises its schema
//! before `Committer::prepare` always finds its own table compatible on restart. Names,
//! nullability and field metadata of columns and struct fields are kept; only types change, and
//! the names of list/map child fields are set to what Delta reads back.
//!
//! | Arrow (stream)                           | Delta          | Arrow (read back)                |
//! |------------------------------------------|----------------|----------------------------------|
//! | Timestamp(any unit, any zone)            | TIMESTAMP      | Timestamp(Microsecond, "UTC")    |
//! | Timestamp(any unit, no zone)             | TIMESTAMP_NTZ  | Timestamp(Microsecond, None)     |
//! | Int8 / Int16 / Int32 / Int64             | BYTE/SHORT/INT/LONG | unchanged                   |
//! | UInt8 / UInt16 / UInt32                  | SHORT/INT/LONG | Int16 / Int32 / Int64            |
//! | UInt64                                   | DECIMAL(20,0)  | Decimal128(20, 0)                |
//! | Float16                                  | FLOAT          | Float32                          |
//! | Utf8 / LargeUtf8 / Utf8View              | STRING         | Utf8                             |
//! | Binary / LargeBinary / BinaryView / FixedSizeBinary | BINARY | Binary                       |
//! | Date32 / Date64                          | DATE           | Date32                           |
//! | Decimal32/64/128(p,s), Decimal256 p<=38  | DECIMAL(p,s)   | Decimal128(p, s)                 |
//! | List / LargeList / ListView / FixedSizeList | ARRAY       | List(field "element", nullability kept) |
//! | Map                                      | MAP            | Map("key_value" {key NOT NULL, value}, unsorted) |
//! | Dictionary(_, V) / RunEndEncoded(_, V)   | as V           | normalised V                     |
//! | Struct                                   | STRUCT         | Struct, fields normalised        |
//!
//! Why these choices:
//! - Timestamps: Arrow stores instants as UTC epoch offsets whatever the zone label, so any
//!   zoned timestamp is re-labelled UTC without changing a value. A zone-less timestamp is a
//!   wall-clock value, which is Delta's TIMESTAMP_NTZ (deltalake maps it there and enables the
//!   `timestampNtz` table feature on create; reader 3 / writer 7). Microseconds because the
//!   build has no `nanosecond-timestamps` feature: deltalake would store nanoseconds as a
//!   microsecond type anyway. Nanosecond values are truncated to microseconds.
//! - Unsigned integers: deltalake maps UInt32 to INT and UInt64 to LONG, which overflows for
//!   values past the signed maximum (and a safe cast turns them into nulls). Each unsigned type
//!   goes to the next wider signed type instead; UInt64 has none, so DECIMAL(20,0), which holds
//!   every u64 exactly.
//! - Types Delta has no equivalent for (Time32/64, Duration, Interval, Union, Decimal with a
//!   negative scale or precision above 38) are left as they are: table creation then fails with
//!   a message naming the type, rather than this function silently choosing a lossy mapping.

use arrow_schema::{DataType, Field, Fields, Schema, TimeUnit};
use std::sync::Arc;

/// Name Delta gives a list's element field when read back.
pub const LIST_ELEMENT: &str = "element";
/// Names Delta gives a map's entries, key and value fields when read back.
pub const MAP_ENTRIES: &str = "key_value";
pub const MAP_KEY: &str = "key";
pub const MAP_VALUE: &str = "value";

/// The schema with every type replaced by the Arrow type Delta stores and reads back (see the
/// module table). Idempotent.
pub fn delta_normalize(schema: &Schema) -> Schema {
    Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| normalize_field(f))
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    )
}

/// A field with its type normalised; name, nullability and metadata kept.
pub fn normalize_field(field: &Field) -> Field {
    field
        .clone()
        .with_data_type(normalize_type(field.data_type()))
}

/// The Arrow type Delta stores `ty` as and reads back (see the module table).
pub fn normalize_type(ty: &DataType) -> DataType {
    match ty {
        DataType::Timestamp(_, Some(_)) => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        DataType::Timestamp(_, None) => DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::UInt8 => DataType::Int16,
        DataType::UInt16 => DataType::Int32,
        DataType::UInt32 => DataType::Int64,
        DataType::UInt64 => DataType::Decimal128(20, 0),
        DataType::Float16 => DataType::Float32,
        DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            DataType::Binary
        }
        DataType::Date64 => DataType::Date32,
        DataType::Decimal32(p, s) | DataType::Decimal64(p, s) => DataType::Decimal128(*p, *s),
        DataType::Decimal256(p, s) if *p <= 38 => DataType::Decimal128(*p, *s),
        DataType::List(item)
        | DataType::LargeList(item)
        | DataType::ListView(item)
        | DataType::LargeListView(item)
        | DataType::FixedSizeList(item, _) => DataType::List(Arc::new(
            Field::new(
                LIST_ELEMENT,
                normalize_type(item.data_type()),
                item.is_nullable(),
            )
            .with_metadata(item.metadata().clone()),
        )),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                // Delta map keys are never null; the value keeps its nullability.
                let key = Field::new(MAP_KEY, normalize_type(kv[0].data_type()), false)
                    .with_metadata(kv[0].metadata().clone());
                let value = Field::new(
                    MAP_VALUE,
                    normalize_type(kv[1].data_type()),
                    kv[1].is_nullable(),
                )
                .with_metadata(kv[1].metadata().clone());
                DataType::Map(
                    Arc::new(Field::new(
                        MAP_ENTRIES,
                        DataType::Struct(Fields::from(vec![key, value])),
                        false,
                    )),
                    false,
                )
            }
            // Not a valid Arrow map; leave it for the conversion to reject by name.
            _ => ty.clone(),
        },
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| normalize_field(f))
                .collect::<Vec<_>>()
                .into(),
        ),
        DataType::Dictionary(_, values) => normalize_type(values),
        DataType::RunEndEncoded(_, values) => normalize_type(values.data_type()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(unit: TimeUnit, tz: Option<&str>) -> DataType {
        DataType::Timestamp(unit, tz.map(Into::into))
    }

    #[test]
    fn primitives_map_to_what_delta_reads_back() {
        let cases = [
            (
                ts(TimeUnit::Nanosecond, None),
                ts(TimeUnit::Microsecond, None),
            ),
            (
                ts(TimeUnit::Millisecond, Some("+02:00")),
                ts(TimeUnit::Microsecond, Some("UTC")),
            ),
            (
                ts(TimeUnit::Second, Some("Europe/Paris")),
                ts(TimeUnit::Microsecond, Some("UTC")),
            ),
            (DataType::UInt8, DataType::Int16),
            (DataType::UInt16, DataType::Int32),
            (DataType::UInt32, DataType::Int64),
            (DataType::UInt64, DataType::Decimal128(20, 0)),
            (DataType::Float16, DataType::Float32),
            (DataType::LargeUtf8, DataType::Utf8),
            (DataType::Utf8View, DataType::Utf8),
            (DataType::LargeBinary, DataType::Binary),
            (DataType::BinaryView, DataType::Binary),
            (DataType::FixedSizeBinary(16), DataType::Binary),
            (DataType::Date64, DataType::Date32),
            (DataType::Decimal64(10, 2), DataType::Decimal128(10, 2)),
            (DataType::Decimal256(38, 4), DataType::Decimal128(38, 4)),
            (
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::LargeUtf8)),
                DataType::Utf8,
            ),
            (DataType::Int64, DataType::Int64),
            (DataType::Utf8, DataType::Utf8),
            (
                DataType::Time64(TimeUnit::Microsecond),
                DataType::Time64(TimeUnit::Microsecond),
            ),
        ];
        for (from, to) in cases {
            assert_eq!(normalize_type(&from), to, "{from}");
        }
    }

    #[test]
    fn nested_types_are_normalised_recursively() {
        let list = DataType::LargeList(Arc::new(Field::new("item", DataType::UInt32, false)));
        assert_eq!(
            normalize_type(&list),
            DataType::List(Arc::new(Field::new("element", DataType::Int64, false)))
        );
        let map = DataType::Map(
            Arc::new(Field::new(
                "entries",
                DataType::Struct(Fields::from(vec![
                    Field::new("k", DataType::LargeUtf8, true),
                    Field::new("v", ts(TimeUnit::Nanosecond, Some("+01:00")), true),
                ])),
                false,
            )),
            true,
        );
        let expected = DataType::Map(
            Arc::new(Field::new(
                "key_value",
                DataType::Struct(Fields::from(vec![
                    Field::new("key", DataType::Utf8, false),
                    Field::new("value", ts(TimeUnit::Microsecond, Some("UTC")), true),
                ])),
                false,
            )),
            false,
        );
        assert_eq!(normalize_type(&map), expected);
        let st = DataType::Struct(Fields::from(vec![
            Field::new("a", DataType::Date64, true),
            Field::new("b", list.clone(), false),
        ]));
        assert_eq!(
            normalize_type(&st),
            DataType::Struct(Fields::from(vec![
                Field::new("a", DataType::Date32, true),
                Field::new("b", normalize_type(&list), false),
            ]))
        );
    }

    #[test]
    fn normalising_is_idempotent_and_keeps_names_nullability_metadata() {
        let meta = std::collections::HashMap::from([("comment".to_string(), "x".to_string())]);
        let schema = Schema::new(vec![
            Field::new("t", ts(TimeUnit::Nanosecond, None), false).with_metadata(meta.clone()),
            Field::new(
                "l",
                DataType::List(Arc::new(Field::new("item", DataType::UInt64, true))),
                true,
            ),
        ]);
        let once = delta_normalize(&schema);
        assert_eq!(delta_normalize(&once), once);
        assert_eq!(once.field(0).name(), "t");
        assert!(!once.field(0).is_nullable());
        assert_eq!(once.field(0).metadata(), &meta);
        assert!(once.field(1).is_nullable());
    }
}
