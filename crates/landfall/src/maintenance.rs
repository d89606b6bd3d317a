//! Table maintenance commands: `landfall vacuum <stream> [--dry-run]` deletes the files of a
//! stream's Delta table that no reader of a retained version needs (see
//! `landfall_sink::delta::vacuum` for what is kept). It may run while the daemon runs the
//! stream: it deletes only files no version references and older than the table's
//! `delta.deletedFileRetentionDuration`, and a batch's new data files are younger than that.

use crate::out::OutputFormat;
use chrono::Utc;
use landfall_config::{SinkFormat, StreamSpec};
use serde_json::json;
use std::io::Write;
use std::process::ExitCode;

pub fn vacuum(spec: &StreamSpec, dry_run: bool, format: OutputFormat) -> ExitCode {
    if spec.sink.format != SinkFormat::Delta {
        eprintln!(
            "error: stream `{}` writes a Parquet directory; vacuum is for Delta tables",
            spec.name
        );
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let uri = spec.sink.location.as_table_uri();
    let options = spec.sink.options.to_hash_map();
    let report = match rt.block_on(landfall_sink::delta::vacuum::vacuum(
        &uri,
        &options,
        dry_run,
        Utc::now(),
    )) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: stream `{}`: {e}", spec.name);
            return ExitCode::FAILURE;
        }
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
