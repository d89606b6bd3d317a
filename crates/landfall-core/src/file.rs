//! Files as landfall sees them: what discovery reports ([`FileMeta`]), how a file is identified
//! ([`FileKey`]) and what the state store keeps about it ([`FileRecord`]).
//!
//! A file's identity is its path. With `allow_overwrites` it is path plus modification time, so a
//! file rewritten in place is a new file and is ingested again, whole.

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
            FileKey(format!(
                "{}@{}",
                self.path,
                self.modified.timestamp_millis()
            ))
        } else {
            FileKey(self.path.clone())
        }
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
/// `Discovered -> InBatch -> Committed -> Archived`, plus the two skipped states and `Failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    Discovered,
    InBatch,
    Committed,
    Archived,
    SkippedCorrupt,
    SkippedMissing,
    Failed,
}

impl FileState {
    pub const ALL: [FileState; 7] = [
        FileState::Discovered,
        FileState::InBatch,
        FileState::Committed,
        FileState::Archived,
        FileState::SkippedCorrupt,
        FileState::SkippedMissing,
        FileState::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FileState::Discovered => "discovered",
            FileState::InBatch => "in_batch",
            FileState::Committed => "committed",
            FileState::Archived => "archived",
            FileState::SkippedCorrupt => "skipped_corrupt",
            FileState::SkippedMissing => "skipped_missing",
            FileState::Failed => "failed",
        }
    }

    /// Auto Loader's `ingestion_state` column for this state (`null` while not yet processed).
    pub fn ingestion_state(self) -> Option<&'static str> {
        match self {
            FileState::Discovered => None,
            FileState::InBatch => Some("PROCESSING"),
            FileState::Committed | FileState::Archived => Some("INGESTED"),
            FileState::SkippedCorrupt => Some("SKIPPED_CORRUPTED"),
            FileState::SkippedMissing => Some("SKIPPED_MISSING"),
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
        }
    }
}
