//! Step 6 of the protocol, at every start: settle the batch that was open when the process
//! stopped. If the table holds it (its txn version, or its manifest), it is settled as landed
//! ([`super::settle`]); otherwise the data files its attempts staged are removed and the
//! worker runs the same plan again under the same id.

use crate::events::StreamEvents;
use landfall_config::StreamSpec;
use landfall_core::seams::{ErrorKind, SeamResult};
use landfall_core::{BatchPlan, Committer, SeamError, StateStore};

/// What recovery left to do.
pub enum Recovered {
    Nothing,
    /// The open batch must run again.
    Replay(BatchPlan),
}

pub async fn recover(
    name: &str,
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
        // With the version of the commit that holds the batch, not the table's latest.
        super::settle::settle_landed(name, state, committer, events, plan.batch_id, None).await?;
        return Ok(Recovered::Nothing);
    }
    // Files of attempts that reached the commit call stay: their commit may still land (an
    // ambiguous failure), and must then find its files. They are removed once the batch is
    // settled by a later attempt's commit, as orphans of that one.
    let unsettled: Vec<String> = plan
        .staged
        .iter()
        .filter(|p| {
            landfall_core::staged_attempt(p).is_some_and(|a| !plan.commit_attempts.contains(&a))
        })
        .cloned()
        .collect();
    let removed = committer.remove_files(&unsettled).await?;
    events.batch_replayed(plan.batch_id, removed);
    Ok(Recovered::Replay(plan))
}

/// Ledger setting written by `landfall reset` into the new state: starting over was asked for.
pub const RESET_META: &str = "reset_from";

/// At every start, before recovery: the table decides, and the ledger must agree with it.
///
/// - A new ledger (no batch ever planned) facing a table that holds batches of this stream:
///   refused (a state volume that did not mount would ingest every file again), unless
///   `landfall reset` made it; then batch ids continue after the table's (never reused).
/// - The table holds a batch id this ledger never planned: refused (the state is older than
///   the table: restored from a backup, a second instance with its own state, or the stream
///   name reused). Taking the table's word would mark batches committed that this process
///   neither committed nor can verify.
/// - The table lacks a batch the ledger recorded as committed: refused (the table was
///   replaced, restored, or the sink points elsewhere).
pub async fn check_table(
    spec: &StreamSpec,
    state: &dyn StateStore,
    committer: &dyn Committer,
    events: &StreamEvents,
) -> SeamResult<()> {
    let table = committer.last_committed().await?;
    let name = &spec.name;
    let Some(last_planned) = state.last_batch_id()? else {
        if let Some(v) = table {
            // A new state facing a table that holds this stream's batches: a state volume
            // that did not mount, or a mistyped state_dir, would ingest every file again.
            // Only a deliberate `landfall reset` starts over.
            if state.meta(RESET_META)?.is_none() {
                return Err(SeamError::of(
                    ErrorKind::StateLost,
                    format!(
                        "stream `{name}`: the state in {dir} is new (empty or missing), but the table {location} already holds batches up to {v} of this stream, so the stream stopped: starting over would ingest every file again. \
If the state directory did not mount or state_dir is wrong, fix that. If the state is really lost and ingesting the files again is acceptable (or include_existing_files = false), run `landfall reset {name}`; batch ids then continue after the table's.",
                        dir = spec.state_dir.display(),
                        location = committer.location(),
                    ),
                ));
            }
            state.ensure_batch_floor(v + 1)?;
            events.batch_floor_raised(v + 1);
        }
        return Ok(());
    };
    let location = committer.location();
    if let Some(t) = table
        && t > last_planned
    {
        return Err(SeamError::of(
            ErrorKind::TableAhead,
            format!(
                "stream `{name}`: the table {location} already holds batch {t} of this stream, but the state in {dir} knows batches up to {last_planned} only, so the state does not describe the table and the stream stopped. \
This happens when (1) the state directory was restored from an older backup, or lost its last writes (a truncated write-ahead log after a disk or file-system fault), (2) another landfall instance with its own state directory runs this stream against the same table, or (3) the stream name was reused for another source writing to the same table. \
To recover: (1) restore the newest state directory, or run `landfall reset {name}` to set this state aside and start over after the table's batches (files already in the table are ingested again unless include_existing_files = false); (2) stop the other instance; (3) give the stream another name (the name is the table's txn app id).",
                dir = spec.state_dir.display()
            ),
        ));
    }
    let open = state.open_batch()?.map(|p| p.batch_id);
    let last_recorded = if open == Some(last_planned) {
        last_planned.checked_sub(1)
    } else {
        Some(last_planned)
    };
    if let Some(c) = last_recorded
        && state.batch(c)?.is_some_and(|p| p.committed.is_some())
        && table.is_none_or(|t| t < c)
    {
        return Err(SeamError::of(
            ErrorKind::TableBehind,
            format!(
                "stream `{name}`: the state in {dir} recorded batch {c} as committed to {location}, but the table holds {} of this stream, so the stream stopped. \
The table was replaced or restored from an older copy, or the sink points at another table. \
To recover: point the sink at the right table, or run `landfall reset {name}` to set this state aside and start over.",
                table
                    .map(|t| format!("batches up to {t} only"))
                    .unwrap_or_else(|| "no batch".into()),
                dir = spec.state_dir.display()
            ),
        ));
    }
    events.table_checked(table, Some(last_planned));
    Ok(())
}
