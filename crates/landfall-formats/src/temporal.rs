//! `timestamp_format` and `date_format`: Spark datetime patterns (`yyyy-MM-dd HH:mm:ss`,
//! `dd/MM/yyyy`, `yyyy-MM-dd'T'HH:mm:ss.SSSXXX`) for reading text into TIMESTAMP and DATE
//! columns of csv and json.
//!
//! A pattern is translated once to a chrono format. Letters: `yyyy` `yy` year, `MM` `M` month,
//! `MMM` month name, `dd` `d` day, `HH` `H` hour, `hh` `h` 12-hour, `mm` minute, `ss` second,
//! `S`..`SSSSSSSSS` fraction, `a` AM/PM, `XXX` `xxx` `ZZZZZ` offset `+01:00`, `X` `x` `Z` offset
//! `+0100`, `'text'` literal, anything else literal. A timestamp without an offset is UTC (a
//! TIMESTAMP column) or as written (TIMESTAMP_NTZ). A value that does not match is one that
//! does not fit its column (rescued, or null and counted malformed); so is one the column
//! cannot hold whole: digits past the microsecond, or a time of day in a DATE (issue 16).

use crate::types::timestamp_type;
use arrow::array::{Array, ArrayRef, Date32Array, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, TimeUnit};
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime};
use std::sync::Arc;

/// The two patterns of a stream, translated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemporalFormats {
    pub timestamp: Option<String>,
    pub date: Option<String>,
}

pub use landfall_core::datetime_pattern::chrono_format;

/// Parse `strings` into `ty` (TIMESTAMP / TIMESTAMP_NTZ in microseconds, or DATE) with the
/// chrono `format`; the rows whose non-null value does not match are null and listed.
pub fn parse_with(
    strings: &StringArray,
    ty: &DataType,
    format: &str,
) -> Option<(ArrayRef, Vec<usize>)> {
    let mut lost = Vec::new();
    let n = strings.len();
    let value = |r: usize| (!strings.is_null(r)).then(|| strings.value(r).trim());
    match ty {
        DataType::Date32 => {
            let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).expect("a date");
            let mut out = Vec::with_capacity(n);
            for r in 0..n {
                out.push(value(r).and_then(|v| {
                    // A time of day does not fit a DATE: a misfit, not its date (chrono's date
                    // parser would ignore the time the pattern reads).
                    let d = match NaiveDateTime::parse_from_str(v, format) {
                        Ok(t) => (t.time() == NaiveTime::MIN).then_some(t.date()),
                        Err(_) => NaiveDate::parse_from_str(v, format).ok(),
                    };
                    if d.is_none() {
                        lost.push(r);
                    }
                    d.map(|d| (d - epoch).num_days() as i32)
                }));
            }
            Some((Arc::new(Date32Array::from(out)), lost))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let mut out = Vec::with_capacity(n);
            for r in 0..n {
                out.push(value(r).and_then(|v| {
                    // A value with an offset is an instant: into a zone-less column it
                    // would be shifted to UTC, so there it is a misfit (as in Spark).
                    let t = match DateTime::parse_from_str(v, format) {
                        Ok(t) => tz.is_some().then(|| t.naive_utc()),
                        Err(_) => NaiveDateTime::parse_from_str(v, format)
                            .or_else(|_| {
                                NaiveDate::parse_from_str(v, format)
                                    .map(|d| d.and_hms_opt(0, 0, 0).expect("midnight"))
                            })
                            .ok(),
                    }
                    // Digits past the microsecond do not fit: a misfit, not a cut value
                    // (told from the text too: chrono reads nine digits, drops the rest).
                    .filter(|t| {
                        t.and_utc().timestamp_subsec_nanos() % 1000 == 0
                            && !crate::exact::timestamp_text_changes(v, TimeUnit::Microsecond)
                    });
                    if t.is_none() {
                        lost.push(r);
                    }
                    t.map(|t| t.and_utc().timestamp_micros())
                }));
            }
            let arr = TimestampMicrosecondArray::from(out);
            Some((
                Arc::new(match tz {
                    Some(tz) => arr.with_timezone(tz.clone()),
                    None => arr,
                }),
                lost,
            ))
        }
        _ => None,
    }
}

impl TemporalFormats {
    /// The chrono format for a column of `ty`, when the stream has one.
    pub fn for_type(&self, ty: &DataType) -> Option<&str> {
        match ty {
            DataType::Date32 => self.date.as_deref(),
            DataType::Timestamp(TimeUnit::Microsecond, _) => self.timestamp.as_deref(),
            _ => None,
        }
    }
}

