//! `landfall run`: the runtime, the streams, the HTTP endpoints, signals and the service
//! manager; and `landfall health`, the probe of a running daemon.
//!
//! Under systemd (`Type=notify`) the daemon reports READY=1 once its endpoints listen and its
//! streams are started, WATCHDOG=1 at half the unit's `WatchdogSec` while the runtime is
//! responsive, and STOPPING=1 when a shutdown signal arrives (the batches in flight finish
//! first). Outside systemd these are no-ops.

use landfall_config::ValidatedConfig;
use landfall_engine::{AdminAction, Hub, RunOptions, StreamSet, run_streams};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Run the streams of `cfg` (read from `path`, which SIGHUP reads again).
/// The shortest admin token accepted.
const MIN_TOKEN: usize = 16;

pub fn run(
    cfg: ValidatedConfig,
    path: PathBuf,
    bars: Option<crate::bars::Bars>,
    opts: RunOptions,
) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let (tx, rx) = tokio::sync::watch::channel(false);
        // The endpoints outlive the streams: the last batches stay observable while they
        // finish, and /readyz says the process is shutting down.
        let (server_tx, server_rx) = tokio::sync::watch::channel(false);
        let hub = Hub::new();
        hub.set_config(Arc::new(cfg.clone()));
        if let Some(shard) = opts.shard {
            let mine: Vec<&str> = cfg
                .streams
                .iter()
                .filter(|s| shard.runs(s))
                .map(|s| s.name.as_str())
                .collect();
            tracing::info!(%shard, streams = ?mine, "running one shard of the streams");
        }
        let cfg = Arc::new(cfg);
        // Continuous runs serve the endpoints; a drain (--available-now) is a batch job.
        let server = if opts.available_now {
            None
        } else {
            match landfall_server::bind(&cfg.server.listen).await {
                Ok(l) => Some(l),
                Err(e) => {
                    tracing::error!("{e}");
                    return ExitCode::FAILURE;
                }
            }
        };
        let server = server.map(|listener| {
            let admin_token = std::env::var("LANDFALL_ADMIN_TOKEN")
                .ok()
                .filter(|t| !t.is_empty())
                .or_else(|| cfg.server.admin_token.as_ref().map(|t| t.0.clone()))
                .filter(|t| {
                    // An empty or guessable token would open the admin actions to anyone.
                    let long = t.len() >= MIN_TOKEN;
                    if !long {
                        tracing::error!("the admin token is shorter than {MIN_TOKEN} characters; admin actions stay disabled");
                    }
                    long
                });
            let state = landfall_server::AppState::new(hub.clone(), admin_token);
            tokio::spawn(landfall_server::serve(listener, state, server_rx))
        });
        let signal_hub = hub.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            notify(&[
                sd_notify::NotifyState::Stopping,
                sd_notify::NotifyState::Status("stopping: finishing the batches in flight"),
            ]);
            signal_hub.set_shutting_down();
            tracing::info!("shutdown requested; finishing the batches in flight (a second signal exits at once)");
            let _ = tx.send(true);
            wait_for_signal().await;
            // Safe at any instant: a batch cut short is recovered at the next start.
            tracing::warn!("second shutdown signal: exiting without waiting for the batches in flight");
            std::process::exit(130);
        });
        let continuous = !opts.available_now;
        let here = cfg
            .streams
            .iter()
            .filter(|s| {
                (opts.only.is_empty() || opts.only.contains(&s.name))
                    && opts.shard.is_none_or(|sh| sh.runs(s))
            })
            .count();
        let none_here = here == 0;
        // Progress records to the health table, with a last append once the streams ended.
        let health = cfg.health_table.clone().map(|table| {
            // One txn app id per process run: two processes sharing the table never take each
            // other's appends for their own.
            let app_id = format!(
                "landfall-health.{}.{}",
                hostname().unwrap_or_default(),
                uuid::Uuid::new_v4()
            );
            tokio::spawn(landfall_engine::health::run(
                table,
                app_id,
                hub.clone(),
                server_tx.subscribe(),
            ))
        });
        let (reload_tx, reload_rx) = tokio::sync::mpsc::channel(4);
        if continuous {
            // The charts' points (status page, `landfall top`), until the endpoints close.
            tokio::spawn(hub.clone().sample_every(cfg.chart_step, server_tx.subscribe()));
            tokio::spawn(watch_reloads(path, reload_tx));
        }
        let streams = tokio::spawn({
            let (cfg, hub, rx) = (cfg.clone(), hub.clone(), rx.clone());
            async move {
                if !continuous {
                    return run_streams(&cfg, opts, rx, hub).await;
                }
                if none_here {
                    // A shard that owns no stream stays up (serving its endpoints, taking
                    // reloads) rather than exiting and being restarted in a loop.
                    tracing::warn!("no stream to run in this process (shard or --stream filter); idle until shutdown or reload");
                }
                supervise_reloads(&cfg, opts, rx, hub, reload_rx).await
            }
        });
        let drawing = bars.as_ref().map(|b| b.follow(hub.clone()));
        // READY once every stream of this process has its worker (they register as they
        // start), so the status line counts them; bounded, a slow start does not hold it.
        let registering = std::time::Instant::now();
        while hub.streams().len() < here
            && !hub.shutting_down()
            && registering.elapsed() < Duration::from_secs(5)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&hub.status_line()),
        ]);
        spawn_watchdog();
        spawn_status(hub.clone());
        let outcomes = match streams.await {
            Ok(o) => o,
            Err(e) => {
                eprintln!("error: the streams' task failed: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(d) = drawing {
            // One last redraw shows the final counts before the bars stop.
            tokio::time::sleep(Duration::from_millis(250)).await;
            d.abort();
        }
        if let Some(b) = &bars {
            b.finish();
        }
        let _ = server_tx.send(true);
        if let Some(server) = server {
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
        if let Some(health) = health {
            let _ = tokio::time::timeout(Duration::from_secs(60), health).await;
        }
        crate::report::print_run_summary(&outcomes);
        if outcomes.iter().any(|o| o.error.is_some()) {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    })
}

/// Run the streams, applying each reloaded configuration, until shutdown (or until every
/// stream has ended on its own, when some ran).
async fn supervise_reloads(
    cfg: &ValidatedConfig,
    opts: RunOptions,
    shutdown: tokio::sync::watch::Receiver<bool>,
    hub: Arc<Hub>,
    mut reloads: tokio::sync::mpsc::Receiver<ValidatedConfig>,
) -> Vec<landfall_engine::StreamOutcome> {
    let mut set = StreamSet::start(cfg, opts, shutdown.clone(), hub.clone());
    let mut ran_any = !set.all_finished();
    let (admin_tx, mut admin) = tokio::sync::mpsc::channel(8);
    hub.set_admin(admin_tx);
    loop {
        if *shutdown.borrow() || (ran_any && set.all_finished()) {
            break;
        }
        let mut stopping = shutdown.clone();
        tokio::select! {
            _ = stopping.changed() => {}
            Some(mut new) = reloads.recv() => {
                // `--listen` / LANDFALL_LISTEN stay in force; the socket is not rebound.
                let listen = hub.config().map(|c| c.server.listen.clone()).unwrap_or_default();
                new.server.listen = listen;
                let done = set.reload(&new).await;
                hub.set_config(Arc::new(new));
                tracing::info!(added = ?done.added, removed = ?done.removed, restarted = ?done.restarted, "configuration reloaded");
                ran_any |= !set.all_finished();
            }
            Some(request) = admin.recv() => {
                let (name, action) = (request.stream.clone(), format!("{:?}", request.action));
                let outcome = act(&mut set, &hub, request.stream, request.action).await;
                if let Some(events) = hub.stream(&name) {
                    events.operator_action(&action, &outcome);
                }
                let _ = request.reply.send(outcome);
                ran_any |= !set.all_finished();
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
    set.finish().await
}

/// Carry out an operator's action on one stream.
async fn act(
    set: &mut StreamSet,
    hub: &Hub,
    stream: String,
    action: AdminAction,
) -> Result<String, String> {
    if hub.shutting_down() {
        return Err("the process is shutting down".into());
    }
    let spec = hub
        .config()
        .and_then(|c| c.stream(&stream).cloned())
        .filter(|_| hub.stream(&stream).is_some())
        .ok_or_else(|| format!("no stream `{stream}` runs in this process"))?;
    let events = hub.stream(&stream);
    match action {
        AdminAction::Stop => {
            set.stop_stream(&stream, true).await;
            if let Some(e) = events {
                e.paused();
            }
            Ok(format!(
                "stream `{stream}` stopped; it stays stopped until restarted"
            ))
        }
        AdminAction::Backfill => match events {
            Some(e) if set.is_running(&stream) => {
                e.request_backfill();
                Ok(format!("stream `{stream}` lists its source now"))
            }
            _ => Err(format!(
                "stream `{stream}` is not running (paused or stopped); restart it first"
            )),
        },
        AdminAction::Restart => {
            set.stop_stream(&stream, false).await;
            set.start_stream(&spec);
            Ok(format!("stream `{stream}` restarted"))
        }
        AdminAction::Skip { path, reason } => {
            let paused = set.is_paused(&stream);
            set.stop_stream(&stream, paused).await;
            let skip_spec = spec.clone();
            let done = tokio::task::spawn_blocking(move || {
                // An API read of the ledger that began before the stop may hold it a moment.
                let mut tries = 0;
                loop {
                    match crate::admin::skip_file(&skip_spec, &path, reason.clone()) {
                        Err((_, crate::admin::LOCKED)) if tries < 40 => {
                            tries += 1;
                            std::thread::sleep(Duration::from_millis(250));
                        }
                        r => return r.map_err(|(m, _)| m),
                    }
                }
            })
            .await
            .map_err(|e| format!("the skip failed: {e}"))
            .and_then(|r| r);
            // Running again either way (a refused skip changes nothing), unless paused.
            if !paused {
                set.start_stream(&spec);
            }
            done
        }
    }
}

/// On SIGHUP, read the configuration again: a valid one is handed to the streams, an invalid
/// one is refused with its errors and the running configuration stays.
async fn watch_reloads(path: PathBuf, tx: tokio::sync::mpsc::Sender<ValidatedConfig>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return;
        };
        while hup.recv().await.is_some() {
            tracing::info!(config = %path.display(), "SIGHUP: reloading the configuration");
            match landfall_config::load(&path) {
                Ok(cfg) => {
                    if tx.send(cfg).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::error!(config = %path.display(), error = %e, "configuration rejected; the running one stays in force")
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (path, tx);
    }
}

/// Tell the service manager `states`. A failure is warned about once (a socket that does
/// not work keeps failing: every later one is logged at debug).
fn notify(states: &[sd_notify::NotifyState]) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Err(e) = sd_notify::notify(false, states) {
        if WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::debug!(error = %e, "could not notify the service manager");
        } else {
            tracing::warn!(error = %e, "could not notify the service manager (further failures are logged at debug)");
        }
    }
}

/// How often STATUS= tells the service manager the streams' one-line summary.
const STATUS_EVERY: Duration = Duration::from_secs(10);

/// STATUS=<summary> every [`STATUS_EVERY`] while a service manager listens (`systemctl
/// status` shows the line).
fn spawn_status(hub: Arc<Hub>) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(STATUS_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            // Once stopping, the line says so until the process ends.
            if hub.shutting_down() {
                return;
            }
            notify(&[sd_notify::NotifyState::Status(&hub.status_line())]);
        }
    });
}

/// WATCHDOG=1 at half the interval systemd asked for, from the runtime itself: a wedged
/// runtime stops the pings and systemd restarts the service.
fn spawn_watchdog() {
    let mut usec = 0u64;
    if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
        return;
    }
    let every = Duration::from_micros(usec / 2);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            notify(&[sd_notify::NotifyState::Watchdog]);
        }
    });
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// GET `/healthz` of the daemon listening on `listen` (a wildcard address is probed on
/// loopback). Exit 0 on HTTP 200.
pub fn health(listen: &str) -> ExitCode {
    let addr = crate::http::reachable(listen);
    match crate::http::get(&addr, "/healthz", Duration::from_secs(5)) {
        Ok(a) if a.status == 200 => {
            println!("healthy ({addr})");
            ExitCode::SUCCESS
        }
        Ok(a) => {
            eprintln!("unhealthy: {addr}/healthz answered HTTP {}", a.status);
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("unhealthy: {addr}/healthz: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The host name: `HOSTNAME` (set in containers), else the kernel's.
pub fn hostname() -> Option<String> {
    std::env::var("HOSTNAME").ok().or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
    })
}
