//! `json.prefers_decimal` (Spark's `prefersDecimal`): JSON numbers with a fraction or an
//! exponent are inferred as DECIMAL instead of DOUBLE when every value of the column fits one.
//!
//! Spark's rules: a literal is a `BigDecimal` of precision `p` and scale `s` (`12.50` is
//! (4, 2), `0.001` is (1, 3), `1e3` is (1, -3)) and infers `DECIMAL(max(p, s), s)`; two
//! decimals merge to `DECIMAL(max integer digits + max scale, max scale)`; an integer merged
//! into a decimal counts as `DECIMAL(20, 0)` (a BIGINT's digits); when the result needs more
//! than 38 digits the column stays DOUBLE. A negative scale (an exponent beyond the digits) is
//! widened to scale 0, since Delta has no negative scales.
//!
//! arrow-json's inference types the structure; this module reads the sample's number literals
//! as written (never through `f64`, which loses `12.50`'s trailing zero and long mantissas) and
//! turns the DOUBLE leaves whose literals all fit into decimals. The decoder then reads the
//! literals' digits straight into DECIMAL columns.

use arrow_schema::{DataType, Field, Fields};
use std::collections::HashMap;
use std::sync::Arc;

/// Spark's and Delta's largest decimal precision.
const MAX_PRECISION: u32 = 38;
/// A BIGINT as a decimal (`DecimalType.forType(LongType)`).
const LONG_DIGITS: u32 = 20;
/// Nesting beyond this is not scanned (the decoder reports such records itself).
const MAX_DEPTH: usize = 256;

/// The digits seen at one path of the sample.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Digits {
    /// Most integer digits of a fractional literal.
    int: u32,
    /// Largest scale of a fractional literal.
    scale: u32,
    /// A fractional literal too wide for any decimal.
    too_wide: bool,
    /// An integer literal was seen too.
    ints: bool,
    /// Most significant digits of an integer literal.
    int_literal: u32,
}

/// Number literals by JSON path (object keys; array elements share their array's path).
#[derive(Debug, Default, Clone)]
pub struct DecimalStats {
    paths: HashMap<Vec<String>, Digits>,
}

impl DecimalStats {
    /// Read the number literals of NDJSON `text` (one or more JSON values, any whitespace
    /// between them). A value that is not valid JSON stops the scan of its line only.
    pub fn scan(&mut self, text: &[u8]) {
        walk(text, &mut |path, lit| {
            if let Literal::Number(n) = lit {
                self.note(path, n);
            }
        });
    }

    fn note(&mut self, path: &[String], literal: &[u8]) {
        let d = self.paths.entry(path.to_vec()).or_default();
        match decimal_of(literal) {
            None => {
                d.ints = true;
                d.int_literal = d.int_literal.max(integer_digits(literal));
            }
            Some(Some((p, s))) => {
                d.int = d.int.max(p - s);
                d.scale = d.scale.max(s);
            }
            Some(None) => d.too_wide = true,
        }
    }

    /// The DECIMAL a DOUBLE column at `path` becomes, if its literals all fit one.
    fn decimal_at(&self, path: &[String]) -> Option<DataType> {
        let d = self.paths.get(path)?;
        if d.too_wide || (d.int == 0 && d.scale == 0 && !d.ints) {
            return None;
        }
        // An integer counts as a BIGINT's digits, or its own when it has more (arrow-json
        // types integers past BIGINT as DOUBLE; Spark as DECIMAL(n, 0)).
        let int = if d.ints {
            d.int.max(LONG_DIGITS).max(d.int_literal)
        } else {
            d.int
        };
        let precision = (int + d.scale).max(1);
        (precision <= MAX_PRECISION).then_some(DataType::Decimal128(precision as u8, d.scale as i8))
    }

    /// `fields` with every DOUBLE leaf whose literals all fit a decimal turned into it.
    pub fn apply(&self, fields: &Fields) -> Fields {
        let mut path = Vec::new();
        fields
            .iter()
            .map(|f| Arc::new(self.field(f, &mut path)))
            .collect()
    }

