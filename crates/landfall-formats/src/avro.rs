//! Avro object container files, read with arrow-avro, one block at a time.
//!
//! A container file is a header (magic `Obj\x01`, a metadata map holding the writer schema and
//! the codec, a 16-byte sync marker) and blocks (an object count, a byte size, the compressed
//! objects, the sync marker again). The decoder finds the header and then each complete block
//! in the bytes pushed to it, and decodes every block on its own (the header and that block,
//! through arrow-avro's container reader), so memory follows the largest block, not the file.
//!
//! Each file is read with its own writer schema and conformed to the stream schema by name
//! ([`crate::Conformer`]): columns the file lacks are null, columns the stream lacks are
//! rescued and reported as new columns, values that do not cast are rescued, as for Parquet.
//! A file whose header, block framing, sync marker or block contents are wrong is corrupt
//! (`ignore_corrupt_files` decides), also when arrow-avro panics on it (the reader is
//! guarded, [`crate::panic_guard`]). The `xz` codec is not built in.

use crate::conform::Conformer;
use crate::error::FormatError;
use crate::rescue::SchemaPolicy;
use arrow::array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use landfall_core::seams::SeamResult;

const MAGIC: &[u8; 4] = b"Obj\x01";
const SYNC: usize = 16;
/// A block larger than this is refused (a corrupt size field must not allocate gigabytes).
const MAX_BLOCK: u64 = 1 << 30;
/// A block claiming more objects is refused (a block is decoded as one batch of its count).
const MAX_OBJECTS: i64 = 1 << 24;

