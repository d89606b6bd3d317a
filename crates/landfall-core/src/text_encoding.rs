//! Character sets of text inputs (Spark's CSV `encoding`).

/// A text file's character set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TextEncoding {
    #[default]
    Utf8,
    Latin1,
    Utf16Le,
    Utf16Be,
    /// UTF-16 with a byte-order mark deciding (big-endian without one).
    Utf16,
}

impl TextEncoding {
    /// Spark's names (any case): UTF-8, ISO-8859-1 (latin1), UTF-16, UTF-16LE, UTF-16BE.
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().replace('_', "-").as_str() {
            "UTF-8" | "UTF8" => Some(TextEncoding::Utf8),
            "ISO-8859-1" | "LATIN1" | "ISO8859-1" => Some(TextEncoding::Latin1),
            "UTF-16LE" => Some(TextEncoding::Utf16Le),
            "UTF-16BE" => Some(TextEncoding::Utf16Be),
            "UTF-16" | "UTF16" => Some(TextEncoding::Utf16),
            _ => None,
        }
    }
}
