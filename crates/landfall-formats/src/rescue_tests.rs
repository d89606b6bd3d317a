//! The rescue policy through the real decoders: no value is lost, new columns are reported,
//! and results do not depend on where chunks are cut.

use crate::{DecodeOptions, FileFormat, SchemaPolicy, decoder};
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::concat_batches;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use landfall_core::{Decoder, FileMeta};
use serde_json::Value;
use std::sync::Arc;

fn target() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("_rescued_data", DataType::Utf8, true),
    ]))
}

fn policy(rescue: bool, detect: bool) -> SchemaPolicy {
    SchemaPolicy {
        rescued_column: rescue.then(|| "_rescued_data".to_string()),
        detect_new_columns: detect,
        infer_types: true,
        prefers_decimal: false,
        widen_types: false,
        path_columns: vec!["day".into()],
    }
}

fn meta(path: &str) -> FileMeta {
    FileMeta {
        path: path.into(),
        size: 0,
        modified: chrono::Utc::now(),
        etag: None,
        version: None,
    }
}

/// Decode `input` cut into two chunks at `cut`: (one batch, decoder).
fn run(
    format: FileFormat,
    path: &str,
    schema: SchemaRef,
    policy: SchemaPolicy,
    input: &[u8],
    cut: usize,
) -> (RecordBatch, Box<dyn Decoder>) {
    let opts = DecodeOptions {
        batch_size: 2,
        policy,
        ..Default::default()
    };
    let mut d = decoder(format, path, &meta(path), schema.clone(), &opts).unwrap();
    let batches = crate::decode_in_two(d.as_mut(), input, cut);
    (concat_batches(&schema, &batches).unwrap(), d)
}

fn rescued(b: &RecordBatch, row: usize) -> Option<Value> {
    let col = b
        .column_by_name("_rescued_data")
        .unwrap()
        .as_string::<i32>();
    col.is_valid(row)
        .then(|| serde_json::from_str(col.value(row)).unwrap())
}

fn ids(b: &RecordBatch) -> Vec<Option<i64>> {
    let col = b
        .column_by_name("id")
        .unwrap()
        .as_primitive::<arrow::datatypes::Int64Type>();
    (0..b.num_rows())
        .map(|r| col.is_valid(r).then(|| col.value(r)))
        .collect()
}

const JSON: &str = concat!(
    "{\"id\":1,\"name\":\"a\"}\n",
    "{\"id\":\"x\",\"name\":\"b\",\"extra\":5,\"Name\":\"c\"}\n",
    "{\"id\":3,\"nested\":{\"a\":1.5}}\n",
    "{\"id\":4,\"name\":\"d\"}\n",
);

#[test]
fn json_rescues_unknown_case_only_and_misfit_values_at_any_cut() {
    for cut in 0..=JSON.len() {
        let (b, d) = run(
            FileFormat::Json,
            "t.json",
            target(),
            policy(true, true),
            JSON.as_bytes(),
            cut,
        );
        assert_eq!(ids(&b), [Some(1), None, Some(3), Some(4)], "cut {cut}");
        assert_eq!(rescued(&b, 0), None);
        let r = rescued(&b, 1).unwrap();
        assert_eq!(r["id"], "x");
        assert_eq!(r["extra"], 5);
        assert_eq!(r["Name"], "c", "a case-only match is rescued");
        assert_eq!(r["_file_path"], "t.json");
        assert_eq!(rescued(&b, 2).unwrap()["nested"]["a"], 1.5);
        assert_eq!(rescued(&b, 3), None);
        assert_eq!(d.malformed_rows(), 0, "rescued values are not malformed");
        assert_eq!(d.rescued_rows(), 2);
        let new = crate::NewColumns::from_fields(&d.new_columns());
        assert_eq!(new.paths(), ["extra", "nested.a"], "cut {cut}");
    }
}

