//! Casts that would change a value are misfits: the value is rescued (or, without a rescued
//! column, the file fails naming the column), never written changed. An oracle of its own
//! (exact integers, decimals as mantissa and scale, floats formatted and parsed by the standard
//! library, timestamps in nanoseconds) judges every value that landed.

use super::*;
use crate::rescue::SchemaPolicy;
use arrow::array::{
    BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int8Array, Int16Array,
    Int32Array, Int64Array, TimestampMicrosecondArray, TimestampNanosecondArray, UInt8Array,
    UInt16Array, UInt32Array, UInt64Array,
};
use arrow::datatypes::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, TimestampMicrosecondType, TimestampNanosecondType, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_schema::{Schema, TimeUnit};
use chrono::{NaiveDate, NaiveDateTime};

const DAY_NANOS: i128 = 86_400_000_000_000;

/// A value as the oracle sees it.
#[derive(Debug, Clone, PartialEq)]
enum Exact {
    Int(i128),
    Bool(bool),
    /// The value, and whether it is an f32.
    Float(f64, bool),
    /// Mantissa and scale.
    Dec(i128, i8),
    Text(String),
    Day(i32),
    /// Nanoseconds since the epoch.
    Nanos(i128),
}

fn scalar(a: &ArrayRef, i: usize) -> Option<Exact> {
    if a.is_null(i) {
        return None;
    }
    Some(match a.data_type() {
        DataType::Boolean => Exact::Bool(a.as_boolean().value(i)),
        DataType::Int8 => Exact::Int(a.as_primitive::<Int8Type>().value(i).into()),
        DataType::Int16 => Exact::Int(a.as_primitive::<Int16Type>().value(i).into()),
        DataType::Int32 => Exact::Int(a.as_primitive::<Int32Type>().value(i).into()),
        DataType::Int64 => Exact::Int(a.as_primitive::<Int64Type>().value(i).into()),
        DataType::UInt8 => Exact::Int(a.as_primitive::<UInt8Type>().value(i).into()),
        DataType::UInt16 => Exact::Int(a.as_primitive::<UInt16Type>().value(i).into()),
        DataType::UInt32 => Exact::Int(a.as_primitive::<UInt32Type>().value(i).into()),
        DataType::UInt64 => Exact::Int(a.as_primitive::<UInt64Type>().value(i).into()),
        DataType::Float32 => Exact::Float(a.as_primitive::<Float32Type>().value(i).into(), true),
        DataType::Float64 => Exact::Float(a.as_primitive::<Float64Type>().value(i), false),
        DataType::Decimal128(_, s) => Exact::Dec(a.as_primitive::<Decimal128Type>().value(i), *s),
        DataType::Utf8 => Exact::Text(a.as_string::<i32>().value(i).to_string()),
        DataType::Date32 => Exact::Day(a.as_primitive::<Date32Type>().value(i)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Exact::Nanos(a.as_primitive::<TimestampMicrosecondType>().value(i) as i128 * 1000)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            Exact::Nanos(a.as_primitive::<TimestampNanosecondType>().value(i).into())
        }
        t => panic!("no oracle for {t}"),
    })
}

fn pow10(s: u32) -> i128 {
    10i128.pow(s)
}

/// `v * 10^-s` and `w * 10^-t` are the same number.
pub(crate) fn same_decimal(v: i128, s: i32, w: i128, t: i32) -> bool {
    let (v, w) = if s < t {
        (v.checked_mul(pow10((t - s) as u32)), Some(w))
    } else {
        (Some(v), w.checked_mul(pow10((s - t) as u32)))
    };
    matches!((v, w), (Some(v), Some(w)) if v == w)
}