    fn field(&self, f: &Field, path: &mut Vec<String>) -> Field {
        path.push(f.name().clone());
        let ty = self.ty(f.data_type(), path);
        path.pop();
        f.clone().with_data_type(ty)
    }

    fn ty(&self, ty: &DataType, path: &mut Vec<String>) -> DataType {
        match ty {
            DataType::Float64 => self.decimal_at(path).unwrap_or(DataType::Float64),
            DataType::Struct(fs) => {
                DataType::Struct(fs.iter().map(|f| Arc::new(self.field(f, path))).collect())
            }
            DataType::List(item) => DataType::List(Arc::new(
                item.as_ref()
                    .clone()
                    .with_data_type(self.ty(item.data_type(), path)),
            )),
            other => other.clone(),
        }
    }
}

/// A JSON number literal as Spark's `BigDecimal` inference sees it: `None` for an integer,
/// `Some(None)` for a fraction wider than 38 digits, else `Some(Some((precision, scale)))`
/// with the precision at least the scale and the scale at least 0.
/// A primitive JSON literal met by [`walk`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Literal<'a> {
    Number(&'a [u8]),
    /// A string's raw text, quotes and escapes included.
    String(&'a [u8]),
}

/// Visit every number and string of NDJSON `text` (one or more JSON values, any whitespace
/// between them) with its path. A value that is not valid JSON stops the walk of the line it
/// starts on; the walk goes on at the next line.
pub(crate) fn walk(text: &[u8], visit: &mut dyn FnMut(&[String], Literal<'_>)) {
    let mut s = Scanner {
        s: text,
        i: 0,
        path: Vec::new(),
        visit,
    };
    loop {
        s.ws();
        if s.i >= text.len() {
            return;
        }
        let start = s.i;
        if s.value(0).is_none() {
            s.path.clear();
            match memchr::memchr(b'\n', &text[start..]) {
                Some(n) => s.i = start + n + 1,
                None => return,
            }
        }
    }
}

/// Significant digits of an integer literal.
fn integer_digits(literal: &[u8]) -> u32 {
    let digits = literal.strip_prefix(b"-").unwrap_or(literal);
    digits.iter().skip_while(|&&b| b == b'0').count() as u32
}

/// A number literal without the zeros that end its fraction (`12.50` is `12.5`, `3.0e2` is
/// `3e2`): they do not change the value, so a column with less scale holds it exactly.
fn without_trailing_fraction_zeros(text: &[u8]) -> Vec<u8> {
    let exp_at = text
        .iter()
        .position(|&b| b == b'e' || b == b'E')
        .unwrap_or(text.len());
    let (mantissa, exp) = text.split_at(exp_at);
    let Some(dot) = mantissa.iter().position(|&b| b == b'.') else {
        return text.to_vec();
    };
    let mut end = mantissa.len();
    while end > dot + 1 && mantissa[end - 1] == b'0' {
        end -= 1;
    }
    if end == dot + 1 {
        end = dot;
    }
    let mut out = mantissa[..end].to_vec();
    out.extend_from_slice(exp);
    out
}

/// Whether a literal read into DECIMAL(p, s) keeps every digit. A string that is not a plain
/// number is left to arrow-json (which rejects it or reads it as its rules say).
pub(crate) fn literal_fits(lit: Literal<'_>, p: u8, s: i8) -> bool {
    let text = match lit {
        Literal::Number(n) => n,
        Literal::String(raw) => {
            let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or(b"");
            let plain = !inner.is_empty()
                && inner
                    .iter()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
            if !plain {
                return true;
            }
            inner
        }
    };
    let text = without_trailing_fraction_zeros(text.strip_prefix(b"+").unwrap_or(text));
    let (p, s) = (p as u32, s.max(0) as u32);
    match decimal_of(&text) {
        None => integer_digits(&text) <= p - s.min(p),
        Some(Some((pp, ss))) => ss <= s && pp - ss <= p - s.min(p),
        Some(None) => false,
    }
}

pub(crate) fn decimal_of(literal: &[u8]) -> Option<Option<(u32, u32)>> {
    let text = literal.strip_prefix(b"-").unwrap_or(literal);
    let (mantissa, exp) = match text.iter().position(|&b| b == b'e' || b == b'E') {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None if exp.is_none() => return None,
        None => (mantissa, &b""[..]),
    };
    let exp: i64 = match exp {
        // An exponent past 10,000 (or unreadable) makes the value too wide for any decimal
        // either way; bounding it keeps the arithmetic below from overflowing (and readers
        // that keep exponents in 16 bits from wrapping it).
        Some(e) => match std::str::from_utf8(e)
            .ok()
            .and_then(|e| e.parse::<i64>().ok())
        {
            Some(e) if e.unsigned_abs() <= 10_000 => e,
            _ => return Some(None),
        },
        None => 0,
    };
    let digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    let significant = digits.iter().skip_while(|&&b| b == b'0').count().max(1) as i64;
    let mut scale = frac.len() as i64 - exp;
    let mut precision = significant;
    if scale < 0 {
        precision -= scale;
        scale = 0;
    }
    let precision = precision.max(scale);
    if precision > MAX_PRECISION as i64 {
        return Some(None);
    }
    Some(Some((precision as u32, scale as u32)))
}

struct Scanner<'a, 'v> {
    s: &'a [u8],
    i: usize,
    path: Vec<String>,
    visit: &'v mut dyn FnMut(&[String], Literal<'_>),
}

impl Scanner<'_, '_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// One JSON value; `None` when the text is not valid JSON here.
    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'{' => {
                self.i += 1;
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.ws();
                    (self.peek()? == b':').then_some(())?;
                    self.i += 1;
                    self.path.push(key);
                    self.value(depth + 1)?;
                    self.path.pop();
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.value(depth + 1)?;
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => {
                let start = self.i;
                self.string()?;
                (self.visit)(&self.path, Literal::String(&self.s[start..self.i]));
                Some(())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while self.peek().is_some_and(|b| {
                    b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')
                }) {
                    self.i += 1;
                }
                (self.visit)(&self.path, Literal::Number(&self.s[start..self.i]));
                Some(())
            }
            b't' | b'f' | b'n' => {
                while self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
                    self.i += 1;
                }
                Some(())
            }
            _ => None,
        }
    }

    /// A string literal, unescaped (keys name columns).
    fn string(&mut self) -> Option<String> {
        (self.peek()? == b'"').then_some(())?;
        let start = self.i;
        self.i += 1;
        let mut escaped = false;
        loop {
            match self.peek()? {
                b'\\' => {
                    escaped = true;
                    self.i += 2;
                }
                b'"' => {
                    self.i += 1;
                    break;
                }
                _ => self.i += 1,
            }
        }
        let raw = self.s.get(start..self.i)?;
        if escaped {
            serde_json::from_slice(raw).ok()
        } else {
            std::str::from_utf8(&raw[1..raw.len() - 1])
                .ok()
                .map(str::to_string)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Schema;

    fn infer(text: &str) -> String {
        let (schema, _) =
            arrow_json::reader::infer_json_schema(std::io::Cursor::new(text.as_bytes()), None)
                .unwrap();
        let mut stats = DecimalStats::default();
        stats.scan(text.as_bytes());
        landfall_core::ddl::schema_to_ddl(&Schema::new(stats.apply(schema.fields())))
    }

    #[test]
    fn literals_read_as_spark_reads_them() {
        assert_eq!(decimal_of(b"12"), None);
        assert_eq!(decimal_of(b"12.50"), Some(Some((4, 2))));
        assert_eq!(decimal_of(b"-0.001"), Some(Some((3, 3))));
        assert_eq!(decimal_of(b"1e3"), Some(Some((4, 0))));
        assert_eq!(decimal_of(b"1.5E-2"), Some(Some((3, 3))));
        assert_eq!(decimal_of(b"0.0"), Some(Some((1, 1))));
        assert_eq!(decimal_of(b"1e40"), Some(None));
        assert_eq!(decimal_of(b"1.5e99999999999999999999"), Some(None));
        assert_eq!(decimal_of(b"1e-9223372036854775808"), Some(None));
        assert_eq!(decimal_of(b"1e9223372036854775807"), Some(None));
        assert_eq!(decimal_of(b"1e-10001"), Some(None));
        assert_eq!(
            decimal_of(b"123456789012345678901234567890.12345678"),
            Some(Some((38, 8)))
        );
        assert_eq!(
            decimal_of(b"123456789012345678901234567890.123456789"),
            Some(None)
        );
    }

    #[test]
    fn columns_merge_their_literals_and_fall_back_to_double() {
        assert_eq!(
            infer("{\"a\":12.50,\"b\":1.5,\"c\":[0.25,3.125],\"d\":{\"e\":-7.0}}\n{\"a\":3.1}\n"),
            "a DECIMAL(4,2), b DECIMAL(2,1), c ARRAY<DECIMAL(4,3)>, d STRUCT<e: DECIMAL(2,1)>"
        );
        // An integer among fractions counts as a BIGINT's 20 digits; 20 + 19 > 38.
        assert_eq!(
            infer("{\"a\":1,\"b\":1}\n{\"a\":2.5,\"b\":0.1234567890123456789}\n"),
            "a DECIMAL(21,1), b DOUBLE"
        );
        // Integers past BIGINT among fractions keep their digits.
        assert_eq!(
            infer("{\"a\":123456789012345678901234567890}\n{\"a\":0.5}\n"),
            "a DECIMAL(31,1)"
        );
        // Too wide for a decimal: DOUBLE; integers alone stay BIGINT.
        assert_eq!(
            infer("{\"a\":1e40,\"b\":7,\"c\":\"x\"}\n"),
            "a DOUBLE, b BIGINT, c STRING"
        );
        // Escaped keys, and strings holding quotes and numbers.
        assert_eq!(
            infer("{\"a\\u0062\":1.5,\"s\":\"x\\\"1.234\\\"\"}\n{\"ab\":22.25}\n"),
            "ab DECIMAL(4,2), s STRING"
        );
    }

    #[test]
    fn literals_fit_a_decimal_only_with_every_digit() {
        let fits = |t: &str| literal_fits(Literal::Number(t.as_bytes()), 4, 2);
        assert!(fits("12.5") && fits("-12.34") && fits("0.01") && fits("12") && fits("0"));
        assert!(fits("1.2e1") && fits("00012.10"));
        // Zeros ending the fraction change nothing.
        let scale0 = |t: &str| literal_fits(Literal::Number(t.as_bytes()), 10, 0);
        assert!(scale0("12.0") && scale0("12.000") && scale0("1.50e1") && !scale0("12.5"));
        assert!(literal_fits(Literal::String(b"\"12.3400\""), 10, 2));
        assert!(!fits("12.345"), "a third fraction digit would be cut");
        assert!(!fits("123.4") && !fits("123") && !fits("1e3") && !fits("1e-3"));
        let s = |t: &str| literal_fits(Literal::String(t.as_bytes()), 4, 2);
        assert!(s("\"12.34\"") && !s("\"12.345\"") && s("\"abc\""));
    }

    #[test]
    fn a_broken_record_costs_only_its_line() {
        let mut stats = DecimalStats::default();
        stats.scan(b"{\"x\":1.5,\n{\"x\":22.25}\n[1,{\"x\":\"a\n{\"x\":333.125}");
        let fields = Fields::from(vec![Field::new("x", DataType::Float64, true)]);
        assert_eq!(
            stats.apply(&fields)[0].data_type(),
            &DataType::Decimal128(6, 3),
            "1.5 (cut record) still counts; 22.25 and 333.125 are read"
        );
    }
}
