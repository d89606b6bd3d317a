//! JSON literals that arrow-json would change on their way into a column: it reads `3.7` into a
//! BIGINT as 3 (through a double, truncated), `1e39` into a FLOAT as infinity, a timestamp's
//! nanoseconds into a microsecond TIMESTAMP by dropping them, and a decimal's extra fraction
//! digits by cutting them. The decoders check the literals at such columns first
//! ([`ExactColumns::all_fit`]), so a batch holding one takes the slow path, where the value is
//! a misfit (null and counted, or rescued), never changed.
//!
//! The rules, Spark's where Spark has one:
//!
//! - an integer column takes only integer literals, within its range: Spark's JSON reader takes
//!   only integer tokens, so `3.0` and `1e3` are misfits too; so does a DATE or TIMESTAMP given
//!   a number (arrow reads it as days or microseconds);
//! - a FLOAT or DOUBLE takes any number as its nearest float, but not one that overflows to
//!   infinity or a non-zero that reads as zero (text too: arrow-json parses numeric strings);
//! - a DECIMAL keeps every digit ([`crate::json_decimal::literal_fits`]);
//! - text in a DATE has no time of day, in a TIMESTAMP no digits past the column's unit.
//!
//! Text in an integer column needs no check: arrow parses it exactly or refuses it. The scan
//! follows the schema: members and elements without a checked column below them are skipped
//! unread, so a schema with few checked columns costs little.

use crate::exact::{date_text_changes, float_text_changes, timestamp_text_misfits};
use crate::json_decimal::{Literal, literal_fits};
use arrow_schema::{DataType, Fields, TimeUnit};

/// Nesting past this is not followed (the record is then taken as not fitting).
const MAX_DEPTH: usize = 256;
/// Nesting of values without checked columns past this is not followed: Jackson's default
/// limit (Spark's parser refuses deeper documents).
const SKIP_DEPTH: usize = 1000;

#[derive(Debug, Clone, Copy)]
enum Check {
    Int {
        min: i128,
        max: i128,
    },
    Float {
        narrow: bool,
    },
    Decimal(u8, i8),
    Date,
    /// The unit, and whether the column has no zone (TIMESTAMP_NTZ).
    Timestamp(TimeUnit, bool),
}

#[derive(Debug, Clone)]
enum Node {
    Leaf(Check),
    Object(Vec<Member>),
    List(Box<Node>),
    /// A map's values.
    Map(Box<Node>),
}

fn node(ty: &DataType) -> Option<Node> {
    let int = |min: i128, max: i128| Some(Node::Leaf(Check::Int { min, max }));
    match ty {
        DataType::Int8 => int(i8::MIN.into(), i8::MAX.into()),
        DataType::Int16 => int(i16::MIN.into(), i16::MAX.into()),
        DataType::Int32 => int(i32::MIN.into(), i32::MAX.into()),
        DataType::Int64 => int(i64::MIN.into(), i64::MAX.into()),
        DataType::UInt8 => int(0, u8::MAX.into()),
        DataType::UInt16 => int(0, u16::MAX.into()),
        DataType::UInt32 => int(0, u32::MAX.into()),
        DataType::UInt64 => int(0, u64::MAX.into()),
        DataType::Float32 => Some(Node::Leaf(Check::Float { narrow: true })),
        DataType::Float64 => Some(Node::Leaf(Check::Float { narrow: false })),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => {
            Some(Node::Leaf(Check::Decimal(*p, *s)))
        }
        DataType::Date32 | DataType::Date64 => Some(Node::Leaf(Check::Date)),
        DataType::Timestamp(unit, zone) => {
            Some(Node::Leaf(Check::Timestamp(*unit, zone.is_none())))
        }
        DataType::Struct(fs) => object(fs).map(Node::Object),
        DataType::List(f) | DataType::LargeList(f) => {
            node(f.data_type()).map(|n| Node::List(n.into()))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                node(kv[1].data_type()).map(|n| Node::Map(n.into()))
            }
            _ => None,
        },
        _ => None,
    }
}

/// A checked member of an object: its name, the name's first eight bytes as one number (most
/// keys are told apart by length and those without a byte comparison), and its node.
#[derive(Debug, Clone)]
struct Member {
    name: Box<[u8]>,
    head: u64,
    node: Node,
}

/// A key's first eight bytes (zero-padded) as one number.
fn head(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_le_bytes(b)
}

impl Member {
    fn named(&self, key: &[u8], key_head: u64) -> bool {
        self.name.len() == key.len()
            && self.head == key_head
            && (key.len() <= 8 || self.name[8..] == key[8..])
    }
}

