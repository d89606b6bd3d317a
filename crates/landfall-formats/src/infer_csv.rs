//! Spark's CSV schema inference (`CSVInferSchema`), which Auto Loader uses with
//! `inferColumnTypes`: each column's type from its values, read as the decoder reads them
//! (the same tokenizer, trimming and null spellings).
//!
//! - Empty values and `null_value` are skipped: a column holding `NA` among numbers is a
//!   number. A column without any value is a string.
//! - A value is, in this order, an integer (BIGINT), an integer past BIGINT (`DECIMAL(digits,
//!   0)`, DOUBLE past 38 digits), a fraction (DOUBLE, also `NaN`, `Infinity`, `Inf`, `-Inf` and
//!   `nan_value`), a DATE (`date_format`, else `yyyy-MM-dd`), a TIMESTAMP (`timestamp_format`,
//!   else ISO 8601 with or without an offset; zone-less values are read as UTC, Spark's
//!   default TIMESTAMP_LTZ), a BOOLEAN (`true`/`false` in any case), else a STRING.
//! - Values merge as Spark merges them: integer and fraction to DOUBLE, an integer inside a
//!   wide enough decimal to it, decimal and DOUBLE to DOUBLE, DATE and TIMESTAMP to TIMESTAMP;
//!   anything else to STRING.
//!
//! Spark types integers that fit 32 bits as INT; landfall keeps them BIGINT (see
//! docs/schema-evolution.md, intended differences).

use crate::CsvFormat;
use crate::csv_tokenize::{Records, Tokenizer};
use crate::temporal::temporal_type;
use crate::types::{merge_decimals, tightest};
use arrow_schema::{DataType, Field};

/// Records classified at a time (the sample is at most a few megabytes per file anyway).
const RECORDS_PER_ROUND: usize = 4096;

/// The columns of one CSV text (its first `skip_rows` lines already gone) with the types their
/// values give: null for a column without a value (a string once the sample is merged). With
/// a header, columns are named by it (a repeated name becomes `_c<index>`, as the decoder
/// names it); without, `_c0`, `_c1`, ... as wide as the first record.
pub(crate) fn csv_fields(text: &[u8], csv: &CsvFormat, typed: bool) -> Vec<Field> {
    let mut tok = Tokenizer::new(csv);
    let mut records = Records::default();
    let mut names: Option<Vec<String>> = None;
    let mut types: Vec<DataType> = Vec::new();
    let mut rest = text;
    let mut done = false;
    while !done {
        let used = tok.feed(rest, &mut records, RECORDS_PER_ROUND);
        rest = &rest[used..];
        if rest.is_empty() {
            tok.finish(&mut records);
            done = true;
        }
        if records.len() == 0 {
            continue;
        }
        if names.is_none() {
            let first: Vec<Vec<u8>> = if csv.header {
                records.take_first()
            } else {
                (0..records.num_fields(0))
                    .map(|f| records.field(0, f).unwrap_or_default().to_vec())
                    .collect()
            };
            let n = header_names(&first, csv);
            types = vec![DataType::Null; n.len()];
            names = Some(n);
        }
        if typed {
            for r in 0..records.len() {
                for (j, t) in types.iter_mut().enumerate() {
                    if let Some(v) = records.field(r, j) {
                        *t = infer_field(t, trimmed(v, csv), csv);
                    }
                }
            }
        }
        records.clear();
    }
    let names = names.unwrap_or_default();
    names
        .into_iter()
        .zip(types)
        .map(|(n, t)| Field::new(n, if typed { t } else { DataType::Utf8 }, true))
        .collect()
}

fn header_names(header: &[Vec<u8>], csv: &CsvFormat) -> Vec<String> {
    if !csv.header {
        return (0..header.len()).map(|i| format!("_c{i}")).collect();
    }
    let mut seen = std::collections::HashSet::new();
    header
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let n = String::from_utf8_lossy(trimmed(n, csv)).into_owned();
            if seen.insert(n.clone()) {
                n
            } else {
                format!("_c{i}")
            }
        })
        .collect()
}

