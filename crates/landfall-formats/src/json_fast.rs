//! The one-pass reader of plain NDJSON lines: each line's object is parsed straight into the
//! columns, with the exactness rules of [`crate::json_exact`] applied on the way, so a
//! well-formed line costs one pass instead of arrow-json's tape, its flush and the exactness
//! scan (three passes over the same bytes).
//!
//! It takes only what it is sure of, and yields the same batch as arrow-json (with the options
//! of [`crate::json_permissive::build`]) followed by the exactness check would:
//!
//! - a line holds one object, strict JSON (members separated by one comma, numbers in JSON's
//!   grammar, no `\u` escapes, valid UTF-8, no control byte but the `\r` of a `\r\n`),
//!   followed by nothing but spaces; blank lines are skipped, as arrow-json skips whitespace;
//! - the schema is flat, of BOOLEAN, integers up to 32 bits unsigned and 64 bits signed,
//!   FLOAT, DOUBLE, STRING, DATE and TIMESTAMP columns ([`FastJson::of`] declines any other
//!   schema);
//! - each value is one arrow-json reads into its column, and reads unchanged: an integer
//!   literal in range for an integer column, a number that neither overflows nor vanishes for
//!   a float column (text in a number column is left to arrow-json), any scalar for a string
//!   column (a number keeps its literal text, `true` and `false` their words), text without a
//!   time of day for a DATE and without digits past the unit (or a zone, for a zone-less
//!   TIMESTAMP) for a TIMESTAMP;
//! - no key twice, no null in a non-null column, and an unknown key only when the decoder is
//!   not strict (its value must still be JSON of the kind above: it is skipped).
//!
//! Anything else ends the fast path at that line: the rows read so far are emitted, and the
//! line and what follows go to arrow-json's path ([`crate::json`]), which reads or salvages
//! them as before. Lines are this reader's unit; arrow-json's are records, so a record spread
//! over lines, or two on one line, simply leaves the fast path.

use crate::json_exact::{number_end, number_keeps_float, quote_or_backslash, skip_value};
use crate::json_permissive::Position;
use arrow::array::timezone::Tz;
use arrow::array::{ArrayData, ArrayRef, BooleanArray, RecordBatch, make_array};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow::compute::kernels::cast_utils::{Parser, string_to_datetime};
use arrow::datatypes::{Date32Type, Float32Type, Float64Type};
use arrow_schema::{ArrowError, DataType, SchemaRef, TimeUnit};
use bytes::{Bytes, BytesMut};
use chrono::{DateTime, TimeZone, Utc};
use std::collections::HashMap;

/// A line longer than this is left to arrow-json rather than gathered across chunks.
const MAX_TAIL: usize = 1 << 20;

/// How a column takes a value.
#[derive(Debug, Clone)]
enum Kind {
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    F64,
    F32,
    Str,
    /// Unit, zone (`None`: UTC, zone-less), whether the column has no zone.
    Ts(TimeUnit, Option<Tz>),
    Date32,
}

