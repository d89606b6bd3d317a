//! `json.multi_line = true`: a file is one JSON document, or an array of documents, spread over
//! any number of lines (Spark's `multiLine`).
//!
//! A streaming splitter turns the file into NDJSON as bytes arrive, so a large array is never
//! held whole (Spark reads such a file whole): it tracks strings and nesting, cuts the
//! top-level array at its commas (or takes the top-level object as one record), and writes
//! each record on one line (line breaks between tokens become spaces; inside strings they
//! cannot occur in valid JSON). The NDJSON decoder then applies its permissive rules record by
//! record: a value that does not fit is null and counted; an element that is not an object is
//! a malformed record; a record cut by the end of the file is malformed, the ones before it
//! land.
//!
//! Several top-level values one after another (`{..} {..}` or `[..][..]`) are read as they
//! come; bytes that cannot start a value are a malformed record up to the next value.

use arrow::array::RecordBatch;
use bytes::Bytes;
use landfall_core::Decoder;
use landfall_core::seams::SeamResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between top-level values.
    Top,
    /// Inside a top-level array, between elements.
    InArray,
    /// Inside a record (an array element, or a top-level object).
    InRecord,
}

/// Splits multi-line JSON into NDJSON records.
#[derive(Debug)]
pub struct Splitter {
    state: State,
    /// The current record's bytes.
    record: Vec<u8>,
    /// Nesting inside the current record.
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The current record is an element of a top-level array (else a top-level value).
    in_array: bool,
}

impl Default for Splitter {
    fn default() -> Self {
        Splitter {
            state: State::Top,
            record: Vec::new(),
            depth: 0,
            in_string: false,
            escaped: false,
            in_array: false,
        }
    }
}

impl Splitter {
    /// Consume `chunk`; returns the NDJSON lines it completes.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for &b in chunk {
            match self.state {
                State::Top => match b {
                    b' ' | b'\t' | b'\n' | b'\r' => {}
                    b'[' => self.state = State::InArray,
                    // A top-level object (or anything else: the NDJSON decoder judges it).
                    _ => {
                        self.begin(false);
                        self.record_byte(b, &mut out);
                    }
                },
                State::InArray => match b {
                    b' ' | b'\t' | b'\n' | b'\r' | b',' => {}
                    b']' => self.state = State::Top,
                    _ => {
                        self.begin(true);
                        self.record_byte(b, &mut out);
                    }
                },
                State::InRecord => self.record_byte(b, &mut out),
            }
        }
        out
    }

    fn begin(&mut self, in_array: bool) {
        self.state = State::InRecord;
        self.in_array = in_array;
        self.record.clear();
        self.depth = 0;
        self.in_string = false;
        self.escaped = false;
    }

    fn record_byte(&mut self, b: u8, out: &mut Vec<u8>) {
        if self.in_string {
            self.record.push(b);
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                self.record.push(b);
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.record.push(b);
            }
            b'}' | b']' if self.depth > 0 => {
                self.depth -= 1;
                self.record.push(b);
                if self.depth == 0 {
                    self.end(out);
                }
            }
            // A scalar element ends at a separator.
            b',' | b']' if self.depth == 0 && self.in_array => {
                self.end(out);
                if b == b']' {
                    self.state = State::Top;
                }
            }
            // Outside an array, something that is no object ends at whitespace.
            b' ' | b'\t' | b'\n' | b'\r' if self.depth == 0 && !self.in_array => self.end(out),
            b'\n' | b'\r' | b'\t' => self.record.push(b' '),
            _ => self.record.push(b),
        }
    }

    fn end(&mut self, out: &mut Vec<u8>) {
        let rec = std::mem::take(&mut self.record);
        let trimmed = rec.trim_ascii();
        if !trimmed.is_empty() {
            out.extend_from_slice(trimmed);
            out.push(b'\n');
        }
        self.depth = 0;
        self.state = if self.in_array {
            State::InArray
        } else {
            State::Top
        };
    }

    /// The end of the file: a record still open (cut short) as its own line, for the NDJSON
    /// decoder to count malformed.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.state == State::InRecord {
            let rec = std::mem::take(&mut self.record);
            let trimmed = rec.trim_ascii();
            if !trimmed.is_empty() {
                out.extend_from_slice(trimmed);
                out.push(b'\n');
            }
        }
        self.state = State::Top;
        out
    }
}

/// A JSON decoder behind the splitter.
pub struct MultiLineJson {
    inner: crate::json::JsonDecoder,
    splitter: Splitter,
}

impl MultiLineJson {
    pub fn new(inner: crate::json::JsonDecoder) -> Self {
        MultiLineJson {
            inner,
            splitter: Splitter::default(),
        }
    }
}

impl Decoder for MultiLineJson {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        let lines = self.splitter.push(&chunk);
        if lines.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.push(Bytes::from(lines))
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let rest = self.splitter.finish();
        let mut out = if rest.is_empty() {
            Vec::new()
        } else {
            self.inner.push(Bytes::from(rest))?
        };
        out.extend(self.inner.finish()?);
        Ok(out)
    }

    forward_reports!();
}

/// A whole multi-line JSON text as NDJSON (schema inference), without a last record the
/// text's end cut.
pub fn to_ndjson(text: &[u8]) -> Vec<u8> {
    let mut s = Splitter::default();
    let out = s.push(text);
    // What `finish` would pass on is a record cut short: inference leaves it out, and the
    // records that are no objects (malformed when decoded) too.
    let _ = s.finish();
    out.split_inclusive(|b| *b == b'\n')
        .filter(|line| line.first() == Some(&b'{'))
        .flatten()
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(input: &[u8], cut: usize) -> String {
        let mut s = Splitter::default();
        let mut out = s.push(&input[..cut]);
        out.extend(s.push(&input[cut..]));
        out.extend(s.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn arrays_objects_and_scalars_split_anywhere() {
        let input = br#"[
  {"id": 1, "s": "a,]}\"x", "n": {"k": [1, 2]}},
  {"id": 2},
  3,
  "str",
  [4]
]
{"id": 5,
 "pretty": true}
[]"#;
        let want = "{\"id\": 1, \"s\": \"a,]}\\\"x\", \"n\": {\"k\": [1, 2]}}\n{\"id\": 2}\n3\n\"str\"\n[4]\n{\"id\": 5,  \"pretty\": true}\n";
        for cut in 0..=input.len() {
            assert_eq!(split(input, cut), want, "cut at {cut}");
        }
    }

    #[test]
    fn a_cut_record_is_passed_on_to_be_judged() {
        assert_eq!(split(b"[{\"id\":1},{\"id\":", 5), "{\"id\":1}\n{\"id\":\n");
        assert_eq!(split(b"garbage here", 3), "garbage\nhere\n");
    }
}
