//! A resumable CSV tokenizer that knows where every record starts.
//!
//! arrow-csv's decoder neither says which record a bad value came from nor survives a row
//! with the wrong number of fields, so the CSV decoder splits records itself. The dialect is
//! arrow-csv's (csv-core's): fields separated by `delimiter`; a field may be quoted, a doubled
//! quote or `escape` followed by any byte inside quotes stands for that byte; bytes after a
//! closing quote are kept; records end at `\n` outside quotes, an unquoted `\r` before it is
//! dropped; empty lines and lines starting with `comment` are skipped.
//!
//! The tokenizer keeps its state between chunks, so a record may be split anywhere and a long
//! record is scanned once.

use crate::CsvFormat;

/// The bytes of `buf` up to `lines` whole lines take (all of it when it holds fewer, the last
/// one unfinished), counting `lines` down by the lines passed.
pub(crate) fn pass_lines(buf: &[u8], lines: &mut usize) -> usize {
    let mut i = 0;
    while *lines > 0 && i < buf.len() {
        match memchr::memchr(b'\n', &buf[i..]) {
            Some(j) => {
                i += j + 1;
                *lines -= 1;
            }
            None => i = buf.len(),
        }
    }
    i
}

/// File position of a record's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub offset: u64,
    /// 1-based line.
    pub line: u64,
}

/// Complete records, their fields packed in one buffer.
#[derive(Debug, Default)]
pub(crate) struct Records {
    data: Vec<u8>,
    /// End of each field in `data`.
    field_ends: Vec<usize>,
    /// End of each record in `field_ends`.
    record_ends: Vec<usize>,
    starts: Vec<Position>,
}

impl Records {
    pub fn len(&self) -> usize {
        self.record_ends.len()
    }

    pub fn clear(&mut self) {
        self.data.clear();
        self.field_ends.clear();
        self.record_ends.clear();
        self.starts.clear();
    }

    pub fn start(&self, r: usize) -> Position {
        self.starts[r]
    }

    fn field_range(&self, r: usize) -> std::ops::Range<usize> {
        let from = if r == 0 { 0 } else { self.record_ends[r - 1] };
        from..self.record_ends[r]
    }

    pub fn num_fields(&self, r: usize) -> usize {
        self.field_range(r).len()
    }

    /// Field `f` of record `r`, if the record has that many.
    pub fn field(&self, r: usize, f: usize) -> Option<&[u8]> {
        let range = self.field_range(r);
        let i = range.start + f;
        if i >= range.end {
            return None;
        }
        let from = if i == 0 { 0 } else { self.field_ends[i - 1] };
        Some(&self.data[from..self.field_ends[i]])
    }

    /// Remove the first record (the header) and return its fields.
    pub fn take_first(&mut self) -> Vec<Vec<u8>> {
        let fields = (0..self.num_fields(0))
            .map(|f| self.field(0, f).unwrap_or_default().to_vec())
            .collect();
        let mut rest = Records::default();
        for r in 1..self.len() {
            for f in 0..self.num_fields(r) {
                rest.data
                    .extend_from_slice(self.field(r, f).unwrap_or_default());
                rest.field_ends.push(rest.data.len());
            }
            rest.record_ends.push(rest.field_ends.len());
            rest.starts.push(self.starts[r]);
        }
        *self = rest;
        fields
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between records: empty lines and comments are skipped here.
    StartRecord,
    Comment,
    StartField,
    InField,
    InQuotes,
    /// After an escape byte inside quotes.
    Escaped,
    /// After a quote inside quotes: the closing one, or the first of a doubled pair.
    QuoteInQuotes,
}

pub(crate) struct Tokenizer {
    delimiter: u8,
    quote: u8,
    escape: Option<u8>,
    comment: Option<u8>,
    state: State,
    /// Position of the next byte.
    next: Position,
    /// Start of the record being read.
    start: Position,
    /// The last byte of the current field is an unquoted `\r` (dropped before `\n`).
    cr: bool,
}

impl Tokenizer {
    pub fn new(format: &CsvFormat) -> Self {
        let origin = Position { offset: 0, line: 1 };
        Tokenizer {
            delimiter: format.delimiter,
            quote: format.quote,
            escape: format.escape,
            comment: format.comment,
            state: State::StartRecord,
            next: origin,
            start: origin,
            cr: false,
        }
    }

