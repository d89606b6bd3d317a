//! What the commands print: the run summary, `landfall state` and `landfall streams`.

use crate::cli::OutputFormat;
use chrono::{DateTime, SecondsFormat, Utc};
use landfall_config::{StreamSpec, ValidatedConfig};
use landfall_core::{FileRecord, FileState, StateStore};
use landfall_engine::StreamOutcome;
use landfall_engine::worker::{DISCOVERY_NOTE_META, REQUESTS_META, STATUS_META, StreamStatus};
use std::process::ExitCode;

fn ts(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default()
}

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Print rows as an aligned table, JSON objects or CSV.
fn print_rows(header: &[&str], rows: &[Vec<String>], format: OutputFormat) {
    match format {
        OutputFormat::Table => {
            let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
            for r in rows {
                for (i, c) in r.iter().enumerate() {
                    width[i] = width[i].max(c.len());
                }
            }
            let line = |cells: Vec<&str>| {
                cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{c:<w$}", w = width[i]))
                    .collect::<Vec<_>>()
                    .join("  ")
                    .trim_end()
                    .to_string()
            };
            println!("{}", line(header.to_vec()));
            for r in rows {
                println!("{}", line(r.iter().map(String::as_str).collect()));
            }
        }
        OutputFormat::Json => {
            let arr: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    let obj: serde_json::Map<String, serde_json::Value> = header
                        .iter()
                        .zip(r)
                        .map(|(h, v)| {
                            (
                                h.to_string(),
                                if v.is_empty() {
                                    serde_json::Value::Null
                                } else {
                                    serde_json::Value::String(v.clone())
                                },
                            )
                        })
                        .collect();
                    serde_json::Value::Object(obj)
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&arr).expect("json"));
        }
        OutputFormat::Csv => {
            let esc = |s: &str| {
                if s.contains([',', '"', '\n']) {
                    format!("\"{}\"", s.replace('"', "\"\""))
                } else {
                    s.to_string()
                }
            };
            println!("{}", header.join(","));
            for r in rows {
                println!("{}", r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(","));
            }
        }
    }
}

fn file_row(spec: &StreamSpec, r: &FileRecord) -> Vec<String> {
    vec![
        landfall_engine::display_path(&spec.source.url, &r.meta.path),
        r.meta.size.to_string(),
        ts(Some(r.meta.modified)),
        ts(Some(r.discovery_time)),
        ts(r.processed_time),
        ts(r.commit_time),
        ts(r.archive_time),
        r.state.ingestion_state().unwrap_or("").to_string(),
        r.state.as_str().to_string(),
        r.batch_id.map(|b| b.to_string()).unwrap_or_default(),
        r.table_version.map(|v| v.to_string()).unwrap_or_default(),
        r.skip
            .as_ref()
            .map(|s| s.to_string())
            .or_else(|| r.error.clone())
            .unwrap_or_default(),
    ]
}

/// `landfall schema <stream>`: every schema version, oldest first, with its reason and the
/// file that caused it.
pub fn print_schema(spec: &StreamSpec, format: OutputFormat) -> ExitCode {
    let ledger = match landfall_state::open_rocks_read_only(&spec.name, &spec.state_dir) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: stream `{}`: {e}", spec.name);
            return ExitCode::FAILURE;
        }
    };
    let versions = match landfall_engine::schema::history(spec, &ledger) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {}", e.message);
            return ExitCode::FAILURE;
        }
    };
    if format == OutputFormat::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&versions).expect("versions serialise")
        );
        return ExitCode::SUCCESS;
    }
    if versions.is_empty() {
        println!(
            "stream `{}` has no schema yet (it is inferred when the first files arrive)",
            spec.name
        );
        return ExitCode::SUCCESS;
    }
    let header = ["version", "created_at", "reason", "file", "schema"];
    let rows: Vec<Vec<String>> = versions
        .iter()
        .map(|v| {
            vec![
                v.version.to_string(),
                ts(v.created_at),
                v.reason.clone(),
                v.file.clone().unwrap_or_default(),
                v.schema.clone(),
            ]
        })
        .collect();
    print_rows(&header, &rows, format);
    ExitCode::SUCCESS
}