/// DATE or TIMESTAMP when `v` reads as one: by the stream's formats when it has them (as the
/// decoder then reads them), else ISO 8601 (`2013-01-01`; `2013-01-01 01:00:00`,
/// `2013-01-01T01:00:00.5Z`, `2013-01-01T01:00:00+02:00`, ...).
pub(crate) fn temporal_type(v: &str, formats: &TemporalFormats) -> Option<DataType> {
    let date = match &formats.date {
        Some(f) => NaiveDate::parse_from_str(v.trim(), f).is_ok(),
        None => iso_date(v).is_some_and(|rest| rest.is_empty()),
    };
    if date {
        return Some(DataType::Date32);
    }
    let timestamp = match &formats.timestamp {
        Some(f) => {
            let v = v.trim();
            DateTime::parse_from_str(v, f).is_ok()
                || NaiveDateTime::parse_from_str(v, f).is_ok()
                || NaiveDate::parse_from_str(v, f).is_ok()
        }
        None => iso_timestamp(v),
    };
    timestamp.then(timestamp_type)
}

/// A valid `yyyy-MM-dd` at the start of `v`: the rest of `v`.
fn iso_date(v: &str) -> Option<&str> {
    let (d, rest) = (v.get(..10)?, &v[10..]);
    let b = d.as_bytes();
    let shape = b.iter().enumerate().all(|(i, c)| match i {
        4 | 7 => *c == b'-',
        _ => c.is_ascii_digit(),
    });
    (shape && NaiveDate::parse_from_str(d, "%Y-%m-%d").is_ok()).then_some(rest)
}

/// `yyyy-MM-dd` then `T` or a space, `HH:mm:ss` and up to 9 fraction digits, then optionally
/// `Z` or an offset (`+02:00`, `+0200`, `+02`): the forms the decoder reads.
fn iso_timestamp(v: &str) -> bool {
    let Some(rest) = iso_date(v) else {
        return false;
    };
    let Some(rest) = rest.strip_prefix(['T', ' ']) else {
        return false;
    };
    let b = rest.as_bytes();
    let two = |i: usize| {
        b.get(i..i + 2)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    if !(two(0) && b.get(2) == Some(&b':') && two(3) && b.get(5) == Some(&b':') && two(6)) {
        return false;
    }
    let mut end = 8;
    if b.get(8) == Some(&b'.') {
        let n = b[9..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return false;
        }
        end = 9 + n;
    }
    if NaiveTime::parse_from_str(&rest[..8], "%H:%M:%S").is_err() {
        return false;
    }
    let zone = &rest[end..];
    let offset = |z: &str| {
        let z = z.as_bytes();
        let hh = z.len() >= 2 && z[..2].iter().all(u8::is_ascii_digit);
        let mm = match z.len() {
            2 => true,
            4 => z[2..].iter().all(u8::is_ascii_digit),
            5 => z[2] == b':' && z[3..].iter().all(u8::is_ascii_digit),
            _ => false,
        };
        hh && mm
    };
    zone.is_empty() || zone == "Z" || zone.strip_prefix(['+', '-']).is_some_and(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spark_patterns_translate_and_parse() {
        let s = StringArray::from(vec![
            Some("30/11/2026 13:05:01"),
            Some("nope"),
            None,
            Some("01/01/1970 00:00:00"),
        ]);
        let fmt = chrono_format("dd/MM/yyyy HH:mm:ss").unwrap();
        let ty = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let (a, lost) = parse_with(&s, &ty, &fmt).unwrap();
        assert_eq!(lost, [1]);
        let a = a
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(a.value(0), 1_796_043_901_000_000);
        assert!(a.is_null(2));
        assert_eq!(a.value(3), 0);
        let d = StringArray::from(vec![Some("30.11.2026"), Some("31.02.2026")]);
        let (a, lost) =
            parse_with(&d, &DataType::Date32, &chrono_format("dd.MM.yyyy").unwrap()).unwrap();
        assert_eq!(lost, [1]);
        let a = a.as_any().downcast_ref::<Date32Array>().unwrap();
        assert_eq!(a.value(0), 20_787);
    }

    /// Issue 16: a pattern reads a value whole or not at all: nanoseconds in a microsecond
    /// TIMESTAMP, or a time of day in a DATE, make the value a misfit, never a cut one.
    #[test]
    fn patterns_never_cut_digits_or_a_time_of_day() {
        let s = StringArray::from(vec![
            "30/11/2026 13:05:01.123456789",
            "30/11/2026 13:05:01.123456000",
        ]);
        let fmt = chrono_format("dd/MM/yyyy HH:mm:ss.SSSSSSSSS").unwrap();
        let ty = DataType::Timestamp(TimeUnit::Microsecond, None);
        let (a, lost) = parse_with(&s, &ty, &fmt).unwrap();
        assert_eq!(lost, [0]);
        assert!(a.is_null(0) && a.is_valid(1));
        let d = StringArray::from(vec!["30.11.2026 00:00", "30.11.2026 13:05"]);
        let fmt = chrono_format("dd.MM.yyyy HH:mm").unwrap();
        let (a, lost) = parse_with(&d, &DataType::Date32, &fmt).unwrap();
        assert_eq!(lost, [1]);
        assert_eq!(
            a.as_any().downcast_ref::<Date32Array>().unwrap().value(0),
            20_787
        );
    }
}