fn object(fields: &Fields) -> Option<Vec<Member>> {
    let members: Vec<Member> = fields
        .iter()
        .filter_map(|f| {
            node(f.data_type()).map(|node| Member {
                name: f.name().as_bytes().into(),
                head: head(f.name().as_bytes()),
                node,
            })
        })
        .collect();
    (!members.is_empty()).then_some(members)
}

/// The columns of a schema whose literals are checked, by JSON path.
#[derive(Debug, Clone)]
pub(crate) struct ExactColumns {
    root: Vec<Member>,
}

impl ExactColumns {
    /// The checks of `fields`. With no column to check, the scan still refuses what is not
    /// strict JSON, so that text arrow-json would take and the slow path would refuse takes
    /// the slow path whatever the schema.
    pub(crate) fn of(fields: &Fields) -> Self {
        ExactColumns {
            root: object(fields).unwrap_or_default(),
        }
    }

    /// Whether every literal of NDJSON `text` (records separated by any whitespace) lands in
    /// its column unchanged. Text that is not JSON does not fit (the slow path then reads it
    /// record by record).
    pub(crate) fn all_fit(&self, text: &[u8]) -> bool {
        let mut s = Scan { s: text, i: 0 };
        loop {
            s.ws();
            if s.i >= text.len() {
                return true;
            }
            let fits = if s.peek() == Some(b'{') {
                s.object(&self.root, 0)
            } else {
                s.skip()
            };
            if fits != Some(true) {
                return false;
            }
        }
    }
}

/// A string literal's text (`raw`, quotes included), unescaped: borrowed when it has no escapes
/// (`escaped`, as [`Scan::string`] found).
fn text(raw: &[u8], escaped: bool) -> Option<std::borrow::Cow<'_, str>> {
    if escaped {
        serde_json::from_slice::<String>(raw).ok().map(Into::into)
    } else {
        let inner = raw.get(1..raw.len().saturating_sub(1))?;
        std::str::from_utf8(inner).ok().map(Into::into)
    }
}

/// Whether the literal at a checked column lands in it unchanged. `escaped`: a string literal
/// holds an escape.
fn leaf_fits(check: Check, lit: Literal<'_>, escaped: bool) -> bool {
    match (check, lit) {
        (Check::Decimal(p, s), lit) => literal_fits(lit, p, s),
        (Check::Int { min, max }, Literal::Number(n)) => integer_fits(n, min, max),
        (Check::Int { .. }, Literal::String(_)) => true,
        // A number is no date or timestamp (arrow-json would take it as days or microseconds
        // since the epoch; Spark as seconds, or not at all): a misfit.
        (Check::Date | Check::Timestamp(..), Literal::Number(_)) => false,
        // A number token is ASCII by construction ([`Scan::value`]).
        (Check::Float { narrow }, Literal::Number(n)) => number_keeps_float(n, narrow),
        (Check::Float { narrow }, Literal::String(raw)) => {
            text(raw, escaped).is_none_or(|t| !float_text_changes(&t, narrow))
        }
        (Check::Date, Literal::String(raw)) => {
            text(raw, escaped).is_none_or(|t| !date_text_changes(&t))
        }
        (Check::Timestamp(unit, naive), Literal::String(raw)) => {
            text(raw, escaped).is_none_or(|t| !timestamp_text_misfits(&t, unit, naive))
        }
    }
}

/// Whether a number token reads into a FLOAT (`narrow`) or DOUBLE without leaving its range
/// (infinity from a finite number, zero from a non-zero one).
pub(crate) fn number_keeps_float(n: &[u8], narrow: bool) -> bool {
    // A number token is ASCII ([`Scan::value`], [`number_end`]).
    !float_bytes_may_change(n)
        || std::str::from_utf8(n).is_ok_and(|t| !float_text_changes(t, narrow))
}

/// Whether a number token could leave a FLOAT's or DOUBLE's range: the same test as
/// [`float_text_changes`]' first one, on the bytes (a token has no spaces to trim), so most
/// numbers are neither made text nor parsed.
fn float_bytes_may_change(n: &[u8]) -> bool {
    n.len() > 38 || n.iter().any(|b| matches!(b, b'e' | b'E'))
}

