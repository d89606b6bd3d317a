//! `landfall run --available-now` on a terminal: one progress bar per stream (files committed
//! of files known this run), redrawn from the streams' own state, with log lines printed
//! above the bars. Elsewhere (a pipe, a file, JSON logs, a continuous run) plain log lines.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use landfall_engine::Hub;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// The bars of a run, and the writer that keeps log lines from tearing them.
#[derive(Clone)]
pub struct Bars(MultiProgress);

impl Bars {
    pub fn new() -> Self {
        Bars(MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
    }

    /// Redraw every stream's bar from `hub` until the returned task is aborted.
    pub fn follow(&self, hub: Arc<Hub>) -> tokio::task::JoinHandle<()> {
        let multi = self.0.clone();
        tokio::spawn(async move {
            let style = ProgressStyle::with_template(
                "{prefix:>16.bold} [{bar:30}] {pos}/{len} files  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            let mut bars: BTreeMap<String, ProgressBar> = BTreeMap::new();
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tick.tick().await;
                for e in hub.streams() {
                    let bar = bars.entry(e.stream.clone()).or_insert_with(|| {
                        let b = multi.add(ProgressBar::new(0));
                        b.set_style(style.clone());
                        b.set_prefix(e.stream.clone());
                        b
                    });
                    let done = e.counters.files_committed.get() + e.counters.files_skipped.get();
                    let outstanding = e.files_outstanding();
                    bar.set_length(done + outstanding);
                    bar.set_position(done);
                    let view = e.snapshot();
                    let state = serde_json::to_value(&view.state)
                        .ok()
                        .and_then(|v| v["state"].as_str().map(str::to_string))
                        .unwrap_or_default();
                    bar.set_message(format!("{} rows  {state}", e.counters.rows_committed.get()));
                }
            }
        })
    }

    /// Stop drawing and erase the bars; the run summary follows.
    pub fn finish(&self) {
        let _ = self.0.clear();
    }

    /// A `tracing` writer that prints above the bars.
    pub fn writer(&self) -> BarWriter {
        BarWriter(self.0.clone())
    }
}

#[derive(Clone)]
pub struct BarWriter(MultiProgress);

/// One log line, printed when complete.
pub struct BarLine(MultiProgress, Vec<u8>);

impl Write for BarLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for BarLine {
    fn drop(&mut self) {
        let line = std::mem::take(&mut self.1);
        self.0.suspend(|| {
            let _ = std::io::stderr().write_all(&line);
        });
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BarWriter {
    type Writer = BarLine;

    fn make_writer(&'a self) -> BarLine {
        BarLine(self.0.clone(), Vec::new())
    }
}
