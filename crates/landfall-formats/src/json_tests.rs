use super::*;
use arrow::util::pretty::pretty_format_batches;
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use landfall_core::Decoder;
use std::sync::Arc;

fn schema(fields: Vec<Field>) -> SchemaRef {
    Arc::new(Schema::new(fields))
}

fn id_s() -> SchemaRef {
    schema(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ])
}

/// Decode `input` in one chunk: (the rows as a table, malformed rows, first malformed).
fn decode(
    schema: SchemaRef,
    input: &str,
    batch_size: usize,
) -> (String, u64, Option<MalformedRecord>) {
    let mut d = JsonDecoder::new("t.json", schema, batch_size).unwrap();
    let mut batches = d.push(Bytes::copy_from_slice(input.as_bytes())).unwrap();
    batches.extend(d.finish().unwrap());
    let table = pretty_format_batches(&batches).unwrap().to_string();
    (table, d.malformed_rows(), d.first_malformed().cloned())
}

fn table(rows: &str, schema: SchemaRef) -> String {
    decode(schema, rows, 1024).0
}

/// Every way of cutting the input into two chunks, with batches smaller than the input,
/// decodes to the same rows.
#[test]
fn chunk_boundaries_anywhere() {
    let input: String = (0..7)
        .map(|i| format!("{{\"id\":{i},\"s\":\"v{i} x\"}}\n"))
        .collect();
    let want = table(&input, id_s());
    assert_eq!(want.matches("v").count(), 7, "{want}");
    for cut in 0..=input.len() {
        let mut d = JsonDecoder::new("t.json", id_s(), 2).unwrap();
        let batches = crate::decode_in_two(&mut d, input.as_bytes(), cut);
        let got = pretty_format_batches(&batches).unwrap().to_string();
        assert_eq!(got, want, "cut at byte {cut}");
        assert_eq!(d.malformed_rows(), 0);
    }
}

/// Misfits, garbage and a cut last record give the same rows, count and first position
/// wherever the chunks are cut, whatever the batch size.
#[test]
fn permissive_results_do_not_depend_on_chunks() {
    let input = "{\"id\":1,\"s\":\"a\"}\n\n{\"id\":\"abc\",\"s\":{\"k\": [1, 2]}}\n\
                 \u{1}\u{2}garbage\n{\"id\":4,\"s\":5.10}\n{\"id\":5,\"s\":\"e\"}\n{\"id\":6,\"s";
    for batch_size in [1, 2, 1024] {
        let (want, bad, first) = decode(id_s(), input, batch_size);
        assert_eq!(bad, 3, "misfit, garbage, cut tail");
        let first = first.unwrap();
        let offset = input.find("{\"id\":\"abc\"").unwrap() as u64;
        assert_eq!((first.line, first.offset), (3, offset), "{first}");
        for cut in 0..=input.len() {
            let mut d = JsonDecoder::new("t.json", id_s(), batch_size).unwrap();
            let batches = crate::decode_in_two(&mut d, input.as_bytes(), cut);
            let got = pretty_format_batches(&batches).unwrap().to_string();
            assert_eq!(got, want, "cut at byte {cut}, batch size {batch_size}");
            assert_eq!(d.malformed_rows(), 3, "cut at byte {cut}");
            assert_eq!(d.first_malformed(), Some(&first), "cut at byte {cut}");
        }
    }
}

