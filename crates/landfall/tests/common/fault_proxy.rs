//! A fault-injecting HTTP proxy between landfall and an emulator (moto's S3 and SQS, Azurite's
//! queues), for the faults a network makes: an answer lost after the request landed, a
//! connection closed before it was sent, an answer cut short, a slow answer, a `503 SlowDown`
//! or a `500 InternalError`. Each request goes upstream on a connection of its own
//! (`Connection: close`), so the proxy needs no HTTP framing beyond the head and
//! `Content-Length`; a silent connection and a reset are made too. The rule decides, per request ([`Call`]: method, path and the API
//! operation), what the client gets.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What the client gets for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The upstream's answer.
    Pass,
    /// The request reaches the upstream, its answer never reaches the client (the connection
    /// is closed): the ambiguous outcome.
    LoseAnswer,
    /// The connection is closed (FIN) before anything is sent upstream: the client sees it
    /// end without an answer ([`Fault::Reset`] sends an RST instead).
    Close,
    /// `503 SlowDown`, as S3 throttles, without going upstream.
    SlowDown,
    /// `500 InternalError`, without going upstream.
    InternalError,
    /// `403 AccessDenied` (a permission missing), without going upstream: not retried by
    /// the client.
    AccessDenied,
    /// The answer, after this many milliseconds.
    Delay(u64),
    /// The request lands; the client gets the answer's head and half its body, then the
    /// connection ends.
    CutAnswer,
    /// The request is taken and never answered: the connection stays open, silent, until the
    /// client gives up on it (or the proxy stops). Nothing goes upstream.
    Hang,
    /// The connection is reset (RST, `SO_LINGER` 0) without an answer; nothing goes upstream.
    Reset,
}

/// One request as the rule sees it.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    /// The API operation where the request names one: SQS's `X-Amz-Target` (`ReceiveMessage`,
    /// `DeleteMessageBatch`, `ChangeMessageVisibilityBatch`, ...), its query `Action=`, or an
    /// Azure queue call (`GetMessages`, `UpdateMessage`, `DeleteMessage`); else empty.
    pub op: String,
}

/// A request as the rule sees it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub op: String,
    pub fault: Fault,
    /// The request body of a queue call (one with an `op`), its first 64 KiB; else empty.
    pub body: String,
}

type Rule = dyn Fn(&Call) -> Fault + Send + Sync;

pub struct FaultProxy {
    pub addr: String,
    /// Every request, in arrival order, with the fault it got.
    pub seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl FaultProxy {
    /// Proxy to `upstream` (`http://host:port`), deciding each request by `rule`.
    pub fn start(upstream: &str, rule: impl Fn(&Call) -> Fault + Send + Sync + 'static) -> Self {
        Self::start_as(upstream, false, rule)
    }

    /// As [`FaultProxy::start`], the `Host` header set to the upstream's: for servers that
    /// route by it (fake-gcs-server takes any other host for a bucket's virtual host).
    pub fn start_rewriting_host(
        upstream: &str,
        rule: impl Fn(&Call) -> Fault + Send + Sync + 'static,
    ) -> Self {
        Self::start_as(upstream, true, rule)
    }

    fn start_as(
        upstream: &str,
        rewrite_host: bool,
        rule: impl Fn(&Call) -> Fault + Send + Sync + 'static,
    ) -> Self {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let rule: Arc<Rule> = Arc::new(rule);
        let served = Arc::new(AtomicU64::new(0));
        {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let (upstream, rule, seen, served) =
                        (upstream.clone(), rule.clone(), seen.clone(), served.clone());
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        let _ = serve(conn, &upstream, rewrite_host, &*rule, &seen, &served, &stop);
                    });
                }
            });
        }
        FaultProxy { addr, seen, stop }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many requests got `fault`.
    pub fn count(&self, fault: Fault) -> usize {
        self.count_where(|s| s.fault == fault)
    }

    /// How many requests match `f`.
    pub fn count_where(&self, f: impl Fn(&Seen) -> bool) -> usize {
        self.seen.lock().unwrap().iter().filter(|s| f(s)).count()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
    }
}

