//! Compressed inputs, chosen by file extension as Spark and Auto Loader do, decompressed as
//! the bytes arrive: a 2 GB `.json.gz` never sits in memory whole.
//!
//! | extension | codec |
//! |---|---|
//! | `.gz`, `.gzip` | gzip (several members concatenated, as `cat a.gz b.gz` makes) |
//! | `.zst`, `.zstd` | Zstandard (several frames) |
//! | `.bz2` | bzip2 (several streams) |
//! | `.xz` | xz (several streams) |
//! | `.lz4` | LZ4 frame format (the `lz4` tool), or Hadoop's block format (Spark's `Lz4Codec`) |
//! | `.deflate` | zlib (Hadoop's `DefaultCodec`, what Spark writes as `.deflate`) |
//! | `.snappy`, `.sz` | Snappy framing format, or Hadoop's block format (Spark's `SnappyCodec`) |
//! | `.zip` | a zip archive of one entry (stored or deflated); a second entry is an error |
//!
//! A stream cut short (a half-uploaded file) is an error at `finish`, never a silent partial
//! read: the file is corrupt, and `ignore_corrupt_files` decides what happens to it.

use crate::error::FormatError;
use std::io::Write;

/// A compression codec of input files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Zstd,
    Bzip2,
    Xz,
    Lz4,
    Deflate,
    Snappy,
    Zip,
}

impl Codec {
    pub const ALL: [Codec; 8] = [
        Codec::Gzip,
        Codec::Zstd,
        Codec::Bzip2,
        Codec::Xz,
        Codec::Lz4,
        Codec::Deflate,
        Codec::Snappy,
        Codec::Zip,
    ];

    /// The codec a path's extension names (case-insensitive), if any.
    pub fn of(path: &str) -> Option<Codec> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let (_, ext) = name.rsplit_once('.')?;
        Some(match ext.to_ascii_lowercase().as_str() {
            "gz" | "gzip" => Codec::Gzip,
            "zst" | "zstd" => Codec::Zstd,
            "bz2" => Codec::Bzip2,
            "xz" => Codec::Xz,
            "lz4" => Codec::Lz4,
            "deflate" => Codec::Deflate,
            "snappy" | "sz" => Codec::Snappy,
            "zip" => Codec::Zip,
            _ => return None,
        })
    }

    /// How many compressed bytes to inflate at a time so one step's output stays bounded by
    /// the codec's worst ratio: about 16 MB for gzip, zlib and zip (1,032:1), a block for LZ4
    /// and Snappy, about 16 MB for zstd and xz, and one block (at most about 50 MB from a run
    /// of one byte) for bzip2, whose blocks decode whole.
    pub fn piece(self) -> usize {
        match self {
            Codec::Gzip | Codec::Deflate | Codec::Zip | Codec::Lz4 | Codec::Snappy => 16 << 10,
            Codec::Zstd => 512,
            Codec::Xz => 2 << 10,
            Codec::Bzip2 => 64,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
            Codec::Bzip2 => "bzip2",
            Codec::Xz => "xz",
            Codec::Lz4 => "lz4",
            Codec::Deflate => "deflate",
            Codec::Snappy => "snappy",
            Codec::Zip => "zip",
        }
    }
}

/// A push decompressor: compressed chunks in, decompressed bytes out.
pub struct Decompressor {
    codec: Codec,
    path: String,
    inner: Inner,
    /// Bytes pushed so far (an empty file is an empty input, not a truncated stream).
    seen: u64,
}

enum Inner {
    Gzip(flate2::write::MultiGzDecoder<Vec<u8>>),
    Zlib(flate2::write::ZlibDecoder<Vec<u8>>),
    Bzip2(MultiBz),
    Xz(liblzma::write::XzDecoder<Vec<u8>>),
    Zstd(ZstdStream),
    Blocks(crate::compression_blocks::BlockStream),
    Zip(crate::compression_blocks::ZipStream),
}

