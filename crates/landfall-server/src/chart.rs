//! `GET /api/v1/streams/{name}/charts.svg`: the stream's last hour drawn on the server as one
//! SVG (no script, font or library; the page inlines it): rows and files committed per
//! second, the backlog in files and bytes, the mean batch duration by phase (stacked bars) and,
//! for queue modes, the queue depth.
//!
//! Every series carries the numbers it is drawn from: a line's `data-values` and `data-times`
//! (the times as the timeline API writes them), a bar's `data-t`, `data-phase` and `data-ms`;
//! the document its time axis (`data-end`, `data-window-ms`).
//! A test reads them back from the rendered page and compares them with
//! `/api/v1/streams/{name}/timeline`, and checks each vertex sits where its value says.

use chrono::{DateTime, Utc};
use landfall_engine::timeline::{Point, TimelineView, capacity};
use std::fmt::Write;
use std::time::Duration;

/// One panel's box.
pub const PANEL_W: f64 = 360.0;
pub const PANEL_H: f64 = 130.0;
/// The plot area inside a panel: left margin for labels, a title line on top.
pub const PLOT_LEFT: f64 = 8.0;
pub const PLOT_TOP: f64 = 30.0;
pub const PLOT_W: f64 = 344.0;
pub const PLOT_H: f64 = 86.0;
const GAP: f64 = 12.0;

const PHASE_COLOURS: [&str; 5] = ["#9ca3af", "#6366f1", "#0ea5e9", "#f59e0b", "#16a34a"];

/// What one line panel draws.
struct Line {
    key: &'static str,
    title: &'static str,
    colour: &'static str,
    unit: Unit,
    value: fn(&Point) -> Option<f64>,
}

#[derive(Clone, Copy)]
enum Unit {
    PerSecond,
    Count,
    Bytes,
}

fn lines(with_queue: bool) -> Vec<Line> {
    let mut out = vec![
        Line {
            key: "rows_per_second",
            title: "rows committed /s",
            colour: "#0ea5e9",
            unit: Unit::PerSecond,
            value: |p| Some(p.rows_per_second),
        },
        Line {
            key: "files_per_second",
            title: "files committed /s",
            colour: "#16a34a",
            unit: Unit::PerSecond,
            value: |p| Some(p.files_per_second),
        },
        Line {
            key: "files_outstanding",
            title: "backlog (files)",
            colour: "#f59e0b",
            unit: Unit::Count,
            value: |p| Some(p.files_outstanding as f64),
        },
        Line {
            key: "bytes_outstanding",
            title: "backlog (bytes)",
            colour: "#a855f7",
            unit: Unit::Bytes,
            value: |p| Some(p.bytes_outstanding as f64),
        },
    ];
    if with_queue {
        out.push(Line {
            key: "queue_depth",
            title: "queue depth (messages)",
            colour: "#78716c",
            unit: Unit::Count,
            value: |p| p.queue_depth.map(|d| d as f64),
        });
    }
    out
}

/// The time axis: `window` ending at `end`.
#[derive(Clone, Copy)]
struct Axis {
    end: DateTime<Utc>,
    window: Duration,
}

impl Axis {
    fn x(&self, t: DateTime<Utc>) -> f64 {
        let ms = self.window.as_millis().max(1) as f64;
        let before = (self.end - t).num_milliseconds().max(0) as f64;
        PLOT_LEFT + PLOT_W * (1.0 - (before / ms).min(1.0))
    }
}

/// The y value of `v` in a plot whose top is `max`.
pub fn y(v: f64, max: f64) -> f64 {
    PLOT_TOP + PLOT_H * (1.0 - (v / max).clamp(0.0, 1.0))
}

/// A round number at or above `v` (1, 2 or 5 times a power of ten); 1 for nothing.
pub fn nice_max(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 || v.is_infinite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * p)
}

fn label(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Bytes => landfall_core::size::human_bytes(v as u64),
        Unit::PerSecond => format!("{}/s", trim(v)),
        Unit::Count => trim(v),
    }
}

