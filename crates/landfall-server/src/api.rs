//! The handlers.

use crate::AppState;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use landfall_config::{StoreOptions, StreamSpec, Trigger};
use landfall_engine::AdminAction;
use landfall_engine::events::StreamEvents;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

pub(crate) fn not_found(name: &str) -> Response {
    error(StatusCode::NOT_FOUND, format!("no stream named `{name}`"))
}

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn readyz(State(s): State<AppState>) -> Response {
    let streams: Vec<Arc<StreamEvents>> = s.hub.streams();
    // A process with no stream of its own (a shard that owns none) is ready: it has nothing
    // to start. One shutting down is not: it finishes its batches and takes no new work.
    let shutting_down = s.hub.shutting_down();
    let mut ready = !shutting_down;
    let mut by_stream = BTreeMap::new();
    for e in &streams {
        let v = e.snapshot();
        ready &= v.state.ready();
        by_stream.insert(
            v.name.clone(),
            serde_json::to_value(&v.state).unwrap_or(Value::Null),
        );
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({ "ready": ready, "shutting_down": shutting_down, "streams": by_stream })),
    )
        .into_response()
}

pub async fn metrics(State(s): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.hub.metrics.encode(),
    )
        .into_response()
}

/// A stream's run state and last progress.
fn summary(e: &StreamEvents) -> Value {
    let v = e.snapshot();
    let mut out = serde_json::to_value(&v).unwrap_or(Value::Null);
    out["last_progress"] = v
        .last()
        .and_then(|p| serde_json::to_value(p).ok())
        .unwrap_or(Value::Null);
    out
}

pub async fn streams(State(s): State<AppState>) -> Json<Value> {
    let list: Vec<Value> = s.hub.streams().iter().map(|e| summary(e)).collect();
    Json(json!({ "streams": list }))
}

/// How long an answer of `/api/v1/locations` is reused: each asks every location's queue for
/// its depth (a cloud request), and every open status page polls it.
const LOCATIONS_FOR: std::time::Duration = std::time::Duration::from_secs(15);

/// `GET /api/v1/locations`: each location's cache, consumer, queue depth and readers. The
/// ledgers of streams no worker holds are opened read-only off the runtime's threads; the
/// answer is reused for [`LOCATIONS_FOR`].
pub async fn locations(State(s): State<AppState>) -> Json<Value> {
    let Some(cfg) = s.hub.config() else {
        return Json(json!({ "locations": [] }));
    };
    if let Some((at, v)) = s
        .locations_cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        && at.elapsed() < LOCATIONS_FOR
    {
        return Json(v.clone());
    }
    let hub = s.hub.clone();
    let specs = cfg.streams.clone();
    let cursors: BTreeMap<String, Option<String>> = tokio::task::spawn_blocking(move || {
        specs
            .iter()
            .map(|spec| {
                let store = hub.stream(&spec.name).and_then(|e| e.state_store());
                let cursor = crate::detail::read_ledger(store, spec, |_, l| {
                    l.cursor().map_err(|e| e.message)
                })
                .ok()
                .flatten()
                .flatten();
                (spec.name.clone(), cursor)
            })
            .collect()
    })
    .await
    .unwrap_or_default();
    let positions =
        move |spec: &landfall_config::StreamSpec| cursors.get(&spec.name).cloned().flatten();
    let reports =
        landfall_engine::locations::report(&cfg, Some(&s.hub.locations), &positions, true).await;
    let v = json!({ "locations": reports });
    *s.locations_cache.lock().unwrap_or_else(|e| e.into_inner()) =
        Some((std::time::Instant::now(), v.clone()));
    Json(v)
}

pub async fn stream(State(s): State<AppState>, Path(name): Path<String>) -> Response {
    let Some(e) = s.hub.stream(&name) else {
        return not_found(&name);
    };
    let mut out = summary(&e);
    if let Some(spec) = s.hub.config().and_then(|c| c.stream(&name).cloned()) {
        out["config"] = config_view(&spec);
    }
    Json(out).into_response()
}

#[derive(Deserialize)]
pub struct ProgressQuery {
    limit: Option<usize>,
}

