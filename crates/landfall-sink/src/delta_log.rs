//! Finding the commit that holds one batch of a stream, by reading the log's commit files.
//!
//! Contract: [`find_batch_version`] returns the version `v` whose commit file
//! `_delta_log/<v>.json` holds `txn { appId = stream, version = batch id }`, or `None` if no
//! commit still in the log holds it (never committed, or its entry cleaned up after a
//! checkpoint).
//!
//! The scan goes backwards from the latest version and is bounded: a stream's txn version only
//! grows with the table version (every commit of batch N is refused once the table holds
//! txn >= N), so the first commit going backwards whose txn for the stream is *below* the batch
//! id proves no older commit holds it, and the scan stops there — or at the oldest commit file
//! still present. Commit files are read raw and parsed line by line as plain JSON, so actions
//! this build of deltalake does not model never make the scan fail.

use crate::error::SinkError;
use deltalake::logstore::LogStore;
use futures::StreamExt;

/// Commit files read ahead of the one being looked at (object-store latency, not CPU, bounds
/// the scan).
const READ_AHEAD: usize = 8;

/// What one commit says about the stream's txn.
#[derive(Debug, PartialEq)]
pub(crate) enum TxnInCommit {
    /// The commit carries no txn for the stream.
    Absent,
    Version(i64),
}

/// The stream's txn version in one commit file's bytes (newline-delimited JSON actions).
pub(crate) fn txn_in_commit(bytes: &[u8], app_id: &str) -> Result<TxnInCommit, String> {
    let mut found = TxnInCommit::Absent;
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let action: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| format!("line {}: {e}", i + 1))?;
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
pub(crate) fn adds_in_commit(bytes: &[u8]) -> Result<(Vec<String>, Option<String>), String> {
    let key = landfall_core::OWNER_KEY;
    let mut owner = None;
    let mut out = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let action: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| format!("line {}: {e}", i + 1))?;
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

/// The version of the commit holding `txn { app_id, batch_id }`, scanning back from `latest`.
pub(crate) async fn find_batch_version(
    location: &str,
    log_store: &dyn LogStore,
    latest: i64,
    app_id: &str,
    batch_id: i64,
) -> Result<Option<i64>, SinkError> {
    let mut entries = futures::stream::iter((0..=latest).rev())
        .map(|v| async move { (v, log_store.read_commit_entry(v as u64).await) })
        .buffered(READ_AHEAD);
    while let Some((version, read)) = entries.next().await {
        let bytes = match read {
            Ok(Some(b)) => b,
            // The oldest commit still in the log was passed (cleaned up, or a checkpoint-only
            // prefix): the table can no longer tell.
            Ok(None) => return Ok(None),
            Err(source) => {
                return Err(SinkError::Delta {
                    location: location.to_string(),
                    op: format!("read log entry {version}"),
                    source: Box::new(source),
                });
            }
        };
        match txn_in_commit(&bytes, app_id).map_err(|reason| SinkError::Log {
            location: location.to_string(),
            version,
            reason,
        })? {
            TxnInCommit::Version(v) if v == batch_id => return Ok(Some(version)),
            TxnInCommit::Version(v) if v < batch_id => return Ok(None),
            _ => {}
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

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