#[derive(Debug)]
enum Data {
    Bool(Vec<bool>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    F64(Vec<f64>),
    F32(Vec<f32>),
    Str { offsets: Vec<i64>, bytes: Vec<u8> },
}

#[derive(Debug)]
struct Column {
    kind: Kind,
    ty: DataType,
    nullable: bool,
    valid: Vec<bool>,
    data: Data,
}

/// A JSON token of a value.
enum Token<'a> {
    /// The text between the quotes, and whether it holds escapes.
    Str(&'a [u8], bool),
    Num(&'a [u8]),
    Bool(bool),
    Null,
}

/// What [`FastJson::feed`] left.
pub(crate) enum Fed {
    /// Every byte was read, or is kept until its line is complete.
    All,
    /// From these bytes on (a line the fast path does not take) arrow-json reads.
    Rest(Bytes),
}

pub(crate) struct FastJson {
    schema: SchemaRef,
    columns: Vec<Column>,
    names: Vec<Box<[u8]>>,
    /// Each name between quotes, as a key without escapes is written (empty for a name that
    /// would need escapes: it never matches).
    quoted: Vec<Box<[u8]>>,
    /// Field index by name, for schemas too wide to search in order.
    index: Option<HashMap<Box<[u8]>, usize>>,
    /// An unknown key leaves the fast path (arrow-json's strict mode).
    strict: bool,
    batch_size: usize,
    rows: usize,
    /// Rows read on the fast path, in all.
    pub(crate) taken: u64,
    /// The start of a line whose end is in a later chunk.
    tail: BytesMut,
    /// `seen[f] == stamp`: field `f` has a value in the current row.
    seen: Vec<u32>,
    stamp: u32,
    /// Unescaped text of a DATE or TIMESTAMP value.
    scratch: Vec<u8>,
}

impl FastJson {
    /// The fast reader for `schema`, or `None` when a column's type is not one it reads.
    pub(crate) fn of(schema: &SchemaRef, batch_size: usize, strict: bool) -> Option<Self> {
        let mut columns = Vec::new();
        for f in schema.fields() {
            let ty = f.data_type().clone();
            let int = |min: i64, max: i64| Kind::Int { min, max };
            let kind = match &ty {
                DataType::Boolean => Kind::Bool,
                DataType::Int8 => int(i8::MIN.into(), i8::MAX.into()),
                DataType::Int16 => int(i16::MIN.into(), i16::MAX.into()),
                DataType::Int32 => int(i32::MIN.into(), i32::MAX.into()),
                DataType::Int64 => int(i64::MIN, i64::MAX),
                DataType::UInt8 => int(0, u8::MAX.into()),
                DataType::UInt16 => int(0, u16::MAX.into()),
                DataType::UInt32 => int(0, u32::MAX.into()),
                DataType::Float32 => Kind::F32,
                DataType::Float64 => Kind::F64,
                DataType::Utf8 | DataType::LargeUtf8 => Kind::Str,
                DataType::Date32 => Kind::Date32,
                DataType::Timestamp(unit, None) => Kind::Ts(*unit, None),
                DataType::Timestamp(unit, Some(z)) => Kind::Ts(*unit, Some(z.parse().ok()?)),
                _ => return None,
            };
            let data = match kind {
                Kind::Bool => Data::Bool(Vec::new()),
                Kind::Int { .. } | Kind::Ts(..) => Data::I64(Vec::new()),
                Kind::Date32 => Data::I32(Vec::new()),
                Kind::F64 => Data::F64(Vec::new()),
                Kind::F32 => Data::F32(Vec::new()),
                Kind::Str => Data::Str {
                    offsets: vec![0],
                    bytes: Vec::new(),
                },
            };
            columns.push(Column {
                kind,
                ty,
                nullable: f.is_nullable(),
                valid: Vec::new(),
                data,
            });
        }
        if columns.is_empty() {
            return None;
        }
        let names: Vec<Box<[u8]>> = schema
            .fields()
            .iter()
            .map(|f| f.name().as_bytes().into())
            .collect();
        // Two fields of one name (no Delta schema has them): arrow-json's choice between
        // them is left to arrow-json.
        let unique: std::collections::HashSet<&[u8]> = names.iter().map(|n| &n[..]).collect();
        if unique.len() != names.len() {
            return None;
        }
        let index = (names.len() > 8).then(|| {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect::<HashMap<_, _>>()
        });
        let quoted = names
            .iter()
            .map(|n| {
                if n.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20) {
                    return Box::default();
                }
                [&b"\""[..], n, b"\""].concat().into()
            })
            .collect();
        Some(FastJson {
            quoted,
            schema: schema.clone(),
            seen: vec![0; columns.len()],
            columns,
            names,
            index,
            strict,
            batch_size: batch_size.max(1),
            rows: 0,
            taken: 0,
            tail: BytesMut::new(),
            stamp: 0,
            scratch: Vec::new(),
        })
    }

    /// Read the complete lines of `chunk` (after the kept start of a line), advancing `at` past
    /// them; full batches go to `out`. On [`Fed::Rest`] the rows read so far are in `out` and
    /// `at` is the position of the returned bytes.
    pub(crate) fn feed(
        &mut self,
        chunk: Bytes,
        at: &mut Position,
        out: &mut Vec<RecordBatch>,
    ) -> Result<Fed, ArrowError> {
        let mut pos = 0;
        if !self.tail.is_empty() {
            let Some(nl) = memchr::memchr(b'\n', &chunk) else {
                if self.tail.len() + chunk.len() > MAX_TAIL {
                    let mut line = std::mem::take(&mut self.tail);
                    line.extend_from_slice(&chunk);
                    return self.leave(out, line.freeze());
                }
                self.tail.extend_from_slice(&chunk);
                return Ok(Fed::All);
            };
            let mut line = std::mem::take(&mut self.tail);
            line.extend_from_slice(&chunk[..=nl]);
            let whole = &line[..line.len() - 1];
            if !clean(&line) || !self.row(whole) {
                line.extend_from_slice(&chunk[nl + 1..]);
                return self.leave(out, line.freeze());
            }
            at.offset += line.len() as u64;
            at.line += 1;
            pos = nl + 1;
            self.emit_full(out)?;
        }
        // Each line is checked on its own: after arrow-json's path took a batch, the fast path
        // starts again on what is left, so checking all of it at once would be quadratic.
        let end = memchr::memrchr(b'\n', &chunk[pos..]).map_or(pos, |i| pos + i + 1);
        while pos < end {
            let nl = pos + memchr::memchr(b'\n', &chunk[pos..end]).expect("a line ends by `end`");
            if !clean(&chunk[pos..=nl]) || !self.row(&chunk[pos..nl]) {
                return self.leave(out, chunk.slice(pos..));
            }
            at.offset += (nl + 1 - pos) as u64;
            at.line += 1;
            pos = nl + 1;
            self.emit_full(out)?;
        }
        if pos < chunk.len() {
            if chunk.len() - pos > MAX_TAIL {
                return self.leave(out, chunk.slice(pos..));
            }
            self.tail.extend_from_slice(&chunk[pos..]);
        }
        Ok(Fed::All)
    }

    /// The end of the input: the kept start of a line is read as the last line. Returns it
    /// when the fast path does not take it (the rows read so far are then in `out`).
    pub(crate) fn finish(
        &mut self,
        at: &mut Position,
        out: &mut Vec<RecordBatch>,
    ) -> Result<Option<Bytes>, ArrowError> {
        let line = std::mem::take(&mut self.tail).freeze();
        if !line.is_empty() {
            if !clean(&line) || !self.row(&line) {
                self.flush(out)?;
                return Ok(Some(line));
            }
            at.offset += line.len() as u64;
        }
        self.flush(out)?;
        Ok(None)
    }

    /// The rows read so far, as a batch in `out`.
    pub(crate) fn flush(&mut self, out: &mut Vec<RecordBatch>) -> Result<(), ArrowError> {
        if self.rows > 0 {
            out.push(self.take_batch()?);
        }
        Ok(())
    }

    fn leave(&mut self, out: &mut Vec<RecordBatch>, rest: Bytes) -> Result<Fed, ArrowError> {
        self.flush(out)?;
        Ok(Fed::Rest(rest))
    }

    fn emit_full(&mut self, out: &mut Vec<RecordBatch>) -> Result<(), ArrowError> {
        if self.rows >= self.batch_size {
            self.flush(out)?;
        }
        Ok(())
    }

    /// Read one line into the columns; `false` (columns unchanged) when the fast path does not
    /// take it. A blank line is taken and yields no row.
    fn row(&mut self, line: &[u8]) -> bool {
        let mut p = ws(line, 0);
        if p == line.len() {
            return true;
        }
        if self.object(line, &mut p) && ws(line, p) == line.len() && self.close_row() {
            self.rows += 1;
            self.taken += 1;
            return true;
        }
        for c in &mut self.columns {
            c.truncate(self.rows);
        }
        false
    }

    /// Nulls for the fields the row did not name; `false` when one is not nullable.
    fn close_row(&mut self) -> bool {
        for (f, c) in self.columns.iter_mut().enumerate() {
            if self.seen[f] != self.stamp {
                if !c.nullable {
                    return false;
                }
                c.push_null();
            }
        }
        true
    }

    fn object(&mut self, s: &[u8], p: &mut usize) -> bool {
        if s.get(*p) != Some(&b'{') {
            return false;
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.fill(0);
            self.stamp = 1;
        }
        *p = ws(s, *p + 1);
        if s.get(*p) == Some(&b'}') {
            *p += 1;
            return true;
        }
        let mut next = 0;
        loop {
            // The key after the last is most often the next field's: its quoted name is
            // matched whole, without searching for the closing quote.
            let field = match self.quoted.get(next) {
                Some(q)
                    if !q.is_empty()
                        && s.len() - *p >= q.len()
                        && same_key(&s[*p..*p + q.len()], q) =>
                {
                    *p += q.len();
                    Some(next)
                }
                _ => {
                    let Some((key, false)) = string(s, p) else {
                        return false;
                    };
                    self.field(key, next)
                }
            };
            *p = ws(s, *p);
            if s.get(*p) != Some(&b':') {
                return false;
            }
            *p = ws(s, *p + 1);
            match field {
                Some(f) => {
                    if self.seen[f] == self.stamp {
                        return false;
                    }
                    self.seen[f] = self.stamp;
                    let Some(tok) = token(s, p) else {
                        return false;
                    };
                    if !self.take(f, tok) {
                        return false;
                    }
                    next = f + 1;
                }
                None => {
                    if self.strict || !skip(s, p) {
                        return false;
                    }
                }
            }
            *p = ws(s, *p);
            match s.get(*p) {
                Some(b',') => *p = ws(s, *p + 1),
                Some(b'}') => {
                    *p += 1;
                    return true;
                }
                _ => return false,
            }
        }
    }

    /// The field named `key`, trying `next` (the one after the last) first.
    fn field(&self, key: &[u8], next: usize) -> Option<usize> {
        if self.names.get(next).is_some_and(|n| same_key(n, key)) {
            return Some(next);
        }
        match &self.index {
            Some(m) => m.get(key).copied(),
            None => self.names.iter().position(|n| same_key(n, key)),
        }
    }

    /// Append `tok` to column `f`; `false` when it does not read into it unchanged.
    fn take(&mut self, f: usize, tok: Token<'_>) -> bool {
        let c = &mut self.columns[f];
        if matches!(tok, Token::Null) {
            if !c.nullable {
                return false;
            }
            c.push_null();
            return true;
        }
        let ok = match (&c.kind, tok, &mut c.data) {
            (Kind::Bool, Token::Bool(b), Data::Bool(v)) => {
                v.push(b);
                true
            }
            (Kind::Int { min, max }, Token::Num(n), Data::I64(v)) => match integer(n) {
                Some(x) if *min <= x && x <= *max => {
                    v.push(x);
                    true
                }
                _ => false,
            },
            (Kind::F64, Token::Num(n), Data::F64(v)) => match float(n, false) {
                Some(x) => {
                    v.push(x);
                    true
                }
                None => false,
            },
            (Kind::F32, Token::Num(n), Data::F32(v)) => match float(n, true) {
                // `float` parsed it as an f32.
                Some(x) => {
                    v.push(x as f32);
                    true
                }
                None => false,
            },
            (Kind::Str, tok, Data::Str { offsets, bytes }) => {
                match tok {
                    Token::Str(raw, false) => bytes.extend_from_slice(raw),
                    Token::Str(raw, true) => unescape(raw, bytes),
                    Token::Num(n) => bytes.extend_from_slice(n),
                    Token::Bool(true) => bytes.extend_from_slice(b"true"),
                    Token::Bool(false) => bytes.extend_from_slice(b"false"),
                    Token::Null => unreachable!("nulls are taken above"),
                }
                offsets.push(bytes.len() as i64);
                true
            }
            (Kind::Ts(unit, zone), Token::Str(raw, escaped), Data::I64(v)) => {
                match timestamp(raw, escaped, *unit, zone.as_ref(), &mut self.scratch) {
                    Some(x) => {
                        v.push(x);
                        true
                    }
                    None => false,
                }
            }
            (Kind::Date32, Token::Str(raw, escaped), Data::I32(v)) => {
                let t = text(raw, escaped, &mut self.scratch);
                match t.and_then(date) {
                    Some(x) => {
                        v.push(x);
                        true
                    }
                    None => false,
                }
            }
            _ => false,
        };
        if ok {
            c.valid.push(true);
        }
        ok
    }

    fn take_batch(&mut self) -> Result<RecordBatch, ArrowError> {
        let rows = std::mem::take(&mut self.rows);
        let cap = rows.min(self.batch_size);
        let arrays = self
            .columns
            .iter_mut()
            .map(|c| c.finish(rows, cap))
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        RecordBatch::try_new(self.schema.clone(), arrays)
    }
}

impl Column {
    fn push_null(&mut self) {
        self.valid.push(false);
        match &mut self.data {
            Data::Bool(v) => v.push(false),
            Data::I64(v) => v.push(0),
            Data::I32(v) => v.push(0),
            Data::F64(v) => v.push(0.0),
            Data::F32(v) => v.push(0.0),
            Data::Str { offsets, bytes } => offsets.push(bytes.len() as i64),
        }
    }