#[test]
fn objects_and_arrays_in_string_columns_are_their_json_text() {
    let s = schema(vec![
        Field::new("a", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ]);
    let input = "{\"a\":{\"b\": 1, \"c\": \"x y\"},\"n\":1}\n{\"a\":[1, {\"z\":null}],\"n\":2}\n";
    let (got, bad, first) = decode(s.clone(), input, 1024);
    let want = table(
        "{\"a\":\"{\\\"b\\\":1,\\\"c\\\":\\\"x y\\\"}\",\"n\":1}\n\
         {\"a\":\"[1,{\\\"z\\\":null}]\",\"n\":2}\n",
        s,
    );
    assert_eq!(got, want);
    assert_eq!((bad, first), (0, None), "kept as text, not malformed");
}

#[test]
fn misfit_values_are_null_and_rows_malformed() {
    let s = schema(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("i", DataType::Int32, true),
        Field::new("d", DataType::Float64, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("day", DataType::Date32, true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("m", DataType::Decimal128(10, 2), true),
    ]);
    let good = "{\"id\":0,\"i\":7,\"d\":1.5,\"b\":true,\"day\":\"2024-01-02\",\
                \"ts\":\"2024-01-02T03:04:05\",\"m\":\"12.34\"}\n";
    let misfits = [
        "{\"id\":1,\"i\":\"abc\"}",
        "{\"id\":2,\"i\":3000000000}",
        "{\"id\":3,\"d\":\"abc\"}",
        "{\"id\":4,\"d\":{\"x\":1}}",
        "{\"id\":5,\"b\":\"abc\"}",
        "{\"id\":6,\"day\":\"abc\"}",
        "{\"id\":7,\"ts\":\"abc\"}",
        "{\"id\":8,\"m\":\"abc\"}",
        "{\"id\":\"abc\",\"i\":9}",
    ];
    let input = format!("{good}{}\n", misfits.join("\n"));
    let (got, bad, first) = decode(s.clone(), &input, 1024);
    assert_eq!(bad, misfits.len() as u64);
    let first = first.unwrap();
    assert_eq!((first.line, first.offset), (2, good.len() as u64));
    assert!(first.reason.contains("column `i`"), "{}", first.reason);
    // The misfit value is null, the rest of its row is kept.
    let want = format!(
        "{good}{{\"id\":1}}\n{{\"id\":2}}\n{{\"id\":3}}\n{{\"id\":4}}\n{{\"id\":5}}\n\
         {{\"id\":6}}\n{{\"id\":7}}\n{{\"id\":8}}\n{{\"i\":9}}\n"
    );
    assert_eq!(got, table(&want, s));
}

/// Values that fit decode exactly as on the fast path, even in a batch the slow path re-read.
#[test]
fn fitting_values_keep_their_fast_path_result() {
    let s = schema(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("m", DataType::Decimal128(38, 10), true),
    ]);
    let fits = "{\"id\":1,\"s\":1.10,\"m\":1234567890123456789.0123456789}\n\
                {\"id\":2,\"s\":true,\"m\":\"0.1\"}\n{\"id\":3,\"s\":1e300}\n";
    let (fast, bad, _) = decode(s.clone(), fits, 1024);
    assert_eq!(bad, 0);
    let (slow, bad, _) = decode(s.clone(), &format!("{fits}{{\"id\":\"x\"}}\n"), 1024);
    assert_eq!(bad, 1);
    let slow_fit_rows = table(&format!("{fits}{{}}\n"), s);
    assert_eq!(slow, slow_fit_rows);
    assert!(fast.contains("| 1.10 "), "{fast}");
    assert!(slow.contains("| 1.10 "), "{slow}");
}

#[test]
fn nested_misfits_null_only_the_leaf() {
    let inner = Field::new(
        "st",
        DataType::Struct(
            vec![
                Field::new("x", DataType::Int64, true),
                Field::new("y", DataType::Utf8, true),
            ]
            .into(),
        ),
        true,
    );
    let list = Field::new(
        "l",
        DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
        true,
    );
    let s = schema(vec![inner, list]);
    let input =
        "{\"st\":{\"x\":\"abc\",\"y\":{\"q\":1}},\"l\":[1,\"two\",3]}\n{\"st\":5,\"l\":{}}\n";
    let (got, bad, first) = decode(s.clone(), input, 1024);
    let want = table(
        "{\"st\":{\"y\":\"{\\\"q\\\":1}\"},\"l\":[1,null,3]}\n{\"st\":null,\"l\":null}\n",
        s,
    );
    assert_eq!(got, want);
    assert_eq!(bad, 2);
    assert!(first.unwrap().reason.contains("column `st.x`"));
}

#[test]
fn last_record_without_newline() {
    let (got, bad, _) = decode(id_s(), "{\"id\":1}\n{\"id\":2}", 1024);
    assert_eq!((got, bad), (table("{\"id\":1}\n{\"id\":2}\n", id_s()), 0));

    let (got, bad, first) = decode(id_s(), "{\"id\":1}\n\n{\"id\":2,\"na", 1024);
    assert_eq!((got, bad), (table("{\"id\":1}\n", id_s()), 1));
    let first = first.unwrap();
    assert_eq!((first.line, first.offset), (3, 10));
    assert!(first.reason.contains("ends inside a record"), "{first}");
}

#[test]
fn garbage_files_are_all_malformed_records() {
    let input = "\u{0}\u{1}\u{2}\n\u{7f}ELF\u{3}\n\n\u{1b}[0m PK\u{3}\u{4}";
    let (got, bad, first) = decode(id_s(), input, 2);
    assert_eq!(got, table("", id_s()));
    assert_eq!(bad, 3, "one per non-empty line");
    assert_eq!(first.unwrap().line, 1);
}

#[test]
fn garbage_line_amid_good_records() {
    let mut input: String = (0..5).map(|i| format!("{{\"id\":{i}}}\n")).collect();
    let offset = input.len() as u64;
    input.push_str("{\"id\":5,oops}\n");
    input.extend((6..9).map(|i| format!("{{\"id\":{i}}}\n")));
    for batch_size in [1, 3, 1024] {
        let (got, bad, first) = decode(id_s(), &input, batch_size);
        let want: String = (0..9)
            .filter(|&i| i != 5)
            .map(|i| format!("{{\"id\":{i}}}\n"))
            .collect();
        assert_eq!(got, table(&want, id_s()));
        assert_eq!(bad, 1);
        let first = first.unwrap();
        assert_eq!((first.line, first.offset), (6, offset), "{first}");
    }
}

#[test]
fn non_object_records_are_malformed() {
    let (got, bad, _) = decode(id_s(), "{\"id\":1}\n[1,2]\n3\n\"x\"\n", 1024);
    assert_eq!((got, bad), (table("{\"id\":1}\n", id_s()), 3));
}

/// A number with more fraction digits than the column's scale, or more integer digits than its
/// precision allows, is a misfit (null and counted, rescued where there is a rescued column),
/// never rounded or truncated into the column.
#[test]
fn decimals_that_do_not_fit_are_never_rounded() {
    let s = schema(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("m", DataType::Decimal128(4, 2), true),
    ]);
    let input = "{\"id\":1,\"m\":12.5}\n{\"id\":2,\"m\":12.345}\n{\"id\":3,\"m\":123.45}\n{\"id\":4,\"m\":-0.01}\n";
    let (got, bad, _) = decode(s.clone(), input, 1024);
    assert_eq!(bad, 2, "{got}");
    assert_eq!(
        got,
        table(
            "{\"id\":1,\"m\":12.5}\n{\"id\":2}\n{\"id\":3}\n{\"id\":4,\"m\":-0.01}\n",
            s
        )
    );
}

