use super::*;
use arrow::util::pretty::pretty_format_batches;
use arrow_schema::{Field, Schema};
use landfall_core::Decoder;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]))
}

fn opts(batch_size: usize) -> DecodeOptions {
    DecodeOptions {
        batch_size,
        ..Default::default()
    }
}

/// Decode `input` in one chunk: (the rows as a table, malformed rows, first malformed).
fn decode(input: &str, opts: &DecodeOptions) -> (String, u64, Option<MalformedRecord>) {
    let mut d = CsvDecoder::new("t.csv", schema(), opts);
    let mut batches = d.push(Bytes::copy_from_slice(input.as_bytes())).unwrap();
    batches.extend(d.finish().unwrap());
    let table = pretty_format_batches(&batches).unwrap().to_string();
    (table, d.malformed_rows(), d.first_malformed().cloned())
}

fn table(input: &str) -> String {
    decode(input, &opts(1024)).0
}

#[test]
fn chunk_boundaries_anywhere() {
    let mut input = String::from("id,s\n");
    for i in 0..7 {
        input.push_str(&format!("{i},\"v{i}, x\"\n"));
    }
    for cut in 0..=input.len() {
        let mut d = CsvDecoder::new("t.csv", schema(), &opts(2));
        let batches = crate::decode_in_two(&mut d, input.as_bytes(), cut);
        let ids: Vec<i64> = batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<arrow::array::Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(ids, (0..7).collect::<Vec<_>>(), "cut at byte {cut}");
        assert_eq!(d.malformed_rows(), 0);
    }
}

/// Misfits, wrong widths and a cut last record give the same rows, count and first position
/// wherever the chunks are cut.
#[test]
fn permissive_results_do_not_depend_on_chunks() {
    let input = "ID,s\r\n1,a\r\n\r\nabc,\"b\nc\"\r\n3,c,extra\r\n4\r\n5,\"d\"\"e\"\r\n6,\"cut";
    for batch_size in [1, 2, 1024] {
        let (want, bad, first) = decode(input, &opts(batch_size));
        assert_eq!(bad, 4, "abc, too wide, too narrow, cut");
        let first = first.unwrap();
        assert_eq!((first.line, first.offset), (4, 13), "{first}");
        for cut in 0..=input.len() {
            let mut d = CsvDecoder::new("t.csv", schema(), &opts(batch_size));
            let batches = crate::decode_in_two(&mut d, input.as_bytes(), cut);
            let got = pretty_format_batches(&batches).unwrap().to_string();
            assert_eq!(got, want, "cut at byte {cut}, batch size {batch_size}");
            assert_eq!(d.malformed_rows(), 4, "cut at byte {cut}");
            assert_eq!(d.first_malformed(), Some(&first), "cut at byte {cut}");
        }
    }
    let want = table("id,s\n1,a\n,\"b\nc\"\n3,c\n4,\n5,\"d\"\"e\"\n");
    assert_eq!(decode(input, &opts(2)).0, want);
}

#[test]
fn values_that_do_not_convert_are_null_and_malformed() {
    let (got, bad, first) = decode("id,s\n1,a\nabc,b\n99999999999999999999,c\n4,d\n", &opts(2));
    assert_eq!(got, table("id,s\n1,a\n,b\n,c\n4,d\n"));
    assert_eq!(bad, 2);
    let first = first.unwrap();
    assert_eq!((first.line, first.offset), (3, 9));
    assert!(
        first.reason.contains("\"abc\" does not fit BIGINT"),
        "{first}"
    );
}

#[test]
fn wrong_widths_keep_the_declared_columns() {
    let (got, bad, first) = decode("s,id\na,1,x,y\nb\n,3\n", &opts(1024));
    assert_eq!(got, table("id,s\n1,a\n,b\n3,\n"));
    assert_eq!(
        bad, 2,
        "too wide and too narrow; the empty value is just null"
    );
    assert_eq!(first.unwrap().reason, "expected 2 fields, found 4");
}

#[test]
fn last_record_without_newline() {
    let (got, bad, _) = decode("id,s\n1,a\n2,\"b\"", &opts(1024));
    assert_eq!((got, bad), (table("id,s\n1,a\n2,b\n"), 0));

    let (got, bad, first) = decode("id,s\n1,a\n2,\"b\n", &opts(1024));
    assert_eq!((got, bad), (table("id,s\n1,a\n"), 1));
    let first = first.unwrap();
    assert_eq!((first.line, first.offset), (3, 9));
    assert!(first.reason.contains("ends inside a quoted field"));
}

#[test]
fn without_a_header_columns_go_by_position() {
    let o = DecodeOptions {
        csv: CsvFormat {
            header: false,
            ..Default::default()
        },
        ..opts(1024)
    };
    let (got, bad, first) = decode("1,a\n2\nx,b\n", &o);
    assert_eq!(got, table("id,s\n1,a\n2,\n,b\n"));
    assert_eq!(bad, 2);
    assert_eq!(first.unwrap().line, 2);
}

