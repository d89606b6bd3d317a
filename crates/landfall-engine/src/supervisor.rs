//! One task per stream. A stream that fails with a transient error (network, store, a lock held
//! by a dying process) is restarted with exponential backoff (1 s doubling to 60 s); a batch
//! committed since the last failure resets the backoff and the failure count. A fatal error
//! (a file that may not be skipped, an incompatible table, a state that disagrees with the
//! table) stops the stream with its message: retrying cannot heal it, and the stream's status
//! (`landfall streams`) says what to do. A panicking worker is caught, reported with its
//! message and restarted like a failed one. No stream takes the others down.
//!
//! With `available_now`, a stream that fails `AVAILABLE_NOW_ATTEMPTS` times in a row gives up,
//! and one stopped by shutdown before it drained is reported as not drained, so
//! `landfall run --available-now` exits non-zero.

use crate::events::{StreamCounters, StreamEvents};
use crate::hub::Hub;
use crate::worker::{RunEnd, StreamWorker};
use landfall_config::{StreamSpec, Trigger, ValidatedConfig};
use landfall_core::{SeamError, StreamSummary};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Tries of one stream under `--available-now` before it is reported failed.
const AVAILABLE_NOW_ATTEMPTS: u32 = 3;

#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Override every stream's trigger with available_now.
    pub available_now: bool,
    /// Run only these streams (all when empty).
    pub only: Vec<String>,
    /// Run only the streams of this shard (all when `None`).
    pub shard: Option<crate::shard::Shard>,
}

/// How one stream ended.
#[derive(Debug, Clone)]
pub struct StreamOutcome {
    pub stream: String,
    pub error: Option<String>,
    pub summary: Option<StreamSummary>,
    pub table: String,
    pub table_version: Option<i64>,
    pub batches_this_run: u64,
    pub rows_this_run: u64,
    pub files_this_run: u64,
    pub bytes_this_run: u64,
    pub files_skipped_this_run: u64,
    pub rows_malformed_this_run: u64,
}

/// What one run of a worker ended with, and the stream's state after it.
struct RunResult {
    end: Result<RunEnd, SeamError>,
    summary: Option<StreamSummary>,
    table_version: Option<i64>,
}

/// Open the worker and run it in a task of its own, so a panic is caught and reported.
async fn run_once(
    spec: &StreamSpec,
    events: &Arc<StreamEvents>,
    available_now: bool,
    shutdown: &watch::Receiver<bool>,
) -> RunResult {
    let (spec, events2, sd) = (spec.clone(), events.clone(), shutdown.clone());
    let task = tokio::spawn(async move {
        let mut w = match StreamWorker::open(spec, events2, available_now) {
            Ok(w) => w,
            Err(e) => {
                return RunResult {
                    end: Err(e),
                    summary: None,
                    table_version: None,
                };
            }
        };
        let end = w.run(sd).await;
        if let Err(e) = &end {
            w.record_status(e);
        }
        let r = RunResult {
            end,
            summary: w.state().summary().ok(),
            table_version: w.committer().table_version().await.ok().flatten(),
        };
        w.events().worker_ended();
        r
    });
    match task.await {
        Ok(r) => r,
        Err(join) => {
            let message = match join.try_into_panic() {
                Ok(p) => p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".into()),
                Err(e) => e.to_string(),
            };
            events.panicked(&message);
            events.worker_ended();
            RunResult {
                end: Err(SeamError::retryable(format!(
                    "the stream worker panicked: {message}"
                ))),
                summary: None,
                table_version: None,
            }
        }
    }
}

async fn supervise(
    spec: StreamSpec,
    events: Arc<StreamEvents>,
    available_now: bool,
    shutdown: watch::Receiver<bool>,
) -> StreamOutcome {
    let mut backoff = BACKOFF_START;
    let mut failures = 0;
    let drain = available_now || spec.trigger == Trigger::AvailableNow;
    let table = spec.sink.location.as_table_uri();
    let mut error = None;
    let mut last: Option<(Option<StreamSummary>, Option<i64>)> = None;
    loop {
        let committed_before = StreamCounters::get(&events.counters.batches_committed);
        events.starting();
        let r = run_once(&spec, &events, available_now, &shutdown).await;
        if r.summary.is_some() || last.is_none() {
            last = Some((r.summary.clone(), r.table_version));
        }
        if StreamCounters::get(&events.counters.batches_committed) > committed_before {
            // Progress since the last failure: this failure starts a new count.
            failures = 0;
            backoff = BACKOFF_START;
        }
        match r.end {
            Ok(RunEnd::Drained) => break,
            Ok(RunEnd::Stopped) => {
                if drain {
                    let pending = r.summary.as_ref().map_or(0, |s| s.pending_files);
                    error = Some(format!(
                        "stopped by shutdown before it drained ({pending} file(s) still pending)"
                    ));
                }
                break;
            }
            Err(e) => {
                failures += 1;
                if *shutdown.borrow() {
                    error = Some(e.message);
                    break;
                }
                if !e.retryable {
                    events.stream_stopped(&e.message);
                    error = Some(e.message);
                    break;
                }
                if drain && failures >= AVAILABLE_NOW_ATTEMPTS {
                    tracing::error!(stream = %spec.name, error = %e.message, failures, "stream failed {failures} times in a row; giving up");
                    error = Some(e.message);
                    break;
                }
                events.restarting(&e.message, backoff);
                let mut sd = shutdown.clone();
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = sd.changed() => {}
                }
                if *shutdown.borrow() {
                    error = Some(e.message);
                    break;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
    if error.is_none() {
        events.terminated(!*shutdown.borrow());
    }
    let c = &events.counters;
    let get = StreamCounters::get;
    let (summary, table_version) = last.unwrap_or((None, None));
    StreamOutcome {
        stream: spec.name.clone(),
        error,
        summary,
        table,
        table_version,
        batches_this_run: get(&c.batches_committed),
        rows_this_run: get(&c.rows_committed),
        files_this_run: get(&c.files_committed),
        bytes_this_run: get(&c.bytes_committed),
        files_skipped_this_run: get(&c.files_skipped),
        rows_malformed_this_run: get(&c.rows_malformed),
    }
}

/// Run the configured streams until they drain (available_now) or `shutdown` turns true.
/// Each stream's events are registered in `hub` before any starts, so the HTTP surface sees
/// every stream from the beginning.
pub async fn run_streams(
    cfg: &ValidatedConfig,
    opts: RunOptions,
    shutdown: watch::Receiver<bool>,
    hub: Arc<Hub>,
) -> Vec<StreamOutcome> {
    let mut tasks = Vec::new();
    for spec in &cfg.streams {
        if !opts.only.is_empty() && !opts.only.contains(&spec.name) {
            continue;
        }
        if opts.shard.is_some_and(|s| !s.owns(&spec.name)) {
            continue;
        }
        let events = hub.register(&spec.name);
        tasks.push(tokio::spawn(supervise(
            spec.clone(),
            events,
            opts.available_now,
            shutdown.clone(),
        )));
    }
    let mut out = Vec::new();
    for t in tasks {
        match t.await {
            Ok(o) => out.push(o),
            Err(e) => out.push(StreamOutcome {
                stream: "<unknown>".into(),
                error: Some(format!("stream task panicked: {e}")),
                summary: None,
                table: String::new(),
                table_version: None,
                batches_this_run: 0,
                rows_this_run: 0,
                files_this_run: 0,
                bytes_this_run: 0,
                files_skipped_this_run: 0,
                rows_malformed_this_run: 0,
            }),
        }
    }
    out
}
