//! One `[streams.<name>]` table into a [`StreamSpec`]: each group of options checked by its
//! own function (the record options, bad records, the schema, the sink, batching, the file
//! filters, listing, discovery), every problem collected into the context, and the spec built
//! only when the stream has none.

use super::records::{csv_options, record_options};
use super::{Ctx, K, MIN_FILE_AGE, duration, instant, list, valid_name};
use crate::model::*;
use crate::spec::*;
use crate::store::{Location, StoreConfig, StoreOptions};
use crate::{DEFAULT_FULL_LISTING_INTERVAL, DiscoveryMode, DiscoverySpec};
use arrow_schema::SchemaRef;
use chrono::{DateTime, Utc};
use landfall_core::{BatchLimits, IncrementalListing};
use std::sync::Arc;
use std::time::Duration;

pub(super) fn validate_stream(
    ctx: &mut Ctx,
    name: &str,
    s: &StreamConfig,
    locations: &[crate::LocationSpec],
) -> Option<StreamSpec> {
    let key = |field: &str| format!("streams.{name}.{field}");
    let k: K = &key;
    let before = ctx.errors.len();
    if !valid_name(name) {
        ctx.err(
            format!("streams.{name}"),
            "stream names may use only letters, digits, `_`, `-` and `.` (at most 100), and not \
             dots only",
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
    let mode = record_options(ctx, k, s);
    let bad_records = bad_records(ctx, k, s);
    let schema = schema_options(ctx, k, s, fixed);
    let sink = sink(ctx, k, s, schema.schema.as_ref().and_then(|x| x.as_ref()));
    let batching = batching(ctx, k, s);
    let filters = file_filters(ctx, k, s);
    let listing = listing(ctx, k, s);
    let clean_source = super::clean_source::clean_source(ctx, k, s);
    csv_options(ctx, k, s);
    let (discovery, backfill_interval) = discovery(
        ctx,
        k,
        name,
        s,
        source.as_ref(),
        source_store.clone().flatten(),
        locations,
    );

    if ctx.errors.len() > before {
        return None;
    }
    let (source, sink) = (source?, sink?);
    let sink_loc = &sink.location;
    if sink_loc.contains(&source) || source.contains(sink_loc) {
        ctx.err(k("sink.path"), format!("the table {} and the source {} overlap; landfall would ingest its own output or list the table", sink_loc.shown(), source.shown()));
        return None;
    }
    if let Some(Some(clean)) = &clean_source {
        super::clean_source::check_destination(ctx, k, clean, &source, sink_loc);
        if ctx.errors.len() > before {
            return None;
        }
    }
    if let Some(Some((_, bad))) = &bad_records
        && (bad.contains(&source)
            || source.contains(bad)
            || bad.contains(sink_loc)
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
    let (trigger, limits) = batching?;
    let filters = filters?;
    let (poll_interval, incremental_listing) = listing?;
    Some(StreamSpec {
        name: name.to_string(),
        source_options: StoreOptions::build(source.kind, source_store?.as_ref(), |v| {
            std::env::var(v).ok()
        }),
        source,
        format: s.format,
        schema: schema.schema?,
        schema_hints: schema.hints?,
        evolution: schema.evolution,
        rescued_column: schema.rescued_column.filter(|_| !fixed),
        infer_column_types: s.infer_column_types,
        sample_files: s.schema_sample_files,
        sample_bytes: schema.sample_bytes?,
        partition_columns: s.partition_columns.clone(),
        sink,
        trigger,
        limits,
        glob: filters.glob,
        modified_after: filters.after,
        modified_before: filters.before,
        include_existing_files: s.include_existing_files,
        max_file_age: filters.max_file_age,
        allow_overwrites: s.allow_overwrites,
        ignore_missing_files: s.ignore_missing_files,
        ignore_corrupt_files: s.ignore_corrupt_files,
        state_dir,
        poll_interval,
        incremental_listing,
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
        binary_max_size: schema.binary_max?,
        discovery: discovery?,
        backfill_interval: backfill_interval?,
        clean_source: clean_source?,
    })
}

/// `bad_records_path` and its store (with their store options), for formats that have
/// malformed records.
fn bad_records(ctx: &mut Ctx, k: K, s: &StreamConfig) -> Option<Option<(StoreOptions, Location)>> {
    match &s.bad_records_path {
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
    }
}

/// The schema options, resolved: the explicit schema (or none), hints, the evolution mode
/// and rescued-data column with their defaults, and the sample and binary size limits.
/// Each part is `None` when it is invalid (its error collected), so the other parts are
/// still checked against what is valid: `partition_by` against a schema whose hints are wrong.
struct SchemaOptions {
    schema: Option<Option<SchemaRef>>,
    hints: Option<Vec<landfall_core::ddl::Hint>>,
    evolution: crate::EvolutionMode,
    rescued_column: Option<String>,
    sample_bytes: Option<u64>,
    binary_max: Option<u64>,
}

fn schema_options(ctx: &mut Ctx, k: K, s: &StreamConfig, fixed: bool) -> SchemaOptions {
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
    if evolution.widens_types() && s.sink.format == SinkFormat::Parquet {
        ctx.err(
            k("schema_evolution_mode"),
            "`add_new_columns_with_type_widening` needs a Delta sink: a Parquet directory has no record of a column's type change, and readers merging its files' schemas refuse an INT file beside a BIGINT one; use sink.format = \"delta\", or add_new_columns (a value wider than its column is rescued)",
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
    SchemaOptions {
        schema,
        hints: schema_hints,
        evolution,
        rescued_column,
        sample_bytes,
        binary_max,
    }
}

/// The sink: its location and store, the target file size, and partition columns (each
/// once, and in the schema when the schema is explicit).
fn sink(ctx: &mut Ctx, k: K, s: &StreamConfig, schema: Option<&SchemaRef>) -> Option<SinkSpec> {
    let sink_loc = ctx.ok(k("sink.path"), Location::parse(&s.sink.path));
    if s.sink.format == SinkFormat::Delta
        && let Some(loc) = &sink_loc
    {
        super::refuse_backslash_in_local_delta(ctx, k("sink.path"), loc);
    }
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
    if let Some(schema) = schema {
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
    let c = &s.sink.compaction;
    let check_interval = match &c.check_interval {
        Some(d) => ctx.ok(k("sink.compaction.check_interval"), duration(d)),
        None => Some(Duration::from_secs(300)),
    };
    let min_files = c.min_files.unwrap_or(50);
    if c.auto && min_files < 2 {
        ctx.err(
            k("sink.compaction.min_files"),
            "must be at least 2: a compaction rewrites two small files or more into one",
        );
    }
    if c.auto && s.sink.format != SinkFormat::Delta {
        ctx.err(
            k("sink.compaction.auto"),
            "compaction is for Delta tables; a Parquet directory has no log to swap files in",
        );
    }
    let compaction = c
        .auto
        .then_some(())
        .and(check_interval)
        .map(|check_interval| AutoCompaction {
            min_files,
            check_interval,
        });
    let v = &s.sink.vacuum;
    let vacuum_every = match &v.interval {
        Some(d) => ctx.ok(k("sink.vacuum.interval"), duration(d)),
        None => Some(Duration::from_secs(24 * 3600)),
    };
    if v.auto && s.sink.format != SinkFormat::Delta {
        ctx.err(
            k("sink.vacuum.auto"),
            "vacuum is for Delta tables; a Parquet directory has no log of removed files",
        );
    }
    if v.auto && vacuum_every.is_some_and(|d| d < Duration::from_secs(1)) {
        ctx.err(k("sink.vacuum.interval"), "must be at least 1s");
    }
    let vacuum_every = if v.auto { Some(vacuum_every?) } else { None };
    let (location, store) = (sink_loc?, sink_store?);
    Some(SinkSpec {
        compaction,
        vacuum_every,
        format: s.sink.format,
        options: StoreOptions::build(location.kind, store.as_ref(), |v| std::env::var(v).ok()),
        location,
        partition_by: s.sink.partition_by.clone(),
        target_file_size: target_file_size?,
    })
}

/// The trigger and the limits of one batch.
fn batching(ctx: &mut Ctx, k: K, s: &StreamConfig) -> Option<(Trigger, BatchLimits)> {
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
    Some((
        trigger?,
        BatchLimits {
            max_files: s.max_files_per_trigger,
            max_bytes: max_bytes?,
        },
    ))
}

/// Which files are candidates: the glob, the modification window and `max_file_age`.
struct FileFilters {
    glob: Option<(String, globset::GlobMatcher)>,
    after: Option<DateTime<Utc>>,
    before: Option<DateTime<Utc>>,
    max_file_age: Option<Duration>,
}

fn file_filters(ctx: &mut Ctx, k: K, s: &StreamConfig) -> Option<FileFilters> {
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
    Some(FileFilters {
        glob: glob?,
        after: after.flatten(),
        before: before_t.flatten(),
        max_file_age,
    })
}

/// How often a stream lists, and whether listings may be incremental.
fn listing(ctx: &mut Ctx, k: K, s: &StreamConfig) -> Option<(Duration, IncrementalListing)> {
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
    Some((poll?, incremental?))
}

/// The discovery mode (a file-events location holding the source turns `auto` into file
/// events), `list_on_start` and `backfill_interval`.
#[allow(clippy::type_complexity)]
fn discovery(
    ctx: &mut Ctx,
    k: K,
    name: &str,
    s: &StreamConfig,
    source: Option<&Location>,
    source_store: Option<StoreConfig>,
    locations: &[crate::LocationSpec],
) -> (Option<DiscoverySpec>, Option<Option<Duration>>) {
    let discovery =
        source.and_then(|src| {
            match crate::notifications::validate_discovery(
                name,
                s.discovery,
                s.notifications.as_ref(),
                src,
            ) {
                Ok(None) => match (
                    s.discovery,
                    events_location(
                        locations,
                        src,
                        &StoreOptions::build(
                            src.kind,
                            source_store.as_ref(),
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
                            .map(|l| format!("{} ({})", l.name, l.url.shown()))
                            .collect();
                        ctx.err(
                            k("discovery"),
                            format!("is `file_events` but no [locations.<name>] with file_events = true holds {} (file-events locations: {})", src.shown(), list(&with)),
                        );
                        None
                    }
                    _ => Some(DiscoverySpec::Listing),
                },
                Ok(Some(n)) => Some(DiscoverySpec::Notifications(n)),
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
    (discovery, backfill_interval)
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
