//! Whose commit a batch is: every state directory has an identity, stamped on each commit it
//! makes, and a batch the table holds is recorded only when its commit is this state's own.

use landfall_core::seams::{ErrorKind, SeamResult};
use landfall_core::{Committer, SeamError, StateStore};

/// The ledger meta key of the state's identity, stamped on its commits.
pub const STATE_ID_META: &str = "state_id";

/// This state's identity: made once, at the first start of a state directory (a restored copy
/// keeps it; `landfall reset` starts a new directory, so a new one).
pub fn state_id(state: &dyn StateStore) -> SeamResult<String> {
    if let Some(id) = state.meta(STATE_ID_META)? {
        return Ok(id);
    }
    let id = uuid::Uuid::new_v4().simple().to_string();
    state.set_meta(STATE_ID_META, &id)?;
    Ok(id)
}

/// Batch `batch_id`, which the table holds, must have been committed by this state: the
/// commit's stamp names `me`, or, for a commit without a stamp (landfall before stamps), its
/// data files are ones this state's attempts staged (`staged`). A process never records
/// another's commit as its own. When the table can no longer tell (the commit's log entry is
/// gone), or an unstamped commit added no file, it is taken as is.
///
/// On refusal, this state's staged files the table does not reference are removed (they would
/// otherwise stay behind: after `landfall reset` nothing knows them).
pub async fn check_owned(
    name: &str,
    committer: &dyn Committer,
    batch_id: u64,
    staged: &[String],
    me: &str,
) -> SeamResult<()> {
    let Some(commit) = committer.batch_commit(batch_id).await? else {
        return Ok(());
    };
    let why = match &commit.owner {
        Some(owner) if owner == me => return Ok(()),
        Some(owner) => format!("committed by another state ({owner}; this one is {me})"),
        None => {
            let mine: std::collections::HashSet<&String> = staged.iter().collect();
            let foreign: Vec<&String> = commit.files.iter().filter(|f| !mine.contains(f)).collect();
            let Some(first) = foreign.first() else {
                return Ok(());
            };
            format!(
                "committed with data files this state did not write ({first}, {} of {})",
                foreign.len(),
                commit.files.len()
            )
        }
    };
    if let Err(e) = committer.remove_files(staged).await {
        tracing::warn!(stream = %name, batch_id, error = %e.message, "could not remove this state's staged files of the batch");
    }
    Err(SeamError::of(
        ErrorKind::ForeignCommit,
        format!(
            "stream `{name}`: the table {location} holds batch {batch_id} of this stream, but {why}, so the stream stopped without recording it. \
Another landfall instance runs this stream against the same table with its own state, or this state was restored from a backup taken before that commit. \
This state cannot go on: stop the other instance if there is one, then restore the newest state directory, or run `landfall reset {name}` to set this state aside (this state's unreferenced data files of the batch were removed).",
            location = committer.location(),
        ),
    ))
}
