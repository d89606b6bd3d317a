//! One large line-delimited file decoded on every core.
//!
//! A large file is read in pieces (pinned.rs) and, when its format allows it
//! ([`landfall_formats::splits_at_newlines`]: JSON lines, uncompressed, not lenient), cut into
//! parts of about [`PART_BYTES`] that each end just after a newline, as Spark cuts files into
//! splits at line boundaries. Each part is decoded by a decoder of its own, in a task of its own,
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
//! Memory: the parts in flight (one per core) with their decoded rows, the part being cut,
//! and the pieces read ahead. A part holds zero-copy slices of the pieces read.
//!
//! One difference from decoding in order, which is Spark's behaviour: a record split over two
//! lines at a part boundary is two malformed lines, as Spark reads every line on its own with
//! `multiLine` off; decoded in one go, arrow-json would read the two lines as one record.

use crate::pinned::{Body, FileError, stream_files_from};
use crate::pipeline::{DecodeJob, Decoded, FileDecoder};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use landfall_core::{FileMeta, SeamError};
use landfall_core::seams::SeamResult;
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
    done: bool,
}

impl Cutter {
    /// The part of `chunks`, starting where the previous one ended.
    fn part(&mut self, chunks: Vec<Bytes>) -> Part {
        let part = Part {
            chunks,
            line: self.line,
            offset: self.offset,
        };
        for c in &part.chunks {
            self.offset += c.len() as u64;
            self.line += memchr::memchr_iter(b'\n', c).count() as u64;
        }
        part
    }

    /// The next part: at least `size` bytes ending after a newline, or the rest of the file.
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
                    self.len += piece.len() as u64;
                    if self.len >= size
                        && let Some(nl) = memchr::memrchr(b'\n', &piece)
                    {
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
        done: false,
    };
    futures::stream::unfold(cutter, move |mut c| async move {
        c.next(size).await.map(|p| (p, c))
    })
    .boxed()
}

/// Decode one part in a task of its own: what the file's decoder would send for it, ending
/// with the part's own `FileDone` (its counts).
async fn decode_part(job: DecodeJob, meta: FileMeta, part: Part) -> Result<Vec<Decoded>, FileError> {
    let path = meta.path.clone();
    let task = tokio::spawn(async move {
        let shown = job.show(&meta.path);
        let mut file = FileDecoder::new(&job, &meta).map_err(FileError::corrupt(&shown))?;
        file.start_at(part.line, part.offset);
        let mut out = Vec::new();
        for chunk in part.chunks {
            out.extend(file.feed(&job, Some(chunk))?);
        }
        out.extend(file.feed(&job, None)?);
        Ok(out)
    });
    task.await.map_err(|e| {
        FileError::Transient(SeamError::retryable(format!(
            "{path}: decoding task failed: {e}"
        )))
    })?
}

/// Decode a large line-delimited file part by part, `cores` parts at once, and send what it
/// yields in the file's order, then one `FileDone` for the whole file.
pub(crate) async fn stream_split(
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
        .buffered(cores.max(1));
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
                    *sent |= matches!(item, Decoded::Rows(..));
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

    /// Parts end after a newline once they hold `size` bytes, start where the previous ended
    /// (line and byte), and cover every byte once; a file without a final newline ends in a
    /// part of its own; a long line spans pieces.
    #[tokio::test]
    async fn parts_end_at_newlines_and_cover_every_byte_once() {
        let got = all(body(&[b"a1\nb2\nc", b"3\nd4\n", b"", b"e5\nf6"]), 4).await;
        assert_eq!(
            got,
            vec![
                (b"a1\nb2\n".to_vec(), 1, 0),
                (b"c3\nd4\n".to_vec(), 3, 6),
                (b"e5\n".to_vec(), 5, 12),
                (b"f6".to_vec(), 6, 15),
            ]
        );
        // A line longer than a part, over three pieces: one part, cut at its end.
        let got = all(body(&[b"xxxx", b"xxxx", b"xx\nyy\n"]), 4).await;
        assert_eq!(
            got,
            vec![(b"xxxxxxxxxx\nyy\n".to_vec(), 1, 0)],
            "cut after the last newline of the piece that filled the part"
        );
        assert!(all(body(&[]), 4).await.is_empty());
    }

    /// A read error ends the parts with that error (after the parts already cut).
    #[tokio::test]
    async fn a_read_error_ends_the_parts() {
        let pieces: Vec<Result<Bytes, FileError>> = vec![
            Ok(Bytes::from_static(b"a\nb\n")),
            Err(FileError::Transient(SeamError::retryable("gone"))),
            Ok(Bytes::from_static(b"c\n")),
        ];
        let mut p = parts(futures::stream::iter(pieces).boxed(), 2);
        assert!(p.next().await.unwrap().is_ok());
        assert!(matches!(p.next().await, Some(Err(FileError::Transient(_)))));
        assert!(p.next().await.is_none());
    }
}