/// The first `"` or `\\` in `s`. Most keys and values are short, where a word-at-a-time test
/// beats memchr's vector setup; past the first 64 bytes, memchr takes over.
pub(crate) fn quote_or_backslash(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const QUOTES: u64 = ONES * b'"' as u64;
    const BACKSLASHES: u64 = ONES * b'\\' as u64;
    let mut i = 0;
    while i < 64 {
        let Some(word) = s.get(i..i + 8) else {
            return s[i..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\')
                .map(|p| i + p);
        };
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        // A zero byte of `x` sets its high bit in `zero(x)`; a borrow can also set the high bit
        // of a byte above a zero one, never below it, so the lowest set bit is exact.
        let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
        let found = zero(w ^ QUOTES) | zero(w ^ BACKSLASHES);
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    memchr::memchr2(b'"', b'\\', &s[i..]).map(|p| i + p)
}

/// The end of the JSON value starting at `s[i]`, skipped unchecked but for being JSON
/// (`None` when it is not: [`Scan::skip`]).
pub(crate) fn skip_value(s: &[u8], i: usize) -> Option<usize> {
    let mut scan = Scan { s, i };
    scan.skip()?;
    Some(scan.i)
}

/// The end of the number in JSON's grammar starting at `s[i]`:
/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, not followed by another character
/// arrow-json would read into the token. `None` when there is none (`007`, `1.`, `1e`, `1-2`):
/// arrow-json reads some of those, Spark's parser and serde_json none.
pub(crate) fn number_end(s: &[u8], mut i: usize) -> Option<usize> {
    let digits = |i: &mut usize| {
        let from = *i;
        while s.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > from
    };
    if s.get(i) == Some(&b'-') {
        i += 1;
    }
    match s.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return None,
    }
    if s.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return None;
        }
    }
    if let Some(b'e' | b'E') = s.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = s.get(i) {
            i += 1;
        }
        if !digits(&mut i) {
            return None;
        }
    }
    if let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = s.get(i) {
        return None;
    }
    Some(i)
}

/// An integer literal without fraction or exponent, within `min..=max`. (Narrow types would be
/// refused by arrow-json anyway; a BIGINT just past its range would not: arrow reads it through
/// a double, which rounds `-9223372036854775809` into the range.)
fn integer_fits(n: &[u8], min: i128, max: i128) -> bool {
    if n.iter().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return false;
    }
    let digits = n.strip_prefix(b"-").unwrap_or(n);
    if digits.len() < 18 && min <= -(10i128.pow(17)) && max >= 10i128.pow(17) {
        return true;
    }
    std::str::from_utf8(n)
        .ok()
        .and_then(|t| t.parse::<i128>().ok())
        .is_some_and(|v| min <= v && v <= max)
}

