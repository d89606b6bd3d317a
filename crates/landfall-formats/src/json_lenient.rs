//! Spark's lenient JSON options, as a streaming rewrite to strict JSON before decoding:
//!
//! - `allow_comments`: `// ...` to the end of the line and `/* ... */` are removed (a newline
//!   inside a block comment is removed too, so the record stays on its line);
//! - `allow_single_quotes`: `'text'` is the string `"text"` (`\'` is a quote, a `"` inside is
//!   escaped);
//! - `allow_unquoted_field_names`: a bare name (`[A-Za-z_$][A-Za-z0-9_$]*`) where an object key
//!   is expected is quoted.
//!
//! Everything else passes through unchanged, so input that is already strict JSON is not
//! altered. The rewriter keeps its state between chunks: a comment, string or name may be split
//! anywhere.

use bytes::Bytes;
use landfall_core::seams::SeamResult;

/// Which leniencies are on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonLeniency {
    pub allow_comments: bool,
    pub allow_single_quotes: bool,
    pub allow_unquoted_field_names: bool,
}

impl JsonLeniency {
    pub fn any(self) -> bool {
        self.allow_comments || self.allow_single_quotes || self.allow_unquoted_field_names
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Normal,
    /// Inside a `"` string; `true` after a backslash.
    Double(bool),
    /// Inside a `'` string; `true` after a backslash.
    Single(bool),
    /// Saw `/` in normal text: a comment may start.
    Slash,
    LineComment,
    /// Inside `/* */`; `true` after a `*`.
    BlockComment(bool),
    /// Inside a bare name in key position (bytes in `name`).
    Name,
}

/// The streaming rewriter.
#[derive(Debug, Clone)]
pub struct Lenient {
    opts: JsonLeniency,
    state: State,
    /// Open containers: `true` for an object.
    stack: Vec<bool>,
    /// The last significant byte written outside strings (for key position).
    last: u8,
    name: Vec<u8>,
    /// Line-delimited input: every line starts afresh (a broken line cannot carry an open
    /// string or comment into the next one), as Spark parses each line on its own.
    lines: bool,
}

fn name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$'
}

fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

impl Lenient {
    pub fn new(opts: JsonLeniency) -> Self {
        Lenient {
            opts,
            state: State::Normal,
            stack: Vec::new(),
            last: b'\n',
            name: Vec::new(),
            lines: false,
        }
    }

    /// Line-delimited input (not `multi_line`): the state resets at every newline.
    pub fn per_line(mut self, lines: bool) -> Self {
        self.lines = lines;
        self
    }

    fn new_line(&mut self, out: &mut Vec<u8>) {
        match self.state {
            State::Slash => out.push(b'/'),
            State::Name => self.flush_name(out),
            _ => {}
        }
        out.push(b'\n');
        self.state = State::Normal;
        self.stack.clear();
        self.last = b'\n';
    }

    fn key_position(&self) -> bool {
        self.stack.last() == Some(&true) && matches!(self.last, b'{' | b',')
    }

    /// Rewrite one chunk.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            self.byte(b, out);
        }
    }

    /// The end of the input: a pending `/` or name is written as it is.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        match self.state {
            State::Slash => out.push(b'/'),
            State::Name => self.flush_name(out),
            _ => {}
        }
        self.state = State::Normal;
    }

    fn flush_name(&mut self, out: &mut Vec<u8>) {
        out.push(b'"');
        out.extend_from_slice(&self.name);
        out.push(b'"');
        self.name.clear();
        self.last = b'"';
    }

    fn byte(&mut self, b: u8, out: &mut Vec<u8>) {
        if b == b'\n' && self.lines {
            self.new_line(out);
            return;
        }
        match self.state {
            State::Double(escaped) => {
                out.push(b);
                self.state = match (escaped, b) {
                    (true, _) => State::Double(false),
                    (false, b'\\') => State::Double(true),
                    (false, b'"') => {
                        self.last = b'"';
                        State::Normal
                    }
                    _ => State::Double(false),
                };
            }
            State::Single(escaped) => {
                self.state = match (escaped, b) {
                    (true, b'\'') => {
                        out.push(b'\'');
                        State::Single(false)
                    }
                    (true, _) => {
                        out.push(b'\\');
                        out.push(b);
                        State::Single(false)
                    }
                    (false, b'\\') => State::Single(true),
                    (false, b'\'') => {
                        out.push(b'"');
                        self.last = b'"';
                        State::Normal
                    }
                    (false, b'"') => {
                        out.extend_from_slice(b"\\\"");
                        State::Single(false)
                    }
                    _ => {
                        out.push(b);
                        State::Single(false)
                    }
                };
            }
            State::Slash => match b {
                b'/' => self.state = State::LineComment,
                b'*' => self.state = State::BlockComment(false),
                _ => {
                    out.push(b'/');
                    self.state = State::Normal;
                    self.byte(b, out);
                }
            },
            State::LineComment => {
                if b == b'\n' {
                    out.push(b'\n');
                    self.state = State::Normal;
                }
            }
            State::BlockComment(star) => {
                self.state = match (star, b) {
                    (true, b'/') => State::Normal,
                    (_, b'*') => State::BlockComment(true),
                    _ => State::BlockComment(false),
                };
            }
            State::Name => {
                if name_byte(b) {
                    self.name.push(b);
                } else {
                    self.flush_name(out);
                    self.state = State::Normal;
                    self.byte(b, out);
                }
            }
            State::Normal => self.normal(b, out),
        }
    }

    fn normal(&mut self, b: u8, out: &mut Vec<u8>) {
        match b {
            b'"' => {
                out.push(b);
                self.state = State::Double(false);
            }
            b'\'' if self.opts.allow_single_quotes => {
                out.push(b'"');
                self.state = State::Single(false);
            }
            b'/' if self.opts.allow_comments => self.state = State::Slash,
            _ if self.opts.allow_unquoted_field_names && name_start(b) && self.key_position() => {
                self.name.push(b);
                self.state = State::Name;
            }
            _ => {
                out.push(b);
                match b {
                    b'{' => self.stack.push(true),
                    b'[' => self.stack.push(false),
                    b'}' | b']' => {
                        self.stack.pop();
                    }
                    _ => {}
                }
                if !b.is_ascii_whitespace() {
                    self.last = b;
                }
            }
        }
    }
}

