//! The TOML file as written by users. Every struct denies unknown keys; the `///` comments are
//! the reference in docs/configuration.md.

use crate::store::StoreConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LandfallConfig {
    #[serde(default)]
    pub server: ServerConfig,
    /// Named connection settings for object stores, referenced by `source_store` / `sink.store`.
    #[serde(default)]
    pub stores: BTreeMap<String, StoreConfig>,
    /// Storage locations whose events one queue delivers to every stream under them
    /// (managed file events).
    #[serde(default)]
    pub locations: BTreeMap<String, crate::LocationConfig>,
    /// One entry per stream; the key is the stream name (the Delta `txn` app id).
    #[serde(default)]
    pub streams: BTreeMap<String, StreamConfig>,
    /// Where the daemon reports about itself beyond logs and metrics.
    #[serde(default)]
    pub monitoring: MonitoringConfig,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitoringConfig {
    /// A Delta table (path or URL) that receives every batch's progress record, so batch
    /// health can be queried with SQL. Records are buffered and appended every
    /// `health_table_interval`.
    #[serde(default)]
    pub health_table: Option<String>,
    /// The `[stores.<name>]` settings for the health table.
    #[serde(default)]
    pub health_table_store: Option<String>,
    /// How often buffered progress records are appended (`1m` by default).
    #[serde(default = "default_health_interval")]
    pub health_table_interval: String,
}

impl Default for MonitoringConfig {
    fn default() -> Self {
        MonitoringConfig {
            health_table: None,
            health_table_store: None,
            health_table_interval: default_health_interval(),
        }
    }
}

fn default_health_interval() -> String {
    "1m".to_string()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Root of the per-stream state directories (`<state_dir>/<stream>`).
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// Address of the HTTP health and metrics endpoint.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// `text` or `json` log lines.
    #[serde(default)]
    pub log_format: LogFormat,
    /// Bearer token that enables the API's admin actions (stop, restart, skip); without one
    /// they are disabled. `LANDFALL_ADMIN_TOKEN` overrides it; `${VAR}` reads it from the
    /// environment.
    #[serde(default)]
    pub admin_token: Option<Secret>,
    /// How often the status page's charts take a point (the last hour is kept: 360 points at
    /// the default 10s; at most 3,600 points, so a step under 1s covers less).
    #[serde(default = "default_chart_step")]
    pub chart_step: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            state_dir: default_state_dir(),
            listen: default_listen(),
            log_format: LogFormat::Text,
            admin_token: None,
            chart_step: default_chart_step(),
        }
    }
}

fn default_chart_step() -> String {
    "10s".into()
}

/// A value that must never be printed: its `Debug` is redacted.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

fn default_state_dir() -> PathBuf {
    PathBuf::from(".landfall/state")
}
fn default_listen() -> String {
    "127.0.0.1:8686".to_string()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Auto Loader's `schemaEvolutionMode`, snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvolutionMode {
    AddNewColumns,
    AddNewColumnsWithTypeWidening,
    Rescue,
    FailOnNewColumns,
    None,
}

impl EvolutionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            EvolutionMode::AddNewColumns => "add_new_columns",
            EvolutionMode::AddNewColumnsWithTypeWidening => "add_new_columns_with_type_widening",
            EvolutionMode::Rescue => "rescue",
            EvolutionMode::FailOnNewColumns => "fail_on_new_columns",
            EvolutionMode::None => "none",
        }
    }

    /// Whether columns may widen (`add_new_columns_with_type_widening`).
    pub fn widens_types(self) -> bool {
        self == EvolutionMode::AddNewColumnsWithTypeWidening
    }

    /// Whether the schema (and the table) may gain columns.
    pub fn adds_columns(self) -> bool {
        matches!(
            self,
            EvolutionMode::AddNewColumns | EvolutionMode::AddNewColumnsWithTypeWidening
        )
    }
}

/// Input file format: Auto Loader's eight (`cloudFiles.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Format {
    Json,
    Csv,
    Parquet,
    Avro,
    Orc,
    Text,
    BinaryFile,
    Xml,
}

impl TryFrom<String> for Format {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Format::ALL.iter().map(|f| f.as_str()).collect();
                format!("`{s}` is not a format (one of: {})", names.join(", "))
            })
    }
}

