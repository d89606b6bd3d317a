//! Vacuum while a stream runs (`[streams.<name>.sink.vacuum] auto = true`): every `interval`
//! (1 day by default) the table's files that no retained version references and older than
//! `delta.deletedFileRetentionDuration` are deleted (the sink's VACUUM, docs/delta-tables.md).
//! On its own task beside the stream's loop: a batch never waits for it, and a batch's new
//! files are younger than the retention, so it never deletes them. A failure is logged and
//! counted, never fatal. The first vacuum runs one interval after the start.

use crate::events::StreamEvents;
use landfall_config::StreamSpec;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

pub struct Vacuumer {
    uri: String,
    options: std::collections::HashMap<String, String>,
    every: Duration,
    events: Arc<StreamEvents>,
}

impl Vacuumer {
    pub fn new(spec: &StreamSpec, every: Duration, events: Arc<StreamEvents>) -> Self {
        Vacuumer {
            uri: spec.sink.location.as_table_uri(),
            options: spec.sink.options.to_hash_map(),
            every,
            events,
        }
    }

    /// Vacuums until `shutdown` turns true (looked at between vacuums only).
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.every) => {}
                r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
            }
            if *shutdown.borrow() {
                return;
            }
            let started = Instant::now();
            match landfall_sink::delta::vacuum::vacuum(
                &self.uri,
                &self.options,
                false,
                chrono::Utc::now(),
            )
            .await
            {
                Ok(r) => self.events.vacuumed(
                    r.deleted.len() as u64,
                    r.deleted.iter().map(|(_, n)| n).sum(),
                    started.elapsed(),
                ),
                Err(e) => self.events.vacuum_failed(&e.to_string()),
            }
        }
    }
}