fn trim(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// A time as the timeline API writes it (serde's form of `DateTime<Utc>`).
fn time(t: DateTime<Utc>) -> String {
    serde_json::to_value(t)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 120 {
        format!("-{} min", s / 60)
    } else {
        format!("-{s} s")
    }
}

/// The panel frame: its title, the top value, the time labels.
fn frame(out: &mut String, key: &str, title: &str, top: &str, axis: &Axis) {
    let _ = write!(
        out,
        r##"<g data-chart="{key}"><text x="{PLOT_LEFT}" y="14" class="t">{title}</text><text x="{right}" y="14" class="m" text-anchor="end" data-max="">{top}</text><rect x="{PLOT_LEFT}" y="{PLOT_TOP}" width="{PLOT_W}" height="{PLOT_H}" class="f"/><text x="{PLOT_LEFT}" y="{by}" class="m">{start}</text><text x="{right}" y="{by}" class="m" text-anchor="end">now</text>"##,
        right = PLOT_LEFT + PLOT_W,
        by = PLOT_TOP + PLOT_H + 13.0,
        start = minutes(axis.window),
    );
}

fn line(out: &mut String, l: &Line, points: &[Point], axis: &Axis) {
    let drawn: Vec<(&Point, f64)> = points
        .iter()
        .filter_map(|p| (l.value)(p).map(|v| (p, v)))
        .collect();
    let max = nice_max(drawn.iter().map(|(_, v)| *v).fold(0.0, f64::max));
    frame(out, l.key, l.title, &label(max, l.unit), axis);
    let values: Vec<String> = drawn.iter().map(|(_, v)| v.to_string()).collect();
    let times: Vec<String> = drawn.iter().map(|(p, _)| time(p.t)).collect();
    let coords: Vec<String> = drawn
        .iter()
        .map(|(p, v)| format!("{:.2},{:.2}", axis.x(p.t), y(*v, max)))
        .collect();
    let _ = write!(
        out,
        r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" data-series="{key}" data-max="{max}" data-values="{values}" data-times="{times}" points="{coords}"/>"#,
        colour = l.colour,
        key = l.key,
        values = values.join(" "),
        times = times.join(" "),
        coords = coords.join(" "),
    );
    if let Some((p, v)) = drawn.last() {
        let _ = write!(
            out,
            r#"<circle cx="{:.2}" cy="{:.2}" r="2.5" fill="{}"/>"#,
            axis.x(p.t),
            y(*v, max),
            l.colour
        );
    }
    if drawn.is_empty() {
        let _ = write!(
            out,
            r#"<text x="{x}" y="{y}" class="m" text-anchor="middle">no point yet</text>"#,
            x = PLOT_LEFT + PLOT_W / 2.0,
            y = PLOT_TOP + PLOT_H / 2.0,
        );
    }
    out.push_str("</g>");
}

/// Mean batch duration by phase, one stacked bar per step that committed batches.
fn phases(out: &mut String, points: &[Point], axis: &Axis, bar: f64) {
    let total = |p: &Point| {
        p.batch_ms
            .map(|m| m.phases().iter().map(|(_, v)| v).sum::<f64>())
    };
    let max = nice_max(points.iter().filter_map(total).fold(0.0, f64::max));
    frame(
        out,
        "batch_ms",
        "batch duration by phase (mean)",
        &format!("{} ms", trim(max)),
        axis,
    );
    let _ = write!(out, r#"<g data-max="{max}">"#);
    for p in points {
        let Some(m) = p.batch_ms else { continue };
        let x = axis.x(p.t) - bar;
        let mut base = 0.0;
        for ((phase, ms), colour) in m.phases().into_iter().zip(PHASE_COLOURS) {
            let (top, bottom) = (y(base + ms, max), y(base, max));
            base += ms;
            let _ = write!(
                out,
                r#"<rect x="{x:.2}" y="{top:.2}" width="{bar:.2}" height="{h:.2}" fill="{colour}" data-t="{t}" data-phase="{phase}" data-ms="{ms}" data-batches="{n}"/>"#,
                h = bottom - top,
                t = time(p.t),
                n = p.batches,
            );
        }
    }
    out.push_str("</g>");
    let mut x = PLOT_LEFT + 4.0;
    for ((phase, _), colour) in landfall_engine::timeline::PhaseMeans::default()
        .phases()
        .into_iter()
        .zip(PHASE_COLOURS)
    {
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{ly}" width="8" height="8" fill="{colour}"/><text x="{tx}" y="{ty}" class="m">{phase}</text>"#,
            ly = PLOT_TOP + 4.0,
            tx = x + 11.0,
            ty = PLOT_TOP + 11.5,
        );
        x += 16.0 + 6.5 * phase.len() as f64;
    }
    if !points.iter().any(|p| p.batch_ms.is_some()) {
        let _ = write!(
            out,
            r#"<text x="{x}" y="{y}" class="m" text-anchor="middle">no batch in this window</text>"#,
            x = PLOT_LEFT + PLOT_W / 2.0,
            y = PLOT_TOP + PLOT_H / 2.0 + 8.0,
        );
    }
    out.push_str("</g>");
}

/// The time the axis spans: the whole window ([`capacity`] steps), or, while the timeline is
/// younger than that, the time since its first point (at least ten steps), so a daemon
/// started minutes ago fills the chart with those minutes.
fn window(view: &TimelineView, step: Duration, now: DateTime<Utc>) -> Duration {
    let full = step * capacity(step) as u32;
    let covered = view
        .points
        .first()
        .and_then(|p| (now - p.t).to_std().ok())
        .map_or(full, |d| d + step);
    covered.clamp((step * 10).min(full), full)
}

/// The stream's charts as one SVG document, the time axis ending at `now`.
pub fn render(view: &TimelineView, now: DateTime<Utc>) -> String {
    let step = Duration::from_millis(view.step_ms.max(1));
    let axis = Axis {
        end: now,
        window: window(view, step, now),
    };
    let bar = (PLOT_W * step.as_secs_f64() / axis.window.as_secs_f64().max(1e-3)).clamp(1.0, 12.0);
    let with_queue = view.points.iter().any(|p| p.queue_depth.is_some());
    let lines = lines(with_queue);
    let panels = lines.len() + 1;
    let cols = if panels > 4 { 3 } else { 2 };
    let rows = panels.div_ceil(cols);
    let (w, h) = (
        cols as f64 * PANEL_W + (cols - 1) as f64 * GAP,
        rows as f64 * PANEL_H + (rows - 1) as f64 * GAP,
    );
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" data-step-ms="{step}" data-end="{end}" data-window-ms="{window}"><style>.t{{font:600 12px system-ui,sans-serif;fill:currentColor}}.m{{font:11px system-ui,sans-serif;fill:currentColor;opacity:.7}}.f{{fill:none;stroke:currentColor;stroke-opacity:.25}}</style>"#,
        step = view.step_ms,
        end = time(now),
        window = axis.window.as_millis(),
    );
    for i in 0..panels {
        let (col, row) = (i % cols, i / cols);
        let _ = write!(
            out,
            r#"<g transform="translate({x},{y})">"#,
            x = col as f64 * (PANEL_W + GAP),
            y = row as f64 * (PANEL_H + GAP),
        );
        match lines.get(i) {
            Some(l) => line(&mut out, l, &view.points, &axis),
            None => phases(&mut out, &view.points, &axis, bar),
        }
        out.push_str("</g>");
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use landfall_engine::timeline::PhaseMeans;

    fn point(s: i64, rows: f64, queue: Option<u64>, batch: Option<PhaseMeans>) -> Point {
        Point {
            t: DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap(),
            rows_per_second: rows,
            files_per_second: rows / 10.0,
            bytes_per_second: 0.0,
            files_outstanding: 3,
            bytes_outstanding: 3 << 20,
            queue_depth: queue,
            batches: batch.is_some() as u64,
            batch_ms: batch,
        }
    }

    #[test]
    fn round_tops() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(f64::NAN), 1.0);
        assert_eq!(nice_max(0.3), 0.5);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(10.0), 10.0);
        assert_eq!(nice_max(1234.0), 2000.0);
        assert_eq!(label(3.0 * 1048576.0, Unit::Bytes), "3.0 MiB");
        assert_eq!(label(2.5, Unit::PerSecond), "2.5/s");
    }

    #[test]
    fn each_series_carries_its_values_and_sits_where_they_say() {
        let read = PhaseMeans {
            read: 30.0,
            write: 20.0,
            ..Default::default()
        };
        let view = TimelineView {
            step_ms: 10_000,
            points: vec![
                point(0, 40.0, None, Some(read)),
                point(10, 0.0, None, None),
                point(20, 80.0, None, None),
            ],
        };
        let now = view.points[2].t;
        let svg = render(&view, now);
        assert!(
            svg.contains(r#"data-series="rows_per_second" data-max="100" data-values="40 0 80""#),
            "{svg}"
        );
        // The timeline is younger than ten steps: the axis spans ten, the newest point at the
        // right edge, each step a tenth of the width to its left.
        let right = PLOT_LEFT + PLOT_W;
        let step = PLOT_W / 10.0;
        let expect = format!(
            "points=\"{:.2},{:.2} {:.2},{:.2} {:.2},{:.2}\"",
            right - 2.0 * step,
            y(40.0, 100.0),
            right - step,
            y(0.0, 100.0),
            right,
            y(80.0, 100.0)
        );
        assert!(svg.contains(&expect), "{expect} in {svg}");
        assert!(svg.contains(r#"data-phase="write" data-ms="20""#));
        assert!(!svg.contains("queue_depth"), "no queue, no queue chart");
        // An hour old: the axis is the whole window, a step a 360th of it.
        let mut long = view.clone();
        long.points[0].t = now - chrono::Duration::hours(2);
        let svg = render(&long, now);
        let expect = format!(
            "points=\"{:.2},{:.2} {:.2},{:.2} {:.2},{:.2}\"",
            PLOT_LEFT,
            y(40.0, 100.0),
            right - PLOT_W / 360.0,
            y(0.0, 100.0),
            right,
            y(80.0, 100.0)
        );
        assert!(svg.contains(&expect), "{expect} in {svg}");
        assert!(svg.contains(">-60 min<"));
        let with_queue = TimelineView {
            step_ms: 10_000,
            points: vec![point(0, 1.0, Some(12), None)],
        };
        let svg = render(&with_queue, with_queue.points[0].t);
        assert!(svg.contains(r#"data-series="queue_depth" data-max="20" data-values="12""#));
        assert!(svg.contains("no batch in this window"));
    }
}
