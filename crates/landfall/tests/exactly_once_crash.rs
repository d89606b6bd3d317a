//! Exactly-once under crashes, adversarially and reproducibly. The daemon is started again and
//! again on one stream and ended each time: by SIGKILL from outside at a random instant, or by
//! an abort at one of the protocol's failpoints (`after_plan`, `after_stage`, `before_commit`, `after_commit`,
//! `after_record`, and for the Parquet-directory sink `after_manifest`), armed to fire on an
//! exact hit (`name=#N`) or with a probability. While each round runs, a writer thread keeps
//! adding files, overwrites some (new rows with new ids) and deletes some; a few more are
//! overwritten or deleted while the daemon is down. At the end the stream is drained and:
//!
//! - every untouched file's rows are in the table exactly once;
//! - an overwritten file contributes exactly one of its versions, each row once, never a mix;
//! - a deleted file contributes all its rows once or nothing; with nothing its state is
//!   `skipped` (`missing...`) or absent;
//! - every file in the state is `INGESTED` or `SKIPPED` with a reason, none pending;
//! - no file outside the table's log / manifests is unreferenced (temporary `name#N` files of
//!   the local store included);
//! - every failpoint of the sink fired, no round logged a failed or stopped stream, and both
//!   recovery paths ran (batch found in the table and recorded; batch run again).
//!
//! Every round's failpoints, seeds and timing derive from one printed seed
//! (`LANDFALL_CRASH_SEED`); when an assertion fails the per-round log is printed.
//! `LANDFALL_CRASH_FILES` / `LANDFALL_CRASH_KILLS` scale it; bench/crash_soak.sh runs a longer
//! variant.

mod common;
use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Rows per file version.
const ROWS: u64 = 5;
/// Version `v` of file `n` holds ids `v * VERSION_STRIDE + n * ROWS ..+ ROWS`.
const VERSION_STRIDE: u64 = 1_000_000_000;
/// At most this many versions of one file are written (the original and two overwrites).
const MAX_VERSIONS: u32 = 3;
/// How long a round armed with an exact-hit failpoint may take before it is SIGKILLed instead.
const FAILPOINT_DEADLINE: Duration = Duration::from_secs(10);

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// splitmix64: derives independent seeds from the test seed.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sink {
    Delta,
    Parquet,
}

impl Sink {
    fn kind(self) -> &'static str {
        match self {
            Sink::Delta => "delta",
            Sink::Parquet => "parquet",
        }
    }

    /// The failpoints this sink passes through, each of which the test makes fire.
    fn failpoints(self) -> &'static [&'static str] {
        match self {
            Sink::Delta => &[
                "after_plan",
                "after_stage",
                "before_commit",
                "after_commit",
                "after_record",
            ],
            Sink::Parquet => &[
                "after_plan",
                "after_stage",
                "before_commit",
                "after_manifest",
                "after_commit",
                "after_record",
            ],
        }
    }
}

#[test]
fn delta_no_row_lost_or_duplicated_across_kills_deletes_and_overwrites() {
    crash_test(Sink::Delta, false);
}

#[test]
fn parquet_dir_no_row_lost_or_duplicated_across_kills_deletes_and_overwrites() {
    crash_test(Sink::Parquet, false);
}

/// The same with compaction running beside the stream every 200 ms: compactions race the
/// stream's appends and are killed with it. Every compaction commit must hold exactly the rows
/// it replaced (the verifier compares them), and every row is still in the table once. A
/// compaction killed before its commit leaves its new files unreferenced (`part-compact-*`,
/// for vacuum): those are the only orphans allowed.
#[test]
fn delta_with_compaction_no_row_lost_or_duplicated_across_kills() {
    crash_test(Sink::Delta, true);
}

// ---------------------------------------------------------------------------------------------
// The source directory, as the test wrote it

#[derive(Clone, Copy, Default, Debug)]
struct SrcFile {
    /// Versions written (1: the original only).
    versions: u32,
    deleted: bool,
}

struct Source {
    landing: PathBuf,
    /// Files are written here and renamed into `landing`: the daemon never sees a half file.
    scratch: PathBuf,
    files: Vec<SrcFile>,
    limit: u64,
}

