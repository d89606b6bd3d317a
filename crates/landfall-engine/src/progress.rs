//! What a stream reports: its run state (for `/readyz` and the API) and, after every batch, a
//! progress record shaped like Spark's `StreamingQueryProgress` (id, run id, batch id, input
//! and processing rates, durations per phase, source and sink), logged as JSON and kept in a
//! bounded history served by `/api/v1/streams/{name}/progress`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::VecDeque;

/// Progress records kept per stream.
pub const HISTORY: usize = 100;
/// Listings in a row that found the backlog larger than the one before, before a stream is
/// reported falling behind (a listing runs at most once per `poll_interval`).
pub const FALLING_BEHIND_AFTER: u32 = 5;

/// Where a stream's worker is.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunState {
    /// Opening its state, source and table.
    Starting,
    /// Discovering and committing.
    Running,
    /// Failed; restarts after the backoff.
    Restarting { error: String, retry_in_ms: u64 },
    /// Stopped by an error retrying cannot heal; needs an operator.
    Stopped { error: String },
    /// `available_now`: everything present at start is committed.
    Drained,
    /// Ended by shutdown.
    Shutdown,
    /// Stopped by an operator (admin API); restarts on request.
    Paused,
}

impl RunState {
    /// Whether `/readyz` counts the stream as ready.
    pub fn ready(&self) -> bool {
        matches!(
            self,
            RunState::Running | RunState::Drained | RunState::Paused
        )
    }
}

/// Milliseconds per batch phase. Read and write overlap (files are decoded ahead of the
/// writer): `read` is the time the writer waited for decoded rows, `write` the time it spent
/// encoding and uploading.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PhaseDurations {
    pub discover: u64,
    pub plan: u64,
    pub read: u64,
    pub write: u64,
    pub commit: u64,
    pub total: u64,
}

