use super::*;
use crate::{DecodeOptions, FileFormat};
use arrow::array::{AsArray, Int64Array, StringArray};
use arrow::compute::concat_batches;
use arrow_schema::{DataType, Field, Schema};
use landfall_core::FileMeta;
use std::sync::Arc;

/// An Avro container file of `batches` (one block each), written by arrow-avro's writer.
fn avro_file(schema: &Schema, batches: &[RecordBatch]) -> Vec<u8> {
    let mut w = arrow_avro::writer::AvroWriter::new(Vec::new(), schema.clone()).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    w.into_inner()
}

fn rows(ids: std::ops::Range<i64>) -> (Schema, RecordBatch) {
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]);
    let names: Vec<Option<String>> = ids.clone().map(|i| Some(format!("n{i}"))).collect();
    let b = RecordBatch::try_new(
        Arc::new(schema.clone()),
        vec![
            Arc::new(Int64Array::from_iter_values(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap();
    (schema, b)
}

fn target() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("extra", DataType::Utf8, true),
    ]))
}

fn decode(input: &[u8], cut: usize) -> SeamResult<RecordBatch> {
    let opts = DecodeOptions {
        batch_size: 3,
        ..Default::default()
    };
    let meta = FileMeta {
        path: "a.avro".into(),
        size: input.len() as u64,
        modified: chrono::Utc::now(),
        etag: None,
        version: None,
    };
    let mut d = crate::decoder(FileFormat::Avro, "a.avro", &meta, target(), &opts).unwrap();
    let mut batches = d.push(Bytes::copy_from_slice(&input[..cut]))?;
    batches.extend(d.push(Bytes::copy_from_slice(&input[cut..]))?);
    batches.extend(d.finish()?);
    Ok(concat_batches(&target(), &batches).unwrap())
}

#[test]
fn blocks_decode_at_every_cut_and_conform_by_name() {
    let (schema, a) = rows(0..5);
    let (_, b) = rows(5..12);
    let file = avro_file(&schema, &[a, b]);
    assert_eq!(avro_schema("a.avro", &file).unwrap().fields().len(), 2);
    for cut in 0..=file.len() {
        let out = decode(&file, cut).unwrap_or_else(|e| panic!("cut {cut}: {}", e.message));
        assert_eq!(out.num_rows(), 12, "cut {cut}");
        let ids = out
            .column_by_name("id")
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(ids.values().to_vec(), (0..12).collect::<Vec<i64>>());
        assert_eq!(out.column_by_name("extra").unwrap().null_count(), 12);
        assert_eq!(
            out.column_by_name("name")
                .unwrap()
                .as_string::<i32>()
                .value(7),
            "n7"
        );
    }
}

#[test]
fn truncated_and_damaged_files_are_corrupt_never_a_panic() {
    let (schema, a) = rows(0..50);
    let file = avro_file(&schema, &[a]);
    for end in [0, 3, 10, file.len() / 2, file.len() - 1] {
        let err = decode(&file[..end], end / 2).unwrap_err();
        assert!(err.message.contains("Avro"), "{}", err.message);
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..300 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut damaged = file.clone();
        let i = (seed as usize) % damaged.len();
        damaged[i] ^= (seed >> 32) as u8 | 1;
        let _ = decode(&damaged, (seed as usize >> 8) % (damaged.len() + 1));
    }
    assert!(
        decode(b"PAR1 not avro", 4)
            .unwrap_err()
            .message
            .contains("magic")
    );
}

/// A block whose count is zero, or lower than its objects, is corrupt or read for its count;
/// it never makes the reader spin.
#[test]
fn block_counts_that_lie_never_hang() {
    let (schema, a) = rows(0..4);
    let file = avro_file(&schema, &[a]);
    let header = super::header_len(&file).unwrap().unwrap();
    // The block starts with its count (zig-zag 4 = 0x08): claim 0, then 2 objects.
    assert_eq!(file[header], 0x08);
    let mut zero = file.clone();
    zero[header] = 0x00;
    assert!(decode(&zero, 7).unwrap_err().message.contains("0 objects"));
    let mut two = file.clone();
    two[header] = 0x04;
    match decode(&two, 9) {
        Ok(b) => assert_eq!(b.num_rows(), 2),
        Err(e) => assert!(e.message.contains("Avro"), "{}", e.message),
    }
    let mut more = file;
    more[header] = 0x0a;
    assert!(decode(&more, 11).is_err(), "5 objects claimed, 4 there");
}