    /// End the current field; at a newline, without the `\r` of a `\r\n`.
    fn end_field(&mut self, out: &mut Records, at_newline: bool) {
        if std::mem::take(&mut self.cr) && at_newline {
            out.data.pop();
        }
        out.field_ends.push(out.data.len());
    }

    fn end_record(&mut self, out: &mut Records) {
        self.end_field(out, true);
        out.record_ends.push(out.field_ends.len());
        out.starts.push(self.start);
        self.state = State::StartRecord;
    }

    fn push(&mut self, out: &mut Records, b: u8, quoted: bool) {
        out.data.push(b);
        self.cr = b == b'\r' && !quoted;
    }

    /// Pass over whole lines at the start of the file (`skip_rows`), counting them down in
    /// `lines`; returns the bytes used.
    pub fn skip_lines(&mut self, buf: &[u8], lines: &mut usize) -> usize {
        let before = *lines;
        let i = pass_lines(buf, lines);
        self.next.line += (before - *lines) as u64;
        self.next.offset += i as u64;
        self.start = self.next;
        i
    }

    /// Read `buf` until it ends or `out` holds `limit` records; returns the bytes used.
    pub fn feed(&mut self, buf: &[u8], out: &mut Records, limit: usize) -> usize {
        let mut i = 0;
        while i < buf.len() {
            if self.state == State::StartRecord && out.len() >= limit {
                break;
            }
            let b = buf[i];
            i += 1;
            let at = self.next;
            self.next.offset += 1;
            if b == b'\n' {
                self.next.line += 1;
            }
            match self.state {
                State::StartRecord => match b {
                    b'\n' | b'\r' => {}
                    _ if Some(b) == self.comment => self.state = State::Comment,
                    _ => {
                        self.start = at;
                        self.state = State::StartField;
                        self.field_byte(b, out);
                    }
                },
                State::Comment => {
                    if b == b'\n' {
                        self.state = State::StartRecord;
                    }
                }
                State::StartField | State::InField => self.field_byte(b, out),
                State::InQuotes => {
                    if b == self.quote {
                        self.state = State::QuoteInQuotes;
                    } else if Some(b) == self.escape {
                        self.state = State::Escaped;
                    } else {
                        self.push(out, b, true);
                    }
                }
                State::Escaped => {
                    self.push(out, b, true);
                    self.state = State::InQuotes;
                }
                State::QuoteInQuotes => {
                    if b == self.quote {
                        self.push(out, b, true);
                        self.state = State::InQuotes;
                    } else {
                        self.state = State::InField;
                        self.field_byte(b, out);
                    }
                }
            }
        }
        i
    }

    /// One byte of an unquoted part of a field (or its start).
    fn field_byte(&mut self, b: u8, out: &mut Records) {
        if b == self.delimiter {
            self.end_field(out, false);
            self.state = State::StartField;
        } else if b == b'\n' {
            self.end_record(out);
        } else if b == self.quote && self.state == State::StartField {
            self.state = State::InQuotes;
        } else {
            self.push(out, b, false);
            self.state = State::InField;
        }
    }

    /// The end of the file: complete the last record if it lacks its newline. Returns the
    /// start of the last record instead if it is cut inside quotes (it is dropped).
    pub fn finish(&mut self, out: &mut Records) -> Option<Position> {
        match self.state {
            State::StartRecord | State::Comment => None,
            State::StartField | State::InField | State::QuoteInQuotes => {
                self.end_record(out);
                None
            }
            State::InQuotes | State::Escaped => {
                // Drop the cut record's fields.
                let kept = out.record_ends.last().copied().unwrap_or(0);
                let data = if kept == 0 {
                    0
                } else {
                    out.field_ends[kept - 1]
                };
                out.field_ends.truncate(kept);
                out.data.truncate(data);
                self.state = State::StartRecord;
                Some(self.start)
            }
        }
    }
}
