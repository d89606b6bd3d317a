//! One large line-delimited file decoded on every core.
//!
//! A large file is read in pieces (pinned.rs) and, when its format allows it
//! ([`landfall_formats::splits_at_newlines`]: JSON lines, uncompressed, not lenient), cut into
//! parts of about [`PART_BYTES`] that each end just after a newline between two records
//! ([`cut_in`]), as Spark cuts files into splits at line boundaries. Each part is decoded by a decoder of its own, in a task of its own,
//! at most one part per core at once; the decoder is told where its part starts (line and byte),
//! so malformed records and fail-fast errors name the file's own positions.
//!
//! What stays as for a file decoded in one go:
//! - rows are sent to the writer in the file's order, part after part;
//! - one `FileDone` ends the file: rows, malformed and rescued rows summed over the parts, the
//!   new columns of every part merged;
//! - the first failure in the file's order decides (a corrupt file under `fail_fast`, a read
//!   that found the file changed): later parts' results are dropped, and the file is partial
//!   when rows of it were already sent (the batch then runs again without it, as for a file
//!   streamed in order).
//!
//! Memory: the parts in flight (one per core, at most [`PARTS_IN_FLIGHT`]) with their decoded
//! rows, the part being cut, and the pieces read ahead. A part holds zero-copy slices of the
//! pieces read. A file whose first piece holds no record boundary (concatenated JSON without
//! newlines, one huge record) is decoded in order instead (pipeline.rs); a stretch of four parts
//! without a boundary is cut at any newline.
//!
//! Cuts fall only between records (`}`, newline, `{`), so a record spanning lines (pretty
//! printed, or a raw newline in a string, which arrow-json reads as one record) is read whole
//! by one decoder, as in one go; only past four parts without such a boundary could a cut
//! fall inside a record.

use crate::pinned::{Body, FileError, stream_files_from};
use crate::pipeline::{DecodeJob, Decoded, FileDecoder};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use landfall_core::seams::SeamResult;
use landfall_core::{FileMeta, SeamError};
use tokio::sync::mpsc;

/// Bytes per part: large enough that a part's fixed costs (a decoder, its first batch) vanish,
/// small enough that a core's part and its decoded rows stay a few tens of MB.
pub(crate) const PART_BYTES: u64 = 8 << 20;

/// The part size: [`PART_BYTES`], or 16 KiB when tests stream small files
/// (`LANDFALL_STREAM_FILES_FROM`), so a test file is cut into many parts.
fn part_bytes() -> u64 {
    if stream_files_from() < crate::pinned::DECODE_WHOLE_BELOW {
        16 << 10
    } else {
        PART_BYTES
    }
}

/// A part of a file: its bytes (slices of the pieces read) and where it starts.
struct Part {
    chunks: Vec<Bytes>,
    /// The 1-based line of its first byte.
    line: u64,
    /// The byte offset of its first byte.
    offset: u64,
}

/// Where cutting has got to.
struct Cutter {
    body: Body,
    /// Bytes of the part being cut.
    chunks: Vec<Bytes>,
    len: u64,
    line: u64,
    offset: u64,
    /// The length of a byte order mark at the file's start (decoders skip it).
    bom: u64,
    done: bool,
}

const BOM: &[u8] = &[0xEF, 0xBB, 0xBF];

/// Newlines looked at, from a piece's end, for a record boundary.
const CUT_CANDIDATES: usize = 256;

/// Where a piece may be cut: just after its last newline that lies between two records, with
/// `}` as the last byte before it and `{` as the first after it (whitespace aside), both within
/// the piece. In JSON a `}` followed by `{` needs a `,` or `:` between them inside a value, so
/// such a newline ends a record of an object per line or of pretty-printed objects alike; a
/// newline inside a record (a pretty-printed one, or a raw newline in a string, which arrow-json
/// accepts) is never a cut, so every record is decoded whole by one decoder, as in one go.
fn cut_in(piece: &[u8]) -> Option<usize> {
    let ws = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    memchr::memrchr_iter(b'\n', piece)
        .take(CUT_CANDIDATES)
        .find(|&nl| {
            let before = piece[..nl].iter().rev().find(|&&b| !ws(b));
            let after = piece[nl + 1..].iter().find(|&&b| !ws(b));
            before == Some(&b'}') && after == Some(&b'{')
        })
}

impl Cutter {
    /// The part of `chunks`, starting where the previous one ended.
    fn part(&mut self, chunks: Vec<Bytes>) -> Part {
        let part = Part {
            chunks,
            line: self.line,
            offset: self.offset.saturating_sub(self.bom),
        };
        for c in &part.chunks {
            self.offset += c.len() as u64;
            self.line += memchr::memchr_iter(b'\n', c).count() as u64;
        }
        part
    }

