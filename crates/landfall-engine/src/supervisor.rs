//! One task per stream. A failed stream is restarted with exponential backoff (1 s doubling to
//! 60 s) and never takes the others down. With `available_now`, a stream that fails with a
//! non-retryable error, or fails `AVAILABLE_NOW_ATTEMPTS` times in a row, gives up and is
//! reported as failed, so `landfall run --available-now` can exit non-zero.

use crate::events::StreamEvents;
use crate::worker::{RunEnd, StreamWorker};
use landfall_config::{StreamSpec, Trigger, ValidatedConfig};
use landfall_core::StreamSummary;
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
}

async fn supervise(
    spec: StreamSpec,
    available_now: bool,
    shutdown: watch::Receiver<bool>,
) -> StreamOutcome {
    let events = Arc::new(StreamEvents::new(&spec.name));
    let mut backoff = BACKOFF_START;
    let mut failures = 0;
    let drain = available_now || spec.trigger == Trigger::AvailableNow;
    let table = spec.sink.location.as_table_uri();
    let mut error = None;
    let mut last: Option<(Option<StreamSummary>, Option<i64>)> = None;
    loop {
        let result = match StreamWorker::open(spec.clone(), events.clone(), available_now) {
            Ok(mut w) => {
                let r = w.run(shutdown.clone()).await;
                let summary = w.state().summary().ok();
                let version = w.committer().table_version().await.ok().flatten();
                last = Some((summary, version));
                r
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(RunEnd::Drained) | Ok(RunEnd::Stopped) => break,
            Err(e) => {
                failures += 1;
                if *shutdown.borrow() {
                    error = Some(e.message);
                    break;
                }
                if drain && (!e.retryable || failures >= AVAILABLE_NOW_ATTEMPTS) {
                    tracing::error!(stream = %spec.name, error = %e.message, failures, "stream failed; giving up");
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
    let c = &events.counters;
    let get = crate::events::StreamCounters::get;
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
    }
}

/// Run the configured streams until they drain (available_now) or `shutdown` turns true.
pub async fn run_streams(
    cfg: &ValidatedConfig,
    opts: RunOptions,
    shutdown: watch::Receiver<bool>,
) -> Vec<StreamOutcome> {
    let mut tasks = Vec::new();
    for spec in &cfg.streams {
        if !opts.only.is_empty() && !opts.only.contains(&spec.name) {
            continue;
        }
        tasks.push(tokio::spawn(supervise(
            spec.clone(),
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
            }),
        }
    }
    out
}
