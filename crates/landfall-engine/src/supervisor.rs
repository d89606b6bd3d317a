//! One task per stream. A stream that fails with a transient error (network, store, a lock held
//! by a dying process) is restarted with exponential backoff (1 s doubling to 60 s); a batch
//! committed or recovered since the last failure resets the backoff and the failure count. A
//! fatal error (a file that may not be skipped, an incompatible table, a state that disagrees
//! with the table) stops the stream with its message: retrying cannot heal it, and the stream's status
//! (`landfall streams`) says what to do. A panicking worker is caught, reported with its
//! message and restarted like a failed one. No stream takes the others down.
//!
//! With `available_now`, a stream that fails `AVAILABLE_NOW_ATTEMPTS` times in a row gives up,
//! and one stopped by shutdown before it drained is reported as not drained, so
//! `landfall run --available-now` exits non-zero.

use crate::events::{StreamCounters, StreamEvents};
use crate::hub::Hub;
use crate::stream::{RunEnd, StreamWorker};
use landfall_config::{StreamSpec, Trigger, ValidatedConfig};
use landfall_core::{SeamError, StreamSummary};
use std::collections::BTreeMap;
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
    locations: &Arc<crate::locations::Locations>,
    spec: &StreamSpec,
    events: &Arc<StreamEvents>,
    available_now: bool,
    shutdown: &watch::Receiver<bool>,
) -> RunResult {
    let (spec, events2, sd) = (spec.clone(), events.clone(), shutdown.clone());
    let locations = locations.clone();
    let task = tokio::spawn(async move {
        let mut w = match StreamWorker::open(spec, events2, available_now, &locations).await {
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
        w.save_request_counts(true);
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
    locations: Arc<crate::locations::Locations>,
    spec: StreamSpec,
    events: Arc<StreamEvents>,
    available_now: bool,
    shutdown: watch::Receiver<bool>,
) -> StreamOutcome {
    let mut retry = Retry::default();
    let drain = available_now || spec.trigger == Trigger::AvailableNow;
    let table = spec.sink.location.shown_table_uri();
    let mut error = None;
    let mut last: Option<(Option<StreamSummary>, Option<i64>)> = None;
    loop {
        // A batch committed, or one recovered (found in the table at start), is progress: a
        // run of failures each followed by progress is not a stream failing in a row.
        let landed = || {
            StreamCounters::get(&events.counters.batches_committed)
                + StreamCounters::get(&events.counters.batches_recovered)
        };
        let landed_before = landed();
        events.starting();
        let r = run_once(&locations, &spec, &events, available_now, &shutdown).await;
        if r.summary.is_some() || last.is_none() {
            last = Some((r.summary.clone(), r.table_version));
        }
        if landed() > landed_before {
            retry.progressed();
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
                if *shutdown.borrow() {
                    error = Some(e.message);
                    break;
                }
                if !e.retryable {
                    events.stream_stopped(&e.message);
                    error = Some(e.message);
                    break;
                }
                let Some(backoff) = retry.failed(drain) else {
                    let failures = retry.failures;
                    tracing::error!(stream = %spec.name, error = %e.message, failures, "stream failed {failures} times in a row; giving up");
                    error = Some(e.message);
                    break;
                };
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

/// The streams this process runs. Streams can be stopped, started and restarted one at a
/// time while the others go on (config reload): each has its own shutdown signal, which the
/// process-wide one also sets, and stops at a safe point (never inside a commit).
pub struct StreamSet {
    opts: RunOptions,
    hub: Arc<Hub>,
    shutdown: watch::Receiver<bool>,
    running: BTreeMap<String, Running>,
    /// The last outcome of each stream that ended (a restart replaces it).
    finished: BTreeMap<String, StreamOutcome>,
    /// Streams an operator stopped: kept stopped by reloads until restarted.
    paused: std::collections::BTreeSet<String>,
}

struct Running {
    /// The spec as it was started, to tell a changed stream from an unchanged one.
    fingerprint: String,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<StreamOutcome>,
}

/// What a reload did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub restarted: Vec<String>,
}

/// The spec as compared across reloads. `Debug` redacts store secrets, so their values are
/// folded in as a hash: a rotated credential restarts the stream.
fn fingerprint(spec: &StreamSpec) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    spec.source_options.0.hash(&mut h);
    spec.sink.options.0.hash(&mut h);
    format!("{spec:?}/{:x}", h.finish())
}

impl StreamSet {
    /// Start every stream of `cfg` that `opts` selects.
    pub fn start(
        cfg: &ValidatedConfig,
        opts: RunOptions,
        shutdown: watch::Receiver<bool>,
        hub: Arc<Hub>,
    ) -> Self {
        let mut set = StreamSet {
            opts,
            hub,
            shutdown,
            running: BTreeMap::new(),
            finished: BTreeMap::new(),
            paused: Default::default(),
        };
        for spec in set.selected(cfg) {
            set.spawn(spec.clone());
        }
        set
    }

    fn selected<'a>(&self, cfg: &'a ValidatedConfig) -> Vec<&'a StreamSpec> {
        cfg.streams
            .iter()
            .filter(|s| self.opts.only.is_empty() || self.opts.only.contains(&s.name))
            .filter(|s| self.opts.shard.is_none_or(|sh| sh.runs(s)))
            .collect()
    }

    fn spawn(&mut self, spec: StreamSpec) {
        if *self.shutdown.borrow() {
            return;
        }
        let events = self.hub.register(&spec.name);
        // A file-events stream reads its location's cache: its consumer runs in this process
        // (one per location, until the process stops).
        if let Some(l) = crate::locations::of_stream(&spec) {
            // Draining (receive only while a stream waits to catch up) when this process
            // ends once its streams drain: every stream of the location it runs drains.
            // Decided when the consumer starts, for the life of the process.
            let drain = self.opts.available_now
                || self.hub.config().is_some_and(|cfg| {
                    self.selected(&cfg)
                        .into_iter()
                        .filter(|s| {
                            crate::locations::of_stream(s).is_some_and(|o| o.name == l.name)
                        })
                        .all(|s| s.trigger == Trigger::AvailableNow)
                });
            self.hub.locations.ensure_consumer(
                l,
                self.shutdown.clone(),
                drain,
                self.hub.metrics.clone(),
            );
        }
        // The stream's own stop signal, also set by the process-wide shutdown.
        let (stop, rx) = watch::channel(*self.shutdown.borrow());
        let (mut global, forward) = (self.shutdown.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                if *global.borrow() {
                    let _ = forward.send(true);
                    break;
                }
                tokio::select! {
                    r = global.changed() => if r.is_err() { break },
                    _ = forward.closed() => break,
                }
            }
        });
        let name = spec.name.clone();
        let fingerprint = fingerprint(&spec);
        let task = tokio::spawn(supervise(
            self.hub.locations.clone(),
            spec,
            events,
            self.opts.available_now,
            rx,
        ));
        self.running.insert(
            name,
            Running {
                fingerprint,
                stop,
                task,
            },
        );
    }

    /// Stop one stream at its next safe point and wait for it.
    async fn stop(&mut self, name: &str) {
        if let Some(r) = self.running.remove(name) {
            let _ = r.stop.send(true);
            match r.task.await {
                Ok(o) => {
                    self.finished.insert(name.to_string(), o);
                }
                Err(e) => tracing::error!(stream = name, error = %e, "stream task failed"),
            }
        }
    }

    /// Apply a new configuration: removed streams stop, added ones start, changed ones
    /// restart; unchanged ones are not touched.
    pub async fn reload(&mut self, cfg: &ValidatedConfig) -> Reloaded {
        let wanted: BTreeMap<String, StreamSpec> = self
            .selected(cfg)
            .into_iter()
            .map(|s| (s.name.clone(), s.clone()))
            .collect();
        let mut done = Reloaded::default();
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            match wanted.get(&name) {
                None => {
                    self.stop(&name).await;
                    self.hub.unregister(&name);
                    self.finished.remove(&name);
                    done.removed.push(name);
                }
                Some(spec) if fingerprint(spec) != self.running[&name].fingerprint => {
                    self.stop(&name).await;
                    done.restarted.push(name);
                }
                Some(_) => {}
            }
        }
        // Paused streams removed from the configuration are forgotten; kept ones stay paused.
        let gone: Vec<String> = self
            .paused
            .iter()
            .filter(|n| !wanted.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.paused.remove(&name);
            self.hub.unregister(&name);
            self.finished.remove(&name);
            done.removed.push(name);
        }
        for (name, spec) in wanted {
            if !self.running.contains_key(&name) && !self.paused.contains(&name) {
                if !done.restarted.contains(&name) {
                    done.added.push(name.clone());
                }
                self.spawn(spec);
            }
        }
        done
    }

    /// Stop one stream at its next safe point (it stays registered); whether it was running.
    /// `pause`: an operator's stop, which reloads respect until `start_stream`.
    pub async fn stop_stream(&mut self, name: &str, pause: bool) -> bool {
        let was = self.running.contains_key(name);
        self.stop(name).await;
        if pause {
            self.paused.insert(name.to_string());
        }
        was
    }

    /// Whether `name` runs (its worker has not ended).
    pub fn is_running(&self, name: &str) -> bool {
        self.running
            .get(name)
            .is_some_and(|r| !r.task.is_finished())
    }

    /// Whether an operator paused `name`.
    pub fn is_paused(&self, name: &str) -> bool {
        self.paused.contains(name)
    }

    /// Start (or restart, once stopped or paused) one stream of `cfg`.
    pub fn start_stream(&mut self, spec: &StreamSpec) {
        self.paused.remove(&spec.name);
        if !self.running.contains_key(&spec.name) {
            self.spawn(spec.clone());
        }
    }

    /// Whether the streams have all ended on their own (drained, or stopped by errors): some
    /// ran, none runs, none is paused. A set emptied by reloads is not finished: the process
    /// stays up for the next configuration.
    pub fn all_finished(&self) -> bool {
        !self.running.is_empty()
            && self.paused.is_empty()
            && self.running.values().all(|r| r.task.is_finished())
    }

    /// Wait for every stream to end; the outcomes of all streams this set ran.
    pub async fn finish(mut self) -> Vec<StreamOutcome> {
        let running = std::mem::take(&mut self.running);
        for (name, r) in running {
            match r.task.await {
                Ok(o) => {
                    self.finished.insert(name, o);
                }
                Err(e) => {
                    self.finished.insert(
                        name.clone(),
                        StreamOutcome {
                            stream: name,
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
                        },
                    );
                }
            }
        }
        self.finished.into_values().collect()
    }
}

