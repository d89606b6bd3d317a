//! The stored form of a file record (`f/<file key>`): a compact binary record, read beside
//! the JSON records that ledgers of format 2 and earlier hold.
//!
//! Every tracked file has one record, written when it is admitted and rewritten at each
//! transition (planned, committed, archived): its bytes are paid for by the write-ahead log,
//! the memtable and every compaction that rewrites it. As JSON, a newly admitted file's record
//! was about 230 bytes (field names, the path twice, timestamps as RFC 3339 text) and
//! serialising it was a sixth of admission's CPU; the binary record is about 100 bytes and
//! costs a few copies.
//!
//! Layout (version 1), all integers LEB128 varints unless said otherwise:
//!
//! | bytes | field |
//! |---|---|
//! | 1 | `0x01`, the layout version (a JSON record starts with `{`, 0x7B) |
//! | 1 | state (`Discovered` 0, `InBatch` 1, `Committed` 2, `Archived` 3, `Skipped` 4, `Failed` 5) |
//! | 2 | presence flags, little-endian (see [`Flag`]); an unknown flag is refused |
//! | varint | seq |
//! | varint | size |
//! | time | modified, then discovery time: seconds since 1970 (zigzag), then nanoseconds |
//! | string | path (length, then UTF-8 bytes) |
//! | ... | the fields whose flag is set, in flag order |
//!
//! The file key is stored only when it differs from the path (`allow_overwrites` keys carry
//! the version). A record is read back whole and exactly (every timestamp to the nanosecond);
//! trailing bytes, a truncated field, invalid UTF-8 or an unknown state or flag are reported as
//! a corrupt record, never guessed at.

use chrono::{DateTime, Utc};
use landfall_core::{FileKey, FileMeta, FileRecord, FileState, SkipKind, SkipReason};

/// The first byte of a binary record.
const VERSION: u8 = 1;

/// The presence flags, in the order their fields follow the path.
#[derive(Clone, Copy)]
#[repr(u16)]
enum Flag {
    /// The key, when it is not the path.
    Key = 1 << 0,
    Etag = 1 << 1,
    Version = 1 << 2,
    BatchId = 1 << 3,
    ProcessedTime = 1 << 4,
    CommitTime = 1 << 5,
    TableVersion = 1 << 6,
    ArchiveTime = 1 << 7,
    ArchiveMode = 1 << 8,
    MoveLocation = 1 << 9,
    Error = 1 << 10,
    /// The skip kind (one byte) and its detail.
    Skip = 1 << 11,
}
const KNOWN_FLAGS: u16 = (1 << 12) - 1;

const STATES: [FileState; 6] = [
    FileState::Discovered,
    FileState::InBatch,
    FileState::Committed,
    FileState::Archived,
    FileState::Skipped,
    FileState::Failed,
];
const SKIP_KINDS: [SkipKind; 6] = [
    SkipKind::Missing,
    SkipKind::Corrupt,
    SkipKind::ChangedAfterListing,
    SkipKind::Manual,
    SkipKind::TooLarge,
    SkipKind::Empty,
];

fn state_byte(s: FileState) -> u8 {
    STATES
        .iter()
        .position(|x| *x == s)
        .expect("every state is listed") as u8
}
fn skip_byte(k: SkipKind) -> u8 {
    SKIP_KINDS
        .iter()
        .position(|x| *x == k)
        .expect("every skip kind is listed") as u8
}