fn trimmed<'a>(mut v: &'a [u8], csv: &CsvFormat) -> &'a [u8] {
    if csv.ignore_leading_white_space {
        v = v.trim_ascii_start();
    }
    if csv.ignore_trailing_white_space {
        v = v.trim_ascii_end();
    }
    v
}

/// The type of a column of `values` (trimmed as the options say): null when none has a
/// value. The rule of a first schema and of a new column alike.
pub(crate) fn column_type<'a>(values: impl Iterator<Item = &'a [u8]>, csv: &CsvFormat) -> DataType {
    values.fold(DataType::Null, |t, v| infer_field(&t, trimmed(v, csv), csv))
}

/// The column's type so far merged with the type of one more value (Spark's `inferField`).
fn infer_field(so_far: &DataType, v: &[u8], csv: &CsvFormat) -> DataType {
    if v.is_empty() || csv.null_value.as_deref().map(str::as_bytes) == Some(v) {
        return so_far.clone();
    }
    if *so_far == DataType::Utf8 {
        return DataType::Utf8;
    }
    let Ok(v) = std::str::from_utf8(v) else {
        return DataType::Utf8;
    };
    compatible(so_far, &value_type(v, csv)).unwrap_or(DataType::Utf8)
}

/// What one non-null value reads as.
fn value_type(v: &str, csv: &CsvFormat) -> DataType {
    if v.parse::<i64>().is_ok() {
        return DataType::Int64;
    }
    if let Some(t) = whole_decimal(v) {
        return t;
    }
    if is_double(v, csv) {
        return DataType::Float64;
    }
    if let Some(t) = temporal_type(v, &csv.temporal) {
        return t;
    }
    if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
        return DataType::Boolean;
    }
    DataType::Utf8
}

/// Spark's CSV `compatibleType`: the tightest common type, else a string with a string, else
/// the decimal rules; `None` when the two have no common type (a string then).
pub(crate) fn compatible(a: &DataType, b: &DataType) -> Option<DataType> {
    use DataType::*;
    if let Some(t) = tightest(a, b) {
        return Some(t);
    }
    match (a, b) {
        (Utf8, _) | (_, Utf8) => Some(Utf8),
        // Values are BIGINT here: its 20 digits as a decimal.
        (Decimal128(p, s), Int64) | (Int64, Decimal128(p, s)) => {
            Some(merge_decimals(*p, *s, 20, 0))
        }
        (Float64, Decimal128(..)) | (Decimal128(..), Float64) => Some(Float64),
        (Decimal128(p1, s1), Decimal128(p2, s2)) => Some(merge_decimals(*p1, *s1, *p2, *s2)),
        _ => None,
    }
}

/// A number without a fraction that is not a BIGINT, as Java's `BigDecimal` reads it with
/// scale 0 (`12345678901234567890`, `5.`): `DECIMAL(digits, 0)`, up to 38 digits.
fn whole_decimal(v: &str) -> Option<DataType> {
    let body = v.strip_prefix(['-', '+']).unwrap_or(v);
    let int = body.strip_suffix('.').unwrap_or(body);
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = int.trim_start_matches('0').len().max(1);
    (digits <= 38).then_some(DataType::Decimal128(digits as u8, 0))
}