#[test]
fn json_keys_named_like_the_rescued_column_or_a_path_column_are_not_trusted_or_rescued() {
    let input = concat!(
        "{\"id\":1,\"_rescued_data\":\"forged\",\"day\":\"2024-01-01\"}\n",
        "{\"id\":2,\"day\":\"x\",\"_file_path\":\"mine\"}\n",
        "{\"id\":12345678901234567890123}\n",
    );
    let (b, d) = run(
        FileFormat::Json,
        "t.json",
        target(),
        policy(true, true),
        input.as_bytes(),
        11,
    );
    assert_eq!(b.num_rows(), 3);
    let r0 = rescued(&b, 0).unwrap();
    assert_eq!(
        r0["_rescued_data"], "forged",
        "an incoming key is data, rescued"
    );
    assert!(r0.get("day").is_none(), "a path column's key is the path's");
    let r1 = rescued(&b, 1).unwrap();
    assert_eq!(r1["_file_path"], "mine", "a data key keeps its name");
    assert_eq!(r1["_file_path_"], "t.json", "the file moves aside");
    assert!(r1.get("day").is_none());
    let col = b
        .column_by_name("_rescued_data")
        .unwrap()
        .as_string::<i32>();
    assert!(
        col.value(2).contains("12345678901234567890123"),
        "digits kept as written: {}",
        col.value(2)
    );
    assert!(!d.new_columns().iter().any(|f| f.name() == "day"));
}

#[test]
fn json_without_rescue_counts_misfits_and_ignores_unknown_keys() {
    let schema = Arc::new(Schema::new(target().fields()[..2].to_vec()));
    let (b, d) = run(
        FileFormat::Json,
        "t.json",
        schema,
        SchemaPolicy::default(),
        JSON.as_bytes(),
        7,
    );
    assert_eq!(ids(&b), [Some(1), None, Some(3), Some(4)]);
    assert_eq!(d.malformed_rows(), 1);
    assert!(d.new_columns().is_empty());
}

#[test]
fn json_detection_alone_reports_new_columns_and_keeps_rows() {
    let schema = Arc::new(Schema::new(target().fields()[..2].to_vec()));
    let (b, d) = run(
        FileFormat::Json,
        "t.json",
        schema,
        policy(false, true),
        JSON.as_bytes(),
        30,
    );
    assert_eq!(b.num_rows(), 4);
    let new = crate::NewColumns::from_fields(&d.new_columns());
    assert_eq!(new.paths(), ["extra", "nested.a"]);
    assert_eq!(
        landfall_core::ddl::type_to_ddl(new.fields()[1].data_type()),
        "STRUCT<a: DOUBLE>"
    );
}

const CSV: &str = "id,name,extra,NAME\n1,a,,z\nx,b,5,\n";

#[test]
fn csv_rescues_unmatched_columns_and_misfit_values_at_any_cut() {
    for cut in 0..=CSV.len() {
        let (b, d) = run(
            FileFormat::Csv,
            "t.csv",
            target(),
            policy(true, true),
            CSV.as_bytes(),
            cut,
        );
        assert_eq!(ids(&b), [Some(1), None], "cut {cut}");
        let r0 = rescued(&b, 0).unwrap();
        assert_eq!(r0["NAME"], "z");
        assert!(
            r0.get("extra").is_none(),
            "an empty value is null, not rescued"
        );
        let r1 = rescued(&b, 1).unwrap();
        assert_eq!(r1["id"], "x");
        assert_eq!(r1["extra"], "5");
        assert_eq!(r1["_file_path"], "t.csv");
        assert_eq!(d.malformed_rows(), 0);
        assert_eq!(d.rescued_rows(), 2);
        let new = crate::NewColumns::from_fields(&d.new_columns());
        assert_eq!(
            new.paths(),
            ["extra"],
            "NAME differs from name only in case"
        );
    }
}

#[test]
fn parquet_rescues_extra_columns_and_values_that_do_not_cast() {
    let src = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("score", DataType::Float64, true),
    ]));
    let batch = RecordBatch::try_new(
        src.clone(),
        vec![
            Arc::new(arrow::array::StringArray::from(vec![Some("1"), Some("x")])),
            Arc::new(arrow::array::StringArray::from(vec![Some("a"), None])),
            Arc::new(arrow::array::Float64Array::from(vec![Some(0.5), None])),
        ],
    )
    .unwrap();
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, src, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let (b, d) = run(
        FileFormat::Parquet,
        "t.parquet",
        target(),
        policy(true, true),
        &buf,
        buf.len() / 2,
    );
    assert_eq!(ids(&b), [Some(1), None]);
    let r0 = rescued(&b, 0).unwrap();
    assert_eq!(r0["score"], 0.5);
    assert!(r0.get("id").is_none());
    let r1 = rescued(&b, 1).unwrap();
    assert_eq!(r1["id"], "x");
    assert!(
        r1.get("score").is_none(),
        "a null value is nothing to rescue"
    );
    assert_eq!(d.rescued_rows(), 2);
    let new = crate::NewColumns::from_fields(&d.new_columns());
    assert_eq!(new.paths(), ["score"]);
    assert_eq!(new.fields()[0].data_type(), &DataType::Float64);
}

