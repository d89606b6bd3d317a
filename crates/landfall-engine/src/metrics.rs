//! The process's Prometheus metrics: one registry, one family per metric, every series labelled
//! with its `stream`. [`crate::events::StreamEvents`] is the only writer: each event updates
//! its metrics in the same call that logs it, so logs, metrics and the run summary agree.
//!
//! Names follow Prometheus conventions (counters end in `_total`, durations in `_seconds`);
//! docs/operations.md explains each one and deploy/prometheus/alerts.yml uses them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StreamLabel {
    pub stream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub stream: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub stream: String,
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    pub stream: String,
    pub stage: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListingLabel {
    pub stream: String,
    /// `full` or `incremental`.
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabel {
    pub stream: String,
    pub op: String,
}

/// A file-events location's series: `kind` is the outcome, operation or nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LocationLabel {
    pub location: String,
    pub kind: String,
}

pub type Counters<L = StreamLabel> = Family<L, Counter>;
type Gauges = Family<StreamLabel, Gauge>;
type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Batch phases: 5 ms to about 45 min.
fn phase_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 20))
}

/// Discovered-to-committed latency of a file: 100 ms to 2 days, with the thresholds operators
/// alert on (1, 5, 10, 30 min; 1, 6 h) as bucket bounds, so quantiles there are exact.
fn latency_histogram() -> Histogram {
    Histogram::new([
        0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
        7200.0, 21600.0, 86400.0, 172800.0,
    ])
}

