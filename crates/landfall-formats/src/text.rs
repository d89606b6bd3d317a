//! The `text` format: one row per line (`value STRING`), or with `whole_text` one row per
//! file, as Spark's text source.
//!
//! Lines end at `\n`, `\r\n` or `\r` (Spark's default), or at `line_sep` when given; the
//! separator is not part of the value; a last line without a separator is a row; an empty file
//! has no rows (one empty row with `whole_text`); empty lines are empty strings. Bytes that
//! are not UTF-8 are replaced (U+FFFD) and the row is counted malformed: nothing is dropped
//! silently. Lines are cut as bytes arrive, so memory follows the longest line.

use crate::error::FormatError;
use arrow::array::{ArrayRef, RecordBatch, StringBuilder};
use arrow_schema::SchemaRef;
use bytes::Bytes;
use landfall_core::Decoder;
use landfall_core::seams::SeamResult;
use std::sync::Arc;

/// Text options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextFormat {
    /// One row per file.
    pub whole_text: bool,
    /// The line separator (default: `\n`, `\r\n` or `\r`).
    pub line_sep: Option<Vec<u8>>,
}

/// The longest value a row may hold.
const MAX_VALUE: usize = 1 << 30;
/// A batch is flushed before its values pass this many bytes.
const FLUSH_BYTES: usize = 256 << 20;

pub struct TextDecoder {
    path: String,
    schema: SchemaRef,
    format: TextFormat,
    batch_size: usize,
    /// Bytes of the current (unfinished) line, or of the whole file.
    pending: Vec<u8>,
    /// Default separators: the last byte was `\r` (a `\n` right after belongs to it).
    after_cr: bool,
    rows: StringBuilder,
    in_rows: usize,
    malformed: u64,
    /// Lines that are not UTF-8 yield no row (`mode = "drop_malformed"`).
    drop_malformed: bool,
}

impl TextDecoder {
    pub fn new(
        path: &str,
        schema: SchemaRef,
        format: TextFormat,
        batch_size: usize,
    ) -> Result<Self, FormatError> {
        if schema.fields().len() != 1 {
            return Err(FormatError::Column {
                path: path.to_string(),
                column: "value".into(),
                reason: format!(
                    "the text format has one column (value STRING), the schema has {}",
                    schema.fields().len()
                ),
            });
        }
        Ok(TextDecoder {
            path: path.to_string(),
            schema,
            format,
            batch_size: batch_size.max(1),
            pending: Vec::new(),
            after_cr: false,
            rows: StringBuilder::new(),
            in_rows: 0,
            malformed: 0,
            drop_malformed: false,
        })
    }

    /// Leave lines that are not UTF-8 out instead of replacing their bad bytes.
    pub fn with_drop_malformed(mut self, drop: bool) -> Self {
        self.drop_malformed = drop;
        self
    }

    fn row(&mut self, bytes: &[u8], out: &mut Vec<RecordBatch>) -> SeamResult<()> {
        // One Arrow string array holds at most 2 GiB: a batch is flushed before it would
        // pass 256 MB, and a single value over 1 GiB makes the file unreadable (not a panic).
        if bytes.len() > MAX_VALUE {
            return Err(FormatError::Unreadable {
                path: self.path.clone(),
                reason: format!(
                    "a {} of {} bytes is longer than a value may be ({MAX_VALUE} bytes)",
                    if self.format.whole_text {
                        "file"
                    } else {
                        "line"
                    },
                    bytes.len()
                ),
            }
            .into());
        }
        if self.in_rows > 0 && self.rows.values_slice().len() + bytes.len() > FLUSH_BYTES {
            out.push(self.flush()?);
        }
        match std::str::from_utf8(bytes) {
            Ok(s) => self.rows.append_value(s),
            Err(_) => {
                self.malformed += 1;
                if self.drop_malformed {
                    return Ok(());
                }
                self.rows.append_value(String::from_utf8_lossy(bytes));
            }
        }
        self.in_rows += 1;
        if self.in_rows >= self.batch_size {
            out.push(self.flush()?);
        }
        Ok(())
    }

