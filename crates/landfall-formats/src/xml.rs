//! XML, decoded as Spark's XML reader does: every element named `row_tag` (at any depth,
//! compared by local name) is one row.
//!
//! - Attributes become fields named with `attribute_prefix` (default `_`): `<a id="1">` gives
//!   `_id`. `xmlns` declarations are not data.
//! - Child elements become fields by local name (namespace prefixes are dropped): an element
//!   with only text is that text; one with attributes or children is a struct, its own text
//!   under `value_tag` (default `_VALUE`); an empty element is null.
//! - An element repeated under one parent is an array. Where the schema says a field is an
//!   array, a single element is an array of one; where it says a struct, an element with only
//!   text is a struct with that text under `value_tag`.
//! - Entity and character references are resolved; CDATA is text; comments, processing
//!   instructions and the prolog are not data.
//!
//! Rows are then decoded by the JSON decoder against the schema ([`crate::json`]), so values
//! that do not fit, rescued data, new columns and the parser modes behave exactly as for JSON.
//! Text values stay strings for decoding (the JSON decoder converts them to the column types);
//! for inference they are typed as numbers and booleans where they read as such, as Spark
//! infers them.
//!
//! Streaming: only the bytes from the start of the current row are kept, so memory follows the
//! largest row, not the file. A row that is not well-formed XML is one malformed record (line
//! of its start tag) and reading resumes at the next row start. A file that ends inside a row
//! has that row malformed.

use crate::error::{FormatError, MalformedRecord, Tally};
use crate::json::JsonDecoder;
use crate::xml_shape::{fit_fields, reshape, shapes};
use arrow::array::RecordBatch;
use arrow_schema::{Fields, SchemaRef};
use bytes::Bytes;
use landfall_core::seams::SeamResult;
use quick_xml::events::{BytesStart, Event};
use serde_json::{Map, Value};

/// Closing row tags a row may span while something in it is still open (a CDATA section or
/// comment holding `</row>`); past them the row is malformed.
const MAX_ENDS_TRIED: usize = 4;

/// XML options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XmlFormat {
    /// The element that is one row.
    pub row_tag: String,
    /// Prefix of attribute fields.
    pub attribute_prefix: String,
    /// Field of an element's own text beside attributes or children.
    pub value_tag: String,
}

impl Default for XmlFormat {
    fn default() -> Self {
        XmlFormat {
            row_tag: "row".into(),
            attribute_prefix: "_".into(),
            value_tag: "_VALUE".into(),
        }
    }
}

/// The local part of a (possibly prefixed) XML name.
fn local_part(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|&b| b == b':') {
        Some(i) => &name[i + 1..],
        None => name,
    }
}

fn local(name: &[u8]) -> String {
    String::from_utf8_lossy(local_part(name)).into_owned()
}

/// One element being read: its fields so far and its text.
struct Node {
    name: String,
    fields: Vec<(String, Value)>,
    text: String,
}

/// How one attempt to read a row from a buffer ended.
enum RowRead {
    /// The row, and the bytes it took.
    Row(Value, usize),
    /// The buffer ends inside the row.
    Incomplete,
    /// The buffer ends inside markup (a tag, comment, CDATA section): why.
    Cut(String),
    /// Not well-formed: why.
    Broken(String),
}

/// Finds row starts and turns rows into JSON values.
pub(crate) struct XmlRows {
    fmt: XmlFormat,
    /// Type text values for inference (numbers, booleans) instead of keeping strings.
    typed: bool,
}

impl XmlRows {
    pub fn new(fmt: XmlFormat, typed: bool) -> Self {
        XmlRows { fmt, typed }
    }

    /// The index of the next `<row_tag` start at or after `from` (prefixed names match by
    /// local name).
    fn next_start(&self, buf: &[u8], from: usize) -> Option<usize> {
        let tag = self.fmt.row_tag.as_bytes();
        let mut i = from;
        while let Some(off) = memchr::memchr(b'<', &buf[i..]) {
            let at = i + off;
            // Comments, CDATA sections and processing instructions between rows are not data:
            // a row start inside one is not a row. One not closed yet waits for more bytes.
            let rest = &buf[at..];
            let skip = [
                (&b"<!--"[..], &b"-->"[..]),
                (b"<![CDATA[", b"]]>"),
                (b"<?", b"?>"),
            ]
            .into_iter()
            .find(|(open, _)| rest.starts_with(open) || open.starts_with(rest));
            if let Some((open, close)) = skip {
                if rest.len() < open.len() {
                    return Some(at);
                }
                match memchr::memmem::find(&rest[open.len()..], close) {
                    Some(j) => {
                        i = at + open.len() + j + close.len();
                        continue;
                    }
                    None => return Some(at),
                }
            }
            let name_start = at + 1;
            let mut end = name_start;
            while end < buf.len() && !matches!(buf[end], b' ' | b'\t' | b'\r' | b'\n' | b'>' | b'/')
            {
                end += 1;
            }
            if end == buf.len() {
                // The name may go on in the next chunk.
                return Some(at).filter(|_| {
                    let name = &buf[name_start..end];
                    tag.starts_with(name) || name.contains(&b':')
                });
            }
            if local_part(&buf[name_start..end]) == tag {
                return Some(at);
            }
            i = at + 1;
        }
        None
    }

