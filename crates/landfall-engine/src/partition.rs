//! Splitting a batch by the table's partition columns.

use arrow::array::{Array, RecordBatch, StringArray, UInt32Array};
use arrow::compute::{cast, take_record_batch};
use arrow_schema::{ArrowError, DataType};
use std::collections::HashMap;

/// Partition values (in `partition_by` order; `None` is null) and the rows that have them.
pub type PartitionedRows = Vec<(Vec<Option<String>>, RecordBatch)>;

/// Group the rows of `batch` by the string form of `columns`, keeping first-seen order.
pub fn split(batch: &RecordBatch, columns: &[String]) -> Result<PartitionedRows, ArrowError> {
    if columns.is_empty() {
        return Ok(vec![(Vec::new(), batch.clone())]);
    }
    let strings: Vec<StringArray> = columns
        .iter()
        .map(|c| {
            let col = batch.column(batch.schema().index_of(c)?);
            let s = cast(col, &DataType::Utf8)?;
            Ok(s.as_any()
                .downcast_ref::<StringArray>()
                .expect("cast to Utf8 gives StringArray")
                .clone())
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
