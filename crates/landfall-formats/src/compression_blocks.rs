//! Block-framed codecs decoded chunk by chunk: the LZ4 frame format, the Snappy framing
//! format, Hadoop's block format (Spark's `Lz4Codec` and `SnappyCodec`), and a zip archive's
//! single entry. Each parses its framing from a buffer that holds at most one block (and its
//! header), so memory follows the block size, not the file.
//!
//! - LZ4 frame: magic `04 22 4D 18`, a frame descriptor, blocks of `size (u32 LE, high bit:
//!   stored)` + data (+ a checksum when the descriptor says), an end mark `0`, then another
//!   frame or the end. Linked blocks decode with the previous 64 KB as dictionary. Skippable
//!   frames (`5x 2A 4D 18`) are skipped.
//! - Snappy framing: chunks of `type (u8) + length (u24 LE)`: `0xff` stream identifier,
//!   `0x00` compressed data, `0x01` uncompressed data (each with a 4-byte masked CRC-32C first),
//!   `0x80..=0xfd` skippable, `0x02..=0x7f` reserved (an error).
//! - Hadoop blocks: `uncompressed length (u32 BE)`, then chunks of `compressed length (u32
//!   BE)` + a raw LZ4 or Snappy block, until the uncompressed length is reached; repeated.
//! - Zip: the local file header (`50 4B 03 04`), the entry's data (stored, or deflated and
//!   ended by the deflate stream itself), an optional data descriptor; the central directory
//!   that follows is skipped up to its end record (`50 4B 05 06`), without which the archive
//!   counts as cut short; a second local header is an error (one entry only).

use std::io::{Error, ErrorKind, Result, Write};

const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4D, 0x18];
const SNAPPY_MAGIC: [u8; 10] = [0xff, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];
/// A Hadoop block or chunk larger than this is taken as corruption, not allocated (Hadoop's
/// codecs write 64 to 256 KB buffers).
const MAX_BLOCK: usize = 16 << 20;

fn bad(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidData, msg.into())
}

fn cut_short() -> Error {
    Error::new(
        ErrorKind::UnexpectedEof,
        "the stream ends inside a block (a file cut short?)",
    )
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lz4,
    Snappy,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Not decided yet (fewer bytes than a magic seen).
    Unknown,
    Lz4Frame,
    SnappyFrame,
    Hadoop,
}

/// LZ4 or Snappy input in whichever framing it comes.
pub struct BlockStream {
    kind: Kind,
    framing: Framing,
    buf: Vec<u8>,
    /// LZ4 frame: inside a frame (after its descriptor), with its flags.
    lz4: Option<Lz4Frame>,
    /// Hadoop: uncompressed bytes left in the current block.
    hadoop_left: u64,
    /// LZ4 linked blocks: the last 64 KB of output.
    window: Vec<u8>,
}

#[derive(Clone, Copy)]
struct Lz4Frame {
    block_checksum: bool,
    content_checksum: bool,
    linked: bool,
    max_block: usize,
}

impl BlockStream {
    pub fn lz4() -> Self {
        Self::new(Kind::Lz4)
    }

    pub fn snappy() -> Self {
        Self::new(Kind::Snappy)
    }

    fn new(kind: Kind) -> Self {
        BlockStream {
            kind,
            framing: Framing::Unknown,
            buf: Vec::new(),
            lz4: None,
            hadoop_left: 0,
            window: Vec::new(),
        }
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<u8>> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        if self.framing == Framing::Unknown {
            let magic: &[u8] = match self.kind {
                Kind::Lz4 => &LZ4_MAGIC,
                Kind::Snappy => &SNAPPY_MAGIC,
            };
            let n = self.buf.len().min(magic.len());
            if self.buf[..n] != magic[..n] {
                self.framing = Framing::Hadoop;
            } else if self.buf.len() >= magic.len() {
                self.framing = match self.kind {
                    Kind::Lz4 => Framing::Lz4Frame,
                    Kind::Snappy => Framing::SnappyFrame,
                };
            } else {
                return Ok(out);
            }
        }
        let mut at = 0;
        loop {
            let used = match self.framing {
                Framing::Lz4Frame => self.lz4_step(&mut out, at)?,
                Framing::SnappyFrame => self.snappy_step(&mut out, at)?,
                Framing::Hadoop => self.hadoop_step(&mut out, at)?,
                Framing::Unknown => unreachable!("decided above"),
            };
            match used {
                Some(n) => at += n,
                None => break,
            }
        }
        self.buf.drain(..at);
        Ok(out)
    }

