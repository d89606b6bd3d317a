//! The last hour of a stream, for the status page's charts and `landfall top`: a sample every
//! `server.chart_step` (10 s by default) kept in a ring buffer, so a page opened late still
//! shows the hour. Each point holds what happened during its step (rows, files and bytes
//! committed per second, batches and their mean duration by phase) and the gauges at its end
//! (backlog in files and bytes, queue depth).
//!
//! Rates are the growth of the stream's committed counters (the ones `/metrics` exports) over
//! the time that really passed since the previous point (a monotonic clock, not the wall clock
//! an NTP step can move back), not the nominal step: a sampler that ran late does not inflate
//! them. Counters only grow within a process; a sample never reports a negative rate. Point
//! times never go back: a wall clock stepped back gives the next point the previous time plus
//! one millisecond.

use crate::progress::PhaseDurations;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The time the charts cover.
pub const WINDOW: Duration = Duration::from_secs(3600);
/// Points kept at most per stream (a step under one second covers less than [`WINDOW`]).
pub const MAX_POINTS: usize = 3600;
/// The step unless `server.chart_step` says otherwise.
pub const DEFAULT_STEP: Duration = Duration::from_secs(10);

/// Mean milliseconds per phase of the batches committed during one step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PhaseMeans {
    pub discover: f64,
    pub plan: f64,
    pub read: f64,
    pub write: f64,
    pub commit: f64,
}

impl PhaseMeans {
    /// The phases in drawing order, with their values.
    pub fn phases(&self) -> [(&'static str, f64); 5] {
        [
            ("discover", self.discover),
            ("plan", self.plan),
            ("read", self.read),
            ("write", self.write),
            ("commit", self.commit),
        ]
    }
}

/// One step of a stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// The end of the step.
    pub t: DateTime<Utc>,
    pub rows_per_second: f64,
    pub files_per_second: f64,
    pub bytes_per_second: f64,
    /// Files discovered and not yet committed, at the end of the step.
    pub files_outstanding: u64,
    pub bytes_outstanding: u64,
    /// Messages waiting in the stream's queue (queue modes only).
    pub queue_depth: Option<u64>,
    /// Batches committed during the step.
    pub batches: u64,
    /// Their mean duration by phase; `None` when no batch committed.
    pub batch_ms: Option<PhaseMeans>,
}

/// The committed totals a sample reads (the stream's counters).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    pub rows: u64,
    pub files: u64,
    pub bytes: u64,
}

/// The gauges a sample reads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Levels {
    pub files_outstanding: u64,
    pub bytes_outstanding: u64,
    pub queue_depth: Option<u64>,
}

/// What `/api/v1/streams/{name}/timeline` returns.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineView {
    /// The sampling step in milliseconds.
    pub step_ms: u64,
    /// Oldest first.
    pub points: Vec<Point>,
}

/// A stream's ring buffer of points, and what the step in progress has seen so far.
#[derive(Debug)]
pub struct Timeline {
    points: VecDeque<Point>,
    step: Duration,
    /// When the previous sample was taken (monotonic, and as the point's time), and the totals
    /// then.
    last: (Instant, DateTime<Utc>, Totals),
    batches: u64,
    phase_sums: [u64; 5],
}

impl Timeline {
    /// An empty timeline whose first step starts now with `totals`.
    pub fn new(totals: Totals) -> Self {
        Timeline {
            points: VecDeque::new(),
            step: Duration::ZERO,
            last: (Instant::now(), Utc::now(), totals),
            batches: 0,
            phase_sums: [0; 5],
        }
    }

    /// A batch committed during the current step.
    pub fn batch(&mut self, d: &PhaseDurations) {
        self.batches += 1;
        for (sum, (_, ms)) in self.phase_sums.iter_mut().zip(d.phases()) {
            *sum += ms;
        }
    }

    /// End the current step at `now`: one point from the growth of `totals` since the previous
    /// sample and the `levels` now. Keeps [`WINDOW`] of points at `step` (at most
    /// [`MAX_POINTS`]).
    pub fn sample(&mut self, totals: Totals, levels: Levels, step: Duration) {
        self.sample_at(Instant::now(), Utc::now(), totals, levels, step)
    }

    /// [`Timeline::sample`] at a given instant and wall-clock time.
    pub fn sample_at(
        &mut self,
        at: Instant,
        now: DateTime<Utc>,
        totals: Totals,
        levels: Levels,
        step: Duration,
    ) {
        let (then, then_t, before) = self.last;
        let secs = at.saturating_duration_since(then).as_secs_f64().max(1e-3);
        let now = now.max(then_t + chrono::Duration::milliseconds(1));
        let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 / secs;
        let batch_ms = (self.batches > 0).then(|| {
            let n = self.batches as f64;
            let [discover, plan, read, write, commit] = self.phase_sums.map(|s| s as f64 / n);
            PhaseMeans {
                discover,
                plan,
                read,
                write,
                commit,
            }
        });
        self.points.push_back(Point {
            t: now,
            rows_per_second: rate(totals.rows, before.rows),
            files_per_second: rate(totals.files, before.files),
            bytes_per_second: rate(totals.bytes, before.bytes),
            files_outstanding: levels.files_outstanding,
            bytes_outstanding: levels.bytes_outstanding,
            queue_depth: levels.queue_depth,
            batches: self.batches,
            batch_ms,
        });
        self.step = step;
        let keep = capacity(step);
        while self.points.len() > keep {
            self.points.pop_front();
        }
        self.last = (at, now, totals);
        self.batches = 0;
        self.phase_sums = [0; 5];
    }

