//! `GET /api/v1/streams/{name}/files?state=&limit=&after=`: the stream's ledger rows, a page
//! at a time, in key order (the file's path, or `path@version` with `allow_overwrites`).
//!
//! A page costs what it reads: the ledger seeks to the cursor, so page 1,000 of 200,000 files
//! reads its `limit` rows, never the whole ledger. The answer's `next` is an opaque cursor to
//! pass as `after` for the next page; `null` after the last. With a filter (`state`, or a
//! number as `after`), a page reads at most [`MAX_SCANNED`] rows: a page may then hold fewer
//! than `limit` rows, even none, while `next` is set. A client pages until `next` is `null`.
//!
//! `after` given as a bare number is the form from before cursors, a discovery sequence
//! number: rows discovered after it (in key order now), the number kept in the cursors that
//! follow.

use crate::AppState;
use crate::api::{error, not_found};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use landfall_core::seams::FileFilter;
use landfall_core::{FileKey, FileRecord, FileState};
use serde::Deserialize;
use serde_json::{Value, json};

/// Rows per page unless `limit` says otherwise (at most `MAX_FILES`).
const DEFAULT_FILES: usize = 100;
const MAX_FILES: usize = 10_000;
/// Rows a filtered page reads at most, whether they pass or not: a request's cost is bounded
/// even when the rows it looks for are rare (about 50 ms of decoding).
pub const MAX_SCANNED: u64 = 50_000;

#[derive(Deserialize)]
pub struct FilesQuery {
    state: Option<String>,
    limit: Option<usize>,
    /// The `next` of the previous page (or a discovery sequence number, see the module doc).
    after: Option<String>,
}

/// Where a page starts: after a ledger key, with the sequence floor paging began with.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub key: Option<FileKey>,
    pub discovered_after: Option<u64>,
}

impl Cursor {
    /// `k<hex of the key>`, after `s<floor>` when there is a sequence floor: URL-safe for any
    /// key, and never a bare number.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Some(floor) = self.discovered_after {
            out.push_str(&format!("s{floor}"));
        }
        out.push('k');
        if let Some(k) = &self.key {
            for b in k.0.as_bytes() {
                out.push_str(&format!("{b:02x}"));
            }
        }
        out
    }

    /// A cursor, or a bare sequence number; empty: the first page.
    pub fn parse(text: &str) -> Result<Cursor, String> {
        if text.is_empty() {
            return Ok(Cursor::default());
        }
        let bad =
            || format!("`after={text}` is not a cursor: pass the `next` of the previous page");
        if text.bytes().all(|b| b.is_ascii_digit()) {
            let floor = text.parse().map_err(|_| bad())?;
            return Ok(Cursor {
                key: None,
                discovered_after: Some(floor),
            });
        }
        let (floor, hex) = match text.strip_prefix('s') {
            Some(rest) => {
                let (n, hex) = rest.split_once('k').ok_or_else(bad)?;
                (Some(n.parse::<u64>().map_err(|_| bad())?), hex)
            }
            None => (None, text.strip_prefix('k').ok_or_else(bad)?),
        };
        if hex.len() % 2 != 0 {
            return Err(bad());
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
            .collect::<Result<Vec<u8>, String>>()?;
        let key = String::from_utf8(bytes).map_err(|_| bad())?;
        Ok(Cursor {
            key: (!key.is_empty()).then_some(FileKey(key)),
            discovered_after: floor,
        })
    }
}

/// A ledger row as the API shows it: the record, with its optional fields `null` when absent
/// (the stored form leaves them out).
pub fn file_row(r: &FileRecord) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.entry("skip").or_insert(Value::Null);
        if let Some(m) = o.get_mut("meta").and_then(Value::as_object_mut) {
            m.entry("etag").or_insert(Value::Null);
            m.entry("version").or_insert(Value::Null);
        }
    }
    v
}

pub async fn files(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<FilesQuery>,
) -> Response {
    let Some(e) = s.hub.stream(&name) else {
        return not_found(&name);
    };
    let state = match q.state.as_deref().map(parse_state).transpose() {
        Ok(s) => s,
        Err(msg) => return error(StatusCode::BAD_REQUEST, msg),
    };
    let cursor = match q.after.as_deref().map(Cursor::parse).transpose() {
        Ok(c) => c.unwrap_or_default(),
        Err(msg) => return error(StatusCode::BAD_REQUEST, msg),
    };
    let Some(store) = e.state_store() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("stream `{name}` is not running; `landfall state {name}` reads its state"),
        );
    };
    let limit = q.limit.unwrap_or(DEFAULT_FILES).clamp(1, MAX_FILES);
    let filter = FileFilter {
        state,
        discovered_after: cursor.discovered_after,
    };
    let after = cursor.key.clone();
    let read = move || store.files_page(filter, after.as_ref(), limit, MAX_SCANNED);
    let page = match tokio::task::spawn_blocking(read).await {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.message),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let next = page.next.map(|key| {
        Cursor {
            key: Some(key),
            discovered_after: cursor.discovered_after,
        }
        .encode()
    });
    let rows: Vec<Value> = page.files.iter().map(file_row).collect();
    // `next_after`: the field's name before cursors, for clients that page with it (they
    // pass it back as `after`, which takes the cursor).
    Json(json!({ "stream": name, "files": rows, "next": next, "next_after": next })).into_response()
}

fn parse_state(s: &str) -> Result<FileState, String> {
    FileState::parse(s).ok_or_else(|| {
        let all: Vec<_> = FileState::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown state `{s}`: one of {}", all.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_numbers_stay_sequence_numbers() {
        for c in [
            Cursor::default(),
            Cursor {
                key: Some(FileKey("landing/a b/ü.json@e:\"x\"".into())),
                discovered_after: None,
            },
            Cursor {
                key: Some(FileKey("k".into())),
                discovered_after: Some(42),
            },
        ] {
            let text = c.encode();
            assert!(text.bytes().all(|b| b.is_ascii_alphanumeric()), "{text}");
            assert_eq!(Cursor::parse(&text).unwrap(), c, "{text}");
        }
        assert_eq!(
            Cursor::parse("17").unwrap(),
            Cursor {
                key: None,
                discovered_after: Some(17)
            }
        );
        assert_eq!(Cursor::parse("").unwrap(), Cursor::default());
        for bad in ["x", "k6", "kzz", "s1", "sxk00", "kff"] {
            assert!(Cursor::parse(bad).is_err(), "{bad}");
        }
    }
}
