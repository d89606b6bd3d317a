//! Decoding errors, and the record-level detail of permissive decoding. Every variant names the
//! file; positions are of the offending record (1-based line, byte offset from the file start).

use landfall_core::SeamError;

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{path}: malformed {format} at line {line} (byte {offset}): {reason}")]
    Malformed {
        path: String,
        format: &'static str,
        line: u64,
        offset: u64,
        reason: String,
    },
    #[error("{path}: column `{column}`: {reason}")]
    Column {
        path: String,
        column: String,
        reason: String,
    },
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("schema inference: {reason}")]
    Inference { reason: String },
}

impl From<FormatError> for SeamError {
    fn from(e: FormatError) -> Self {
        // A corrupt file stays corrupt: restarting does not help.
        SeamError::fatal(e.to_string())
    }
}

/// A record that did not fit in permissive mode: where it starts and why. Decoders keep the
/// first one (for logs and, later, the bad-records file) and count the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedRecord {
    pub path: String,
    /// 1-based line on which the record starts.
    pub line: u64,
    /// Byte offset of the record's first byte in the file.
    pub offset: u64,
    pub reason: String,
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

/// The malformed-record tally of one file.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    pub rows: u64,
    pub first: Option<MalformedRecord>,
}

impl Tally {
    /// Count one malformed row; `detail` is only built for the first.
    pub fn note(&mut self, detail: impl FnOnce() -> MalformedRecord) {
        self.rows += 1;
        if self.first.is_none() {
            self.first = Some(detail());
        }
    }

    pub fn absorb(&mut self, other: Tally) {
        self.rows += other.rows;
        if self.first.is_none() {
            self.first = other.first;
        }
    }
}
