//! A batch the table already holds, settled in one place.
//!
//! Two moments find a batch in the table that the ledger has not recorded: recovery at a start
//! (the process stopped between commit and record), and a commit call that finds an earlier
//! attempt's commit landed after all (its outcome was not seen: an ambiguous failure). Both
//! settle it the same way, each step durable before the next:
//!
//! 1. the commit must be this state's own ([`check_owned`]): a process never records another's
//!    commit as its own;
//! 2. its publication is finished (`Committer::complete`: the Parquet directory's files; a
//!    no-op for Delta);
//! 3. the files of the batch's other attempts are removed (`remove_orphans`: every file the
//!    ledger saw staged that the commit does not hold), before the batch is recorded, since
//!    once recorded no recovery looks at it again;
//! 4. the batch is recorded with the version of the commit that holds it (row count unknown),
//!    and its plan pruned.

use super::owner::{check_owned, state_id};
use crate::events::StreamEvents;
use landfall_core::seams::SeamResult;
use landfall_core::{CommitReceipt, Committer, StateStore};

/// Closed batch plans kept in the ledger for `landfall state` and progress; older ones are
/// pruned once committed.
pub const KEEP_PLANS: u64 = 100;

/// Settle batch `batch_id`, which the table holds. `version`: the table version of its commit
/// when the caller knows it (a commit call's answer); otherwise it is asked of the table.
pub async fn settle_landed(
    name: &str,
    state: &dyn StateStore,
    committer: &dyn Committer,
    events: &StreamEvents,
    batch_id: u64,
    version: Option<i64>,
) -> SeamResult<()> {
    // Every attempt's files, as the staged hook recorded them.
    let staged = state.batch(batch_id)?.map(|p| p.staged).unwrap_or_default();
    check_owned(name, committer, batch_id, &staged, &state_id(state)?).await?;
    committer.complete(batch_id).await?;
    let version = match version {
        Some(v) => Some(v),
        None => committer.batch_version(batch_id).await?,
    };
    let orphans = committer.remove_orphans(batch_id, &staged).await?;
    events.orphans_removed(batch_id, orphans);
    state.record_committed(batch_id, CommitReceipt::recovered(version.unwrap_or(-1)))?;
    state.prune_batch(batch_id, KEEP_PLANS)?;
    events.batch_recovered(batch_id, version);
    Ok(())
}
