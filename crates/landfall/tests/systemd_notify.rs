//! The daemon under a service manager: it speaks systemd's notify protocol on the socket
//! `NOTIFY_SOCKET` names (a datagram socket this test binds, as systemd does): READY=1 with a
//! one-line STATUS once its streams are started, WATCHDOG=1 at half of `WATCHDOG_USEC`, and
//! STOPPING=1 when asked to stop; and it exits cleanly.

mod common;
use common::*;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Datagrams until one holds `want` (each datagram's lines), failing after `within`.
fn wait_for(sock: &UnixDatagram, want: &str, within: Duration, seen: &mut Vec<String>) -> String {
    let end = Instant::now() + within;
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        if let Ok(n) = sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
            seen.push(msg.clone());
            if msg.lines().any(|l| l == want || l.starts_with(want)) {
                return msg;
            }
        }
    }
    panic!("no `{want}` within {within:?}; got {seen:?}");
}

#[test]
fn ready_status_watchdog_and_stopping_reach_the_service_manager() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_rows(&root.join("in"), "a.json", 0..5);
    write_rows(&root.join("in"), "b.json", 5..10);
    let cfg = Config::in_dir(root)
        .server("listen", "127.0.0.1:0")
        .stream(
            Stream::local(
                "events",
                root.join("in").as_path(),
                "json",
                root.join("table").as_path(),
            )
            .set(
                "schema",
                "id BIGINT, name STRING, amount DOUBLE, tag STRING",
            )
            .set("poll_interval", "200ms"),
        )
        .write();
    let socket = root.join("notify.sock");
    let sock = UnixDatagram::bind(&socket).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // systemd names the watched process in WATCHDOG_PID: the shell's pid, kept by `exec`.
    let mut child = Command::new("sh")
        .args(["-c", "WATCHDOG_PID=$$ exec \"$0\" \"$@\""])
        .arg(bin())
        .args(["run", "--config", cfg.to_str().unwrap()])
        .env("NOTIFY_SOCKET", &socket)
        .env("WATCHDOG_USEC", "400000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The daemon must not outlive a failed assertion (cleared once it has been waited for).
    struct Kill(Option<u32>);
    impl Drop for Kill {
        fn drop(&mut self) {
            if let Some(pid) = self.0 {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
    }
    let mut guard = Kill(Some(child.id()));
    let mut seen = Vec::new();
    let ready = wait_for(&sock, "READY=1", Duration::from_secs(60), &mut seen);
    let status = ready
        .lines()
        .find_map(|l| l.strip_prefix("STATUS="))
        .unwrap_or_else(|| panic!("READY without STATUS: {ready:?}"));
    assert!(
        status.starts_with("1 stream")
            && status.contains("committed")
            && status.contains("pending"),
        "{status}"
    );
    // Pings at half the watchdog interval (200 ms): consecutive ones well inside the
    // interval systemd would abort at (400 ms).
    wait_for(&sock, "WATCHDOG=1", Duration::from_secs(5), &mut seen);
    for _ in 0..3 {
        let t = Instant::now();
        wait_for(&sock, "WATCHDOG=1", Duration::from_secs(5), &mut seen);
        assert!(
            t.elapsed() < Duration::from_millis(400),
            "a ping {:?} after the last",
            t.elapsed()
        );
    }

    // Both files land while it runs.
    let table = root.join("table");
    let end = Instant::now() + Duration::from_secs(60);
    while !table.join("_delta_log/00000000000000000001.json").exists() {
        assert!(Instant::now() < end, "nothing committed");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = child.id().to_string();

    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let stopping = wait_for(&sock, "STOPPING=1", Duration::from_secs(30), &mut seen);
    assert!(stopping.contains("STATUS=stopping"), "{stopping:?}");
    let code = child.wait().unwrap();
    guard.0 = None;
    assert!(code.success(), "{code:?}");
    let v = verify("delta", &table, Some("events"));
    assert_exactly(&ids(&v, "id"), &(0..10).collect::<Vec<_>>());
}