/// An integer literal (sign, digits, surrounding blanks), as an exact number.
fn text_int(t: &str) -> Option<i128> {
    let t = t.trim();
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// A decimal literal (`-12.50`, `1.5e3`) as mantissa and scale (the scale may be negative).
pub(crate) fn text_decimal(t: &str) -> Option<(i128, i32)> {
    let t = t.trim();
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(at) => (&t[..at], t[at + 1..].parse::<i32>().ok()?),
        None => (t, 0),
    };
    let (neg, m) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa.strip_prefix('+').unwrap_or(mantissa)),
    };
    let (int, frac) = m.split_once('.').unwrap_or((m, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 38 {
        return None;
    }
    let v: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    Some((if neg { -v } else { v }, frac.len() as i32 - exp))
}

/// A float literal's value, and whether reading it kept it in range (no overflow to infinity,
/// no non-zero read as zero).
pub(crate) fn text_float(t: &str, f32: bool) -> Option<(f64, bool)> {
    let t = t.trim();
    let v: f64 = if f32 {
        t.parse::<f32>().ok()?.into()
    } else {
        t.parse().ok()?
    };
    let word = t.trim_start_matches(['-', '+']).to_ascii_lowercase();
    let explicit = word == "inf" || word == "infinity" || word == "nan";
    let mantissa = t.split(['e', 'E']).next().unwrap_or("");
    let nonzero = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    let in_range = explicit || (v.is_finite() && (v != 0.0 || !nonzero));
    Some((v, in_range))
}

fn text_nanos(t: &str) -> Option<i128> {
    let t = t.trim();
    // Digits past the ninth are not nanoseconds: such text has no exact value here.
    if let Some((_, frac)) = t.get(10..).and_then(|x| x.split_once('.')) {
        let digits: String = frac.chars().take_while(char::is_ascii_digit).collect();
        if digits.bytes().skip(9).any(|b| b != b'0') {
            return None;
        }
    }
    let nanos = |d: chrono::DateTime<chrono::Utc>| {
        Some(i128::from(d.timestamp()) * 1_000_000_000 + i128::from(d.timestamp_subsec_nanos()))
    };
    if let Ok(d) = chrono::DateTime::parse_from_rfc3339(t) {
        return nanos(d.to_utc());
    }
    for f in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(d) = NaiveDateTime::parse_from_str(t, f) {
            return nanos(d.and_utc());
        }
    }
    let d = NaiveDate::parse_from_str(t, "%Y-%m-%d").ok()?;
    let days = (d - NaiveDate::from_ymd_opt(1970, 1, 1)?).num_days();
    Some(days as i128 * DAY_NANOS)
}

/// Whether `dst`, a cast of `src`, is the same value.
fn same(src: &Exact, dst: &Exact) -> bool {
    use Exact::*;
    match (src, dst) {
        (Text(t), Text(u)) => t == u,
        (Text(t), Int(b)) => text_int(t) == Some(*b),
        // Spark's words only (arrow alone would take `yes`, `on`, `1`...).
        (Text(t), Bool(b)) => t
            .trim()
            .eq_ignore_ascii_case(if *b { "true" } else { "false" }),
        (Text(t), Dec(v, s)) => {
            text_decimal(t).is_some_and(|(w, u)| same_decimal(w, u, *v, i32::from(*s)))
        }
        (Text(t), Float(y, f32)) => text_float(t, *f32)
            .is_some_and(|(v, in_range)| in_range && (v == *y || (v.is_nan() && y.is_nan()))),
        (Text(t), Day(d)) => text_nanos(t) == Some(*d as i128 * DAY_NANOS),
        (Text(t), Nanos(n)) => text_nanos(t) == Some(*n),
        // A value shown as text is read back as its own type.
        (Bool(b), Text(t)) => t == if *b { "true" } else { "false" },
        (Int(a), Text(t)) => text_int(t) == Some(*a),
        (Float(x, f32), Text(t)) => {
            text_float(t, *f32).is_some_and(|(v, _)| v == *x || (v.is_nan() && x.is_nan()))
        }
        (Dec(v, s), Text(t)) => {
            text_decimal(t).is_some_and(|(w, u)| same_decimal(w, u, *v, i32::from(*s)))
        }
        (Day(d), Text(t)) => text_nanos(t) == Some(*d as i128 * DAY_NANOS),
        (Nanos(n), Text(t)) => text_nanos(t) == Some(*n),
        (Bool(a), x) => same(&Int(i128::from(*a)), x),
        (x, Bool(b)) => same(x, &Int(i128::from(*b))),
        (Int(a), Int(b)) => a == b,
        (Int(a), Float(y, _)) | (Float(y, _), Int(a)) => {
            y.is_finite() && y.fract() == 0.0 && y.abs() < 1e38 && *y as i128 == *a
        }
        (Float(x, _), Float(y, _)) => x == y || (x.is_nan() && y.is_nan()),
        (Int(a), Dec(v, s)) | (Dec(v, s), Int(a)) => same_decimal(*a, 0, *v, i32::from(*s)),
        (Dec(v, s), Dec(w, t)) => same_decimal(*v, i32::from(*s), *w, i32::from(*t)),
        // A float in a decimal: the decimal reads back as the same float.
        (Float(x, f32), Dec(v, s)) => {
            let text = format!("{v}e-{s}");
            let back: f64 = if *f32 {
                text.parse::<f32>().unwrap().into()
            } else {
                text.parse().unwrap()
            };
            x.is_finite() && back == *x
        }
        // A decimal in a float: the float, at the decimal's scale, is the decimal.
        (Dec(v, s), Float(y, _)) => {
            y.is_finite()
                && text_decimal(&format!("{:.*}", *s as usize, y))
                    .is_some_and(|(w, u)| same_decimal(w, u, *v, i32::from(*s)))
        }
        (Day(a), Day(b)) => a == b,
        (Day(a), Nanos(n)) | (Nanos(n), Day(a)) => *a as i128 * DAY_NANOS == *n,
        (Nanos(a), Nanos(b)) => a == b,
        _ => false,
    }
}