    /// The next part: at least `size` bytes ending at a cut ([`cut_in`]), or the rest of the
    /// file.
    async fn next(&mut self, size: u64) -> Option<Result<Part, FileError>> {
        if self.done {
            return None;
        }
        loop {
            match self.body.next().await {
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Some(Ok(piece)) if piece.is_empty() => {}
                Some(Ok(piece)) => {
                    if self.offset == 0 && self.chunks.is_empty() && piece.starts_with(BOM) {
                        // Decoders count offsets after the byte order mark they skip.
                        self.bom = BOM.len() as u64;
                    }
                    self.len += piece.len() as u64;
                    // Past four parts without a record boundary (a pretty-printed file), any
                    // newline will do rather than holding more.
                    let cut = if self.len >= size {
                        cut_in(&piece).or_else(|| {
                            (self.len >= 4 * size)
                                .then(|| memchr::memrchr(b'\n', &piece))
                                .flatten()
                        })
                    } else {
                        None
                    };
                    if let Some(nl) = cut {
                        let mut chunks = std::mem::take(&mut self.chunks);
                        chunks.push(piece.slice(..=nl));
                        let rest = piece.slice(nl + 1..);
                        self.len = rest.len() as u64;
                        if !rest.is_empty() {
                            self.chunks.push(rest);
                        }
                        return Some(Ok(self.part(chunks)));
                    }
                    self.chunks.push(piece);
                }
                None => {
                    self.done = true;
                    let chunks = std::mem::take(&mut self.chunks);
                    return (!chunks.is_empty()).then(|| Ok(self.part(chunks)));
                }
            }
        }
    }
}

/// `body` cut into parts of about `size` bytes, each ending after a newline.
fn parts(body: Body, size: u64) -> BoxStream<'static, Result<Part, FileError>> {
    let cutter = Cutter {
        body,
        chunks: Vec::new(),
        len: 0,
        line: 1,
        offset: 0,
        bom: 0,
        done: false,
    };
    futures::stream::unfold(cutter, move |mut c| async move {
        c.next(size).await.map(|p| (p, c))
    })
    .boxed()
}

/// A part's task, aborted when its result is no longer wanted (an earlier part failed, the
/// batch stopped): its CPU goes to the next attempt instead.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Parts decoded at once at most, whatever the number of cores: each holds its input and its
/// decoded rows until its turn to be sent.
const PARTS_IN_FLIGHT: usize = 4;

/// Decode one part in a task of its own: what the file's decoder would send for it, ending
/// with the part's own `FileDone` (its counts).
async fn decode_part(
    job: DecodeJob,
    meta: FileMeta,
    part: Part,
) -> Result<Vec<Decoded>, FileError> {
    let path = meta.path.clone();
    let mut task = AbortOnDrop(tokio::spawn(async move {
        let shown = job.show(&meta.path);
        let mut file = FileDecoder::new(&job, &meta).map_err(FileError::corrupt(&shown))?;
        file.start_at(part.line, part.offset);
        let mut out = Vec::new();
        for chunk in part.chunks {
            out.extend(file.feed(&job, Some(chunk))?);
        }
        out.extend(file.feed(&job, None)?);
        Ok(out)
    }));
    (&mut task.0).await.map_err(|e| {
        FileError::Transient(SeamError::retryable(format!(
            "{path}: decoding task failed: {e}"
        )))
    })?
}

/// Decode a large file that [`landfall_formats::splits_at_newlines`] allows to cut: in parts
/// when its first piece holds a record boundary, else in order (concatenated JSON without
/// newlines, a single huge record), so memory never waits for a boundary that does not come.
pub(crate) async fn decode_large(
    job: &DecodeJob,
    meta: &FileMeta,
    mut body: Body,
    tx: &mpsc::Sender<SeamResult<Decoded>>,
    sent: &mut bool,
    cores: usize,
) -> Result<(), FileError> {
    let first = match body.next().await {
        Some(piece) => piece?,
        None => Bytes::new(),
    };
    let splits = cut_in(&first).is_some();
    let body = futures::stream::once(futures::future::ready(Ok(first)))
        .chain(body)
        .boxed();
    if splits {
        stream_split(job, meta, body, tx, sent, cores).await
    } else {
        crate::pipeline::stream_file(job, meta, body, tx, sent).await
    }
}

