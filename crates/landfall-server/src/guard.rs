//! What a client can take of the daemon through its HTTP port, bounded: at most
//! [`MAX_CONNECTIONS`] connections at once and [`PER_CLIENT`] from one address (one more is
//! closed as soon as it is accepted, so one client cannot take every slot, and a flood of
//! connections cannot take file descriptors without bound), and a connection that moves no
//! byte either way for [`IDLE`] is closed (an idle keep-alive, a client that stopped sending
//! its request or stopped reading the answer). axum's server sets no such limits of its own.
//! [`IDLE`] is longer than load balancers' own idle timeouts (60 s), so they close first, and
//! longer than any handler runs (the slowest, `/api/v1/locations`, bounds each queue's answer
//! at 10 s): hyper watches the read side while a handler runs, so the deadline also bounds a
//! handler.
//!
//! A client that trickles a byte now and then keeps its slot: the endpoints are unauthenticated
//! and belong on loopback or a private network (docs/operations.md); the streams never wait
//! for the HTTP surface.

use axum::serve::Listener;
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections served at once to one client address.
pub const PER_CLIENT: usize = 64;
/// A connection without a byte read or written for this long is closed.
pub const IDLE: Duration = Duration::from_secs(75);

/// [`IDLE`], or `LANDFALL_TEST_HTTP_IDLE_MS` (tests shorten it to watch it happen).
fn idle() -> Duration {
    std::env::var("LANDFALL_TEST_HTTP_IDLE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(IDLE, Duration::from_millis)
}

/// A listener that keeps to the limits above.
pub struct Guarded {
    inner: TcpListener,
    slots: Arc<Semaphore>,
    clients: Arc<Mutex<HashMap<IpAddr, usize>>>,
    refused: AtomicU64,
    idle: Duration,
}

impl Guarded {
    pub fn new(inner: TcpListener) -> Self {
        Guarded {
            inner,
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            clients: Arc::default(),
            refused: AtomicU64::new(0),
            idle: idle(),
        }
    }

    /// A slot for a connection from `ip`, if the limits allow one.
    fn admit(&self, ip: IpAddr) -> Option<Slot> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let n = clients.entry(ip).or_default();
        if *n >= PER_CLIENT {
            return None;
        }
        let permit = self.slots.clone().try_acquire_owned().ok()?;
        *n += 1;
        Some(Slot {
            _permit: permit,
            ip,
            clients: self.clients.clone(),
        })
    }
}

/// A connection's place in the limits, given back when it closes.
struct Slot {
    _permit: OwnedSemaphorePermit,
    ip: IpAddr,
    clients: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = clients.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                clients.remove(&self.ip);
            }
        }
    }
}

impl Listener for Guarded {
    type Io = Guard;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = Listener::accept(&mut self.inner).await;
            match self.admit(addr.ip()) {
                Some(slot) => return (Guard::new(stream, slot, self.idle), addr),
                None => {
                    // Closed at once; said once, then every 1,000th, so a flood cannot fill the log.
                    let n = self.refused.fetch_add(1, Ordering::Relaxed);
                    if n.is_multiple_of(1000) {
                        tracing::warn!(
                            limit = MAX_CONNECTIONS,
                            per_client = PER_CLIENT,
                            refused = n + 1,
                            client = %addr,
                            "http connection refused: too many open at once"
                        );
                    }
                    drop(stream);
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// One served connection: its slot, freed when it closes, and its idle deadline.
pub struct Guard {
    stream: TcpStream,
    _slot: Slot,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl Guard {
    fn new(stream: TcpStream, slot: Slot, idle: Duration) -> Self {
        Guard {
            stream,
            _slot: slot,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }

    /// `r` moved bytes: the deadline starts again. It is pending: the deadline may have passed.
    fn watch<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                let next = Instant::now() + self.idle;
                self.deadline.as_mut().reset(next);
                Poll::Ready(r)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "http connection idle: closed",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncRead for Guard {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.stream).poll_read(cx, buf);
        self.watch(cx, r)
    }
}

impl AsyncWrite for Guard {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.stream).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
