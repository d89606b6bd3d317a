//! The fast path against arrow-json's: every input, cut into chunks anywhere, gives the same
//! rows, malformed counts and positions with and without it, and plain lines take it.

use crate::conform::exact_tests::Rng;
use crate::json::JsonDecoder;
use crate::rescue::SchemaPolicy;
use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;
use landfall_core::Decoder;
use std::sync::Arc;

fn bench_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("order_id", DataType::Int64, true),
        Field::new("customer", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("currency", DataType::Utf8, true),
        Field::new(
            "ordered_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("note", DataType::Utf8, true),
    ]))
}

fn wide_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("f", DataType::Float32, true),
        Field::new("d", DataType::Float64, true),
        Field::new("t", DataType::Int8, true),
        Field::new("u", DataType::UInt32, true),
        Field::new("day", DataType::Date32, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "ntz",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        ),
        Field::new("big", DataType::LargeUtf8, true),
        Field::new("h", DataType::Int16, true),
        Field::new("ub", DataType::UInt8, true),
        Field::new(
            "tsec",
            DataType::Timestamp(TimeUnit::Second, Some("UTC".into())),
            true,
        ),
        Field::new(
            "tn",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("+02:00".into())),
            true,
        ),
        Field::new("must", DataType::Int32, false),
    ]))
}

/// The wide schema's names, every column a nullable STRING (nothing to check but syntax).
fn string_schema() -> SchemaRef {
    Arc::new(Schema::new(
        wide_schema()
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ))
}

/// What a decoder made of an input: rows, malformed count, rescued count, first malformed.
#[derive(Debug, PartialEq)]
struct Outcome {
    rows: Option<RecordBatch>,
    malformed: u64,
    rescued: u64,
    first: Option<String>,
    /// Where each malformed record starts, and why.
    records: Vec<(u64, u64, String)>,
    /// Their text: arrow-json's path keeps what it had when the record failed, which depends
    /// on the chunks; compared as prefixes ([`same_texts`]).
    texts: Vec<String>,
}

/// One text starts the other (a character cut by the chunk is kept as U+FFFD).
fn prefixed(x: &str, y: &str) -> bool {
    let (x, y) = (
        x.trim_end_matches('\u{fffd}'),
        y.trim_end_matches('\u{fffd}'),
    );
    x.starts_with(y) || y.starts_with(x)
}

/// The outcomes match, a malformed record's text being the same or one a prefix of the other.
fn same(a: &Result<Outcome, String>, b: &Result<Outcome, String>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            a.rows == b.rows
                && a.malformed == b.malformed
                && a.rescued == b.rescued
                && a.records == b.records
                && a.texts.len() == b.texts.len()
                && a.texts.iter().zip(&b.texts).all(|(x, y)| prefixed(x, y))
        }
        _ => a == b,
    }
}

fn decoder(schema: &SchemaRef, policy: &SchemaPolicy, batch: usize, fast: bool) -> JsonDecoder {
    let d = JsonDecoder::new("t.json", schema.clone(), batch)
        .unwrap()
        .with_policy(policy.clone())
        .unwrap()
        .with_malformed(false, true);
    if fast { d } else { d.without_fast_path() }
}

/// An error's text without its position: arrow-json's path reports where its batch began,
/// which depends on the batch size and the chunks (whitespace before a record may be in it).
fn unplaced(e: impl ToString) -> String {
    let e = e.to_string();
    match (e.find(" at line "), e.find("): ")) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &e[..a], &e[b + 1..]),
        _ => e,
    }
}

