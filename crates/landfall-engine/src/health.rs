//! `[monitoring] health_table`: every batch's progress record appended to a Delta table, so
//! batch health can be queried with SQL (Spark, DuckDB, Polars) next to the data.
//!
//! Every `health_table_interval` the writer takes the progress records committed since its
//! last append (from each stream's history, see [`crate::progress::HISTORY`]) and appends
//! them as one Delta commit, through the same committer as the streams (a `txn` action per
//! append, app id `landfall-health.<host>[.<shard>]`, so several processes can share one
//! table without taking each other's appends for their own). A final append runs at shutdown.
//!
//! Records are a report, not data under the exactly-once promise: those buffered when the
//! process dies are not written, and a stream committing more than `HISTORY` batches within one
//! interval loses the oldest of them from the report.

use crate::hub::Hub;
use crate::progress::BatchProgress;
use arrow::array::{
    ArrayRef, Float64Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use landfall_config::HealthTable;
use landfall_core::Committer;
use landfall_core::seams::{SeamResult, StagedHook};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;

/// The health table's columns.
pub fn schema() -> SchemaRef {
    let long = |n: &str| Field::new(n, DataType::Int64, true);
    Arc::new(Schema::new(vec![
        Field::new("stream", DataType::Utf8, false),
        Field::new("run_id", DataType::Utf8, true),
        Field::new("batch_id", DataType::Int64, false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        long("num_input_rows"),
        long("num_input_files"),
        Field::new("input_rows_per_second", DataType::Float64, true),
        Field::new("processed_rows_per_second", DataType::Float64, true),
        long("discover_ms"),
        long("plan_ms"),
        long("read_ms"),
        long("write_ms"),
        long("commit_ms"),
        long("total_ms"),
        Field::new("source", DataType::Utf8, true),
        long("start_offset"),
        long("end_offset"),
        long("files_outstanding"),
        long("bytes_outstanding"),
        Field::new("sink", DataType::Utf8, true),
        long("table_version"),
        long("num_output_rows"),
    ]))
}

/// The records as one batch of the health table's schema.
pub fn to_batch(records: &[BatchProgress]) -> SeamResult<RecordBatch> {
    let text = |f: &dyn Fn(&BatchProgress) -> String| {
        let mut b = StringBuilder::new();
        for r in records {
            b.append_value(f(r));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let (stream, run_id, source, sink) = (
        text(&|r| r.name.clone()),
        text(&|r| r.run_id.clone()),
        text(&|r| r.source.description.clone()),
        text(&|r| r.sink.description.clone()),
    );
    let long = |f: &dyn Fn(&BatchProgress) -> Option<i64>| {
        let mut b = Int64Builder::new();
        for r in records {
            b.append_option(f(r));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let double = |f: &dyn Fn(&BatchProgress) -> f64| {
        let mut b = Float64Builder::new();
        for r in records {
            b.append_value(f(r));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let mut ts = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    for r in records {
        ts.append_value(r.timestamp.timestamp_micros());
    }
    let i = |v: u64| Some(v as i64);
    let columns: Vec<ArrayRef> = vec![
        stream,
        run_id,
        long(&|r| i(r.batch_id)),
        Arc::new(ts.finish()),
        long(&|r| i(r.num_input_rows)),
        long(&|r| i(r.num_input_files)),
        double(&|r| r.input_rows_per_second),
        double(&|r| r.processed_rows_per_second),
        long(&|r| i(r.duration_ms.discover)),
        long(&|r| i(r.duration_ms.plan)),
        long(&|r| i(r.duration_ms.read)),
        long(&|r| i(r.duration_ms.write)),
        long(&|r| i(r.duration_ms.commit)),
        long(&|r| i(r.duration_ms.total)),
        source,
        long(&|r| r.source.start_offset.map(|v| v as i64)),
        long(&|r| r.source.end_offset.map(|v| v as i64)),
        long(&|r| i(r.source.files_outstanding)),
        long(&|r| i(r.source.bytes_outstanding)),
        sink,
        long(&|r| Some(r.sink.table_version)),
        long(&|r| i(r.sink.num_output_rows)),
    ];
    RecordBatch::try_new(schema(), columns).map_err(|e| {
        landfall_core::SeamError::fatal(format!("health table: building the records: {e}"))
    })
}

/// Appends progress records to the health table.
pub struct HealthWriter {
    committer: Arc<dyn Committer>,
    /// An append whose commit failed: retried with the same batch id (and records), so a
    /// commit that landed although the call failed is recognised, not written twice.
    unfinished: Option<(u64, Vec<BatchProgress>)>,
    /// Per stream, the run and batch of the newest record written.
    written: HashMap<String, (String, u64)>,
    prepared: bool,
}

impl HealthWriter {
    pub fn new(committer: Arc<dyn Committer>) -> Self {
        HealthWriter {
            committer,
            unfinished: None,
            written: HashMap::new(),
            prepared: false,
        }
    }

    /// The records of `hub`'s streams not written yet.
    fn pending(&self, hub: &Hub) -> Vec<BatchProgress> {
        let mut out = Vec::new();
        for e in hub.streams() {
            let view = e.snapshot();
            let last = self.written.get(&view.name);
            // History is in order: records after the last one written (a new run starts over).
            let start = match last {
                Some((run, batch)) => view
                    .history
                    .iter()
                    .rposition(|p| &p.run_id == run && p.batch_id == *batch)
                    .map_or(0, |i| i + 1),
                None => 0,
            };
            out.extend(view.history.iter().skip(start).cloned());
        }
        out
    }

    /// Append what is pending as one commit; how many records.
    pub async fn append(&mut self, hub: &Hub) -> SeamResult<usize> {
        if !self.prepared {
            if self.pending(hub).is_empty() {
                return Ok(0);
            }
            self.committer.prepare(schema(), &[]).await?;
            self.prepared = true;
        }
        let (batch_id, records) = match self.unfinished.take() {
            Some(u) => u,
            None => {
                let records = self.pending(hub);
                if records.is_empty() {
                    return Ok(0);
                }
                let id = self.committer.last_committed().await?.map_or(0, |b| b + 1);
                (id, records)
            }
        };
        self.unfinished = Some((batch_id, records.clone()));
        let hook: StagedHook = Arc::new(|_: &str| Ok(()));
        let mut writer = self.committer.writer(batch_id, 1, hook).await?;
        writer.write(&[], to_batch(&records)?).await?;
        let staged = writer.finish().await?;
        self.committer.commit(batch_id, &staged).await?;
        self.unfinished = None;
        for r in &records {
            self.written
                .insert(r.name.clone(), (r.run_id.clone(), r.batch_id));
        }
        Ok(records.len())
    }
}

/// Append every `interval` until shutdown, then once more.
pub async fn run(
    table: HealthTable,
    app_id: String,
    hub: Arc<Hub>,
    mut shutdown: watch::Receiver<bool>,
) {
    let uri = table.location.as_table_uri();
    let shown = table.location.shown_table_uri();
    if let Some(dir) = table.location.local_path()
        && let Err(e) = std::fs::create_dir_all(&dir)
    {
        tracing::error!(table = %shown, error = %e, "health table: cannot create its directory");
        return;
    }
    let committer: Arc<dyn Committer> = Arc::new(landfall_sink::DeltaCommitter::new(
        &app_id,
        &uri,
        table.options.to_hash_map(),
        128 << 20,
    ));
    let mut writer = HealthWriter::new(committer);
    let mut tick = tokio::time::interval(table.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stop = tokio::select! {
            _ = tick.tick() => false,
            r = shutdown.changed() => r.is_err() || *shutdown.borrow(),
        };
        match writer.append(&hub).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(table = %shown, records = n, "health table appended"),
            Err(e) => {
                tracing::warn!(table = %shown, error = %e.message, "health table: append failed; retrying at the next interval")
            }
        }
        if stop {
            return;
        }
    }
}
