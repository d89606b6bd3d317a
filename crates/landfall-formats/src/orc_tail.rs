//! The shape of an ORC file's type tree, checked before orc-rust reads the file: orc-rust
//! builds its schema by recursing from each type into the types its `subtypes` name, without
//! checking that they form a tree, so a damaged footer whose struct names itself (or an
//! ancestor) recursed until the stack overflowed, which aborts the process (no panic to
//! catch). Found by fuzzing (crates/landfall-fuzz, `decode_orc`).
//!
//! It also refuses a postscript whose footer and metadata lengths exceed the file: orc-rust
//! allocated the claimed length (a damaged file asked for petabytes and the allocation failure
//! aborted the process; also found by fuzzing).
//!
//! The ORC specification stores types in pre-order: every subtype comes after its parent.
//! [`check_tail`] reads the postscript and the footer (decompressing its blocks: zlib, snappy,
//! zstd, lz4) and refuses a footer where a subtype is not after its parent or not a type at
//! all. LZO footers are not checked (no LZO decoder here); orc-rust reads them as before.

use orc_rust::proto::{CompressionKind, Footer, PostScript};
use prost::Message;
use std::io::Read;

/// The largest footer decompressed for the check (a bomb stops here).
const MAX_FOOTER: usize = 64 << 20;

/// How many bytes of a file's end hold its postscript and footer, read from its last bytes
/// `tail` (`None`: not an ORC postscript; orc-rust reports that itself).
pub(crate) fn tail_len(tail: &[u8]) -> Option<usize> {
    let ps_len = *tail.last()? as usize;
    let ps = tail
        .len()
        .checked_sub(1 + ps_len)
        .map(|s| &tail[s..tail.len() - 1])?;
    let ps = PostScript::decode(ps).ok()?;
    Some(1 + ps_len + ps.footer_length() as usize)
}

/// Check the lengths the postscript gives against the file's (`file_len`: orc-rust reads
/// them unchecked and allocated what a damaged one said, petabytes, aborting the process) and
/// the type tree of the footer in `tail` (the file's last bytes, at least [`tail_len`] of
/// them). A tail that does not parse is left to orc-rust's own errors.
pub(crate) fn check_tail(tail: &[u8], file_len: u64) -> Result<(), String> {
    let Some(ps_len) = tail.last().map(|b| *b as usize) else {
        return Ok(());
    };
    let Some(ps_start) = tail.len().checked_sub(1 + ps_len) else {
        return Ok(());
    };
    let Ok(ps) = PostScript::decode(&tail[ps_start..tail.len() - 1]) else {
        return Ok(());
    };
    let claimed = 1u64
        .saturating_add(ps_len as u64)
        .saturating_add(ps.footer_length())
        .saturating_add(ps.metadata_length());
    if claimed > file_len {
        return Err(format!(
            "its postscript says its footer and metadata take {} bytes, more than the file's {file_len}",
            claimed - 1 - ps_len as u64
        ));
    }
    let footer_len = ps.footer_length() as usize;
    let Some(footer_start) = ps_start.checked_sub(footer_len) else {
        return Ok(());
    };
    let raw = &tail[footer_start..ps_start];
    let Some(bytes) = decompress(raw, ps.compression())? else {
        return Ok(());
    };
    let Ok(footer) = Footer::decode(bytes.as_slice()) else {
        return Ok(());
    };
    let n = footer.types.len();
    for (i, t) in footer.types.iter().enumerate() {
        if let Some(bad) = t
            .subtypes
            .iter()
            .find(|&&s| (s as usize) <= i || s as usize >= n)
        {
            return Err(format!(
                "the footer's type {i} names type {bad} as its child: the types do not form a tree"
            ));
        }
    }
    Ok(())
}

/// The footer's bytes decompressed (`None`: a codec not checked here).
fn decompress(raw: &[u8], kind: CompressionKind) -> Result<Option<Vec<u8>>, String> {
    if kind == CompressionKind::None {
        return Ok(Some(raw.to_vec()));
    }
    if kind == CompressionKind::Lzo {
        return Ok(None);
    }
    let mut out = Vec::new();
    let mut rest = raw;
    while rest.len() >= 3 {
        let header = u32::from_le_bytes([rest[0], rest[1], rest[2], 0]);
        let (len, original) = ((header >> 1) as usize, header & 1 == 1);
        let block = rest
            .get(3..3 + len)
            .ok_or("the footer's compressed block is cut short")?;
        rest = &rest[3 + len..];
        if original {
            out.extend_from_slice(block);
        } else {
            let room = MAX_FOOTER.saturating_sub(out.len());
            let piece = match kind {
                CompressionKind::Zlib => {
                    let mut v = Vec::new();
                    flate2::read::DeflateDecoder::new(block)
                        .take(room as u64 + 1)
                        .read_to_end(&mut v)
                        .map_err(|e| e.to_string())
                        .map(|_| v)
                }
                CompressionKind::Snappy => snap::raw::Decoder::new()
                    .decompress_vec(block)
                    .map_err(|e| e.to_string()),
                CompressionKind::Zstd => {
                    zstd::bulk::decompress(block, room + 1).map_err(|e| e.to_string())
                }
                CompressionKind::Lz4 => lz4_flex::block::decompress(block, room.min(16 << 20))
                    .map_err(|e| e.to_string()),
                _ => return Ok(None),
            };
            // A block that does not decompress is left to orc-rust's own error.
            let Ok(piece) = piece else {
                return Ok(None);
            };
            out.extend_from_slice(&piece);
        }
        if out.len() > MAX_FOOTER {
            return Err(format!("the footer decompresses past {MAX_FOOTER} bytes"));
        }
    }
    Ok(Some(out))
}