    fn flush(&mut self) -> SeamResult<RecordBatch> {
        self.in_rows = 0;
        let col: ArrayRef = Arc::new(self.rows.finish());
        RecordBatch::try_new(self.schema.clone(), vec![col]).map_err(|e| {
            FormatError::Unreadable {
                path: self.path.clone(),
                reason: e.to_string(),
            }
            .into()
        })
    }

    /// Cut the lines `chunk` completes.
    fn lines(&mut self, chunk: &[u8], out: &mut Vec<RecordBatch>) -> SeamResult<()> {
        match self.format.line_sep.clone() {
            Some(sep) => {
                // Search the pending tail too: a separator may straddle chunks.
                let from = self.pending.len().saturating_sub(sep.len() - 1);
                self.pending.extend_from_slice(chunk);
                let mut start = 0;
                let mut at = from;
                while let Some(i) = find(&self.pending[at..], &sep) {
                    let end = at + i;
                    let line = self.pending[start..end].to_vec();
                    self.row(&line, out)?;
                    start = end + sep.len();
                    at = start;
                }
                self.pending.drain(..start);
            }
            None => {
                for &b in chunk {
                    match b {
                        b'\n' if self.after_cr => self.after_cr = false,
                        b'\n' | b'\r' => {
                            let line = std::mem::take(&mut self.pending);
                            self.row(&line, out)?;
                            self.after_cr = b == b'\r';
                        }
                        _ => {
                            self.after_cr = false;
                            self.pending.push(b);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Decoder for TextDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        if self.format.whole_text {
            self.pending.extend_from_slice(&chunk);
        } else {
            self.lines(&chunk, &mut out)?;
        }
        Ok(out)
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.pending);
        if self.format.whole_text || !rest.is_empty() {
            self.row(&rest, &mut out)?;
        }
        if self.in_rows > 0 {
            out.push(self.flush()?);
        }
        Ok(out)
    }

    fn malformed_rows(&self) -> u64 {
        self.malformed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn values(format: TextFormat, input: &[u8], cut: usize) -> (Vec<String>, u64) {
        let schema = Arc::new(Schema::new(vec![Field::new("value", DataType::Utf8, true)]));
        let mut d = TextDecoder::new("f", schema, format, 2).unwrap();
        let batches = crate::decode_in_two(&mut d, input, cut);
        let mut out = Vec::new();
        for b in batches {
            let c = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
            for i in 0..c.len() {
                out.push(c.value(i).to_string());
            }
        }
        (out, d.malformed_rows())
    }

    #[test]
    fn lines_end_at_any_newline_wherever_the_chunks_break() {
        let input = b"a\r\nb\rc\n\nd";
        for cut in 0..=input.len() {
            let (v, bad) = values(TextFormat::default(), input, cut);
            assert_eq!(v, ["a", "b", "c", "", "d"], "cut {cut}");
            assert_eq!(bad, 0);
        }
        assert!(values(TextFormat::default(), b"", 0).0.is_empty());
        assert_eq!(values(TextFormat::default(), b"x\n", 1).0, ["x"]);
    }

    #[test]
    fn a_custom_separator_may_straddle_chunks() {
        let f = TextFormat {
            whole_text: false,
            line_sep: Some(b"||".to_vec()),
        };
        let input = b"one||two|three||||";
        for cut in 0..=input.len() {
            assert_eq!(
                values(f.clone(), input, cut).0,
                ["one", "two|three", ""],
                "cut {cut}"
            );
        }
    }

    #[test]
    fn whole_text_is_one_row_and_bad_utf8_is_counted_not_dropped() {
        let f = TextFormat {
            whole_text: true,
            line_sep: None,
        };
        assert_eq!(values(f.clone(), b"a\nb\n", 2).0, ["a\nb\n"]);
        assert_eq!(values(f, b"", 0).0, [""]);
        let (v, bad) = values(TextFormat::default(), b"ok\n\xff\xfebad\n", 4);
        assert_eq!(v, ["ok", "\u{fffd}\u{fffd}bad"]);
        assert_eq!(bad, 1);
    }
}
