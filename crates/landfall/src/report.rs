//! What the commands print: the run summary, `landfall state`, `streams`, `schema` and
//! `locations`, through [`RowWriter`] (typed JSON, tables, CSV) and [`out`] (a closed pipe
//! ends the command quietly).

use crate::out;
use crate::out::OutputFormat;
use crate::rows::RowWriter;
use chrono::{DateTime, SecondsFormat, Utc};
use landfall_config::{StreamSpec, ValidatedConfig};
use landfall_core::seams::FileFilter;
use landfall_core::{FileRecord, FileState, StateStore};
use landfall_engine::StreamOutcome;
use landfall_engine::stream::memory::{
    DISCOVERY_NOTE_META, REQUESTS_META, STATUS_META, StreamStatus,
};
use serde_json::Value;
use std::io::{self, Write};
use std::process::ExitCode;

/// The columns of `landfall state`, after Auto Loader's `cloud_files_state` (`size` a BIGINT,
/// `batch_id` and `table_version` numbers, timestamps ISO 8601 strings, absent values null).
const STATE_HEADER: &[&str] = &[
    "path",
    "size",
    "create_time",
    "discovery_time",
    "processed_time",
    "commit_time",
    "archive_time",
    "archive_mode",
    "move_location",
    "ingestion_state",
    "state",
    "batch_id",
    "table_version",
    "reason",
];

/// A timestamp cell: ISO 8601 with milliseconds, or null.
fn ts(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| {
        Value::from(t.to_rfc3339_opts(SecondsFormat::Millis, true))
    })
}

fn file_row(spec: &StreamSpec, r: &FileRecord) -> Vec<Value> {
    vec![
        Value::from(landfall_engine::display_path(
            &spec.source.url,
            &r.meta.path,
        )),
        Value::from(r.meta.size),
        ts(Some(r.meta.modified)),
        ts(Some(r.discovery_time)),
        ts(r.processed_time),
        ts(r.commit_time),
        ts(r.archive_time),
        opt_text(r.archive_mode.clone()),
        opt_text(r.move_location.clone()),
        r.state.ingestion_state().map_or(Value::Null, Value::from),
        Value::from(r.state.as_str()),
        r.batch_id.map_or(Value::Null, Value::from),
        r.table_version.map_or(Value::Null, Value::from),
        r.skip
            .as_ref()
            .map(|s| s.to_string())
            .or_else(|| r.error.clone())
            .map_or(Value::Null, Value::from),
    ]
}

/// `None` for an empty string (an absent value).
fn opt_text(s: Option<String>) -> Value {
    s.filter(|s| !s.is_empty()).map_or(Value::Null, Value::from)
}

