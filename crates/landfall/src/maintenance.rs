//! Table maintenance commands, both safe while the daemon runs the stream:
//!
//! - `landfall optimize <stream>` compacts the small files of the stream's Delta table
//!   (`landfall_sink::delta::compact`): one commit that the stream's appends race safely.
//! - `landfall vacuum <stream> [--dry-run]` deletes the files of the table that no reader of a
//!   retained version needs (`landfall_sink::delta::vacuum`): only files no version references
//!   and older than the table's `delta.deletedFileRetentionDuration`, and a batch's new data
//!   files are younger than that.

use crate::out::OutputFormat;
use chrono::Utc;
use landfall_config::{SinkFormat, StreamSpec};
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;

/// A runtime for one command on a Delta stream; `Err`: the exit code (a Parquet sink, or no
/// runtime).
fn delta_runtime(spec: &StreamSpec, command: &str) -> Result<tokio::runtime::Runtime, ExitCode> {
    if spec.sink.format != SinkFormat::Delta {
        eprintln!(
            "error: stream `{}` writes a Parquet directory; {command} is for Delta tables",
            spec.name
        );
        return Err(ExitCode::from(2));
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the runtime: {e}");
            ExitCode::FAILURE
        })
}

/// Run one table operation; its error is printed, naming the stream.
fn block_on<T>(
    spec: &StreamSpec,
    rt: &tokio::runtime::Runtime,
    f: impl std::future::Future<Output = Result<T, landfall_sink::SinkError>>,
) -> Result<T, ExitCode> {
    rt.block_on(f).map_err(|e| {
        eprintln!("error: stream `{}`: {e}", spec.name);
        ExitCode::FAILURE
    })
}

pub fn optimize(spec: &StreamSpec, format: OutputFormat) -> ExitCode {
    let rt = match delta_runtime(spec, "optimize") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let committer = landfall_sink::DeltaCommitter::new(
        &spec.name,
        &spec.sink.location.as_table_uri(),
        spec.sink.options.to_hash_map(),
        spec.sink.target_file_size,
    );
    let opts =
        landfall_sink::delta::compact::CompactOptions::for_target(spec.sink.target_file_size);
    let c = match block_on(spec, &rt, committer.compact(&opts)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    crate::out::finish((|| {
        let mut out = crate::out::stdout();
        match format {
            OutputFormat::Json => {
                let v = json!({
                    "stream": spec.name,
                    "table": spec.sink.location.shown_table_uri(),
                    "version": c.version,
                    "files": c.files,
                    "small_files": c.small_files,
                    "files_removed": c.files_removed,
                    "files_added": c.files_added,
                    "bytes_rewritten": c.bytes_rewritten,
                    "rows": c.rows,
                    "dropped": c.dropped,
                });
                writeln!(out, "{v}")?;
            }
            OutputFormat::Table | OutputFormat::Csv => match c.version {
                Some(v) => writeln!(
                    out,
                    "{}: version {v}: {} small file(s) of {} rewritten into {} ({} byte(s), {} row(s))",
                    spec.sink.location.shown_table_uri(),
                    c.files_removed,
                    c.files,
                    c.files_added,
                    c.bytes_rewritten,
                    c.rows
                )?,
                None if c.dropped => writeln!(
                    out,
                    "{}: dropped: a file it replaced was removed meanwhile; run it again",
                    spec.sink.location.shown_table_uri()
                )?,
                None => writeln!(
                    out,
                    "{}: nothing to compact ({} file(s), {} small, none two in one partition)",
                    spec.sink.location.shown_table_uri(),
                    c.files,
                    c.small_files
                )?,
            },
        }
        out.flush()?;
        Ok(ExitCode::SUCCESS)
    })())
}

pub fn vacuum(spec: &StreamSpec, dry_run: bool, format: OutputFormat) -> ExitCode {
    let rt = match delta_runtime(spec, "vacuum") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let uri = spec.sink.location.as_table_uri();
    let options = spec.sink.options.to_hash_map();
    let vacuumed = landfall_sink::delta::vacuum::vacuum(&uri, &options, dry_run, Utc::now());
    let report = match block_on(spec, &rt, vacuumed) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let bytes: u64 = report.deleted.iter().map(|(_, n)| n).sum();
    crate::out::finish((|| {
        let mut out = crate::out::stdout();
        match format {
            OutputFormat::Json => {
                let v = json!({
                    "stream": spec.name,
                    "table": spec.sink.location.shown_table_uri(),
                    "version": report.version,
                    "retention_hours": report.retention.as_secs() / 3600,
                    "dry_run": report.dry_run,
                    "live_files": report.live_files,
                    "tombstoned_files": report.tombstoned_files,
                    "recent_files": report.recent_files,
                    "deleted_files": report.deleted.len(),
                    "deleted_bytes": bytes,
                    "files": report.deleted.iter().map(|(p, n)| json!({"path": p, "size": n})).collect::<Vec<_>>(),
                });
                writeln!(out, "{v}")?;
            }
            OutputFormat::Table | OutputFormat::Csv => {
                let verb = if report.dry_run {
                    "would delete"
                } else {
                    "deleted"
                };
                for (p, n) in &report.deleted {
                    writeln!(out, "{verb}\t{n}\t{p}")?;
                }
                writeln!(
                    out,
                    "{}: version {}, retention {} h: {verb} {} file(s), {} byte(s); kept {} live, {} removed within the retention, {} newer than the retention",
                    spec.sink.location.shown_table_uri(),
                    report.version,
                    report.retention.as_secs() / 3600,
                    report.deleted.len(),
                    bytes,
                    report.live_files,
                    report.tombstoned_files,
                    report.recent_files
                )?;
            }
        }
        out.flush()?;
        Ok(ExitCode::SUCCESS)
    })())
}