    pub fn finish(&mut self) -> Result<Vec<u8>> {
        let out = self.push(&[])?;
        let mid = match self.framing {
            Framing::Unknown => !self.buf.is_empty(),
            Framing::Lz4Frame => self.lz4.is_some() || !self.buf.is_empty(),
            Framing::SnappyFrame => !self.buf.is_empty(),
            Framing::Hadoop => self.hadoop_left > 0 || !self.buf.is_empty(),
        };
        if mid {
            return Err(cut_short());
        }
        Ok(out)
    }

    /// One LZ4 frame step from `buf[at..]`: bytes used, or `None` when more input is needed.
    fn lz4_step(&mut self, out: &mut Vec<u8>, at: usize) -> Result<Option<usize>> {
        let b = &self.buf[at..];
        let Some(frame) = self.lz4 else {
            if b.len() < 4 {
                return Ok(None);
            }
            let magic = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
                // Skippable frame.
                if b.len() < 8 {
                    return Ok(None);
                }
                let n = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
                return Ok((b.len() >= 8 + n).then_some(8 + n));
            }
            if b[..4] != LZ4_MAGIC {
                return Err(bad("not an LZ4 frame (bad magic number)"));
            }
            if b.len() < 7 {
                return Ok(None);
            }
            let (flg, bd) = (b[4], b[5]);
            if flg >> 6 != 1 {
                return Err(bad(format!("LZ4 frame version {} is not 1", flg >> 6)));
            }
            if flg & 0x01 != 0 {
                return Err(bad("LZ4 frames with a dictionary id are not supported"));
            }
            let header = 7 + if flg & 0x08 != 0 { 8 } else { 0 };
            if b.len() < header {
                return Ok(None);
            }
            let max_block = match (bd >> 4) & 0x7 {
                4 => 64 << 10,
                5 => 256 << 10,
                6 => 1 << 20,
                7 => 4 << 20,
                n => return Err(bad(format!("LZ4 block size code {n} is invalid"))),
            };
            self.lz4 = Some(Lz4Frame {
                block_checksum: flg & 0x10 != 0,
                content_checksum: flg & 0x04 != 0,
                linked: flg & 0x20 == 0,
                max_block,
            });
            self.window.clear();
            return Ok(Some(header));
        };
        if b.len() < 4 {
            return Ok(None);
        }
        let word = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if word == 0 {
            let end = 4 + if frame.content_checksum { 4 } else { 0 };
            if b.len() < end {
                return Ok(None);
            }
            self.lz4 = None;
            return Ok(Some(end));
        }
        let stored = word & 0x8000_0000 != 0;
        let size = (word & 0x7FFF_FFFF) as usize;
        if size > frame.max_block {
            return Err(bad(format!(
                "LZ4 block of {size} bytes exceeds the frame's {} byte blocks",
                frame.max_block
            )));
        }
        let total = 4 + size + if frame.block_checksum { 4 } else { 0 };
        if b.len() < total {
            return Ok(None);
        }
        let data = &b[4..4 + size];
        let block = if stored {
            data.to_vec()
        } else if frame.linked && !self.window.is_empty() {
            lz4_flex::block::decompress_with_dict(data, frame.max_block, &self.window)
                .map_err(|e| bad(format!("LZ4 block: {e}")))?
        } else {
            lz4_flex::block::decompress(data, frame.max_block)
                .map_err(|e| bad(format!("LZ4 block: {e}")))?
        };
        if frame.linked {
            self.window.extend_from_slice(&block);
            let keep = self.window.len().saturating_sub(64 << 10);
            self.window.drain(..keep);
        }
        out.extend_from_slice(&block);
        Ok(Some(total))
    }

    /// One Snappy framing chunk.
    fn snappy_step(&mut self, out: &mut Vec<u8>, at: usize) -> Result<Option<usize>> {
        let b = &self.buf[at..];
        if b.len() < 4 {
            return Ok(None);
        }
        let kind = b[0];
        let len = u32::from_le_bytes([b[1], b[2], b[3], 0]) as usize;
        if b.len() < 4 + len {
            return Ok(None);
        }
        let body = &b[4..4 + len];
        match kind {
            0xff => {
                if body != &SNAPPY_MAGIC[4..] {
                    return Err(bad("bad Snappy stream identifier"));
                }
            }
            0x00 | 0x01 => {
                if len < 4 {
                    return Err(bad("Snappy chunk shorter than its checksum"));
                }
                let data = &body[4..];
                if kind == 0x00 {
                    // The framing format caps a chunk at 64 KB of data: a larger claim is
                    // corruption, not an allocation.
                    let n = snap::raw::decompress_len(data)
                        .map_err(|e| bad(format!("Snappy chunk: {e}")))?;
                    if n > 65536 {
                        return Err(bad(format!(
                            "Snappy chunk claims {n} bytes (at most 65536)"
                        )));
                    }
                    let block = snap::raw::Decoder::new()
                        .decompress_vec(data)
                        .map_err(|e| bad(format!("Snappy chunk: {e}")))?;
                    out.extend_from_slice(&block);
                } else {
                    out.extend_from_slice(data);
                }
            }
            0x80..=0xfe => {}
            _ => return Err(bad(format!("reserved Snappy chunk type {kind:#04x}"))),
        }
        Ok(Some(4 + len))
    }

    /// One Hadoop block-format step.
    fn hadoop_step(&mut self, out: &mut Vec<u8>, at: usize) -> Result<Option<usize>> {
        let b = &self.buf[at..];
        if b.len() < 4 {
            return Ok(None);
        }
        let n = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if self.hadoop_left == 0 {
            // A block's uncompressed length (0: an empty block).
            if n > MAX_BLOCK {
                return Err(bad(format!(
                    "block of {n} bytes: not a Hadoop {} stream",
                    self.kind_name()
                )));
            }
            self.hadoop_left = n as u64;
            return Ok(Some(4));
        }
        if n > MAX_BLOCK {
            return Err(bad(format!("compressed chunk of {n} bytes")));
        }
        if b.len() < 4 + n {
            return Ok(None);
        }
        let data = &b[4..4 + n];
        let chunk = match self.kind {
            Kind::Snappy => {
                let claimed = snap::raw::decompress_len(data)
                    .map_err(|e| bad(format!("Snappy block: {e}")))?;
                if claimed as u64 > self.hadoop_left {
                    return Err(bad("a chunk decompresses past its block's length"));
                }
                snap::raw::Decoder::new()
                    .decompress_vec(data)
                    .map_err(|e| bad(format!("Snappy block: {e}")))?
            }
            Kind::Lz4 => {
                lz4_flex::block::decompress(data, (self.hadoop_left as usize).min(MAX_BLOCK))
                    .map_err(|e| bad(format!("LZ4 block: {e}")))?
            }
        };
        if chunk.len() as u64 > self.hadoop_left {
            return Err(bad("a chunk decompresses past its block's length"));
        }
        self.hadoop_left -= chunk.len() as u64;
        out.extend_from_slice(&chunk);
        Ok(Some(4 + n))
    }

    fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Lz4 => "LZ4",
            Kind::Snappy => "Snappy",
        }
    }
}

