//! What a text decoder sees of a file: the bytes decompressed when the file's extension names
//! a codec ([`crate::Codec`]), and without a leading UTF-8 byte order mark, which Hadoop's line
//! reader skips too (a BOM would otherwise become part of the first CSV header or JSON key).
//!
//! [`TextInput`] wraps any push decoder; chunks may split the compressed stream or the BOM
//! anywhere.

use crate::compression::{Codec, Decompressor};
use crate::error::FormatError;
use arrow::array::RecordBatch;
use bytes::Bytes;
use landfall_core::Decoder;
use landfall_core::seams::SeamResult;

const BOM: &[u8] = &[0xEF, 0xBB, 0xBF];

/// Drops a UTF-8 BOM at the start of a byte stream, however the stream is chunked.
#[derive(Default)]
pub struct BomStrip {
    /// Bytes of the stream's start held back while they may still be a BOM.
    head: Vec<u8>,
    decided: bool,
}

impl BomStrip {
    /// The part of `chunk` to pass on.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.decided {
            return chunk.to_vec();
        }
        self.head.extend_from_slice(chunk);
        let n = self.head.len().min(BOM.len());
        if self.head[..n] != BOM[..n] {
            self.decided = true;
            return std::mem::take(&mut self.head);
        }
        if self.head.len() < BOM.len() {
            return Vec::new();
        }
        self.decided = true;
        let rest = self.head.split_off(BOM.len());
        self.head.clear();
        rest
    }

    /// [`BomStrip::push`] without copying: once the start is decided (or when this chunk
    /// decides it by itself), the chunk itself or a slice of it.
    pub fn push_bytes(&mut self, chunk: Bytes) -> Bytes {
        if self.decided {
            return chunk;
        }
        if self.head.is_empty() && chunk.len() >= BOM.len() {
            self.decided = true;
            return if chunk.starts_with(BOM) {
                chunk.slice(BOM.len()..)
            } else {
                chunk
            };
        }
        Bytes::from(self.push(&chunk))
    }

    /// The end of the stream: what was held back (a lone prefix of a BOM is data).
    pub fn finish(&mut self) -> Vec<u8> {
        self.decided = true;
        std::mem::take(&mut self.head)
    }
}

/// A text decoder behind decompression (by the path's extension) and BOM stripping.
pub struct TextInput {
    inner: Box<dyn Decoder>,
    inflate: Option<Decompressor>,
    bom: BomStrip,
}

impl TextInput {
    pub fn new(path: &str, inner: Box<dyn Decoder>) -> Result<Self, FormatError> {
        let inflate = Codec::of(path)
            .map(|c| Decompressor::new(c, path))
            .transpose()?;
        Ok(TextInput {
            inner,
            inflate,
            bom: BomStrip::default(),
        })
    }

    /// Bytes of the file (decompressed when it is compressed) on to the decoder, without a
    /// leading BOM, without a copy.
    fn pass(&mut self, bytes: Bytes) -> SeamResult<Vec<RecordBatch>> {
        let bytes = self.bom.push_bytes(bytes);
        if bytes.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.push(bytes)
    }
}

impl Decoder for TextInput {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        if self.inflate.is_none() {
            return self.pass(chunk);
        }
        // Inflated a piece at a time, so one step's decompressed bytes stay bounded by the
        // codec's worst ratio (`Codec::piece`).
        let piece = self.inflate.as_ref().expect("checked").codec().piece();
        let mut out = Vec::new();
        for piece in chunk.chunks(piece) {
            let bytes = self.inflate.as_mut().expect("checked").push(piece)?;
            out.extend(self.pass(Bytes::from(bytes))?);
        }
        Ok(out)
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let mut out = match &mut self.inflate {
            Some(d) => {
                let rest = d.finish()?;
                self.pass(Bytes::from(rest))?
            }
            None => Vec::new(),
        };
        let held = self.bom.finish();
        if !held.is_empty() {
            out.extend(self.inner.push(Bytes::from(held))?);
        }
        out.extend(self.inner.finish()?);
        Ok(out)
    }

    /// A part after the file's start: its first bytes are data, never a byte order mark.
    fn start_at(&mut self, line: u64, offset: u64) {
        if offset > 0 {
            self.bom.decided = true;
        }
        self.inner.start_at(line, offset);
    }

    forward_reports!();
}

/// A text file's sampled head as the decoders see it: decompressed (at most `cap` bytes; a
/// sample cut short is expected), without a BOM, and cut back to its last complete line when
/// the sample does not reach the file's end; and whether it does.
pub fn sample_text(
    path: &str,
    bytes: &[u8],
    cap: usize,
    complete: bool,
) -> Result<(Vec<u8>, bool), FormatError> {
    let (mut text, whole) = match Codec::of(path) {
        Some(c) => {
            let t = crate::compression::decompress_head(c, path, bytes, cap, complete)?;
            let whole = complete && t.len() < cap;
            (t, whole)
        }
        None => (bytes.to_vec(), complete),
    };
    if text.starts_with(BOM) {
        text.drain(..BOM.len());
    }
    if !whole && let Some(end) = text.iter().rposition(|b| *b == b'\n') {
        text.truncate(end + 1);
    }
    Ok((text, whole))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bom_is_dropped_however_it_is_split() {
        let input = b"\xEF\xBB\xBFid,name\n1,a\n";
        for cut in 0..input.len() {
            let mut s = BomStrip::default();
            let mut out = s.push(&input[..cut]);
            out.extend(s.push(&input[cut..]));
            out.extend(s.finish());
            assert_eq!(out, b"id,name\n1,a\n", "cut at {cut}");
        }
        let mut s = BomStrip::default();
        let mut out = s.push(b"\xEF\xBB");
        out.extend(s.finish());
        assert_eq!(out, b"\xEF\xBB", "a lone prefix of a BOM is data");
        let mut s = BomStrip::default();
        assert_eq!(s.push(b"ab\xEF\xBB\xBF"), b"ab\xEF\xBB\xBF");

        // The same without copies, cut anywhere, in up to three chunks.
        for a in 0..input.len() {
            for b in a..input.len() {
                let mut s = BomStrip::default();
                let mut out = Vec::new();
                for part in [&input[..a], &input[a..b], &input[b..]] {
                    out.extend_from_slice(&s.push_bytes(Bytes::copy_from_slice(part)));
                }
                out.extend(s.finish());
                assert_eq!(out, b"id,name\n1,a\n", "cut at {a} and {b}");
            }
        }
        let mut s = BomStrip::default();
        let chunk = Bytes::from_static(b"\xEF\xBB\xBF{}\n");
        let out = s.push_bytes(chunk.clone());
        assert_eq!(out, b"{}\n"[..]);
        assert_eq!(out.as_ptr(), chunk[3..].as_ptr(), "a slice, not a copy");
        assert_eq!(
            s.push_bytes(Bytes::from_static(b"\xEF\xBB\xBF")),
            b"\xEF\xBB\xBF"[..]
        );
    }
}
