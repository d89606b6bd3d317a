//! One large line-delimited file decoded on every core.
//!
//! A large file is read in pieces (pinned.rs) and, when its format allows it
//! ([`landfall_formats::splits_at_newlines`]: JSON lines, uncompressed, not lenient; text with
//! the default line separators), cut into parts of about [`PART_BYTES`] that each end just
//! after a newline between two records ([`cut_in`] for JSON, any newline for text,
//! [`cut_at_line`]), as Spark cuts files into splits at line boundaries. Each part is decoded by a decoder of its own, in a task of its own,
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
//! newlines, one huge record) is decoded in order instead (pipeline.rs), and so is the rest of
//! a file after four parts' worth without a boundary (after the parts before it).
//!
//! Cuts fall only between records (`}`, newline, `{`), so a record spanning lines (pretty
//! printed) is read whole by one decoder, as in one go; never at a guess. The one exception is
//! a raw newline inside a string right between `}` and `{` (invalid JSON that arrow-json
//! accepts; Spark reads it as two lines, as the parts then do).

use crate::pinned::{Body, FileError, stream_files_from};
use crate::pipeline::{DecodeJob, Decoded, FileDecoder, joined};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use landfall_core::FileMeta;
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

impl Part {
    /// A decoder of the file told where this part starts.
    fn decoder(&self, job: &DecodeJob, meta: &FileMeta) -> Result<FileDecoder, FileError> {
        let mut file = FileDecoder::open(job, meta)?;
        file.start_at(self.line, self.offset);
        Ok(file)
    }

    /// The part's bytes, then `rest` (the rest of the file decoded in order).
    fn into_body(self, rest: Option<Body>) -> Body {
        let chunks = futures::stream::iter(self.chunks.into_iter().map(Ok));
        match rest {
            Some(rest) => chunks.chain(rest).boxed(),
            None => chunks.boxed(),
        }
    }
}

/// Where cutting has got to.
struct Cutter {
    body: Body,
    /// Where a piece may be cut ([`cut_rule`]).
    cut: fn(&[u8]) -> Option<usize>,
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

/// Where a piece of a text file may be cut: just after its last newline (with the default
/// separators every `\n` ends a line, a `\r` before it belongs to the same line).
fn cut_at_line(piece: &[u8]) -> Option<usize> {
    memchr::memrchr(b'\n', piece)
}

/// The cut rule of a format that [`landfall_formats::splits_at_newlines`] allows to cut.
fn cut_rule(format: landfall_formats::FileFormat) -> fn(&[u8]) -> Option<usize> {
    match format {
        landfall_formats::FileFormat::Text => cut_at_line,
        _ => cut_in,
    }
}

/// Where a piece may be cut: just after its last newline that lies between two records, with
/// `}` as the last byte before it and `{` as the first after it (whitespace aside), both within
/// the piece. In JSON a `}` followed by `{` needs a `,` or `:` between them inside a value, so
/// such a newline ends a record of an object per line or of pretty-printed objects alike, and
/// a record spanning lines is never cut (a raw newline inside a string, which arrow-json
/// accepts and Spark reads as two lines, is the exception: `"a}` newline `{b"` is cut there).
/// One pass from the piece's end; it stops at the first boundary, a few hundred bytes in for
/// an object per line.
fn cut_in(piece: &[u8]) -> Option<usize> {
    // The nearest non-whitespace byte after position `i`, and the last newline between them.
    let (mut next, mut newline) = (None, None);
    for i in (0..piece.len()).rev() {
        match piece[i] {
            b'\n' => newline = newline.or(Some(i)),
            b' ' | b'\t' | b'\r' => {}
            b => {
                if b == b'}' && next == Some(b'{') && newline.is_some() {
                    return newline;
                }
                next = Some(b);
                newline = None;
            }
        }
    }
    None
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
    /// file; past four parts' worth without a record boundary, what is held and the rest of
    /// the file, to be decoded in order.
    async fn next(&mut self, size: u64) -> Option<Result<Cut, FileError>> {
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
                    let cut = if self.len >= size {
                        (self.cut)(&piece)
                    } else {
                        None
                    };
                    if cut.is_none() && self.len >= 4 * size {
                        // No boundary for four parts (huge records, no newlines): never cut
                        // at a guess; the rest of the file is decoded in order.
                        self.chunks.push(piece);
                        let chunks = std::mem::take(&mut self.chunks);
                        self.done = true;
                        let body =
                            std::mem::replace(&mut self.body, futures::stream::empty().boxed());
                        return Some(Ok(Cut::Rest(self.part(chunks), body)));
                    }
                    if let Some(nl) = cut {
                        let mut chunks = std::mem::take(&mut self.chunks);
                        chunks.push(piece.slice(..=nl));
                        let rest = piece.slice(nl + 1..);
                        self.len = rest.len() as u64;
                        if !rest.is_empty() {
                            self.chunks.push(rest);
                        }
                        return Some(Ok(Cut::Part(self.part(chunks))));
                    }
                    self.chunks.push(piece);
                }
                None => {
                    self.done = true;
                    let chunks = std::mem::take(&mut self.chunks);
                    return (!chunks.is_empty()).then(|| Ok(Cut::Part(self.part(chunks))));
                }
            }
        }
    }
}