#[derive(Default, Debug, Clone, Copy)]
struct Churn {
    created: u64,
    overwritten: u64,
    deleted: u64,
    /// Created and deleted at once (most likely before any listing saw them).
    flashed: u64,
}

impl std::fmt::Display for Churn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "+{} files, {} overwritten, {} deleted, {} created-and-deleted",
            self.created, self.overwritten, self.deleted, self.flashed
        )
    }
}

fn ids_of(n: u64, version: u32) -> std::ops::Range<u64> {
    let base = version as u64 * VERSION_STRIDE + n * ROWS;
    base..base + ROWS
}

impl Source {
    fn path(&self, n: u64) -> PathBuf {
        self.landing
            .join(format!("d{:02}", n % 16))
            .join(format!("f{n:06}.json"))
    }

    fn put(&self, n: u64, version: u32) {
        let dst = self.path(n);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        let tmp = self.scratch.join(format!("f{n:06}.v{version}"));
        let body: String = ids_of(n, version).map(row).collect();
        std::fs::write(&tmp, body).unwrap();
        std::fs::rename(&tmp, &dst).unwrap();
    }

    fn create(&mut self) -> Option<u64> {
        let n = self.files.len() as u64;
        if n >= self.limit {
            return None;
        }
        self.put(n, 0);
        self.files.push(SrcFile {
            versions: 1,
            deleted: false,
        });
        Some(n)
    }

    /// A file still there with room for another version: among the newest `recent` files, or
    /// among all.
    fn pick(&self, rng: &mut Rng, recent: Option<u64>) -> Option<u64> {
        let len = self.files.len() as u64;
        let from = recent.map_or(0, |r| len.saturating_sub(r));
        for _ in 0..20 {
            let n = from + rng.below(len - from);
            let f = self.files[n as usize];
            if !f.deleted && f.versions < MAX_VERSIONS {
                return Some(n);
            }
        }
        None
    }

    fn overwrite(&mut self, n: u64) {
        let v = self.files[n as usize].versions;
        self.put(n, v);
        self.files[n as usize].versions += 1;
    }

    fn delete(&mut self, n: u64) {
        std::fs::remove_file(self.path(n)).unwrap();
        self.files[n as usize].deleted = true;
    }

    /// One burst: `new` files, then maybe an overwrite, a delete, and a created-and-deleted file.
    fn burst(&mut self, rng: &mut Rng, new: u64, c: &mut Churn) {
        for _ in 0..new {
            if self.create().is_some() {
                c.created += 1;
            }
        }
        if self.files.is_empty() {
            return;
        }
        if rng.chance(70) {
            let recent = rng.chance(50).then_some(120);
            if let Some(n) = self.pick(rng, recent) {
                self.overwrite(n);
                c.overwritten += 1;
            }
        }
        if rng.chance(60) {
            let recent = rng.chance(50).then_some(120);
            // A file never overwritten: a deleted file has one version.
            if let Some(n) = self.pick(rng, recent)
                && self.files[n as usize].versions == 1
            {
                self.delete(n);
                c.deleted += 1;
            }
        }
        if rng.chance(25)
            && let Some(n) = self.create()
        {
            self.delete(n);
            c.flashed += 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The per-round log, printed if the test fails

struct RoundLog {
    header: String,
    lines: Vec<String>,
}

impl Drop for RoundLog {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "===== {} =====\n{}\n===== end of the per-round log =====",
                self.header,
                self.lines.join("\n")
            );
        }
    }
}

