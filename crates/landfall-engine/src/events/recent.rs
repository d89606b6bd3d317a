//! What the status page and `landfall top` show beyond the last batch: the stream's timeline
//! (sampled by [`crate::Hub::sample`]) and the files this process skipped last.

use super::*;
use crate::timeline::{Levels, Timeline, TimelineView, Totals};
use serde::Serialize;

/// Skipped files remembered per stream (the ledger keeps every one: `files?state=skipped`).
pub const RECENT_SKIPS: usize = 50;

/// A file this process skipped, and why.
#[derive(Debug, Clone, Serialize)]
pub struct SkippedFile {
    pub path: String,
    pub batch_id: u64,
    /// The kind (`missing`, `corrupt`, `changed`, `too_large`, ...). Skips an operator makes
    /// (`landfall skip`, the admin API) are in the ledger, not here.
    pub kind: String,
    /// The kind with its detail, as the log line says it.
    pub reason: String,
    pub at: DateTime<Utc>,
}

/// The committed totals the timeline grows from.
pub(super) fn totals(c: &StreamCounters) -> Totals {
    Totals {
        rows: c.rows_committed.get(),
        files: c.files_committed.get(),
        bytes: c.bytes_committed.get(),
    }
}

impl StreamEvents {
    fn timeline_lock(&self) -> MutexGuard<'_, Timeline> {
        self.timeline.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn timeline_batch(&self, d: &PhaseDurations) {
        self.timeline_lock().batch(d);
    }

    /// A file skipped while reading a batch. An attempt run again skips it again: it is listed
    /// once, at its last skip.
    pub(super) fn remember_skip(&self, batch_id: u64, path: &str, reason: &SkipReason) {
        let mut s = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
        s.retain(|f| !(f.path == path && f.batch_id == batch_id));
        if s.len() == RECENT_SKIPS {
            s.pop_front();
        }
        s.push_back(SkippedFile {
            path: path.to_string(),
            batch_id,
            kind: reason.kind.as_str().to_string(),
            reason: reason.to_string(),
            at: Utc::now(),
        });
    }

    /// End the timeline's current step now (`step`: the sampling interval).
    pub fn sample(&self, step: Duration) {
        let l = self.label();
        let m = &self.metrics;
        let levels = Levels {
            files_outstanding: m.files_outstanding.get_or_create(&l).get().max(0) as u64,
            bytes_outstanding: m.bytes_outstanding.get_or_create(&l).get().max(0) as u64,
            queue_depth: *self.queue_depth.lock().unwrap_or_else(|e| e.into_inner()),
        };
        let totals = totals(&self.counters);
        self.timeline_lock().sample(totals, levels, step);
    }

    /// The stream's last hour (its newest `last` points at most), oldest point first.
    pub fn timeline(&self, last: Option<usize>) -> TimelineView {
        self.timeline_lock().view(last)
    }

    /// The files this process skipped last, newest first.
    pub fn recent_skips(&self) -> Vec<SkippedFile> {
        let s = self.skipped.lock().unwrap_or_else(|e| e.into_inner());
        s.iter().rev().cloned().collect()
    }
}