/// Run the configured streams until they drain (available_now) or `shutdown` turns true.
/// Each stream's events are registered in `hub` before it starts, so the HTTP surface sees
/// every stream from the beginning.
pub async fn run_streams(
    cfg: &ValidatedConfig,
    opts: RunOptions,
    shutdown: watch::Receiver<bool>,
    hub: Arc<Hub>,
) -> Vec<StreamOutcome> {
    StreamSet::start(cfg, opts, shutdown, hub).finish().await
}

/// The restart policy of a failing worker: waits that double from `BACKOFF_START` up to
/// `BACKOFF_MAX`, back to the start once a batch commits; with `available_now`, giving up after
/// `AVAILABLE_NOW_ATTEMPTS` failures in a row (not in total).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Retry {
    /// Failures since the last progress.
    failures: u32,
    /// The next wait.
    backoff: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            failures: 0,
            backoff: BACKOFF_START,
        }
    }
}

impl Retry {
    /// A batch committed since the last failure: the next failure starts a new count.
    fn progressed(&mut self) {
        *self = Retry::default();
    }

    /// A retryable failure: how long to wait before the restart, or `None` to give up.
    fn failed(&mut self, drain: bool) -> Option<Duration> {
        self.failures += 1;
        if drain && self.failures >= AVAILABLE_NOW_ATTEMPTS {
            return None;
        }
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        Some(wait)
    }
}

#[cfg(test)]
mod retry_tests {
    use super::*;

    #[test]
    fn backoff_doubles_resets_on_progress_and_drains_give_up_after_consecutive_failures() {
        let mut r = Retry::default();
        assert_eq!(r.failed(false), Some(BACKOFF_START));
        assert_eq!(r.failed(false), Some(BACKOFF_START * 2));
        for _ in 0..64 {
            r.failed(false);
        }
        assert_eq!(r.failed(false), Some(BACKOFF_MAX), "capped");
        r.progressed();
        assert_eq!(r.failed(false), Some(BACKOFF_START), "reset by progress");

        // available_now: N failures in a row give up; progress in between resets the count.
        let mut d = Retry::default();
        for _ in 1..AVAILABLE_NOW_ATTEMPTS {
            assert!(d.failed(true).is_some());
        }
        d.progressed();
        for _ in 1..AVAILABLE_NOW_ATTEMPTS {
            assert!(
                d.failed(true).is_some(),
                "the count restarted after progress"
            );
        }
        assert_eq!(d.failed(true), None, "N in a row");
    }
}
