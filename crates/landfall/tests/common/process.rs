//! Running the real binary: `landfall <args>` with or without failpoints, drains, its JSON
//! outputs, and configs written for it.

#[allow(unused_imports)]
use super::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_landfall")
}

pub fn repo_root() -> PathBuf {
    // At run time first: a build cache shared between clones may hold a test binary built
    // in another checkout, whose compile-time path is gone.
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Run `landfall <args>` and return its output (not asserting success).
pub fn landfall(args: &[&str]) -> Output {
    landfall_env(args, &[])
}

/// Run `landfall <args>` with extra environment variables (failpoints).
pub fn landfall_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let o = Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .args(args)
        .env("LANDFALL_LOG", "info")
        .envs(env.iter().copied())
        .output()
        .expect("landfall runs");
    keep_output(args.first().copied().unwrap_or("cli"), text(&o).as_bytes());
    o
}

/// `landfall run --available-now` that aborts at failpoint `point` (like `kill -9` there).
pub fn crash_at(config: &Path, point: &str) -> Output {
    crash_when(config, point, "1")
}

/// [`crash_at`] on the `n`th hit of `point` exactly.
pub fn crash_at_hit(config: &Path, point: &str, n: u32) -> Output {
    crash_when(config, point, &format!("#{n}"))
}

fn crash_when(config: &Path, point: &str, trigger: &str) -> Output {
    let o = landfall_env(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--available-now",
        ],
        &[("LANDFALL_FAILPOINTS", &format!("{point}={trigger}"))],
    );
    assert!(
        !o.status.success()
            && String::from_utf8_lossy(&o.stderr).contains(&format!("failpoint {point}")),
        "expected an abort at {point}:\n{}",
        text(&o)
    );
    o
}

/// `landfall state <stream> --format json` as JSON rows.
pub fn state_rows(config: &Path, stream: &str) -> Vec<Value> {
    json_rows(config, &["state", stream])
}

/// `landfall <command...> --config <config> --format json`: the JSON array it prints.
pub fn json_rows(config: &Path, command: &[&str]) -> Vec<Value> {
    let mut args = command.to_vec();
    args.extend(["--config", config.to_str().unwrap(), "--format", "json"]);
    let o = landfall(&args);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice::<Value>(&o.stdout)
        .expect("landfall prints JSON")
        .as_array()
        .unwrap()
        .clone()
}

/// The state row whose path ends with `/name`.
pub fn state_of<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter()
        .find(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with(&format!("/{name}")))
        })
        .unwrap_or_else(|| panic!("no state row for {name} in {rows:?}"))
}

pub fn text(o: &Output) -> String {
    format!(
        "--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `landfall run --available-now` that must succeed.
pub fn drain(config: &Path) -> Output {
    drain_env(config, &[])
}

/// [`drain`] with extra environment variables (test knobs, log filters).
pub fn drain_env(config: &Path, env: &[(&str, &str)]) -> Output {
    let o = landfall_env(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--available-now",
        ],
        env,
    );
    assert!(o.status.success(), "landfall run failed:\n{}", text(&o));
    o
}

/// The malformed rows a run's summary reports, over all its streams (`..., N malformed
/// row(s)` on each `this run:` line). Fails the test when no summary line is found.
pub fn malformed_rows(o: &Output) -> u64 {
    let out = String::from_utf8_lossy(&o.stdout);
    let counts: Vec<u64> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("this run:"))
        .map(|l| {
            let before = l
                .rsplit_once(" malformed row(s)")
                .unwrap_or_else(|| panic!("no malformed count in `{l}`"))
                .0;
            before
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no malformed count in `{l}`"))
        })
        .collect();
    assert!(!counts.is_empty(), "no run summary in:\n{}", text(o));
    counts.iter().sum()
}

pub fn write_config(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("landfall.toml");
    std::fs::write(&p, body).unwrap();
    p
}

/// Write a config whose `[server]` section keeps state under `root`; `{root}` in `streams` is
/// replaced by the directory.
pub fn config_in(root: &Path, streams: &str) -> PathBuf {
    let body = format!("[server]\nstate_dir = \"{{root}}/state\"\n{streams}");
    write_config(root, &body.replace("{root}", &root.display().to_string()))
}

