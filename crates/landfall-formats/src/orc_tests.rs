use super::*;
use crate::{DecodeOptions, FileFormat};
use arrow::array::{AsArray, Int64Array, StringArray};
use arrow::compute::concat_batches;
use arrow_schema::{DataType, Field, Schema};
use landfall_core::FileMeta;
use orc_rust::ArrowWriterBuilder;

/// An ORC file of `batches` written by orc-rust's writer, a stripe per batch.
fn orc_file(schema: &Schema, batches: &[RecordBatch]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = ArrowWriterBuilder::new(&mut out, Arc::new(schema.clone()))
        .try_build()
        .unwrap();
    for b in batches {
        w.write(b).unwrap();
        w.flush_stripe().unwrap();
    }
    w.close().unwrap();
    out
}

fn rows(ids: std::ops::Range<i64>) -> (Schema, RecordBatch) {
    // Columns in another order than the target's, and one the target lacks.
    let schema = Schema::new(vec![
        Field::new("name", DataType::Utf8, true),
        Field::new("id", DataType::Int64, true),
        Field::new("city", DataType::Utf8, true),
    ]);
    let names: Vec<Option<String>> = ids.clone().map(|i| Some(format!("n{i}"))).collect();
    let cities: Vec<Option<String>> = ids.clone().map(|i| Some(format!("c{i}"))).collect();
    let b = RecordBatch::try_new(
        Arc::new(schema.clone()),
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(Int64Array::from_iter_values(ids)),
            Arc::new(StringArray::from(cities)),
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

fn decode(input: &[u8], cut: usize, policy: SchemaPolicy) -> SeamResult<(RecordBatch, u64)> {
    let opts = DecodeOptions {
        batch_size: 3,
        policy,
        ..Default::default()
    };
    let meta = FileMeta {
        path: "a.orc".into(),
        size: input.len() as u64,
        modified: chrono::Utc::now(),
        etag: None,
        version: None,
    };
    let mut d = crate::decoder(FileFormat::Orc, "a.orc", &meta, target(), &opts).unwrap();
    let mut batches = d.push(Bytes::copy_from_slice(&input[..cut]))?;
    batches.extend(d.push(Bytes::copy_from_slice(&input[cut..]))?);
    batches.extend(d.finish()?);
    let rescued = d.rescued_rows();
    Ok((concat_batches(&target(), &batches).unwrap(), rescued))
}

fn ids(b: &RecordBatch) -> Vec<i64> {
    b.column_by_name("id")
        .unwrap()
        .as_primitive::<arrow::datatypes::Int64Type>()
        .values()
        .to_vec()
}

#[test]
fn stripes_decode_whole_and_conform_by_name() {
    let (schema, a) = rows(0..5);
    let (_, b) = rows(5..12);
    let file = orc_file(&schema, &[a, b]);
    assert_eq!(
        orc_schema("a.orc", Bytes::from(file.clone()))
            .unwrap()
            .fields()
            .len(),
        3
    );
    for cut in [0, 1, file.len() / 2, file.len()] {
        let (out, rescued) = decode(&file, cut, SchemaPolicy::default())
            .unwrap_or_else(|e| panic!("cut {cut}: {}", e.message));
        assert_eq!(ids(&out), (0..12).collect::<Vec<i64>>(), "cut {cut}");
        assert_eq!(out.column_by_name("extra").unwrap().null_count(), 12);
        assert_eq!(
            out.column_by_name("name")
                .unwrap()
                .as_string::<i32>()
                .value(7),
            "n7"
        );
        assert_eq!(rescued, 0, "no rescued column, nothing rescued");
    }
}

#[test]
fn a_column_the_stream_lacks_is_rescued_and_reported() {
    let (schema, a) = rows(0..4);
    let file = orc_file(&schema, &[a]);
    let policy = SchemaPolicy {
        rescued_column: Some("_rescued_data".into()),
        detect_new_columns: true,
        infer_types: true,
        prefers_decimal: false,
        widen_types: false,
        path_columns: Vec::new(),
    };
    let opts = DecodeOptions {
        policy,
        ..Default::default()
    };
    let with_rescue = Arc::new(Schema::new(
        target()
            .fields()
            .iter()
            .cloned()
            .chain([Arc::new(Field::new("_rescued_data", DataType::Utf8, true))])
            .collect::<Vec<_>>(),
    ));
    let meta = FileMeta {
        path: "a.orc".into(),
        size: file.len() as u64,
        modified: chrono::Utc::now(),
        etag: None,
        version: None,
    };
    let mut d = crate::decoder(FileFormat::Orc, "a.orc", &meta, with_rescue, &opts).unwrap();
    assert!(d.push(Bytes::from(file)).unwrap().is_empty());
    let out = d.finish().unwrap();
    let rescued = out[0]
        .column_by_name("_rescued_data")
        .unwrap()
        .as_string::<i32>();
    let r2: serde_json::Value = serde_json::from_str(rescued.value(2)).unwrap();
    assert_eq!(r2["city"], "c2");
    assert_eq!(r2["_file_path"], "a.orc");
    assert_eq!(d.rescued_rows(), 4);
    assert_eq!(d.new_columns()[0].name(), "city");
}

/// The ranged path (the engine's pinned reader) reads the same rows, stripe by stripe.
#[test]
fn ranged_reads_yield_the_same_rows() {
    let (schema, a) = rows(0..5);
    let (_, b) = rows(5..9);
    let file = orc_file(&schema, &[a, b]);
    let (batches, conformer) = futures::executor::block_on(async {
        let reader = std::io::Cursor::new(file.clone());
        let (s, c) = orc_batches("a.orc", reader, target(), 3, SchemaPolicy::default())
            .await
            .unwrap();
        (s.collect::<Vec<_>>().await, c)
    });
    let batches: Vec<RecordBatch> = batches.into_iter().map(|b| b.unwrap()).collect();
    assert!(batches.len() >= 2, "one stripe at a time, in batches of 3");
    let out = concat_batches(&target(), &batches).unwrap();
    assert_eq!(ids(&out), (0..9).collect::<Vec<i64>>());
    assert_eq!(conformer.lock().unwrap().rescued_rows, 0);
    let schema =
        futures::executor::block_on(orc_footer_schema("a.orc", std::io::Cursor::new(file)))
            .unwrap();
    assert_eq!(schema.field(1).name(), "id");
}

/// Truncations and random damage: a corrupt file (an error naming ORC), never a panic or a
/// hang, whole or by ranges.
#[test]
fn truncated_and_damaged_files_are_corrupt_never_a_panic() {
    let (schema, a) = rows(0..300);
    let file = orc_file(&schema, &[a]);
    for end in [0, 3, 10, file.len() / 2, file.len() - 1] {
        let err = decode(&file[..end], end / 2, SchemaPolicy::default()).unwrap_err();
        assert!(err.message.contains("ORC"), "{}", err.message);
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut failed = 0;
    for round in 0..400 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut damaged = file.clone();
        for k in 0..1 + round % 3 {
            let i = ((seed >> (k * 8)) as usize) % damaged.len();
            damaged[i] ^= (seed >> 32) as u8 | 1;
        }
        let cut = (seed as usize >> 8) % (damaged.len() + 1);
        match decode(&damaged, cut, SchemaPolicy::default()) {
            Ok((out, _)) => assert!(out.num_rows() <= 300),
            Err(e) => {
                failed += 1;
                assert!(e.message.contains("ORC"), "{}", e.message);
            }
        }
        let ranged = futures::executor::block_on(async {
            let reader = std::io::Cursor::new(damaged);
            match orc_batches("a.orc", reader, target(), 64, SchemaPolicy::default()).await {
                Ok((s, _)) => s
                    .collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .try_for_each(|b| b.map(drop)),
                Err(e) => Err(e),
            }
        });
        if let Err(e) = ranged {
            assert!(e.to_string().contains("ORC"), "{e}");
        }
    }
    assert!(failed > 0, "some damage is detected");
    assert!(
        decode(b"PAR1 not orc", 4, SchemaPolicy::default())
            .unwrap_err()
            .message
            .contains("ORC")
    );
}
