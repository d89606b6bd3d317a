//! What a client can take of the daemon through its HTTP port, bounded: at most
//! [`MAX_CONNECTIONS`] connections at once (one more is closed as soon as it is accepted, so a
//! flood of connections cannot take the file descriptors the streams need), and a connection
//! that moves no byte either way for [`IDLE`] is closed (an idle keep-alive, a client that
//! stopped sending its request or stopped reading the answer). axum's server sets no such
//! limits of its own.
//!
//! A client that trickles a byte now and then keeps its slot: the endpoints are unauthenticated
//! and belong on loopback or a private network (docs/operations.md); what the limits protect
//! is the ingestion, whose work never waits for the HTTP surface.

use axum::serve::Listener;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// A connection without a byte read or written for this long is closed.
pub const IDLE: Duration = Duration::from_secs(15);

/// A listener that keeps to the limits above.
pub struct Guarded {
    inner: TcpListener,
    slots: Arc<Semaphore>,
    refused: AtomicU64,
}

impl Guarded {
    pub fn new(inner: TcpListener) -> Self {
        Guarded {
            inner,
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            refused: AtomicU64::new(0),
        }
    }
}

impl Listener for Guarded {
    type Io = Guard;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = Listener::accept(&mut self.inner).await;
            match self.slots.clone().try_acquire_owned() {
                Ok(slot) => return (Guard::new(stream, slot), addr),
                Err(_) => {
                    // Closed at once; said once, then every 1,000th, so a flood cannot fill the log.
                    let n = self.refused.fetch_add(1, Ordering::Relaxed);
                    if n.is_multiple_of(1000) {
                        tracing::warn!(
                            limit = MAX_CONNECTIONS,
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
    _slot: OwnedSemaphorePermit,
    idle: Pin<Box<Sleep>>,
}

impl Guard {
    fn new(stream: TcpStream, slot: OwnedSemaphorePermit) -> Self {
        Guard {
            stream,
            _slot: slot,
            idle: Box::pin(tokio::time::sleep(IDLE)),
        }
    }

    /// `r` moved bytes: the deadline starts again. It is pending: the deadline may have passed.
    fn watch<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.idle.as_mut().reset(Instant::now() + IDLE);
                Poll::Ready(r)
            }
            Poll::Pending => match self.idle.as_mut().poll(cx) {
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