/// xorshift: reproducible without a dependency.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// An index below `n`.
    pub(crate) fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    pub(crate) fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }

    /// A signed integer of a random number of bits, so small and large values both come up.
    pub(crate) fn int(&mut self) -> i64 {
        let bits = self.below(64) as u32;
        let v = (self.next() >> (63 - bits.min(62))) as i64;
        if self.below(2) == 0 {
            v
        } else {
            v.wrapping_neg()
        }
    }
}

fn ts_tz() -> Option<Arc<str>> {
    // The formats crate alone builds arrow without chrono-tz: an offset, not "UTC".
    Some("+00:00".into())
}

fn source_types() -> Vec<DataType> {
    vec![
        DataType::Boolean,
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
        DataType::Decimal128(38, 10),
        DataType::Decimal128(5, 0),
        DataType::Utf8,
        DataType::Date32,
        DataType::Timestamp(TimeUnit::Microsecond, ts_tz()),
        DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Timestamp(TimeUnit::Nanosecond, None),
    ]
}

/// The types a Delta table's column can have (the conform targets).
fn target_types() -> Vec<DataType> {
    vec![
        DataType::Boolean,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::Float32,
        DataType::Float64,
        DataType::Decimal128(10, 2),
        DataType::Decimal128(38, 10),
        DataType::Decimal128(5, 0),
        DataType::Decimal128(4, 4),
        DataType::Utf8,
        DataType::Date32,
        DataType::Timestamp(TimeUnit::Microsecond, ts_tz()),
        DataType::Timestamp(TimeUnit::Microsecond, None),
    ]
}

const SPECIAL_F64: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    2.0,
    0.5,
    0.1,
    3.7,
    3.0,
    -3.7,
    12.345,
    127.0,
    128.0,
    255.0,
    1e300,
    -1e300,
    3.4e38,
    1e-50,
    9_007_199_254_740_993.0,
    9.223_372_036_854_776e18,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::MIN_POSITIVE,
];

fn random_f64(r: &mut Rng) -> f64 {
    match r.below(5) {
        0 => r.pick(SPECIAL_F64),
        1 => f64::from_bits(r.next()),
        2 => r.int() as f64,
        3 => (r.int() % 1_000_000) as f64 / 100.0,
        _ => (r.int() % 1_000_000) as f64 / (1u64 << r.below(20)) as f64,
    }
}

fn random_decimal(r: &mut Rng, p: u8, s: i8) -> i128 {
    let digits = r.below(u64::from(p) + 1) as u32;
    let v = (i128::from(r.next()) << 64 | i128::from(r.next())) % pow10(digits).max(1);
    // Some values end in zeros, so they fit a smaller scale.
    let v = if r.below(3) == 0 {
        v / pow10(u32::from(s.unsigned_abs()).min(digits))
            * pow10(u32::from(s.unsigned_abs()).min(digits))
    } else {
        v
    };
    if r.below(2) == 0 { v } else { -v }
}

/// Days between year 1000 and 9999, sometimes near the epoch.
fn random_day(r: &mut Rng) -> i32 {
    if r.below(4) == 0 {
        r.below(200) as i32 - 100
    } else {
        r.below(3_287_181) as i32 - 354_285
    }
}

fn random_time_nanos(r: &mut Rng) -> i128 {
    match r.below(4) {
        0 => 0,
        1 => i128::from(r.below(86_400)) * 1_000_000_000,
        2 => i128::from(r.below(86_400_000_000)) * 1000,
        _ => i128::from(r.below(86_400_000_000_000)),
    }
}

