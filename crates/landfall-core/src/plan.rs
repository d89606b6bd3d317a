//! Batch plans: the exact list of files a micro-batch reads, written down before it runs.
//!
//! A plan is immutable once recorded. A retry after a failure or a crash reads the same files
//! under the same batch id, so the table's `txn` version tells whether the batch already landed.

use crate::file::{FileKey, FileMeta};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Caps of one micro-batch. `max_files` is hard; `max_bytes` is soft: a batch always takes at
/// least one file, and stops before the file that would pass the byte cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    pub max_files: usize,
    pub max_bytes: Option<u64>,
}

impl BatchLimits {
    /// Whether a batch holding `files` files of `bytes` bytes may also take one of `next` bytes.
    pub fn admits(&self, files: usize, bytes: u64, next: u64) -> bool {
        if files == 0 {
            return true;
        }
        if files >= self.max_files {
            return false;
        }
        match self.max_bytes {
            Some(cap) => bytes.saturating_add(next) <= cap,
            None => true,
        }
    }
}

/// A recorded micro-batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchPlan {
    pub batch_id: u64,
    pub files: Vec<(FileKey, FileMeta)>,
    /// Version of the stream schema the batch is decoded with.
    pub schema_version: u32,
    pub planned_at: DateTime<Utc>,
    /// How many times this plan was started (1 for the first run).
    pub attempts: u32,
    /// Data files written by attempts of this batch: what recovery removes if the batch did
    /// not land. Recorded before each file is created.
    #[serde(default)]
    pub staged: Vec<String>,
    #[serde(default)]
    pub committed: Option<CommitReceipt>,
    /// Attempts that reached the commit call. A commit whose outcome was not seen may land
    /// later (a timed-out PUT the store still applies): until the batch is settled, the data
    /// files of these attempts are never deleted.
    #[serde(default)]
    pub commit_attempts: Vec<u32>,
}

/// The attempt a staged data file was written by, from its name
/// (`part-<batch>-a<attempt>-<run>-c<n>.snappy.parquet`); `None` for another name.
pub fn staged_attempt(path: &str) -> Option<u32> {
    let name = path.rsplit('/').next()?;
    let rest = name.strip_prefix("part-")?;
    rest.split('-').nth(1)?.strip_prefix('a')?.parse().ok()
}

impl CommitReceipt {
    /// The receipt of a batch found in the table rather than committed by this call (after a
    /// crash between commit and record, or an ambiguous commit that landed): its version is
    /// the commit holding it (-1 when unknown); its row and file counts are not known without
    /// reading the table back.
    pub fn recovered(table_version: i64) -> Self {
        CommitReceipt {
            table_version,
            rows: 0,
            data_files: 0,
            data_bytes: 0,
            committed_at: chrono::Utc::now(),
            recovered: true,
        }
    }
}

impl BatchPlan {
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|(_, m)| m.size).sum()
    }
}

/// What the sink says about a landed batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitReceipt {
    /// Delta table version holding the batch (for a Parquet directory: the batch id).
    pub table_version: i64,
    pub rows: u64,
    pub data_files: u64,
    pub data_bytes: u64,
    pub committed_at: DateTime<Utc>,
    /// True when the receipt was reconstructed at recovery from the table's txn marker.
    #[serde(default)]
    pub recovered: bool,
}

/// A data file written for a batch, not yet part of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedFile {
    /// Path relative to the table root.
    pub path: String,
    pub size: u64,
    pub rows: u64,
    pub partition_values: Vec<(String, Option<String>)>,
    /// Delta per-file statistics (JSON), if the writer computed them.
    #[serde(default)]
    pub stats: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_from_staged_name() {
        assert_eq!(
            staged_attempt("k=v/part-0000000003-a2-abc123def456-c001.snappy.parquet"),
            Some(2)
        );
        assert_eq!(
            staged_attempt("_landfall/staging/part-0000000003-a11-x-c001.snappy.parquet"),
            Some(11)
        );
        assert_eq!(staged_attempt("other.parquet"), None);
    }

    #[test]
    fn byte_cap_is_soft_and_file_cap_hard() {
        let l = BatchLimits {
            max_files: 3,
            max_bytes: Some(100),
        };
        assert!(l.admits(0, 0, 1_000), "a batch always takes its first file");
        assert!(l.admits(1, 60, 40));
        assert!(!l.admits(1, 60, 41));
        assert!(!l.admits(3, 0, 0));
        let files_only = BatchLimits {
            max_files: 2,
            max_bytes: None,
        };
        assert!(files_only.admits(1, u64::MAX - 1, 10));
        assert!(!files_only.admits(2, 0, 0));
    }
}
