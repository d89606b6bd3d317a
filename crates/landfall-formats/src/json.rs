//! Newline-delimited JSON, decoded incrementally with arrow-json. Primitive values are coerced
//! to strings where the schema asks for strings (Auto Loader's default of string columns).
//! Keys the schema lacks are ignored, unless a [`SchemaPolicy`] asks to rescue them or report
//! them as new columns: the decoder is then strict, and records with such keys take the slow
//! path ([`crate::rescue`]).
//!
//! Decoding is permissive (the only mode for now): a file never fails for its content.
//!
//! - A value that does not fit its column, or that would change on its way in (`3.7` for a
//!   BIGINT: [`crate::json_exact`]), is null and its row is counted malformed; an object
//!   or array in a string column is kept as its JSON text instead (not malformed). See
//!   [`crate::json_permissive`] for the exact rules.
//! - A record that is not JSON, not an object, or cut by the end of the file is counted
//!   malformed and yields no row; the file's other records are still returned. A file of
//!   garbage is therefore all malformed records and no rows (one record per line).
//! - Empty lines are skipped. The last record needs no trailing newline.
//!
//! [`landfall_core::Decoder::malformed_rows`] counts malformed rows (kept or not), and
//! [`JsonDecoder::first_malformed`] tells where the first one starts and why.
//!
//! Well-formed input stays on arrow-json's fast path. Only when arrow-json rejects a batch (or
//! a chunk) are the records it held re-read by the slow path; the bytes handed to arrow-json
//! since its last flush are kept (zero-copy slices of the chunks) for that purpose.

use crate::conform::conform;
use crate::error::{FormatError, MalformedRecord, Tally};
use crate::json_fast::{FastJson, Fed};
use crate::json_permissive::{Bounds, End, Fixer, Position, build, salvage};
use crate::rescue::{INTERNAL_RESCUED, SchemaPolicy};
use arrow::array::{Array, AsArray, RecordBatch};
use arrow_json::reader::Decoder as JsonInner;
use arrow_schema::SchemaRef;
use arrow_schema::{DataType, Field, Schema};
use bytes::{Bytes, BytesMut};
use landfall_core::seams::SeamResult;
use std::sync::Arc;

pub struct JsonDecoder {
    path: String,
    schema: SchemaRef,
    batch_size: usize,
    /// arrow-json's decoder for `decode_schema` (built once the schema is final).
    inner: Option<JsonInner>,
    /// What `inner` read since its last flush: the records a failed flush must re-read.
    pending: Vec<Bytes>,
    /// File position of the first unresolved byte (of `pending`, else of `carry`).
    at: Position,
    /// A record the slow path could not finish yet (pending is then empty).
    carry: BytesMut,
    /// The slow path met a broken record with no newline yet: drop bytes up to the next one.
    skip_line: bool,
    fixer: Option<Fixer>,
    tally: Tally,
    policy: SchemaPolicy,
    /// The rescued column's own name (the policy holds the internal one).
    rescued_name: Option<String>,
    /// `mode = "drop_malformed"`: a record with a value lost to null yields no row.
    drop_malformed: bool,
    /// What arrow-json decodes: `schema` with the rescued column under an internal name, plus
    /// the path columns (known keys, dropped from the output).
    decode_schema: SchemaRef,
    /// Columns of `decode_schema` whose literals arrow-json could change (decimals, numbers,
    /// dates, timestamps), and the syntax check: a batch holding such a value, or text that
    /// is not strict JSON, takes the slow path.
    exact: crate::json_exact::ExactColumns,
    /// Columns read as text and parsed with `timestamp_format` / `date_format`: name, type,
    /// chrono format.
    parsed: Vec<(String, DataType, String)>,
    /// Rows rescued after decoding (a value that did not match its format, in a row with
    /// nothing else rescued).
    late_rescued: u64,
    /// The one-pass reader of plain lines ([`crate::json_fast`]), for schemas it reads. It
    /// reads while arrow-json holds nothing (no pending, carried or skipped bytes).
    fast: Option<FastJson>,
    /// Whether `fast` is used (tests compare the paths; a line too long to gather ends it).
    use_fast: bool,
    /// The file offset from which the fast path may read again: past the end of the last
    /// line it handed to arrow-json, so that it does not try the rest of a line (or of a
    /// file without newlines) after every batch arrow-json reads.
    fast_from: u64,
}

