//! File metadata columns (`metadata_columns`), as Spark's `_metadata`: one struct column
//! `_metadata` with the fields the stream asks for, the same on every row of a file.
//!
//! | field | type | value |
//! |---|---|---|
//! | `file_path` | STRING | the file as the source names it (`s3://bucket/key`, a local path) |
//! | `file_name` | STRING | its last path segment |
//! | `file_size` | BIGINT | bytes |
//! | `file_modification_time` | TIMESTAMP | as listed |
//! | `file_block_start` | BIGINT | 0 (files are read whole) |
//! | `file_block_length` | BIGINT | the file size |

use arrow::array::{ArrayRef, Int64Array, StringArray, StructArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Fields, TimeUnit};
use landfall_core::FileMeta;
use std::sync::Arc;

/// The column's name.
pub const METADATA_COLUMN: &str = "_metadata";

pub use landfall_core::METADATA_FIELDS;

fn data_type(name: &str) -> DataType {
    match name {
        "file_path" | "file_name" => DataType::Utf8,
        "file_modification_time" => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        _ => DataType::Int64,
    }
}

/// The `_metadata` field holding `names` (each one of [`METADATA_FIELDS`]).
pub fn metadata_field(names: &[String]) -> Field {
    let fields: Fields = names
        .iter()
        .map(|n| Field::new(n, data_type(n), true))
        .collect();
    Field::new(METADATA_COLUMN, DataType::Struct(fields), true)
}

/// The one-row `_metadata` value of a file (`shown`: its path as the source names it), for a
/// column of type `field`.
pub fn metadata_row(field: &Field, shown: &str, meta: &FileMeta) -> Result<ArrayRef, String> {
    let DataType::Struct(fields) = field.data_type() else {
        return Err(format!("`{}` is not a struct column", field.name()));
    };
    let columns: Vec<ArrayRef> = fields
        .iter()
        .map(|f| -> Result<ArrayRef, String> {
            Ok(match f.name().as_str() {
                "file_path" => Arc::new(StringArray::from(vec![shown.to_string()])),
                "file_name" => Arc::new(StringArray::from(vec![
                    shown.rsplit('/').next().unwrap_or(shown).to_string(),
                ])),
                "file_size" | "file_block_length" => {
                    Arc::new(Int64Array::from(vec![meta.size as i64]))
                }
                "file_block_start" => Arc::new(Int64Array::from(vec![0i64])),
                "file_modification_time" => Arc::new(
                    TimestampMicrosecondArray::from(vec![meta.modified.timestamp_micros()])
                        .with_timezone("UTC"),
                ),
                other => return Err(format!("`{other}` is not a file metadata field")),
            })
        })
        .collect::<Result<_, _>>()?;
    StructArray::try_new(fields.clone(), columns, None)
        .map(|a| Arc::new(a) as ArrayRef)
        .map_err(|e| e.to_string())
}