impl PhaseDurations {
    pub fn phases(&self) -> [(&'static str, u64); 5] {
        [
            ("discover", self.discover),
            ("plan", self.plan),
            ("read", self.read),
            ("write", self.write),
            ("commit", self.commit),
        ]
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceProgress {
    pub description: String,
    /// The discovery sequence numbers of the batch's first and last file.
    pub start_offset: Option<u64>,
    pub end_offset: Option<u64>,
    pub files_outstanding: u64,
    pub bytes_outstanding: u64,
    /// Messages waiting in the notification queue (queue modes only).
    pub approximate_queue_size: Option<u64>,
    /// Bytes that arrived per second since the previous batch (none for a run's first).
    pub input_bytes_per_second: Option<f64>,
    /// Bytes committed per second over the same interval.
    pub processed_bytes_per_second: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SinkProgress {
    pub description: String,
    pub table_version: i64,
    pub num_output_rows: u64,
}

/// One batch's progress record.
#[derive(Debug, Clone, Serialize)]
pub struct BatchProgress {
    /// The stream's stable id (its name).
    pub id: String,
    /// This process's run of the stream.
    pub run_id: String,
    pub name: String,
    pub batch_id: u64,
    pub timestamp: DateTime<Utc>,
    pub num_input_rows: u64,
    pub num_input_files: u64,
    /// Rows of this batch over the time since the previous batch ended (arrival rate).
    pub input_rows_per_second: f64,
    /// Rows of this batch over its own duration (processing rate).
    pub processed_rows_per_second: f64,
    pub duration_ms: PhaseDurations,
    pub source: SourceProgress,
    pub sink: SinkProgress,
}

/// What [`StreamView::batched`] found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchRates {
    /// `None` for the first batch of a run (nothing to compare with).
    pub input_bytes_per_second: Option<f64>,
    pub processed_bytes_per_second: f64,
    pub behind: bool,
    pub changed: bool,
}

/// What the API shows of a stream, kept by its events.
#[derive(Debug, Clone, Serialize)]
pub struct StreamView {
    pub name: String,
    #[serde(flatten)]
    pub state: RunState,
    pub since: DateTime<Utc>,
    pub restarts: u64,
    pub falling_behind: bool,
    /// This run of the worker (a new one after each restart), as Spark's `runId`.
    pub run_id: String,
    #[serde(skip)]
    pub history: VecDeque<BatchProgress>,
    /// Listings in a row that found a larger backlog.
    #[serde(skip)]
    pub behind_for: u32,
    /// The backlog the last listing left.
    #[serde(skip)]
    pub listed_backlog: Option<u64>,
    /// Batches in a row during which bytes arrived faster than the stream committed them.
    #[serde(skip)]
    pub slower_for: u32,
    /// The backlog (bytes) the last batch left.
    #[serde(skip)]
    pub batch_backlog: Option<u64>,
}

impl StreamView {
    pub fn new(name: &str) -> Self {
        StreamView {
            name: name.to_string(),
            state: RunState::Starting,
            since: Utc::now(),
            restarts: 0,
            falling_behind: false,
            run_id: String::new(),
            history: VecDeque::new(),
            behind_for: 0,
            listed_backlog: None,
            slower_for: 0,
            batch_backlog: None,
        }
    }

    pub fn set(&mut self, state: RunState) {
        if self.state != state {
            self.state = state;
            self.since = Utc::now();
        }
    }

    /// Add a progress record (the oldest goes beyond `HISTORY`).
    pub fn push(&mut self, p: BatchProgress) {
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(p);
    }

    /// A listing left `backlog` files outstanding. Returns whether the stream now counts as
    /// falling behind (the backlog grew at `FALLING_BEHIND_AFTER` listings in a row), and
    /// whether that changed. A backlog that holds steady keeps the count; one that shrinks or
    /// empties resets it.
    pub fn listed(&mut self, backlog: u64) -> (bool, bool) {
        match self.listed_backlog {
            Some(prev) if backlog > prev => self.behind_for += 1,
            Some(prev) if backlog < prev || backlog == 0 => self.behind_for = 0,
            _ => {}
        }
        self.listed_backlog = Some(backlog);
        self.set_behind(
            self.behind_for >= FALLING_BEHIND_AFTER || self.slower_for >= FALLING_BEHIND_AFTER,
        )
    }

    /// A batch committed `processed` bytes and left `backlog` bytes outstanding. Over the time
    /// since the previous batch, bytes arrived at `(backlog + processed - previous backlog) /
    /// interval` and were processed at `processed / interval` (Spark's input and processed
    /// rates, in bytes: rows are only known once read). Returns the two rates (bytes/s), whether
    /// the stream now counts as falling behind (processing below arrival for
    /// `FALLING_BEHIND_AFTER` batches in a row, or the listing rule), and whether that changed.
    pub fn batched(&mut self, backlog: u64, processed: u64, interval_s: f64) -> BatchRates {
        let arrived = self
            .batch_backlog
            .map(|prev| (backlog + processed).saturating_sub(prev));
        self.batch_backlog = Some(backlog);
        let interval = interval_s.max(1e-3);
        match arrived {
            Some(a) if a > processed => self.slower_for += 1,
            Some(_) => self.slower_for = 0,
            None => {}
        }
        let behind =
            self.slower_for >= FALLING_BEHIND_AFTER || self.behind_for >= FALLING_BEHIND_AFTER;
        let (behind, changed) = self.set_behind(behind);
        BatchRates {
            input_bytes_per_second: arrived.map(|a| a as f64 / interval),
            processed_bytes_per_second: processed as f64 / interval,
            behind,
            changed,
        }
    }

    /// Set the falling-behind flag; returns it and whether it changed.
    pub fn set_behind(&mut self, behind: bool) -> (bool, bool) {
        let changed = behind != self.falling_behind;
        self.falling_behind = behind;
        if !behind {
            self.behind_for = self.behind_for.min(FALLING_BEHIND_AFTER - 1);
            self.slower_for = self.slower_for.min(FALLING_BEHIND_AFTER - 1);
        }
        (behind, changed)
    }

    pub fn last(&self) -> Option<&BatchProgress> {
        self.history.back()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn falling_behind_when_bytes_arrive_faster_than_batches_commit_them() {
        let mut v = StreamView::new("s");
        // First batch: nothing to compare with.
        let r = v.batched(1000, 100, 1.0);
        assert_eq!(r.input_bytes_per_second, None);
        assert!(!r.behind);
        // 300 bytes arrive per batch, 100 are committed: behind after 5 such batches.
        let mut backlog = 1000;
        for i in 1..=FALLING_BEHIND_AFTER {
            backlog += 200;
            let r = v.batched(backlog, 100, 2.0);
            assert_eq!(r.input_bytes_per_second, Some(150.0));
            assert_eq!(r.processed_bytes_per_second, 50.0);
            assert_eq!(r.behind, i == FALLING_BEHIND_AFTER, "batch {i}");
            assert_eq!(r.changed, i == FALLING_BEHIND_AFTER, "batch {i}");
        }
        // Catching up (more committed than arrived) clears it.
        let r = v.batched(backlog - 50, 100, 1.0);
        assert!(!r.behind && r.changed);
        assert_eq!(r.input_bytes_per_second, Some(50.0));
    }
}