/// Random bytes and truncations never panic under the rescue policy, and every row either
/// decodes or is counted.
#[test]
fn random_input_under_the_rescue_policy_never_panics() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..300 {
        let base = if round % 2 == 0 { JSON } else { CSV };
        let mut input = base.as_bytes().to_vec();
        let flips = (next() % 6) as usize;
        for _ in 0..flips {
            let i = (next() as usize) % input.len();
            input[i] = (next() % 256) as u8;
        }
        input.truncate((next() as usize) % (input.len() + 1));
        let format = if round % 2 == 0 {
            FileFormat::Json
        } else {
            FileFormat::Csv
        };
        let opts = DecodeOptions {
            batch_size: 2,
            policy: policy(true, true),
            ..Default::default()
        };
        let mut d = decoder(format, "r", &meta("r"), target(), &opts).unwrap();
        let cut = (next() as usize) % (input.len() + 1);
        let _ = d.push(Bytes::copy_from_slice(&input[..cut]));
        let _ = d.push(Bytes::copy_from_slice(&input[cut..]));
        let _ = d.finish();
    }
}

/// Structs are fitted member by member by name, never by position: a file's `user{name,
/// email}` into `user{name, age}` keeps `age` null and rescues `user.email` (reported as a
/// new nested field); without a policy `email` is dropped, never written into `age`.
#[test]
fn struct_members_are_matched_by_name_at_every_level() {
    use arrow::array::{ArrayRef, StringArray, StructArray};
    let user_src = Fields::from(vec![
        Field::new("name", DataType::Utf8, true),
        Field::new("email", DataType::Utf8, true),
    ]);
    let user = StructArray::new(
        user_src.clone(),
        vec![
            Arc::new(StringArray::from(vec![Some("ann"), Some("bob")])) as ArrayRef,
            Arc::new(StringArray::from(vec![Some("a@x"), None])) as ArrayRef,
        ],
        None,
    );
    let src = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("user", DataType::Struct(user_src), true),
    ]));
    let batch = RecordBatch::try_new(
        src,
        vec![
            Arc::new(arrow::array::Int64Array::from(vec![1, 2])),
            Arc::new(user),
        ],
    )
    .unwrap();
    let user_dst = Fields::from(vec![
        Field::new("name", DataType::Utf8, true),
        Field::new("age", DataType::Int32, true),
    ]);
    let target = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("user", DataType::Struct(user_dst.clone()), true),
        Field::new("_rescued_data", DataType::Utf8, true),
    ]));
    let mut c = crate::Conformer::new("t.parquet", target.clone(), policy(true, true));
    let out = c.conform(batch.clone()).unwrap();
    let u = out.column_by_name("user").unwrap().as_struct();
    assert_eq!(
        u.column_by_name("name")
            .unwrap()
            .as_string::<i32>()
            .value(1),
        "bob"
    );
    assert_eq!(u.column_by_name("age").unwrap().null_count(), 2);
    assert_eq!(rescued(&out, 0).unwrap()["user.email"], "a@x");
    assert_eq!(rescued(&out, 1), None);
    let new = crate::NewColumns::from_fields(c.new_columns.fields());
    assert_eq!(new.paths(), ["user.email"]);

    let plain = Arc::new(Schema::new(target.fields()[..2].to_vec()));
    let out = crate::conform("t.parquet", batch, &plain).unwrap();
    let u = out.column_by_name("user").unwrap().as_struct();
    assert_eq!(u.column_by_name("age").unwrap().null_count(), 2);
}