/// Every metric family of the process.
pub struct Metrics {
    registry: Registry,
    pub files_discovered: Counters,
    pub files_filtered: Counters,
    pub files_committed: Counters,
    pub files_skipped: Counters<ReasonLabel>,
    pub objects_passed_over: Counters<ReasonLabel>,
    pub queue_messages: Counters<ReasonLabel>,
    pub queue_events: Counters<ReasonLabel>,
    pub rows_committed: Counters,
    pub rows_malformed: Counters,
    pub rows_rescued: Counters,
    pub bytes_committed: Counters,
    pub batches_committed: Counters,
    pub batches_failed: Counters,
    pub batches_recovered: Counters,
    pub orphan_files_removed: Counters,
    pub files_archived: Counters<ReasonLabel>,
    pub archive_failures: Counters,
    pub compactions: Counters<ReasonLabel>,
    pub compaction_files_removed: Counters,
    pub compaction_bytes_rewritten: Counters,
    pub table_small_files: Gauges,
    pub last_compaction: Gauges,
    pub files_vacuumed: Counters,
    pub bytes_vacuumed: Counters,
    pub vacuum_failures: Counters,
    pub stream_restarts: Counters,
    pub errors: Counters<ErrorLabel>,
    pub storage_requests: Counters<OpLabel>,
    pub listings: Counters<ListingLabel>,
    pub files_outstanding: Gauges,
    pub bytes_outstanding: Gauges,
    pub queue_approximate_size: Gauges,
    pub tracked_files: Gauges,
    pub stream_up: Gauges,
    pub falling_behind: Gauges,
    pub schema_version: Gauges,
    pub table_version: Gauges,
    pub batch_duration: Histograms<PhaseLabel>,
    pub commit_latency: Histograms<StreamLabel>,
    pub location_events: Counters<LocationLabel>,
    pub location_messages: Counters<LocationLabel>,
    pub location_requests: Counters<LocationLabel>,
    pub location_cache_events: Family<LocationLabel, Gauge>,
    pub location_consumer_up: Family<LocationLabel, Gauge>,
    /// Labelled `stream` with the owner's resource tag: the stream, or `location:<name>`.
    pub notification_entries_restored: Counters,
    pub notification_entry_check_failures: Counters,
    pub notification_entry_ok: Gauges,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut r = Registry::default();
        fn counter<L>(r: &mut Registry, name: &str, help: &str) -> Counters<L>
        where
            L: EncodeLabelSet
                + Clone
                + std::hash::Hash
                + Eq
                + std::fmt::Debug
                + Send
                + Sync
                + 'static,
        {
            let f = Family::<L, Counter>::default();
            r.register(name, help, f.clone());
            f
        }
        fn gauge(r: &mut Registry, name: &str, help: &str) -> Gauges {
            let f = Gauges::default();
            r.register(name, help, f.clone());
            f
        }
        let batch_duration: Histograms<PhaseLabel> = Family::new_with_constructor(phase_histogram);
        r.register(
            "landfall_batch_duration_seconds",
            "Time a committed batch spent per phase (discover, plan, read, write, commit)",
            batch_duration.clone(),
        );
        let commit_latency: Histograms<StreamLabel> =
            Family::new_with_constructor(latency_histogram);
        r.register(
            "landfall_commit_latency_seconds",
            "Time from a file's discovery to the commit of its batch",
            commit_latency.clone(),
        );
        Metrics {
            files_discovered: counter(
                &mut r,
                "landfall_files_discovered",
                "Files admitted to the stream's state",
            ),
            files_filtered: counter(
                &mut r,
                "landfall_files_filtered",
                "Listed files the stream's filters left out (glob, hidden, modification window), counted per listing",
            ),
            files_committed: counter(
                &mut r,
                "landfall_files_committed",
                "Files whose rows landed in the table",
            ),
            files_skipped: counter(
                &mut r,
                "landfall_files_skipped",
                "Files left out on purpose, by reason (missing, corrupt, changed_after_listing, manual)",
            ),
            objects_passed_over: counter(
                &mut r,
                "landfall_objects_passed_over",
                "Listed objects that are not files to ingest (empty, unrepresentable_key), counted per listing",
            ),
            queue_messages: counter(
                &mut r,
                "landfall_queue_messages",
                "Notification queue messages received, by outcome (files: carried object events; ignored: test events and confirmations; malformed: left in the queue for its redrive policy; kept: not deleted because their visibility could not be extended)",
            ),
            queue_events: counter(
                &mut r,
                "landfall_queue_events",
                "Storage events in notification messages that admit no file, by reason (removed, other: another kind or another bucket)",
            ),
            rows_committed: counter(
                &mut r,
                "landfall_rows_committed",
                "Rows committed to the table",
            ),
            rows_malformed: counter(
                &mut r,
                "landfall_rows_malformed",
                "Rows kept with nulls where their values did not fit the schema",
            ),
            rows_rescued: counter(
                &mut r,
                "landfall_rows_rescued",
                "Rows with values in the rescued-data column",
            ),
            bytes_committed: counter(
                &mut r,
                "landfall_bytes_committed",
                "Input bytes of committed files",
            ),
            batches_committed: counter(
                &mut r,
                "landfall_batches_committed",
                "Batches committed by this process",
            ),
            batches_failed: counter(
                &mut r,
                "landfall_batches_failed",
                "Batch attempts that failed (retried or stopped the stream)",
            ),
            batches_recovered: counter(
                &mut r,
                "landfall_batches_recovered",
                "Batches found in the table after a crash and recorded",
            ),
            orphan_files_removed: counter(
                &mut r,
                "landfall_orphan_files_removed",
                "Data files of failed attempts removed",
            ),
            files_archived: counter(
                &mut r,
                "landfall_files_archived",
                "Committed source files archived by clean_source, by outcome (delete, move; gone: already deleted by someone else; overwritten: replaced after its commit, left in place)",
            ),
            archive_failures: counter(
                &mut r,
                "landfall_archive_failures",
                "Archive attempts of clean_source that failed (retried later, never holding ingestion back)",
            ),
            compactions: counter(
                &mut r,
                "landfall_compactions",
                "Compactions of the stream's table (sink.compaction.auto), by outcome (committed; dropped: a file it replaced was removed meanwhile; failed)",
            ),
            compaction_files_removed: counter(
                &mut r,
                "landfall_compaction_files_removed",
                "Small data files compactions replaced",
            ),
            compaction_bytes_rewritten: counter(
                &mut r,
                "landfall_compaction_bytes_rewritten",
                "Bytes of the small data files compactions rewrote",
            ),
            table_small_files: gauge(
                &mut r,
                "landfall_table_small_files",
                "Small data files (under half of target_file_size) in the stream's table at the last compaction check, before it compacted",
            ),
            last_compaction: gauge(
                &mut r,
                "landfall_last_compaction_timestamp_seconds",
                "When a compaction of the stream's table last committed (Unix seconds)",
            ),
            files_vacuumed: counter(
                &mut r,
                "landfall_files_vacuumed",
                "Files of the stream's table deleted by vacuum (sink.vacuum.auto): no retained version referenced them",
            ),
            bytes_vacuumed: counter(
                &mut r,
                "landfall_bytes_vacuumed",
                "Bytes of the files vacuum deleted",
            ),
            vacuum_failures: counter(
                &mut r,
                "landfall_vacuum_failures",
                "Vacuums of the stream's table that failed (tried again at the next interval)",
            ),
            stream_restarts: counter(
                &mut r,
                "landfall_stream_restarts",
                "Restarts of a stream's worker after a failure",
            ),
            errors: counter(
                &mut r,
                "landfall_errors",
                "Errors by stage and kind: stage `batch` counts failed batch attempts, stage `worker` counts workers that ended with an error (restarted or stopped; a failed batch usually ends its worker too); kind is retryable, fatal or panic",
            ),
            storage_requests: counter(
                &mut r,
                "landfall_storage_requests",
                "Storage and queue requests by operation; op FAILED counts the attempts that failed (no answer, 5xx, 429, 408), which the clients retry inside a request",
            ),
            listings: counter(
                &mut r,
                "landfall_listings",
                "Listing rounds by kind: full (the whole prefix) or incremental (the keys after the last one seen)",
            ),
            files_outstanding: gauge(
                &mut r,
                "landfall_files_outstanding",
                "Files discovered and not yet committed or skipped",
            ),
            bytes_outstanding: gauge(
                &mut r,
                "landfall_bytes_outstanding",
                "Bytes of the outstanding files",
            ),
            queue_approximate_size: gauge(
                &mut r,
                "landfall_queue_approximate_size",
                "Approximate messages waiting in the stream's notification queue",
            ),
            tracked_files: gauge(
                &mut r,
                "landfall_tracked_files",
                "Files the stream's state tracks",
            ),
            stream_up: gauge(
                &mut r,
                "landfall_stream_up",
                "1 while the stream's worker runs, 0 while it waits to restart or has stopped",
            ),
            falling_behind: gauge(
                &mut r,
                "landfall_falling_behind",
                "1 while the backlog has grown for several batches in a row",
            ),
            schema_version: gauge(
                &mut r,
                "landfall_schema_version",
                "The stream's current schema version",
            ),
            table_version: gauge(
                &mut r,
                "landfall_table_version",
                "The table version of the stream's last commit",
            ),
            location_events: counter(
                &mut r,
                "landfall_location_events",
                "File-events locations: events by outcome (cached: new to the cache; dropped: removed objects; passed_over: outside the location or not files; listed: files the location listing found without an event; expired: left the cache after the retention)",
            ),
            location_messages: counter(
                &mut r,
                "landfall_location_queue_messages",
                "File-events locations: queue messages by outcome (received, ignored, malformed, kept)",
            ),
            location_requests: counter(
                &mut r,
                "landfall_location_requests",
                "File-events locations: storage and queue requests of the consumer, by operation",
            ),
            location_cache_events: {
                let f = Family::<LocationLabel, Gauge>::default();
                r.register(
                    "landfall_location_cache_events",
                    "File-events locations: events held by the cache",
                    f.clone(),
                );
                f
            },
            location_consumer_up: {
                let f = Family::<LocationLabel, Gauge>::default();
                r.register(
                    "landfall_location_consumer_up",
                    "File-events locations: 1 while the consumer's last round succeeded",
                    f.clone(),
                );
                f
            },
            notification_entries_restored: counter(
                &mut r,
                "landfall_notification_entry_restored",
                "S3 bucket notification entries landfall created that were found removed or changed by another writer and written again (the owner then lists once)",
            ),
            notification_entry_check_failures: counter(
                &mut r,
                "landfall_notification_entry_check_failures",
                "Checks of the S3 bucket notification entry landfall created that could not run or could not write the entry back (denied, an outage, a write S3 refused)",
            ),
            notification_entry_ok: {
                let f = Gauges::default();
                r.register(
                    "landfall_notification_entry_ok",
                    "1 while the last check found the bucket notification entry landfall created (or wrote it back), 0 after a check failed: events may have stopped coming",
                    f.clone(),
                );
                f
            },
            batch_duration,
            commit_latency,
            registry: r,
        }
    }

    /// The metrics in the Prometheus text exposition format (OpenMetrics flavour).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// A check of a bucket notification entry: found, found gone and written again, or failed;
