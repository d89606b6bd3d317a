//! Spark's schema inference for JSON (`JsonInferSchema`) and XML (`XmlInferSchema`), which
//! Auto Loader uses: every record is typed from its values, records are merged two by two with
//! Spark's `compatibleType`, and only the merged sample is made final ([`canonical`]).
//!
//! - A null (and, in JSON, an empty string) is Spark's NullType: it gives way to any other
//!   type, so a field null in one file and an array in another is that array. A field that is
//!   null everywhere becomes a string at the end; an empty struct (`{}`) disappears.
//! - Numbers: integers are BIGINT, integers past BIGINT `DECIMAL(digits, 0)` (DOUBLE past 38
//!   digits), fractions DOUBLE, or `DECIMAL(max(p, s), s)` with `prefers_decimal`. Integer and
//!   double merge to DOUBLE, decimal and double to DOUBLE, two decimals to the most integer
//!   digits plus the largest scale (DOUBLE past 38). JSON strings stay strings (Spark's
//!   `inferTimestamp` is off by default); XML text is typed (BIGINT, DOUBLE, BOOLEAN, DATE,
//!   TIMESTAMP).
//! - Types with no common type are a string: `[1.5, 2]` beside `[[1, 2]]` is `ARRAY<STRING>`.
//!   XML also merges an element with its repeats (an array) and a text with an element that
//!   has attributes (a struct with the text under the value tag).
//! - The fields of every inferred struct, top-level columns included, are sorted by name
//!   (Java's `String.compareTo`: UTF-16 code units).
//!
//! Without typed inference (Auto Loader's default, Spark's `primitivesAsString`) numbers and
//! booleans are strings; the structure and the null rules stay.

use crate::temporal::temporal_type;
pub(crate) use crate::types::canonical_fields;
use crate::types::{MAX_PRECISION, integer_digits, list_of, merge_decimals, name_order, tightest};
use arrow_schema::{DataType, Field, Fields};
use serde_json::Value;
use std::cmp::Ordering;
use std::sync::Arc;

/// Spark's and Delta's largest decimal precision.
/// Nesting beyond this makes a record unreadable for inference (as for the decoder).
const MAX_DEPTH: usize = 256;

/// How sampled values are typed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ValueRules {
    /// Numbers, booleans (and XML text) are typed; otherwise they are strings.
    pub typed: bool,
    /// JSON fractions, and strings that are plain decimals, are DECIMAL (`prefersDecimal`).
    pub prefers_decimal: bool,
}

/// Which of Spark's merge rules apply.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rules<'a> {
    Json,
    /// XML, with the field name of an element's own text.
    Xml {
        value_tag: &'a str,
    },
}

/// Spark's `compatibleType` of JSON (and of XML, with its two extra rules): the type both
/// `a` and `b` fit, a string when nothing narrower holds both.
pub(crate) fn compatible(a: &DataType, b: &DataType, rules: Rules<'_>) -> DataType {
    use DataType::*;
    if let Some(t) = tightest(a, b) {
        return t;
    }
    match (a, b) {
        (Float64, Decimal128(..)) | (Decimal128(..), Float64) => Float64,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => merge_decimals(*p1, *s1, *p2, *s2),
        (Decimal128(..), i) if integer_digits(i).is_some() => {
            compatible(a, &Decimal128(integer_digits(i).unwrap_or(20), 0), rules)
        }
        (i, Decimal128(..)) if integer_digits(i).is_some() => {
            compatible(&Decimal128(integer_digits(i).unwrap_or(20), 0), b, rules)
        }
        (Struct(x), Struct(y)) => Struct(merge_sorted(x, y, rules)),
        (List(x), List(y)) => list_of(compatible(x.data_type(), y.data_type(), rules)),
        (List(x), t) | (t, List(x)) if matches!(rules, Rules::Xml { .. }) => {
            list_of(compatible(x.data_type(), t, rules))
        }
        (Struct(fs), t) | (t, Struct(fs)) => match rules {
            Rules::Xml { value_tag } if fs.iter().any(|f| f.name() == value_tag) => Struct(
                fs.iter()
                    .map(|f| {
                        if f.name() == value_tag {
                            Arc::new(Field::new(
                                value_tag,
                                compatible(f.data_type(), t, rules),
                                true,
                            ))
                        } else {
                            f.clone()
                        }
                    })
                    .collect(),
            ),
            _ => Utf8,
        },
        _ => Utf8,
    }
}