/// Decode `input` cut at `cuts` (ascending offsets): the outcome, or the error that ended it;
/// and the rows the fast path read.
fn run(mut d: JsonDecoder, input: &[u8], cuts: &[usize]) -> (Result<Outcome, String>, u64) {
    let mut batches = Vec::new();
    let mut from = 0;
    for &c in cuts.iter().chain([input.len()].iter()) {
        if c > from {
            match d.push(Bytes::copy_from_slice(&input[from..c])) {
                Ok(b) => batches.extend(b),
                Err(e) => return (Err(unplaced(e)), d.fast_rows()),
            }
            from = c;
        }
    }
    match d.finish() {
        Ok(b) => batches.extend(b),
        Err(e) => return (Err(unplaced(e)), d.fast_rows()),
    }
    let taken = d.fast_rows();
    let rows = batches
        .first()
        .map(|b| concat_batches(&b.schema(), &batches).unwrap());
    let malformed = d.take_malformed();
    let records = malformed
        .iter()
        .map(|m| (m.line, m.offset, m.reason.clone()))
        .collect();
    let texts = malformed
        .iter()
        .map(|m| m.record.clone().unwrap_or_default())
        .collect();
    let outcome = Outcome {
        rows,
        malformed: d.malformed_rows(),
        rescued: d.rescued_rows(),
        first: d
            .first_malformed()
            .map(|m| format!("{} {} {}", m.line, m.offset, m.reason)),
        records,
        texts,
    };
    (Ok(outcome), taken)
}

fn cuts(rng: &mut Rng, len: usize) -> Vec<usize> {
    let mut c: Vec<usize> = match rng.index(4) {
        0 => vec![],
        1 => (0..rng.index(4) + 1).map(|_| rng.index(len + 1)).collect(),
        2 => (1..len).step_by(rng.index(13) + 1).collect(),
        _ => (0..rng.index(40) + 1).map(|_| rng.index(len + 1)).collect(),
    };
    c.sort_unstable();
    c
}

/// The bench's rows, plain: all on the fast path, the same rows as arrow-json's, wherever the
/// chunks are cut.
#[test]
fn plain_lines_take_the_fast_path() {
    let s = bench_schema();
    let mut input = String::new();
    for i in 0..3000 {
        input.push_str(&format!(
            "{{\"order_id\":{i},\"customer\":\"acme\",\"amount\":{}.25,\"currency\":\"EUR\",\
             \"ordered_at\":\"2026-11-02T{:02}:{:02}:00Z\",\"note\":\"xx\\\"y\"}}\n",
            i % 500,
            i % 24,
            i % 60
        ));
    }
    let policy = SchemaPolicy::default();
    let mut rng = Rng(7);
    for round in 0..12 {
        let c = if round == 0 {
            vec![]
        } else {
            cuts(&mut rng, input.len())
        };
        let (slow, _) = run(decoder(&s, &policy, 512, false), input.as_bytes(), &c);
        let (fast, taken) = run(decoder(&s, &policy, 512, true), input.as_bytes(), &c);
        assert!(same(&fast, &slow), "cuts {c:?}:\n{fast:?}\n{slow:?}");
        assert_eq!(taken, 3000, "every row on the fast path, cuts {c:?}");
        assert_eq!(slow.unwrap().rows.unwrap().num_rows(), 3000);
    }
}

