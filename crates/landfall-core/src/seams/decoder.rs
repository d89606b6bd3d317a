//! Decoders: the bytes of one file into Arrow record batches under a given schema.

use super::SeamResult;
use arrow_array::RecordBatch;
use bytes::Bytes;
use serde::Serialize;

/// Decodes one file. Text formats are fed chunk by chunk and decode as they go; formats that
/// need the whole file (Parquet's footer) buffer until `finish`.
pub trait Decoder: Send {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>>;
    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>>;
    /// Rows decoded so far that did not fit the schema in permissive mode (kept, with the
    /// misfit values null; the rescued-data column will carry them). Counted, never dropped.
    fn malformed_rows(&self) -> u64 {
        0
    }
    /// Where the first malformed row starts and why (`line L (byte B): reason`), when the
    /// decoder knows.
    fn first_malformed(&self) -> Option<String> {
        None
    }
    /// The malformed records met since the last call, in detail (only when the decoder was
    /// asked to keep them: `bad_records_path`).
    fn take_malformed(&mut self) -> Vec<MalformedRecord> {
        Vec::new()
    }
    /// Rows decoded so far with a value in the rescued-data column.
    fn rescued_rows(&self) -> u64 {
        0
    }
    /// Columns the file holds and the schema lacks, as a tree of only the new parts (a new
    /// nested field `a.b` is `a STRUCT<b ...>`), when the decoder was asked to look for them.
    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        Vec::new()
    }
    /// The bytes about to be pushed are a part of the file starting at 1-based `line`, byte
    /// `offset` (a file cut at newlines and decoded in parts), so reports carry the file's
    /// positions. Called before the first push; only decoders of formats that can be cut
    /// (`landfall_formats::splits_at_newlines`) act on it.
    fn start_at(&mut self, _line: u64, _offset: u64) {}
}

/// A boxed decoder is a decoder (wrappers hold `Box<dyn Decoder>`).
impl<T: Decoder + ?Sized> Decoder for Box<T> {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        (**self).push(chunk)
    }
    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        (**self).finish()
    }
    fn malformed_rows(&self) -> u64 {
        (**self).malformed_rows()
    }
    fn first_malformed(&self) -> Option<String> {
        (**self).first_malformed()
    }
    fn take_malformed(&mut self) -> Vec<MalformedRecord> {
        (**self).take_malformed()
    }
    fn rescued_rows(&self) -> u64 {
        (**self).rescued_rows()
    }
    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        (**self).new_columns()
    }
    fn start_at(&mut self, line: u64, offset: u64) {
        (**self).start_at(line, offset)
    }
}

/// A record that did not fit in permissive mode: where it starts, why, and its text when the
/// decoder has it (cut to [`MalformedRecord::MAX_TEXT`] bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MalformedRecord {
    pub path: String,
    /// 1-based line on which the record starts.
    pub line: u64,
    /// Byte offset of the record's first byte in the file.
    pub offset: u64,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
}

impl MalformedRecord {
    /// At most this much of a record's text is kept.
    pub const MAX_TEXT: usize = 64 << 10;

    /// A record's bytes as kept text: lossy UTF-8, cut to `MAX_TEXT`.
    pub fn text_of(bytes: &[u8]) -> String {
        let cut = &bytes[..bytes.len().min(Self::MAX_TEXT)];
        String::from_utf8_lossy(cut).into_owned()
    }
}

impl std::fmt::Display for MalformedRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: line {} (byte {}): {}",
            self.path, self.line, self.offset, self.reason
        )
    }
}
