//! From the file as written ([`LandfallConfig`]) to what the engine runs ([`StreamSpec`]):
//! parse every duration, size, glob, time, URL and schema, and check the cross-cutting rules
//! (one state directory per stream, no state directory inside a table, no table inside its own
//! source). Every problem is collected, so `landfall check` lists them all at once.

mod clean_source;
mod cross;
mod records;
mod stream;

use crate::error::{ConfigError, ValidationError};
use crate::model::*;
use crate::spec::*;
use crate::store::{Location, StoreConfig, StoreOptions};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// Auto Loader refuses a shorter `maxFileAge`: shorter ages make old files look new again.
pub const MIN_FILE_AGE: Duration = Duration::from_secs(14 * 24 * 3600);

/// The bounds of `server.chart_step`.
pub const MIN_CHART_STEP: Duration = Duration::from_millis(100);
pub const MAX_CHART_STEP: Duration = Duration::from_secs(600);

/// Incremental listings between two full ones unless `full_listing_interval` says otherwise
/// (Auto Loader forces a full listing after 7 incremental ones).
pub const DEFAULT_FULL_LISTING_INTERVAL: u32 = 7;

/// Names a key of the stream being validated (`streams.<name>.<field>`).
pub(super) type K<'a> = &'a dyn Fn(&str) -> String;

pub(super) struct Ctx<'a> {
    pub(super) errors: Vec<ValidationError>,
    pub(super) cfg: &'a LandfallConfig,
}

impl Ctx<'_> {
    pub(super) fn err(&mut self, key: impl Into<String>, reason: impl Into<String>) {
        self.errors.push(ValidationError::new(key, reason));
    }

    pub(super) fn ok<T>(&mut self, key: impl Into<String>, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.err(key, e);
                None
            }
        }
    }

    pub(super) fn store(
        &mut self,
        key: String,
        name: &Option<String>,
    ) -> Option<Option<StoreConfig>> {
        match name {
            None => Some(None),
            Some(n) => match self.cfg.stores.get(n) {
                Some(s) => Some(Some(s.clone())),
                None => {
                    let known: Vec<_> = self.cfg.stores.keys().cloned().collect();
                    self.err(
                        key,
                        format!("store `{n}` is not defined (defined: {})", list(&known)),
                    );
                    None
                }
            },
        }
    }
}

pub(super) fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

pub(super) fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration ({e}); write e.g. 10s, 5m, 90d"))
}

pub(super) fn instant(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| {
            format!("`{s}` is not an RFC 3339 time ({e}); write e.g. 2024-01-31T00:00:00Z")
        })
}

pub(super) fn single_char(s: &str) -> Result<u8, String> {
    match s.as_bytes() {
        [c] if c.is_ascii() => Ok(*c),
        _ => Err(format!("`{s}` must be exactly one ASCII character")),
    }
}

/// Letters, digits, `_`, `-` and `.`, at most 100, and not dots only (`.` and `..` would name
/// the state root or its parent as a state directory, and a URL path resolves them away).
pub(super) fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 100
        && !n.bytes().all(|b| b == b'.')
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
}

/// Validate a parsed file.
pub fn validate(cfg: LandfallConfig) -> Result<ValidatedConfig, ConfigError> {
    let mut ctx = Ctx {
        errors: Vec::new(),
        cfg: &cfg,
    };
    if cfg.streams.is_empty() {
        ctx.err(
            "streams",
            "no stream is defined (add a [streams.<name>] table)",
        );
    }
    if cfg.server.listen.parse::<std::net::SocketAddr>().is_err() {
        ctx.err(
            "server.listen",
            format!(
                "`{}` is not a socket address (e.g. 127.0.0.1:8686)",
                cfg.server.listen
            ),
        );
    }
    let chart_step = ctx.ok(
        "server.chart_step",
        duration(&cfg.server.chart_step).and_then(|d| {
            if (MIN_CHART_STEP..=MAX_CHART_STEP).contains(&d) {
                Ok(d)
            } else {
                Err(format!(
                    "`{}` is outside 100ms to 10m (the default is 10s)",
                    cfg.server.chart_step
                ))
            }
        }),
    );
    let health = validate_health(&mut ctx);
    let locations = validate_locations(&mut ctx);
    let mut streams = Vec::new();
    for (name, s) in &cfg.streams {
        if let Some(spec) = stream::validate_stream(&mut ctx, name, s, &locations) {
            streams.push(spec);
        }
    }
    cross::cross_checks(&mut ctx, &streams, &locations);
    if ctx.errors.is_empty() {
        Ok(ValidatedConfig {
            server: cfg.server.clone(),
            chart_step: chart_step.unwrap_or(Duration::from_secs(10)),
            streams,
            locations,
            health_table: health.flatten(),
        })
    } else {
        Err(ConfigError::Invalid(ctx.errors))
    }
}