/// A floating-point literal (`1.5`, `.5`, `1e5`, `-2.5E-3`), or a spelling of NaN or
/// infinity Spark's CSV reader accepts.
fn is_double(v: &str, csv: &CsvFormat) -> bool {
    if v == csv.nan_value
        || matches!(
            v,
            "NaN" | "Infinity" | "+Infinity" | "-Infinity" | "Inf" | "-Inf"
        )
    {
        return true;
    }
    let b = v.strip_prefix(['-', '+']).unwrap_or(v).as_bytes();
    let (mantissa, exp) = match b.iter().position(|&c| c == b'e' || c == b'E') {
        Some(at) => (&b[..at], Some(&b[at + 1..])),
        None => (b, None),
    };
    let (int, frac) = match mantissa.iter().position(|&c| c == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &b""[..]),
    };
    let digits = |d: &[u8]| d.iter().all(u8::is_ascii_digit);
    let mantissa_ok = (!int.is_empty() || !frac.is_empty()) && digits(int) && digits(frac);
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(b"-").or(e.strip_prefix(b"+")).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exp_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TemporalFormats;

    fn infer(text: &str, csv: &CsvFormat) -> String {
        let fields = csv_fields(text.as_bytes(), csv, true);
        fields
            .iter()
            .map(|f| {
                let t = crate::types::canonical(f.data_type()).unwrap();
                format!("{} {}", f.name(), landfall_core::ddl::type_to_ddl(&t))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    #[test]
    fn null_tokens_are_skipped() {
        let csv = CsvFormat {
            null_value: Some("NA".into()),
            ..Default::default()
        };
        assert_eq!(
            infer("a,b,c\n1,NA,NA\nNA,2.5,\n3,1,NA\n", &csv),
            "a BIGINT, b DOUBLE, c STRING"
        );
    }

    #[test]
    fn zone_less_timestamps_are_timestamps_read_as_utc() {
        assert_eq!(
            infer(
                "t,z,d,mixed,partial,minutes\n\
                 2013-01-01 01:00:00,2013-01-01T01:00:00.123456Z,2013-01-01,2013-01-01,2013-01,2013-01-01T01:00\n\
                 2013-01-02T01:00:00,2013-01-01 01:00:00+02,2013-02-28,2013-01-01 02:00:00,2013-02,2013-01-01T02:00\n",
                &CsvFormat::default()
            ),
            "t TIMESTAMP, z TIMESTAMP, d DATE, mixed TIMESTAMP, partial STRING, minutes STRING"
        );
        assert_eq!(infer("d\n2013-02-30\n", &CsvFormat::default()), "d STRING");
    }

    #[test]
    fn numbers_booleans_and_their_merges() {
        assert_eq!(
            infer(
                "i,d,big,nan,b,s,ib,id\n1,1.5,12345678901234567890,NaN,true,x,1,1\n\
                 -2,2,1,1.5,FALSE,1,true,2013-01-01\n",
                &CsvFormat::default()
            ),
            "i BIGINT, d DOUBLE, big DECIMAL(20,0), nan DOUBLE, b BOOLEAN, s STRING, ib STRING, id STRING"
        );
        assert_eq!(
            infer(
                "a,b\n12345678901234567890,1e5\n1.5,Inf\n",
                &CsvFormat::default()
            ),
            "a DOUBLE, b DOUBLE"
        );
    }

    #[test]
    fn header_names_and_no_header() {
        assert_eq!(
            infer("a,a,b\n1,x,\"q\nuoted\"\n", &CsvFormat::default()),
            "a BIGINT, _c1 STRING, b STRING"
        );
        let csv = CsvFormat {
            header: false,
            ..Default::default()
        };
        assert_eq!(infer("1,x\n2,y,3\n", &csv), "_c0 BIGINT, _c1 STRING");
    }

    #[test]
    fn stream_formats_decide_dates_and_timestamps() {
        let csv = CsvFormat {
            temporal: TemporalFormats {
                timestamp: Some(crate::chrono_format("dd/MM/yyyy HH:mm").unwrap()),
                date: Some(crate::chrono_format("dd.MM.yyyy").unwrap()),
            },
            ..Default::default()
        };
        assert_eq!(
            infer("t,d\n30/11/2026 13:05,30.11.2026\n", &csv),
            "t TIMESTAMP, d DATE"
        );
    }
}
