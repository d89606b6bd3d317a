//! The few requests the CLI sends to a running daemon on its own address (`landfall health`,
//! `landfall top`): one `GET` over HTTP/1.0, so the answer ends with the connection and needs
//! no chunked decoding. A wildcard listen address is reached on loopback.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// The address to connect to for a daemon listening on `listen`.
pub fn reachable(listen: &str) -> String {
    listen
        .replace("0.0.0.0:", "127.0.0.1:")
        .replace("[::]:", "[::1]:")
}

/// An answer: status code and body.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Answers larger than this are refused (the API's pages are far smaller).
const MAX_ANSWER: u64 = 64 << 20;

/// `GET path` on `addr` (`host:port`), the whole exchange within `timeout`.
pub fn get(addr: &str, path: &str, timeout: Duration) -> std::io::Result<Answer> {
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no whole answer within {timeout:?}"),
                )
            })
    };
    let sock = addr
        .parse::<std::net::SocketAddr>()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, left()?)?;
    s.set_write_timeout(Some(left()?))?;
    s.write_all(
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n")
            .as_bytes(),
    )?;
    // Each read may wait only for what is left of the deadline: a daemon that trickles its
    // answer cannot hold the caller past it.
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        s.set_read_timeout(Some(left()?))?;
        let n = match s.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if raw.len() as u64 > MAX_ANSWER {
            return Err(std::io::Error::other(format!(
                "the answer is larger than {} MiB",
                MAX_ANSWER >> 20
            )));
        }
    }
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| not_http(&raw))?;
    let head = String::from_utf8_lossy(&raw[..head_end]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| not_http(&raw))?;
    Ok(Answer {
        status,
        body: raw[head_end + 4..].to_vec(),
    })
}

/// `GET path` answered 200 with JSON: the value, or why not.
pub fn get_json(addr: &str, path: &str, timeout: Duration) -> Result<serde_json::Value, String> {
    let a = get(addr, path, timeout).map_err(|e| format!("http://{addr}{path}: {e}"))?;
    if a.status != 200 {
        return Err(format!(
            "http://{addr}{path} answered HTTP {}: {}",
            a.status,
            String::from_utf8_lossy(&a.body).trim()
        ));
    }
    serde_json::from_slice(&a.body).map_err(|e| format!("http://{addr}{path}: not JSON ({e})"))
}

fn not_http(raw: &[u8]) -> std::io::Error {
    let start = String::from_utf8_lossy(&raw[..raw.len().min(64)]).into_owned();
    std::io::Error::other(format!("not an HTTP answer: {start:?}"))
}