/// `[monitoring]`: the health table's location, store options and interval.
fn validate_health(ctx: &mut Ctx) -> Option<Option<HealthTable>> {
    let m = &ctx.cfg.monitoring;
    let interval = ctx.ok(
        "monitoring.health_table_interval",
        duration(&m.health_table_interval).and_then(|d| {
            if d.is_zero() {
                Err("must be longer than 0s".to_string())
            } else {
                Ok(d)
            }
        }),
    );
    let Some(path) = &m.health_table else {
        return Some(None);
    };
    let location = ctx.ok("monitoring.health_table", Location::parse(path));
    if let Some(loc) = &location {
        refuse_backslash_in_local_delta(ctx, "monitoring.health_table".into(), loc);
    }
    let store = ctx.store(
        "monitoring.health_table_store".into(),
        &m.health_table_store.clone(),
    );
    let (location, store, interval) = (location?, store?, interval?);
    Some(Some(HealthTable {
        options: StoreOptions::build(location.kind, store.as_ref(), |v| std::env::var(v).ok()),
        location,
        interval,
    }))
}

/// `[locations.<name>]`: each on its own, then file-events locations that nest (one bucket
/// notification each: S3 refuses overlapping ones, and a file would be cached twice).
fn validate_locations(ctx: &mut Ctx) -> Vec<crate::LocationSpec> {
    let mut out: Vec<crate::LocationSpec> = Vec::new();
    for (name, l) in &ctx.cfg.locations {
        let key = |f: &str| format!("locations.{name}.{f}");
        if !valid_name(name) {
            ctx.err(
                format!("locations.{name}"),
                "location names may use only letters, digits, `_`, `-` and `.` (at most 100), and not \
                 dots only",
            );
            continue;
        }
        let Some(store) = ctx.store(key("store"), &l.store) else {
            continue;
        };
        match crate::locations::validate_location(
            name,
            l,
            store.as_ref(),
            &ctx.cfg.server.state_dir,
        ) {
            Ok(spec) => {
                if let Some(other) = out.iter().find(|o| {
                    o.queue.is_some()
                        && spec.queue.is_some()
                        && (o.holds(&spec.url) || spec.holds(&o.url))
                }) {
                    ctx.err(
                        key("url"),
                        format!("nests with location `{}` ({}); two file-events locations may not overlap (one would cache the other's files twice, and S3 refuses overlapping notifications)", other.name, other.url.shown()),
                    );
                }
                out.push(spec);
            }
            Err(errors) => {
                for (k, reason) in errors {
                    ctx.err(key(&k), reason);
                }
            }
        }
    }
    out
}

/// delta-rs lists a local table's log with `\` read as a path separator: a Delta table under
/// such a directory is created, then cannot be read back (tested in local_delta.rs). Refused
/// before anything is written.
pub(super) fn refuse_backslash_in_local_delta(ctx: &mut Ctx, key: String, loc: &Location) {
    if let Some(path) = loc.local_path()
        && path.to_string_lossy().contains('\\')
    {
        ctx.err(
            key,
            format!(
                "{} holds a `\\`, which the Delta library reads as a path separator on a local file system (the table would be written and then not found); use a directory without one",
                path.display()
            ),
        );
    }
}