    /// The end of the next closing row tag after `from` (or of the row's start tag when it
    /// closes itself), searching from the row `start`; `None` when the buffer holds none yet.
    fn row_end(&self, buf: &[u8], start: usize, from: usize) -> Option<usize> {
        let tag = self.fmt.row_tag.as_bytes();
        if from == start {
            let gt = start + memchr::memchr(b'>', &buf[start..])?;
            if buf[gt - 1] == b'/' {
                return Some(gt + 1);
            }
        }
        let mut i = from.max(start + 1);
        while let Some(off) = memchr::memmem::find(&buf[i..], b"</") {
            let name_start = i + off + 2;
            let gt = name_start + memchr::memchr(b'>', &buf[name_start..])?;
            if local_part(buf[name_start..gt].trim_ascii_end()) == tag {
                return Some(gt + 1);
            }
            i = name_start;
        }
        None
    }

    fn scalar(&self, text: String) -> Value {
        if self.typed {
            if let Ok(i) = text.parse::<i64>() {
                return Value::from(i);
            }
            if let Ok(f) = text.parse::<f64>()
                && f.is_finite()
                && text.chars().any(|c| c.is_ascii_digit())
            {
                return Value::from(f);
            }
            match text.as_str() {
                "true" => return Value::Bool(true),
                "false" => return Value::Bool(false),
                _ => {}
            }
        }
        Value::String(text)
    }

    fn attributes(&self, e: &BytesStart<'_>, node: &mut Node) -> Result<(), String> {
        for a in e.attributes() {
            let a = a.map_err(|e| e.to_string())?;
            let key = a.key.as_ref();
            if key == b"xmlns" || key.starts_with(b"xmlns:") {
                continue;
            }
            let value = a.unescape_value().map_err(|e| e.to_string())?;
            let name = format!("{}{}", self.fmt.attribute_prefix, local(key));
            let v = self.scalar(value.into_owned());
            node.fields.push((name, v));
        }
        Ok(())
    }

    /// An element opened by `e`, with its attributes.
    fn open(&self, e: &BytesStart<'_>) -> Result<Node, String> {
        let mut node = Node {
            name: local(e.name().as_ref()),
            fields: Vec::new(),
            text: String::new(),
        };
        self.attributes(e, &mut node)?;
        Ok(node)
    }

    /// A closed element becomes a field of its parent, or, without one, the row.
    fn close(
        &self,
        stack: &mut [Node],
        node: Node,
        reader: &quick_xml::Reader<&[u8]>,
    ) -> Option<RowRead> {
        let name = node.name.clone();
        let value = self.finish(node);
        match stack.last_mut() {
            Some(parent) => {
                parent.fields.push((name, value));
                None
            }
            None => Some(RowRead::Row(
                self.row_value(value),
                reader.buffer_position() as usize,
            )),
        }
    }

    /// An element's value once it is closed.
    fn finish(&self, node: Node) -> Value {
        let text = node.text.trim().to_string();
        if node.fields.is_empty() {
            return if text.is_empty() {
                Value::Null
            } else {
                self.scalar(text)
            };
        }
        let mut map: Map<String, Value> = Map::new();
        for (k, v) in node.fields {
            match map.get_mut(&k) {
                Some(Value::Array(items)) => items.push(v),
                Some(existing) => {
                    let first = existing.take();
                    *existing = Value::Array(vec![first, v]);
                }
                None => {
                    map.insert(k, v);
                }
            }
        }
        if !text.is_empty() {
            map.insert(self.fmt.value_tag.clone(), self.scalar(text));
        }
        Value::Object(map)
    }