/// An Avro `long` (zig-zag varint) at `buf[*at..]`; `None` when the buffer ends first.
fn long(buf: &[u8], at: &mut usize) -> Result<Option<i64>, String> {
    let mut value: u64 = 0;
    let mut shift = 0u32;
    let mut i = *at;
    loop {
        let Some(&b) = buf.get(i) else {
            return Ok(None);
        };
        i += 1;
        if shift >= 64 {
            return Err("a varint longer than 10 bytes".into());
        }
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    *at = i;
    Ok(Some((value >> 1) as i64 ^ -((value & 1) as i64)))
}

/// The length of the container header at the start of `buf`, once it is all there.
fn header_len(buf: &[u8]) -> Result<Option<usize>, String> {
    if buf.len() < MAGIC.len() {
        return Ok(None);
    }
    if &buf[..4] != MAGIC {
        return Err("not an Avro object container file (no `Obj\\x01` magic)".into());
    }
    let mut at = 4;
    loop {
        let Some(count) = long(buf, &mut at)? else {
            return Ok(None);
        };
        if count == 0 {
            break;
        }
        let mut n = count.unsigned_abs();
        if count < 0 {
            // A negative count is followed by the block's byte size.
            if long(buf, &mut at)?.is_none() {
                return Ok(None);
            }
        }
        while n > 0 {
            for _ in 0..2 {
                let Some(len) = long(buf, &mut at)? else {
                    return Ok(None);
                };
                if len < 0 || len as u64 > MAX_BLOCK {
                    return Err(format!("a header entry of {len} bytes"));
                }
                at += len as usize;
                if at > buf.len() {
                    return Ok(None);
                }
            }
            n -= 1;
        }
    }
    if buf.len() < at + SYNC {
        return Ok(None);
    }
    Ok(Some(at + SYNC))
}

/// The length of the block at `buf[0..]` (count, size, data, sync) and its object count, once
/// it is all there.
fn block_len(buf: &[u8], sync: &[u8]) -> Result<Option<(usize, usize)>, String> {
    let mut at = 0;
    let Some(count) = long(buf, &mut at)? else {
        return Ok(None);
    };
    let Some(size) = long(buf, &mut at)? else {
        return Ok(None);
    };
    // A count lower than the block's objects would make arrow-avro's reader spin on the rest
    // of the block: zero objects in a non-empty block is refused here, and a block is read for
    // exactly its count of rows (`drain`).
    if !(0..=MAX_OBJECTS).contains(&count)
        || size < 0
        || size as u64 > MAX_BLOCK
        || (count == 0 && size > 0)
    {
        return Err(format!("a block of {count} objects in {size} bytes"));
    }
    let end = at + size as usize + SYNC;
    if buf.len() < end {
        return Ok(None);
    }
    if &buf[end - SYNC..end] != sync {
        return Err("a block does not end with the file's sync marker".into());
    }
    Ok(Some((end, count as usize)))
}

pub struct AvroDecoder {
    path: String,
    batch_size: usize,
    /// Bytes not decoded yet (the header until it is complete, then the next block).
    buf: Vec<u8>,
    header: Option<Vec<u8>>,
    conformer: Conformer,
}

impl AvroDecoder {
    pub fn new(path: &str, schema: SchemaRef, batch_size: usize, policy: SchemaPolicy) -> Self {
        AvroDecoder {
            path: path.to_string(),
            batch_size,
            buf: Vec::new(),
            header: None,
            conformer: Conformer::new(path, schema, policy),
        }
    }

    fn corrupt(&self, reason: impl std::fmt::Display) -> FormatError {
        FormatError::Unreadable {
            path: self.path.clone(),
            reason: format!("not a readable Avro file: {reason}"),
        }
    }

    /// Decode every complete block in `buf`.
    fn drain(&mut self) -> Result<Vec<RecordBatch>, FormatError> {
        let mut out = Vec::new();
        if self.header.is_none() {
            match header_len(&self.buf).map_err(|e| self.corrupt(e))? {
                Some(n) => {
                    self.header = Some(self.buf[..n].to_vec());
                    self.buf.drain(..n);
                }
                None => return Ok(out),
            }
        }
        let header = self.header.clone().expect("header read");
        let sync = header[header.len() - SYNC..].to_vec();
        loop {
            let Some((n, count)) = block_len(&self.buf, &sync).map_err(|e| self.corrupt(e))? else {
                return Ok(out);
            };
            let mut file = header.clone();
            file.extend_from_slice(&self.buf[..n]);
            self.buf.drain(..n);
            if count == 0 {
                continue;
            }
            // One batch of exactly the block's count: the reader is never asked for more (it
            // would spin on bytes past the counted objects), and rows missing from the block
            // make it corrupt.
            // Only arrow-avro is guarded (see `crate::panic_guard`): a panic on a damaged
            // block is the file's error.
            let read = crate::panic_guard::guarded("Avro", || {
                let mut reader = arrow_avro::reader::ReaderBuilder::new()
                    .with_batch_size(count)
                    .build(std::io::Cursor::new(file))
                    .map_err(|e| e.to_string())?;
                match reader.next() {
                    Some(b) => b.map_err(|e| e.to_string()),
                    None => Err("a block without its objects".to_string()),
                }
            });
            let b = read.and_then(|r| r).map_err(|e| self.corrupt(e))?;
            if b.num_rows() != count {
                return Err(self.corrupt(format!(
                    "a block says {count} objects but holds {}",
                    b.num_rows()
                )));
            }
            let mut off = 0;
            while off < b.num_rows() {
                let len = self.batch_size.min(b.num_rows() - off);
                out.push(self.conformer.conform(b.slice(off, len))?);
                off += len;
            }
        }
    }
}

/// The writer schema of an Avro file, as Arrow, from its first bytes (the header).
pub fn avro_schema(path: &str, head: &[u8]) -> Result<arrow_schema::Schema, FormatError> {
    let unreadable = |e: &dyn std::fmt::Display| FormatError::Unreadable {
        path: path.to_string(),
        reason: format!("not a readable Avro file: {e}"),
    };
    let n = header_len(head)
        .map_err(|e| unreadable(&e))?
        .ok_or_else(|| unreadable(&"the file ends inside its header"))?;
    crate::panic_guard::guarded("Avro", || {
        arrow_avro::reader::ReaderBuilder::new()
            .build(std::io::Cursor::new(&head[..n]))
            .map(|r| r.schema().as_ref().clone())
            .map_err(|e| e.to_string())
    })
    .and_then(|r| r)
    .map_err(|e| unreadable(&e))
}

impl landfall_core::Decoder for AvroDecoder {
    fn push(&mut self, chunk: Bytes) -> SeamResult<Vec<RecordBatch>> {
        self.buf.extend_from_slice(&chunk);
        Ok(self.drain()?)
    }

    fn finish(&mut self) -> SeamResult<Vec<RecordBatch>> {
        let out = self.drain()?;
        if self.header.is_none() {
            return Err(self.corrupt("the file ends inside its header").into());
        }
        if !self.buf.is_empty() {
            return Err(self
                .corrupt(format!(
                    "the file ends inside a block ({} bytes left)",
                    self.buf.len()
                ))
                .into());
        }
        Ok(out)
    }

    fn rescued_rows(&self) -> u64 {
        self.conformer.rescued_rows
    }

    fn new_columns(&self) -> Vec<arrow_schema::Field> {
        self.conformer.new_columns.fields().to_vec()
    }
}

#[cfg(test)]
#[path = "avro_tests.rs"]
mod tests;
