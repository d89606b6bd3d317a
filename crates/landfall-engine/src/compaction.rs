//! Compaction while a stream runs (`[streams.<name>.sink.compaction] auto = true`, Databricks'
//! auto compaction): every `check_interval` the table's small files are counted, and when they
//! are at least `min_files` they are compacted (the sink's OPTIMIZE, docs/delta-tables.md).
//!
//! It runs on its own task beside the stream's loop, started with the archiver once the table
//! and the ledger were checked, so a batch never waits for it: the two commit independently,
//! and the one that loses the race for a version refreshes and tries again (a compaction
//! replaces files, appends only add them, so neither undoes the other). A compaction whose
//! files were removed meanwhile is dropped and tried at the next check; a failure is logged
//! and counted, never fatal. A stop waits for a compaction in progress (at most 30 s; cut
//! there, its uncommitted files are left for `landfall vacuum`).

use crate::events::StreamEvents;
use landfall_config::AutoCompaction;
use landfall_core::Committer;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

pub struct Compactor {
    committer: Arc<dyn Committer>,
    settings: AutoCompaction,
    events: Arc<StreamEvents>,
}

impl Compactor {
    pub fn new(
        committer: Arc<dyn Committer>,
        settings: AutoCompaction,
        events: Arc<StreamEvents>,
    ) -> Self {
        Compactor {
            committer,
            settings,
            events,
        }
    }

    /// Checks until `shutdown` turns true (looked at between checks only).
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.settings.check_interval) => {}
                r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
            }
            if *shutdown.borrow() {
                return;
            }
            let started = Instant::now();
            match self.committer.compact(self.settings.min_files).await {
                Ok(Some(c)) => self.events.compaction(&c, started.elapsed()),
                // The sink does not compact.
                Ok(None) => return,
                Err(e) => self.events.compaction_failed(&e.message),
            }
        }
    }
}