/// Two name-sorted field lists merged into one, still sorted; a name in both takes the type
/// both values fit.
fn merge_sorted(x: &Fields, y: &Fields, rules: Rules<'_>) -> Fields {
    let (mut i, mut j) = (0, 0);
    let mut out: Vec<Arc<Field>> = Vec::with_capacity(x.len().max(y.len()));
    while i < x.len() && j < y.len() {
        match name_order(x[i].name(), y[j].name()) {
            Ordering::Equal => {
                let t = compatible(x[i].data_type(), y[j].data_type(), rules);
                out.push(Arc::new(Field::new(x[i].name(), t, true)));
                i += 1;
                j += 1;
            }
            Ordering::Less => {
                out.push(x[i].clone());
                i += 1;
            }
            Ordering::Greater => {
                out.push(y[j].clone());
                j += 1;
            }
        }
    }
    out.extend(x.iter().skip(i).cloned());
    out.extend(y.iter().skip(j).cloned());
    out.into()
}

/// The struct of one object's fields: sorted by name, a key given twice merged into one.
fn sorted_struct(mut fields: Vec<(String, DataType)>, rules: Rules<'_>) -> DataType {
    fields.sort_by(|a, b| name_order(&a.0, &b.0));
    let mut out: Vec<Field> = Vec::with_capacity(fields.len());
    for (name, ty) in fields {
        match out.last_mut() {
            Some(last) if last.name() == &name => {
                *last = Field::new(name, compatible(last.data_type(), &ty, rules), true);
            }
            _ => out.push(Field::new(name, ty, true)),
        }
    }
    DataType::Struct(out.into())
}

/// Merge a record's type into the root struct (Spark's `compatibleRootType`): arrays at the
/// top are their elements; nulls and values that are not objects add nothing (Spark's
/// corrupt-record column; landfall counts such records malformed when decoding).
fn merge_root(root: &mut DataType, record: DataType, rules: Rules<'_>) {
    match record {
        DataType::List(item) => merge_root(root, item.data_type().clone(), rules),
        DataType::Struct(_) => *root = compatible(root, &record, rules),
        _ => {}
    }
}

/// An empty root struct, to merge records into.
pub(crate) fn empty_root() -> DataType {
    DataType::Struct(Fields::empty())
}

/// Merge every record of NDJSON `text` (JSON values separated by whitespace) into `root`. A
/// record that is not valid JSON adds nothing: inference goes on at the next line.
pub(crate) fn merge_json_text(text: &[u8], value_rules: ValueRules, root: &mut DataType) {
    let mut p = Parser {
        s: text,
        i: 0,
        rules: value_rules,
    };
    loop {
        p.ws();
        if p.i >= text.len() {
            return;
        }
        let start = p.i;
        match p.value(0) {
            Some(t) => merge_root(root, t, Rules::Json),
            None => match memchr::memchr(b'\n', &text[start..]) {
                Some(n) => p.i = start + n + 1,
                None => return,
            },
        }
    }
}

/// Merge one XML row (as the XML reader turns it into JSON) into `root`.
pub(crate) fn merge_xml_row(row: &Value, rules: ValueRules, value_tag: &str, root: &mut DataType) {
    let r = Rules::Xml { value_tag };
    merge_root(root, xml_value_type(row, rules, r), r);
}

fn xml_value_type(v: &Value, vr: ValueRules, rules: Rules<'_>) -> DataType {
    match v {
        Value::Null => DataType::Null,
        Value::Bool(_) if vr.typed => DataType::Boolean,
        Value::Number(n) if vr.typed => {
            if n.is_i64() {
                DataType::Int64
            } else {
                DataType::Float64
            }
        }
        Value::String(s) if s.is_empty() => DataType::Null,
        Value::String(s) if vr.typed => {
            temporal_type(s, &crate::TemporalFormats::default()).unwrap_or(DataType::Utf8)
        }
        Value::Array(items) => list_of(items.iter().fold(DataType::Null, |acc, v| {
            compatible(&acc, &xml_value_type(v, vr, rules), rules)
        })),
        Value::Object(m) => sorted_struct(
            m.iter()
                .map(|(k, v)| (k.clone(), xml_value_type(v, vr, rules)))
                .collect(),
            rules,
        ),
        _ => DataType::Utf8,
    }
}

