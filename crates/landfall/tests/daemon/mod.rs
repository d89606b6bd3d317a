//! A running daemon (or any other server process) for the tests that talk to it over HTTP:
//! spawned with its output in a log file, stopped with SIGTERM (then SIGKILL) when dropped, so
//! no path out of a test, panics included, leaves it running; a test that panics while it runs
//! prints its log.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod known;
#[allow(unused_imports)]
pub use known::*;
// The same file as common/'s: a test binary with both has two copies of one small function
// (daemon/ cannot reach common/, which not every test declares).
#[allow(clippy::duplicate_mod)]
#[path = "../common/outputs.rs"]
mod outputs;

/// A child process stopped when dropped.
pub struct Process {
    pub name: String,
    pub log: PathBuf,
    child: Option<Child>,
    status: Option<ExitStatus>,
    /// SIGTERM was sent (by `terminate`): `stop` waits without sending it again.
    terminated: bool,
}

impl Process {
    /// Spawn `cmd` with stdout and stderr appended to `log`. A program that cannot be started
    /// fails the test with `missing` (how to install it).
    pub fn spawn(name: &str, mut cmd: Command, log: &Path, missing: &str) -> Process {
        let out = std::fs::File::create(log).unwrap();
        let err = out.try_clone().unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({e}): {missing}"));
        Process {
            name: name.to_string(),
            log: log.to_path_buf(),
            child: Some(child),
            status: None,
            terminated: false,
        }
    }

    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Fails the test if the process has exited (with its log).
    pub fn assert_running(&mut self) {
        if let Some(c) = self.child.as_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            self.status = Some(status);
            self.child = None;
            panic!("{} exited ({status}); its log:\n{}", self.name, self.logs());
        }
    }

    /// `kill -<signal>` the running process; whether it was delivered.
    fn send(&self, signal: &str) -> bool {
        self.id().is_some_and(|pid| {
            Command::new("kill")
                .args([&format!("-{signal}"), &pid.to_string()])
                .status()
                .is_ok_and(|s| s.success())
        })
    }

    /// Send `signal` (`HUP`, `TERM`, ...); fails the test if it cannot be delivered. (A process
    /// not yet waited for keeps its id, so this holds even if it has just exited.)
    pub fn signal(&self, signal: &str) {
        assert!(
            self.send(signal),
            "cannot send SIG{signal} to {}",
            self.name
        );
    }

    /// SIGTERM without waiting (to stop several processes at once); `stop` or `wait` then
    /// waits for the exit.
    pub fn terminate(&mut self) {
        self.signal("TERM");
        self.terminated = true;
    }

    /// Wait up to `grace` for the process to exit, then SIGKILL it: the exit status if it
    /// stopped by itself.
    pub fn wait(&mut self, grace: Duration) -> Option<ExitStatus> {
        let Some(mut child) = self.child.take() else {
            return self.status;
        };
        let t = Instant::now();
        loop {
            if let Ok(Some(s)) = child.try_wait() {
                self.status = Some(s);
                return self.status;
            }
            if t.elapsed() > grace {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM (unless `terminate` sent it), then SIGKILL after `grace`; the exit status if it
    /// stopped by itself.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let Some(child) = self.child.as_mut() else {
            return self.status;
        };
        if let Ok(Some(s)) = child.try_wait() {
            self.status = Some(s);
            self.child = None;
            return self.status;
        }
        if !self.terminated {
            self.send("TERM");
            self.terminated = true;
        }
        self.wait(grace)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let running = self.child.is_some();
        self.stop(Duration::from_secs(30));
        outputs::keep_output(&self.name, self.logs().as_bytes());
        // A test that fails while the process runs: its log, read after it stopped.
        if running && std::thread::panicking() {
            eprintln!(
                "{} log ({}):\n{}",
                self.name,
                self.log.display(),
                self.logs()
            );
        }
    }
}

/// `landfall run --config <config>` listening on an ephemeral loopback port.
pub struct Daemon {
    pub process: Process,
    /// The HTTP address, once `wait_listening` (or `start`) has read it from the log.
    pub addr: String,
}