/// A line of the wide schema: mostly plain, often with something the fast path must leave to
/// arrow-json (or get exactly right).
fn line(rng: &mut Rng) -> String {
    const INTS: &[&str] = &[
        "0",
        "-0",
        "7",
        "-12",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "-9223372036854775809",
        "3.7",
        "3.0",
        "1e3",
        "007",
        "1.",
        "-",
        "\"42\"",
        "\"x\"",
        "true",
        "null",
        "[1]",
        "{}",
        "1-2",
        "2E2",
    ];
    const FLOATS: &[&str] = &[
        "1.5",
        "-0.0",
        "0",
        "1e39",
        "1e308",
        "1e309",
        "4e-46",
        "1e-400",
        "0e5",
        "3.4028235e38",
        "123456789012345678901234567890123456789012",
        "\"2.5\"",
        "null",
        ".5",
        "1.5e",
        "false",
        "2.5E-3",
        "-1E+2",
    ];
    const STRS: &[&str] = &[
        "\"plain\"",
        "\"\"",
        "\"with \\\"quote\\\" and \\\\ \\/ \\n \\t \\b \\f \\r\"",
        "\"\\u00e9t\\u00e9\"",
        "\"caf\u{e9} \u{1f600}\"",
        "12",
        "-3.5e2",
        "true",
        "false",
        "null",
        "[\"a\"]",
        "{\"k\":1}",
        "\"bad \\x escape\"",
        "\"\u{1}raw control\"",
        "\"unterminated",
        "nul",
        "truex",
    ];
    const BOOLS: &[&str] = &["true", "false", "null", "\"true\"", "1", "tru"];
    const DAYS: &[&str] = &[
        "\"2026-12-07\"",
        "\"2026-12-07T10:00:00\"",
        "\"2026-12-07T00:00:00\"",
        "\"20261207\"",
        "\"nope\"",
        "19000",
        "null",
        "\"2026-02-30\"",
        "\"+2026-12-07\"",
    ];
    const STAMPS: &[&str] = &[
        "\"2026-11-02T10:00:00Z\"",
        "\"2026-11-02T10:00:00.123456Z\"",
        "\"2026-11-02T10:00:00.1234567Z\"",
        "\"2026-11-02 10:00:00+02:00\"",
        "\"2026-11-02\"",
        "\"2026-11-02T10:00:00\"",
        "\"garbage\"",
        "1700000000",
        "null",
        "\"2026-11-02T10:00:00.000000000Z\"",
        "\"\\u0032026-11-02T10:00:00Z\"",
    ];
    const NTZ: &[&str] = &[
        "\"2026-11-02T10:00:00\"",
        "\"2026-11-02T10:00:00.123\"",
        "\"2026-11-02T10:00:00.1234\"",
        "\"2026-11-02T10:00:00Z\"",
        "\"2026-11-02T10:00:00+01:00\"",
        "null",
    ];
    const SMALL: &[&str] = &["1", "127", "128", "-128", "-129", "null", "1.0"];
    const UNSIGNED: &[&str] = &["0", "4294967295", "4294967296", "-1", "-0", "null"];
    const EXTRA: &[&str] = &[
        "1",
        "\"x\"",
        "[1,[2,{\"a\":null}]]",
        "{\"deep\":{\"er\":[true,false]}}",
        "[]",
        "{}",
        "\"\\ud83d\\ude00\"",
        "[1,]",
        "{\"a\" 1}",
        "1e5",
        "[\"\\u0000\"]",
    ];
    let plain = rng.index(3) == 0;
    let mut members: Vec<String> = Vec::new();
    let mut add = |rng: &mut Rng, key: &str, values: &[&str], common: &str| {
        let v = if plain || rng.index(4) != 0 {
            common.to_string()
        } else {
            rng.pick(values).to_string()
        };
        if plain || rng.index(12) != 0 {
            members.push(format!("\"{key}\":{v}"));
        }
    };
    add(rng, "i", INTS, "17");
    add(rng, "s", STRS, "\"text\"");
    add(rng, "b", BOOLS, "true");
    add(rng, "f", FLOATS, "0.5");
    add(rng, "d", FLOATS, "2.25");
    add(rng, "t", SMALL, "5");
    add(rng, "u", UNSIGNED, "9");
    add(rng, "day", DAYS, "\"2026-12-07\"");
    add(rng, "ts", STAMPS, "\"2026-11-02T10:00:00Z\"");
    add(rng, "ntz", NTZ, "\"2026-11-02T10:00:00\"");
    add(rng, "big", STRS, "\"large\"");
    add(rng, "h", &["-32768", "32768", "7", "1e2", "null"], "300");
    add(rng, "ub", &["255", "256", "-1", "0", "null"], "200");
    add(rng, "tsec", STAMPS, "\"2026-11-02T10:00:00Z\"");
    add(rng, "tn", STAMPS, "\"2026-11-02T10:00:00.123456789Z\"");
    // A null in the non-null column fails the whole file: rare, so most cases compare rows.
    let must = if rng.index(150) == 0 { "null" } else { "3" };
    members.push(format!("\"must\":{must}"));
    if !plain && rng.index(6) == 0 {
        let v = rng.pick(EXTRA);
        let k = rng.pick(&["extra", "I", "must", "s", "caf\u{e9}", "with\\\"q"]);
        let at = rng.index(members.len() + 1);
        members.insert(at, format!("\"{k}\":{v}"));
    }
    if !plain && rng.index(4) == 0 {
        let n = members.len();
        if n > 1 {
            let (a, b) = (rng.index(n), rng.index(n));
            members.swap(a, b);
        }
    }
    let sep = if !plain && rng.index(10) == 0 {
        rng.pick(&[", ", " ,", ",\t", ",,", " "])
    } else {
        ","
    };
    let mut l = format!("{{{}}}", members.join(sep));
    if !plain {
        match rng.index(30) {
            0 => l = format!("  {l} \t\r"),
            1 => l = String::new(),
            2 => l = "   ".into(),
            3 => l = format!("{l} {l}"),
            4 => l = l.replacen(',', ",\n", 1),
            5 => {
                let mut cut = l.len() / 2;
                while !l.is_char_boundary(cut) {
                    cut -= 1;
                }
                l.truncate(cut);
            }
            6 => l = "[1,2]".into(),
            7 => l = "garbage".into(),
            8 => l = format!("{l}x"),
            9 => l = format!("\u{feff}{l}"),
            10 => l = format!("{l}\r"),
            _ => {}
        }
    }
    l
}

