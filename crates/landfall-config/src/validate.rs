//! From the file as written ([`LandfallConfig`]) to what the engine runs ([`StreamSpec`]):
//! parse every duration, size, glob, time, URL and schema, and check the cross-cutting rules
//! (one state directory per stream, no state directory inside a table, no table inside its own
//! source). Every problem is collected, so `landfall check` lists them all at once.

use crate::error::{ConfigError, ValidationError};
use crate::model::*;
use crate::store::{Location, StoreOptions};
use crate::{DiscoveryMode, DiscoverySpec};
use arrow_schema::SchemaRef;
use chrono::{DateTime, Utc};
use landfall_core::{BatchLimits, IncrementalListing};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Auto Loader refuses a shorter `maxFileAge`: shorter ages make old files look new again.
pub const MIN_FILE_AGE: Duration = Duration::from_secs(14 * 24 * 3600);

/// Incremental listings between two full ones unless `full_listing_interval` says otherwise
/// (Auto Loader forces a full listing after 7 incremental ones).
pub const DEFAULT_FULL_LISTING_INTERVAL: u32 = 7;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// The next batch as soon as the last one ends; idle streams wait `poll_interval`.
    Continuous,
    /// At most one batch per interval.
    ProcessingTime(Duration),
    /// Drain what is present in rate-limited batches, then stop.
    AvailableNow,
}

#[derive(Debug, Clone)]
pub struct SinkSpec {
    pub format: SinkFormat,
    pub location: Location,
    pub options: StoreOptions,
    pub partition_by: Vec<String>,
    pub target_file_size: u64,
}

/// The Delta table that receives progress records.
#[derive(Debug, Clone)]
pub struct HealthTable {
    pub location: Location,
    pub options: StoreOptions,
    pub interval: Duration,
}

/// What a malformed record does (`mode`), as Spark's parse modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordMode {
    /// Kept, with nulls where values do not fit (rescued when there is a rescued column),
    /// counted.
    Permissive,
    /// Left out, counted.
    DropMalformed,
    /// Its file is corrupt (`ignore_corrupt_files` decides).
    FailFast,
}

#[derive(Debug, Clone)]
pub struct StreamSpec {
    pub name: String,
    pub source: Location,
    pub source_options: StoreOptions,
    pub format: Format,
    pub schema: Option<SchemaRef>,
    /// `schema_hints`, parsed.
    pub schema_hints: Vec<landfall_core::ddl::Hint>,
    /// `schema_evolution_mode`, its default resolved.
    pub evolution: crate::EvolutionMode,
    /// The rescued-data column the stream asks for (default resolved; `None`: off).
    pub rescued_column: Option<String>,
    pub infer_column_types: bool,
    pub sample_files: usize,
    pub sample_bytes: u64,
    pub partition_columns: Option<Vec<String>>,
    pub sink: SinkSpec,
    pub trigger: Trigger,
    pub limits: BatchLimits,
    pub glob: Option<(String, globset::GlobMatcher)>,
    pub modified_after: Option<DateTime<Utc>>,
    pub modified_before: Option<DateTime<Utc>>,
    pub include_existing_files: bool,
    pub max_file_age: Option<Duration>,
    pub allow_overwrites: bool,
    pub ignore_missing_files: bool,
    pub ignore_corrupt_files: bool,
    pub state_dir: PathBuf,
    pub poll_interval: Duration,
    /// Whether listings may resume after the discovery cursor.
    pub incremental_listing: IncrementalListing,
    /// Incremental listings between two forced full listings (at least 1).
    pub full_listing_interval: u32,
    pub csv: CsvOptions,
    pub json: JsonOptions,
    /// `mode`: what a malformed record does.
    pub mode: RecordMode,
    /// `bad_records_path`: where malformed records are written, and its store options.
    pub bad_records: Option<(Location, StoreOptions)>,
    /// `format = "xml"`: row tag, attribute prefix and value tag.
    pub xml: XmlOptions,
    /// `_metadata` fields to add (validated names).
    pub metadata_columns: Vec<String>,
    pub text: TextOptions,
    /// `binary_file`: files larger are skipped (`too_large`).
    pub binary_max_size: u64,
    pub discovery: crate::DiscoverySpec,
    /// Notification mode: a listing at this interval catches events never delivered.
    pub backfill_interval: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct ValidatedConfig {
    pub server: ServerConfig,
    pub streams: Vec<StreamSpec>,
    /// `[locations.<name>]`, in name order.
    pub locations: Vec<crate::LocationSpec>,
    /// `[monitoring] health_table`, when set.
    pub health_table: Option<HealthTable>,
}

impl ValidatedConfig {
    pub fn stream(&self, name: &str) -> Option<&StreamSpec> {
        self.streams.iter().find(|s| s.name == name)
    }