/// A whole text rewritten (inference samples).
pub fn lenient_text(text: &[u8], opts: JsonLeniency, lines: bool) -> Vec<u8> {
    let mut l = Lenient::new(opts).per_line(lines);
    let mut out = Vec::with_capacity(text.len());
    l.feed(text, &mut out);
    l.finish(&mut out);
    out
}

/// A decoder fed through the rewriter.
pub struct LenientDecoder {
    rewriter: Lenient,
    inner: Box<dyn landfall_core::Decoder>,
}

impl LenientDecoder {
    pub fn new(opts: JsonLeniency, lines: bool, inner: Box<dyn landfall_core::Decoder>) -> Self {
        LenientDecoder {
            rewriter: Lenient::new(opts).per_line(lines),
            inner,
        }
    }
}

impl landfall_core::Decoder for LenientDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<arrow::array::RecordBatch>> {
        let mut out = Vec::with_capacity(chunk.len());
        self.rewriter.feed(&chunk, &mut out);
        self.inner.push(Bytes::from(out))
    }

    fn finish(&mut self) -> SeamResult<Vec<arrow::array::RecordBatch>> {
        let mut out = Vec::new();
        self.rewriter.finish(&mut out);
        let mut batches = if out.is_empty() {
            Vec::new()
        } else {
            self.inner.push(Bytes::from(out))?
        };
        batches.extend(self.inner.finish()?);
        Ok(batches)
    }

    forward_reports!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> JsonLeniency {
        JsonLeniency {
            allow_comments: true,
            allow_single_quotes: true,
            allow_unquoted_field_names: true,
        }
    }

    #[test]
    fn lenient_json_becomes_strict_at_every_cut() {
        let input = concat!(
            "{a: 1, 'b': 'it\\'s \"x\"', // note\n",
            "c: [true, null, {d: 'e'}], /* multi\nline */ \"f\": \"/not a comment\"}\n",
            "{$g_1: -2.5e3}\n",
        );
        let want = concat!(
            "{\"a\": 1, \"b\": \"it's \\\"x\\\"\", \n",
            "\"c\": [true, null, {\"d\": \"e\"}],  \"f\": \"/not a comment\"}\n",
            "{\"$g_1\": -2.5e3}\n",
        );
        for cut in 0..=input.len() {
            let mut l = Lenient::new(all());
            let mut out = Vec::new();
            l.feed(&input.as_bytes()[..cut], &mut out);
            l.feed(&input.as_bytes()[cut..], &mut out);
            l.finish(&mut out);
            assert_eq!(String::from_utf8(out).unwrap(), want, "cut {cut}");
        }
        let values: Vec<serde_json::Value> = serde_json::Deserializer::from_str(want)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(values.len(), 2);
    }

    /// A broken line never carries an open comment or string into the next line.
    #[test]
    fn line_delimited_input_starts_afresh_at_every_line() {
        let input = b"{\"a\":1} /* open\n{'name': 'O'Brien'}\n{b: 'x'}\n";
        let out = lenient_text(input, all(), true);
        let lines: Vec<&[u8]> = out.split(|&c| c == b'\n').collect();
        assert_eq!(lines[0], b"{\"a\":1} ");
        assert_eq!(
            lines[2],
            b"{\"b\": \"x\"}",
            "{}",
            String::from_utf8_lossy(&out)
        );
    }

    #[test]
    fn strict_json_passes_unchanged_and_options_are_separate() {
        let strict = "{\"a\":\"// not a comment\",\"b\":[1,{\"c\":\"'q'\"}]}\n";
        assert_eq!(
            lenient_text(strict.as_bytes(), all(), true),
            strict.as_bytes()
        );
        let only_comments = JsonLeniency {
            allow_comments: true,
            ..Default::default()
        };
        assert_eq!(
            lenient_text(b"{a: 'x'} // c\n", only_comments, true),
            b"{a: 'x'} \n"
        );
    }
}
