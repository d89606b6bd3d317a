//! Where a batch of the stream stands in the table: the stream's txn version, the commit that
//! holds a batch (read from the log, [`crate::delta_log`]), whether a batch about to be
//! committed is already there, and whether a commit whose call failed landed after all.

use super::DeltaCommitter;
use crate::delta_log::BatchInLog;
use crate::error::SinkError;
use delta_kernel::SnapshotRef;
use landfall_core::seams::{ErrorKind, SeamResult};
use landfall_core::{Committed, SeamError};

impl DeltaCommitter {
    /// Before committing `batch_id`: the commit that already holds it, when the stream's txn
    /// has reached it (an earlier attempt whose outcome was not seen), so it is never committed
    /// twice; `None` to commit it. A txn that passed the batch without it is another writer's
    /// numbering: an error, never a batch taken for landed.
    pub(super) async fn already_landed(
        &self,
        table: &SnapshotRef,
        batch_id: u64,
    ) -> SeamResult<Option<Committed>> {
        let Some(v) = self.txn_version(table).await? else {
            return Ok(None);
        };
        if v < batch_id as i64 {
            return Ok(None);
        }
        match self.locate_batch(table, batch_id).await? {
            // Already landed (an earlier attempt whose outcome we did not see): report the
            // commit that holds it, never commit it twice.
            BatchInLog::Found(version) => Ok(Some(Committed {
                version,
                landed_before: true,
            })),
            // Its log entry is gone (cleaned after a checkpoint): unknown, as recovery
            // records it (-1), rather than the latest version, which would be some other
            // commit.
            BatchInLog::Unknown => {
                tracing::warn!(
                    table = %crate::shown(&self.uri),
                    batch_id,
                    "batch already in the table but its commit is no longer in the log"
                );
                Ok(Some(Committed {
                    version: -1,
                    landed_before: true,
                }))
            }
            // The stream's txn passed this batch without it: another writer numbers this
            // stream's batches on the same table. Recording the batch as landed would lose
            // its rows; committing it would write behind the other's txn.
            BatchInLog::Absent => Err(SeamError::of(
                ErrorKind::ForeignCommit,
                format!(
                    "stream `{stream}`: the table {uri} holds batches of this stream up to {v}, committed while this state planned batch {batch_id}, and none of them is batch {batch_id}: another landfall instance with its own state runs this stream against the same table (or this state was restored from an older backup). The stream stopped without committing batch {batch_id}; its files stay pending in this state. Stop the other instance, then restore the newest state directory or run `landfall reset {stream}`.",
                    stream = self.stream,
                    uri = crate::shown(&self.uri),
                ),
            )),
        }
    }

    /// After a failed commit call: the version of the log entry holding `batch_id`, when the
    /// stream's txn shows it landed after all and that entry is found. Otherwise `None` (the
    /// entry not found, a later batch's txn, the table unreadable now): the caller's error
    /// stands, and recovery at the restart decides, with its owner check.
    pub(super) async fn landed_unseen(&self, batch_id: u64) -> Option<i64> {
        let table = self.refreshed().await.ok()?.clone()?;
        let txn = self.txn_version(&table).await.ok()??;
        if txn < batch_id as i64 {
            return None;
        }
        self.find_batch(&table, batch_id).await.ok()?
    }

    /// The stream's txn version in `table`. Known without reading the log when `table` is the
    /// version our own last commit made (its txn is the batch it committed); otherwise the
    /// kernel replays the log newest first (after a checkpoint: the checkpoint too).
    pub(super) async fn txn_version(&self, table: &SnapshotRef) -> Result<Option<i64>, SinkError> {
        if let Some((version, txn)) = *self.own_txn.lock().expect("txn lock")
            && version == table.version()
        {
            return Ok(Some(txn));
        }
        self.kernel().await?.txn_version(table, &self.stream).await
    }

    /// The version of the commit holding `batch_id` in `table` (refreshed), if still in the log.
    pub(super) async fn find_batch(
        &self,
        table: &SnapshotRef,
        batch_id: u64,
    ) -> Result<Option<i64>, SinkError> {
        Ok(self.locate_batch(table, batch_id).await?.found())
    }

    /// What the log of `table` (refreshed) says of `batch_id`.
    pub(super) async fn locate_batch(
        &self,
        table: &SnapshotRef,
        batch_id: u64,
    ) -> Result<BatchInLog, SinkError> {
        // Cheap bound first: a batch above the stream's txn version was never committed.
        match self.txn_version(table).await? {
            Some(v) if v >= batch_id as i64 => {}
            _ => return Ok(BatchInLog::Absent),
        }
        let k = self.kernel().await?;
        crate::delta_log::find_batch_version(
            &self.uri,
            k.store.as_ref(),
            &k.path("_delta_log"),
            table.version() as i64,
            &self.stream,
            batch_id as i64,
        )
        .await
    }
}