/// A strict JSON reader that yields each value's inferred type instead of the value: number
/// literals are typed from their text (an integer past BIGINT is not a DOUBLE).
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    rules: ValueRules,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn value(&mut self, depth: usize) -> Option<DataType> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'{' => {
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                    return Some(sorted_struct(fields, Rules::Json));
                }
                loop {
                    self.ws();
                    let key = self.key()?;
                    self.ws();
                    (self.peek()? == b':').then_some(())?;
                    self.i += 1;
                    let t = self.value(depth + 1)?;
                    fields.push((key, t));
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            return Some(sorted_struct(fields, Rules::Json));
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut item = DataType::Null;
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(list_of(item));
                }
                loop {
                    let t = self.value(depth + 1)?;
                    item = compatible(&item, &t, Rules::Json);
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(list_of(item));
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => {
                let (raw, _) = self.string()?;
                Some(self.string_type(&self.s[raw]))
            }
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.word(b"true", DataType::Boolean),
            b'f' => self.word(b"false", DataType::Boolean),
            b'n' => {
                self.word(b"null", DataType::Null)?;
                Some(DataType::Null)
            }
            _ => None,
        }
    }

    fn word(&mut self, w: &[u8], t: DataType) -> Option<DataType> {
        self.s[self.i..].starts_with(w).then_some(())?;
        self.i += w.len();
        Some(if self.rules.typed || t == DataType::Null {
            t
        } else {
            DataType::Utf8
        })
    }

    /// A string literal: where its content is (escapes kept), and whether it has escapes.
    fn string(&mut self) -> Option<(std::ops::Range<usize>, bool)> {
        let start = self.i + 1;
        self.i = start;
        let mut escaped = false;
        loop {
            match self.peek()? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    match self.s.get(self.i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                        b'u' => {
                            let hex = self.s.get(self.i + 2..self.i + 6)?;
                            hex.iter().all(u8::is_ascii_hexdigit).then_some(())?;
                            self.i += 6;
                        }
                        _ => return None,
                    }
                }
                b if b < 0x20 => return None,
                _ => self.i += 1,
            }
        }
        let raw = start..self.i;
        self.i += 1;
        Some((raw, escaped))
    }

    fn key(&mut self) -> Option<String> {
        (self.peek()? == b'"').then_some(())?;
        let before = self.i;
        let (raw, escaped) = self.string()?;
        if escaped {
            serde_json::from_slice(&self.s[before..self.i]).ok()
        } else {
            std::str::from_utf8(&self.s[raw]).ok().map(str::to_string)
        }
    }

    /// Spark: an empty string is null (it may stand for one); with `prefers_decimal` a
    /// string holding a plain decimal number is that DECIMAL.
    fn string_type(&self, raw: &[u8]) -> DataType {
        if raw.is_empty() {
            return DataType::Null;
        }
        if self.rules.typed
            && self.rules.prefers_decimal
            && let Some(t) = plain_decimal(raw)
        {
            return t;
        }
        DataType::Utf8
    }

    fn number(&mut self) -> Option<DataType> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let from = p.i;
            while p.peek().is_some_and(|b| b.is_ascii_digit()) {
                p.i += 1;
            }
            p.i > from
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                digits(self);
            }
            _ => return None,
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            integer = false;
            digits(self).then_some(())?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            integer = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            digits(self).then_some(())?;
        }
        if !self.rules.typed {
            return Some(DataType::Utf8);
        }
        let text = &self.s[start..self.i];
        Some(if integer {
            integer_literal_type(text)
        } else if self.rules.prefers_decimal {
            match crate::json_decimal::decimal_of(text) {
                Some(Some((p, s))) => DataType::Decimal128(p as u8, s as i8),
                _ => DataType::Float64,
            }
        } else {
            DataType::Float64
        })
    }
}

/// An integer literal: BIGINT, or past it `DECIMAL(digits, 0)`, or past 38 digits DOUBLE
/// (Jackson's BIG_INTEGER).
pub(crate) fn integer_literal_type(text: &[u8]) -> DataType {
    if std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
        .is_some()
    {
        return DataType::Int64;
    }
    let digits = text
        .iter()
        .filter(|b| b.is_ascii_digit())
        .skip_while(|&&b| b == b'0')
        .count()
        .max(1);
    if digits <= MAX_PRECISION as usize {
        DataType::Decimal128(digits as u8, 0)
    } else {
        DataType::Float64
    }
}