/// Random lines of every kind, cut into chunks anywhere, in every policy: the same outcome
/// with the fast path as without it.
#[test]
fn every_kind_of_line_reads_as_arrow_json_reads_it() {
    let s = wide_schema();
    let policies = [
        SchemaPolicy::default(),
        SchemaPolicy {
            rescued_column: Some("_rescued_data".into()),
            ..Default::default()
        },
        SchemaPolicy {
            detect_new_columns: true,
            ..Default::default()
        },
    ];
    let mut rng = Rng(0x5eed);
    let (mut taken_total, mut failed) = (0, 0);
    const CASES: usize = 1500;
    let strings = string_schema();
    for case in 0..CASES {
        // Every fourth case reads all columns as text: no column to check but syntax.
        let base = if case % 4 == 3 { &strings } else { &s };
        let mut schema = base.clone();
        let policy = &policies[case % policies.len()];
        if policy.rescued_column.is_some() {
            let mut fields = base.fields().to_vec();
            fields.push(Arc::new(Field::new("_rescued_data", DataType::Utf8, true)));
            schema = Arc::new(Schema::new(fields));
        }
        let n = rng.index(40) + 1;
        let mut input: Vec<u8> = Vec::new();
        for _ in 0..n {
            input.extend_from_slice(line(&mut rng).as_bytes());
            input.push(b'\n');
        }
        match rng.index(8) {
            0 => {
                input.pop();
            }
            1 => {
                let at = rng.index(input.len());
                input[at] = 0xff;
            }
            2 => {
                let at = rng.index(input.len());
                input.truncate(at);
            }
            _ => {}
        }
        let batch = [1, 2, 3, 7, 64][rng.index(5)];
        let c = cuts(&mut rng, input.len());
        let (slow, _) = run(decoder(&schema, policy, batch, false), &input, &c);
        let (fast, taken) = run(decoder(&schema, policy, batch, true), &input, &c);
        assert!(
            same(&fast, &slow),
            "{fast:?}\n{slow:?}\ncase {case}, batch {batch}, cuts {c:?}, input:\n{}",
            String::from_utf8_lossy(&input)
        );
        taken_total += taken;
        failed += usize::from(slow.is_err());
    }
    // A null in a non-null column fails the file (both paths alike); most cases must not.
    assert!(failed * 4 < CASES, "{failed} of {CASES} cases failed");
    // The comparison means something only if the fast path read a good share of the rows.
    assert!(taken_total > 2000, "fast path took {taken_total} rows");
}

/// Schemas the fast path does not read leave it unbuilt: nested, decimal and binary columns.
#[test]
fn schemas_it_cannot_read_are_left_to_arrow_json() {
    use crate::json_fast::FastJson;
    let nested = Arc::new(Schema::new(vec![Field::new(
        "l",
        DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
        true,
    )]));
    let decimal = Arc::new(Schema::new(vec![Field::new(
        "d",
        DataType::Decimal128(10, 2),
        true,
    )]));
    let binary = Arc::new(Schema::new(vec![Field::new("b", DataType::Binary, true)]));
    for s in [nested, decimal, binary] {
        assert!(FastJson::of(&s, 16, false).is_none(), "{s:?}");
    }
    assert!(FastJson::of(&wide_schema(), 16, false).is_some());
}