pub async fn progress(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<ProgressQuery>,
) -> Response {
    let Some(e) = s.hub.stream(&name) else {
        return not_found(&name);
    };
    let v = e.snapshot();
    let limit = q.limit.unwrap_or(landfall_engine::progress::HISTORY);
    let skip = v.history.len().saturating_sub(limit);
    let records: Vec<_> = v.history.iter().skip(skip).collect();
    Json(json!({ "stream": name, "progress": records })).into_response()
}

fn redact(o: &StoreOptions) -> BTreeMap<String, String> {
    o.redacted()
}

/// The stream's configuration as the API shows it: no secret values.
fn config_view(spec: &StreamSpec) -> Value {
    json!({
        "source": spec.source.shown(),
        "source_options": redact(&spec.source_options),
        "format": format!("{:?}", spec.format).to_lowercase(),
        "trigger": match spec.trigger {
            Trigger::Continuous => "continuous",
            Trigger::ProcessingTime(_) => "processing_time",
            Trigger::AvailableNow => "available_now",
        },
        "trigger_interval_ms": match spec.trigger {
            Trigger::ProcessingTime(d) => Some(d.as_millis() as u64),
            _ => None,
        },
        "poll_interval_ms": spec.poll_interval.as_millis() as u64,
        "incremental_listing": spec.incremental_listing.as_str(),
        "full_listing_interval": spec.full_listing_interval,
        "max_files_per_trigger": spec.limits.max_files,
        "max_bytes_per_trigger": spec.limits.max_bytes,
        "allow_overwrites": spec.allow_overwrites,
        "ignore_missing_files": spec.ignore_missing_files,
        "ignore_corrupt_files": spec.ignore_corrupt_files,
        "include_existing_files": spec.include_existing_files,
        "sink": {
            "format": format!("{:?}", spec.sink.format).to_lowercase(),
            "path": spec.sink.location.shown(),
            "partition_by": spec.sink.partition_by,
            "options": redact(&spec.sink.options),
        },
    })
}

/// `None` when the request carries the admin token, else the answer that refuses it. The
/// comparison takes the same time whatever the token's length or content.
fn refused(s: &AppState, headers: &HeaderMap) -> Option<Response> {
    let Some(token) = &s.admin_token else {
        return Some(error(
            StatusCode::FORBIDDEN,
            "admin actions are disabled: set server.admin_token (or LANDFALL_ADMIN_TOKEN)".into(),
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .unwrap_or("");
    let (a, b) = (given.as_bytes(), token.as_bytes());
    let n = a.len().max(b.len());
    let diff = (0..n).fold((a.len() != b.len()) as u8, |acc, i| {
        acc | (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0))
    });
    if diff == 0 {
        return None;
    }
    tracing::warn!("admin request refused: missing or wrong bearer token");
    let mut no = error(
        StatusCode::UNAUTHORIZED,
        "a valid `Authorization: Bearer <token>` header is required".into(),
    );
    no.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    Some(no)
}

async fn admin(s: &AppState, headers: &HeaderMap, name: &str, action: AdminAction) -> Response {
    match refused(s, headers) {
        Some(no) => no,
        None => dispatch(s, name, action).await,
    }
}

/// Carry out an authorised action.
async fn dispatch(s: &AppState, name: &str, action: AdminAction) -> Response {
    if s.hub.stream(name).is_none() {
        return not_found(name);
    }
    if s.hub.shutting_down() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the process is shutting down".into(),
        );
    }
    match s.hub.admin(name, action).await {
        Ok(message) => {
            Json(json!({ "stream": name, "ok": true, "message": message })).into_response()
        }
        Err(e) => error(StatusCode::CONFLICT, e),
    }
}

pub async fn stop(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    admin(&s, &headers, &name, AdminAction::Stop).await
}

pub async fn backfill(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    admin(&s, &headers, &name, AdminAction::Backfill).await
}

pub async fn restart(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    admin(&s, &headers, &name, AdminAction::Restart).await
}

#[derive(Deserialize)]
pub struct SkipBody {
    path: String,
    reason: Option<String>,
}

/// The body is read as bytes and parsed only after the token is checked, so an unauthorised
/// caller learns nothing from parse errors.
pub async fn skip(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    if let Some(no) = refused(&s, &headers) {
        return no;
    }
    let body: SkipBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("expected a JSON body {{\"path\": \"...\", \"reason\": \"...\"}}: {e}"),
            );
        }
    };
    dispatch(
        &s,
        &name,
        AdminAction::Skip {
            path: body.path,
            reason: body.reason,
        },
    )
    .await
}