pub fn print_state(spec: &StreamSpec, filter: Option<FileState>, format: OutputFormat) -> ExitCode {
    let ledger = match landfall_state::open_rocks_read_only(&spec.name, &spec.state_dir) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: stream `{}`: {e}", spec.name);
            return ExitCode::FAILURE;
        }
    };
    match ledger.files(filter) {
        Ok(files) => {
            let header = [
                "path",
                "size",
                "create_time",
                "discovery_time",
                "processed_time",
                "commit_time",
                "archive_time",
                "ingestion_state",
                "state",
                "batch_id",
                "table_version",
                "reason",
            ];
            let rows: Vec<_> = files.iter().map(|r| file_row(spec, r)).collect();
            print_rows(&header, &rows, format);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

pub fn print_streams(cfg: &ValidatedConfig, format: OutputFormat) -> ExitCode {
    let header = [
        "stream",
        "source",
        "table",
        "pending_files",
        "pending_bytes",
        "committed_files",
        "last_batch",
        "last_batch_files",
        "last_batch_state",
        "last_commit_time",
        "skipped_files",
        "status",
        "requests",
    ];
    let mut rows = Vec::new();
    for spec in &cfg.streams {
        let mut row = vec![
            spec.name.clone(),
            spec.source.url.to_string(),
            spec.sink.location.as_table_uri(),
        ];
        let ledger = landfall_state::open_rocks_read_only(&spec.name, &spec.state_dir);
        match ledger.as_ref().map(|l| l.summary()) {
            Ok(Ok(s)) => {
                row.push(s.pending_files.to_string());
                row.push(s.pending_bytes.to_string());
                row.push(s.committed_files.to_string());
                match &s.last_batch {
                    Some(b) => {
                        row.push(b.batch_id.to_string());
                        row.push(b.files.len().to_string());
                        row.push(
                            if b.committed.is_some() {
                                "committed"
                            } else {
                                "open"
                            }
                            .to_string(),
                        );
                        row.push(ts(b.committed.as_ref().map(|c| c.committed_at)));
                    }
                    None => row.extend(["", "", "", ""].map(String::from)),
                }
                let skipped = s
                    .files_by_state
                    .iter()
                    .find(|(st, _)| *st == FileState::Skipped)
                    .map_or(0, |(_, n)| *n);
                row.push(skipped.to_string());
                let last_commit = s
                    .last_batch
                    .as_ref()
                    .and_then(|b| b.committed.as_ref())
                    .map(|c| c.committed_at);
                row.push(status(ledger.as_ref().ok(), last_commit));
                row.push(requests(ledger.as_ref().ok()));
            }
            _ => row.extend(["", "", "", "", "", "never run", "", "", "", ""].map(String::from)),
        }
        rows.push(row);
    }
    print_rows(&header, &rows, format);
    ExitCode::SUCCESS
}

/// `landfall locations`: each location's cache, consumer and readers.
pub fn print_locations(cfg: &ValidatedConfig, format: OutputFormat) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let positions = |s: &landfall_config::StreamSpec| {
        landfall_state::open_rocks_read_only(&s.name, &s.state_dir)
            .ok()
            .and_then(|l| l.cursor().ok().flatten())
    };
    let reports = rt.block_on(landfall_engine::locations::report(cfg, &positions, true));
    if format == OutputFormat::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reports).expect("reports serialise")
        );
        return ExitCode::SUCCESS;
    }
    let header = [
        "location",
        "url",
        "file_events",
        "queue",
        "queue_depth",
        "cached_events",
        "oldest_event",
        "newest_event",
        "last_round",
        "consumer",
        "streams",
    ];
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let cache = r.cache.as_ref();
            vec![
                r.name.clone(),
                r.url.clone(),
                r.file_events.to_string(),
                r.queue.clone().unwrap_or_default(),
                r.queue_depth.map(|d| d.to_string()).unwrap_or_default(),
                cache.map(|c| c.events.to_string()).unwrap_or_default(),
                ts(cache.and_then(|c| c.oldest)),
                ts(cache.and_then(|c| c.newest)),
                r.last_round.clone().unwrap_or_default(),
                match (&r.error, &r.consumer_error) {
                    (Some(e), _) => e.clone(),
                    (None, Some(c)) => format!("failing since {}: {}", c.at.to_rfc3339(), c.error),
                    (None, None) => "ok".into(),
                },
                r.streams
                    .iter()
                    .map(|(name, p)| match (p.position, p.behind) {
                        (Some(pos), Some(b)) => format!("{name}@{pos} ({b} behind)"),
                        _ => format!("{name} (no position yet)"),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    print_rows(&header, &rows, format);
    ExitCode::SUCCESS
}

/// The stream's storage and queue requests of all runs, `OP=count` by operation.
fn requests(ledger: Option<&impl StateStore>) -> String {
    let Some(raw) = ledger.and_then(|l| l.meta(REQUESTS_META).ok().flatten()) else {
        return String::new();
    };
    serde_json::from_str::<std::collections::BTreeMap<String, u64>>(&raw)
        .map(|m| {
            m.iter()
                .map(|(op, n)| format!("{op}={n}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// `ok`, or the last error a run ended with while no batch committed after it.
fn status(ledger: Option<&impl StateStore>, last_commit: Option<DateTime<Utc>>) -> String {
    // A file-events stream listing instead of reading its location's cache says so.
    let ok = match ledger.and_then(|l| l.meta(DISCOVERY_NOTE_META).ok().flatten()) {
        Some(note) if !note.is_empty() => format!("ok ({note})"),
        _ => "ok".into(),
    };
    let Some(raw) = ledger.and_then(|l| l.meta(STATUS_META).ok().flatten()) else {
        return ok;
    };
    match serde_json::from_str::<StreamStatus>(&raw) {
        Ok(st) if last_commit.is_none_or(|c| c < st.at) => format!(
            "{}: {}",
            if st.fatal { "stopped" } else { "failing" },
            st.error
        ),
        _ => ok,
    }
}

pub fn print_run_summary(outcomes: &[StreamOutcome]) {
    println!();
    println!("landfall run summary");
    for o in outcomes {
        let status = match &o.error {
            None => "ok".to_string(),
            Some(e) => format!("FAILED: {e}"),
        };
        println!("  stream {}: {status}", o.stream);
        println!(
            "    this run:  {} file(s), {} row(s), {} in {} batch(es); {} file(s) skipped, {} malformed row(s)",
            o.files_this_run,
            o.rows_this_run,
            human_bytes(o.bytes_this_run),
            o.batches_this_run,
            o.files_skipped_this_run,
            o.rows_malformed_this_run
        );
        if let Some(s) = &o.summary {
            println!(
                "    all time:  {} file(s), {} row(s), {} committed; {} pending",
                s.committed_files,
                s.committed_rows,
                human_bytes(s.committed_bytes),
                s.pending_files
            );
        }
        println!(
            "    table:     {} (version {})",
            o.table,
            o.table_version
                .map(|v| v.to_string())
                .unwrap_or_else(|| "none".into())
        );
    }
}
