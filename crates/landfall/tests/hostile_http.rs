//! The HTTP endpoints under hostile clients, with a stream ingesting behind them: a flood of
//! connections that send nothing, requests that are not HTTP, oversized and malformed paths,
//! queries and headers. The daemon keeps at most 64 connections of one client (256 in all)
//! and closes one idle for its idle time (75 s; 10 s here, through LANDFALL_TEST_HTTP_IDLE_MS),
//! answers every bad request with a 4xx (never a 5xx or a panic), and the stream commits the
//! files that arrive meanwhile.

mod common;
mod daemon;
use common::*;
use daemon::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Send raw bytes, read the answer's status (None: closed without one).
fn raw(addr: &str, request: &[u8]) -> Option<u16> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let head = String::from_utf8_lossy(&buf);
    head.split_whitespace().nth(1).and_then(|c| c.parse().ok())
}

/// Whether the server closed `s` (a read without waiting sees its end or a reset).
fn closed(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let r = (&*s).read(&mut b);
    s.set_nonblocking(false).unwrap();
    match r {
        Ok(0) => true,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(_) => true,
        Ok(_) => panic!("the server sent bytes on a connection that asked nothing"),
    }
}

fn committed(log: &str) -> usize {
    log.matches("batch committed").count()
}

#[test]
fn hostile_clients_get_4xx_and_bounded_slots_while_the_stream_ingests() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_rows(&root.join("in"), "a.json", 0..3);
    let cfg = Config::in_dir(root)
        .stream(
            Stream::local("s", &root.join("in"), "json", &root.join("table"))
                .set(
                    "schema",
                    "id BIGINT, name STRING, amount DOUBLE, tag STRING",
                )
                .set("poll_interval", "100ms"),
        )
        .write();
    let deadline = Instant::now() + Duration::from_secs(120);
    let log = root.join("daemon.log");
    let mut d = Daemon::start_with(
        bin(),
        &cfg,
        &log,
        deadline,
        &[
            ("LANDFALL_LOG", "info"),
            ("LANDFALL_TEST_HTTP_IDLE_MS", "10000"),
        ],
        &[],
    );
    let addr = d.addr.clone();
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    while committed(&logs()) < 1 {
        assert!(Instant::now() < deadline, "no first commit:\n{}", logs());
        std::thread::sleep(Duration::from_millis(100));
    }

    // Bad requests: a 4xx each, never a 5xx, the connection answered.
    // Under hyper's own URI limit (64 kB), so the handlers see them.
    let long = "a".repeat(60_000);
    let huge_header = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(1 << 20)
    );
    let bad: Vec<(String, Vec<u8>)> = vec![
        ("not HTTP".into(), b"HELLO THERE\r\n\r\n".to_vec()),
        (
            "a bad percent-escape".into(),
            b"GET /api/v1/streams/%ZZ HTTP/1.0\r\n\r\n".to_vec(),
        ),
        (
            "non-UTF-8 in the path".into(),
            b"GET /api/v1/streams/%FF%FE/files HTTP/1.0\r\n\r\n".to_vec(),
        ),
        (
            "a negative limit".into(),
            b"GET /api/v1/streams/s/files?limit=-1 HTTP/1.0\r\n\r\n".to_vec(),
        ),
        (
            "a limit past u64".into(),
            b"GET /api/v1/streams/s/files?limit=99999999999999999999999 HTTP/1.0\r\n\r\n".to_vec(),
        ),
        (
            "a 60 kB cursor".into(),
            format!("GET /api/v1/streams/s/files?after={long} HTTP/1.0\r\n\r\n").into_bytes(),
        ),
        (
            "a 60 kB stream name".into(),
            format!("GET /api/v1/streams/{long} HTTP/1.0\r\n\r\n").into_bytes(),
        ),
        (
            "an unknown state".into(),
            b"GET /api/v1/streams/s/files?state=%3Cscript%3E HTTP/1.0\r\n\r\n".to_vec(),
        ),
        ("a 1 MiB header".into(), huge_header.into_bytes()),
        (
            "an admin POST without a token, with a body".into(),
            b"POST /api/v1/streams/s/skip HTTP/1.0\r\nContent-Length: 5\r\n\r\n{{{{{".to_vec(),
        ),
    ];
    for (what, request) in &bad {
        let t = Instant::now();
        let answer = raw(&addr, request);
        eprintln!("{what}: {answer:?} in {:?}", t.elapsed());
        match answer {
            Some(status) => assert!(
                (400..500).contains(&status),
                "{what}: HTTP {status}, not a 4xx"
            ),
            // A request hyper cannot parse may be closed without an answer; nothing else may.
            None => assert!(
                what == "not HTTP" || what == "a 1 MiB header",
                "{what}: closed without an answer"
            ),
        }
    }
    assert_eq!(
        get(&addr, "/healthz").0,
        200,
        "the daemon stopped answering"
    );

    // A flood from one client: 600 connections that send nothing. The daemon serves 64 of
    // them, closes the rest at once, and its stream goes on.
    let flooded = Instant::now();
    let flood: Vec<TcpStream> = (0..600)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let closed_at_once = flood.iter().filter(|s| closed(s)).count();
    // Counted well inside the idle time, or the held ones may have been closed too.
    assert!(
        flooded.elapsed() < Duration::from_secs(8),
        "the flood took {:?}: too slow to count before the idle close",
        flooded.elapsed()
    );
    assert_eq!(
        closed_at_once,
        600 - 64,
        "of 600 idle connections from one client, 64 stay"
    );
    let before = committed(&logs());
    write_rows(&root.join("in"), "b.json", 3..6);
    while committed(&logs()) <= before {
        assert!(
            Instant::now() < deadline,
            "the stream stopped committing under the flood:\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The held ones are closed once idle; the endpoints answer again.
    let t = Instant::now();
    eprintln!("flood held; waiting for the idle close");
    loop {
        if try_get(&addr, "/healthz").is_ok_and(|(s, _)| s == 200) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(40),
            "the endpoints never answered again"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(1));
    let held_closed = flood.iter().filter(|s| closed(s)).count();
    assert_eq!(held_closed, 600, "idle connections left open");
    drop(flood);

    let (status, out) = d.stop(Duration::from_secs(30));
    assert!(status.success(), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert!(
        out.contains("http connection refused: too many open at once"),
        "the refusals are not logged"
    );
    let v = verify("delta", &root.join("table"), Some("s"));
    assert_exactly(&ids(&v, "id"), &(0..6).collect::<Vec<_>>());
}