    fn truncate(&mut self, rows: usize) {
        self.valid.truncate(rows);
        match &mut self.data {
            Data::Bool(v) => v.truncate(rows),
            Data::I64(v) => v.truncate(rows),
            Data::I32(v) => v.truncate(rows),
            Data::F64(v) => v.truncate(rows),
            Data::F32(v) => v.truncate(rows),
            Data::Str { offsets, bytes } => {
                offsets.truncate(rows + 1);
                bytes.truncate(offsets[rows] as usize);
            }
        }
    }

    /// The column's `rows` values as an array, leaving it empty (with room for `cap`).
    fn finish(&mut self, rows: usize, cap: usize) -> Result<ArrayRef, ArrowError> {
        let valid = std::mem::replace(&mut self.valid, Vec::with_capacity(cap));
        debug_assert_eq!(valid.len(), rows);
        let nulls = valid.iter().any(|v| !v).then(|| NullBuffer::from(valid));
        let buffer = match &mut self.data {
            Data::Bool(v) => {
                let v = std::mem::replace(v, Vec::with_capacity(cap));
                return Ok(std::sync::Arc::new(BooleanArray::new(
                    BooleanBuffer::from(v),
                    nulls,
                )));
            }
            Data::I64(v) => {
                let v = std::mem::replace(v, Vec::with_capacity(cap));
                match self.ty {
                    DataType::Int8 => Buffer::from_vec(narrow::<i8>(v)),
                    DataType::Int16 => Buffer::from_vec(narrow::<i16>(v)),
                    DataType::Int32 => Buffer::from_vec(narrow::<i32>(v)),
                    DataType::UInt8 => Buffer::from_vec(narrow::<u8>(v)),
                    DataType::UInt16 => Buffer::from_vec(narrow::<u16>(v)),
                    DataType::UInt32 => Buffer::from_vec(narrow::<u32>(v)),
                    _ => Buffer::from_vec(v),
                }
            }
            Data::I32(v) => Buffer::from_vec(std::mem::replace(v, Vec::with_capacity(cap))),
            Data::F64(v) => Buffer::from_vec(std::mem::replace(v, Vec::with_capacity(cap))),
            Data::F32(v) => Buffer::from_vec(std::mem::replace(v, Vec::with_capacity(cap))),
            Data::Str { offsets, bytes } => {
                let size = bytes.len();
                let bytes = std::mem::replace(bytes, Vec::with_capacity(size));
                let mut fresh = Vec::with_capacity(cap + 1);
                fresh.push(0);
                let offsets = std::mem::replace(offsets, fresh);
                let offsets = match self.ty {
                    DataType::LargeUtf8 => Buffer::from_vec(offsets),
                    _ => {
                        let Ok(last) = i32::try_from(size) else {
                            return Err(ArrowError::JsonError(
                                "offset overflow decoding Utf8".into(),
                            ));
                        };
                        debug_assert!(offsets.last() == Some(&i64::from(last)));
                        Buffer::from_vec(offsets.into_iter().map(|o| o as i32).collect())
                    }
                };
                let data = ArrayData::builder(self.ty.clone())
                    .len(rows)
                    .add_buffer(offsets)
                    .add_buffer(Buffer::from_vec(bytes))
                    .nulls(nulls)
                    .build()?;
                return Ok(make_array(data));
            }
        };
        let data = ArrayData::builder(self.ty.clone())
            .len(rows)
            .add_buffer(buffer)
            .nulls(nulls)
            .build()?;
        Ok(make_array(data))
    }
}

/// Values known to be in range of `T`, narrowed.
fn narrow<T: TryFrom<i64> + Default>(v: Vec<i64>) -> Vec<T> {
    v.into_iter()
        .map(|x| T::try_from(x).unwrap_or_default())
        .collect()
}

/// Whether `line` is UTF-8 without a control byte but its end (`\n`, or `\r\n`). One
/// vectorised pass tells an ASCII line without control bytes, by far the most common kind.
fn clean(line: &[u8]) -> bool {
    let body = line
        .strip_suffix(b"\r\n")
        .or_else(|| line.strip_suffix(b"\n"))
        .unwrap_or(line);
    let (mut high, mut control) = (0u8, false);
    let mut blocks = body.chunks_exact(32);
    for block in &mut blocks {
        for &b in block {
            high |= b;
            control |= b < 0x20;
        }
    }
    for &b in blocks.remainder() {
        high |= b;
        control |= b < 0x20;
    }
    !control && (high < 0x80 || std::str::from_utf8(line).is_ok())
}

/// Key equality for short keys without a call to memcmp (most keys are under 17 bytes).
#[inline]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    match n {
        0..8 => a.iter().zip(b).all(|(x, y)| x == y),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// JSON whitespace but the newline that ends a line.
fn ws(s: &[u8], mut p: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\r') = s.get(p) {
        p += 1;
    }
    p
}