    /// Read the row that starts at `buf[0]`.
    fn read_row(&self, buf: &[u8]) -> RowRead {
        let mut reader = quick_xml::Reader::from_reader(buf);
        let mut stack: Vec<Node> = Vec::new();
        loop {
            let event = match reader.read_event() {
                Ok(e) => e,
                // Something unclosed before the end of the buffer: a cut, unless the buffer
                // ends the file.
                Err(quick_xml::Error::Syntax(
                    quick_xml::errors::SyntaxError::InvalidBangMarkup,
                )) => {
                    return RowRead::Broken("unknown markup after `<!`".into());
                }
                Err(quick_xml::Error::Syntax(e)) => return RowRead::Cut(e.to_string()),
                Err(e) => return RowRead::Broken(e.to_string()),
            };
            match event {
                Event::Start(e) => match self.open(&e) {
                    Ok(node) => stack.push(node),
                    Err(why) => return RowRead::Broken(why),
                },
                Event::Empty(e) => {
                    let node = match self.open(&e) {
                        Ok(node) => node,
                        Err(why) => return RowRead::Broken(why),
                    };
                    if let Some(row) = self.close(&mut stack, node, &reader) {
                        return row;
                    }
                }
                Event::End(_) => {
                    let Some(node) = stack.pop() else {
                        return RowRead::Broken("an end tag without its start".into());
                    };
                    if let Some(row) = self.close(&mut stack, node, &reader) {
                        return row;
                    }
                }
                Event::Text(t) => {
                    let Some(node) = stack.last_mut() else {
                        continue;
                    };
                    match t.xml_content() {
                        Ok(s) => node.text.push_str(&s),
                        Err(e) => return RowRead::Broken(e.to_string()),
                    }
                }
                Event::CData(t) => {
                    if let Some(node) = stack.last_mut() {
                        node.text.push_str(&String::from_utf8_lossy(&t));
                    }
                }
                Event::GeneralRef(r) => {
                    let Some(node) = stack.last_mut() else {
                        continue;
                    };
                    let name = String::from_utf8_lossy(&r).into_owned();
                    match quick_xml::escape::unescape(&format!("&{name};")) {
                        Ok(s) => node.text.push_str(&s),
                        Err(e) => return RowRead::Broken(e.to_string()),
                    }
                }
                Event::Eof => return RowRead::Incomplete,
                Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
            }
        }
    }

    /// A row is always an object: a row with only text is `{value_tag: text}`.
    fn row_value(&self, v: Value) -> Value {
        match v {
            Value::Object(_) => v,
            Value::Null => Value::Object(Map::new()),
            other => {
                let mut m = Map::new();
                m.insert(self.fmt.value_tag.clone(), other);
                Value::Object(m)
            }
        }
    }

    /// Read the rows of `buf` (starting at file line `line`): the rows with the line of each
    /// start, the broken ones (line, why), and how many bytes are done with. `last`: the
    /// buffer ends the file.
    #[allow(clippy::type_complexity)]
    pub fn scan(
        &self,
        buf: &[u8],
        line: u64,
        last: bool,
    ) -> (Vec<(u64, Value)>, Vec<(u64, usize, String)>, usize) {
        let mut rows = Vec::new();
        let mut broken = Vec::new();
        let mut pos = 0;
        let mut line = line;
        let mut counted = 0;
        let line_at = |upto: usize, counted: &mut usize, line: &mut u64| {
            *line += buf[*counted..upto].iter().filter(|&&b| b == b'\n').count() as u64;
            *counted = upto;
        };
        loop {
            let Some(start) = self.next_start(buf, pos) else {
                // Keep a tail that could be the beginning of a row start.
                let keep = if last {
                    0
                } else {
                    match buf[pos..].iter().rposition(|&b| b == b'<') {
                        Some(i) => buf.len() - (pos + i),
                        None => 0,
                    }
                };
                pos = buf.len() - keep;
                break;
            };
            line_at(start, &mut counted, &mut line);
            // Parse only up to a closing row tag (or the file's end): a cut elsewhere (inside a
            // tag, an entity, a comment) never reads as broken XML. A row nesting another row
            // element runs to a later closing tag.
            let mut read = RowRead::Incomplete;
            let mut from = start;
            let mut tried = 0;
            while let Some(end) = self.row_end(buf, start, from) {
                read = self.read_row(&buf[start..end]);
                if !matches!(read, RowRead::Incomplete | RowRead::Cut(_)) {
                    break;
                }
                tried += 1;
                from = end;
                // Something left open over several closing row tags (an attribute quote, a
                // comment) is broken, not cut: the row is malformed and the next rows land.
                if tried >= MAX_ENDS_TRIED {
                    if let RowRead::Cut(why) = &read {
                        read = RowRead::Broken(why.clone());
                    }
                    break;
                }
            }
            if last && matches!(read, RowRead::Incomplete) {
                read = self.read_row(&buf[start..]);
            }
            match read {
                RowRead::Row(v, used) => {
                    rows.push((line, v));
                    pos = start + used;
                }
                RowRead::Incomplete | RowRead::Cut(_) if !last => {
                    pos = start;
                    break;
                }
                RowRead::Cut(why) => {
                    broken.push((line, start, format!("not well-formed XML: {why}")));
                    pos = buf.len();
                    break;
                }
                RowRead::Incomplete => {
                    broken.push((line, start, "the file ends inside a row".into()));
                    pos = buf.len();
                    break;
                }
                RowRead::Broken(why) => {
                    broken.push((line, start, format!("not well-formed XML: {why}")));
                    pos = start + 1;
                }
            }
        }
        (rows, broken, pos)
    }
}

