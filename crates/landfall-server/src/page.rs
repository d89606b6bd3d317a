//! `GET /`: the status page, one self-contained HTML file (inline CSS and JS, no external
//! assets) embedded in the binary. It polls `api/v1/streams` (a relative URL, so it works
//! behind a path-prefixing proxy) every 2 s and builds its table with `textContent` only, so
//! file paths and errors from the API are never parsed as HTML.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("status.html");

/// Only the page's own inline script and style may run, and it may fetch only this origin.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                   connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

pub async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        PAGE,
    )
        .into_response()
}