/// The string at `s[*p]` (a `"`): its text between the quotes and whether it has escapes.
/// `None` for a `\u` escape, an escape JSON does not have, or no closing quote.
fn string<'a>(s: &'a [u8], p: &mut usize) -> Option<(&'a [u8], bool)> {
    if s.get(*p) != Some(&b'"') {
        return None;
    }
    let start = *p + 1;
    let mut i = start;
    let mut escaped = false;
    loop {
        i += quote_or_backslash(s.get(i..)?)?;
        if s[i] == b'"' {
            *p = i + 1;
            return Some((&s[start..i], escaped));
        }
        match s.get(i + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
            _ => return None,
        }
        escaped = true;
        i += 2;
    }
}

/// The scalar value at `s[*p]`; `None` for an object, a list or anything not JSON.
fn token<'a>(s: &'a [u8], p: &mut usize) -> Option<Token<'a>> {
    match *s.get(*p)? {
        b'"' => string(s, p).map(|(t, e)| Token::Str(t, e)),
        b'-' | b'0'..=b'9' => number(s, p).map(Token::Num),
        b't' => literal(s, p, b"true").then_some(Token::Bool(true)),
        b'f' => literal(s, p, b"false").then_some(Token::Bool(false)),
        b'n' => literal(s, p, b"null").then_some(Token::Null),
        _ => None,
    }
}