fn random_text(r: &mut Rng) -> String {
    let day = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()
        + chrono::Duration::days(i64::from(random_day(r)));
    match r.below(12) {
        0 => r.int().to_string(),
        1 if r.below(2) == 0 => format!("{}", 9_007_199_254_740_993i64 + r.below(9) as i64),
        1 => format!(" {:03} ", r.below(1000)),
        2 => format!(
            "{}.{:0w$}",
            r.int() % 100_000,
            r.below(1000),
            w = r.below(4) as usize
        ),
        3 => format!("{}e{}", r.int() % 1000, r.below(90) as i64 - 45),
        4 => format!("{}", random_f64(r)),
        5 => r
            .pick(&[
                "inf",
                "-Infinity",
                "NaN",
                "1e39",
                "1e-50",
                "1e400",
                "-0",
                "0.0",
            ])
            .into(),
        6 => day.format("%Y-%m-%d").to_string(),
        7 => {
            let t = day.and_hms_opt(0, 0, 0).unwrap()
                + chrono::Duration::nanoseconds(random_time_nanos(r) as i64);
            let digits = r.pick(&["", "%.3f", "%.6f", "%.9f", "%.f"]);
            let sep = r.pick(&["T", " "]);
            t.format(&format!("%Y-%m-%d{sep}%H:%M:%S{digits}"))
                .to_string()
        }
        8 => format!(
            "{}T12:00:00{}",
            day.format("%Y-%m-%d"),
            r.pick(&["Z", "+05:00", "-08:00", ".1234560001", ".1234567890000"])
        ),
        9 => r
            .pick(&[
                "true", "false", "TRUE", " false ", "yes", "0", "1", "on", "t", "of",
            ])
            .into(),
        10 => r.pick(&["abc", "", " ", "12abc", "--1", "1.2.3"]).into(),
        _ => (r.next() % 100_000).to_string(),
    }
}

fn random_array(r: &mut Rng, ty: &DataType, n: usize) -> ArrayRef {
    let a = random_values(r, ty, n);
    arrow::compute::nullif(
        &a,
        &BooleanArray::from((0..n).map(|_| r.below(8) == 0).collect::<Vec<bool>>()),
    )
    .unwrap()
}

fn random_values(r: &mut Rng, ty: &DataType, n: usize) -> ArrayRef {
    macro_rules! ints {
        ($arr:ty, $t:ty) => {{
            let vals: Vec<Option<$t>> = (0..n)
                .map(|_| {
                    let v = match r.below(4) {
                        0 => r.pick(&[0, 1, 2, -1, <$t>::MIN as i64, <$t>::MAX as i64]) as $t,
                        _ => r.int() as $t,
                    };
                    Some(v)
                })
                .collect();
            Arc::new(<$arr>::from(vals)) as ArrayRef
        }};
    }
    match ty {
        DataType::Boolean => {
            let vals: Vec<Option<bool>> = (0..n).map(|_| Some(r.below(2) == 0)).collect();
            Arc::new(BooleanArray::from(vals))
        }
        DataType::Int8 => ints!(Int8Array, i8),
        DataType::Int16 => ints!(Int16Array, i16),
        DataType::Int32 => ints!(Int32Array, i32),
        DataType::Int64 => ints!(Int64Array, i64),
        DataType::UInt8 => ints!(UInt8Array, u8),
        DataType::UInt16 => ints!(UInt16Array, u16),
        DataType::UInt32 => ints!(UInt32Array, u32),
        DataType::UInt64 => ints!(UInt64Array, u64),
        DataType::Float32 => {
            let vals: Vec<Option<f32>> = (0..n)
                .map(|_| {
                    let v = if r.below(4) == 0 {
                        f32::from_bits(r.next() as u32)
                    } else {
                        random_f64(r) as f32
                    };
                    Some(v)
                })
                .collect();
            Arc::new(Float32Array::from(vals))
        }
        DataType::Float64 => {
            let vals: Vec<Option<f64>> = (0..n).map(|_| Some(random_f64(r))).collect();
            Arc::new(Float64Array::from(vals))
        }
        DataType::Decimal128(p, s) => {
            let vals: Vec<Option<i128>> = (0..n).map(|_| Some(random_decimal(r, *p, *s))).collect();
            Arc::new(
                Decimal128Array::from(vals)
                    .with_precision_and_scale(*p, *s)
                    .unwrap(),
            )
        }
        DataType::Utf8 => {
            let vals: Vec<Option<String>> = (0..n).map(|_| Some(random_text(r))).collect();
            Arc::new(StringArray::from(vals))
        }
        DataType::Date32 => {
            let vals: Vec<Option<i32>> = (0..n).map(|_| Some(random_day(r))).collect();
            Arc::new(Date32Array::from(vals))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let vals: Vec<Option<i64>> = (0..n)
                .map(|_| {
                    let t = i128::from(random_day(r)) * DAY_NANOS + random_time_nanos(r);
                    Some((t / 1000) as i64)
                })
                .collect();
            Arc::new(TimestampMicrosecondArray::from(vals).with_timezone_opt(tz.clone()))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
            // Nanoseconds reach only 1677-2262.
            let vals: Vec<Option<i64>> = (0..n)
                .map(|_| {
                    let day = r.below(200_000) as i128 - 100_000;
                    Some((day * DAY_NANOS + random_time_nanos(r)) as i64)
                })
                .collect();
            Arc::new(TimestampNanosecondArray::from(vals).with_timezone_opt(tz.clone()))
        }
        t => panic!("no generator for {t}"),
    }
}