#[test]
fn null_value_and_empty_strings() {
    let o = DecodeOptions {
        csv: CsvFormat {
            null_value: Some("NA".into()),
            ..Default::default()
        },
        ..opts(1024)
    };
    let (_, bad, _) = decode("id,s\nNA,NA\n,\n", &o);
    assert_eq!(bad, 0, "an empty number is null, not malformed");
    let batches = {
        let mut d = CsvDecoder::new("t.csv", schema(), &o);
        let mut b = d.push(Bytes::from_static(b"id,s\nNA,NA\n,\n")).unwrap();
        b.extend(d.finish().unwrap());
        b
    };
    let s = batches[0].column(1);
    assert!(
        s.is_null(0) && s.is_valid(1),
        "NA is null, an empty string is not"
    );
}

#[test]
fn comments_and_escapes() {
    let o = DecodeOptions {
        csv: CsvFormat {
            comment: Some(b'#'),
            escape: Some(b'\\'),
            ..Default::default()
        },
        ..opts(1024)
    };
    let (got, bad, _) = decode("id,s\n# note\n1,\"a\\\"b\"\n", &o);
    assert_eq!(bad, 0);
    assert!(got.contains("a\"b"), "{got}");
}

#[test]
fn skip_rows_trimming_empty_and_nan_values_and_max_columns() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("x", DataType::Float64, true),
    ]));
    let opts = DecodeOptions {
        batch_size: 2,
        csv: CsvFormat {
            skip_rows: 2,
            empty_value: Some("<empty>".into()),
            nan_value: "n/a".into(),
            ignore_leading_white_space: true,
            ignore_trailing_white_space: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let input = "exported by a tool\n,,,garbage\nid,s,x\n 1 , a ,n/a\n2,,2.5\nx,b,1\n";
    for cut in 0..=input.len() {
        let mut d = CsvDecoder::new("t.csv", schema.clone(), &opts);
        let batches = crate::decode_in_two(&mut d, input.as_bytes(), cut);
        let t = pretty_format_batches(&batches).unwrap().to_string();
        assert!(t.contains("| 1  | a       | NaN |"), "cut {cut}:\n{t}");
        assert!(t.contains("| 2  | <empty> | 2.5 |"), "cut {cut}:\n{t}");
        assert_eq!(d.malformed_rows(), 1, "cut {cut}");
        assert_eq!(
            d.first_malformed().map(|m| m.line),
            Some(6),
            "positions count the skipped lines"
        );
    }
    let narrow = DecodeOptions {
        csv: CsvFormat {
            max_columns: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut d = CsvDecoder::new("t.csv", schema, &narrow);
    let err = d
        .push(Bytes::from_static(b"id,s,x\n1,a,2\n"))
        .and_then(|_| d.finish())
        .unwrap_err();
    assert!(err.message.contains("max_columns"), "{}", err.message);
}

#[test]
fn timestamp_and_date_formats() {
    let schema = Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("d", DataType::Date32, true),
    ]));
    let opts = DecodeOptions {
        csv: CsvFormat {
            temporal: crate::TemporalFormats {
                timestamp: Some(crate::chrono_format("dd/MM/yyyy HH:mm").unwrap()),
                date: Some(crate::chrono_format("dd.MM.yyyy").unwrap()),
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let mut d = CsvDecoder::new("t.csv", schema, &opts);
    let batches = crate::decode_in_two(
        &mut d,
        b"ts,d\n30/11/2026 13:05,30.11.2026\n2026-11-30,31.02.2026\n",
        9,
    );
    use arrow::array::{Array, AsArray};
    let b = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    let ts = b
        .column(0)
        .as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
    assert_eq!(ts.value(0), 1_796_043_900_000_000, "2026-11-30T13:05:00Z");
    assert!(ts.is_null(1));
    let d32 = b.column(1).as_primitive::<arrow::datatypes::Date32Type>();
    assert_eq!(d32.value(0), 20_787, "2026-11-30");
    assert!(d32.is_null(1));
    assert_eq!(
        d.malformed_rows(),
        1,
        "the second row matches neither pattern"
    );
}

/// A decimal with more fraction digits than the column's scale is a misfit, never rounded.
#[test]
fn decimals_that_do_not_fit_are_never_rounded() {
    let s = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("m", DataType::Decimal128(4, 2), true),
    ]));
    let mut d = CsvDecoder::new("t.csv", s, &opts(1024));
    let input = "id,m\n1,12.5\n2,12.345\n3,123.45\n4,-0.01\n";
    let mut batches = d.push(Bytes::copy_from_slice(input.as_bytes())).unwrap();
    batches.extend(d.finish().unwrap());
    let got = pretty_format_batches(&batches).unwrap().to_string();
    assert_eq!(d.malformed_rows(), 2, "{got}");
    assert!(
        got.contains("| 1  | 12.50 |") && got.contains("| 4  | -0.01 |"),
        "{got}"
    );
    assert!(!got.contains("12.34 ") && !got.contains("12.35"), "{got}");
}
