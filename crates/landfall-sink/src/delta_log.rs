//! Finding the commit that holds one batch of a stream, by reading the log's commit files.
//!
//! Contract: [`find_batch_version`] returns [`BatchInLog::Found`] with the version `v` whose
//! commit file `_delta_log/<v>.json` holds `txn { appId = stream, version = batch id }`;
//! [`BatchInLog::Absent`] when the log proves no commit holds it (a commit with a lower txn of
//! the stream, or every commit down to version 0, was read without finding it); or
//! [`BatchInLog::Unknown`] when the scan met the oldest entry still in the log first (entries
//! cleaned up after a checkpoint): the table can no longer tell.
//!
//! The scan goes backwards from the latest version and is bounded: a stream's txn version only
//! grows with the table version (every commit of batch N is refused once the table holds
//! txn >= N), so the first commit going backwards whose txn for the stream is *below* the batch
//! id proves no older commit holds it, and the scan stops there — or at the oldest commit file
//! still present. Commit files are read raw and parsed line by line as plain JSON, so actions
//! the Delta kernel does not model never make the scan fail.

use crate::error::SinkError;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

/// Commit files read ahead of the one being looked at (object-store latency, not CPU, bounds
/// the scan).
const READ_AHEAD: usize = 8;

/// What one commit says about the stream's txn.
#[derive(Debug, PartialEq)]
pub enum TxnInCommit {
    /// The commit carries no txn for the stream.
    Absent,
    Version(i64),
}

/// One line of a commit file: a JSON object (an action), else the entry is damaged.
fn action_of(line: &[u8], i: usize) -> Result<serde_json::Value, String> {
    let action: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| format!("line {}: {e}", i + 1))?;
    if !action.is_object() {
        return Err(format!("line {}: not a JSON object", i + 1));
    }
    Ok(action)
}

/// The stream's txn version in one commit file's bytes (newline-delimited JSON actions).
pub fn txn_in_commit(bytes: &[u8], app_id: &str) -> Result<TxnInCommit, String> {
    let mut found = TxnInCommit::Absent;
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let action = action_of(line, i)?;
        let Some(txn) = action.get("txn") else {
            continue;
        };
        if txn.get("appId").and_then(|a| a.as_str()) != Some(app_id) {
            continue;
        }
        let v = txn
            .get("version")
            .and_then(|v| v.as_i64())
            .ok_or_else(|| format!("line {}: txn without an integer version", i + 1))?;
        // At most one txn per app id per commit (protocol); keep the highest if not.
        found = match found {
            TxnInCommit::Version(old) if old >= v => TxnInCommit::Version(old),
            _ => TxnInCommit::Version(v),
        };
    }
    Ok(found)
}

/// The paths of the `add` actions in one commit file's bytes, as written (percent-encoded),
/// and the state identity stamped on the commit (`commitInfo` or an `add`'s tags).
pub fn adds_in_commit(bytes: &[u8]) -> Result<(Vec<String>, Option<String>), String> {
    let key = landfall_core::OWNER_KEY;
    let mut owner = None;
    let mut out = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let action = action_of(line, i)?;
        if let Some(o) = action
            .get("commitInfo")
            .and_then(|c| c.get(key))
            .and_then(|o| o.as_str())
        {
            owner = Some(o.to_string());
        }
        if let Some(add) = action.get("add") {
            if let Some(p) = add.get("path").and_then(|p| p.as_str()) {
                out.push(p.to_string());
            }
            if let Some(o) = add
                .get("tags")
                .and_then(|t| t.get(key))
                .and_then(|o| o.as_str())
            {
                owner = Some(o.to_string());
            }
        }
    }
    Ok((out, owner))
}

/// What the log says of one batch of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchInLog {
    /// The commit at this version holds it.
    Found(i64),
    /// No commit holds it: it was never committed.
    Absent,
    /// The entries that could hold it are gone from the log.
    Unknown,
}

impl BatchInLog {
    pub(crate) fn found(self) -> Option<i64> {
        match self {
            BatchInLog::Found(v) => Some(v),
            _ => None,
        }
    }
}

