//! A running daemon (or any other server process) for the tests that talk to it over HTTP:
//! spawned with its output in a log file, stopped with SIGTERM (then SIGKILL) when dropped, so
//! no path out of a test, panics included, leaves it running.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A child process stopped when dropped.
pub struct Process {
    pub name: String,
    pub log: PathBuf,
    child: Option<Child>,
    status: Option<ExitStatus>,
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

    /// SIGTERM, then SIGKILL after `grace`; the exit status if it stopped by itself.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let Some(mut child) = self.child.take() else {
            return self.status;
        };
        if let Ok(Some(s)) = child.try_wait() {
            self.status = Some(s);
            return self.status;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
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
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(30));
    }
}

/// `landfall run --config <config>` listening on an ephemeral loopback port.
pub struct Daemon {
    pub process: Process,
    pub addr: String,
}

impl Daemon {
    /// Start the daemon and wait (until `deadline`) for its HTTP address in its log.
    pub fn start(bin: &str, config: &Path, log: &Path, deadline: Instant) -> Daemon {
        let mut cmd = Command::new(bin);
        cmd.env("LANDFALL_LISTEN", "127.0.0.1:0")
            .env("LANDFALL_LOG", "info")
            .env("NO_COLOR", "1")
            .args(["run", "--config", config.to_str().unwrap()]);
        let mut process = Process::spawn("landfall", cmd, log, "the test binary is missing");
        let addr = loop {
            let text = process.logs();
            if let Some(line) = text.lines().find(|l| l.contains("http server listening")) {
                let at = line.find("127.0.0.1:").expect("loopback address");
                let port: String = line[at + 10..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                break format!("127.0.0.1:{port}");
            }
            process.assert_running();
            assert!(
                Instant::now() < deadline,
                "the daemon did not listen:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        Daemon { process, addr }
    }
}

/// GET `path` from `addr` over HTTP/1.0: (status, body), or the connection error.
pub fn try_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
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

pub fn get(addr: &str, path: &str) -> (u16, String) {
    try_get(addr, path).unwrap_or_else(|e| panic!("GET http://{addr}{path}: {e}"))
}

pub fn get_json(addr: &str, path: &str) -> (u16, serde_json::Value) {
    let (status, body) = get(addr, path);
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    (status, v)
}

/// A loopback port free at the time of the call.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