/// `mode = "drop_malformed"`: malformed records yield no row and are counted; a value the
/// rescued column keeps does not make its record malformed, so it stays.
#[test]
fn drop_malformed_leaves_out_malformed_records_of_every_text_format() {
    let run_mode = |format, input: &str, schema: SchemaRef, policy: SchemaPolicy| {
        let opts = DecodeOptions {
            batch_size: 2,
            mode: crate::ParseMode::DropMalformed,
            policy,
            ..Default::default()
        };
        let mut d = decoder(format, "t", &meta("t"), schema.clone(), &opts).unwrap();
        let batches = crate::decode_in_two(d.as_mut(), input.as_bytes(), input.len() / 2);
        (
            concat_batches(&schema, &batches).unwrap(),
            d.malformed_rows(),
        )
    };
    let plain = Arc::new(Schema::new(target().fields()[..2].to_vec()));
    let json = "{\"id\":1}\n{\"id\":\"x\"}\nnot json\n{\"id\":4}\n";
    let (b, bad) = run_mode(
        FileFormat::Json,
        json,
        plain.clone(),
        SchemaPolicy::default(),
    );
    assert_eq!(ids(&b), [Some(1), Some(4)]);
    assert_eq!(bad, 2);
    let (b, bad) = run_mode(FileFormat::Json, json, target(), policy(true, false));
    assert_eq!(ids(&b), [Some(1), None, Some(4)], "the rescued row stays");
    assert_eq!(bad, 1);
    let csv = "id,name\n1,a\n2,b,extra\nx,c\n4,d\n";
    let (b, bad) = run_mode(FileFormat::Csv, csv, plain, SchemaPolicy::default());
    assert_eq!(ids(&b), [Some(1), Some(4)]);
    assert_eq!(bad, 2);
    let text_schema = Arc::new(FileFormat::Text.fixed_schema().unwrap());
    let opts = DecodeOptions {
        mode: crate::ParseMode::DropMalformed,
        ..Default::default()
    };
    let mut d = decoder(FileFormat::Text, "t", &meta("t"), text_schema, &opts).unwrap();
    let batches = crate::decode_in_two(d.as_mut(), b"ok\n\xff\xfe\nfine\n", 4);
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 2);
    assert_eq!(d.malformed_rows(), 1);
}

/// JSON `timestamp_format` / `date_format`: values are parsed with the patterns; one that does
/// not match is rescued (with a rescued column) or null and malformed (without).
#[test]
fn json_temporal_formats_parse_and_rescue_what_does_not_match() {
    use arrow::datatypes::{Date32Type, TimestampMicrosecondType};
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            // (The formats crate alone builds arrow without chrono-tz: an offset, not "UTC".)
            DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("+00:00".into())),
            true,
        ),
        Field::new("d", DataType::Date32, true),
        Field::new("_rescued_data", DataType::Utf8, true),
    ]));
    let input = "{\"ts\":\"30/11/2026 13:05\",\"d\":\"30.11.2026\"}\n{\"ts\":\"2026-11-30\",\"d\":\"31.02.2026\",\"x\":1}\n";
    for (rescue, cut) in [(true, 17), (false, 40)] {
        let opts = DecodeOptions {
            batch_size: 1,
            policy: policy(rescue, false),
            json_temporal: crate::TemporalFormats {
                timestamp: Some(crate::chrono_format("dd/MM/yyyy HH:mm").unwrap()),
                date: Some(crate::chrono_format("dd.MM.yyyy").unwrap()),
            },
            ..Default::default()
        };
        let target = if rescue {
            schema.clone()
        } else {
            Arc::new(Schema::new(schema.fields()[..2].to_vec()))
        };
        let mut d = decoder(
            FileFormat::Json,
            "t.json",
            &meta("t.json"),
            target.clone(),
            &opts,
        )
        .unwrap();
        let batches = crate::decode_in_two(d.as_mut(), input.as_bytes(), cut);
        let b = concat_batches(&target, &batches).unwrap();
        let ts = b.column(0).as_primitive::<TimestampMicrosecondType>();
        assert_eq!(ts.value(0), 1_796_043_900_000_000);
        assert!(ts.is_null(1));
        let dd = b.column(1).as_primitive::<Date32Type>();
        assert_eq!(dd.value(0), 20_787);
        assert!(dd.is_null(1));
        if rescue {
            let r = rescued(&b, 1).unwrap();
            assert_eq!(r["ts"], "2026-11-30");
            assert_eq!(r["d"], "31.02.2026");
            assert_eq!(r["x"], 1, "merged with what the decoder rescued");
            assert_eq!(rescued(&b, 0), None);
            assert_eq!(d.malformed_rows(), 0);
        } else {
            assert_eq!(d.malformed_rows(), 2, "two values lost to null");
        }
    }
}