/// One step of the backward scan: what the commit at `version` (its bytes' txn, or `None`
/// when its entry is gone) decides, or `None` to read the next older one.
pub(crate) fn scan_step(
    version: i64,
    txn: Option<TxnInCommit>,
    batch_id: i64,
) -> Option<BatchInLog> {
    match txn {
        None => Some(BatchInLog::Unknown),
        Some(TxnInCommit::Version(v)) if v == batch_id => Some(BatchInLog::Found(version)),
        Some(TxnInCommit::Version(v)) if v < batch_id => Some(BatchInLog::Absent),
        // Version 0 read without finding it: no commit holds it.
        _ if version == 0 => Some(BatchInLog::Absent),
        _ => None,
    }
}

/// The path of commit `version` in the log directory `log`.
pub(crate) fn commit_path(log: &Path, version: i64) -> Path {
    log.clone().join(format!("{version:020}.json"))
}

/// The bytes of commit `version`, or `None` when its entry is not (or no longer) in the log.
pub(crate) async fn read_commit(
    store: &dyn ObjectStore,
    log: &Path,
    version: i64,
) -> Result<Option<bytes::Bytes>, object_store::Error> {
    match store.get(&commit_path(log, version)).await {
        Ok(r) => Ok(Some(r.bytes().await?)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Where the commit holding `txn { app_id, batch_id }` is, scanning back from `latest`.
pub(crate) async fn find_batch_version(
    location: &str,
    store: &dyn ObjectStore,
    log: &Path,
    latest: i64,
    app_id: &str,
    batch_id: i64,
) -> Result<BatchInLog, SinkError> {
    let mut entries = futures::stream::iter((0..=latest).rev())
        .map(|v| async move { (v, read_commit(store, log, v).await) })
        .buffered(READ_AHEAD);
    while let Some((version, read)) = entries.next().await {
        let bytes = match read {
            Ok(Some(b)) => b,
            // The oldest commit still in the log was passed (cleaned up, or a checkpoint-only
            // prefix): the table can no longer tell.
            Ok(None) => return Ok(BatchInLog::Unknown),
            Err(source) => {
                return Err(SinkError::Kernel {
                    location: location.to_string(),
                    op: format!("read log entry {version}"),
                    source: Box::new(delta_kernel::KernelError::ObjectStore(source)),
                });
            }
        };
        let txn = txn_in_commit(&bytes, app_id).map_err(|reason| SinkError::Log {
            location: location.to_string(),
            version,
            reason,
        })?;
        if let Some(decided) = scan_step(version, Some(txn), batch_id) {
            return Ok(decided);
        }
    }
    // No version at all below `latest` (latest < 0).
    Ok(BatchInLog::Absent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_tells_found_from_proved_absent_from_unknown() {
        let v = TxnInCommit::Version;
        // Batch 5: latest commits carry txn 7 (another writer's numbering), then 6.
        assert_eq!(scan_step(9, Some(v(7)), 5), None);
        assert_eq!(scan_step(8, Some(TxnInCommit::Absent), 5), None);
        assert_eq!(scan_step(7, Some(v(5)), 5), Some(BatchInLog::Found(7)));
        // A lower txn proves batch 5 was never committed.
        assert_eq!(scan_step(6, Some(v(4)), 5), Some(BatchInLog::Absent));
        // Down to version 0 without it: never committed.
        assert_eq!(scan_step(0, Some(v(6)), 5), Some(BatchInLog::Absent));
        assert_eq!(
            scan_step(0, Some(TxnInCommit::Absent), 5),
            Some(BatchInLog::Absent)
        );
        // An entry gone before deciding: unknown.
        assert_eq!(scan_step(3, None, 5), Some(BatchInLog::Unknown));
    }

    #[test]
    fn reads_the_stream_txn_and_ignores_others() {
        let commit = br#"{"commitInfo":{"timestamp":1,"operation":"WRITE"}}
{"txn":{"appId":"other","version":40,"lastUpdated":1}}
{"txn":{"appId":"s","version":7,"lastUpdated":1}}
{"add":{"path":"a.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}
{"someFutureAction":{"x":1}}
"#;
        assert_eq!(txn_in_commit(commit, "s").unwrap(), TxnInCommit::Version(7));
        assert_eq!(txn_in_commit(commit, "t").unwrap(), TxnInCommit::Absent);
        assert!(txn_in_commit(b"{not json", "s").is_err());
    }
}
