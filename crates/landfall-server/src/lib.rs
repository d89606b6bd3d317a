//! The HTTP surface of a running daemon (`server.listen`, default 127.0.0.1:8686):
//!
//! - `GET /`: a self-contained status page (status.html) that polls the API.
//! - `GET /healthz`: liveness; 200 while the process serves requests.
//! - `GET /readyz`: 200 when every stream of this process runs (or drained) and the process is
//!   not shutting down, else 503 with the state of each stream.
//! - `GET /metrics`: Prometheus metrics (OpenMetrics text), every series labelled `stream`.
//! - `GET /api/v1/streams`, `/api/v1/streams/{name}`: run state, configuration (secrets
//!   redacted), last progress.
//! - `GET /api/v1/streams/{name}/progress?limit=N`: the last progress records.
//! - `GET /api/v1/streams/{name}/files?state=&limit=&after=`: the stream's ledger rows in key
//!   order, a page at a time; `after` is the `next` cursor of the previous page (files.rs).
//! - `GET /api/v1/streams/{name}/timeline`, `/charts.svg`, `/skipped`, `/schemas`: the last
//!   hour, drawn or as numbers; recently skipped files; schema versions (detail.rs).
//!
//! - `POST /api/v1/streams/{name}/stop`, `/restart`, `/backfill` (list now), `/skip` (JSON
//!   `{"path", "reason"}`):
//!   admin actions, only with `Authorization: Bearer <server.admin_token>`; without a token
//!   configured they answer 403. The token is never logged or shown.
//!
//! Store options are never shown with their values unless the key is known to hold no secret.
//! At most 256 connections are served at once (64 per client address) and one idle for 75 s
//! is closed (guard.rs).

mod api;
pub mod chart;
mod detail;
mod files;
mod guard;
mod page;

use axum::Router;
use axum::routing::{get, post};
use landfall_engine::Hub;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// What the handlers read.
#[derive(Clone)]
pub struct AppState {
    /// The streams, metrics and the configuration in force (a reload replaces it).
    pub hub: Arc<Hub>,
    /// The bearer token admin actions need; `None` disables them.
    pub admin_token: Option<String>,
    /// The last answer of `/api/v1/locations` and when it was made (api.rs).
    pub locations_cache: Arc<std::sync::Mutex<Option<(std::time::Instant, serde_json::Value)>>>,
}

impl AppState {
    pub fn new(hub: Arc<Hub>, admin_token: Option<String>) -> Self {
        AppState {
            hub,
            admin_token,
            locations_cache: Arc::default(),
        }
    }
}

/// The router of every endpoint.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(page::index))
        .route("/healthz", get(api::healthz))
        .route("/readyz", get(api::readyz))
        .route("/metrics", get(api::metrics))
        .route("/api/v1/streams", get(api::streams))
        .route("/api/v1/locations", get(api::locations))
        .route("/api/v1/streams/{name}", get(api::stream))
        .route("/api/v1/streams/{name}/progress", get(api::progress))
        .route("/api/v1/streams/{name}/files", get(files::files))
        .route("/api/v1/streams/{name}/timeline", get(detail::timeline))
        .route("/api/v1/streams/{name}/charts.svg", get(detail::charts))
        .route("/api/v1/streams/{name}/skipped", get(detail::skipped))
        .route("/api/v1/streams/{name}/schemas", get(detail::schemas))
        .route("/api/v1/streams/{name}/stop", post(api::stop))
        .route("/api/v1/streams/{name}/restart", post(api::restart))
        .route("/api/v1/streams/{name}/backfill", post(api::backfill))
        .route("/api/v1/streams/{name}/skip", post(api::skip))
        .with_state(state)
}

/// Bind `listen` (an error names the address and the setting).
pub async fn bind(listen: &str) -> Result<TcpListener, String> {
    TcpListener::bind(listen).await.map_err(|e| {
        format!(
            "cannot listen on {listen} (server.listen, or LANDFALL_LISTEN): {e}; set another \
             address, or 127.0.0.1:0 for any free port"
        )
    })
}

/// Serve until `shutdown` turns true.
pub async fn serve(listener: TcpListener, state: AppState, mut shutdown: watch::Receiver<bool>) {
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    tracing::info!(address = %addr, "http server listening");
    let app = router(state);
    let stop = async move {
        while !*shutdown.borrow() {
            if shutdown.changed().await.is_err() {
                break;
            }
        }
    };
    if let Err(e) = axum::serve(guard::Guarded::new(listener), app)
        .with_graceful_shutdown(stop)
        .await
    {
        tracing::error!(error = %e, "http server failed");
    }
}
