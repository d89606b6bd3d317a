//! The slow path of the JSON decoder, taken only for bytes arrow-json rejected.
//!
//! Records are re-read one by one with serde_json. Each is first tried as-is against the schema
//! with arrow-json itself (so a record that fits decodes exactly as on the fast path, byte for
//! byte); a record that does not is rewritten value by value:
//!
//! - an object or array in a string column becomes its JSON text, whitespace removed (as Spark
//!   does); this alone does not make the row malformed;
//! - structs and lists are fixed member by member, so one misfit leaf nulls only itself;
//! - any other value arrow-json cannot convert (`"abc"` for BIGINT, an overflowing number, an
//!   object for DOUBLE, ...), or would convert into another value (`3.7` for BIGINT, `1e39`
//!   for FLOAT, digits past a decimal's scale: [`crate::json_exact`]), becomes null and the
//!   row is malformed.
//!
//! A record that is not JSON (or not an object) is malformed and yields no row; reading resumes
//! at the next line, so a garbage line costs one record, and a record cut by the end of the file
//! is malformed too. Fitting is decided by arrow-json (probing single values), never by a
//! re-implementation of its conversion rules; [`crate::json_exact`] only refuses, on top, the
//! literals arrow-json would accept changed.

use crate::error::{MalformedRecord, Tally};
use crate::json_exact::ExactColumns;
use crate::rescue::{NewColumns, RescuedRow, SchemaPolicy, json_value_type, minify};
use arrow_json::reader::{Decoder as JsonInner, ReaderBuilder};
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A decoder as the fast path builds it: strings accept any primitive (Auto Loader's default).
/// `strict`: a key the schema lacks is an error (the record then takes the slow path, which
/// rescues it or reports a new column).
pub(crate) fn build(
    schema: SchemaRef,
    batch_size: usize,
    strict: bool,
) -> Result<JsonInner, ArrowError> {
    ReaderBuilder::new(schema)
        .with_batch_size(batch_size)
        .with_coerce_primitive(true)
        .with_strict_mode(strict)
        .build_decoder()
}

/// File position of a buffer's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub offset: u64,
    /// 1-based line.
    pub line: u64,
}

/// How a salvage pass ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Everything up to `consumed` is resolved; the rest can go back to the fast path.
    Done,
    /// The bytes from `consumed` on are an unfinished record: wait for more.
    Carry,
    /// The record at the end is broken and has no newline yet: skip up to the next one.
    SkipLine,
}

pub(crate) struct Salvaged {
    /// The surviving records, fixed to fit, as NDJSON for a fresh arrow decoder.
    pub text: Vec<u8>,
    pub tally: Tally,
    pub consumed: usize,
    /// Position of `buf[consumed]`.
    pub next: Position,
    pub end: End,
}

/// What a salvage pass may read.
pub(crate) struct Bounds {
    /// Resolve at least the records starting before this index...
    pub stop_at: usize,
    /// ...and, if set, go on until one record was malformed (arrow rejected bytes somewhere in
    /// the buffer without saying where).
    pub until_bad: bool,
    /// The buffer ends the file: an unfinished record is malformed, not carried.
    pub last: bool,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Where reading resumes after a record refused to the end of its line from `from`: past
/// that line's newline (counted in `line`), or `None` when the line goes on past `buf`.
fn after_line(buf: &[u8], from: usize, line: &mut u64) -> Option<usize> {
    let i = buf[from..].iter().position(|&b| b == b'\n')?;
    *line += 1;
    Some(from + i + 1)
}

fn newlines(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c == b'\n').count() as u64
}