impl Format {
    pub const ALL: [Format; 8] = [
        Format::Json,
        Format::Csv,
        Format::Parquet,
        Format::Avro,
        Format::Orc,
        Format::Text,
        Format::BinaryFile,
        Format::Xml,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Parquet => "parquet",
            Format::Avro => "avro",
            Format::Orc => "orc",
            Format::Text => "text",
            Format::BinaryFile => "binary_file",
            Format::Xml => "xml",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    /// Where files land: a local path, `file://`, `s3://bucket/prefix`, `az://container/prefix`,
    /// `abfss://container@account.dfs.core.windows.net/prefix` or `gs://bucket/prefix`.
    pub source: String,
    /// Name of a `[stores.<name>]` entry for the source.
    pub source_store: Option<String>,
    pub format: Format,
    /// Explicit schema as SQL DDL. Without it the schema is inferred from a sample.
    pub schema: Option<String>,
    /// Infer column types for json and csv; without it every column is a string (Auto Loader's
    /// default).
    #[serde(default)]
    pub infer_column_types: bool,
    /// Auto Loader's `schemaHints`: SQL DDL fixing the types of some columns while the rest
    /// are inferred (`"id BIGINT, user.dob DATE, tags ARRAY<STRING>"`; dotted names reach into
    /// structs). A hinted column the sample lacks is added. A value that does not fit its hint
    /// goes to the rescued-data column, never cast to null silently.
    pub schema_hints: Option<String>,
    /// What a column the schema lacks does: `add_new_columns` (default without `schema`: the
    /// schema and the table gain the column, and the batch is read again on the new schema),
    /// `rescue` (the schema never changes; such values go to the rescued-data column),
    /// `fail_on_new_columns` (the stream stops, naming the columns and the file) or `none`
    /// (default with `schema`: ignored, unless a rescued-data column keeps them).
    /// `add_new_columns_with_type_widening` (Delta sinks only) also widens a column whose
    /// values do not fit it where Delta's type widening allows (INT to BIGINT, DOUBLE or a
    /// DECIMAL; BIGINT to a DECIMAL; FLOAT to DOUBLE; a DECIMAL to a wider one; DATE to
    /// TIMESTAMP_NTZ from typed files): the table's column changes type, and the batch is read
    /// again on the widened schema.
    pub schema_evolution_mode: Option<EvolutionMode>,
    /// The rescued-data column's name. Default `_rescued_data` when the schema is inferred (or
    /// with `schema_evolution_mode = "rescue"`); none with an explicit `schema` unless set here.
    /// `""` turns it off. Fixed with the schema at the first start.
    pub rescued_data_column: Option<String>,
    /// Files sampled for inference (default 1000).
    #[serde(default = "default_sample_files")]
    pub schema_sample_files: usize,
    /// Bytes sampled for inference (default `50g`).
    #[serde(default = "default_sample_bytes")]
    pub schema_sample_bytes: String,
    /// Hive-style `key=value` directory levels added as columns. Default: inferred from the
    /// sampled paths when the schema is inferred; none with an explicit schema.
    pub partition_columns: Option<Vec<String>>,
    pub sink: SinkConfig,
    #[serde(default)]
    pub trigger: TriggerConfig,
    /// Hard cap of new files per micro-batch.
    #[serde(default = "default_max_files")]
    pub max_files_per_trigger: usize,
    /// Soft cap of bytes per micro-batch (`10g`); a batch always takes at least one file.
    pub max_bytes_per_trigger: Option<String>,
    /// Glob on the path below the source (`*.json`, `2024/**/*.csv`).
    pub path_glob_filter: Option<String>,
    /// Only files modified after this RFC 3339 instant.
    pub modified_after: Option<String>,
    /// Only files modified before this RFC 3339 instant.
    pub modified_before: Option<String>,
    /// Ingest files already present at the first start (read only while the state is new).
    #[serde(default = "yes")]
    pub include_existing_files: bool,
    /// How long a file stays tracked for deduplication (at least 14 days); older files are
    /// ignored by discovery and forgotten by the state store.
    pub max_file_age: Option<String>,
    /// Identity becomes path + version (etag, else object version, else modification time): a
    /// rewritten file is ingested again, whole.
    #[serde(default)]
    pub allow_overwrites: bool,
    /// A file deleted or moved between discovery and reading is skipped (recorded `skipped`,
    /// reason `missing`) and the rest of its batch commits. `false`: the stream stops and names
    /// the file (Spark's `ignoreMissingFiles`, default true).
    #[serde(default = "yes")]
    pub ignore_missing_files: bool,
    /// A file that cannot be decoded is skipped (recorded `skipped`, reason `corrupt: <error>`)
    /// and the rest of its batch commits. `false` (default): the stream stops and names the file
    /// (Spark's `ignoreCorruptFiles`).
    #[serde(default)]
    pub ignore_corrupt_files: bool,
    /// State directory of this stream (default `<server.state_dir>/<stream>`).
    pub state_dir: Option<PathBuf>,
    /// How long an idle continuous stream waits before listing again (default `5s`).
    #[serde(default = "default_poll")]
    pub poll_interval: String,
    /// `auto` (default), `on` or `off`: whether a listing may list only the keys after the
    /// last key seen instead of the whole prefix (`useIncrementalListing`). `on` and `off` may
    /// also be written `true` and `false`. `auto` lists incrementally while the new files that
    /// full listings find all sort after the last key seen (date-prefixed paths, zero-padded
    /// sequence numbers), and in full from the first new file that does not.
    #[serde(default = "default_incremental_listing")]
    pub incremental_listing: String,
    /// Incremental listings between two forced full listings (default 7, as Auto Loader): files
    /// that sort before the last key seen are found by the next full listing, late.
    pub full_listing_interval: Option<u32>,
    #[serde(default)]
    pub csv: CsvOptions,
    /// File metadata columns, as Spark's `_metadata`: a struct column `_metadata` with these
    /// fields (any of `file_path`, `file_name`, `file_size`, `file_modification_time`,
    /// `file_block_start`, `file_block_length`). Fixed with the schema at the first start.
    #[serde(default)]
    pub metadata_columns: Vec<String>,
    /// What a malformed record does (json, csv, text): `permissive` (default: kept with nulls
    /// where values do not fit, counted), `drop_malformed` (left out, counted) or `fail_fast`
    /// (the file is corrupt, and `ignore_corrupt_files` decides).
    #[serde(default = "default_mode")]
    pub mode: String,
    /// Where malformed records of json and csv files are written, as JSON lines with the file,
    /// line, byte offset, reason and the record's text (Spark's `badRecordsPath`): one file per
    /// batch, `<bad_records_path>/<stream>/batch_id=<id>.json`, written before the batch
    /// commits. A local path or URL.
    pub bad_records_path: Option<String>,
    /// `[stores.<name>]` for `bad_records_path`.
    pub bad_records_store: Option<String>,
    /// `format = "json"` options.
    #[serde(default)]
    pub json: JsonOptions,
    /// `format = "xml"` options.
    #[serde(default)]
    pub xml: XmlOptions,
    /// `format = "text"` options.
    #[serde(default)]
    pub text: TextOptions,
    /// `format = "binary_file"` options.
    #[serde(default)]
    pub binary_file: BinaryFileOptions,
    /// `listing` (default), `notifications` (consume storage events from a queue; see
    /// `[streams.<name>.notifications]`), `file_events` (read the event cache of the
    /// `[locations.<name>]` holding the source) or `auto` (file events where such a location
    /// exists, listing otherwise).
    #[serde(default)]
    pub discovery: crate::DiscoveryMode,
    /// Notification mode: also list the source at this interval (`1d`) and admit files the
    /// state does not know, for events the cloud never delivered. Never duplicates.
    pub backfill_interval: Option<String>,
    /// The queue of notification mode.
    pub notifications: Option<crate::NotificationsConfig>,
    /// File-events mode: list the source at every start, not only the first (then continue
    /// from the event cache position taken before the listing).
    #[serde(default)]
    pub list_on_start: bool,
    /// Auto Loader's `cleanSource`: what happens to a source file once its batch committed
    /// and `retention_duration` passed (`[streams.<name>.clean_source]`).
    #[serde(default)]
    pub clean_source: CleanSourceConfig,
}

/// `[streams.<name>.clean_source]`: archiving of ingested source files (Auto Loader's
/// `cleanSource`, `cleanSource.moveDestination`, `cleanSource.retentionDuration`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CleanSourceConfig {
    /// `off` (default: files stay), `delete` (a committed file is deleted from the source)
    /// or `move` (it is moved below `move_destination`). Upper case is accepted too.
    pub mode: Option<String>,
    /// `move`: where files go, keeping their path below the source. In the source's bucket
    /// or container, never below the source (the files would be ingested again), never
    /// overlapping the table or another stream's source.
    pub move_destination: Option<String>,
    /// How long after its commit a file is archived (default `30d`; `delete` needs at
    /// least `7d`, as Auto Loader).
    pub retention_duration: Option<String>,
}