impl JsonDecoder {
    pub fn new(path: &str, schema: SchemaRef, batch_size: usize) -> Result<Self, FormatError> {
        let mut d = Self::unbuilt(path, schema, batch_size);
        d.build_inner()?;
        Ok(d)
    }

    /// [`Self::new`], [`Self::with_policy`] and [`Self::with_temporal`] in one, with arrow-json's
    /// decoder built once, for the final schema (a stream of small files builds one per file).
    pub fn configured(
        path: &str,
        schema: SchemaRef,
        batch_size: usize,
        policy: SchemaPolicy,
        temporal: &crate::TemporalFormats,
    ) -> Result<Self, FormatError> {
        let mut d = Self::unbuilt(path, schema, batch_size);
        d.apply_policy(policy);
        d.apply_temporal(temporal);
        d.fresh_fast();
        if d.fast.is_none() {
            d.build_inner()?;
        }
        // Else arrow-json's decoder is built when the fast path first hands it a line
        // ([`Self::inner`]): a stream of small well-formed files never builds one. Every
        // schema the fast path reads, arrow-json reads too, so no file that would have been
        // unreadable here is read instead.
        Ok(d)
    }

    /// The decoder for `schema` before its checked columns are noted and arrow-json's decoder
    /// is built.
    fn unbuilt(path: &str, schema: SchemaRef, batch_size: usize) -> Self {
        JsonDecoder {
            path: path.to_string(),
            schema: schema.clone(),
            batch_size,
            inner: None,
            pending: Vec::new(),
            at: Position { offset: 0, line: 1 },
            carry: BytesMut::new(),
            skip_line: false,
            fixer: None,
            tally: Tally::default(),
            policy: SchemaPolicy::default(),
            rescued_name: None,
            drop_malformed: false,
            parsed: Vec::new(),
            late_rescued: 0,
            exact: crate::json_exact::ExactColumns::of(schema.fields()),
            decode_schema: schema,
            fast: None,
            use_fast: true,
            fast_from: 0,
        }
    }

    /// arrow-json's decoder for the decode schema, at construction: a schema it cannot decode
    /// makes the file unreadable.
    fn build_inner(&mut self) -> Result<(), FormatError> {
        self.inner = Some(self.unreadable_unless_built()?);
        self.fresh_fast();
        Ok(())
    }