/// `rec` in the binary layout, appended to `out`.
pub(super) fn encode(rec: &FileRecord, out: &mut Vec<u8>) {
    // Destructured whole, so a field added to `FileRecord` does not compile here until it is
    // stored.
    let FileRecord {
        key,
        meta:
            FileMeta {
                path,
                size,
                modified,
                etag,
                version,
            },
        state,
        seq,
        discovery_time,
        batch_id,
        processed_time,
        commit_time,
        table_version,
        archive_time,
        archive_mode,
        move_location,
        error,
        skip,
    } = rec;
    let key = (key.0 != *path).then_some(&key.0);
    let mut flags = 0u16;
    let mut flag = |present: bool, f: Flag| {
        if present {
            flags |= f as u16;
        }
    };
    flag(key.is_some(), Flag::Key);
    flag(etag.is_some(), Flag::Etag);
    flag(version.is_some(), Flag::Version);
    flag(batch_id.is_some(), Flag::BatchId);
    flag(processed_time.is_some(), Flag::ProcessedTime);
    flag(commit_time.is_some(), Flag::CommitTime);
    flag(table_version.is_some(), Flag::TableVersion);
    flag(archive_time.is_some(), Flag::ArchiveTime);
    flag(archive_mode.is_some(), Flag::ArchiveMode);
    flag(move_location.is_some(), Flag::MoveLocation);
    flag(error.is_some(), Flag::Error);
    flag(skip.is_some(), Flag::Skip);
    out.reserve(32 + path.len() + etag.as_ref().map_or(0, |e| e.len() + 1));
    out.push(VERSION);
    out.push(state_byte(*state));
    out.extend_from_slice(&flags.to_le_bytes());
    put_varint(out, *seq);
    put_varint(out, *size);
    put_time(out, modified);
    put_time(out, discovery_time);
    put_str(out, path);
    for s in [key, etag.as_ref(), version.as_ref()].into_iter().flatten() {
        put_str(out, s);
    }
    if let Some(b) = batch_id {
        put_varint(out, *b);
    }
    for t in [processed_time, commit_time].into_iter().flatten() {
        put_time(out, t);
    }
    if let Some(v) = table_version {
        put_varint(out, zigzag(*v));
    }
    if let Some(t) = archive_time {
        put_time(out, t);
    }
    for s in [archive_mode, move_location, error].into_iter().flatten() {
        put_str(out, s);
    }
    if let Some(s) = skip {
        out.push(skip_byte(s.kind));
        put_str(out, &s.detail);
    }
}

/// Whether `raw` is a binary record (else JSON, as format 2 wrote: an object, `{`). Any other
/// first byte is taken as a binary layout's version, so a layout this landfall does not know
/// is reported as such, not as bad JSON.
pub(super) fn is_binary(raw: &[u8]) -> bool {
    raw.first() != Some(&b'{')
}

/// What admission and filtered scans need of a binary record without decoding it whole:
/// its state, seq and size.
pub(super) fn head(raw: &[u8]) -> Result<(FileState, u64, u64), String> {
    let mut r = Reader { raw, at: 0 };
    let (state, _) = r.head()?;
    Ok((state, r.varint("seq")?, r.varint("size")?))
}