/// With typed inference, a CSV column the schema lacks is reported with the type inference
/// gives its values, merged over every batch of the file (batches of 2 rows here); one without
/// a single value is a string; without typed inference every new column is a string.
#[test]
fn new_csv_columns_are_typed_from_their_values() {
    let input = b"id,name,n,flag,day2,x,mixed,at\n\
                  1,a,10,true,2026-01-02,,1,2026-12-01T10:00:00\n\
                  2,b,,false,2026-01-03,,2,\n\
                  3,c,30,true,,,2.5,2026-12-01T11:30:00.5\n";
    for cut in [0, 20, input.len()] {
        let (_, d) = run(
            FileFormat::Csv,
            "t.csv",
            target(),
            policy(true, true),
            input,
            cut,
        );
        let types: Vec<(String, DataType)> = d
            .new_columns()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        assert_eq!(
            types,
            [
                ("n".to_string(), DataType::Int64),
                ("flag".to_string(), DataType::Boolean),
                ("day2".to_string(), DataType::Date32),
                ("x".to_string(), DataType::Utf8),
                ("mixed".to_string(), DataType::Float64),
                (
                    "at".to_string(),
                    DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("UTC".into()))
                ),
            ],
            "cut {cut}"
        );
    }
    let mut strings = policy(true, true);
    strings.infer_types = false;
    let (_, d) = run(FileFormat::Csv, "t.csv", target(), strings, input, 0);
    assert!(
        d.new_columns()
            .iter()
            .all(|f| f.data_type() == &DataType::Utf8),
        "{:?}",
        d.new_columns()
    );
}

/// Issue 16 through the decoders themselves: a value that a conversion would change (a
/// fraction into a BIGINT, an overflow into a FLOAT, a time of day into a DATE) is rescued as
/// it was, in JSON, XML, CSV and Parquet alike, and the value that fits lands.
#[test]
fn values_that_would_change_are_rescued_by_every_decoder() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
        Field::new("f", DataType::Float32, true),
        Field::new("day", DataType::Date32, true),
        Field::new("_rescued_data", DataType::Utf8, true),
    ]));
    let json = "{\"id\":1,\"v\":3.7,\"f\":1e39,\"day\":\"2024-01-02T03:04:05\"}\n\
                {\"id\":2,\"v\":4,\"f\":0.5,\"day\":\"2024-01-02\"}\n";
    let xml = "<rows><row><id>1</id><v>3.7</v><f>1e39</f><day>2024-01-02T03:04:05</day></row>\
               <row><id>2</id><v>4</v><f>0.5</f><day>2024-01-02</day></row></rows>";
    let csv = "id,v,f,day\n1,3.7,1e39,2024-01-02T03:04:05\n2,4,0.5,2024-01-02\n";
    let parquet = {
        let src = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("v", DataType::Float64, true),
            Field::new("f", DataType::Float64, true),
            Field::new(
                "day",
                DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, None),
                true,
            ),
        ]));
        let day = 19_724 * 86_400_000_000i64;
        let batch = RecordBatch::try_new(
            src.clone(),
            vec![
                Arc::new(arrow::array::Int64Array::from(vec![1, 2])),
                Arc::new(arrow::array::Float64Array::from(vec![3.7, 4.0])),
                Arc::new(arrow::array::Float64Array::from(vec![1e39, 0.5])),
                Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![
                    day + 11_045_000_000,
                    day,
                ])),
            ],
        )
        .unwrap();
        let mut buf = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, src, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        buf
    };
    let cases: [(FileFormat, &str, &[u8]); 4] = [
        (FileFormat::Json, "t.json", json.as_bytes()),
        (FileFormat::Xml, "t.xml", xml.as_bytes()),
        (FileFormat::Csv, "t.csv", csv.as_bytes()),
        (FileFormat::Parquet, "t.parquet", &parquet),
    ];
    for (format, path, input) in cases {
        let (b, d) = run(format, path, schema.clone(), policy(true, false), input, 7);
        assert_eq!(ids(&b), [Some(1), Some(2)], "{path}");
        let v = b.column(1).as_primitive::<arrow::datatypes::Int64Type>();
        assert!(v.is_null(0) && v.value(1) == 4, "{path}");
        let f = b.column(2).as_primitive::<arrow::datatypes::Float32Type>();
        assert!(f.is_null(0) && f.value(1) == 0.5, "{path}");
        let day = b.column(3).as_primitive::<arrow::datatypes::Date32Type>();
        assert!(day.is_null(0) && day.value(1) == 19_724, "{path}");
        let r = rescued(&b, 0).unwrap();
        // Text formats rescue text, Parquet its typed value.
        let num = |v: &Value| v.as_f64().or_else(|| v.as_str()?.parse().ok());
        assert_eq!(num(&r["v"]), Some(3.7), "{path}: {r}");
        assert_eq!(num(&r["f"]), Some(1e39), "{path}: {r}");
        assert!(r["day"].to_string().contains("03:04:05"), "{path}: {r}");
        assert_eq!(rescued(&b, 1), None, "{path}");
        assert_eq!((d.malformed_rows(), d.rescued_rows()), (0, 1), "{path}");
    }
}