/// The last `n` lines of `text`, indented.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    lines[from..]
        .iter()
        .map(|l| format!("      | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Which failpoint aborted the process, with its hit number: from "failpoint X: aborting (hit #N)".
fn fired_failpoint(stderr: &str) -> Option<String> {
    stderr.lines().find_map(|l| {
        let rest = &l[l.find("failpoint ")? + "failpoint ".len()..];
        let (name, after) = rest.split_once(": aborting")?;
        Some(format!("{name}{}", after.trim_end()))
    })
}

const FAILED_STREAM: [&str; 3] = ["stream failed; restarting", "stream stopped", "panicked"];
const RECORDED: &str = "batch found in the table after a crash; recorded as committed";
const RERUN: &str = "batch did not land before the last stop; running it again with the same files";

/// What one round arms and how long it may run.
struct RoundPlan {
    failpoints: String,
    wait: Duration,
}

/// Each failpoint of the sink twice at an exact hit, then a mix of exact hits, probabilities
/// and bare SIGKILLs at random instants; shuffled.
fn schedule(sink: Sink, rounds: u64, rng: &mut Rng) -> Vec<RoundPlan> {
    let points = sink.failpoints();
    let mut out: Vec<RoundPlan> = Vec::new();
    let exact = |p: &str, max_n: u64, rng: &mut Rng| RoundPlan {
        failpoints: format!("{p}=#{}", 1 + rng.below(max_n)),
        wait: FAILPOINT_DEADLINE,
    };
    for i in 0..2 * points.len() {
        out.push(exact(points[i % points.len()], 2, &mut *rng));
    }
    while (out.len() as u64) < rounds {
        let r = rng.below(10);
        out.push(match r {
            0..=3 => RoundPlan {
                failpoints: String::new(),
                wait: Duration::from_millis(100 + rng.below(1400)),
            },
            4..=5 => RoundPlan {
                failpoints: match sink {
                    Sink::Delta => "after_stage=0.2,after_commit=0.2".into(),
                    Sink::Parquet => "after_stage=0.2,after_manifest=0.2,after_commit=0.2".into(),
                },
                wait: Duration::from_millis(300 + rng.below(1500)),
            },
            _ => {
                let p = points[rng.below(points.len() as u64) as usize];
                exact(p, 3, &mut *rng)
            }
        });
    }
    for i in (1..out.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        out.swap(i, j);
    }
    out
}

// ---------------------------------------------------------------------------------------------

/// The OPTIMIZE commits in the table's log.
fn optimize_commits(table: &Path) -> usize {
    std::fs::read_dir(table.join("_delta_log"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .filter(|e| {
                    std::fs::read_to_string(e.path())
                        .unwrap_or_default()
                        .contains(r#""operation":"OPTIMIZE""#)
                })
                .count()
        })
        .unwrap_or(0)
}

fn crash_test(sink: Sink, compaction: bool) {
    let files = env_or("LANDFALL_CRASH_FILES", 1500).max(100);
    let min_rounds = 2 * sink.failpoints().len() as u64 + 2;
    let kills = env_or("LANDFALL_CRASH_KILLS", 20).max(min_rounds);
    let seed = env_or(
        "LANDFALL_CRASH_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    let name = sink.kind();
    eprintln!(
        "crash test ({name}): files={files} kills={kills} seed={seed} (rerun: LANDFALL_CRASH_SEED={seed} LANDFALL_CRASH_FILES={files} LANDFALL_CRASH_KILLS={kills})"
    );
    let mut log = RoundLog {
        header: format!(
            "crash test ({name}) seed {seed}, files {files}, kills {kills}: per-round log"
        ),
        lines: Vec::new(),
    };
    let mut rng = Rng(mix(seed));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let table = root.join("table");
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let scratch = root.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let sink_format = match sink {
        Sink::Delta => "",
        Sink::Parquet => "format = \"parquet\"\n",
    };
    let compaction_toml = if compaction {
        "compaction = { auto = true, min_files = 4, check_interval = \"200ms\" }\n"
    } else {
        ""
    };
    let cfg = config_in(
        root,
        &format!(
            r#"
[streams.crashy]
source = "{{root}}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
max_files_per_trigger = 40
poll_interval = "100ms"

[streams.crashy.sink]
{sink_format}{compaction_toml}path = "{{root}}/table"
partition_by = ["tag"]
target_file_size = "64k"
"#
        ),
    );
    let mut src = Source {
        landing: root.join("landing"),
        scratch,
        files: Vec::new(),
        limit: files,
    };

    // A third of the files land before the first start; the rest arrive during the rounds.
    for _ in 0..files / 3 {
        src.create();
    }
    let per_round = (files - files / 3) / kills + 1;
    let plans = schedule(sink, kills, &mut rng);

    let mut fired: BTreeMap<String, u64> = sink
        .failpoints()
        .iter()
        .map(|p| (p.to_string(), 0))
        .collect();
    let mut sigkills = 0u64;
    let mut recorded = 0usize;
    let mut rerun = 0usize;
    let mut total = Churn::default();
    let started = Instant::now();
    for (i, plan) in plans.iter().enumerate() {
        let round = i as u64 + 1;
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "crash loop took too long (round {round})"
        );
        let fp_seed = mix(seed ^ round.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let mut writer_rng = Rng(mix(fp_seed));
        let stderr_path = logs.join(format!("round{round:03}.stderr"));
        let mut child = Command::new(bin())
            .env("LANDFALL_LISTEN", "127.0.0.1:0")
            .args(["run", "--config", cfg.to_str().unwrap()])
            .env("LANDFALL_FAILPOINTS", &plan.failpoints)
            .env("LANDFALL_FAILPOINT_SEED", fp_seed.to_string())
            .env("LANDFALL_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let t = Instant::now();
        // Files keep arriving, changing and vanishing while the daemon runs.
        let (exit, churn) = std::thread::scope(|s| {
            let src = &mut src;
            let writer_rng = &mut writer_rng;
            let writer = s.spawn(move || {
                let mut c = Churn::default();
                let bursts = 5;
                for b in 0..bursts {
                    let n = per_round / bursts + u64::from(b < per_round % bursts);
                    src.burst(writer_rng, n, &mut c);
                    std::thread::sleep(Duration::from_millis(40 + writer_rng.below(120)));
                }
                c
            });
            let exit = loop {
                if let Some(st) = child.try_wait().unwrap() {
                    break Some(st);
                }
                if t.elapsed() >= plan.wait {
                    child.kill().unwrap(); // SIGKILL
                    child.wait().unwrap();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            (exit, writer.join().unwrap())
        });
        let ran = t.elapsed();
        let err = std::fs::read_to_string(&stderr_path).unwrap();
        keep_output("crash-round", err.as_bytes());
        let fp = fired_failpoint(&err);
        let ended = match (&fp, exit) {
            (Some(f), _) => format!("failpoint {f}"),
            (None, None) => "SIGKILL".to_string(),
            (None, Some(st)) => format!("exited by itself ({st})"),
        };
        // Between rounds, with the daemon down: one more overwrite and one more delete.
        let mut between = Churn::default();
        src.burst(&mut writer_rng, 0, &mut between);
        log.lines.push(format!(
            "round {round}: failpoints {:?} seed {fp_seed} wait {:?}: {ended} after {ran:?}; writer {churn}; between rounds {between}\n{}",
            plan.failpoints,
            plan.wait,
            tail(&err, 4)
        ));
        for bad in FAILED_STREAM {
            assert!(
                !err.contains(bad),
                "round {round}: the daemon logged `{bad}`:\n{err}"
            );
        }
        match (&fp, exit) {
            (Some(f), _) => {
                let point = f.split_whitespace().next().unwrap().to_string();
                assert!(
                    fired.contains_key(&point),
                    "round {round}: failpoint {point} is not one of {:?}",
                    sink.failpoints()
                );
                *fired.entry(point).or_default() += 1;
            }
            (None, None) => sigkills += 1,
            (None, Some(st)) => panic!(
                "round {round}: the daemon exited by itself ({st}) without a failpoint:\n{err}"
            ),
        }
        recorded += err.matches(RECORDED).count();
        rerun += err.matches(RERUN).count();
        for c in [churn, between] {
            total.created += c.created;
            total.overwritten += c.overwritten;
            total.deleted += c.deleted;
            total.flashed += c.flashed;
        }
    }
    while src.create().is_some() {
        total.created += 1;
    }
    let loop_time = started.elapsed();

    // With compaction: one calm round, long enough for a compaction to commit over the small
    // files the rounds left (the killed rounds may have been too short for any), then a stop.
    if compaction {
        let mut child = Command::new(bin())
            .env("LANDFALL_LISTEN", "127.0.0.1:0")
            .args(["run", "--config", cfg.to_str().unwrap()])
            .env("LANDFALL_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline && optimize_commits(&table) == 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: sending a signal to our own child process.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let _ = child.wait();
    }

    let out = drain(&cfg);
    let summary = String::from_utf8_lossy(&out.stdout);
    let drain_err = String::from_utf8_lossy(&out.stderr);
    for bad in FAILED_STREAM {
        assert!(
            !drain_err.contains(bad),
            "the final drain logged `{bad}`:\n{drain_err}"
        );
    }
    recorded += drain_err.matches(RECORDED).count();
    rerun += drain_err.matches(RERUN).count();
    // Word-bounded: "10 pending" must not pass for "0 pending".
    assert!(
        summary
            .split(|c: char| !c.is_ascii_alphanumeric())
            .collect::<Vec<_>>()
            .windows(2)
            .any(|w| w == ["0", "pending"]),
        "{summary}"
    );

    // The daemon's side: every failpoint fired, both recovery paths ran.
    let figures = format!(
        "crash test ({name}): {files} files ({} written after the first start; {} overwritten, {} deleted, {} created-and-deleted), {kills} rounds in {loop_time:?}: failpoints {fired:?}, {sigkills} SIGKILLs; recoveries: {recorded} recorded from the table, {rerun} run again",
        total.created, total.overwritten, total.deleted, total.flashed
    );
    eprintln!("{figures}");
    log.lines.push(figures.clone());
    let never: Vec<_> = fired
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(p, _)| p)
        .collect();
    assert!(
        never.is_empty(),
        "failpoints that never fired: {never:?}; {figures}"
    );
    assert!(
        recorded > 0,
        "no batch was recovered from the table; {figures}"
    );
    assert!(rerun > 0, "no batch was run again after a crash; {figures}");

    // The table: rows of each file, by its fate.
    let v = match sink {
        Sink::Delta => verify_args("delta", &table, &["--stream", "crashy", "--orphans"]),
        Sink::Parquet => verify_args("parquet", &table, &["--stream", "crashy"]),
    };
    let mut count: HashMap<u64, u64> = HashMap::new();
    for id in ids(&v, "id") {
        *count.entry(id).or_default() += 1;
    }
    let mut problems: Vec<String> = Vec::new();
    let mut ingested = vec![false; src.files.len()];
    for (n, f) in src.files.iter().enumerate() {
        let n = n as u64;
        let mut full = Vec::new();
        for ver in 0..f.versions {
            let c: Vec<u64> = ids_of(n, ver)
                .map(|id| count.remove(&id).unwrap_or(0))
                .collect();
            if c.iter().all(|x| *x == 1) {
                full.push(ver);
            } else if c.iter().any(|x| *x != 0) {
                problems.push(format!(
                    "{}: version {ver} has row counts {c:?}",
                    src.path(n).display()
                ));
            }
        }
        let fate = if f.deleted {
            "deleted"
        } else if f.versions > 1 {
            "overwritten"
        } else {
            "untouched"
        };
        match (fate, full.len()) {
            (_, 1) => ingested[n as usize] = true,
            ("deleted", 0) => {}
            (_, k) => problems.push(format!(
                "{} ({fate}, {} versions): {k} complete versions in the table (want {})",
                src.path(n).display(),
                f.versions,
                if fate == "deleted" { "0 or 1" } else { "1" }
            )),
        }
    }
    let mut unexpected: Vec<_> = count.keys().copied().collect();
    unexpected.sort_unstable();
    if !unexpected.is_empty() {
        problems.push(format!(
            "{} rows with ids no file held (first 20): {:?}",
            unexpected.len(),
            &unexpected[..unexpected.len().min(20)]
        ));
    }
    // (Reported with the ledger's view below.)

    // The ledger: one row per file, each INGESTED or skipped with a reason.
    let rows = state_rows(&cfg, "crashy");
    let mut by_path: HashMap<String, &Value> = HashMap::new();
    let mut skipped_by_reason: BTreeMap<String, u64> = BTreeMap::new();
    let mut readmitted = 0u64;
    for r in &rows {
        let path = r["path"].as_str().unwrap().to_string();
        let reason = r["reason"].as_str().unwrap_or("");
        match (r["ingestion_state"].as_str(), r["state"].as_str()) {
            (Some("INGESTED"), _) => {
                if reason.contains("changed after listing") {
                    readmitted += 1;
                }
            }
            (Some("SKIPPED"), Some("skipped")) if !reason.is_empty() => {
                let kind = reason.split([':', ' ']).next().unwrap().to_string();
                *skipped_by_reason.entry(kind).or_default() += 1;
            }
            _ => problems.push(format!(
                "state row neither INGESTED nor skipped with a reason: {r}"
            )),
        }
        if by_path.insert(path.clone(), r).is_some() {
            problems.push(format!("two state rows for {path}"));
        }
    }
    for (n, f) in src.files.iter().enumerate() {
        let p = src.path(n as u64).display().to_string();
        let r = by_path.remove(&p);
        let state = r.map(|r| {
            (
                r["ingestion_state"].as_str().unwrap_or(""),
                r["reason"].as_str().unwrap_or(""),
            )
        });
        match (ingested[n], state) {
            (true, Some(("INGESTED", _))) => {}
            (false, None) if f.deleted => {}
            (false, Some(("SKIPPED", reason))) if f.deleted && reason.starts_with("missing") => {}
            (i, _) => problems.push(format!(
                "{p} ({f:?}): in the table: {i}, state row {}",
                r.map_or("none".to_string(), |r| r.to_string())
            )),
        }
    }
    for p in by_path.keys() {
        problems.push(format!("state row for a path the test never wrote: {p}"));
    }

    if compaction {
        let optimized = optimize_commits(&table);
        if optimized == 0 {
            problems.push("no compaction committed during the rounds".to_string());
        }
        log.lines.push(format!("{optimized} compaction commit(s)"));
    }
    // Nothing outside the log / manifests is unreferenced, temporary files included.
    let orphans: Vec<String> = match sink {
        Sink::Delta => v["orphans"]
            .as_array()
            .expect("the verifier reports orphans")
            .iter()
            .map(|o| o.as_str().unwrap().to_string())
            // A compaction killed before its commit: its files wait for vacuum.
            .filter(|o| {
                !(compaction
                    && o.rsplit('/')
                        .next()
                        .is_some_and(|n| n.starts_with("part-compact-")))
            })
            .collect(),
        Sink::Parquet => parquet_orphans(&table, "crashy"),
    };
    if !orphans.is_empty() {
        problems.insert(
            0,
            format!(
                "{} files under the table that nothing references (first 10): {:?}",
                orphans.len(),
                &orphans[..orphans.len().min(10)]
            ),
        );
    }
    let figures = format!(
        "crash test ({name}): table holds {} rows; state: {} rows, skipped by reason {skipped_by_reason:?}, {readmitted} ingested after an earlier version changed after listing; {:?} in all",
        v["rows"],
        rows.len(),
        started.elapsed()
    );
    eprintln!("{figures}");
    log.lines.push(figures);
    assert!(
        problems.is_empty(),
        "{} problems (first 30):\n{}",
        problems.len(),
        problems[..problems.len().min(30)].join("\n")
    );
}

/// Every file under a Parquet-directory table that no manifest of `stream` names, except the
/// manifests themselves (the counterpart of `_delta_log`): leftovers in staging and temporary
/// `name#N` files included.
fn parquet_orphans(table: &Path, stream: &str) -> Vec<String> {
    let manifests = format!("_landfall/manifests/{stream}/");
    let mut referenced = BTreeSet::new();
    for e in std::fs::read_dir(table.join(&manifests)).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            let m: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            for f in m["files"].as_array().unwrap() {
                referenced.insert(f["path"].as_str().unwrap().to_string());
            }
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![table.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p
                .strip_prefix(table)
                .unwrap()
                .to_string_lossy()
                .replace(std::path::MAIN_SEPARATOR, "/");
            if !rel.starts_with(&manifests) && !referenced.contains(&rel) {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}