/// Decode a large line-delimited file part by part, `cores` parts at once, and send what it
/// yields in the file's order, then one `FileDone` for the whole file.
async fn stream_split(
    job: &DecodeJob,
    meta: &FileMeta,
    body: Body,
    tx: &mpsc::Sender<SeamResult<Decoded>>,
    sent: &mut bool,
    cores: usize,
) -> Result<(), FileError> {
    let (job2, meta2) = (job.clone(), meta.clone());
    let mut decoded = parts(body, part_bytes())
        .map(move |part| {
            let (job, meta) = (job2.clone(), meta2.clone());
            async move { decode_part(job, meta, part?).await }
        })
        .buffered(cores.clamp(1, PARTS_IN_FLIGHT));
    let (mut rows, mut malformed, mut rescued, mut parts) = (0, 0, 0, 0u64);
    let mut new_columns = landfall_formats::NewColumns::default();
    while let Some(items) = decoded.next().await {
        parts += 1;
        for item in items? {
            match item {
                Decoded::FileDone {
                    rows: r,
                    malformed: m,
                    rescued: s,
                    new_columns: n,
                    ..
                } => {
                    rows += r;
                    malformed += m;
                    rescued += s;
                    new_columns.absorb(&landfall_formats::NewColumns::from_fields(&n));
                }
                item => {
                    // As for a file decoded in order: anything sent (rows, malformed records)
                    // makes a later failure of the file partial.
                    *sent = true;
                    if tx.send(Ok(item)).await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
    tracing::debug!(path = %meta.path, parts, rows, "decoded in parts");
    let done = Decoded::FileDone {
        path: meta.path.clone(),
        rows,
        malformed,
        rescued,
        new_columns: new_columns.fields().to_vec(),
    };
    *sent = true;
    let _ = tx.send(Ok(done)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(pieces: &[&'static [u8]]) -> Body {
        let pieces: Vec<Result<Bytes, FileError>> =
            pieces.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        futures::stream::iter(pieces).boxed()
    }

    async fn all(body: Body, size: u64) -> Vec<(Vec<u8>, u64, u64)> {
        parts(body, size)
            .map(|p| {
                let p = p.unwrap_or_else(|e| panic!("{e}"));
                (p.chunks.concat(), p.line, p.offset)
            })
            .collect()
            .await
    }

    /// Parts end after a newline between two records once they hold `size` bytes, start
    /// where the previous ended (line and byte), and cover every byte once; a file without a
    /// final newline ends in a part of its own; a record spanning lines is never cut.
    #[tokio::test]
    async fn parts_end_between_records_and_cover_every_byte_once() {
        let got = all(body(&[b"{}\n{1}\n{", b"2}\n{3}\n", b"", b"{4}\n{5}"]), 4).await;
        assert_eq!(
            got,
            vec![
                (b"{}\n{1}\n".to_vec(), 1, 0),
                (b"{2}\n".to_vec(), 3, 7),
                (b"{3}\n{4}\n".to_vec(), 4, 11),
                (b"{5}".to_vec(), 6, 19),
            ]
        );
        // A pretty-printed record over three pieces: cut only after its closing brace.
        let got = all(
            body(&[b"{\n \"a\": {\n", b"  \"b\": 1\n }\n", b"}\n{\"c\":2}\n"]),
            8,
        )
        .await;
        assert_eq!(
            got,
            vec![
                (b"{\n \"a\": {\n  \"b\": 1\n }\n}\n".to_vec(), 1, 0),
                (b"{\"c\":2}\n".to_vec(), 6, 24),
            ]
        );
        // Past four parts' worth without a boundary, any newline.
        let got = all(body(&[b"x\ny\n", b"z\nw\n", b"v\nu"]), 2).await;
        assert_eq!(
            got,
            vec![(b"x\ny\nz\nw\n".to_vec(), 1, 0), (b"v\nu".to_vec(), 5, 8)]
        );
        assert!(all(body(&[]), 4).await.is_empty());
        // A byte order mark at the start: later parts' offsets count without it, as the
        // decoder of the first part counts.
        let got = all(body(&[b"\xEF\xBB\xBF{1}\n{2}\n", b"{3}\n"]), 4).await;
        assert_eq!(got[1], (b"{2}\n{3}\n".to_vec(), 2, 4));
    }

    #[test]
    fn cuts_fall_between_records_only() {
        assert_eq!(cut_in(b"{\"a\":1}\n{\"a\":2}\n"), Some(7));
        assert_eq!(cut_in(b"{\"a\":1}\r\n\r\n  {\"a\":2}"), Some(10));
        assert_eq!(cut_in(b"{\"a\":\n1}\n"), None, "inside a record");
        assert_eq!(
            cut_in(b"[{\"a\":1}\n,{\"a\":2}]"),
            None,
            "between array items"
        );
        assert_eq!(cut_in(b"{\"a\":1}{\"a\":2}"), None, "no newline");
        assert_eq!(cut_in(b"not json\nat all\n"), None);
    }

    /// A read error ends the parts with that error (after the parts already cut).
    #[tokio::test]
    async fn a_read_error_ends_the_parts() {
        let pieces: Vec<Result<Bytes, FileError>> = vec![
            Ok(Bytes::from_static(b"{1}\n{2}\n")),
            Err(FileError::Transient(SeamError::retryable("gone"))),
            Ok(Bytes::from_static(b"c\n")),
        ];
        let mut p = parts(futures::stream::iter(pieces).boxed(), 2);
        assert!(p.next().await.unwrap().is_ok());
        assert!(matches!(p.next().await, Some(Err(FileError::Transient(_)))));
        assert!(p.next().await.is_none());
    }
}