/// What cutting yields: a part, or (last) what is held and the rest of the file, to be
/// decoded in order.
enum Cut {
    Part(Part),
    Rest(Part, Body),
}

/// `body` cut into parts of about `size` bytes, each ending after a newline between records.
fn parts(
    body: Body,
    size: u64,
    cut: fn(&[u8]) -> Option<usize>,
) -> BoxStream<'static, Result<Cut, FileError>> {
    let cutter = Cutter {
        body,
        cut,
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
        let file = part.decoder(&job, &meta)?;
        let out: Vec<Decoded> = file
            .decoded(&job, part.into_body(None))
            .try_collect()
            .await?;
        Ok(out)
    }));
    joined(&path, (&mut task.0).await)
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
    let splits = cut_rule(job.format)(&first).is_some();
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
    enum Outcome {
        Decoded(Vec<Decoded>),
        Rest(Part, Body),
    }
    let (job2, meta2) = (job.clone(), meta.clone());
    let mut decoded = parts(body, part_bytes(), cut_rule(job.format))
        .map(move |cut| {
            let (job, meta) = (job2.clone(), meta2.clone());
            async move {
                match cut? {
                    Cut::Part(part) => decode_part(job, meta, part).await.map(Outcome::Decoded),
                    Cut::Rest(part, body) => Ok(Outcome::Rest(part, body)),
                }
            }
        })
        .buffered(cores.clamp(1, PARTS_IN_FLIGHT));
    let mut out = Sender {
        tx,
        sent,
        rows: 0,
        malformed: 0,
        rescued: 0,
        new_columns: landfall_formats::NewColumns::default(),
    };
    let mut parts = 0u64;
    while let Some(outcome) = decoded.next().await {
        parts += 1;
        match outcome? {
            Outcome::Decoded(items) => {
                for item in items {
                    if !out.pass(item).await {
                        return Ok(());
                    }
                }
            }
            // The last: decoded in order from where the parts ended, sent as it comes.
            Outcome::Rest(part, body) => {
                let file = part.decoder(job, meta)?;
                let mut items = file.decoded(job, part.into_body(Some(body)));
                while let Some(item) = items.try_next().await? {
                    if !out.pass(item).await {
                        return Ok(());
                    }
                }
            }
        }
    }
    tracing::debug!(path = %meta.path, parts, rows = out.rows, "decoded in parts");
    let done = Decoded::FileDone {
        path: meta.path.clone(),
        rows: out.rows,
        malformed: out.malformed,
        rescued: out.rescued,
        new_columns: out.new_columns.fields().to_vec(),
    };
    *out.sent = true;
    let _ = tx.send(Ok(done)).await;
    Ok(())
}

/// What a split file's parts send: their rows and reports go to the writer, their `FileDone`s
/// are summed into the file's one.
struct Sender<'a> {
    tx: &'a mpsc::Sender<SeamResult<Decoded>>,
    sent: &'a mut bool,
    rows: u64,
    malformed: u64,
    rescued: u64,
    new_columns: landfall_formats::NewColumns,
}