/// Issue 16: a number never changes on its way into a column. An integer column takes only
/// integer literals (as Spark's JSON reader: `3.0` and `1e3` are misfits too), within its
/// range; a FLOAT or DOUBLE takes the nearest float but not an overflow to infinity or a
/// non-zero read as zero; a TIMESTAMP keeps every digit of its text, a DATE takes no time of
/// day. Misfits are null and counted, on the fast path and the slow path alike.
#[test]
fn number_and_text_literals_never_change_on_their_way_into_a_column() {
    let tz = Some("+00:00".into());
    let s = schema(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("i", DataType::Int64, true),
        Field::new("f", DataType::Float32, true),
        Field::new("d", DataType::Float64, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, tz), true),
        Field::new("day", DataType::Date32, true),
        Field::new(
            "l",
            DataType::List(Arc::new(Field::new("item", DataType::Int32, true))),
            true,
        ),
    ]);
    let fits = "{\"id\":0,\"i\":-9223372036854775808,\"f\":0.1,\"d\":1e308,\
                \"t\":\"2024-01-02T03:04:05.123456\",\"day\":\"2024-01-02\",\"l\":[1,-2]}";
    let misfits = [
        ("{\"id\":1,\"i\":3.7}", "{\"id\":1}"),
        ("{\"id\":2,\"i\":3.0}", "{\"id\":2}"),
        ("{\"id\":3,\"i\":1e3}", "{\"id\":3}"),
        ("{\"id\":4,\"i\":-9223372036854775809}", "{\"id\":4}"),
        ("{\"id\":5,\"f\":1e39}", "{\"id\":5}"),
        ("{\"id\":6,\"f\":1e-50}", "{\"id\":6}"),
        ("{\"id\":7,\"d\":1e400}", "{\"id\":7}"),
        (
            "{\"id\":8,\"t\":\"2024-01-02T03:04:05.1234567\"}",
            "{\"id\":8}",
        ),
        ("{\"id\":9,\"t\":1.5}", "{\"id\":9}"),
        ("{\"id\":10,\"day\":\"2024-01-02T03:04:05\"}", "{\"id\":10}"),
        ("{\"id\":11,\"l\":[1,2.5]}", "{\"id\":11,\"l\":[1,null]}"),
    ];
    let input: String = std::iter::once(fits)
        .chain(misfits.iter().map(|(m, _)| *m))
        .map(|r| format!("{r}\n"))
        .collect();
    let want: String = std::iter::once(fits)
        .chain(misfits.iter().map(|(_, w)| *w))
        .map(|r| format!("{r}\n"))
        .collect();
    for batch_size in [1, 1024] {
        let (got, bad, first) = decode(s.clone(), &input, batch_size);
        assert_eq!(bad, misfits.len() as u64, "{got}");
        assert!(first.unwrap().reason.contains("column `i`"));
        assert_eq!(got, table(&want, s.clone()), "batch size {batch_size}");
    }
}