/// A binary record read back whole.
pub(super) fn decode(raw: &[u8]) -> Result<FileRecord, String> {
    let mut r = Reader { raw, at: 0 };
    let (state, flags) = r.head()?;
    let has = |f: Flag| flags & f as u16 != 0;
    let seq = r.varint("seq")?;
    let size = r.varint("size")?;
    let modified = r.time("modified")?;
    let discovery_time = r.time("discovery_time")?;
    let path = r.string("path")?;
    let key = if has(Flag::Key) {
        r.string("key")?
    } else {
        path.clone()
    };
    let etag = r.string_if(has(Flag::Etag), "etag")?;
    let version = r.string_if(has(Flag::Version), "version")?;
    let batch_id = has(Flag::BatchId)
        .then(|| r.varint("batch_id"))
        .transpose()?;
    let processed_time = r.time_if(has(Flag::ProcessedTime), "processed_time")?;
    let commit_time = r.time_if(has(Flag::CommitTime), "commit_time")?;
    let table_version = has(Flag::TableVersion)
        .then(|| r.varint("table_version").map(unzigzag))
        .transpose()?;
    let archive_time = r.time_if(has(Flag::ArchiveTime), "archive_time")?;
    let archive_mode = r.string_if(has(Flag::ArchiveMode), "archive_mode")?;
    let move_location = r.string_if(has(Flag::MoveLocation), "move_location")?;
    let error = r.string_if(has(Flag::Error), "error")?;
    let skip = if has(Flag::Skip) {
        let b = r.byte("skip kind")?;
        let kind = *SKIP_KINDS
            .get(b as usize)
            .ok_or_else(|| format!("unknown skip kind {b}"))?;
        Some(SkipReason {
            kind,
            detail: r.string("skip detail")?,
        })
    } else {
        None
    };
    if r.at != raw.len() {
        return Err(format!(
            "{} bytes after the record's last field",
            raw.len() - r.at
        ));
    }
    Ok(FileRecord {
        key: FileKey(key),
        meta: FileMeta {
            path,
            size,
            modified,
            etag,
            version,
        },
        state,
        seq,
        discovery_time,
        batch_id,
        processed_time,
        commit_time,
        table_version,
        archive_time,
        archive_mode,
        move_location,
        error,
        skip,
    })
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}
fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}
fn put_time(out: &mut Vec<u8>, t: &DateTime<Utc>) {
    put_varint(out, zigzag(t.timestamp()));
    put_varint(out, u64::from(t.timestamp_subsec_nanos()));
}
fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    raw: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self, what: &str) -> Result<u8, String> {
        let b = *self
            .raw
            .get(self.at)
            .ok_or_else(|| format!("the record ends before its {what}"))?;
        self.at += 1;
        Ok(b)
    }

    /// The version byte, the state and the flags.
    fn head(&mut self) -> Result<(FileState, u16), String> {
        let v = self.byte("layout version")?;
        if v != VERSION {
            return Err(format!("unknown record layout {v}"));
        }
        let s = self.byte("state")?;
        let state = *STATES
            .get(s as usize)
            .ok_or_else(|| format!("unknown file state {s}"))?;
        let flags = u16::from_le_bytes([self.byte("flags")?, self.byte("flags")?]);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(format!("unknown field flags {:#06x}", flags & !KNOWN_FLAGS));
        }
        Ok((state, flags))
    }

    fn varint(&mut self, what: &str) -> Result<u64, String> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte(what)?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            n |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(format!("its {what} does not fit 64 bits"))
    }

    fn time(&mut self, what: &str) -> Result<DateTime<Utc>, String> {
        let secs = unzigzag(self.varint(what)?);
        let nanos = u32::try_from(self.varint(what)?)
            .map_err(|_| format!("its {what} has more than 2^32 nanoseconds"))?;
        DateTime::from_timestamp(secs, nanos)
            .ok_or_else(|| format!("its {what} ({secs} s, {nanos} ns) is out of range"))
    }

    fn time_if(&mut self, present: bool, what: &str) -> Result<Option<DateTime<Utc>>, String> {
        present.then(|| self.time(what)).transpose()
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        let len = usize::try_from(self.varint(what)?).unwrap_or(usize::MAX);
        let end = self
            .at
            .checked_add(len)
            .filter(|e| *e <= self.raw.len())
            .ok_or_else(|| format!("the record ends inside its {what}"))?;
        let s = std::str::from_utf8(&self.raw[self.at..end])
            .map_err(|e| format!("its {what} is not UTF-8: {e}"))?;
        self.at = end;
        Ok(s.to_owned())
    }

    fn string_if(&mut self, present: bool, what: &str) -> Result<Option<String>, String> {
        present.then(|| self.string(what)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    fn fresh() -> FileRecord {
        let meta = FileMeta {
            path: "in/a b é.json".into(),
            size: 7,
            modified: t("2026-12-03T10:00:00.123456789Z"),
            etag: Some("\"e\"".into()),
            version: None,
        };
        FileRecord::discovered(
            FileKey(meta.path.clone()),
            meta,
            3,
            t("2026-12-03T10:00:01Z"),
        )
    }

    fn full() -> FileRecord {
        let mut rec = fresh();
        rec.key = FileKey("in/a b é.json@e:e".into());
        rec.meta.version = Some("v1".into());
        FileRecord {
            state: FileState::Skipped,
            seq: u64::MAX,
            batch_id: Some(4),
            processed_time: Some(t("1969-07-20T20:17:40.5Z")),
            commit_time: Some(t("2262-04-11T23:47:16.854775807Z")),
            table_version: Some(-1),
            archive_time: Some(t("2026-12-03T10:00:00Z")),
            archive_mode: Some("MOVE".into()),
            move_location: Some("s3://b/archive/a".into()),
            error: Some("why".into()),
            skip: Some(SkipReason {
                kind: SkipKind::Empty,
                detail: String::new(),
            }),
            ..rec
        }
    }

    fn bytes(rec: &FileRecord) -> Vec<u8> {
        let mut out = Vec::new();
        encode(rec, &mut out);
        out
    }

    #[test]
    fn records_read_back_exactly() {
        for rec in [fresh(), full()] {
            let raw = bytes(&rec);
            assert!(is_binary(&raw));
            assert_eq!(decode(&raw).unwrap(), rec);
            assert_eq!(head(&raw).unwrap(), (rec.state, rec.seq, rec.meta.size));
        }
        for state in STATES {
            let rec = FileRecord { state, ..fresh() };
            assert_eq!(decode(&bytes(&rec)).unwrap().state, state);
        }
        for kind in SKIP_KINDS {
            let mut rec = full();
            rec.skip.as_mut().unwrap().kind = kind;
            assert_eq!(decode(&bytes(&rec)).unwrap().skip.unwrap().kind, kind);
        }
    }

    #[test]
    fn a_fresh_record_is_small_and_stores_the_path_once() {
        let raw = bytes(&fresh());
        let path = "in/a b é.json".as_bytes();
        assert_eq!(raw.windows(path.len()).filter(|w| *w == path).count(), 1);
        // 4 bytes of head, 2 of seq and size, 15 of times, 15 of path, 4 of etag.
        assert_eq!(raw.len(), 40);
        let json = serde_json::to_vec(&fresh()).unwrap();
        assert!(
            raw.len() * 5 < json.len(),
            "{} against {}",
            raw.len(),
            json.len()
        );
    }

    #[test]
    fn damage_is_an_error_not_a_guess() {
        let raw = bytes(&full());
        // Every truncation fails: no prefix of a record is a record.
        for n in 0..raw.len() {
            assert!(decode(&raw[..n]).is_err(), "prefix of {n} bytes read");
        }
        let mut longer = raw.clone();
        longer.push(0);
        assert!(decode(&longer).unwrap_err().contains("after the record"));
        let mut state = raw.clone();
        state[1] = 9;
        assert!(decode(&state).unwrap_err().contains("unknown file state 9"));
        let mut flags = raw.clone();
        flags[3] |= 0x80;
        assert!(decode(&flags).unwrap_err().contains("unknown field flags"));
        let mut layout = raw.clone();
        layout[0] = 2;
        assert!(
            decode(&layout)
                .unwrap_err()
                .contains("unknown record layout 2")
        );
        // Invalid UTF-8 in the path (a fresh record: the path is its last field).
        let mut utf8 = bytes(&fresh());
        let last = utf8.len() - 1;
        utf8[last] = 0xff;
        assert!(decode(&utf8).unwrap_err().contains("not UTF-8"));
        // A varint longer than 64 bits.
        let mut seq = vec![VERSION, 0, 0, 0];
        seq.extend_from_slice(&[0xff; 10]);
        seq.push(0x01);
        assert!(decode(&seq).unwrap_err().contains("does not fit 64 bits"));
    }

    #[test]
    fn varints_and_zigzag_round_trip_at_the_edges() {
        for n in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            assert_eq!(Reader { raw: &out, at: 0 }.varint("n").unwrap(), n);
        }
        for v in [0, 1, -1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
