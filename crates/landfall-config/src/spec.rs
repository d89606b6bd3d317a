//! What the engine runs: the validated, typed form of the configuration ([`StreamSpec`] per
//! stream, [`ValidatedConfig`] for the file). Every duration, size, glob, time, URL and
//! schema is parsed, every default resolved; `validate` builds them.

use crate::model::*;
use crate::notifications::NotificationsSpec;
use crate::store::{Location, StoreOptions};
use arrow_schema::SchemaRef;
use chrono::{DateTime, Utc};
use landfall_core::{BatchLimits, IncrementalListing};
use std::path::PathBuf;
use std::time::Duration;

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
    /// Compaction while the stream runs (`None`: off).
    pub compaction: Option<AutoCompaction>,
    /// Vacuum while the stream runs, this often (`None`: off).
    pub vacuum_every: Option<Duration>,
}

/// `[streams.<name>.sink.compaction]` with `auto = true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoCompaction {
    pub min_files: u64,
    pub check_interval: Duration,
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
    /// `clean_source` (`None`: off).
    pub clean_source: Option<CleanSource>,
}

#[derive(Debug, Clone)]
pub struct ValidatedConfig {
    pub server: ServerConfig,
    /// `server.chart_step`, parsed.
    pub chart_step: Duration,
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

/// The validated discovery mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiscoverySpec {
    Listing,
    Notifications(NotificationsSpec),
    /// Managed file events: the cache of this location.
    FileEvents(Box<FileEventsSpec>),
}

/// A stream reading a location's event cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEventsSpec {
    pub location: crate::LocationSpec,
    /// List the stream's prefix at every start, not only the first.
    pub list_on_start: bool,
}

/// Archiving of committed source files (`[streams.<name>.clean_source]`).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanSource {
    pub mode: landfall_core::ArchiveMode,
    /// `move`: the destination, in the source's bucket or container.
    pub move_destination: Option<Location>,
    pub retention: Duration,
}