    pub fn location(&self, name: &str) -> Option<&crate::LocationSpec> {
        self.locations.iter().find(|l| l.name == name)
    }
}

struct Ctx<'a> {
    errors: Vec<ValidationError>,
    cfg: &'a LandfallConfig,
}

impl Ctx<'_> {
    fn err(&mut self, key: impl Into<String>, reason: impl Into<String>) {
        self.errors.push(ValidationError::new(key, reason));
    }

    fn ok<T>(&mut self, key: impl Into<String>, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.err(key, e);
                None
            }
        }
    }

    fn store(&mut self, key: String, name: &Option<String>) -> Option<Option<StoreConfig>> {
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

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration ({e}); write e.g. 10s, 5m, 90d"))
}

fn instant(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| {
            format!("`{s}` is not an RFC 3339 time ({e}); write e.g. 2024-01-31T00:00:00Z")
        })
}

fn single_char(s: &str) -> Result<u8, String> {
    match s.as_bytes() {
        [c] if c.is_ascii() => Ok(*c),
        _ => Err(format!("`{s}` must be exactly one ASCII character")),
    }
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 100
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
    let health = validate_health(&mut ctx);
    let locations = validate_locations(&mut ctx);
    let mut streams = Vec::new();
    for (name, s) in &cfg.streams {
        if let Some(spec) = validate_stream(&mut ctx, name, s, &locations) {
            streams.push(spec);
        }
    }
    cross_checks(&mut ctx, &streams, &locations);
    if ctx.errors.is_empty() {
        Ok(ValidatedConfig {
            server: cfg.server.clone(),
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
                "location names may use only letters, digits, `_`, `-` and `.` (at most 100)",
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
                        format!("nests with location `{}` ({}); two file-events locations may not overlap (one would cache the other's files twice, and S3 refuses overlapping notifications)", other.name, other.url.url),
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

/// The file-events location holding `source` (reached with `options`), if any.
fn events_location<'a>(
    locations: &'a [crate::LocationSpec],
    source: &Location,
    options: &StoreOptions,
) -> Option<&'a crate::LocationSpec> {
    locations
        .iter()
        .find(|l| l.queue.is_some() && l.holds_source(source, options))
}

fn validate_stream(
    ctx: &mut Ctx,
    name: &str,
    s: &StreamConfig,
    locations: &[crate::LocationSpec],
) -> Option<StreamSpec> {
    let k = |field: &str| format!("streams.{name}.{field}");
    let before = ctx.errors.len();
    if !valid_name(name) {
        ctx.err(
            format!("streams.{name}"),
            "stream names may use only letters, digits, `_`, `-` and `.` (at most 100)",
        );
    }
    let source = ctx.ok(k("source"), Location::parse(&s.source));
    let source_store = ctx.store(k("source_store"), &s.source_store);
    let fixed = matches!(s.format, Format::Text | Format::BinaryFile);
    if fixed && s.schema.is_some() {
        ctx.err(
            k("schema"),
            format!(
                "format `{}` has a fixed schema ({}); remove `schema`",
                s.format.as_str(),
                if s.format == Format::Text {
                    "value STRING"
                } else {
                    "path STRING, modification_time TIMESTAMP, length BIGINT, content BINARY"
                }
            ),
        );
    }
    const METADATA: [&str; 6] = landfall_core::METADATA_FIELDS;
    let mut seen_meta = std::collections::HashSet::new();
    for m in &s.metadata_columns {
        if !METADATA.contains(&m.as_str()) {
            ctx.err(
                k("metadata_columns"),
                format!(
                    "`{m}` is not a file metadata field (one of: {})",
                    METADATA.join(", ")
                ),
            );
        } else if !seen_meta.insert(m) {
            ctx.err(k("metadata_columns"), format!("`{m}` is listed twice"));
        }
    }
    let mode = match s.mode.as_str() {
        "permissive" => RecordMode::Permissive,
        "fail_fast" => RecordMode::FailFast,
        "drop_malformed" => RecordMode::DropMalformed,
        other => {
            ctx.err(
                k("mode"),
                format!("`{other}` is not a mode (permissive, drop_malformed, fail_fast)"),
            );
            RecordMode::Permissive
        }
    };
    match (&s.xml.row_tag, s.format) {
        (None, Format::Xml) => ctx.err(
            k("xml.row_tag"),
            "is required for format = \"xml\" (the element that is one row)",
        ),
        (Some(t), Format::Xml)
            if t.is_empty() || t.contains(|c: char| c.is_whitespace() || "<>/:".contains(c)) =>
        {
            ctx.err(
                k("xml.row_tag"),
                format!("{t:?} is not an element name (without a namespace prefix)"),
            )
        }
        (Some(_), f) if f != Format::Xml => ctx.err(k("xml.row_tag"), "is for format = \"xml\""),
        _ => {}
    }
    let j = &s.json;
    if (j.allow_comments
        || j.allow_single_quotes
        || j.allow_unquoted_field_names
        || j.primitives_as_string
        || j.prefers_decimal
        || j.timestamp_format.is_some()
        || j.date_format.is_some())
        && s.format != Format::Json
    {
        ctx.err(k("json"), "the json options are for format = \"json\"");
    }
    if s.json.multi_line && s.format != Format::Json {
        ctx.err(k("json.multi_line"), "is for format = \"json\"");
    }
    if let Some(sep) = &s.text.line_sep
        && sep.is_empty()
    {
        ctx.err(k("text.line_sep"), "must not be empty");
    }
    let bad_records = match &s.bad_records_path {
        Some(p) => {
            let loc = ctx.ok(k("bad_records_path"), Location::parse(p));
            let store = ctx.store(k("bad_records_store"), &s.bad_records_store);
            if matches!(
                s.format,
                Format::Parquet | Format::BinaryFile | Format::Avro | Format::Orc | Format::Text
            ) {
                ctx.err(
                    k("bad_records_path"),
                    format!(
                        "format `{}` has no malformed records to write (json, csv, xml)",
                        s.format.as_str()
                    ),
                );
            }
            match (loc, store) {
                (Some(loc), Some(store)) => Some(Some((
                    StoreOptions::build(loc.kind, store.as_ref(), |v| std::env::var(v).ok()),
                    loc,
                ))),
                _ => None,
            }
        }
        None => Some(None),
    };
    let binary_max = ctx.ok(
        k("binary_file.max_file_size"),
        landfall_core::size::parse_bytes(&s.binary_file.max_file_size).and_then(|n| {
            if n > i32::MAX as u64 {
                Err(
                    "must be at most 2147483647 bytes (one Arrow binary value, as Spark's limit)"
                        .into(),
                )
            } else {
                Ok(n)
            }
        }),
    );
    let schema = match &s.schema {
        Some(ddl) => ctx
            .ok(
                k("schema"),
                landfall_core::ddl::parse_schema(ddl)
                    .map(Arc::new)
                    .map_err(|e| e.to_string()),
            )
            .map(Some),
        None => Some(None),
    };
    if s.schema_sample_files == 0 {
        ctx.err(k("schema_sample_files"), "must be at least 1");
    }
    let explicit = s.schema.is_some() || fixed;
    let evolution = s.schema_evolution_mode.unwrap_or(if explicit {
        crate::EvolutionMode::None
    } else {
        crate::EvolutionMode::AddNewColumns
    });
    if evolution == crate::EvolutionMode::AddNewColumnsWithTypeWidening {
        ctx.err(
            k("schema_evolution_mode"),
            "`add_new_columns_with_type_widening` is not supported yet: the Delta writer landfall builds on (delta-rs 1.1) refuses every write to a table with the typeWidening feature; use add_new_columns, rescue, fail_on_new_columns or none (a value wider than its column is rescued)",
        );
    }
    if fixed && evolution != crate::EvolutionMode::None {
        ctx.err(
            k("schema_evolution_mode"),
            format!(
                "format `{}` has a fixed schema; it cannot evolve",
                s.format.as_str()
            ),
        );
    }
    let rescued_column = match s.rescued_data_column.as_deref() {
        Some("") => None,
        Some(name) => Some(name.to_string()),
        None if !explicit || evolution == crate::EvolutionMode::Rescue => {
            Some("_rescued_data".to_string())
        }
        None => None,
    };
    if fixed && rescued_column.is_some() {
        ctx.err(
            k("rescued_data_column"),
            format!(
                "format `{}` has a fixed schema; every value fits it",
                s.format.as_str()
            ),
        );
    }
    if let (Some(Some(schema)), Some(r)) = (&schema, &rescued_column)
        && let Some(f) = schema
            .fields()
            .iter()
            .find(|f| f.name().eq_ignore_ascii_case(r))
    {
        ctx.err(
            k("rescued_data_column"),
            format!(
                "`{r}` is also the name of the schema's column `{}`; name the rescued-data column otherwise",
                f.name()
            ),
        );
    }
    let schema_hints = match &s.schema_hints {
        Some(_) if explicit => {
            ctx.err(
                k("schema_hints"),
                "hints shape an inferred schema; with an explicit `schema` (or a fixed one) write the types there",
            );
            None
        }
        Some(h) => ctx.ok(
            k("schema_hints"),
            landfall_core::ddl::parse_hints(h).map_err(|e| e.to_string()),
        ),
        None => Some(Vec::new()),
    };
    let sample_bytes = ctx.ok(
        k("schema_sample_bytes"),
        landfall_core::size::parse_bytes(&s.schema_sample_bytes),
    );

    let sink_loc = ctx.ok(k("sink.path"), Location::parse(&s.sink.path));
    let sink_store = ctx.store(k("sink.store"), &s.sink.store);
    let target_file_size = ctx.ok(
        k("sink.target_file_size"),
        landfall_core::size::parse_bytes(&s.sink.target_file_size),
    );
    let mut seen = std::collections::HashSet::new();
    for c in &s.sink.partition_by {
        if !seen.insert(c.to_ascii_lowercase()) {
            ctx.err(
                k("sink.partition_by"),
                format!("column `{c}` is listed twice"),
            );
        }
    }
    if let Some(Some(schema)) = &schema {
        let extra = s.partition_columns.clone().unwrap_or_default();
        for c in &s.sink.partition_by {
            if schema.field_with_name(c).is_err() && !extra.contains(c) {
                ctx.err(
                    k("sink.partition_by"),
                    format!("column `{c}` is not in the schema or partition_columns"),
                );
            }
        }
    }

    let trigger = match (&s.trigger.processing_time, s.trigger.available_now) {
        (Some(_), true) => {
            ctx.err(
                k("trigger"),
                "processing_time and available_now are mutually exclusive",
            );
            None
        }
        (Some(p), false) => ctx
            .ok(k("trigger.processing_time"), duration(p))
            .map(Trigger::ProcessingTime),
        (None, true) => Some(Trigger::AvailableNow),
        (None, false) => Some(Trigger::Continuous),
    };
    if s.max_files_per_trigger == 0 {
        ctx.err(k("max_files_per_trigger"), "must be at least 1");
    }
    let max_bytes = match &s.max_bytes_per_trigger {
        Some(b) => ctx
            .ok(
                k("max_bytes_per_trigger"),
                landfall_core::size::parse_bytes(b),
            )
            .map(Some),
        None => Some(None),
    };
    let glob = match &s.path_glob_filter {
        Some(g) => ctx
            .ok(
                k("path_glob_filter"),
                globset::GlobBuilder::new(g)
                    .literal_separator(false)
                    .build()
                    .map(|gl| Some((g.clone(), gl.compile_matcher())))
                    .map_err(|e| format!("`{g}` is not a valid glob: {e}")),
            )
            .flatten()
            .map(Some),
        None => Some(None),
    };
    let after = s
        .modified_after
        .as_deref()
        .map(|t| ctx.ok(k("modified_after"), instant(t)));
    let before_t = s
        .modified_before
        .as_deref()
        .map(|t| ctx.ok(k("modified_before"), instant(t)));
    if let (Some(Some(a)), Some(Some(b))) = (after, before_t)
        && a >= b
    {
        ctx.err(k("modified_before"), "must be later than modified_after");
    }
    let max_file_age = match &s.max_file_age {
        Some(a) => match ctx.ok(k("max_file_age"), duration(a)) {
            Some(d) if d < MIN_FILE_AGE => {
                ctx.err(k("max_file_age"), format!("`{a}` is shorter than the minimum of 14 days; a short age makes old files look new and ingests them again"));
                None
            }
            other => other,
        },
        None => None,
    };
    let poll = ctx.ok(k("poll_interval"), duration(&s.poll_interval));
    let incremental = IncrementalListing::parse(&s.incremental_listing);
    if incremental.is_none() {
        ctx.err(
            k("incremental_listing"),
            format!("`{}` is not `auto`, `on` or `off`", s.incremental_listing),
        );
    }
    match s.full_listing_interval {
        Some(0) => ctx.err(
            k("full_listing_interval"),
            "must be at least 1 (incremental_listing = \"off\" lists in full every time)",
        ),
        Some(_) if incremental == Some(IncrementalListing::Off) => ctx.err(
            k("full_listing_interval"),
            "has no effect with incremental_listing = \"off\" (every listing is a full one); remove one of them",
        ),
        _ => {}
    }
    if let Some(e) = &s.csv.encoding
        && landfall_core::TextEncoding::parse(e).is_none()
    {
        ctx.err(
            k("csv.encoding"),
            format!("`{e}` is not supported (UTF-8, ISO-8859-1, UTF-16, UTF-16LE, UTF-16BE)"),
        );
    }
    for (key, pattern) in [
        ("csv.timestamp_format", &s.csv.timestamp_format),
        ("csv.date_format", &s.csv.date_format),
        ("json.timestamp_format", &s.json.timestamp_format),
        ("json.date_format", &s.json.date_format),
    ] {
        if let Some(p) = pattern
            && let Err(e) = landfall_core::datetime_pattern::chrono_format(p)
        {
            ctx.err(k(key), e);
        }
    }
    if s.csv.max_columns == Some(0) {
        ctx.err(k("csv.max_columns"), "must be at least 1");
    }
    ctx.ok(k("csv.sep"), single_char(&s.csv.sep));
    ctx.ok(k("csv.quote"), single_char(&s.csv.quote));
    if let Some(e) = &s.csv.escape {
        ctx.ok(k("csv.escape"), single_char(e));
    }
    if let Some(c) = &s.csv.comment {
        ctx.ok(k("csv.comment"), single_char(c));
    }

    let discovery =
        source.as_ref().and_then(|src| {
            match crate::notifications::validate_discovery(
                name,
                s.discovery,
                s.notifications.as_ref(),
                src,
            ) {
                Ok(DiscoverySpec::Listing) => match (
                    s.discovery,
                    events_location(
                        locations,
                        src,
                        &StoreOptions::build(
                            src.kind,
                            source_store.clone().flatten().as_ref(),
                            |v| std::env::var(v).ok(),
                        ),
                    ),
                ) {
                    (DiscoveryMode::FileEvents | DiscoveryMode::Auto, Some(l)) => {
                        Some(DiscoverySpec::FileEvents(Box::new(crate::FileEventsSpec {
                            location: l.clone(),
                            list_on_start: s.list_on_start,
                        })))
                    }
                    (DiscoveryMode::FileEvents, None) => {
                        let with: Vec<String> = locations
                            .iter()
                            .filter(|l| l.queue.is_some())
                            .map(|l| format!("{} ({})", l.name, l.url.url))
                            .collect();
                        ctx.err(
                            k("discovery"),
                            format!("is `file_events` but no [locations.<name>] with file_events = true holds {} (file-events locations: {})", src.url, list(&with)),
                        );
                        None
                    }
                    _ => Some(DiscoverySpec::Listing),
                },
                Ok(d) => Some(d),
                Err(errors) => {
                    for (key, reason) in errors {
                        ctx.err(k(&key), reason);
                    }
                    None
                }
            }
        });
    if s.list_on_start && !matches!(s.discovery, DiscoveryMode::FileEvents | DiscoveryMode::Auto) {
        ctx.err(
            k("list_on_start"),
            "is for discovery = \"file_events\" (a listing stream lists on every poll; a notification stream lists when it enters the mode and every backfill_interval)",
        );
    }
    let backfill_interval = match &s.backfill_interval {
        Some(b) if s.discovery != crate::DiscoveryMode::Notifications => {
            ctx.err(
                k("backfill_interval"),
                format!("`{b}` is for discovery = \"notifications\"; a listing stream lists on every poll"),
            );
            None
        }
        Some(b) => ctx.ok(k("backfill_interval"), duration(b)).map(Some),
        None => Some(None),
    };

    if ctx.errors.len() > before {
        return None;
    }
    let (source, sink_loc) = (source?, sink_loc?);
    if sink_loc.contains(&source) || source.contains(&sink_loc) {
        ctx.err(k("sink.path"), format!("the table {} and the source {} overlap; landfall would ingest its own output or list the table", sink_loc.url, source.url));
        return None;
    }
    if let Some(Some((_, bad))) = &bad_records
        && (bad.contains(&source)
            || source.contains(bad)
            || bad.contains(&sink_loc)
            || sink_loc.contains(bad))
    {
        ctx.err(
            k("bad_records_path"),
            format!(
                "{} overlaps the source or the table; bad records would be ingested again or sit among the table's files",
                bad.url
            ),
        );
        return None;
    }
    let state_dir = s
        .state_dir
        .clone()
        .unwrap_or_else(|| ctx.cfg.server.state_dir.join(name));
    Some(StreamSpec {
        name: name.to_string(),
        source_options: StoreOptions::build(source.kind, source_store?.as_ref(), |v| {
            std::env::var(v).ok()
        }),
        source,
        format: s.format,
        schema: schema?,
        schema_hints: schema_hints?,
        evolution,
        rescued_column: rescued_column.filter(|_| !fixed),
        infer_column_types: s.infer_column_types,
        sample_files: s.schema_sample_files,
        sample_bytes: sample_bytes?,
        partition_columns: s.partition_columns.clone(),
        sink: SinkSpec {
            format: s.sink.format,
            options: StoreOptions::build(sink_loc.kind, sink_store?.as_ref(), |v| {
                std::env::var(v).ok()
            }),
            location: sink_loc,
            partition_by: s.sink.partition_by.clone(),
            target_file_size: target_file_size?,
        },
        trigger: trigger?,
        limits: BatchLimits {
            max_files: s.max_files_per_trigger,
            max_bytes: max_bytes?,
        },
        glob: glob?,
        modified_after: after.flatten(),
        modified_before: before_t.flatten(),
        include_existing_files: s.include_existing_files,
        max_file_age,
        allow_overwrites: s.allow_overwrites,
        ignore_missing_files: s.ignore_missing_files,
        ignore_corrupt_files: s.ignore_corrupt_files,
        state_dir,
        poll_interval: poll?,
        incremental_listing: incremental?,
        full_listing_interval: s
            .full_listing_interval
            .unwrap_or(DEFAULT_FULL_LISTING_INTERVAL),
        csv: s.csv.clone(),
        json: s.json.clone(),
        mode,
        bad_records: bad_records?.map(|(o, l)| (l, o)),
        metadata_columns: s.metadata_columns.clone(),
        xml: s.xml.clone(),
        text: s.text.clone(),
        binary_max_size: binary_max?,
        discovery: discovery?,
        backfill_interval: backfill_interval?,
    })
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

fn cross_checks(ctx: &mut Ctx, streams: &[StreamSpec], locations: &[crate::LocationSpec]) {
    // Each consumer deletes what it read, including events it filtered out: two on one queue
    // delete each other's events.
    let mut queues: Vec<(String, String)> = Vec::new();
    for l in locations {
        if let Some(q) = l.queue.as_ref().map(|n| queue_id(n, &l.options)) {
            if let Some((_, other)) = queues.iter().find(|(id, _)| *id == q) {
                ctx.err(
                    format!("locations.{}.queue_name", l.name),
                    format!(
                        "reads the same queue ({q}) as {other}; each location needs its own queue"
                    ),
                );
            }
            queues.push((q, format!("location `{}`", l.name)));
        }
        let dir = absolute(&l.state_dir);
        if let Some(o) = locations.iter().take_while(|o| o.name != l.name).find(|o| {
            let od = absolute(&o.state_dir);
            od.starts_with(&dir) || dir.starts_with(&od)
        }) {
            ctx.err(
                format!("locations.{}.state_dir", l.name),
                format!(
                    "{} nests with the event cache of location `{}`",
                    dir.display(),
                    o.name
                ),
            );
        }
    }
    for s in streams {
        if let crate::DiscoverySpec::Notifications(n) = &s.discovery
            && let q = queue_id(n, &s.source_options)
            && let Some((_, other)) = queues.iter().find(|(id, _)| *id == q)
            && other.starts_with("location")
        {
            ctx.err(
                format!("streams.{}.notifications", s.name),
                format!("reads the same queue ({q}) as {other}; a notification stream needs a queue of its own (or use discovery = \"file_events\")"),
            );
        }
    }
    for (i, s) in streams.iter().enumerate() {
        let dir = absolute(&s.state_dir);
        if let Some(l) = locations.iter().find(|l| {
            let ld = absolute(&l.state_dir);
            ld.starts_with(&dir) || dir.starts_with(&ld)
        }) {
            ctx.err(
                format!("streams.{}.state_dir", s.name),
                format!("{} nests with the event cache of location `{}` ({}); give the stream another state_dir", dir.display(), l.name, l.state_dir.display()),
            );
        }
        // A stream deletes the messages it consumed, including events it filtered out: two
        // streams on one queue would delete each other's events.
        if let Some(q) = queue_of(s)
            && let Some(other) = streams[..i].iter().find(|o| queue_of(o) == Some(q))
        {
            ctx.err(
                format!("streams.{}.notifications", s.name),
                format!("reads the same queue ({q}) as stream `{}`; each stream needs its own queue (fan out with SNS), or one would delete the other's events", other.name),
            );
        }
        let dir = absolute(&s.state_dir);
        for other in &streams[..i] {
            if absolute(&other.state_dir) == dir {
                ctx.err(
                    format!("streams.{}.state_dir", s.name),
                    format!("{} is also the state directory of stream `{}`; two streams sharing one corrupt each other", dir.display(), other.name),
                );
            }
        }
        for t in streams {
            if let Some(table) = t.sink.location.local_path()
                && dir.starts_with(&table)
            {
                ctx.err(
                    format!("streams.{}.state_dir", s.name),
                    format!(
                        "{} lies inside the table {} of stream `{}`; keep state outside tables",
                        dir.display(),
                        table.display(),
                        t.name
                    ),
                );
            }
        }
    }
}

/// The queue of a notification spec, as far as the configuration tells it apart: an SQS
/// queue by name (a URL's last segment is its name), an Azure queue by account and name.
fn queue_id(n: &crate::NotificationsSpec, options: &StoreOptions) -> String {
    let option = |k: &str| {
        options
            .iter()
            .find(|(n, _)| n.as_str() == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    match &n.queue {
        crate::QueueSpec::Sqs { url: Some(u), .. } => u
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(u)
            .to_string(),
        crate::QueueSpec::Sqs {
            url: None, name, ..
        } => name.clone(),
        crate::QueueSpec::AzureQueue { name } => {
            format!("{}/{name}", option("azure_storage_account_name"))
        }
    }
}

/// The queue a notification stream reads, when known from the configuration.
fn queue_of(s: &StreamSpec) -> Option<&str> {
    match &s.discovery {
        crate::DiscoverySpec::Notifications(n) => match &n.queue {
            crate::QueueSpec::Sqs { url: Some(u), .. } => Some(u.as_str()),
            crate::QueueSpec::Sqs {
                url: None, name, ..
            } => Some(name.as_str()),
            crate::QueueSpec::AzureQueue { name } => Some(name.as_str()),
        },
        crate::DiscoverySpec::Listing | crate::DiscoverySpec::FileEvents(_) => None,
    }
}