    fn unreadable_unless_built(&self) -> Result<JsonInner, FormatError> {
        build(
            self.decode_schema.clone(),
            self.batch_size,
            self.policy.watches_unknown(),
        )
        .map_err(|e| FormatError::Unreadable {
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }

    /// The fast reader for the decode schema and policy (at construction, before any input).
    fn fresh_fast(&mut self) {
        self.fast = FastJson::of(
            &self.decode_schema,
            self.batch_size,
            self.policy.watches_unknown(),
        );
    }

    /// Leave every line to arrow-json's path (tests compare the two).
    #[cfg(test)]
    pub(crate) fn without_fast_path(mut self) -> Self {
        self.use_fast = false;
        self
    }

    /// Rows read on the fast path.
    #[cfg(test)]
    pub(crate) fn fast_rows(&self) -> u64 {
        self.fast.as_ref().map_or(0, |f| f.taken)
    }

    /// Whether the fast reader reads next: arrow-json and the slow path hold nothing.
    fn fast_reads(&self) -> bool {
        self.use_fast
            && self.fast.is_some()
            && self.pending.is_empty()
            && self.carry.is_empty()
            && !self.skip_line
            && self.at.offset >= self.fast_from
    }

    /// Read `rest` on the fast path; what it returns goes to arrow-json's.
    fn push_fast(&mut self, rest: Bytes, out: &mut Vec<RecordBatch>) -> Result<Bytes, FormatError> {
        let fast = self.fast.as_mut().expect("fast_reads checked");
        let mut raw = Vec::new();
        let fed = fast.feed(rest, &mut self.at, &mut raw);
        let fed = fed.map_err(|e| self.malformed(e))?;
        for b in raw {
            out.push(self.output(b)?);
        }
        Ok(match fed {
            Fed::All => Bytes::new(),
            Fed::Rest(rest) => {
                match memchr::memchr(b'\n', &rest) {
                    Some(nl) => self.fast_from = self.at.offset + nl as u64 + 1,
                    // A line longer than the fast path gathers: the rest of the file is
                    // arrow-json's.
                    None => self.use_fast = false,
                }
                rest
            }
        })
    }

    /// Rescue values and report new columns as `policy` asks ([`crate::rescue`]). Records
    /// with keys the schema lacks then take the slow path.
    pub fn with_policy(mut self, policy: SchemaPolicy) -> Result<Self, FormatError> {
        self.apply_policy(policy);
        self.fresh_inner()?;
        self.fresh_fast();
        Ok(self)
    }

    fn apply_policy(&mut self, policy: SchemaPolicy) {
        let mut fields: Vec<Field> = self
            .schema
            .fields()
            .iter()
            .map(|f| {
                if Some(f.name()) == policy.rescued_column.as_ref() {
                    f.as_ref().clone().with_name(INTERNAL_RESCUED)
                } else {
                    f.as_ref().clone()
                }
            })
            .collect();
        for p in &policy.path_columns {
            if !fields.iter().any(|f| f.name().eq_ignore_ascii_case(p)) {
                fields.push(Field::new(p, DataType::Utf8, true));
            }
        }
        self.set_decode_schema(Schema::new(fields));
        if let Some(r) = &policy.rescued_column {
            self.rescued_name = Some(r.clone());
            self.policy = SchemaPolicy {
                rescued_column: Some(INTERNAL_RESCUED.to_string()),
                ..policy
            };
        } else {
            self.policy = policy;
        }
    }

    /// `drop`: leave malformed records out instead of keeping them with nulls; `collect`:
    /// keep every malformed record's detail ([`landfall_core::Decoder::take_malformed`]).
    pub fn with_malformed(mut self, drop: bool, collect: bool) -> Self {
        self.drop_malformed = drop;
        self.tally.collect = collect;
        self
    }

    /// Read TIMESTAMP and DATE columns as text and parse them with these chrono formats
    /// (`timestamp_format`, `date_format`). Call after [`Self::with_policy`].
    pub fn with_temporal(mut self, t: &crate::TemporalFormats) -> Result<Self, FormatError> {
        if self.apply_temporal(t) {
            self.fresh_inner()?;
            self.fresh_fast();
        }
        Ok(self)
    }

    /// The decode schema for `t`; whether it changed.
    fn apply_temporal(&mut self, t: &crate::TemporalFormats) -> bool {
        let mut fields: Vec<Field> = Vec::new();
        for f in self.decode_schema.fields() {
            match t.for_type(f.data_type()) {
                Some(fmt) if f.name() != INTERNAL_RESCUED => {
                    self.parsed
                        .push((f.name().clone(), f.data_type().clone(), fmt.to_string()));
                    fields.push(f.as_ref().clone().with_data_type(DataType::Utf8));
                }
                _ => fields.push(f.as_ref().clone()),
            }
        }
        if self.parsed.is_empty() {
            return false;
        }
        self.set_decode_schema(Schema::new(fields));
        true
    }

    /// Parse the columns read as text (`parsed`); a value that does not match its format is
    /// rescued when the stream has a rescued column, else null and its row malformed.
    fn parse_temporal(&mut self, b: RecordBatch) -> Result<RecordBatch, FormatError> {
        if self.parsed.is_empty() {
            return Ok(b);
        }
        let schema = b.schema();
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        let mut cols = b.columns().to_vec();
        let rescue_at = self
            .rescued_name
            .as_ref()
            .and_then(|n| schema.index_of(n).ok());
        let mut rescued: Option<Vec<Option<String>>> = rescue_at.map(|i| {
            let c = cols[i].as_string::<i32>();
            (0..c.len())
                .map(|r| c.is_valid(r).then(|| c.value(r).to_string()))
                .collect()
        });
        for (name, ty, fmt) in self.parsed.clone() {
            let Ok(i) = schema.index_of(&name) else {
                continue;
            };
            let text = cols[i].as_string::<i32>().clone();
            let Some((parsed, lost)) = crate::temporal::parse_with(&text, &ty, &fmt) else {
                continue;
            };
            for r in lost {
                let value = text.value(r).to_string();
                match rescued.as_mut() {
                    Some(rows) => {
                        let mut m: serde_json::Map<String, serde_json::Value> = rows[r]
                            .as_deref()
                            .and_then(|t| serde_json::from_str(t).ok())
                            .unwrap_or_default();
                        if m.is_empty() {
                            self.late_rescued += 1;
                            m.insert(
                                crate::RESCUED_FILE_KEY.into(),
                                serde_json::Value::String(self.path.clone()),
                            );
                        }
                        m.insert(name.clone(), serde_json::Value::String(value));
                        rows[r] = Some(serde_json::Value::Object(m).to_string());
                    }
                    None => {
                        let path = self.path.clone();
                        let reason = format!("column `{name}`: {value:?} does not match {fmt:?}");
                        self.tally.note(|| MalformedRecord {
                            path,
                            line: 0,
                            offset: 0,
                            reason,
                            record: None,
                        });
                    }
                }
            }
            fields[i] = fields[i].clone().with_data_type(ty.clone());
            cols[i] = parsed;
        }
        if let (Some(i), Some(rows)) = (rescue_at, rescued) {
            cols[i] = Arc::new(arrow::array::StringArray::from(rows));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).map_err(|e| self.malformed(e))
    }

    /// A batch of `decode_schema` as the stream's `schema`: the rescued column under its own
    /// name, path columns dropped, formatted temporal columns parsed.
    fn output(&mut self, b: RecordBatch) -> Result<RecordBatch, FormatError> {
        let b = match &self.rescued_name {
            Some(name) => {
                let fields: Vec<Field> = b
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| {
                        if f.name() == INTERNAL_RESCUED {
                            f.as_ref().clone().with_name(name)
                        } else {
                            f.as_ref().clone()
                        }
                    })
                    .collect();
                RecordBatch::try_new(Arc::new(Schema::new(fields)), b.columns().to_vec())
                    .map_err(|e| self.malformed(e))?
            }
            None => b,
        };
        let b = self.parse_temporal(b)?;
        conform(&self.path, b, &self.schema)
    }

    /// The first record that did not fit: where it starts and why.
    pub fn first_malformed(&self) -> Option<&MalformedRecord> {
        self.tally.first.as_ref()
    }

    fn malformed(&self, reason: impl ToString) -> FormatError {
        FormatError::Malformed {
            path: self.path.clone(),
            format: "JSON",
            line: self.at.line,
            offset: self.at.offset,
            reason: reason.to_string(),
        }
    }

    /// Decode into `schema` from now on (its checked columns noted once, here).
    fn set_decode_schema(&mut self, schema: Schema) {
        self.exact = crate::json_exact::ExactColumns::of(schema.fields());
        self.decode_schema = Arc::new(schema);
    }

    fn fresh_inner(&mut self) -> Result<(), FormatError> {
        self.inner = Some(
            build(
                self.decode_schema.clone(),
                self.batch_size,
                self.policy.watches_unknown(),
            )
            .map_err(|e| self.malformed(e))?,
        );
        Ok(())
    }

    /// arrow-json's decoder, built now if the fast path read every line so far.
    fn inner(&mut self) -> Result<&mut JsonInner, FormatError> {
        if self.inner.is_none() {
            self.inner = Some(self.unreadable_unless_built()?);
        }
        Ok(self.inner.as_mut().expect("just built"))
    }

    /// The pending bytes as one buffer, leaving none pending.
    fn take_pending(&mut self) -> Bytes {
        match self.pending.len() {
            0 => Bytes::new(),
            1 => self.pending.pop().expect("one pending slice"),
            _ => {
                let mut buf = BytesMut::new();
                for p in self.pending.drain(..) {
                    buf.extend_from_slice(&p);
                }
                buf.freeze()
            }
        }
    }

    /// `inner` flushed its records: they are resolved.
    fn settle(&mut self) {
        for p in self.pending.drain(..) {
            self.at.offset += p.len() as u64;
            // memchr counts with SIMD (its iterator's `count` is specialised).
            self.at.line += memchr::memchr_iter(b'\n', &p).count() as u64;
        }
    }

    fn flush(&mut self, out: &mut Vec<RecordBatch>) -> Result<bool, FormatError> {
        if self.inner.is_none() {
            // arrow-json read nothing yet: nothing is pending.
            debug_assert!(self.pending.is_empty());
            return Ok(true);
        }
        match self.inner()?.flush() {
            Ok(_) if !self.pending_values_land() => Ok(false),
            Ok(batch) => {
                self.settle();
                if let Some(b) = batch {
                    out.push(self.output(b)?);
                }
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// Whether the pending records' values land unchanged (arrow-json would cut a decimal's
    /// extra digits, truncate `3.7` into a BIGINT, ...: [`crate::json_exact`]).
    fn pending_values_land(&self) -> bool {
        let d = &self.exact;
        match self.pending.len() {
            0 => true,
            1 => d.all_fit(&self.pending[0]),
            _ => d.all_fit(&self.pending.concat()),
        }
    }

    /// Re-read `buf` (which starts at `self.at`) on the slow path, emit what it yields, and
    /// return the bytes left for the fast path. `inner` is replaced: after an error its state
    /// is unspecified, and when it held records they are all in `buf`.
    fn salvage(
        &mut self,
        buf: Bytes,
        bounds: Bounds,
        out: &mut Vec<RecordBatch>,
    ) -> Result<Bytes, FormatError> {
        debug_assert!(self.pending.is_empty() && self.carry.is_empty());
        let fixer = self.fixer.get_or_insert_with(|| {
            let mut f = Fixer::new(self.decode_schema.clone(), self.policy.clone(), &self.path);
            f.drop_malformed = self.drop_malformed;
            f.collect_malformed = self.tally.collect;
            f
        });
        let s = salvage(fixer, &self.path, &buf, self.at, bounds);
        self.tally.absorb(s.tally);
        self.fresh_inner()?;
        if !s.text.is_empty() {
            self.emit(&s.text, out)?;
        }
        self.at = s.next;
        let rest = buf.slice(s.consumed..);
        match s.end {
            End::Done => Ok(rest),
            End::Carry => {
                self.carry.extend_from_slice(&rest);
                Ok(Bytes::new())
            }
            End::SkipLine => {
                self.skip_line = true;
                Ok(Bytes::new())
            }
        }
    }

    /// Decode records the slow path made to fit (they cannot fail but for a bug).
    fn emit(&mut self, mut text: &[u8], out: &mut Vec<RecordBatch>) -> Result<(), FormatError> {
        loop {
            let used = self.inner()?.decode(text).map_err(|e| self.malformed(e))?;
            text = &text[used..];
            if let Some(b) = self.inner()?.flush().map_err(|e| self.malformed(e))? {
                out.push(self.output(b)?);
            }
            if text.is_empty() {
                return Ok(());
            }
        }
    }

    fn push_inner(
        &mut self,
        mut rest: Bytes,
        out: &mut Vec<RecordBatch>,
    ) -> Result<(), FormatError> {
        while !rest.is_empty() {
            // Bytes the fast path hands back go to arrow-json: `fast_from` is past them.
            if self.fast_reads() {
                rest = self.push_fast(rest, out)?;
                continue;
            }
            if self.skip_line {
                match rest.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        self.at.offset += i as u64 + 1;
                        self.at.line += 1;
                        rest = rest.slice(i + 1..);
                        self.skip_line = false;
                    }
                    None => {
                        self.at.offset += rest.len() as u64;
                        return Ok(());
                    }
                }
                continue;
            }
            if !self.carry.is_empty() {
                let stop_at = self.carry.len();
                let mut buf = std::mem::take(&mut self.carry);
                buf.extend_from_slice(&rest);
                let bounds = Bounds {
                    stop_at,
                    until_bad: false,
                    last: false,
                };
                rest = self.salvage(buf.freeze(), bounds, out)?;
                continue;
            }
            match self.inner()?.decode(&rest) {
                Ok(used) => {
                    self.pending.push(rest.slice(..used));
                    rest = rest.slice(used..);
                    // `decode` stops early only when a batch is full, at a record boundary.
                    // When it used the whole chunk, a record may be half read: flushing then
                    // would cut it, so wait for the next chunk or `finish`.
                    // The slow path reads on past the pending bytes: a record it refuses takes
                    // the rest of its line with it (a full batch may end inside a line, after
                    // a value that is not a record: `0` of `0&x`).
                    if !rest.is_empty() && !self.flush(out)? {
                        let buf = self.take_pending();
                        let bounds = Bounds {
                            stop_at: buf.len(),
                            until_bad: false,
                            last: false,
                        };
                        rest = self.salvage(concat(&buf, rest), bounds, out)?;
                    }
                }
                Err(_) => {
                    // Somewhere in `rest` (or in what is pending) arrow-json met bytes it
                    // cannot read. Re-read the pending records and then `rest` until past a
                    // malformed record, then go back to the fast path.
                    let pending = self.take_pending();
                    let bounds = Bounds {
                        stop_at: pending.len(),
                        until_bad: true,
                        last: false,
                    };
                    rest = self.salvage(concat(&pending, rest), bounds, out)?;
                }
            }
        }
        Ok(())
    }
}

/// `head` then `tail`, copying only when `head` is not empty.
fn concat(head: &[u8], tail: Bytes) -> Bytes {
    if head.is_empty() {
        return tail;
    }
    let mut joined = BytesMut::with_capacity(head.len() + tail.len());
    joined.extend_from_slice(head);
    joined.extend_from_slice(&tail);
    joined.freeze()
}

impl landfall_core::Decoder for JsonDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        self.push_inner(chunk, &mut out)?;
        Ok(out)
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        if self.fast_reads() {
            let fast = self.fast.as_mut().expect("fast_reads checked");
            let mut raw = Vec::new();
            let left = fast.finish(&mut self.at, &mut raw);
            let left = left.map_err(|e| self.malformed(e))?;
            for b in raw {
                out.push(self.output(b)?);
            }
            if let Some(line) = left {
                // The last line, unfinished or not one the fast path takes: arrow-json's.
                self.use_fast = false;
                self.push_inner(line, &mut out)?;
            }
        }
        let last = |stop_at| Bounds {
            stop_at,
            until_bad: false,
            last: true,
        };
        if !self.carry.is_empty() {
            let buf = std::mem::take(&mut self.carry).freeze();
            self.salvage(buf.clone(), last(buf.len()), &mut out)?;
        } else if !self.flush(&mut out)? {
            // A record cut by the end of the file, or a misfit in the last batch.
            let buf = self.take_pending();
            self.salvage(buf.clone(), last(buf.len()), &mut out)?;
        }
        Ok(out)
    }

    fn malformed_rows(&self) -> u64 {
        self.tally.rows
    }

    fn rescued_rows(&self) -> u64 {
        self.fixer.as_ref().map_or(0, |f| f.rescued_rows) + self.late_rescued
    }

    fn take_malformed(&mut self) -> Vec<MalformedRecord> {
        std::mem::take(&mut self.tally.records)
    }

    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        self.fixer
            .as_ref()
            .map(|f| f.new_columns.fields().to_vec())
            .unwrap_or_default()
    }

    fn start_at(&mut self, line: u64, offset: u64) {
        self.at = Position { offset, line };
    }

    fn first_malformed(&self) -> Option<String> {
        self.tally
            .first
            .as_ref()
            .map(|m| format!("line {} (byte {}): {}", m.line, m.offset, m.reason))
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
