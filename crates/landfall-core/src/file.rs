//! Files as landfall sees them: what discovery reports ([`FileMeta`]), how a file is identified
//! ([`FileKey`]) and what the state store keeps about it ([`FileRecord`]).
//!
//! A file's identity is its path. With `allow_overwrites` it is the path plus the version the
//! store reports (its etag, else its object version, else its modification time in ms): a file
//! rewritten in place is a new file and is ingested again, whole. The etag comes first because
//! S3's modification time has one-second precision: two writes in one second share it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A candidate file reported by discovery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// Location of the file inside its store (object_store path, no leading slash).
    pub path: String,
    pub size: u64,
    /// Last modification time as reported by the store (milliseconds precision).
    pub modified: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl FileMeta {
    /// The identity of this file under the stream's overwrite policy.
    pub fn key(&self, allow_overwrites: bool) -> FileKey {
        if allow_overwrites {
            FileKey(format!("{}@{}", self.path, self.version_tag()))
        } else {
            FileKey(self.path.clone())
        }
    }

    /// What tells this version of the file from another at the same path: `e:<etag>`,
    /// `v:<version>` or `m:<modified ms>-<size>`.
    pub fn version_tag(&self) -> String {
        match (&self.etag, &self.version) {
            (Some(e), _) => format!("e:{}", e.trim_matches('"')),
            (None, Some(v)) => format!("v:{v}"),
            (None, None) => format!("m:{}-{}", self.modified.timestamp_millis(), self.size),
        }
    }

    /// Whether `other` is the same version of the same file (what a pinned read checks).
    pub fn same_version(&self, other: &FileMeta) -> bool {
        self.path == other.path
            && self.size == other.size
            && self.version_tag() == other.version_tag()
    }
}

/// The state store's key for a file: its path, or path@modified-millis with `allow_overwrites`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FileKey(pub String);

impl fmt::Display for FileKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a file is in its lifecycle:
/// `Discovered -> InBatch -> Committed -> Archived`, plus `Skipped` (with a [`SkipReason`]) and
/// `Failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    Discovered,
    InBatch,
    Committed,
    Archived,
    /// Not ingested, on purpose: the record's `skip` says why.
    Skipped,
    Failed,
}

impl FileState {
    pub const ALL: [FileState; 6] = [
        FileState::Discovered,
        FileState::InBatch,
        FileState::Committed,
        FileState::Archived,
        FileState::Skipped,
        FileState::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FileState::Discovered => "discovered",
            FileState::InBatch => "in_batch",
            FileState::Committed => "committed",
            FileState::Archived => "archived",
            FileState::Skipped => "skipped",
            FileState::Failed => "failed",
        }
    }

    /// Auto Loader's `ingestion_state` column for this state (`null` while not yet processed).
    pub fn ingestion_state(self) -> Option<&'static str> {
        match self {
            FileState::Discovered => None,
            FileState::InBatch => Some("PROCESSING"),
            FileState::Committed | FileState::Archived => Some("INGESTED"),
            FileState::Skipped => Some("SKIPPED"),
            FileState::Failed => Some("FAILED"),
        }
    }

    /// Whether the file is done with: it may be expired after `max_file_age`.
    pub fn is_terminal(self) -> bool {
        !matches!(self, FileState::Discovered | FileState::InBatch)
    }

    pub fn parse(s: &str) -> Option<FileState> {
        FileState::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl fmt::Display for FileState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How `clean_source` archives a committed file (Auto Loader's `cleanSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArchiveMode {
    /// The file is deleted from the source.
    Delete,
    /// The file is moved below `move_destination`, keeping its path relative to the source.
    Move,
}

impl ArchiveMode {
    /// The name `landfall state` shows in `archive_mode`, as Auto Loader's `cloud_files_state`.
    pub fn as_str(self) -> &'static str {
        match self {
            ArchiveMode::Delete => "DELETE",
            ArchiveMode::Move => "MOVE",
        }
    }
}