/// `landfall schema <stream>`: every schema version, oldest first, with its reason and the
/// file that caused it.
pub fn print_schema(spec: &StreamSpec, format: OutputFormat) -> io::Result<ExitCode> {
    let ledger = match landfall_state::open_rocks_read_only(&spec.name, &spec.state_dir) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: stream `{}`: {e}", spec.name);
            return Ok(ExitCode::FAILURE);
        }
    };
    let versions = match landfall_engine::schema::history(spec, &ledger) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {}", e.message);
            return Ok(ExitCode::FAILURE);
        }
    };
    let mut out = out::stdout();
    if versions.is_empty() && format == OutputFormat::Table {
        writeln!(
            out,
            "stream `{}` has no schema yet (it is inferred when the first files arrive)",
            spec.name
        )?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    const HEADER: &[&str] = &[
        "version",
        "created_at",
        "reason",
        "file",
        "schema",
        "rescued_column",
    ];
    let mut rows = RowWriter::new(out, HEADER, format)?;
    for v in &versions {
        rows.row(vec![
            Value::from(v.version),
            ts(v.created_at),
            Value::from(v.reason.clone()),
            opt_text(v.file.clone()),
            Value::from(v.schema.clone()),
            opt_text(v.rescued_column.clone()),
        ])?;
    }
    rows.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// `landfall state <stream>`: one row per tracked file, in key order (the path, or
/// `path@version` with `allow_overwrites`), printed as the ledger is read: constant memory
/// whatever its size.
pub fn print_state(
    spec: &StreamSpec,
    state: Option<FileState>,
    format: OutputFormat,
) -> io::Result<ExitCode> {
    let ledger = match landfall_state::open_rocks_read_only(&spec.name, &spec.state_dir) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: stream `{}`: {e}", spec.name);
            return Ok(ExitCode::FAILURE);
        }
    };
    let filter = FileFilter {
        state,
        discovered_after: None,
    };
    let mut rows = RowWriter::new(out::stdout(), STATE_HEADER, format)?;
    for rec in ledger.file_records(filter) {
        match rec {
            Ok(r) => rows.row(file_row(spec, &r))?,
            Err(e) => {
                rows.abandon()?;
                eprintln!("error: {e}");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    rows.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// `landfall streams`: each stream's backlog, last batch and status.
pub fn print_streams(cfg: &ValidatedConfig, format: OutputFormat) -> io::Result<ExitCode> {
    const HEADER: &[&str] = &[
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
        "error_kind",
        "requests",
    ];
    let mut rows = RowWriter::new(out::stdout(), HEADER, format)?;
    for spec in &cfg.streams {
        let mut row = vec![
            Value::from(spec.name.clone()),
            Value::from(spec.source.shown()),
            Value::from(spec.sink.location.shown_table_uri()),
        ];
        let ledger = landfall_state::open_rocks_read_only(&spec.name, &spec.state_dir);
        match ledger.as_ref().map(|l| l.summary()) {
            Ok(Ok(s)) => {
                row.push(Value::from(s.pending_files));
                row.push(Value::from(s.pending_bytes));
                row.push(Value::from(s.committed_files));
                match &s.last_batch {
                    Some(b) => {
                        row.push(Value::from(b.batch_id));
                        row.push(Value::from(b.files.len()));
                        row.push(Value::from(if b.committed.is_some() {
                            "committed"
                        } else {
                            "open"
                        }));
                        row.push(ts(b.committed.as_ref().map(|c| c.committed_at)));
                    }
                    None => row.extend([Value::Null, Value::Null, Value::Null, Value::Null]),
                }
                let skipped = s
                    .files_by_state
                    .iter()
                    .find(|(st, _)| *st == FileState::Skipped)
                    .map_or(0, |(_, n)| *n);
                row.push(Value::from(skipped));
                let last_commit = s
                    .last_batch
                    .as_ref()
                    .and_then(|b| b.committed.as_ref())
                    .map(|c| c.committed_at);
                let (status, kind) = status(ledger.as_ref().ok(), last_commit);
                row.push(Value::from(status));
                row.push(kind);
                row.push(requests(ledger.as_ref().ok()));
            }
            _ => {
                row.extend(std::iter::repeat_n(Value::Null, 8));
                row.push(Value::from("never run"));
                row.extend([Value::Null, Value::Null]);
            }
        }
        rows.row(row)?;
    }
    rows.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// `landfall locations`: each location's cache, consumer and readers. JSON shows the whole
/// report of each location (as `GET /api/v1/locations`), a table one line each.
pub fn print_locations(cfg: &ValidatedConfig, format: OutputFormat) -> io::Result<ExitCode> {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let positions = |s: &landfall_config::StreamSpec| {
        landfall_state::open_rocks_read_only(&s.name, &s.state_dir)
            .ok()
            .and_then(|l| l.cursor().ok().flatten())
    };
    let reports = rt.block_on(landfall_engine::locations::report(
        cfg, None, &positions, true,
    ));
    let mut out = out::stdout();
    if format == OutputFormat::Json {
        serde_json::to_writer_pretty(&mut out, &reports)?;
        writeln!(out)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    const HEADER: &[&str] = &[
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
    let mut rows = RowWriter::new(out, HEADER, format)?;
    for r in &reports {
        let cache = r.cache.as_ref();
        rows.row(vec![
            Value::from(r.name.clone()),
            Value::from(r.url.clone()),
            Value::from(r.file_events),
            opt_text(r.queue.clone()),
            r.queue_depth.map_or(Value::Null, Value::from),
            cache.map_or(Value::Null, |c| Value::from(c.events)),
            ts(cache.and_then(|c| c.oldest)),
            ts(cache.and_then(|c| c.newest)),
            opt_text(r.last_round.clone()),
            Value::from(match (&r.error, &r.consumer_error) {
                (Some(e), _) => e.clone(),
                (None, Some(c)) => format!("failing since {}: {}", c.at.to_rfc3339(), c.error),
                (None, None) => "ok".into(),
            }),
            Value::from(
                r.streams
                    .iter()
                    .map(|(name, p)| match (p.position, p.behind) {
                        (Some(pos), Some(b)) => format!("{name}@{pos} ({b} behind)"),
                        _ => format!("{name} (no position yet)"),
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ])?;
    }
    rows.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// The stream's storage and queue requests of all runs, a count by operation
/// (`{"GET": 5, "LIST": 3}`; a table shows `GET=5 LIST=3`), or null before any.
fn requests(ledger: Option<&impl StateStore>) -> Value {
    let Some(raw) = ledger.and_then(|l| l.meta(REQUESTS_META).ok().flatten()) else {
        return Value::Null;
    };
    serde_json::from_str::<std::collections::BTreeMap<String, u64>>(&raw)
        .ok()
        .filter(|m| !m.is_empty())
        .map_or(Value::Null, |m| {
            Value::from(serde_json::Map::from_iter(
                m.into_iter().map(|(op, n)| (op, Value::from(n))),
            ))
        })
}

/// `ok`, or the last error a run ended with while no batch committed after it, with its kind
/// (`table_ahead`, `foreign_commit`...: see `ErrorKind`; null when ok).
fn status(ledger: Option<&impl StateStore>, last_commit: Option<DateTime<Utc>>) -> (String, Value) {
    // A stream whose discovery does not read its events (a file-events stream listing, a
    // notification stream that cannot check its bucket entry) says so.
    let ok = match ledger.and_then(|l| l.meta(DISCOVERY_NOTE_META).ok().flatten()) {
        Some(note) if !note.is_empty() => format!("ok ({note})"),
        _ => "ok".into(),
    };
    let Some(raw) = ledger.and_then(|l| l.meta(STATUS_META).ok().flatten()) else {
        return (ok, Value::Null);
    };
    match serde_json::from_str::<StreamStatus>(&raw) {
        Ok(st) if last_commit.is_none_or(|c| c < st.at) => (
            format!(
                "{}: {}",
                if st.fatal { "stopped" } else { "failing" },
                st.error
            ),
            st.kind.map_or(Value::Null, |k| {
                serde_json::to_value(k).expect("a kind serialises")
            }),
        ),
        _ => (ok, Value::Null),
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
            landfall_core::size::human_bytes(o.bytes_this_run),
            o.batches_this_run,
            o.files_skipped_this_run,
            o.rows_malformed_this_run
        );
        if let Some(s) = &o.summary {
            println!(
                "    all time:  {} file(s), {} row(s), {} committed; {} pending",
                s.committed_files,
                s.committed_rows,
                landfall_core::size::human_bytes(s.committed_bytes),
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