fn literal(s: &[u8], p: &mut usize, word: &[u8]) -> bool {
    if s[*p..].starts_with(word) {
        *p += word.len();
        return true;
    }
    false
}

/// A number in JSON's grammar at `s[*p]` ([`number_end`]).
fn number<'a>(s: &'a [u8], p: &mut usize) -> Option<&'a [u8]> {
    let start = *p;
    *p = number_end(s, start)?;
    Some(&s[start..*p])
}

/// Skip the value at `s[*p]` (of a key not in the schema); `false` when it is not JSON
/// ([`skip_value`]) or holds an escape the fast path leaves to arrow-json (`\u`, which
/// arrow-json refuses when it is half a surrogate pair, or one JSON does not have).
fn skip(s: &[u8], p: &mut usize) -> bool {
    let Some(end) = skip_value(s, *p) else {
        return false;
    };
    let value = &s[*p..end];
    let mut i = 0;
    while let Some(j) = memchr::memchr(b'\\', &value[i..]) {
        match value.get(i + j + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += j + 2,
            _ => return false,
        }
    }
    *p = end;
    true
}

/// An integer token (no fraction or exponent) as an i64; `None` past its range.
fn integer(n: &[u8]) -> Option<i64> {
    let (neg, digits) = match n.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, n),
    };
    let mut v: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let d = i64::from(b - b'0');
        v = v.checked_mul(10).and_then(|v| {
            if neg {
                v.checked_sub(d)
            } else {
                v.checked_add(d)
            }
        })?;
    }
    Some(v)
}

