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

/// A record that did not fit: where it starts and why. Decoders keep the first one (for
/// logs) and count the rest; every one when asked (`bad_records_path`).
pub use landfall_core::MalformedRecord;

/// The malformed-record tally of one file.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    pub rows: u64,
    pub first: Option<MalformedRecord>,
    /// Keep every record's detail in `records` (else only the first).
    pub collect: bool,
    pub records: Vec<MalformedRecord>,
}

impl Tally {
    pub fn collecting(collect: bool) -> Self {
        Tally {
            collect,
            ..Default::default()
        }
    }

    /// Count one malformed row; `detail` is only built for the first, unless collecting.
    pub fn note(&mut self, detail: impl FnOnce() -> MalformedRecord) {
        self.rows += 1;
        if self.first.is_none() || self.collect {
            let d = detail();
            if self.collect {
                self.records.push(d.clone());
            }
            if self.first.is_none() {
                self.first = Some(d);
            }
        }
    }

    pub fn absorb(&mut self, other: Tally) {
        self.rows += other.rows;
        if self.first.is_none() {
            self.first = other.first;
        }
        self.records.extend(other.records);
    }
}