/// Serve the requests of one client connection, one upstream connection each.
fn serve(
    conn: TcpStream,
    upstream: &str,
    rewrite_host: bool,
    rule: &Rule,
    seen: &Mutex<Vec<Seen>>,
    served: &AtomicU64,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let mut client = conn.try_clone()?;
    let mut reader = BufReader::new(conn);
    loop {
        // The head, line by line.
        let mut head = Vec::new();
        let mut length = 0usize;
        let mut target = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("x-amz-target:") {
                target = line[line.find('.').map_or(line.len(), |i| i + 1)..]
                    .trim()
                    .to_string();
            }
            assert!(
                !lower.starts_with("transfer-encoding:"),
                "the fault proxy does not forward chunked requests: {line}"
            );
            if lower.starts_with("connection:") {
                continue;
            }
            if rewrite_host && lower.starts_with("host:") {
                head.push(format!("Host: {upstream}\r\n"));
                continue;
            }
            head.push(line);
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        let first = head.first().cloned().unwrap_or_default();
        let mut words = first.split_whitespace();
        let method = words.next().unwrap_or_default().to_string();
        let path = words.next().unwrap_or_default().to_string();
        let op = operation(&method, &path, &target, &body);
        let fault = rule(&Call {
            method: method.clone(),
            path: path.clone(),
            op: op.clone(),
        });
        served.fetch_add(1, Ordering::Relaxed);
        let kept_body = match op.is_empty() {
            true => String::new(),
            false => String::from_utf8_lossy(&body[..body.len().min(64 << 10)]).into_owned(),
        };
        seen.lock().unwrap().push(Seen {
            method,
            path,
            op,
            fault,
            body: kept_body,
        });
        match fault {
            Fault::Hang => {
                hang(reader.get_mut(), stop);
                return Ok(());
            }
            Fault::Reset => {
                reset(&client);
                return Ok(());
            }
            Fault::Close => {
                let _ = client.shutdown(std::net::Shutdown::Both);
                return Ok(());
            }
            Fault::SlowDown => {
                let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
                write!(
                    client,
                    "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{xml}",
                    xml.len()
                )?;
                continue;
            }
            Fault::InternalError => {
                let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>";
                write!(
                    client,
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{xml}",
                    xml.len()
                )?;
                continue;
            }
            Fault::AccessDenied => {
                let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Access to the resource is denied.</Message></Error></ErrorResponse>";
                write!(
                    client,
                    "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nx-amzn-query-error: AccessDenied;Sender\r\nContent-Length: {}\r\n\r\n{xml}",
                    xml.len()
                )?;
                continue;
            }
            Fault::Delay(ms) => std::thread::sleep(std::time::Duration::from_millis(ms)),
            Fault::Pass | Fault::LoseAnswer | Fault::CutAnswer => {}
        }
        let mut up = TcpStream::connect(upstream)?;
        for line in &head {
            up.write_all(line.as_bytes())?;
        }
        up.write_all(b"Connection: close\r\n\r\n")?;
        up.write_all(&body)?;
        let mut answer = Vec::new();
        up.read_to_end(&mut answer)?;
        if fault == Fault::LoseAnswer {
            let _ = client.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
        if fault == Fault::CutAnswer {
            let head_end = answer
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map_or(answer.len(), |i| i + 4);
            let keep = head_end + (answer.len() - head_end) / 2;
            let _ = client.write_all(&answer[..keep]);
            let _ = client.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
        // The client may keep its connection: the answer's own framing (Content-Length) says
        // where it ends; one closed by the upstream without a length is closed here too.
        client.write_all(&answer)?;
        let head_end = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or(answer.len());
        let has_length = String::from_utf8_lossy(&answer[..head_end])
            .to_ascii_lowercase()
            .contains("content-length:");
        if !has_length {
            let _ = client.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
    }
}

/// Keep `conn` open and silent until the client closes it or the proxy stops.
fn hang(conn: &mut TcpStream, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(std::time::Duration::from_millis(200)));
    let mut byte = [0u8; 1];
    while !stop.load(Ordering::SeqCst) {
        match conn.read(&mut byte) {
            // The client gave up (closed) or sent more: either way it is no longer waiting.
            Ok(_) => return,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

/// Reset `conn`: with a zero linger time, closing it sends RST instead of FIN.
fn reset(conn: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    // Both descriptors of the connection close as `serve` returns: the reset is sent then.
}

/// The API operation a request names (see [`Call::op`]).
fn operation(method: &str, path: &str, target: &str, body: &[u8]) -> String {
    if !target.is_empty() {
        return target.to_string();
    }
    let form = String::from_utf8_lossy(body);
    if let Some(action) = form
        .split('&')
        .chain(path.split(['?', '&']))
        .find_map(|kv| kv.strip_prefix("Action="))
    {
        return action.to_string();
    }
    let bare = path.split('?').next().unwrap_or_default();
    if bare.contains("/messages") {
        return match (method, path.contains("popreceipt=")) {
            ("GET", _) => "GetMessages",
            ("PUT", true) => "UpdateMessage",
            ("DELETE", true) => "DeleteMessage",
            ("POST", _) => "PutMessage",
            _ => "",
        }
        .to_string();
    }
    String::new()
}