/// A file archived (`clean_source`), as the ledger records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    pub time: DateTime<Utc>,
    pub mode: ArchiveMode,
    /// Where a moved file now lies (shown form of the URL); `None` when nothing was moved.
    pub move_location: Option<String>,
    /// Why the source was already gone (deleted by someone else, or by an earlier attempt);
    /// kept in the record's `error`.
    pub note: Option<String>,
}

/// One step of archiving a committed file, recorded by `StateStore::record_archive`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveStep {
    /// A move to this location (shown form) is about to start: recorded first, so a crash
    /// after the copy finds where the copy went, and a later attempt overwrites only its own
    /// copy. The file stays `committed` with `move_location` set.
    Target(String),
    /// Archived: the file becomes `archived`, out of the archive index.
    Done(Archive),
    /// Left in place for good (overwritten after its commit): the file stays `committed`,
    /// out of the archive index, with this note.
    PassedOver(String),
}

/// Everything the state store keeps about one file (the rows of `landfall state`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileRecord {
    pub key: FileKey,
    pub meta: FileMeta,
    pub state: FileState,
    /// Order of discovery inside the stream; batches take files in this order.
    pub seq: u64,
    pub discovery_time: DateTime<Utc>,
    #[serde(default)]
    pub batch_id: Option<u64>,
    /// When the file was put into a batch plan.
    #[serde(default)]
    pub processed_time: Option<DateTime<Utc>>,
    #[serde(default)]
    pub commit_time: Option<DateTime<Utc>>,
    #[serde(default)]
    pub table_version: Option<i64>,
    #[serde(default)]
    pub archive_time: Option<DateTime<Utc>>,
    #[serde(default)]
    pub archive_mode: Option<String>,
    #[serde(default)]
    pub move_location: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// Why the file was skipped (state `Skipped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<SkipReason>,
}

/// Why a file was not ingested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipKind {
    /// Deleted or moved between discovery and reading (`ignore_missing_files`).
    Missing,
    /// Could not be decoded (`ignore_corrupt_files`).
    Corrupt,
    /// Changed (overwritten, appended to) between discovery and reading: what was listed no
    /// longer exists. With `allow_overwrites` the new version is discovered as a new file.
    ChangedAfterListing,
    /// Skipped by hand (`landfall skip`).
    Manual,
    /// Larger than the format takes (`binary_file.max_file_size`): always skipped.
    TooLarge,
    /// Zero bytes when discovered: recorded, nothing to read. A later version of the key
    /// with content (a writer that creates the object first and fills it after) is a new
    /// file, whatever `allow_overwrites` says.
    Empty,
}

impl SkipKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipKind::Missing => "missing",
            SkipKind::Corrupt => "corrupt",
            SkipKind::ChangedAfterListing => "changed_after_listing",
            SkipKind::Manual => "manual",
            SkipKind::TooLarge => "too_large",
            SkipKind::Empty => "empty",
        }
    }
}

/// A skip and its detail (`corrupt: <decode error>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipReason {
    pub kind: SkipKind,
    pub detail: String,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            f.write_str(self.kind.as_str())
        } else {
            write!(f, "{}: {}", self.kind.as_str(), self.detail)
        }
    }
}

impl FileRecord {
    pub fn discovered(key: FileKey, meta: FileMeta, seq: u64, now: DateTime<Utc>) -> Self {
        FileRecord {
            key,
            meta,
            state: FileState::Discovered,
            seq,
            discovery_time: now,
            batch_id: None,
            processed_time: None,
            commit_time: None,
            table_version: None,
            archive_time: None,
            archive_mode: None,
            move_location: None,
            error: None,
            skip: None,
        }
    }
}

/// The file metadata fields a stream may add (`metadata_columns`, Spark's `_metadata`), in
/// Spark's order.
pub const METADATA_FIELDS: [&str; 6] = [
    "file_path",
    "file_name",
    "file_size",
    "file_modification_time",
    "file_block_start",
    "file_block_length",
];