/// A whole XML text's rows as NDJSON, values typed for inference. Shapes are made consistent
/// across the rows first, as XML cannot say them: an element repeated anywhere is an array
/// everywhere, and one with attributes or children anywhere is a struct everywhere (its text
/// under `value_tag`).
pub fn xml_to_ndjson(text: &[u8], fmt: &XmlFormat) -> Vec<u8> {
    let (rows, _, _) = XmlRows::new(fmt.clone(), true).scan(text, 1, true);
    let mut arrays = std::collections::HashSet::new();
    let mut objects = std::collections::HashSet::new();
    for (_, v) in &rows {
        shapes(v, &mut Vec::new(), &mut arrays, &mut objects);
    }
    let mut out = Vec::new();
    for (_, mut v) in rows {
        reshape(&mut v, &mut Vec::new(), &arrays, &objects, &fmt.value_tag);
        serde_json::to_writer(&mut out, &v).expect("JSON serialises");
        out.push(b'\n');
    }
    out
}

/// The XML decoder: rows found by [`XmlRows`], decoded by a JSON decoder.
pub struct XmlDecoder {
    path: String,
    rows: XmlRows,
    fields: Fields,
    inner: JsonDecoder,
    /// Bytes from the start of the current row on.
    buf: Vec<u8>,
    /// The file line of `buf[0]`.
    line: u64,
    /// The file offset of `buf[0]`.
    offset: u64,
    tally: Tally,
    value_tag: String,
}

impl XmlDecoder {
    pub fn new(path: &str, schema: SchemaRef, fmt: XmlFormat, inner: JsonDecoder) -> Self {
        XmlDecoder {
            path: path.to_string(),
            fields: schema.fields().clone(),
            value_tag: fmt.value_tag.clone(),
            rows: XmlRows::new(fmt, false),
            inner,
            buf: Vec::new(),
            line: 1,
            offset: 0,
            tally: Tally::default(),
        }
    }

    pub fn collecting(mut self, collect: bool) -> Self {
        self.tally.collect = collect;
        self
    }

    fn drain(&mut self, last: bool) -> SeamResult<Vec<RecordBatch>> {
        let (rows, broken, used) = self.rows.scan(&self.buf, self.line, last);
        for (line, start, reason) in broken {
            let offset = self.offset + start as u64;
            let upto = self.buf[start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(self.buf.len(), |i| start + i);
            let record = MalformedRecord::text_of(&self.buf[start..upto]);
            self.tally.note(|| MalformedRecord {
                path: self.path.clone(),
                line,
                offset,
                reason,
                record: Some(record),
            });
        }
        let mut ndjson = Vec::new();
        for (_, mut v) in rows {
            if let Value::Object(m) = &mut v {
                fit_fields(m, &self.fields, &self.value_tag);
            }
            serde_json::to_writer(&mut ndjson, &v).map_err(|e| FormatError::Unreadable {
                path: self.path.clone(),
                reason: e.to_string(),
            })?;
            ndjson.push(b'\n');
        }
        self.line += self.buf[..used].iter().filter(|&&b| b == b'\n').count() as u64;
        self.offset += used as u64;
        self.buf.drain(..used);
        let mut out = Vec::new();
        if !ndjson.is_empty() {
            out.extend(landfall_core::Decoder::push(
                &mut self.inner,
                Bytes::from(ndjson),
            )?);
        }
        Ok(out)
    }
}

impl landfall_core::Decoder for XmlDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        self.buf.extend_from_slice(&chunk);
        self.drain(false)
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let mut out = self.drain(true)?;
        out.extend(landfall_core::Decoder::finish(&mut self.inner)?);
        Ok(out)
    }

    fn malformed_rows(&self) -> u64 {
        self.tally.rows + self.inner.malformed_rows()
    }

    fn first_malformed(&self) -> Option<String> {
        self.tally
            .first
            .as_ref()
            .map(|m| format!("line {} (byte {}): {}", m.line, m.offset, m.reason))
            .or_else(|| landfall_core::Decoder::first_malformed(&self.inner))
    }

    fn take_malformed(&mut self) -> Vec<MalformedRecord> {
        let mut out = std::mem::take(&mut self.tally.records);
        out.extend(self.inner.take_malformed());
        out
    }

    fn rescued_rows(&self) -> u64 {
        self.inner.rescued_rows()
    }

    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        self.inner.new_columns()
    }
}

#[cfg(test)]
#[path = "xml_tests.rs"]
mod tests;