struct Scan<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// Past the string starting here (at its quote); its raw text, quotes included, and
    /// whether it holds an escape.
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        let s = self.s;
        let start = self.i;
        self.i += 1;
        let mut escaped = false;
        loop {
            let at = quote_or_backslash(s.get(self.i..)?)?;
            // arrow-json takes control bytes (a newline too) raw inside a string, where
            // Spark's parser and serde_json, of the slow path, refuse them: not JSON.
            if s[self.i..self.i + at].iter().any(|&b| b < 0x20) {
                return None;
            }
            self.i += at;
            if s[self.i] == b'\\' {
                escaped = true;
                self.i += 2;
                continue;
            }
            self.i += 1;
            return Some((s.get(start..self.i)?, escaped));
        }
    }

    /// Past the value starting here, unchecked but for being JSON. `Some(true)`: there was
    /// one; `None`: it is not JSON (arrow-json takes some such text, e.g. `007`, `[1 2]` or
    /// `{"a":1,}`, where Spark's parser and the slow path refuse it).
    fn skip(&mut self) -> Option<bool> {
        self.skip_at(0)
    }

    fn skip_at(&mut self, depth: usize) -> Option<bool> {
        if depth > SKIP_DEPTH {
            return None;
        }
        let close = match self.peek()? {
            b'"' => return self.string().map(|_| true),
            b'-' | b'0'..=b'9' => {
                self.i = number_end(self.s, self.i)?;
                return Some(true);
            }
            b't' => return self.word(b"true"),
            b'f' => return self.word(b"false"),
            b'n' => return self.word(b"null"),
            b'{' => b'}',
            b'[' => b']',
            _ => return None,
        };
        self.i += 1;
        self.ws();
        if self.peek()? == close {
            self.i += 1;
            return Some(true);
        }
        loop {
            self.ws();
            if close == b'}' {
                if self.peek()? != b'"' {
                    return None;
                }
                self.string()?;
                self.ws();
                if self.peek()? != b':' {
                    return None;
                }
                self.i += 1;
                self.ws();
            }
            self.skip_at(depth + 1)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b if b == close => {
                    self.i += 1;
                    return Some(true);
                }
                _ => return None,
            }
        }
    }

    fn word(&mut self, w: &[u8]) -> Option<bool> {
        if !self.s[self.i..].starts_with(w) {
            return None;
        }
        self.i += w.len();
        Some(true)
    }

    /// Whether the value here fits `node` (values of another shape are arrow-json's to judge).
    fn value(&mut self, node: &Node, depth: usize) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        match (node, self.peek()?) {
            (Node::Object(members), b'{') => self.object(members, depth + 1),
            (Node::Map(values), b'{') => self.map(values, depth + 1),
            (Node::List(item), b'[') => self.list(item, depth + 1),
            (Node::Leaf(check), b'"') => {
                let (raw, escaped) = self.string()?;
                Some(leaf_fits(*check, Literal::String(raw), escaped))
            }
            (Node::Leaf(check), b'-' | b'0'..=b'9') => {
                let start = self.i;
                self.i = number_end(self.s, start)?;
                Some(leaf_fits(
                    *check,
                    Literal::Number(&self.s[start..self.i]),
                    false,
                ))
            }
            _ => self.skip(),
        }
    }

    /// Members of the object here: `lookup` gives the node of a key, if it has one.
    fn members<'n>(
        &mut self,
        depth: usize,
        lookup: impl Fn(&[u8]) -> Option<&'n Node>,
    ) -> Option<bool> {
        self.i += 1;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(true);
        }
        loop {
            self.ws();
            if self.peek()? != b'"' {
                return None;
            }
            let (raw, escaped) = self.string()?;
            let key: std::borrow::Cow<'_, [u8]> = if escaped {
                serde_json::from_slice::<String>(raw)
                    .ok()?
                    .into_bytes()
                    .into()
            } else {
                raw[1..raw.len() - 1].into()
            };
            self.ws();
            if self.peek()? != b':' {
                return None;
            }
            self.i += 1;
            self.ws();
            let fits = match lookup(&key) {
                Some(n) => self.value(n, depth)?,
                None => self.skip()?,
            };
            if !fits {
                return Some(false);
            }
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(true);
                }
                _ => return None,
            }
        }
    }

    fn object(&mut self, members: &[Member], depth: usize) -> Option<bool> {
        self.members(depth, |k| {
            let h = head(k);
            members.iter().find(|m| m.named(k, h)).map(|m| &m.node)
        })
    }

    fn map(&mut self, values: &Node, depth: usize) -> Option<bool> {
        self.members(depth, |_| Some(values))
    }

    fn list(&mut self, item: &Node, depth: usize) -> Option<bool> {
        self.i += 1;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(true);
        }
        loop {
            self.ws();
            if !self.value(item, depth)? {
                return Some(false);
            }
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(true);
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;

    fn cols(fields: Vec<Field>) -> ExactColumns {
        ExactColumns::of(&Fields::from(fields))
    }

    #[test]
    fn literals_are_checked_at_their_columns_paths_only() {
        let c = cols(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("i", DataType::Int64, true),
            Field::new(
                "o",
                DataType::Struct(Fields::from(vec![Field::new_list(
                    "m",
                    Field::new_list_field(DataType::Decimal128(4, 2), true),
                    true,
                )])),
                true,
            ),
        ]);
        assert!(c.all_fit(b"{\"s\":1.5,\"i\":-9223372036854775808,\"x\":{\"i\":3.7}}\n"));
        assert!(c.all_fit(b"{\"i\":\"3\",\"o\":{\"m\":[1.5,\"2.25\"]},\"s\":\"\\\"}\"}"));
        assert!(!c.all_fit(b"{\"i\":3.7}"));
        assert!(
            !c.all_fit(b"{\"i\":3.0}"),
            "Spark takes only integer literals"
        );
        assert!(!c.all_fit(b"{\"i\":-9223372036854775809}"));
        assert!(!c.all_fit(b"{\"s\":\"x\"}\n{\"o\":{\"m\":[1.5,2.255]}}"));
        assert!(
            !c.all_fit(b"{\"\\u0069\":1e3}"),
            "escaped keys name their column"
        );
        assert!(!c.all_fit(b"{\"i\":1,"), "not JSON: read record by record");
        // With no column to check, syntax is still checked.
        let strings = ExactColumns::of(&Fields::from(vec![Field::new("s", DataType::Utf8, true)]));
        assert!(strings.all_fit(b"{\"s\":\"x\",\t\"n\":[1, {\"a\":-0.5e-3}]}\r\n"));
        for bad in [
            &b"{\"s\":007}"[..],
            b"{\"s\":\"tab\there\"}",
            b"{\"s\":\"line\nbreak\"}",
            b"{\"s\":[1 2]}",
            b"{\"s\":\"y\",}",
            b"{\"s\":1.}",
        ] {
            assert!(!strings.all_fit(bad), "{}", String::from_utf8_lossy(bad));
        }
    }

    /// The word-at-a-time search finds what a byte-by-byte one finds: at every position and
    /// length around the word and memchr boundaries, among bytes that differ from `"` and `\\`
    /// by one bit, high bytes (UTF-8) and zeros.
    #[test]
    fn quotes_and_backslashes_are_found_where_they_are() {
        let filler = [
            b'x',
            b'#',
            b'\x5d',
            b'\xa2',
            b'\xdc',
            0,
            0x80,
            b'"' ^ 0x80,
            b'\\' ^ 1,
        ];
        for len in 0..140 {
            for at in (0..=len).chain([usize::MAX]) {
                for (k, &fill) in filler.iter().enumerate() {
                    for target in [b'"', b'\\'] {
                        let mut s: Vec<u8> = (0..len)
                            .map(|j| filler[(j + k) % filler.len()].max(fill))
                            .collect();
                        s.iter_mut().for_each(|b| {
                            if *b == b'"' || *b == b'\\' {
                                *b = b'y'
                            }
                        });
                        if at < len {
                            s[at] = target;
                            if at + 3 < len {
                                s[at + 3] = b'"';
                            }
                        }
                        let naive = s.iter().position(|&b| b == b'"' || b == b'\\');
                        assert_eq!(
                            quote_or_backslash(&s),
                            naive,
                            "len {len} at {at} fill {fill:#x}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn escapes_in_keys_and_values_are_read() {
        let c = cols(vec![
            Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            Field::new("long_key_name_past_eight", DataType::Int64, true),
        ]);
        assert!(c.all_fit(b"{\"t\":\"2024-01-02T03:04:05\"}"));
        assert!(
            !c.all_fit(b"{\"t\":\"2024-01-02T03:04:05\\u002B05:00\"}"),
            "an escaped `+` is a zone"
        );
        assert!(c.all_fit(b"{\"s\":\"a\\\"b\\\\\",\"long_key_name_past_eight\":1}"));
        assert!(!c.all_fit(b"{\"long_key_name_past_\\u0065ight\":1.5}"));
        assert!(
            c.all_fit(b"{\"long_key_name_past_eighT\":1.5}"),
            "another key"
        );
        for n in [50, 7, 30] {
            let long = |v: &str| {
                format!(
                    "{{\"x\":\"{}\\\"\",\"long_key_name_past_eight\":{v}}}",
                    "é".repeat(n)
                )
            };
            assert!(
                c.all_fit(long("2").as_bytes()),
                "a string ends where it ends"
            );
            assert!(!c.all_fit(long("2.5").as_bytes()));
        }
    }

    #[test]
    fn floats_dates_and_timestamps_keep_their_values() {
        let c = cols(vec![
            Field::new("f", DataType::Float32, true),
            Field::new("d", DataType::Float64, true),
            Field::new("day", DataType::Date32, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ]);
        assert!(c.all_fit(
            b"{\"f\":0.1,\"d\":1e308,\"day\":\"2024-01-02\",\"t\":\"2024-01-02T03:04:05.123456\"}"
        ));
        assert!(c.all_fit(b"{\"f\":\"3.4e38\",\"d\":-0.0,\"t\":\"2024-01-02 03:04:05\"}"));
        assert!(
            c.all_fit(b"{\"f\":16777217,\"d\":9007199254740993}"),
            "the nearest float, as Spark reads it"
        );
        for bad in [
            "{\"day\":19000}",
            "{\"t\":1700000000000000}",
            "{\"t\":\"2024-01-02T03:04:05+05:00\"}",
            "{\"t\":\"2024-01-02T03:04:05Z\"}",
            "{\"t\":\"2024-01-02T03:04:05.1234560001\"}",
            "{\"f\":1e39}",
            "{\"f\":\"1e39\"}",
            "{\"d\":1e-400}",
            "{\"day\":\"2024-01-02T03:04:05\"}",
            "{\"day\":1.5}",
            "{\"t\":\"2024-01-02T03:04:05.1234567\"}",
            "{\"t\":1.7e15}",
        ] {
            assert!(!c.all_fit(bad.as_bytes()), "{bad}");
        }
    }
}