impl Decompressor {
    pub fn new(codec: Codec, path: &str) -> Result<Self, FormatError> {
        let inner = match codec {
            Codec::Gzip => Inner::Gzip(flate2::write::MultiGzDecoder::new(Vec::new())),
            Codec::Deflate => Inner::Zlib(flate2::write::ZlibDecoder::new(Vec::new())),
            Codec::Bzip2 => Inner::Bzip2(MultiBz::default()),
            Codec::Xz => Inner::Xz(liblzma::write::XzDecoder::new_multi_decoder(Vec::new())),
            Codec::Zstd => Inner::Zstd(ZstdStream::new().map_err(|e| corrupt(codec, path, e))?),
            Codec::Lz4 => Inner::Blocks(crate::compression_blocks::BlockStream::lz4()),
            Codec::Snappy => Inner::Blocks(crate::compression_blocks::BlockStream::snappy()),
            Codec::Zip => Inner::Zip(crate::compression_blocks::ZipStream::new()),
        };
        Ok(Decompressor {
            codec,
            path: path.to_string(),
            inner,
            seen: 0,
        })
    }

    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Decompress a chunk; returns what it completes.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<u8>, FormatError> {
        self.seen += chunk.len() as u64;
        let r = match &mut self.inner {
            Inner::Gzip(d) => d.write_all(chunk).map(|_| std::mem::take(d.get_mut())),
            Inner::Zlib(d) => d.write_all(chunk).map(|_| std::mem::take(d.get_mut())),
            Inner::Bzip2(d) => d.push(chunk),
            Inner::Xz(d) => d.write_all(chunk).map(|_| std::mem::take(d.get_mut())),
            Inner::Zstd(d) => d.push(chunk),
            Inner::Blocks(d) => d.push(chunk),
            Inner::Zip(d) => d.push(chunk),
        };
        r.map_err(|e| corrupt(self.codec, &self.path, e))
    }

    /// The end of the input: the rest, or an error when the stream was cut short.
    pub fn finish(&mut self) -> Result<Vec<u8>, FormatError> {
        if self.seen == 0 {
            return Ok(Vec::new());
        }
        let r = match &mut self.inner {
            Inner::Gzip(d) => d.try_finish().map(|_| std::mem::take(d.get_mut())),
            Inner::Zlib(d) => d.try_finish().map(|_| std::mem::take(d.get_mut())),
            Inner::Bzip2(d) => d.finish(),
            Inner::Xz(d) => d.try_finish().map(|_| std::mem::take(d.get_mut())),
            Inner::Zstd(d) => d.finish(),
            Inner::Blocks(d) => d.finish(),
            Inner::Zip(d) => d.finish(),
        };
        r.map_err(|e| corrupt(self.codec, &self.path, e))
    }
}

fn corrupt(codec: Codec, path: &str, e: std::io::Error) -> FormatError {
    FormatError::Unreadable {
        path: path.to_string(),
        reason: format!("{} stream: {e}", codec.as_str()),
    }
}

/// Up to `cap` decompressed bytes of the start of a file (schema inference samples a file's
/// head): a stream cut short there is expected and not an error.
pub fn decompress_head(
    codec: Codec,
    path: &str,
    bytes: &[u8],
    cap: usize,
    complete: bool,
) -> Result<Vec<u8>, FormatError> {
    let mut d = Decompressor::new(codec, path)?;
    let mut out = Vec::new();
    for chunk in bytes.chunks(codec.piece()) {
        out.extend(d.push(chunk)?);
        if out.len() >= cap {
            out.truncate(cap);
            return Ok(out);
        }
    }
    if complete {
        out.extend(d.finish()?);
    }
    out.truncate(cap);
    Ok(out)
}

/// bzip2 streams one after another (pbzip2 and `cat a.bz2 b.bz2` make several): a decoder
/// per stream, the next one started where the last one ended.
#[derive(Default)]
struct MultiBz {
    d: Option<bzip2::write::BzDecoder<Vec<u8>>>,
}