/// Every value a permissive cast keeps is the value it was; the others are listed as lost
/// (and null), over every source and target type pair the conform path can meet.
#[test]
fn permissive_casts_keep_values_exactly_or_list_them_as_lost() {
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    // Values that landed and were lost, per pair: the property must not hold vacuously.
    let mut tally: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for round in 0..24 {
        for src_ty in source_types() {
            let src = random_array(&mut r, &src_ty, 48);
            for dst_ty in target_types() {
                let field = Field::new("c", dst_ty.clone(), true);
                let Ok((cast, lost)) = cast_permissive("p", "c", &src, &field) else {
                    continue;
                };
                assert_eq!(cast.data_type(), &dst_ty);
                for i in 0..src.len() {
                    let ctx = || format!("round {round}: {src_ty} -> {dst_ty}, row {i}");
                    let Some(before) = scalar(&src, i) else {
                        assert!(cast.is_null(i), "{}", ctx());
                        continue;
                    };
                    let t = tally.entry(format!("{src_ty} -> {dst_ty}")).or_default();
                    if lost.contains(&i) {
                        assert!(cast.is_null(i), "{}: lost but not null", ctx());
                        t.1 += 1;
                        continue;
                    }
                    t.0 += 1;
                    let after = scalar(&cast, i)
                        .unwrap_or_else(|| panic!("{}: {before:?} became null unlisted", ctx()));
                    // Text naming a zone is an instant: no zone-less TIMESTAMP_NTZ holds it.
                    if let (Exact::Text(t), DataType::Timestamp(_, None)) = (&before, &dst_ty) {
                        assert!(
                            chrono::DateTime::parse_from_rfc3339(t.trim()).is_err(),
                            "{}: {t:?} landed in a zone-less column",
                            ctx()
                        );
                    }
                    assert!(
                        same(&before, &after),
                        "{}: {before:?} changed into {after:?}",
                        ctx()
                    );
                }
            }
        }
    }
    if std::env::var_os("LANDFALL_SHOW_TALLY").is_some() {
        for (pair, (landed, lost)) in &tally {
            println!("{pair}: {landed} landed, {lost} lost");
        }
    }
    let landed: usize = tally.values().map(|t| t.0).sum();
    let lost: usize = tally.values().map(|t| t.1).sum();
    assert!(tally.len() > 150, "{} pairs cast", tally.len());
    assert!(
        landed > lost / 2 && lost > 10_000,
        "{landed} landed, {lost} lost"
    );
}

fn one(src: ArrayRef, ty: DataType) -> (ArrayRef, Vec<usize>) {
    cast_permissive("p", "c", &src, &Field::new("c", ty, true)).unwrap()
}

