//! What the HTTP surface reads: the process's metrics and each running stream's events (run
//! state, progress history, open state store).

use crate::events::StreamEvents;
use crate::metrics::Metrics;
use landfall_config::ValidatedConfig;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// An operator's action on one stream, sent by the API to the process that runs the streams;
/// the reply is a message for the caller, or why the action was refused.
#[derive(Debug)]
pub enum AdminAction {
    /// Stop the stream at its next safe point; it stays stopped until restarted.
    Stop,
    /// Stop (if running) and start again with the configuration in force.
    Restart,
    /// List the source now (in listing mode every listing is full; the notification modes
    /// will run their background listing).
    Backfill,
    /// Stop, mark one file skipped with a reason, start again.
    Skip {
        path: String,
        reason: Option<String>,
    },
}

#[derive(Debug)]
pub struct AdminRequest {
    pub stream: String,
    pub action: AdminAction,
    pub reply: tokio::sync::oneshot::Sender<Result<String, String>>,
}

#[derive(Debug, Default)]
pub struct Hub {
    pub metrics: Arc<Metrics>,
    /// The process's file-events locations (their caches and consumers).
    pub locations: Arc<crate::locations::Locations>,
    streams: RwLock<BTreeMap<String, Arc<StreamEvents>>>,
    shutting_down: AtomicBool,
    config: RwLock<Option<Arc<ValidatedConfig>>>,
    admin: RwLock<Option<tokio::sync::mpsc::Sender<AdminRequest>>>,
}

impl Hub {
    pub fn new() -> Arc<Self> {
        Arc::new(Hub::default())
    }

    /// The events of `stream`, created on first use with the hub's metrics.
    pub fn register(&self, stream: &str) -> Arc<StreamEvents> {
        let mut streams = self.streams.write().unwrap_or_else(|e| e.into_inner());
        streams
            .entry(stream.to_string())
            .or_insert_with(|| Arc::new(StreamEvents::new(stream, self.metrics.clone())))
            .clone()
    }

    /// Where admin actions go (set by the process that runs the streams).
    pub fn set_admin(&self, tx: tokio::sync::mpsc::Sender<AdminRequest>) {
        *self.admin.write().unwrap_or_else(|e| e.into_inner()) = Some(tx);
    }

    /// Ask for `action` on `stream` and wait for the outcome.
    pub async fn admin(&self, stream: &str, action: AdminAction) -> Result<String, String> {
        let tx = self
            .admin
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or("this process takes no admin actions (a drain, or shutting down)")?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        tx.send(AdminRequest {
            stream: stream.to_string(),
            action,
            reply,
        })
        .await
        .map_err(|_| "the process is shutting down".to_string())?;
        answer
            .await
            .map_err(|_| "the process is shutting down".to_string())?
    }

    /// Forget a stream removed from the configuration.
    pub fn unregister(&self, stream: &str) {
        self.streams
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(stream);
    }

    /// The configuration in force (replaced by a reload).
    pub fn config(&self) -> Option<Arc<ValidatedConfig>> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_config(&self, cfg: Arc<ValidatedConfig>) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Some(cfg);
    }

    pub fn stream(&self, name: &str) -> Option<Arc<StreamEvents>> {
        self.streams
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Shutdown was requested: the process is finishing its batches and takes no new work.
    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    pub fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }

    /// One line about every stream, for the service manager's status (`systemctl status`):
    /// how many streams are in each state, the files committed by this process and the
    /// backlog, e.g. `3 streams: 2 running, 1 restarting; 120 files committed; 4 pending`.
    pub fn status_line(&self) -> String {
        use crate::progress::RunState;
        let streams = self.streams();
        let mut states: BTreeMap<&'static str, usize> = BTreeMap::new();
        let (mut committed, mut pending) = (0u64, 0u64);
        for s in &streams {
            let state = match s.snapshot().state {
                RunState::Starting => "starting",
                RunState::Running => "running",
                RunState::Restarting { .. } => "restarting",
                RunState::Stopped { .. } => "stopped",
                RunState::Drained => "drained",
                RunState::Shutdown => "shut down",
                RunState::Paused => "paused",
            };
            *states.entry(state).or_default() += 1;
            committed += s.counters.files_committed.get();
            pending += s.files_outstanding();
        }
        let counts: Vec<String> = states.iter().map(|(s, n)| format!("{n} {s}")).collect();
        format!(
            "{} stream{}{}{}; {committed} file{} committed; {pending} pending",
            streams.len(),
            if streams.len() == 1 { "" } else { "s" },
            if counts.is_empty() { "" } else { ": " },
            counts.join(", "),
            if committed == 1 { "" } else { "s" },
        )
    }

    /// Every registered stream, by name.
    pub fn streams(&self) -> Vec<Arc<StreamEvents>> {
        self.streams
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// End every stream's timeline step now.
    pub fn sample(&self, step: std::time::Duration) {
        for s in self.streams() {
            s.sample(step);
        }
    }

    /// Sample every stream's timeline each `step` until `stop` turns true (the charts of the
    /// status page and `landfall top`).
    pub async fn sample_every(
        self: Arc<Self>,
        step: std::time::Duration,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + step, step);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.sample(step),
                r = stop.changed() => if r.is_err() || *stop.borrow() { return },
            }
        }
    }
}