fn default_mode() -> String {
    "permissive".into()
}
fn default_sample_files() -> usize {
    1000
}
fn default_sample_bytes() -> String {
    "50g".into()
}
fn default_max_files() -> usize {
    1000
}
fn yes() -> bool {
    true
}
fn default_poll() -> String {
    "5s".into()
}
fn default_incremental_listing() -> String {
    "auto".into()
}

/// Where committed rows go.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// `delta` (default) or `parquet` (a directory with put-if-absent commit manifests).
    #[serde(default)]
    pub format: SinkFormat,
    /// Table location: a local path or an object store URL as for `source`.
    pub path: String,
    /// Name of a `[stores.<name>]` entry for the table.
    pub store: Option<String>,
    /// Columns to partition the table by.
    #[serde(default)]
    pub partition_by: Vec<String>,
    /// Roll to a new data file past this size (default `128m`).
    #[serde(default = "default_target_file_size")]
    pub target_file_size: String,
    /// Compact the table's small files while the stream runs (Delta sink only; Databricks'
    /// auto compaction). Off by default; `landfall optimize <stream>` compacts by hand.
    #[serde(default)]
    pub compaction: CompactionConfig,
    /// Vacuum the table while the stream runs (Delta sink only). Off by default;
    /// `landfall vacuum <stream>` vacuums by hand.
    #[serde(default)]
    pub vacuum: VacuumConfig,
}