/// A number token read as arrow-json reads it into a FLOAT (`narrow`) or DOUBLE; `None` when
/// it would overflow or vanish ([`number_keeps_float`]).
fn float(n: &[u8], narrow: bool) -> Option<f64> {
    // A number token is ASCII (`number`).
    let t = std::str::from_utf8(n).ok()?;
    let v = if narrow {
        f64::from(Float32Type::parse(t)?)
    } else {
        Float64Type::parse(t)?
    };
    if !number_keeps_float(n, narrow) {
        return None;
    }
    Some(v)
}

/// A string token's text, unescaped into `scratch` when it has escapes.
fn text<'a>(raw: &'a [u8], escaped: bool, scratch: &'a mut Vec<u8>) -> Option<&'a str> {
    let bytes = if escaped {
        scratch.clear();
        unescape(raw, scratch);
        &scratch[..]
    } else {
        raw
    };
    // The line was checked to be UTF-8, and escapes of ASCII keep it so.
    std::str::from_utf8(bytes).ok()
}

/// Append the text of `raw` (escapes checked by [`string`]; no `\u`) to `out`.
fn unescape(raw: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while let Some(j) = memchr::memchr(b'\\', &raw[i..]) {
        out.extend_from_slice(&raw[i..i + j]);
        out.push(match raw[i + j + 1] {
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            other => other,
        });
        i += j + 2;
    }
    out.extend_from_slice(&raw[i..]);
}