/// The reading of `YYYY-MM-DDTHH:MM:SS[.f]Z` without arrow's parser gives what arrow's parser
/// and the exactness check give, for every unit, on dates and times in and out of range.
#[test]
fn utc_timestamps_read_as_arrow_reads_them() {
    use crate::json_fast::{general_timestamp, timestamp, utc_timestamp};
    let utc: arrow::array::timezone::Tz = "UTC".parse().unwrap();
    let plus: arrow::array::timezone::Tz = "+05:30".parse().unwrap();
    let mut rng = Rng(99);
    let years = [
        "0000", "0001", "1677", "1969", "1970", "2024", "2262", "2263", "9999",
    ];
    let (mut fast_read, mut scratch) = (0, Vec::new());
    for _ in 0..60_000 {
        let y = rng.pick(&years);
        let (mo, d) = (rng.index(14), rng.index(33));
        let (h, mi, s) = (rng.index(25), rng.index(61), rng.index(62));
        let digits = rng.index(12);
        let fraction: String = (0..digits)
            .map(|_| {
                let zero = rng.index(3) == 0;
                char::from(b'0' + if zero { 0 } else { rng.index(10) as u8 })
            })
            .collect();
        let dot = if digits > 0 || rng.index(20) == 0 {
            "."
        } else {
            ""
        };
        let end = rng.pick(&["Z", "Z", "Z", "z", "+00:00", ""]);
        let t = format!("{y}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{dot}{fraction}{end}");
        for unit in [
            TimeUnit::Second,
            TimeUnit::Millisecond,
            TimeUnit::Microsecond,
            TimeUnit::Nanosecond,
        ] {
            for zone in [&utc, &plus] {
                let want = general_timestamp(&t, unit, Some(zone));
                let got = timestamp(t.as_bytes(), false, unit, Some(zone), &mut scratch);
                assert_eq!(got, want, "{t} {unit:?} {zone:?}");
                fast_read +=
                    usize::from(want.is_some() && utc_timestamp(t.as_bytes(), unit).is_some());
            }
        }
    }
    // Text read by the fast reading and found right (not only left to the general parser).
    assert!(fast_read > 20_000, "{fast_read} fast readings");
}

/// Decode `input` in chunks of `chunk` bytes: (rows, malformed rows).
fn read_all(d: JsonDecoder, input: &str, chunk: usize) -> (RecordBatch, u64) {
    let cuts: Vec<usize> = (chunk..input.len()).step_by(chunk).collect();
    let (out, _) = run(d, input.as_bytes(), &cuts);
    let out = out.unwrap();
    (out.rows.unwrap(), out.malformed)
}

fn texts(b: &RecordBatch, column: &str) -> Vec<String> {
    let c = arrow::compute::cast(b.column_by_name(column).unwrap(), &DataType::Utf8).unwrap();
    let c = c
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .unwrap();
    c.iter().map(|v| v.unwrap_or("null").to_string()).collect()
}