/// The lossy casts of issue 16, one by one: each value is lost (rescued), never changed; the
/// values that fit exactly still land.
#[test]
fn lossy_casts_are_lost_and_exact_ones_land() {
    let f64s: ArrayRef = Arc::new(Float64Array::from(vec![
        Some(3.7),
        Some(3.0),
        Some(-0.0),
        None,
        Some(-2.5),
    ]));
    let (cast, lost) = one(f64s.clone(), DataType::Int64);
    assert_eq!(lost, [0, 4], "fractions do not fit a BIGINT");
    assert_eq!(cast.as_primitive::<Int64Type>().value(1), 3);
    assert_eq!(cast.as_primitive::<Int64Type>().value(2), 0);

    let wide: ArrayRef = Arc::new(Float64Array::from(vec![1e300, 0.1, 0.5, f64::NAN, -0.0]));
    let (cast, lost) = one(wide, DataType::Float32);
    assert_eq!(
        lost,
        [0, 1],
        "1e300 is no FLOAT; 0.1 as a FLOAT is another number"
    );
    let f = cast.as_primitive::<Float32Type>();
    assert_eq!((f.value(2), f.value(3).is_nan()), (0.5, true));
    assert!(f.value(4) == 0.0 && f.value(4).is_sign_negative());

    let ints: ArrayRef = Arc::new(Int64Array::from(vec![0, 1, 2, -1]));
    let (cast, lost) = one(ints, DataType::Boolean);
    assert_eq!(lost, [2, 3], "only 0 and 1 are booleans");
    assert!(cast.as_boolean().value(1) && !cast.as_boolean().value(0));

    let noon = 19_000i64 * 86_400_000_000 + 43_200_000_000;
    let ts: ArrayRef = Arc::new(
        TimestampMicrosecondArray::from(vec![19_000 * 86_400_000_000, noon])
            .with_timezone_opt(ts_tz()),
    );
    let (cast, lost) = one(ts, DataType::Date32);
    assert_eq!(lost, [1], "a time of day does not fit a DATE");
    assert_eq!(cast.as_primitive::<Date32Type>().value(0), 19_000);

    let ns: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![
        1_000_001_000,
        1_000_000_001,
    ]));
    let (cast, lost) = one(ns, DataType::Timestamp(TimeUnit::Microsecond, None));
    assert_eq!(lost, [1], "sub-microsecond digits do not fit a TIMESTAMP");
    assert_eq!(
        cast.as_primitive::<TimestampMicrosecondType>().value(0),
        1_000_001
    );

    let dec: ArrayRef = Arc::new(
        Decimal128Array::from(vec![370, 300, -1250])
            .with_precision_and_scale(10, 2)
            .unwrap(),
    );
    let (cast, lost) = one(dec, DataType::Int32);
    assert_eq!(lost, [0, 2], "3.70 and -12.50 are not integers");
    assert_eq!(cast.as_primitive::<Int32Type>().value(1), 3);

    let big: ArrayRef = Arc::new(Int64Array::from(vec![9_007_199_254_740_993, 1 << 53]));
    let (_, lost) = one(big, DataType::Float64);
    assert_eq!(lost, [0], "2^53 + 1 is no DOUBLE");
}

/// Text is read by its meaning, not compared as text (`007` is 7, exactly); what a reading
/// would change is lost: a float out of range, a time of day in a DATE, digits past the
/// microsecond.
#[test]
fn text_is_read_by_meaning_and_what_would_change_is_lost() {
    let text = |v: &[&str]| -> ArrayRef { Arc::new(StringArray::from(v.to_vec())) };
    let (cast, lost) = one(text(&["007", " 7 ", "3.7", "1e3"]), DataType::Int64);
    assert_eq!(lost, [2, 3]);
    assert_eq!(cast.as_primitive::<Int64Type>().value(0), 7);

    let floats = text(&["0.1", "1e39", "1e-50", "inf", "0.0", "-1.5e3", "3.4e38"]);
    let (cast, lost) = one(floats, DataType::Float32);
    assert_eq!(
        lost,
        [1, 2],
        "overflow and underflow change the value; 0.1 is read as FLOAT"
    );
    assert!(cast.as_primitive::<Float32Type>().value(3).is_infinite());
    let (_, lost) = one(text(&["1e400", "1e308", "-1e-400"]), DataType::Float64);
    assert_eq!(lost, [0, 2]);

    let dates = text(&["2024-01-02", "2024-01-02T03:04:05", "2024-01-02 00:00:00"]);
    let (cast, lost) = one(dates, DataType::Date32);
    assert_eq!(lost, [1], "a time of day does not fit a DATE");
    assert_eq!(cast.as_primitive::<Date32Type>().value(2), 19_724);

    let times = text(&[
        "2024-01-02T03:04:05.123456",
        "2024-01-02T03:04:05.1234567",
        "2024-01-02T03:04:05.123456000",
        "2024-01-02T03:04:05.123456789Z",
    ]);
    let (cast, lost) = one(times, DataType::Timestamp(TimeUnit::Microsecond, ts_tz()));
    assert_eq!(lost, [1, 3], "digits past the microsecond");
    let t = cast.as_primitive::<TimestampMicrosecondType>();
    assert_eq!(t.value(0), t.value(2));
}

