//! Character sets of CSV files other than UTF-8 (Spark's `encoding`), transcoded to UTF-8 as
//! chunks arrive, before tokenizing.
//!
//! ISO-8859-1 maps each byte to the code point of the same value. UTF-16 (LE or BE; plain
//! `UTF-16` reads a byte-order mark and is big-endian without one, as Java's decoder) pairs
//! bytes across chunk boundaries, joins surrogate pairs, and writes U+FFFD for an unpaired
//! surrogate or an odd last byte. A UTF-16 byte-order mark is not data.

use bytes::Bytes;
use landfall_core::seams::SeamResult;

pub use landfall_core::TextEncoding;

/// `inner` fed UTF-8, whatever `encoding` the file is in.
pub fn transcoding(
    encoding: TextEncoding,
    inner: Box<dyn landfall_core::Decoder>,
) -> Box<dyn landfall_core::Decoder> {
    match encoding {
        TextEncoding::Utf8 => inner,
        e => Box::new(Transcoder {
            conv: Converter::new(e),
            inner,
        }),
    }
}

/// A whole text (an inference sample) as UTF-8.
pub fn transcode_all(encoding: TextEncoding, bytes: &[u8]) -> Vec<u8> {
    match encoding {
        TextEncoding::Utf8 => bytes.to_vec(),
        e => Converter::new(e).convert(bytes, true),
    }
}

struct Transcoder {
    conv: Converter,
    inner: Box<dyn landfall_core::Decoder>,
}

/// The streaming conversion to UTF-8.
struct Converter {
    encoding: TextEncoding,
    big_endian: bool,
    /// The first bytes were seen (a byte-order mark is looked for there).
    started: bool,
    /// Bytes of an unfinished UTF-16 unit or surrogate pair.
    carry: Vec<u8>,
}

impl Converter {
    fn new(encoding: TextEncoding) -> Self {
        Converter {
            encoding,
            big_endian: encoding != TextEncoding::Utf16Le,
            started: false,
            carry: Vec::new(),
        }
    }

    fn convert(&mut self, chunk: &[u8], last: bool) -> Vec<u8> {
        if self.encoding == TextEncoding::Latin1 {
            let mut out = String::with_capacity(chunk.len());
            out.extend(chunk.iter().map(|&b| b as char));
            return out.into_bytes();
        }
        let mut bytes = std::mem::take(&mut self.carry);
        bytes.extend_from_slice(chunk);
        let mut from = 0;
        if !self.started && bytes.len() >= 2 {
            self.started = true;
            match (bytes[0], bytes[1]) {
                (0xFE, 0xFF) if self.encoding != TextEncoding::Utf16Le => {
                    self.big_endian = true;
                    from = 2;
                }
                (0xFF, 0xFE) if self.encoding != TextEncoding::Utf16Be => {
                    self.big_endian = false;
                    from = 2;
                }
                _ => {}
            }
        } else if !self.started && !last {
            self.carry = bytes;
            return Vec::new();
        }
        let body = &bytes[from..];
        let mut units: Vec<u16> = body
            .chunks_exact(2)
            .map(|p| {
                if self.big_endian {
                    u16::from_be_bytes([p[0], p[1]])
                } else {
                    u16::from_le_bytes([p[0], p[1]])
                }
            })
            .collect();
        let odd = body.len() % 2 == 1;
        let mut keep: Vec<u8> = Vec::new();
        if !last {
            if odd {
                keep.push(*body.last().expect("odd length"));
            }
            // A high surrogate at the end waits for its pair.
            if let Some(&u) = units.last()
                && (0xD800..0xDC00).contains(&u)
            {
                units.pop();
                let b = if self.big_endian {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                };
                keep.splice(0..0, b);
            }
        }
        let mut out = String::with_capacity(units.len());
        out.extend(char::decode_utf16(units).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)));
        if last && odd {
            out.push(char::REPLACEMENT_CHARACTER);
        }
        self.carry = keep;
        out.into_bytes()
    }
}

impl landfall_core::Decoder for Transcoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<arrow::array::RecordBatch>> {
        let text = self.conv.convert(&chunk, false);
        if text.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.push(Bytes::from(text))
    }

    fn finish(&mut self) -> SeamResult<Vec<arrow::array::RecordBatch>> {
        let text = self.conv.convert(&[], true);
        let mut out = if text.is_empty() {
            Vec::new()
        } else {
            self.inner.push(Bytes::from(text))?
        };
        out.extend(self.inner.finish()?);
        Ok(out)
    }

    forward_reports!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(enc: TextEncoding, input: &[u8], cut: usize) -> String {
        let mut t = Converter::new(enc);
        let mut out = t.convert(&input[..cut], false);
        out.extend(t.convert(&input[cut..], false));
        out.extend(t.convert(&[], true));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn utf16_and_latin1_at_every_cut() {
        let text = "a,b\né,𝄞\n";
        let le: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(text.encode_utf16().flat_map(|u| u.to_le_bytes()))
            .collect();
        let be: Vec<u8> = text.encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
        for cut in 0..=le.len() {
            assert_eq!(run(TextEncoding::Utf16, &le, cut), text, "le cut {cut}");
            assert_eq!(run(TextEncoding::Utf16Le, &le, cut), text, "le cut {cut}");
        }
        for cut in 0..=be.len() {
            assert_eq!(run(TextEncoding::Utf16, &be, cut), text, "be cut {cut}");
            assert_eq!(run(TextEncoding::Utf16Be, &be, cut), text, "be cut {cut}");
        }
        let latin1 = [b'a', b',', 0xE9, b'\n'];
        assert_eq!(run(TextEncoding::Latin1, &latin1, 2), "a,é\n");
        // An odd last byte and an unpaired surrogate are U+FFFD, never a panic.
        assert_eq!(run(TextEncoding::Utf16Be, &[0, b'a', 0xD8], 1), "a\u{FFFD}");
        assert_eq!(
            run(TextEncoding::Utf16Be, &[0xD8, 0, 0, b'a'], 2),
            "\u{FFFD}a"
        );
    }
}