/// A string of a plain decimal number (`-12.50`) as Java's `BigDecimal` types it: precision
/// its significant digits, scale its fraction digits; none when the scale exceeds the
/// precision or the precision 38 (Spark's `DecimalType` refuses both, the value stays a
/// string).
fn plain_decimal(raw: &[u8]) -> Option<DataType> {
    let body = raw.strip_prefix(b"-").unwrap_or(raw);
    let (int, frac) = match body.iter().position(|&b| b == b'.') {
        Some(at) => (&body[..at], &body[at + 1..]),
        None => (body, &b""[..]),
    };
    if int.is_empty() || !int.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    if body.contains(&b'.') && frac.is_empty() {
        return None;
    }
    let precision = int
        .iter()
        .chain(frac)
        .skip_while(|&&b| b == b'0')
        .count()
        .max(1);
    let scale = frac.len();
    (scale <= precision && precision <= MAX_PRECISION as usize)
        .then_some(DataType::Decimal128(precision as u8, scale as i8))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infer(files: &[&str], rules: ValueRules) -> String {
        let mut root = empty_root();
        for f in files {
            let mut file = empty_root();
            merge_json_text(f.as_bytes(), rules, &mut file);
            root = compatible(&root, &file, Rules::Json);
        }
        let DataType::Struct(fs) = root else {
            unreachable!()
        };
        let fields = canonical_fields(&fs);
        landfall_core::ddl::schema_to_ddl(&arrow_schema::Schema::new(fields))
    }

    const TYPED: ValueRules = ValueRules {
        typed: true,
        prefers_decimal: false,
    };
    const STRINGS: ValueRules = ValueRules {
        typed: false,
        prefers_decimal: false,
    };

    #[test]
    fn null_gives_way_to_arrays_and_structs_in_any_file() {
        let files = [
            "{\"a\":null,\"s\":null}\n",
            "{\"a\":[1,2],\"s\":{\"y\":1}}\n",
        ];
        for rules in [TYPED, STRINGS] {
            let t = if rules.typed { "BIGINT" } else { "STRING" };
            assert_eq!(
                infer(&files, rules),
                format!("a ARRAY<{t}>, s STRUCT<y: {t}>")
            );
            let rev = [files[1], files[0]];
            assert_eq!(infer(&rev, rules), infer(&files, rules));
        }
        assert_eq!(
            infer(&["{\"a\":null}\n{\"b\":[]}\n"], TYPED),
            "a STRING, b ARRAY<STRING>"
        );
    }

    #[test]
    fn types_without_a_common_type_are_strings() {
        assert_eq!(
            infer(&["{\"a\":[1.5,2]}\n{\"a\":[[1,2]]}\n"], TYPED),
            "a ARRAY<STRING>"
        );
        assert_eq!(
            infer(
                &["{\"a\":1,\"b\":1,\"c\":true}\n{\"a\":[1],\"b\":{\"x\":1},\"c\":1}\n"],
                TYPED
            ),
            "a STRING, b STRING, c STRING"
        );
        assert_eq!(infer(&["{\"a\":1}\n{\"a\":2.5}\n"], TYPED), "a DOUBLE");
    }

    #[test]
    fn fields_are_sorted_by_name_at_every_level() {
        assert_eq!(
            infer(
                &[
                    "{\"z\":1,\"b\":{\"y\":1,\"x\":2},\"B\":1}\n",
                    "{\"a\":[{\"q\":1,\"p\":2}]}\n"
                ],
                TYPED
            ),
            "B BIGINT, a ARRAY<STRUCT<p: BIGINT, q: BIGINT>>, b STRUCT<x: BIGINT, y: BIGINT>, z BIGINT"
        );
        // UTF-16 order: U+FF5E sorts after U+1F600 in UTF-8 but before it in UTF-16.
        assert_eq!(name_order("\u{ff5e}", "\u{1f600}"), Ordering::Greater);
    }

    #[test]
    fn numbers_empty_strings_and_empty_structs_as_spark_types_them() {
        assert_eq!(
            infer(
                &[
                    "{\"big\":12345678901234567890123,\"e\":\"\",\"o\":{},\"l\":[{}]}\n{\"big\":1,\"e\":5}\n"
                ],
                TYPED
            ),
            "big DECIMAL(23,0), e BIGINT"
        );
        assert_eq!(
            infer(&["{\"a\":12345678901234567890123}\n{\"a\":1.5}\n"], TYPED),
            "a DOUBLE"
        );
        let dec = ValueRules {
            typed: true,
            prefers_decimal: true,
        };
        assert_eq!(
            infer(
                &["{\"a\":12.50,\"b\":1,\"c\":\"1.25\",\"d\":1e40}\n{\"b\":0.5}\n"],
                dec
            ),
            "a DECIMAL(4,2), b DECIMAL(21,1), c DECIMAL(3,2), d DOUBLE"
        );
    }

    #[test]
    fn broken_records_and_non_objects_add_nothing() {
        assert_eq!(
            infer(
                &["{\"a\":1,\n{\"b\":tru}\n7\nnull\n[{\"c\":1},{\"d\":\"x\"}]\n{\"e\":1}"],
                TYPED
            ),
            "c BIGINT, d STRING, e BIGINT"
        );
    }

    #[test]
    fn xml_merges_repeats_and_text_beside_attributes() {
        let r = Rules::Xml {
            value_tag: "_VALUE",
        };
        let attr = DataType::Struct(
            vec![
                Field::new("_VALUE", DataType::Utf8, true),
                Field::new("_k", DataType::Utf8, true),
            ]
            .into(),
        );
        assert_eq!(compatible(&attr, &DataType::Utf8, r), attr);
        let child = DataType::Struct(vec![Field::new("b", DataType::Int64, true)].into());
        assert_eq!(compatible(&child, &DataType::Int64, r), DataType::Utf8);
        assert_eq!(
            compatible(&list_of(DataType::Int64), &DataType::Float64, r),
            list_of(DataType::Float64)
        );
        assert_eq!(
            compatible(&list_of(DataType::Int64), &DataType::Float64, Rules::Json),
            DataType::Utf8
        );
    }
}