impl MultiBz {
    fn push(&mut self, mut input: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        while !input.is_empty() {
            let d = self
                .d
                .get_or_insert_with(|| bzip2::write::BzDecoder::new(Vec::new()));
            // A decoder takes no more bytes once its stream ended: what follows is the next.
            let n = d.write(input)?;
            d.flush()?;
            out.append(d.get_mut());
            if n == 0 {
                d.try_finish()?;
                out.append(d.get_mut());
                self.d = None;
            }
            input = &input[n..];
        }
        Ok(out)
    }

    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        match &mut self.d {
            Some(d) if d.total_in() > 0 => {
                d.try_finish()?;
                Ok(std::mem::take(d.get_mut()))
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// Zstandard through the streaming API, which tells when a frame is complete.
struct ZstdStream {
    d: zstd::stream::raw::Decoder<'static>,
    /// Output buffer, reused across pushes.
    buf: Vec<u8>,
    /// The last call's hint: 0 when the input ended on a frame boundary.
    remaining: usize,
}

impl ZstdStream {
    fn new() -> std::io::Result<Self> {
        Ok(ZstdStream {
            d: zstd::stream::raw::Decoder::new()?,
            buf: vec![0u8; 128 << 10],
            remaining: 0,
        })
    }

    fn push(&mut self, mut input: &[u8]) -> std::io::Result<Vec<u8>> {
        use zstd::stream::raw::Operation;
        let mut out = Vec::new();
        let buf = &mut self.buf;
        while !input.is_empty() {
            let status = self.d.run_on_buffers(input, buf)?;
            out.extend_from_slice(&buf[..status.bytes_written]);
            input = &input[status.bytes_read..];
            self.remaining = status.remaining;
            // A frame's end: the next one starts afresh.
            if status.remaining == 0 && !input.is_empty() {
                self.d.reinit()?;
            }
            if status.bytes_read == 0 && status.bytes_written == 0 {
                break;
            }
        }
        // Flush what the decoder holds back.
        loop {
            let status = self.d.run_on_buffers(&[], buf)?;
            out.extend_from_slice(&buf[..status.bytes_written]);
            if status.bytes_written < buf.len() {
                break;
            }
        }
        Ok(out)
    }

    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        if self.remaining != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the stream ends inside a frame (a file cut short?)",
            ));
        }
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text() -> Vec<u8> {
        (0..20_000)
            .map(|i| format!("{{\"id\":{i},\"name\":\"n{}\"}}\n", i % 31))
            .collect::<String>()
            .into_bytes()
    }

    /// `data` compressed with `codec` by the codec crates' own encoders (two members or
    /// frames where the format allows several).
    fn encode(codec: Codec, data: &[u8]) -> Vec<u8> {
        let (a, b) = data.split_at(data.len() / 3);
        match codec {
            Codec::Gzip => [a, b]
                .iter()
                .flat_map(|part| {
                    let mut w = flate2::write::GzEncoder::new(Vec::new(), Default::default());
                    w.write_all(part).unwrap();
                    w.finish().unwrap()
                })
                .collect(),
            Codec::Deflate => {
                let mut w = flate2::write::ZlibEncoder::new(Vec::new(), Default::default());
                w.write_all(data).unwrap();
                w.finish().unwrap()
            }
            Codec::Bzip2 => [a, b]
                .iter()
                .flat_map(|part| {
                    let mut w = bzip2::write::BzEncoder::new(Vec::new(), Default::default());
                    w.write_all(part).unwrap();
                    w.finish().unwrap()
                })
                .collect(),
            Codec::Xz => [a, b]
                .iter()
                .flat_map(|part| {
                    let mut w = liblzma::write::XzEncoder::new(Vec::new(), 1);
                    w.write_all(part).unwrap();
                    w.finish().unwrap()
                })
                .collect(),
            Codec::Zstd => [a, b]
                .iter()
                .flat_map(|part| zstd::stream::encode_all(*part, 1).unwrap())
                .collect(),
            Codec::Lz4 => {
                let mut w = lz4_flex::frame::FrameEncoder::new(Vec::new());
                w.write_all(data).unwrap();
                w.finish().unwrap()
            }
            Codec::Snappy => {
                let mut w = snap::write::FrameEncoder::new(Vec::new());
                w.write_all(data).unwrap();
                w.into_inner().unwrap()
            }
            Codec::Zip => {
                // One deflated entry with a data descriptor, then a central directory.
                let mut w = flate2::write::DeflateEncoder::new(Vec::new(), Default::default());
                w.write_all(data).unwrap();
                let body = w.finish().unwrap();
                let mut z = vec![0x50, 0x4B, 0x03, 0x04, 20, 0, 0x08, 0, 8, 0];
                z.extend([0u8; 16]);
                z.extend(5u16.to_le_bytes());
                z.extend(0u16.to_le_bytes());
                z.extend(b"a.txt");
                z.extend(body);
                z.extend([0x50, 0x4B, 0x07, 0x08]);
                z.extend([0u8; 12]);
                z.extend([0x50, 0x4B, 0x01, 0x02]);
                z.extend([0u8; 42]);
                z.extend([0x50, 0x4B, 0x05, 0x06]);
                z.extend([0u8; 18]);
                z
            }
        }
    }

    fn decode(codec: Codec, input: &[u8], step: usize) -> Result<Vec<u8>, FormatError> {
        let mut d = Decompressor::new(codec, "f")?;
        let mut out = Vec::new();
        for c in input.chunks(step) {
            out.extend(d.push(c)?);
        }
        out.extend(d.finish()?);
        Ok(out)
    }