/// `[streams.<name>.sink.vacuum]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VacuumConfig {
    /// Vacuum while the stream runs (default `false`).
    #[serde(default)]
    pub auto: bool,
    /// How often (default `1d`).
    pub interval: Option<String>,
}

/// `[streams.<name>.sink.compaction]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionConfig {
    /// Compact while the stream runs (default `false`).
    #[serde(default)]
    pub auto: bool,
    /// Small files (under half of `target_file_size`) the table must hold before a
    /// compaction runs (default 50, as Databricks' `autoCompact.minNumFiles`).
    pub min_files: Option<u64>,
    /// How often the table's small files are counted (default `5m`).
    pub check_interval: Option<String>,
}

fn default_target_file_size() -> String {
    "128m".into()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SinkFormat {
    #[default]
    Delta,
    Parquet,
}

/// When batches run. Neither key: continuous (the next batch as soon as the last ends).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerConfig {
    /// Start a batch at most every interval (`10s`, `1m`).
    pub processing_time: Option<String>,
    /// Process what is there in rate-limited batches, then stop.
    #[serde(default)]
    pub available_now: bool,
}

/// CSV reading options.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CsvOptions {
    /// First line is a header; columns are matched by name, per file.
    #[serde(default = "yes")]
    pub header: bool,
    #[serde(default = "default_sep")]
    pub sep: String,
    #[serde(default = "default_quote")]
    pub quote: String,
    pub escape: Option<String>,
    pub comment: Option<String>,
    /// A field equal to this is null (default: empty field).
    pub null_value: Option<String>,
    /// Lines passed over at the start of each file, before the header (`skipRows`).
    #[serde(default)]
    pub skip_rows: usize,
    /// What an empty field of a string column is (`emptyValue`; default: null).
    pub empty_value: Option<String>,
    /// The text that means NaN in a floating-point column (`nanValue`, default `NaN`).
    pub nan_value: Option<String>,
    /// Trim spaces before values (`ignoreLeadingWhiteSpace`).
    #[serde(default)]
    pub ignore_leading_white_space: bool,
    /// Trim spaces after values (`ignoreTrailingWhiteSpace`).
    #[serde(default)]
    pub ignore_trailing_white_space: bool,
    /// A header or record with more fields makes the file corrupt (`maxColumns`, default
    /// 20480).
    pub max_columns: Option<usize>,
    /// The files' character set (`encoding`): UTF-8 (default), ISO-8859-1, UTF-16, UTF-16LE,
    /// UTF-16BE.
    pub encoding: Option<String>,
    /// Spark datetime pattern of TIMESTAMP values (`timestampFormat`, e.g.
    /// `dd/MM/yyyy HH:mm:ss`); default: ISO 8601 and the forms Arrow reads.
    pub timestamp_format: Option<String>,
    /// Spark datetime pattern of DATE values (`dateFormat`, e.g. `dd.MM.yyyy`).
    pub date_format: Option<String>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            header: true,
            sep: default_sep(),
            quote: default_quote(),
            escape: None,
            comment: None,
            null_value: None,
            skip_rows: 0,
            empty_value: None,
            nan_value: None,
            ignore_leading_white_space: false,
            ignore_trailing_white_space: false,
            max_columns: None,
            encoding: None,
            timestamp_format: None,
            date_format: None,
        }
    }
}