impl Daemon {
    /// Start the daemon (`LANDFALL_LOG=info`) and wait (until `deadline`) for its HTTP
    /// address in its log.
    pub fn start(bin: &str, config: &Path, log: &Path, deadline: Instant) -> Daemon {
        Daemon::start_with(bin, config, log, deadline, &[("LANDFALL_LOG", "info")], &[])
    }

    /// `start` with the environment variables `envs` and the extra arguments `args` of
    /// `landfall run`.
    pub fn start_with(
        bin: &str,
        config: &Path,
        log: &Path,
        deadline: Instant,
        envs: &[(&str, &str)],
        args: &[&str],
    ) -> Daemon {
        let mut d = Daemon::spawn(bin, config, log, envs, args);
        d.wait_listening(deadline);
        d
    }

    /// Spawn the daemon without waiting for it to listen (`addr` is empty until
    /// `wait_listening`). Its log level, `LANDFALL_LOG`, and its admin token,
    /// `LANDFALL_ADMIN_TOKEN`, are never inherited from the test's environment: only `envs`
    /// sets them.
    pub fn spawn(
        bin: &str,
        config: &Path,
        log: &Path,
        envs: &[(&str, &str)],
        args: &[&str],
    ) -> Daemon {
        let mut cmd = Command::new(bin);
        cmd.env_remove("LANDFALL_LOG")
            .env_remove("LANDFALL_ADMIN_TOKEN")
            .env("LANDFALL_LISTEN", "127.0.0.1:0")
            .env("NO_COLOR", "1")
            .envs(envs.iter().copied())
            .args(["run", "--config", config.to_str().unwrap()])
            .args(args);
        let process = Process::spawn("landfall", cmd, log, "the test binary is missing");
        Daemon {
            process,
            addr: String::new(),
        }
    }

    /// Wait (until `deadline`) for the HTTP address in the log; fails the test if the daemon
    /// exits first.
    pub fn wait_listening(&mut self, deadline: Instant) -> &str {
        self.addr = loop {
            let text = self.process.logs();
            if let Some(line) = text.lines().find(|l| l.contains("http server listening")) {
                let at = line.find("127.0.0.1:").expect("loopback address");
                let port: String = line[at + 10..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                break format!("127.0.0.1:{port}");
            }
            self.process.assert_running();
            assert!(
                Instant::now() < deadline,
                "the daemon did not listen:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        &self.addr
    }

    /// SIGTERM (unless `terminate` sent it) and wait for the exit: its status and the log.
    /// Fails the test, with the log, if it does not stop within `grace` (it is then killed).
    pub fn stop(&mut self, grace: Duration) -> (ExitStatus, String) {
        let status = self.process.stop(grace);
        let logs = self.process.logs();
        let status = status.unwrap_or_else(|| {
            panic!("the daemon did not stop within {grace:?} of SIGTERM; its log:\n{logs}")
        });
        (status, logs)
    }
}

/// Send `request` to `addr` and read the whole response (HTTP/1.0): (status, body).
fn exchange(addr: &str, request: &[u8], timeout: Duration) -> std::io::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(timeout))?;
    s.write_all(request)?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP response: {raw}")))?;
    Ok((status, body.to_string()))
}

/// GET `path` from `addr` over HTTP/1.0: (status, body), or the connection error.
pub fn try_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    exchange(addr, request.as_bytes(), Duration::from_secs(10))
}

pub fn get(addr: &str, path: &str) -> (u16, String) {
    try_get(addr, path).unwrap_or_else(|e| panic!("GET http://{addr}{path}: {e}"))
}

pub fn get_json(addr: &str, path: &str) -> (u16, serde_json::Value) {
    let (status, body) = get(addr, path);
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    (status, v)
}

/// POST `body` (JSON) to `path` with an optional bearer token: (status, body as JSON, null
/// when it is not JSON).
pub fn post(addr: &str, path: &str, token: Option<&str>, body: &str) -> (u16, serde_json::Value) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, body) = exchange(addr, request.as_bytes(), Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("POST http://{addr}{path}: {e}"));
    (
        status,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
    )
}

/// The value of the metric line `series` (exact name and labels) in a scrape.
pub fn metric(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// The sum of the series of metric `name` whose labels contain `label` (`outcome="files"`).
pub fn metric_sum(scrape: &str, name: &str, label: &str) -> f64 {
    scrape
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A loopback port free at the time of the call.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