    #[test]
    fn every_codec_round_trips_in_any_chunking() {
        let data = text();
        for codec in Codec::ALL {
            let encoded = encode(codec, &data);
            for step in [1, 13, 8192, 1 << 22] {
                if step == 1 && encoded.len() > 200_000 {
                    continue;
                }
                let got = decode(codec, &encoded, step)
                    .unwrap_or_else(|e| panic!("{codec:?} in steps of {step}: {e}"));
                assert_eq!(got.len(), data.len(), "{codec:?} in steps of {step}");
                assert!(got == data, "{codec:?} in steps of {step}");
            }
            // Empty input is an empty file, not an error.
            assert!(decode(codec, &[], 10).unwrap().is_empty());
        }
    }

    #[test]
    fn a_stream_cut_short_is_an_error_never_a_partial_file() {
        let data = text();
        for codec in Codec::ALL {
            let encoded = encode(codec, &data);
            for cut in [1, encoded.len() / 2, encoded.len() * 2 / 3 + 1] {
                let r = decode(codec, &encoded[..encoded.len() - cut], 4096);
                assert!(
                    r.is_err(),
                    "{codec:?} cut by {cut} bytes decoded: {} bytes",
                    r.map(|v| v.len()).unwrap_or(0)
                );
            }
        }
    }

    /// A decompression bomb (256 MB of zeros, a few hundred bytes to a few hundred KB
    /// compressed) fed in the codec's pieces never yields more than about one block at once.
    #[test]
    fn bombs_come_out_a_bounded_piece_at_a_time() {
        let zeros = vec![0u8; 256 << 20];
        for codec in [Codec::Bzip2, Codec::Zstd, Codec::Xz, Codec::Gzip] {
            let encoded = encode(codec, &zeros);
            let mut d = Decompressor::new(codec, "bomb").unwrap();
            let (mut total, mut largest) = (0usize, 0usize);
            for piece in encoded.chunks(codec.piece()) {
                let n = d.push(piece).unwrap().len();
                total += n;
                largest = largest.max(n);
            }
            total += d.finish().unwrap().len();
            assert_eq!(total, zeros.len(), "{codec:?}");
            assert!(
                largest <= 64 << 20,
                "{codec:?}: {largest} bytes from one piece"
            );
        }
    }

    /// A zip of two entries is refused, never read as its first one.
    #[test]
    fn a_second_zip_entry_is_an_error() {
        let one = encode(Codec::Zip, b"{\"id\":1}\n");
        // Two local entries before the central directory.
        let entry_end = one
            .windows(4)
            .position(|w| w == [0x50, 0x4B, 0x01, 0x02])
            .unwrap();
        let mut two = one[..entry_end].to_vec();
        two.extend_from_slice(&one[..entry_end]);
        two.extend_from_slice(&one[entry_end..]);
        for step in [7, 1 << 20] {
            let r = decode(Codec::Zip, &two, step);
            assert!(r.is_err(), "step {step}: {:?}", r.map(|v| v.len()));
        }
    }

    /// Random bytes and random corruptions of valid streams: an error or some output, never a
    /// panic.
    #[test]
    fn random_bytes_and_corruptions_never_panic() {
        let data = text();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for codec in Codec::ALL {
            let encoded = encode(codec, &data[..4000]);
            for _ in 0..200 {
                let mut bytes = if next() % 2 == 0 {
                    encoded.clone()
                } else {
                    (0..(next() % 3000)).map(|_| next() as u8).collect()
                };
                for _ in 0..(next() % 4) {
                    if !bytes.is_empty() {
                        let i = (next() as usize) % bytes.len();
                        bytes[i] = next() as u8;
                    }
                }
                let _ = decode(codec, &bytes, 1 + (next() as usize) % 5000);
            }
        }
    }
    #[test]
    fn codecs_by_extension() {
        assert_eq!(Codec::of("a/b.json.gz"), Some(Codec::Gzip));
        assert_eq!(Codec::of("b.CSV.ZST"), Some(Codec::Zstd));
        assert_eq!(Codec::of("x.txt.snappy"), Some(Codec::Snappy));
        assert_eq!(Codec::of("x.json"), None);
        assert_eq!(Codec::of("dir.gz/x"), None);
        assert_eq!(Codec::of("noext"), None);
    }
}
