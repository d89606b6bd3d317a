//! Step 6 of the protocol, at every start: settle the batch that was open when the process
//! stopped. If the table holds it (its txn version, or its manifest), finish publication and
//! record it; otherwise remove the data files its attempts staged and let the worker run the
//! same plan again under the same id.

use crate::events::StreamEvents;
use chrono::Utc;
use landfall_core::seams::SeamResult;
use landfall_core::{BatchPlan, CommitReceipt, Committer, StateStore};

/// What recovery left to do.
pub enum Recovered {
    Nothing,
    /// The open batch must run again.
    Replay(BatchPlan),
}

pub async fn recover(
    state: &dyn StateStore,
    committer: &dyn Committer,
    events: &StreamEvents,
) -> SeamResult<Recovered> {
    let Some(plan) = state.open_batch()? else {
        return Ok(Recovered::Nothing);
    };
    let landed = committer
        .last_committed()
        .await?
        .is_some_and(|v| v >= plan.batch_id);
    if landed {
        committer.complete(plan.batch_id).await?;
        let version = committer.table_version().await?;
        let receipt = CommitReceipt {
            table_version: version.unwrap_or(-1),
            // The row count of a batch recovered this way is not known without reading it back.
            rows: 0,
            data_files: 0,
            data_bytes: 0,
            committed_at: Utc::now(),
            recovered: true,
        };
        state.record_committed(plan.batch_id, receipt)?;
        events.batch_recovered(plan.batch_id, version);
        return Ok(Recovered::Nothing);
    }
    let removed = committer.remove_files(&plan.staged).await?;
    events.batch_replayed(plan.batch_id, removed);
    Ok(Recovered::Replay(plan))
}
