//! What `landfall top` shows, read from the daemon's API: every stream's row from
//! `/api/v1/streams`, and for the selected stream its timeline and last batches. A fetcher
//! thread reads them once a second and hands each snapshot to the screen, so a slow or gone
//! daemon never freezes the keys.

use serde_json::Value;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the daemon is read.
pub const EVERY: Duration = Duration::from_secs(1);
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(3);

/// One stream's row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamRow {
    pub name: String,
    pub state: String,
    pub error: Option<String>,
    pub files_outstanding: Option<u64>,
    pub bytes_outstanding: Option<u64>,
    pub batch_id: Option<u64>,
    pub rows: Option<u64>,
    pub files: Option<u64>,
    pub table_version: Option<i64>,
    pub input_rows_per_second: Option<f64>,
    pub restarts: u64,
    pub falling_behind: bool,
}

/// One of the selected stream's last batches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchRow {
    pub batch_id: u64,
    pub timestamp: String,
    pub files: u64,
    pub rows: u64,
    pub duration_ms: u64,
    pub table_version: i64,
}

/// The selected stream's last hour and batches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Detail {
    pub name: String,
    pub step_ms: u64,
    pub rows_per_second: Vec<f64>,
    pub files_outstanding: Vec<u64>,
    pub batches: Vec<BatchRow>,
}

/// One reading of the daemon.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub taken: chrono::DateTime<chrono::Local>,
    pub streams: Result<Vec<StreamRow>, String>,
    /// The selected stream's name and its detail, or why it could not be read.
    pub detail: Option<(String, Result<Detail, String>)>,
}

fn u(v: &Value) -> Option<u64> {
    v.as_u64()
}

/// The rows of `/api/v1/streams`.
pub fn stream_rows(v: &Value) -> Result<Vec<StreamRow>, String> {
    let list = v["streams"]
        .as_array()
        .ok_or("the answer of /api/v1/streams has no `streams` list")?;
    Ok(list
        .iter()
        .map(|s| {
            let p = &s["last_progress"];
            StreamRow {
                name: s["name"].as_str().unwrap_or_default().to_string(),
                state: s["state"].as_str().unwrap_or("?").to_string(),
                error: s["error"].as_str().map(str::to_string),
                files_outstanding: u(&p["source"]["files_outstanding"]),
                bytes_outstanding: u(&p["source"]["bytes_outstanding"]),
                batch_id: u(&p["batch_id"]),
                rows: u(&p["num_input_rows"]),
                files: u(&p["num_input_files"]),
                table_version: p["sink"]["table_version"].as_i64(),
                input_rows_per_second: p["input_rows_per_second"].as_f64(),
                restarts: u(&s["restarts"]).unwrap_or(0),
                falling_behind: s["falling_behind"] == true,
            }
        })
        .collect())
}

/// The detail from a stream's `/timeline` and `/progress` answers.
pub fn detail(name: &str, timeline: &Value, progress: &Value) -> Detail {
    let points = timeline["points"].as_array().cloned().unwrap_or_default();
    let mut batches: Vec<BatchRow> = progress["progress"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|p| BatchRow {
                    batch_id: u(&p["batch_id"]).unwrap_or(0),
                    timestamp: p["timestamp"].as_str().unwrap_or_default().to_string(),
                    files: u(&p["num_input_files"]).unwrap_or(0),
                    rows: u(&p["num_input_rows"]).unwrap_or(0),
                    duration_ms: u(&p["duration_ms"]["total"]).unwrap_or(0),
                    table_version: p["sink"]["table_version"].as_i64().unwrap_or(-1),
                })
                .collect()
        })
        .unwrap_or_default();
    batches.reverse();
    Detail {
        name: name.to_string(),
        step_ms: u(&timeline["step_ms"]).unwrap_or(0),
        rows_per_second: points
            .iter()
            .map(|p| p["rows_per_second"].as_f64().unwrap_or(0.0))
            .collect(),
        files_outstanding: points
            .iter()
            .map(|p| u(&p["files_outstanding"]).unwrap_or(0))
            .collect(),
        batches,
    }
}

/// A stream name in a URL path.
fn segment(name: &str) -> String {
    percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Points of the timeline read: more than any terminal is wide.
const POINTS: usize = 400;

/// Read the daemon at `addr` once: the streams, and the detail of `selected`.
pub fn read(addr: &str, selected: Option<&str>) -> Snapshot {
    let get = |path: &str| crate::http::get_json(addr, path, TIMEOUT);
    let streams = get("/api/v1/streams").and_then(|v| stream_rows(&v));
    let detail = selected.map(|name| {
        let base = format!("/api/v1/streams/{}", segment(name));
        let read = || -> Result<Detail, String> {
            let timeline = get(&format!("{base}/timeline?last={POINTS}"))?;
            let progress = get(&format!("{base}/progress?limit=8"))?;
            Ok(detail(name, &timeline, &progress))
        };
        (name.to_string(), read())
    });
    Snapshot {
        taken: chrono::Local::now(),
        streams,
        detail,
    }
}

/// Read the daemon every [`EVERY`] (at once when `wake` is set: the selection changed) and send
/// each snapshot, until the receiver is gone.
pub fn fetcher(
    addr: String,
    selected: Arc<Mutex<Option<String>>>,
    wake: Arc<std::sync::atomic::AtomicBool>,
    tx: Sender<Snapshot>,
) {
    loop {
        let name = selected.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let started = Instant::now();
        if tx.send(read(&addr, name.as_deref())).is_err() {
            return;
        }
        while started.elapsed() < EVERY && !wake.swap(false, std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rows_and_detail_from_the_api() {
        let v = json!({"streams": [
            {"name": "ev", "state": "running", "restarts": 0, "falling_behind": false,
             "last_progress": {"batch_id": 3, "num_input_rows": 15, "num_input_files": 5,
                "input_rows_per_second": 2.5, "source": {"files_outstanding": 1, "bytes_outstanding": 10},
                "sink": {"table_version": 4}}},
            {"name": "bad", "state": "stopped", "error": "corrupt", "restarts": 2, "last_progress": null}
        ]});
        let rows = stream_rows(&v).unwrap();
        assert_eq!(rows[0].rows, Some(15));
        assert_eq!(rows[0].table_version, Some(4));
        assert_eq!(rows[1].error.as_deref(), Some("corrupt"));
        assert_eq!((rows[1].batch_id, rows[1].restarts), (None, 2));
        assert!(stream_rows(&json!({})).is_err());
        let d = detail(
            "ev",
            &json!({"step_ms": 200, "points": [{"rows_per_second": 1.5, "files_outstanding": 2}]}),
            &json!({"progress": [{"batch_id": 1}, {"batch_id": 2}]}),
        );
        assert_eq!(
            (d.step_ms, d.rows_per_second[0], d.files_outstanding[0]),
            (200, 1.5, 2)
        );
        assert_eq!(d.batches[0].batch_id, 2, "newest first");
        assert_eq!(segment("a b/é.x"), "a%20b%2F%C3%A9%2Ex");
    }
}