/// `landfall run --available-now --stream <stream>` that must succeed.
pub fn drain_stream(config: &Path, stream: &str) -> Output {
    let o = landfall(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--available-now",
        "--stream",
        stream,
    ]);
    assert!(
        o.status.success(),
        "landfall run --stream {stream} failed:\n{}",
        text(&o)
    );
    o
}

/// Start a continuous daemon on `config` and kill -9 it after a random `min_ms` to
/// `min_ms + spread_ms`, `times` times. Each daemon must still be running when it is killed and
/// its log (kept in the config's directory, `kill-<n>.log`) must hold no stream failure: a
/// continuous mode that crashed or stopped at start would otherwise reduce a crash test to its
/// final drain. The kill instants come from `LANDFALL_TEST_KILL_SEED` when set (else from the
/// clock), and the seed is printed, so a failure replays. Returns how many runs logged a
/// committed batch (the callers check progress against it).
pub fn kill_9_repeatedly(config: &Path, times: usize, min_ms: u64, spread_ms: u64) -> usize {
    kill_runs(config, times, min_ms, spread_ms, false).0
}

/// [`kill_9_repeatedly`] under network faults: a stream may fail and be restarted by the
/// supervisor (a transient cause: retried with backoff), never stop, panic or give up.
/// Returns how many runs committed a batch and how many restarts the runs logged.
pub fn kill_9_under_faults(
    config: &Path,
    times: usize,
    min_ms: u64,
    spread_ms: u64,
) -> (usize, usize) {
    kill_runs(config, times, min_ms, spread_ms, true)
}

fn kill_runs(
    config: &Path,
    times: usize,
    min_ms: u64,
    spread_ms: u64,
    restarts_allowed: bool,
) -> (usize, usize) {
    let seed: u64 = match std::env::var("LANDFALL_TEST_KILL_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("LANDFALL_TEST_KILL_SEED `{s}` is not a number")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    eprintln!("kill_9_repeatedly: LANDFALL_TEST_KILL_SEED={seed}");
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15 | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let dir = config.parent().unwrap();
    let (mut progressed, mut restarts) = (0, 0);
    for n in 0..times {
        let log = dir.join(format!("kill-{n}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let mut daemon = Command::new(bin())
            .args(["run", "--config", config.to_str().unwrap()])
            .env("LANDFALL_LISTEN", "127.0.0.1:0")
            .env("LANDFALL_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let after = min_ms + next() % spread_ms;
        std::thread::sleep(std::time::Duration::from_millis(after));
        let alive = daemon.try_wait().unwrap().is_none();
        daemon.kill().unwrap();
        daemon.wait().unwrap();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        keep_output("killed", text.as_bytes());
        assert!(
            alive,
            "run {n} (seed {seed}) exited before its kill at {after} ms:\n{text}"
        );
        let who = format!("run {n} (seed {seed})");
        if restarts_allowed {
            assert_no_stream_stopped_for_good(&text, &who);
            restarts += text.matches("stream failed; restarting").count();
        } else {
            assert_no_stream_stopped(&text, &who);
        }
        if text.contains("batch committed") {
            progressed += 1;
        }
    }
    (progressed, restarts)
}

/// Fails the test when a daemon's log shows a stream failing or stopping, or a panic: what a
/// kill must never cause. `who` names the run.
pub fn assert_no_stream_stopped(log: &str, who: &str) {
    for bad in ["stream failed", "stream stopped", "panicked", "giving up"] {
        assert!(!log.contains(bad), "{who} logged `{bad}`:\n{log}");
    }
}

/// Fails the test when a daemon's log shows a stream stopping, giving up or a panic: what a
/// network fault must never cause (a failed attempt restarted with backoff is allowed).
pub fn assert_no_stream_stopped_for_good(log: &str, who: &str) {
    for bad in ["stream stopped", "panicked", "giving up"] {
        assert!(!log.contains(bad), "{who} logged `{bad}`:\n{log}");
    }
}

/// `landfall schema <stream> --format json`: the stream's schema versions, oldest first.
pub fn schema_history(config: &Path, stream: &str) -> Vec<Value> {
    json_rows(config, &["schema", stream])
}

/// An output kept for the secret scan (see [`keep_output`]), for tests that run the binary
/// with a `Command` of their own: `cmd.output().kept()`.
pub trait Kept {
    fn kept(self) -> Output;
}

impl Kept for std::io::Result<Output> {
    fn kept(self) -> Output {
        let o = self.expect("the landfall binary runs");
        keep_output("cli", text(&o).as_bytes());
        o
    }
}