    /// The newest `last` points at most (all of them with `None`).
    pub fn view(&self, last: Option<usize>) -> TimelineView {
        let skip = last.map_or(0, |n| self.points.len().saturating_sub(n));
        TimelineView {
            step_ms: self.step.as_millis() as u64,
            points: self.points.iter().skip(skip).cloned().collect(),
        }
    }
}

/// Points kept at `step`: the window's worth, at least one, at most [`MAX_POINTS`].
pub fn capacity(step: Duration) -> usize {
    let step = step.as_millis().max(1);
    (WINDOW.as_millis().div_ceil(step) as usize).clamp(1, MAX_POINTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    /// A timeline started at `at(0)` on both clocks, and a sampler at `s` seconds after it.
    struct Clock(Instant);

    impl Clock {
        fn timeline(totals: Totals) -> (Clock, Timeline) {
            let mut t = Timeline::new(totals);
            let start = Instant::now();
            t.last = (start, at(0), totals);
            (Clock(start), t)
        }

        fn sample(&self, t: &mut Timeline, s: i64, totals: Totals, levels: Levels) {
            let i = self.0 + Duration::from_secs(s as u64);
            t.sample_at(i, at(s), totals, levels, DEFAULT_STEP);
        }
    }

    fn totals(rows: u64, files: u64, bytes: u64) -> Totals {
        Totals { rows, files, bytes }
    }

    #[test]
    fn rates_are_growth_over_the_time_that_passed() {
        let (clock, mut t) = Clock::timeline(totals(0, 0, 0));
        t.batch(&PhaseDurations {
            read: 100,
            write: 300,
            total: 400,
            ..Default::default()
        });
        t.batch(&PhaseDurations {
            read: 300,
            write: 100,
            commit: 50,
            total: 450,
            ..Default::default()
        });
        let levels = Levels {
            files_outstanding: 7,
            bytes_outstanding: 700,
            queue_depth: Some(3),
        };
        clock.sample(&mut t, 10, totals(1000, 20, 4000), levels);
        // A sampler 10 s late: the rate is over the 20 s that passed.
        clock.sample(&mut t, 30, totals(1400, 24, 4000), Levels::default());
        let v = t.view(None);
        assert_eq!(v.step_ms, 10_000);
        let [a, b] = &v.points[..] else {
            panic!("{:?}", v.points)
        };
        assert_eq!(
            (a.rows_per_second, a.files_per_second, a.bytes_per_second),
            (100.0, 2.0, 400.0)
        );
        assert_eq!(
            (a.files_outstanding, a.queue_depth, a.batches),
            (7, Some(3), 2)
        );
        let m = a.batch_ms.unwrap();
        assert_eq!(
            (m.read, m.write, m.commit, m.plan),
            (200.0, 200.0, 25.0, 0.0)
        );
        assert_eq!((b.rows_per_second, b.files_per_second), (20.0, 0.2));
        assert_eq!((b.batches, b.batch_ms), (0, None));
        assert_eq!(b.t, at(30));
    }

    #[test]
    fn counters_that_went_back_give_no_negative_rate() {
        let (clock, mut t) = Clock::timeline(totals(50, 5, 500));
        clock.sample(&mut t, 10, totals(10, 1, 100), Levels::default());
        let p = &t.view(None).points[0];
        assert_eq!(
            (p.rows_per_second, p.files_per_second, p.bytes_per_second),
            (0.0, 0.0, 0.0)
        );
        // The wall clock steps back an hour: the rate is over the 10 s that really passed, and
        // the point's time stays after the one before.
        let i = clock.0 + Duration::from_secs(20);
        t.sample_at(
            i,
            at(-3600),
            totals(110, 1, 100),
            Levels::default(),
            DEFAULT_STEP,
        );
        let p = &t.view(None).points[1];
        assert_eq!(p.rows_per_second, 10.0);
        assert_eq!(p.t, at(10) + chrono::Duration::milliseconds(1));
    }

    #[test]
    fn keeps_the_last_hour_at_its_step() {
        assert_eq!(capacity(Duration::from_secs(10)), 360);
        assert_eq!(capacity(Duration::from_secs(7)), 515);
        assert_eq!(capacity(Duration::from_millis(100)), MAX_POINTS);
        assert_eq!(capacity(Duration::from_secs(7200)), 1);
        let (clock, mut t) = Clock::timeline(Totals::default());
        for i in 1..=400 {
            clock.sample(&mut t, i * 10, totals(i as u64, 0, 0), Levels::default());
        }
        let v = t.view(None);
        assert_eq!(v.points.len(), 360);
        assert_eq!(v.points[0].t, at(410));
        assert_eq!(v.points[359].t, at(4000));
        assert!(v.points.iter().all(|p| p.rows_per_second == 0.1));
    }
}