/// A random number literal into each numeric column type either lands as exactly its value
/// or is rescued as written; never changed, never malformed.
#[test]
fn random_number_literals_land_exactly_or_are_rescued() {
    use crate::conform::exact_tests::{Rng, text_decimal, text_float};
    use arrow::datatypes::*;
    let types = [
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::UInt8,
        DataType::UInt16,
        DataType::UInt32,
        DataType::UInt64,
        DataType::Float32,
        DataType::Float64,
        DataType::Decimal128(10, 2),
        DataType::Decimal128(38, 0),
        DataType::Decimal128(38, 18),
        DataType::Decimal128(4, 4),
    ];
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let literal = |r: &mut Rng| -> String {
        let int = r.int();
        match r.below(10) {
            0 => int.to_string(),
            1 => (int % 200).to_string(),
            2 => format!("{}.{}", int % 100_000, "0".repeat(1 + r.below(3) as usize)),
            3 => format!("{}.{}", int % 1_000_000, r.below(100_000)),
            4 => format!("{}e{}", int % 1000, r.below(90) as i64 - 45),
            5 => format!("{}.{}E{}", int % 100, r.below(100), r.below(20) as i64 - 10),
            6 => {
                let v = f64::from_bits(r.next());
                if v.is_finite() {
                    format!("{v:?}")
                } else {
                    "0.5".into()
                }
            }
            7 => format!(
                "{}{:07}",
                if int == 0 { 1 } else { int },
                r.below(10_000_000)
            ),
            8 => format!("{}0.{}", if int < 0 { "-" } else { "" }, r.below(10_000)),
            _ => r
                .pick(&[
                    "-129",
                    "128",
                    "255",
                    "256",
                    "-32769",
                    "65536",
                    "2147483648",
                    "-9223372036854775809",
                    "9223372036854775807",
                    "18446744073709551615",
                    "18446744073709551616",
                    "1e39",
                    "1e400",
                    "1e-50",
                    "-1e-400",
                    "-0",
                    "-0.0",
                    "0.1",
                    "3.4028235e38",
                    "123456789012345678901234567890123456789",
                ])
                .to_string(),
        }
    };
    for ty in types {
        let s = schema(vec![
            Field::new("v", ty.clone(), true),
            Field::new("_rescued_data", DataType::Utf8, true),
        ]);
        let literals: Vec<String> = (0..400).map(|_| literal(&mut r)).collect();
        let input: String = literals
            .iter()
            .map(|l| format!("{{\"v\":{l}}}\n"))
            .collect();
        let policy = SchemaPolicy {
            rescued_column: Some("_rescued_data".into()),
            ..Default::default()
        };
        let mut d = JsonDecoder::new("t.json", s.clone(), 64)
            .unwrap()
            .with_policy(policy)
            .unwrap();
        let mut batches = d.push(Bytes::from(input)).unwrap();
        batches.extend(d.finish().unwrap());
        let b = arrow::compute::concat_batches(&s, &batches).unwrap();
        assert_eq!(
            (b.num_rows(), d.malformed_rows()),
            (literals.len(), 0),
            "{ty}: {:?}",
            d.first_malformed()
        );
        let v = b.column(0);
        let rescued = b.column(1).as_string::<i32>();
        // Both outcomes must come up, or the property holds vacuously.
        let landed = literals.len() - v.null_count();
        assert!(landed >= 20 && v.null_count() >= 2, "{ty}: {landed} landed");
        for (i, lit) in literals.iter().enumerate() {
            if v.is_null(i) {
                assert!(
                    rescued.is_valid(i) && rescued.value(i).contains(&format!("\"v\":{lit}")),
                    "{ty}: {lit} neither landed nor was rescued"
                );
                continue;
            }
            let plain_int = || {
                (!lit.contains(['.', 'e', 'E']))
                    .then(|| lit.parse::<i128>().ok())
                    .flatten()
            };
            let exact = match &ty {
                DataType::Int8 => plain_int() == Some(v.as_primitive::<Int8Type>().value(i).into()),
                DataType::Int16 => {
                    plain_int() == Some(v.as_primitive::<Int16Type>().value(i).into())
                }
                DataType::Int32 => {
                    plain_int() == Some(v.as_primitive::<Int32Type>().value(i).into())
                }
                DataType::Int64 => {
                    plain_int() == Some(v.as_primitive::<Int64Type>().value(i).into())
                }
                DataType::UInt8 => {
                    plain_int() == Some(v.as_primitive::<UInt8Type>().value(i).into())
                }
                DataType::UInt16 => {
                    plain_int() == Some(v.as_primitive::<UInt16Type>().value(i).into())
                }
                DataType::UInt32 => {
                    plain_int() == Some(v.as_primitive::<UInt32Type>().value(i).into())
                }
                DataType::UInt64 => {
                    plain_int() == Some(v.as_primitive::<UInt64Type>().value(i).into())
                }
                DataType::Float32 => text_float(lit, true).is_some_and(|(x, in_range)| {
                    in_range && x == f64::from(v.as_primitive::<Float32Type>().value(i))
                }),
                DataType::Float64 => text_float(lit, false).is_some_and(|(x, in_range)| {
                    in_range && x == v.as_primitive::<Float64Type>().value(i)
                }),
                DataType::Decimal128(_, scale) => {
                    let got = v.as_primitive::<Decimal128Type>().value(i);
                    text_decimal(lit).is_some_and(|(m, e)| {
                        crate::conform::exact_tests::same_decimal(m, e, got, i32::from(*scale))
                    })
                }
                _ => unreachable!(),
            };
            let shown = arrow::util::display::ArrayFormatter::try_new(v, &Default::default())
                .unwrap()
                .value(i)
                .to_string();
            assert!(exact, "{ty}: {lit} landed as {shown}");
        }
    }
}