/// logged and counted together.
pub fn notification_entry_checked(
    metrics: &Metrics,
    owner: &str,
    bucket: &str,
    entry: &landfall_discovery::Entry,
    result: Result<landfall_discovery::EntryCheck, &landfall_discovery::SetupError>,
) {
    let label = stream(owner);
    match result {
        Ok(landfall_discovery::EntryCheck::Present) => {}
        Ok(landfall_discovery::EntryCheck::Restored) => {
            tracing::warn!(owner, bucket, entry = %entry.id, rule = %entry.rule, "the bucket notification entry landfall created was removed or changed by another writer; it is written again and the source listed once");
            metrics
                .notification_entries_restored
                .get_or_create(&label)
                .inc();
        }
        Err(e) => {
            tracing::warn!(owner, bucket, entry = %entry.id, error = %e, "could not check the bucket notification entry (events may not arrive); checking again soon");
            metrics
                .notification_entry_check_failures
                .get_or_create(&label)
                .inc();
            metrics.notification_entry_ok.get_or_create(&label).set(0);
            return;
        }
    }
    metrics.notification_entry_ok.get_or_create(&label).set(1);
}

/// The label of `stream`.
pub fn stream(name: &str) -> StreamLabel {
    StreamLabel {
        stream: name.to_string(),
    }
}