/// What Spark's parser refuses is a malformed record whatever the schema (one with no column
/// to check too), the batch size, the chunks and the batch-mates (one that arrow-json cannot
/// read sends its batch to the slow path), with and without the fast path. As Spark reads
/// tests/spark/corpus.py's `json_strict_syntax`: rows 1, 5, 6 and 8 land, five are corrupt.
#[test]
fn strict_json_is_required_whatever_the_schema_and_batch_mates() {
    let lines = "{\"a\":1,\"s\":\"x\"}\n{\"a\":007,\"s\":\"lead\"}\n{\"a\":2,\"s\":\"tab\there\"}\n\
                 {\"a\":3,\"l\":[1 2]}\n{\"a\":4,\"s\":\"y\",}\n{\"a\":5,\"s\":\"z\"}\r\n\
                 {\"a\":6,\t\"s\":\"w\"}\n{\"a\":7,\"d\":1.}\n{\"a\":8,\"s\":\"ok\"}\n{}\n";
    let mate = "{\"a\":9,\"s\":{\"o\":1}}\n";
    let text = |ty: DataType| {
        Arc::new(Schema::new(vec![
            Field::new("a", ty, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("l", DataType::Utf8, true),
            Field::new("d", DataType::Utf8, true),
        ]))
    };
    for schema in [text(DataType::Utf8), text(DataType::Int64)] {
        for with_mate in [false, true] {
            let input = if with_mate {
                format!("{mate}{lines}{mate}")
            } else {
                lines.to_string()
            };
            for (batch, chunk, fast) in [
                (1, 7, true),
                (4, 1000, true),
                (64, 3, false),
                (64, 1000, true),
            ] {
                let d = decoder(&schema, &SchemaPolicy::default(), batch, fast);
                let (rows, malformed) = read_all(d, &input, chunk);
                let mut want = vec!["1", "5", "6", "8", "null"];
                if with_mate {
                    want.insert(0, "9");
                    want.push("9");
                }
                let how =
                    format!("{schema:?} mate {with_mate} batch {batch} chunk {chunk} fast {fast}");
                assert_eq!(texts(&rows, "a"), want, "{how}");
                // The five refused records; a batch-mate's object lands in its text column as
                // its JSON text (as in Spark), through the slow path.
                assert_eq!(malformed, 5, "{how}");
                if with_mate {
                    assert_eq!(texts(&rows, "s")[0], "{\"o\":1}", "{how}");
                }
            }
        }
    }
}

/// A tab between tokens is whitespace wherever it is: in a MAP's value too (the slow path
/// checks a map's value apart), with a batch-mate sending the batch to the slow path.
#[test]
fn tabs_between_tokens_are_whitespace_in_maps_too() {
    let entries = Field::new(
        "entries",
        DataType::Struct(
            vec![
                Field::new("keys", DataType::Utf8, false),
                Field::new("values", DataType::Int64, true),
            ]
            .into(),
        ),
        false,
    );
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("m", DataType::Map(Arc::new(entries), false), true),
    ]));
    let input = "{\"i\":1,\"m\":{\"k\":\t1}}\n{\"i\":2.5}\n";
    for batch in [1, 64] {
        let d = decoder(&schema, &SchemaPolicy::default(), batch, true);
        let (rows, malformed) = read_all(d, input, 1000);
        let shown = arrow::util::pretty::pretty_format_batches(&[rows])
            .unwrap()
            .to_string();
        assert!(shown.contains("{k: 1}"), "batch {batch}:\n{shown}");
        assert_eq!(
            malformed, 1,
            "only 2.5 is a misfit; batch {batch}:\n{shown}"
        );
    }
}

/// A raw newline inside a string is not JSON (Spark reads the two lines as two corrupt
/// records): the same with or without a batch-mate arrow-json cannot take.
#[test]
fn a_raw_newline_in_a_string_is_refused_whatever_the_batch() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]));
    let plain = "{\"i\":1,\"s\":\"a\nb\"}\n{\"i\":2}\n";
    for (input, misfits) in [
        (plain.to_string(), 0),
        (format!("{plain}{{\"i\":1.5}}\n"), 1),
    ] {
        for fast in [true, false] {
            let d = decoder(&schema, &SchemaPolicy::default(), 64, fast);
            let (rows, malformed) = read_all(d, &input, 1000);
            let ids = texts(&rows, "i");
            assert_eq!(&ids[..1], ["2"], "{input:?} fast {fast}");
            assert_eq!(malformed, 2 + misfits, "{input:?} fast {fast}");
        }
    }
}

/// The calendar arithmetic of the fast timestamp reading against chrono's, every day of
/// every month of the years at the edges (and the days that do not exist).
#[test]
fn days_from_civil_is_chronos_calendar() {
    use crate::json_fast::days_from_civil;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
    for y in (0..=9999)
        .step_by(7)
        .chain([0, 1, 4, 100, 400, 1600, 1900, 2000, 2024, 2100, 9999])
    {
        for m in 0..=13 {
            for d in 0..=32 {
                let want = chrono::NaiveDate::from_ymd_opt(y as i32, m, d)
                    .map(|date| (date - epoch).num_days());
                assert_eq!(days_from_civil(y, m, d), want, "{y}-{m}-{d}");
            }
        }
    }
}
