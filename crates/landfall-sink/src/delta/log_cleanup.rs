//! Expired log cleanup (`delta.logRetentionDuration`, `delta.enableExpiredLogCleanup`), run
//! after each checkpoint landfall writes. The Delta kernel has none, so this is ours.
//!
//! Contract: let `V` be the newest version with a complete checkpoint written before the
//! retention cutoff (now minus `delta.logRetentionDuration`, 30 days by default). Every log
//! entry of a version below `V` is deleted: commits, checksums, checkpoints, compacted commit
//! ranges ending below `V`. Every version from `V` on can still be read from that checkpoint
//! and the commits after it, so no reader of a retained version loses anything; the oldest
//! readable version becomes `V`, as in Spark's cleanup. Nothing else is touched:
//! `_last_checkpoint`, the `_sidecars/` a v2 checkpoint names, files landfall does not
//! recognise. Tables with `checkpointProtection` are never cleaned (the caller checks).

use super::kernel::Kernel;
use crate::error::SinkError;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectMeta;
use std::collections::BTreeMap;
use std::time::Duration;

/// Delta's default `delta.logRetentionDuration`: 30 days.
pub(crate) const DEFAULT_LOG_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// What a log file is, by its name.
#[derive(Debug, PartialEq, Clone)]
enum Entry {
    /// `<v>.json`, `<v>.crc`
    Commit(u64),
    /// `<v>.checkpoint.parquet`, `<v>.checkpoint.<uuid>.{json,parquet}`: complete alone.
    Checkpoint(u64),
    /// `<v>.checkpoint.<part>.<parts>.parquet`
    CheckpointPart { version: u64, parts: u64 },
    /// `<from>.<to>.compacted.json`
    Compacted { to: u64 },
}

fn entry(name: &str) -> Option<Entry> {
    let (head, rest) = name.split_once('.')?;
    if head.len() != 20 || !head.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u64 = head.parse().ok()?;
    let parts: Vec<&str> = rest.split('.').collect();
    match parts.as_slice() {
        ["json"] | ["crc"] => Some(Entry::Commit(v)),
        ["checkpoint", "parquet"] => Some(Entry::Checkpoint(v)),
        ["checkpoint", _uuid, "json" | "parquet"] => Some(Entry::Checkpoint(v)),
        ["checkpoint", part, total, "parquet"]
            if part.len() == 10 && total.len() == 10 && part.parse::<u64>().is_ok() =>
        {
            Some(Entry::CheckpointPart {
                version: v,
                parts: total.parse().ok()?,
            })
        }
        [to, "compacted", "json"] if to.len() == 20 => Some(Entry::Compacted {
            to: to.parse().ok()?,
        }),
        _ => None,
    }
}

/// The version below which every entry may go, given the log's files and the cutoff.
fn oldest_kept(
    files: &[(Entry, chrono::DateTime<chrono::Utc>)],
    cutoff: chrono::DateTime<chrono::Utc>,
) -> Option<u64> {
    // (version, parts in the set) -> parts seen: two sets of one version with different part
    // counts are told apart.
    let mut parts: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut complete: Vec<u64> = Vec::new();
    for (e, modified) in files {
        if *modified > cutoff {
            continue;
        }
        match e {
            Entry::Checkpoint(v) => complete.push(*v),
            Entry::CheckpointPart { version, parts: n } => {
                let seen = parts.entry((*version, *n)).or_insert(0);
                *seen += 1;
                if *seen == *n {
                    complete.push(*version);
                }
            }
            _ => {}
        }
    }
    complete.into_iter().max()
}

/// Delete the expired log entries of the table; returns how many were deleted.
pub(crate) async fn clean_expired(k: &Kernel, retention: Duration) -> Result<u64, SinkError> {
    let log = k.path("_delta_log");
    let io = |op: &'static str, e: object_store::Error| SinkError::Io {
        location: k.location.clone(),
        op,
        reason: e.to_string(),
    };
    let listed: Vec<ObjectMeta> = k
        .store
        .list_with_delimiter(Some(&log))
        .await
        .map_err(|e| io("list the log", e))?
        .objects;
    let files: Vec<(Entry, ObjectMeta)> = listed
        .into_iter()
        .filter_map(|m| Some((entry(m.location.filename()?)?, m)))
        .collect();
    let cutoff =
        chrono::Utc::now() - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
    let stamped: Vec<(Entry, chrono::DateTime<chrono::Utc>)> = files
        .iter()
        .map(|(e, m)| (e.clone(), m.last_modified))
        .collect();
    let Some(keep_from) = oldest_kept(&stamped, cutoff) else {
        return Ok(0);
    };
    let doomed: Vec<object_store::path::Path> = files
        .into_iter()
        .filter(|(e, _)| match e {
            Entry::Commit(v) | Entry::Checkpoint(v) => *v < keep_from,
            Entry::CheckpointPart { version, .. } => *version < keep_from,
            Entry::Compacted { to } => *to < keep_from,
        })
        .map(|(_, m)| m.location)
        .collect();
    let n = doomed.len() as u64;
    let locations = futures::stream::iter(doomed.into_iter().map(Ok)).boxed();
    k.store
        .delete_stream(locations)
        .try_collect::<Vec<_>>()
        .await
        .map_err(|e| io("delete expired log entries", e))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn names_are_read_as_delta_names_them() {
        let v = |n: u64| format!("{n:020}");
        assert_eq!(entry(&format!("{}.json", v(7))), Some(Entry::Commit(7)));
        assert_eq!(entry(&format!("{}.crc", v(7))), Some(Entry::Commit(7)));
        assert_eq!(
            entry(&format!("{}.checkpoint.parquet", v(9))),
            Some(Entry::Checkpoint(9))
        );
        assert_eq!(
            entry(&format!(
                "{}.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
                v(9)
            )),
            Some(Entry::Checkpoint(9))
        );
        assert_eq!(
            entry(&format!(
                "{}.checkpoint.0000000001.0000000002.parquet",
                v(9)
            )),
            Some(Entry::CheckpointPart {
                version: 9,
                parts: 2
            })
        );
        assert_eq!(
            entry(&format!("{}.{}.compacted.json", v(3), v(5))),
            Some(Entry::Compacted { to: 5 })
        );
        for other in [
            "_last_checkpoint",
            "7.json",
            "0000000000000000000x.json",
            "_sidecars",
        ] {
            assert_eq!(entry(other), None, "{other}");
        }
    }

    #[test]
    fn only_a_complete_checkpoint_older_than_the_cutoff_moves_the_start() {
        let t = |s: i64| Utc.timestamp_opt(s, 0).unwrap();
        let cutoff = t(1000);
        let files = vec![
            (Entry::Checkpoint(10), t(500)),
            (Entry::Checkpoint(20), t(1500)), // too new
            (
                Entry::CheckpointPart {
                    version: 15,
                    parts: 2,
                },
                t(600),
            ), // half of one
            (Entry::Commit(5), t(100)),
        ];
        assert_eq!(oldest_kept(&files, cutoff), Some(10));
        let mut more = files;
        more.push((
            Entry::CheckpointPart {
                version: 15,
                parts: 2,
            },
            t(700),
        ));
        assert_eq!(oldest_kept(&more, cutoff), Some(15));
        assert_eq!(oldest_kept(&[(Entry::Commit(1), t(1))], cutoff), None);
    }
}
