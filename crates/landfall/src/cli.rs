//! Commands: `run`, `check`, `state`, `streams`, `skip`, `reset`, `optimize`, `vacuum`,
//! `health`.

use crate::out::OutputFormat;
use crate::{admin, daemon, out, report, top};
use clap::{Parser, Subcommand};
use landfall_config::{LogFormat, ValidatedConfig};
use landfall_core::FileState;
use landfall_engine::RunOptions;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "landfall",
    version,
    about = "Exactly-once file ingestion into Delta Lake and Parquet tables"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every configured stream until SIGTERM/SIGINT (or until drained with --available-now).
    Run {
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        /// Drain every stream in rate-limited batches, then exit (non-zero if a stream failed).
        #[arg(long)]
        available_now: bool,
        /// Run only this stream (repeatable).
        #[arg(long = "stream")]
        streams: Vec<String>,
        /// Address of the HTTP endpoints (overrides `server.listen`; `127.0.0.1:0` picks a
        /// free port, logged at start). Only continuous runs serve them.
        #[arg(long, env = "LANDFALL_LISTEN")]
        listen: Option<String>,
        /// `text` or `json` log lines (overrides `server.log_format`).
        #[arg(long, value_parser = ["text", "json"])]
        log_format: Option<String>,
        /// Run only the streams of shard `i/N` (a stable hash of the stream name), or `auto`:
        /// the index from the host name's `-<i>` ending (a StatefulSet pod), N from
        /// LANDFALL_SHARDS.
        #[arg(long)]
        shard: Option<String>,
    },
    /// Probe a running daemon's `/healthz` (exit 0 when healthy): for container health checks.
    Health {
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        /// The daemon's address (default: `server.listen` of the config).
        #[arg(long, env = "LANDFALL_LISTEN")]
        listen: Option<String>,
    },
    /// A terminal view of a running daemon's streams (its HTTP API), refreshed every second:
    /// state, backlog, last batch, and the selected stream's last hour and batches. `q` quits.
    Top {
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        /// The daemon's address (default: `server.listen` of the config).
        #[arg(long, env = "LANDFALL_LISTEN")]
        listen: Option<String>,
    },
    /// Validate the configuration without running anything.
    Check {
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
    },
    /// Print the per-file state of a stream, one row per tracked file in key order (the
    /// path), as the ledger is read.
    State {
        stream: String,
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
        /// Only files in this state (discovered, in_batch, committed, archived, skipped,
        /// failed).
        #[arg(long)]
        state: Option<String>,
    },
    /// List the streams with their backlog, last batch and status.
    Streams {
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// List the storage locations: event cache, consumer, queue depth, and how far behind each
    /// file-events stream reading them is.
    Locations {
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// The stream's schema versions (0, 1, ...), each with its reason and the file that
    /// caused it.
    Schema {
        stream: String,
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// Mark one file skipped (the stream must be stopped): a batch that stopped on it runs
    /// again without it at the next start.
    Skip {
        stream: String,
        /// The file as `landfall state` shows it (or its object path or ledger key).
        path: String,
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        /// Why, recorded with the skip.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Show, create or remove the cloud resources of an S3 notification stream (or, with
    /// --location, a file-events location) without queue_url (queue, SNS topic, bucket
    /// notification).
    Notifications {
        #[arg(value_enum)]
        action: crate::notify::Action,
        #[arg(required_unless_present = "location", conflicts_with = "location")]
        stream: Option<String>,
        /// A `[locations.<name>]` with file_events = true instead of a stream.
        #[arg(long)]
        location: Option<String>,
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
    },
    /// Set a stream's state directory aside (the stream must be stopped); the next start
    /// begins a new state after the table's batches.
    Reset {
        stream: String,
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
    },
    /// Compact the small files of the stream's Delta table (bin-packing per partition toward
    /// `target_file_size`, one commit). Safe while the daemon runs.
    Optimize {
        stream: String,
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// Delete the files of the stream's Delta table that no reader of a retained version
    /// needs (older than `delta.deletedFileRetentionDuration`, 7 days by default). Safe while
    /// the daemon runs.
    Vacuum {
        stream: String,
        #[arg(long, short, env = "LANDFALL_CONFIG", default_value = "landfall.toml")]
        config: PathBuf,
        /// List what would be deleted; delete nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
}

/// The daemon's address: `--listen`, else `server.listen` of the config.
fn listen_of(config: &Path, listen: Option<String>) -> Result<String, ExitCode> {
    match listen {
        Some(l) => Ok(l),
        None => load(config).map(|cfg| cfg.server.listen),
    }
}

/// The spec of `stream` in `config`, or the exit code after saying what is wrong.
fn stream_spec(config: &Path, stream: &str) -> Result<landfall_config::StreamSpec, ExitCode> {
    let cfg = load(config)?;
    cfg.stream(stream).cloned().ok_or_else(|| {
        eprintln!(
            "error: stream `{stream}` is not defined in {}",
            config.display()
        );
        ExitCode::from(2)
    })
}

fn load(config: &Path) -> Result<ValidatedConfig, ExitCode> {
    landfall_config::load(config).map_err(|e| {
        match e {
            // Parse errors already name the file.
            landfall_config::ConfigError::Parse { .. } => {
                for line in e.to_string().lines() {
                    eprintln!("error: {line}");
                }
            }
            _ => eprintln!("error: {}: {e}", config.display()),
        }
        ExitCode::from(2)
    })
}

/// Logging to stderr: `text` for people (one short line per batch, colours only on a
/// terminal unless `NO_COLOR` is set), `json` for log shippers (each batch's full progress
/// record too).
fn init_logging(format: LogFormat, bars: Option<&crate::bars::Bars>) {
    use std::io::IsTerminal;
    let mut filter = tracing_subscriber::EnvFilter::try_from_env("LANDFALL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,delta_kernel=warn,delta_kernel::snapshot::builder=off,delta_kernel::log_segment=off,delta_kernel_default_engine=warn"));
    if format == LogFormat::Text {
        let off = format!("{}=off", landfall_engine::events::PROGRESS_TARGET);
        filter = filter.add_directive(off.parse().expect("a valid directive"));
    }
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match (format, bars) {
        (LogFormat::Json, _) => builder.with_writer(std::io::stderr).json().init(),
        (LogFormat::Text, Some(b)) => builder.with_writer(b.writer()).init(),
        (LogFormat::Text, None) => builder
            .with_ansi(
                std::io::stderr().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
            )
            .with_writer(std::io::stderr)
            .init(),
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { config } => match load(&config) {
            Ok(cfg) => {
                println!(
                    "{}: ok ({} stream(s): {})",
                    config.display(),
                    cfg.streams.len(),
                    cfg.streams
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Command::Run {
            config,
            available_now,
            streams,
            listen,
            shard,
            log_format,
        } => {
            let shard = match shard
                .map(|s| {
                    landfall_engine::Shard::parse(
                        &s,
                        daemon::hostname().as_deref(),
                        std::env::var("LANDFALL_SHARDS").ok().as_deref(),
                    )
                })
                .transpose()
            {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            let mut cfg = match load(&config) {
                Ok(c) => c,
                Err(code) => return code,
            };
            if let Some(l) = listen {
                cfg.server.listen = l;
            }
            for s in &streams {
                if cfg.stream(s).is_none() {
                    eprintln!("error: stream `{s}` is not defined in {}", config.display());
                    return ExitCode::from(2);
                }
            }
            if let Some(f) = log_format {
                cfg.server.log_format = if f == "json" {
                    LogFormat::Json
                } else {
                    LogFormat::Text
                };
            }
            // Progress bars for a drain on a terminal with human log lines.
            use std::io::IsTerminal;
            let bars = (available_now
                && cfg.server.log_format == LogFormat::Text
                && std::io::stderr().is_terminal())
            .then(crate::bars::Bars::new);
            init_logging(cfg.server.log_format, bars.as_ref());
            daemon::run(
                cfg,
                config,
                bars,
                RunOptions {
                    available_now,
                    only: streams,
                    shard,
                },
            )
        }
        Command::Health { config, listen } => match listen_of(&config, listen) {
            Ok(listen) => daemon::health(&listen),
            Err(code) => code,
        },
        Command::Top { config, listen } => match listen_of(&config, listen) {
            Ok(listen) => top::run(&listen),
            Err(code) => code,
        },
        Command::Skip {
            stream,
            path,
            config,
            reason,
        } => match stream_spec(&config, &stream) {
            Ok(spec) => admin::skip(&spec, &path, reason),
            Err(code) => code,
        },
        Command::Notifications {
            action,
            stream,
            location,
            config,
        } => match (stream, location) {
            (Some(stream), _) => match stream_spec(&config, &stream) {
                Ok(spec) => crate::notify::run(&spec, action),
                Err(code) => code,
            },
            (None, Some(location)) => match load(&config) {
                Ok(cfg) => match cfg.location(&location) {
                    Some(l) => crate::notify::run_location(l, action),
                    None => {
                        eprintln!("error: no [locations.{location}] in {}", config.display());
                        ExitCode::from(2)
                    }
                },
                Err(code) => code,
            },
            (None, None) => ExitCode::from(2),
        },
        Command::Optimize {
            stream,
            config,
            format,
        } => match stream_spec(&config, &stream) {
            Ok(spec) => crate::maintenance::optimize(&spec, format),
            Err(code) => code,
        },
        Command::Vacuum {
            stream,
            config,
            dry_run,
            format,
        } => match stream_spec(&config, &stream) {
            Ok(spec) => crate::maintenance::vacuum(&spec, dry_run, format),
            Err(code) => code,
        },
        Command::Reset { stream, config } => match stream_spec(&config, &stream) {
            Ok(spec) => admin::reset(&spec),
            Err(code) => code,
        },
        Command::State {
            stream,
            config,
            format,
            state,
        } => {
            let spec = match stream_spec(&config, &stream) {
                Ok(s) => s,
                Err(code) => return code,
            };
            let filter = match state.as_deref().map(|s| FileState::parse(s).ok_or(s)) {
                None => None,
                Some(Ok(s)) => Some(s),
                Some(Err(bad)) => {
                    let all: Vec<_> = FileState::ALL.iter().map(|s| s.as_str()).collect();
                    eprintln!(
                        "error: --state `{bad}` is not a state (one of: {})",
                        all.join(", ")
                    );
                    return ExitCode::from(2);
                }
            };
            out::finish(report::print_state(&spec, filter, format))
        }
        Command::Streams { config, format } => match load(&config) {
            Ok(cfg) => out::finish(report::print_streams(&cfg, format)),
            Err(code) => code,
        },
        Command::Schema {
            stream,
            config,
            format,
        } => match stream_spec(&config, &stream) {
            Ok(spec) => out::finish(report::print_schema(&spec, format)),
            Err(code) => code,
        },
        Command::Locations { config, format } => match load(&config) {
            Ok(cfg) => out::finish(report::print_locations(&cfg, format)),
            Err(code) => code,
        },
    }
}
