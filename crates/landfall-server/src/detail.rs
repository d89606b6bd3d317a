//! What the status page and `landfall top` show of one stream beyond its row:
//!
//! - `GET /api/v1/streams/{name}/timeline?last=N`: the last hour, a point per
//!   `server.chart_step` (rows, files and bytes committed per second, backlog, queue depth,
//!   batches and their mean duration by phase), oldest first; with `last`, the newest N.
//! - `GET /api/v1/streams/{name}/charts.svg`: the same points drawn (chart.rs).
//! - `GET /api/v1/streams/{name}/skipped`: the files this process skipped last, newest first,
//!   with the number of skipped files the ledger holds in all (the list of every one is
//!   `files?state=skipped`).
//! - `GET /api/v1/streams/{name}/schemas`: the stream's schema versions, oldest first, each
//!   with its reason and the file that caused it (as `landfall schema` prints them).
//!
//! The ledger is read off the runtime's threads, through the running worker's open state, or
//! opened read-only when no worker holds it (a stopped stream); a stream that never ran has no
//! skipped file and no schema yet.

use crate::AppState;
use crate::api::{error, not_found};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use landfall_core::{FileState, StateStore};
use landfall_engine::events::StreamEvents;
use landfall_engine::timeline::{DEFAULT_STEP, TimelineView};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

fn events(s: &AppState, name: &str) -> Result<Arc<StreamEvents>, Box<Response>> {
    s.hub.stream(name).ok_or_else(|| Box::new(not_found(name)))
}

/// Run `read` on the stream's ledger off the runtime's threads: the worker's open one, else a
/// read-only handle. `Ok(None)`: the stream has no state yet (it never ran).
async fn with_ledger<T: Send + 'static>(
    s: &AppState,
    e: &StreamEvents,
    read: impl FnOnce(&landfall_config::StreamSpec, &dyn StateStore) -> Result<T, String>
    + Send
    + 'static,
) -> Result<Option<T>, String> {
    let spec = s
        .hub
        .config()
        .and_then(|c| c.stream(&e.stream).cloned())
        .ok_or_else(|| format!("stream `{}` is not in the configuration in force", e.stream))?;
    let store = e.state_store();
    tokio::task::spawn_blocking(move || read_ledger(store, &spec, read))
        .await
        .map_err(|e| format!("the ledger read failed: {e}"))?
}

/// Run `read` on a stream's ledger, blocking: `store`, the running worker's open one, else a
/// read-only handle of `spec`'s state directory. `Ok(None)`: the stream has no state yet.
pub(crate) fn read_ledger<T>(
    store: Option<Arc<dyn StateStore>>,
    spec: &landfall_config::StreamSpec,
    read: impl FnOnce(&landfall_config::StreamSpec, &dyn StateStore) -> Result<T, String>,
) -> Result<Option<T>, String> {
    match store {
        Some(store) => read(spec, store.as_ref()).map(Some),
        None if !spec.state_dir.join("CURRENT").exists() => Ok(None),
        None => {
            let ledger = landfall_state::open_rocks_read_only(&spec.name, &spec.state_dir)
                .map_err(|e| format!("cannot open the state read-only: {e}"))?;
            read(spec, &ledger).map(Some)
        }
    }
}

#[derive(Deserialize)]
pub struct TimelineQuery {
    /// The newest points only, at most this many.
    last: Option<usize>,
}

/// The stream's timeline; before its first point, the configured step.
fn view(s: &AppState, e: &StreamEvents, last: Option<usize>) -> TimelineView {
    let mut v = e.timeline(last);
    if v.step_ms == 0 {
        v.step_ms = s
            .hub
            .config()
            .map_or(DEFAULT_STEP, |c| c.chart_step)
            .as_millis() as u64;
    }
    v
}

pub async fn timeline(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<TimelineQuery>,
) -> Response {
    match events(&s, &name) {
        Ok(e) => {
            let v = view(&s, &e, q.last);
            Json(json!({ "stream": name, "step_ms": v.step_ms, "points": v.points }))
                .into_response()
        }
        Err(no) => *no,
    }
}

pub async fn charts(State(s): State<AppState>, Path(name): Path<String>) -> Response {
    match events(&s, &name) {
        Ok(e) => (
            [
                (header::CONTENT_TYPE, "image/svg+xml; charset=utf-8"),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'",
                ),
            ],
            crate::chart::render(&view(&s, &e, None), chrono::Utc::now()),
        )
            .into_response(),
        Err(no) => *no,
    }
}

pub async fn skipped(State(s): State<AppState>, Path(name): Path<String>) -> Response {
    let e = match events(&s, &name) {
        Ok(e) => e,
        Err(no) => return *no,
    };
    // The count is one small read of the ledger's statistics; a ledger that cannot be read
    // leaves it out with the reason, the recent list stands on its own.
    let counted = with_ledger(&s, &e, |_, l| {
        let c = l.counts().map_err(|e| e.message)?;
        Ok(c.files_by_state
            .iter()
            .find(|(st, _)| *st == FileState::Skipped)
            .map_or(0, |(_, n)| *n))
    })
    .await;
    let (in_ledger, ledger_error) = match counted {
        Ok(n) => (Some(n.unwrap_or(0)), None),
        Err(e) => (None, Some(e)),
    };
    Json(json!({
        "stream": name,
        "recent": e.recent_skips(),
        "recent_kept": landfall_engine::events::RECENT_SKIPS,
        "in_ledger": in_ledger,
        "ledger_error": ledger_error,
    }))
    .into_response()
}

pub async fn schemas(State(s): State<AppState>, Path(name): Path<String>) -> Response {
    let e = match events(&s, &name) {
        Ok(e) => e,
        Err(no) => return *no,
    };
    match with_ledger(&s, &e, |spec, l| {
        landfall_engine::schema::history(spec, l).map_err(|e| e.message)
    })
    .await
    {
        Ok(versions) => Json(json!({ "stream": name, "versions": versions.unwrap_or_default() }))
            .into_response(),
        Err(message) => error(StatusCode::SERVICE_UNAVAILABLE, message),
    }
}