fn default_sep() -> String {
    ",".into()
}
fn default_quote() -> String {
    "\"".into()
}

/// `format = "text"`: one row per line (`value STRING`), or per file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextOptions {
    /// One row per file (Spark's `wholetext`).
    #[serde(default)]
    pub whole_text: bool,
    /// The line separator (Spark's `lineSep`); default: `\n`, `\r\n` or `\r`.
    pub line_sep: Option<String>,
}

/// `format = "binary_file"`: one row per file (`path, modification_time, length, content`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BinaryFileOptions {
    /// Files larger than this are skipped with the reason `too_large` (default `1g`): the
    /// content is one value, held in memory.
    #[serde(default = "default_binary_max")]
    pub max_file_size: String,
}

impl Default for BinaryFileOptions {
    fn default() -> Self {
        BinaryFileOptions {
            max_file_size: default_binary_max(),
        }
    }
}

fn default_binary_max() -> String {
    "1g".into()
}

/// `format = "xml"` options (Spark's XML reader).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XmlOptions {
    /// The element that is one row (`rowTag`, required), matched by local name at any depth.
    pub row_tag: Option<String>,
    /// Prefix of attribute fields (`attributePrefix`, default `_`).
    pub attribute_prefix: Option<String>,
    /// Field of an element's text beside attributes or children (`valueTag`, default
    /// `_VALUE`).
    pub value_tag: Option<String>,
}

/// `format = "json"` options.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonOptions {
    /// A file is one JSON document, or an array of documents, over any number of lines
    /// (Spark's `multiLine`); default: one document per line.
    #[serde(default)]
    pub multi_line: bool,
    /// `//` and `/* */` comments are allowed (`allowComments`).
    #[serde(default)]
    pub allow_comments: bool,
    /// `'strings'` are allowed (`allowSingleQuotes`; Spark's default is true, landfall's false:
    /// strict JSON unless asked).
    #[serde(default)]
    pub allow_single_quotes: bool,
    /// Bare field names (`{a: 1}`) are allowed (`allowUnquotedFieldNames`).
    #[serde(default)]
    pub allow_unquoted_field_names: bool,
    /// Inference types every primitive as a string, even with `infer_column_types`
    /// (`primitivesAsString`).
    #[serde(default)]
    pub primitives_as_string: bool,
    /// Inference types JSON fractions as DECIMAL where every value of the column fits one
    /// (38 digits), else DOUBLE (`prefersDecimal`). No effect with `primitives_as_string` or
    /// without `infer_column_types`.
    #[serde(default)]
    pub prefers_decimal: bool,
    /// Spark datetime pattern of TIMESTAMP values (`timestampFormat`).
    pub timestamp_format: Option<String>,
    /// Spark datetime pattern of DATE values (`dateFormat`).
    pub date_format: Option<String>,
}