/// A TIMESTAMP's value for a string token (`raw`, with `escaped`), as arrow-json reads it;
/// `None` when it would change it or cannot read it. The common UTC text is read on its bytes
/// ([`utc_timestamp`]); other text by arrow's parser.
pub(crate) fn timestamp(
    raw: &[u8],
    escaped: bool,
    unit: TimeUnit,
    zone: Option<&Tz>,
    scratch: &mut Vec<u8>,
) -> Option<i64> {
    if !escaped
        && zone.is_some()
        && let Some(v) = utc_timestamp(raw, unit)
    {
        return v;
    }
    general_timestamp(text(raw, escaped, scratch)?, unit, zone)
}

/// [`timestamp`] by arrow's parser, after the exactness check.
pub(crate) fn general_timestamp(t: &str, unit: TimeUnit, zone: Option<&Tz>) -> Option<i64> {
    if crate::exact::timestamp_text_misfits(t, unit, zone.is_none()) {
        return None;
    }
    match zone {
        None => in_unit(string_to_datetime(&Utc, t).ok()?, unit),
        Some(z) => in_unit(string_to_datetime(z, t).ok()?, unit),
    }
}

fn in_unit<Z: TimeZone>(d: DateTime<Z>, unit: TimeUnit) -> Option<i64> {
    match unit {
        TimeUnit::Second => Some(d.timestamp()),
        TimeUnit::Millisecond => Some(d.timestamp_millis()),
        TimeUnit::Microsecond => Some(d.timestamp_micros()),
        TimeUnit::Nanosecond => d.timestamp_nanos_opt(),
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.f]Z` (a fraction of 1 to 9 digits), the most common timestamp text,
/// read without arrow's general parser: `Some(value)` as [`general_timestamp`] returns it (the
/// instant is the same whatever the column's zone), `None` for any other text (which the
/// general parser then reads).
pub(crate) fn utc_timestamp(t: &[u8], unit: TimeUnit) -> Option<Option<i64>> {
    let n = t.len();
    if !(20..=30).contains(&n) || t[n - 1] != b'Z' {
        return None;
    }
    let num = |from: usize, len: usize| -> Option<u32> {
        let mut v = 0u32;
        for &b in t.get(from..from + len)? {
            if !b.is_ascii_digit() {
                return None;
            }
            v = v * 10 + u32::from(b - b'0');
        }
        Some(v)
    };
    let seps = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if seps.iter().any(|&(i, c)| t[i] != c) {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    // The fraction: nanoseconds, and its digits.
    let (nanos, digits) = match n {
        20 => (0, 0),
        _ if t[19] == b'.' && n >= 22 => {
            let digits = n - 21;
            (num(20, digits)? * 10u32.pow(9 - digits as u32), digits)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d)?;
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + sec);
    let nanos = i64::from(nanos);
    // Digits past the unit that are not zero would be dropped: a misfit.
    let (per_second, step) = match unit {
        TimeUnit::Second => (1, 1_000_000_000),
        TimeUnit::Millisecond => (1_000, 1_000_000),
        TimeUnit::Microsecond => (1_000_000, 1_000),
        TimeUnit::Nanosecond => (1_000_000_000, 1),
    };
    if digits > 0 && nanos % step != 0 {
        return Some(None);
    }
    Some(
        secs.checked_mul(per_second)
            .and_then(|v| v.checked_add(nanos / step)),
    )
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`); `None` for a month or day that does not exist.
pub(crate) fn days_from_civil(y: u32, m: u32, d: u32) -> Option<i64> {
    let leap = y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400));
    let month_days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if d == 0 || d > month_days {
        return None;
    }
    let (y, m, d) = (i64::from(y) - i64::from(m <= 2), i64::from(m), i64::from(d));
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// A DATE's value for text, as arrow-json reads it; `None` when text has a time of day.
fn date(t: &str) -> Option<i32> {
    if crate::exact::date_text_changes(t) {
        return None;
    }
    Date32Type::parse(t)
}

#[cfg(test)]
#[path = "json_fast_tests.rs"]
mod tests;