impl Sender<'_> {
    /// Pass one item of a part on; `false` when the writer is gone.
    async fn pass(&mut self, item: Decoded) -> bool {
        match item {
            Decoded::FileDone {
                rows,
                malformed,
                rescued,
                new_columns,
                ..
            } => {
                self.rows += rows;
                self.malformed += malformed;
                self.rescued += rescued;
                self.new_columns
                    .absorb(&landfall_formats::NewColumns::from_fields(&new_columns));
                true
            }
            item => {
                // As for a file decoded in order: anything sent (rows, malformed records)
                // makes a later failure of the file partial.
                *self.sent = true;
                self.tx.send(Ok(item)).await.is_ok()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(pieces: &[&'static [u8]]) -> Body {
        let pieces: Vec<Result<Bytes, FileError>> =
            pieces.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        futures::stream::iter(pieces).boxed()
    }

    /// Every cut: its bytes (for the rest handed over, with the rest of the body), where it
    /// starts, and whether it is the rest to decode in order.
    async fn all(body: Body, size: u64) -> Vec<(Vec<u8>, u64, u64, bool)> {
        let mut out = Vec::new();
        let mut cuts = parts(body, size, cut_in);
        while let Some(cut) = cuts.next().await {
            match cut.unwrap_or_else(|e| panic!("{e}")) {
                Cut::Part(p) => out.push((p.chunks.concat(), p.line, p.offset, false)),
                Cut::Rest(p, mut rest) => {
                    let mut bytes = p.chunks.concat();
                    while let Some(b) = rest.next().await {
                        bytes.extend_from_slice(&b.unwrap_or_else(|e| panic!("{e}")));
                    }
                    out.push((bytes, p.line, p.offset, true));
                }
            }
        }
        out
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
                (b"{}\n{1}\n".to_vec(), 1, 0, false),
                (b"{2}\n".to_vec(), 3, 7, false),
                (b"{3}\n{4}\n".to_vec(), 4, 11, false),
                (b"{5}".to_vec(), 6, 19, false),
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
                (b"{\n \"a\": {\n  \"b\": 1\n }\n}\n".to_vec(), 1, 0, false),
                (b"{\"c\":2}\n".to_vec(), 6, 24, false),
            ]
        );
        // Past four parts' worth without a boundary: never a guess; what is held and the
        // rest, to be decoded in order, after the parts before.
        let got = all(body(&[b"{1}\n{2}\n", b"x\ny\n", b"z\nw\n", b"v\nu"]), 2).await;
        assert_eq!(
            got,
            vec![
                (b"{1}\n".to_vec(), 1, 0, false),
                (b"{2}\nx\ny\nz\nw\nv\nu".to_vec(), 2, 4, true)
            ]
        );
        assert!(all(body(&[]), 4).await.is_empty());
        // A byte order mark at the start: later parts' offsets count without it, as the
        // decoder of the first part counts.
        let got = all(body(&[b"\xEF\xBB\xBF{1}\n{2}\n", b"{3}\n"]), 4).await;
        assert_eq!(got[1], (b"{2}\n{3}\n".to_vec(), 2, 4, false));
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
        // A record of more lines than any window: its inner lines are no boundary, the one
        // after it is, however far from the piece's end.
        let mut long = b"{\"a\":1}\n{\"list\":[\n".to_vec();
        for i in 0..5000 {
            long.extend_from_slice(format!("{i},\n").as_bytes());
        }
        long.extend_from_slice(b"0]}");
        assert_eq!(cut_in(&long), Some(7));
    }

    /// A read error ends the parts with that error (after the parts already cut).
    #[tokio::test]
    async fn a_read_error_ends_the_parts() {
        let pieces: Vec<Result<Bytes, FileError>> = vec![
            Ok(Bytes::from_static(b"{1}\n{2}\n")),
            Err(FileError::Transient(landfall_core::SeamError::retryable(
                "gone",
            ))),
            Ok(Bytes::from_static(b"c\n")),
        ];
        let mut p = parts(futures::stream::iter(pieces).boxed(), 2, cut_in);
        assert!(p.next().await.unwrap().is_ok());
        assert!(matches!(p.next().await, Some(Err(FileError::Transient(_)))));
        assert!(p.next().await.is_none());
    }
}