enum ZipState {
    /// Before (or inside) the local file header.
    Header,
    /// A stored entry with this many bytes left.
    Stored(u64),
    /// A deflated entry, inflated until its deflate stream ends.
    Deflated(Box<flate2::write::DeflateDecoder<Vec<u8>>>),
    /// The entry is done: a data descriptor, the central directory, or a second entry follow.
    Done,
    /// The end of central directory record was seen: the archive is whole.
    End,
}

/// The single entry of a zip archive.
pub struct ZipStream {
    state: ZipState,
    buf: Vec<u8>,
}

impl Default for ZipStream {
    fn default() -> Self {
        Self::new()
    }
}

impl ZipStream {
    pub fn new() -> Self {
        ZipStream {
            state: ZipState::Header,
            buf: Vec::new(),
        }
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<u8>> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        loop {
            match &mut self.state {
                ZipState::Header => {
                    let b = &self.buf;
                    if b.len() < 30 {
                        return Ok(out);
                    }
                    if b[..4] != [0x50, 0x4B, 0x03, 0x04] {
                        return Err(bad("not a zip archive (no local file header)"));
                    }
                    let flags = u16::from_le_bytes([b[6], b[7]]);
                    let method = u16::from_le_bytes([b[8], b[9]]);
                    let size = u32::from_le_bytes([b[18], b[19], b[20], b[21]]) as u64;
                    let name_len = u16::from_le_bytes([b[26], b[27]]) as usize;
                    let extra_len = u16::from_le_bytes([b[28], b[29]]) as usize;
                    let header = 30 + name_len + extra_len;
                    if b.len() < header {
                        return Ok(out);
                    }
                    if flags & 0x01 != 0 {
                        return Err(bad("encrypted zip entries are not supported"));
                    }
                    self.state = match method {
                        0 if flags & 0x08 != 0 || size == u32::MAX as u64 => {
                            return Err(bad(
                                "a stored zip entry without its length in the local header (streamed or zip64) is not supported",
                            ));
                        }
                        0 => ZipState::Stored(size),
                        8 => ZipState::Deflated(Box::new(flate2::write::DeflateDecoder::new(
                            Vec::new(),
                        ))),
                        m => {
                            return Err(bad(format!(
                                "zip compression method {m} is not supported (stored or deflate only)"
                            )));
                        }
                    };
                    self.buf.drain(..header);
                }
                ZipState::Stored(left) => {
                    let n = (*left).min(self.buf.len() as u64) as usize;
                    out.extend(self.buf.drain(..n));
                    *left -= n as u64;
                    if *left > 0 {
                        return Ok(out);
                    }
                    self.state = ZipState::Done;
                }
                ZipState::Deflated(d) => {
                    if self.buf.is_empty() {
                        return Ok(out);
                    }
                    // The deflate stream knows its end: once there, it takes no more bytes
                    // (what follows is the trailer).
                    let n = d.write(&self.buf)?;
                    out.extend(std::mem::take(d.get_mut()));
                    self.buf.drain(..n);
                    if n == 0 {
                        self.state = ZipState::Done;
                    }
                }
                ZipState::End => {
                    self.buf.clear();
                    return Ok(out);
                }
                ZipState::Done => {
                    if let Some(i) = find(&self.buf, &[0x50, 0x4B, 0x05, 0x06]) {
                        if find(&self.buf[..i], &[0x50, 0x4B, 0x03, 0x04]).is_some() {
                            return Err(bad(
                                "the zip archive holds more than one entry (one file per archive is read)",
                            ));
                        }
                        // The end record: 22 bytes and its comment.
                        self.buf.drain(..i);
                        if self.buf.len() >= 22 {
                            let comment = u16::from_le_bytes([self.buf[20], self.buf[21]]);
                            if self.buf.len() >= 22 + comment as usize {
                                self.state = ZipState::End;
                                self.buf.clear();
                            }
                        }
                        return Ok(out);
                    }
                    if find(&self.buf, &[0x50, 0x4B, 0x03, 0x04]).is_some() {
                        return Err(bad(
                            "the zip archive holds more than one entry (one file per archive is read)",
                        ));
                    }
                    // Keep only a possible partial signature at the end.
                    let keep = self.buf.len().saturating_sub(3);
                    self.buf.drain(..keep);
                    return Ok(out);
                }
            }
        }
    }