/// Type widening: a value that does not fit its column is noted with the type a widened
/// column would have, where Delta's type widening allows one (rescued all the same); one no
/// widening holds (a fraction in a BIGINT) is rescued and not noted.
#[test]
fn misfits_note_the_widened_column_under_type_widening() {
    let s = schema(vec![
        Field::new("i", DataType::Int32, true),
        Field::new("l", DataType::Int64, true),
        Field::new(
            "u",
            DataType::Struct(vec![Field::new("f", DataType::Float32, true)].into()),
            true,
        ),
        Field::new("_rescued_data", DataType::Utf8, true),
    ]);
    let input = concat!(
        "{\"i\":1,\"l\":2,\"u\":{\"f\":0.5}}\n",
        "{\"i\":3000000000,\"l\":2.5,\"u\":{\"f\":1e39}}\n",
        "{\"i\":\"x\",\"l\":99999999999999999999999}\n",
    );
    for widen in [false, true] {
        let policy = SchemaPolicy {
            rescued_column: Some("_rescued_data".into()),
            detect_new_columns: true,
            infer_types: true,
            widen_types: widen,
            ..Default::default()
        };
        let mut d = JsonDecoder::new("t.json", s.clone(), 64)
            .unwrap()
            .with_policy(policy)
            .unwrap();
        let mut batches = d.push(Bytes::from(input)).unwrap();
        batches.extend(d.finish().unwrap());
        let b = arrow::compute::concat_batches(&s, &batches).unwrap();
        assert_eq!(b.num_rows(), 3);
        // The values are rescued either way: the batch is read again on the widened schema.
        assert_eq!(b.column(3).null_count(), 1, "{widen}");
        let noted = crate::NewColumns::from_fields(&d.new_columns());
        if !widen {
            assert!(noted.is_empty(), "{:?}", noted.fields());
            continue;
        }
        let (widened, changes) = crate::widen_columns(s.fields(), &noted);
        let described: Vec<String> = changes
            .iter()
            .map(|(p, from, to)| format!("{p} {from} -> {to}"))
            .collect();
        // i: 3000000000 is a BIGINT ("x" is no number); l: 2.5 is a DOUBLE, which a BIGINT
        // does not widen to, but 23 digits are a DECIMAL(23,0), which it does; u.f: 1e39
        // overflows a FLOAT, a DOUBLE holds it.
        assert_eq!(
            described,
            [
                "i Int32 -> Int64",
                "l Int64 -> Decimal128(23, 0)",
                "u.f Float32 -> Float64"
            ]
        );
        assert_eq!(widened[0].data_type(), &DataType::Int64);
    }
}