/// Re-read `buf` (starting at file position `at`) record by record.
pub(crate) fn salvage(
    fixer: &mut Fixer,
    path: &str,
    buf: &[u8],
    at: Position,
    bounds: Bounds,
) -> Salvaged {
    let mut text = Vec::new();
    let mut tally = Tally::collecting(fixer.collect_malformed);
    // Records that did not fit as they were: arrow-json rejected the buffer at one of them.
    let mut deviated = 0u64;
    let mut pos = 0;
    let mut line = at.line;
    let mut end = End::Done;
    loop {
        while pos < buf.len() && is_ws(buf[pos]) {
            line += u64::from(buf[pos] == b'\n');
            pos += 1;
        }
        if pos >= buf.len() || (pos >= bounds.stop_at && (!bounds.until_bad || deviated > 0)) {
            break;
        }
        let start = pos;
        let here = move |reason: String, record: &[u8]| MalformedRecord {
            path: path.to_string(),
            line,
            offset: at.offset + start as u64,
            reason,
            record: Some(MalformedRecord::text_of(record)),
        };
        let mut values = serde_json::Deserializer::from_slice(&buf[start..]).into_iter();
        match values.next() {
            Some(Ok(raw)) => {
                let raw: &RawValue = raw;
                let stop = start + values.byte_offset();
                match fixer.fix_record(raw) {
                    Fixed::Fits => text.extend_from_slice(raw.get().as_bytes()),
                    Fixed::Rewritten { text: t, misfit } => {
                        deviated += 1;
                        let dropped = misfit.is_some() && fixer.drop_malformed;
                        if let Some(reason) = misfit {
                            tally.note(|| here(reason, raw.get().as_bytes()));
                        }
                        if dropped {
                            // No row, and no newline either.
                            line += newlines(&buf[start..stop]);
                            pos = stop;
                            continue;
                        }
                        text.extend_from_slice(t.as_bytes());
                    }
                    Fixed::Rejected(reason) => {
                        // Not an object: the whole line is one malformed record, as when it
                        // is not JSON (`0&x` is one record, not `0` and then `&x`, however
                        // the file's bytes were cut into chunks).
                        deviated += 1;
                        let rest = &buf[stop..];
                        let eol = rest.iter().position(|&b| b == b'\n');
                        let junk = rest[..eol.unwrap_or(rest.len())].iter().any(|&b| !is_ws(b));
                        if junk {
                            let upto = eol.map_or(buf.len(), |i| stop + i);
                            tally.note(|| here(reason, &buf[start..upto]));
                            line += newlines(&buf[start..stop]);
                            match after_line(buf, stop, &mut line) {
                                Some(p) => {
                                    pos = p;
                                    continue;
                                }
                                None => {
                                    pos = buf.len();
                                    end = if bounds.last { end } else { End::SkipLine };
                                    break;
                                }
                            }
                        }
                        tally.note(|| here(reason, raw.get().as_bytes()));
                    }
                }
                text.push(b'\n');
                line += newlines(&buf[start..stop]);
                pos = stop;
            }
            Some(Err(e)) if e.is_eof() && !bounds.last => {
                end = End::Carry;
                break;
            }
            Some(Err(e)) => {
                let reason = if e.is_eof() {
                    "the file ends inside a record".to_string()
                } else {
                    format!("not JSON: {e}")
                };
                deviated += 1;
                let upto = buf[start..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(buf.len(), |i| start + i);
                tally.note(|| here(reason, &buf[start..upto]));
                // Resynchronise on the next line: the broken record ends there at the latest.
                match after_line(buf, start, &mut line) {
                    Some(p) => pos = p,
                    None => {
                        pos = buf.len();
                        end = if bounds.last { end } else { End::SkipLine };
                        break;
                    }
                }
            }
            None => break,
        }
    }
    Salvaged {
        text,
        tally,
        consumed: pos,
        next: Position {
            offset: at.offset + pos as u64,
            line,
        },
        end,
    }
}

pub(crate) enum Fixed {
    /// The record fits as it is.
    Fits,
    /// The record fits once rewritten; `misfit` says why the row is malformed, if it is.
    Rewritten {
        text: String,
        misfit: Option<String>,
    },
    /// No row can be made of it.
    Rejected(String),
}

/// Fits records and values to the schema, asking arrow-json which values fit.
pub(crate) struct Fixer {
    schema: SchemaRef,
    /// The schema's columns but the rescued one: what records are fitted to.
    data_fields: Fields,
    policy: SchemaPolicy,
    /// The file, as rescued objects name it.
    file: String,
    record: Option<JsonInner>,
    /// One single-column decoder per leaf type, reused until it fails.
    probes: HashMap<DataType, JsonInner>,
    /// The schema's columns whose literals arrow-json could change ([`crate::json_exact`]).
    exact: ExactColumns,
    pub new_columns: NewColumns,
    pub rescued_rows: u64,
    /// Records with a value lost to null yield no row (`mode = "drop_malformed"`).
    pub drop_malformed: bool,
    /// Keep every malformed record's detail (`bad_records_path`).
    pub collect_malformed: bool,
}

/// Where a value sits: its dotted path for messages and rescued keys, and its segments for
/// new columns (`None` inside a list: new fields of list elements are rescued, not added).
#[derive(Clone)]
struct At {
    path: String,
    segs: Option<Vec<String>>,
}

impl At {
    fn child(&self, name: &str) -> At {
        At {
            path: if self.path.is_empty() {
                name.to_string()
            } else {
                format!("{}.{name}", self.path)
            },
            segs: self.segs.as_ref().map(|s| {
                let mut s = s.clone();
                s.push(name.to_string());
                s
            }),
        }
    }

    fn item(&self, i: usize) -> At {
        At {
            path: format!("{}[{i}]", self.path),
            segs: None,
        }
    }
}

impl Fixer {
    pub fn new(schema: SchemaRef, policy: SchemaPolicy, file: &str) -> Self {
        let exact = ExactColumns::of(schema.fields());
        let data_fields: Fields = schema
            .fields()
            .iter()
            .filter(|f| Some(f.name()) != policy.rescued_column.as_ref())
            .cloned()
            .collect();
        Fixer {
            schema,
            data_fields,
            policy,
            file: file.to_string(),
            record: None,
            probes: HashMap::new(),
            exact,
            new_columns: NewColumns::default(),
            rescued_rows: 0,
            drop_malformed: false,
            collect_malformed: false,
        }
    }

    pub fn fix_record(&mut self, raw: &RawValue) -> Fixed {
        let schema = self.schema.clone();
        let strict = self.policy.watches_unknown();
        if Self::fits(&mut self.record, &schema, raw.get(), strict)
            && self.exact.all_fit(raw.get().as_bytes())
        {
            return Fixed::Fits;
        }
        if !raw.get().starts_with('{') {
            return Fixed::Rejected("a record must be a JSON object".into());
        }
        let mut misfit = None;
        let mut rescued = RescuedRow::default();
        let top = At {
            path: String::new(),
            segs: Some(Vec::new()),
        };
        let fields = self.data_fields.clone();
        match self.fix_object(raw, &fields, &top, &mut misfit, &mut rescued) {
            Some(mut text) => {
                if let Some(col) = &self.policy.rescued_column
                    && let Some(r) = rescued.finish(&self.file)
                {
                    self.rescued_rows += 1;
                    text.pop();
                    if text.len() > 1 {
                        text.push(',');
                    }
                    text.push_str(&serde_json::to_string(col).expect("a string serialises"));
                    text.push(':');
                    text.push_str(&serde_json::to_string(&r).expect("a string serialises"));
                    text.push('}');
                }
                Fixed::Rewritten { text, misfit }
            }
            None => Fixed::Rejected(misfit.unwrap_or_else(|| "does not fit the schema".into())),
        }
    }

    /// Whether `text` decodes with `slot`'s decoder (built for `schema` when missing). A
    /// decoder that failed is dropped: its state after an error is unspecified.
    fn fits(slot: &mut Option<JsonInner>, schema: &SchemaRef, text: &str, strict: bool) -> bool {
        if slot.is_none() {
            *slot = build(schema.clone(), 1, strict).ok();
        }
        let Some(d) = slot.as_mut() else {
            return false;
        };
        let ok = matches!(d.decode(text.as_bytes()), Ok(n) if n == text.len())
            && !d.has_partial_record()
            && d.flush().is_ok();
        if !ok {
            *slot = None;
        }
        ok
    }

    fn probe(&mut self, ty: &DataType, text: &str) -> bool {
        let mut slot = self.probes.remove(ty);
        let schema = Arc::new(Schema::new(vec![Field::new("v", ty.clone(), true)]));
        let record = format!("{{\"v\":{text}}}");
        // arrow-json would change some values (cut a decimal's digits, truncate a fraction
        // into an integer): such a value is a misfit.
        let ok = Self::fits(&mut slot, &schema, &record, false)
            && ExactColumns::of(schema.fields()).all_fit(record.as_bytes());
        if let Some(d) = slot {
            self.probes.insert(ty.clone(), d);
        }
        ok
    }

    /// The object rewritten to `fields`, or `None` when it cannot be (a NOT NULL member).
    /// Members `fields` lacks are rescued and noted as new columns, as the policy asks.
    fn fix_object(
        &mut self,
        raw: &RawValue,
        fields: &Fields,
        at: &At,
        misfit: &mut Option<String>,
        rescued: &mut RescuedRow,
    ) -> Option<String> {
        // The last of duplicate keys wins, as in arrow-json.
        let members: BTreeMap<String, &RawValue> = serde_json::from_str(raw.get()).ok()?;
        if self.policy.watches_unknown() {
            for (k, v) in &members {
                if fields.iter().any(|f| f.name() == k) {
                    continue;
                }
                let here = at.child(k);
                let case_only = fields.iter().any(|f| f.name().eq_ignore_ascii_case(k));
                if self.policy.detect_new_columns
                    && !case_only
                    && let Some(segs) = &here.segs
                {
                    let value: serde_json::Value =
                        serde_json::from_str(v.get()).unwrap_or(serde_json::Value::Null);
                    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
                    self.new_columns.note(
                        &segs,
                        json_value_type(
                            &value,
                            self.policy.infer_types,
                            self.policy.prefers_decimal.then_some(v.get()),
                        ),
                    );
                }
                if self.policy.rescued_column.is_some() {
                    rescued.put_raw(here.path, v.get());
                }
            }
        }
        let mut out = String::from("{");
        for f in fields {
            let Some(v) = members.get(f.name()) else {
                continue;
            };
            let here = at.child(f.name());
            let value = self.fix_value(v, f, &here, misfit, rescued);
            if value.is_none() && !f.is_nullable() {
                return None;
            }
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(f.name()).expect("a string serialises"));
            out.push(':');
            out.push_str(value.as_deref().unwrap_or("null"));
        }
        out.push('}');
        Some(out)
    }

    /// The value rewritten to fit `field`, or `None` for null (noting the first misfit, or
    /// rescuing the value when the policy has a rescued column).
    fn fix_value(
        &mut self,
        raw: &RawValue,
        field: &Field,
        at: &At,
        misfit: &mut Option<String>,
        rescued: &mut RescuedRow,
    ) -> Option<String> {
        let text = raw.get().trim();
        if text == "null" {
            return Some(text.to_string());
        }
        let path = at.path.as_str();
        let fixed = match field.data_type() {
            DataType::Struct(children) if text.starts_with('{') => {
                self.fix_object(raw, children, at, misfit, rescued)
            }
            DataType::List(child) | DataType::LargeList(child) if text.starts_with('[') => {
                self.fix_list(raw, child, at, misfit, rescued)
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                if text.starts_with('{') || text.starts_with('[') =>
            {
                Some(serde_json::to_string(&minify(text)).expect("a string serialises"))
            }
            ty => self.probe(ty, text).then(|| text.to_string()),
        };
        if fixed.is_none()
            && self.policy.widen_types
            && let Some(segs) = &at.segs
            && let Some(observed) = number_type(text, self.policy.prefers_decimal)
            && let Some(to) = landfall_core::type_widening::widened(field.data_type(), &observed)
        {
            // A wider column holds it: the batch is read again on the widened schema.
            let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
            self.new_columns.note_widening(&segs, to);
        }
        if fixed.is_none() && self.policy.rescued_column.is_some() && field.is_nullable() {
            // Kept whole in the rescued column; the column is null in this row.
            rescued.put_raw(path.to_string(), text);
            return Some("null".into());
        }
        if fixed.is_none() && misfit.is_none() {
            *misfit = Some(format!(
                "column `{path}`: {} does not fit {}",
                excerpt(text),
                landfall_core::ddl::type_to_ddl(field.data_type())
            ));
        }
        fixed
    }

    fn fix_list(
        &mut self,
        raw: &RawValue,
        child: &Field,
        at: &At,
        misfit: &mut Option<String>,
        rescued: &mut RescuedRow,
    ) -> Option<String> {
        let items: Vec<&RawValue> = serde_json::from_str(raw.get()).ok()?;
        let mut out = String::from("[");
        for (i, item) in items.iter().enumerate() {
            let value = self.fix_value(item, child, &at.item(i), misfit, rescued);
            if value.is_none() && !child.is_nullable() {
                return None;
            }
            if i > 0 {
                out.push(',');
            }
            out.push_str(value.as_deref().unwrap_or("null"));
        }
        out.push(']');
        Some(out)
    }
}

/// A value for an error message, cut to a readable length.
fn excerpt(text: &str) -> String {
    const MAX: usize = 40;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

/// The type inference gives a JSON number literal (`None` for anything else): an integer
/// BIGINT, or past BIGINT the DECIMAL of its digits (DOUBLE past 38), as a first schema types
/// it; a fraction DOUBLE, or with `json.prefers_decimal` the DECIMAL that holds it.
fn number_type(text: &str, prefers_decimal: bool) -> Option<DataType> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some(crate::infer_json::integer_literal_type(text.as_bytes()));
    }
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    if !value.is_number() {
        return None;
    }
    Some(json_value_type(
        &value,
        true,
        prefers_decimal.then_some(text),
    ))
}