/// Through the conformer (Parquet, ORC and Avro conform this way): a value that would change is
/// rescued, with its own value; without a rescued column the file fails naming the column.
#[test]
fn the_conformer_rescues_changed_values_and_plain_conform_refuses_them() {
    let src = Arc::new(Schema::new(vec![
        Field::new("v", DataType::Float64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("on", DataType::Int32, true),
    ]));
    let batch = RecordBatch::try_new(
        src,
        vec![
            Arc::new(Float64Array::from(vec![3.7, 4.0])),
            Arc::new(Float64Array::from(vec![0.25, 1e300])),
            Arc::new(Int32Array::from(vec![2, 1])),
        ],
    )
    .unwrap();
    let target = Arc::new(Schema::new(vec![
        Field::new("v", DataType::Int64, true),
        Field::new("f", DataType::Float32, true),
        Field::new("on", DataType::Boolean, true),
        Field::new("_rescued_data", DataType::Utf8, true),
    ]));
    let policy = SchemaPolicy {
        rescued_column: Some("_rescued_data".into()),
        ..Default::default()
    };
    let mut c = Conformer::new("t.parquet", target.clone(), policy);
    let out = c.conform(batch.clone()).unwrap();
    let v = out.column(0).as_primitive::<Int64Type>();
    assert!(v.is_null(0));
    assert_eq!(v.value(1), 4);
    assert!(out.column(1).is_null(1) && out.column(2).is_null(0));
    let rescued = out.column(3).as_string::<i32>();
    let r0: serde_json::Value = serde_json::from_str(rescued.value(0)).unwrap();
    assert_eq!((r0["v"].as_f64(), r0["on"].as_i64()), (Some(3.7), Some(2)));
    let r1: serde_json::Value = serde_json::from_str(rescued.value(1)).unwrap();
    assert_eq!(r1["f"].as_f64(), Some(1e300));
    assert_eq!(c.rescued_rows, 2);

    let plain = Arc::new(Schema::new(target.fields()[..1].to_vec()));
    let one_col = batch.project(&[0]).unwrap();
    let err = crate::conform("t.parquet", one_col, &plain).unwrap_err();
    assert!(
        err.to_string().contains("`v`") && err.to_string().contains("row 0"),
        "{err}"
    );
}

/// A list is one value: an element that would change makes the list a misfit.
#[test]
fn lists_whose_elements_would_change_are_lost() {
    use arrow::array::ListArray;
    let list = ListArray::from_iter_primitive::<Float64Type, _, _>(vec![
        Some(vec![Some(1.0), Some(2.0)]),
        Some(vec![Some(1.0), Some(2.5)]),
        None,
        Some(vec![]),
    ]);
    let src: ArrayRef = Arc::new(list);
    let item = Arc::new(Field::new_list_field(DataType::Int64, true));
    let (cast, lost) = one(src, DataType::List(item));
    assert_eq!(lost, [1]);
    assert!(cast.is_valid(0) && cast.is_valid(3));
}

/// A map is one value: a key or value that would change makes the map a misfit.
#[test]
fn maps_whose_values_would_change_are_lost() {
    use arrow::array::{MapBuilder, StringBuilder};
    let mut b = MapBuilder::new(
        None,
        StringBuilder::new(),
        arrow::array::Float64Builder::new(),
    );
    for entries in [
        vec![("a", 1.0), ("b", 2.0)],
        vec![("a", 3.7)],
        vec![("c", 1e300)],
        vec![],
    ] {
        for (k, v) in entries {
            b.keys().append_value(k);
            b.values().append_value(v);
        }
        b.append(true).unwrap();
    }
    let src: ArrayRef = Arc::new(b.finish());
    let DataType::Map(entries, sorted) = src.data_type().clone() else {
        unreachable!()
    };
    let DataType::Struct(kv) = entries.data_type() else {
        unreachable!()
    };
    let to = |value: DataType| {
        DataType::Map(
            Arc::new(Field::new(
                entries.name(),
                DataType::Struct(
                    vec![
                        kv[0].as_ref().clone(),
                        kv[1].as_ref().clone().with_data_type(value),
                    ]
                    .into(),
                ),
                false,
            )),
            sorted,
        )
    };
    let (cast, lost) = one(src.clone(), to(DataType::Int64));
    assert_eq!(lost, [1, 2], "3.7 and 1e300 are no BIGINT");
    assert!(cast.is_valid(0) && cast.is_valid(3));
    let (cast, lost) = one(src, to(DataType::Float32));
    assert_eq!(lost, [1, 2], "3.7 and 1e300 are no FLOAT");
    assert!(cast.is_valid(0), "1.0 and 2.0 are");
}

/// A struct inside a list keeps its members by name: one dropped, added or renamed on the way
/// makes the list a misfit (arrow would drop it, or match members by position).
#[test]
fn structs_in_lists_keep_their_members_or_are_lost() {
    use arrow::array::{ListArray, StructArray};
    use arrow::buffer::OffsetBuffer;
    let member = |n: &str| Field::new(n, DataType::Int64, true);
    let structs = |names: &[&str]| -> ArrayRef {
        let fields: Vec<Field> = names.iter().map(|n| member(n)).collect();
        let cols: Vec<ArrayRef> = names
            .iter()
            .map(|_| Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef)
            .collect();
        let s = StructArray::new(fields.clone().into(), cols, None);
        let item = Arc::new(Field::new_list_field(s.data_type().clone(), true));
        Arc::new(ListArray::new(
            item,
            OffsetBuffer::from_lengths([2]),
            Arc::new(s),
            None,
        ))
    };
    let list_of = |names: &[&str]| {
        let fields: Vec<Field> = names.iter().map(|n| member(n)).collect();
        DataType::List(Arc::new(Field::new_list_field(
            DataType::Struct(fields.into()),
            true,
        )))
    };
    // Same members in another order: kept, by name.
    let (cast, lost) = one(structs(&["a", "b"]), list_of(&["b", "a"]));
    assert!(lost.is_empty() && cast.is_valid(0));
    // Names that differ only in case, in place: kept, by position.
    let (cast, lost) = one(structs(&["Id", "Name"]), list_of(&["id", "name"]));
    assert!(lost.is_empty() && cast.is_valid(0));
    // A member dropped, renamed, or moved with another case: lost.
    for target in [&["a"][..], &["x", "b"][..], &["B", "A"][..]] {
        let (_, lost) = one(structs(&["a", "b"]), list_of(target));
        assert_eq!(lost, [0], "{target:?}");
    }
    // A member the source lacks: arrow refuses the cast (the caller then rescues or refuses
    // the file), or it is lost, never filled silently.
    if let Ok((_, lost)) = cast_permissive(
        "p",
        "c",
        &structs(&["a", "b"]),
        &Field::new("c", list_of(&["a", "b", "c"]), true),
    ) {
        assert_eq!(lost, [0]);
    }
}

/// Text Spark would not read as the column's value: BOOLEAN words other than true and false,
/// an offset or a zone into a TIMESTAMP_NTZ, digits past the ninth.
#[test]
fn text_that_spark_refuses_is_lost() {
    let text = |v: &[&str]| -> ArrayRef { Arc::new(StringArray::from(v.to_vec())) };
    let (cast, lost) = one(
        text(&["true", " FALSE ", "1", "yes", "of", "t"]),
        DataType::Boolean,
    );
    assert_eq!(lost, [2, 3, 4, 5]);
    assert!(cast.as_boolean().value(0) && !cast.as_boolean().value(1));
    let times = text(&[
        "2024-01-01T00:00:00",
        "2024-01-01T00:00:00+05:00",
        "2024-01-01T00:00:00Z",
        "2024-01-01 00:00:00.1234560001",
    ]);
    let (_, lost) = one(
        times.clone(),
        DataType::Timestamp(TimeUnit::Microsecond, None),
    );
    assert_eq!(lost, [1, 2, 3]);
    for zoneless in [
        "2024-01-01",
        "2024-01-01T00:00:00.5",
        "-0044-03-15 12:00:00",
        "12024-01-01T00:00:00",
    ] {
        assert!(!crate::exact::has_zone(zoneless), "{zoneless}");
    }
    for zoned in [
        "2024-01-01 04:05:06 America/New_York",
        "2024-01-01T00:00:00 UTC",
        "2024-01-01T00:00:00-0800",
    ] {
        assert!(crate::exact::has_zone(zoned), "{zoned}");
    }
    let (_, lost) = one(times, DataType::Timestamp(TimeUnit::Microsecond, ts_tz()));
    assert_eq!(lost, [3], "with a zone the column holds the instant");
    // Text with digits a float cannot hold is its nearest float, as Spark reads it.
    let (_, lost) = one(text(&["9007199254740993", "16777217.0"]), DataType::Float64);
    assert!(lost.is_empty());
}