    pub fn finish(&mut self) -> Result<Vec<u8>> {
        let out = self.push(&[])?;
        match &mut self.state {
            ZipState::End => Ok(out),
            // No end of central directory: the archive was cut short (a half-uploaded file),
            // even if its entry is whole.
            _ => Err(cut_short()),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lz4_frame(data: &[u8]) -> Vec<u8> {
        let mut w = lz4_flex::frame::FrameEncoder::new(Vec::new());
        w.write_all(data).unwrap();
        w.finish().unwrap()
    }

    fn snappy_frame(data: &[u8]) -> Vec<u8> {
        let mut w = snap::write::FrameEncoder::new(Vec::new());
        w.write_all(data).unwrap();
        w.into_inner().unwrap()
    }

    fn hadoop(kind: Kind, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for block in data.chunks(100_000) {
            out.extend((block.len() as u32).to_be_bytes());
            for chunk in block.chunks(30_000) {
                let c = match kind {
                    Kind::Lz4 => lz4_flex::block::compress(chunk),
                    Kind::Snappy => snap::raw::Encoder::new().compress_vec(chunk).unwrap(),
                };
                out.extend((c.len() as u32).to_be_bytes());
                out.extend(c);
            }
        }
        out
    }

    fn sample() -> Vec<u8> {
        (0..40_000)
            .map(|i| format!("{{\"id\":{i},\"name\":\"row {}\"}}\n", i % 97))
            .collect::<String>()
            .into_bytes()
    }

    fn decode(mut s: BlockStream, input: &[u8], step: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for c in input.chunks(step) {
            out.extend(s.push(c)?);
        }
        out.extend(s.finish()?);
        Ok(out)
    }

    #[test]
    fn every_framing_decodes_in_any_chunking_and_cut_streams_fail() {
        let data = sample();
        let cases = [
            (BlockStream::lz4 as fn() -> BlockStream, lz4_frame(&data)),
            (BlockStream::snappy, snappy_frame(&data)),
            (BlockStream::lz4, hadoop(Kind::Lz4, &data)),
            (BlockStream::snappy, hadoop(Kind::Snappy, &data)),
        ];
        for (make, encoded) in &cases {
            for step in [1, 7, 4096, 1 << 20] {
                assert_eq!(decode(make(), encoded, step).unwrap(), data);
            }
            let cut = &encoded[..encoded.len() - 3];
            assert!(decode(make(), cut, 4096).is_err());
        }
    }
}
