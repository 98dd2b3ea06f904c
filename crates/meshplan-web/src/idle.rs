//! The idle timeout: a listener whose connections fail once neither a byte
//! is read nor written for a while, so a client that opens connections and
//! stalls (half a request, or an idle keep-alive) cannot hold them open.
//! axum's `serve` sets no read or idle timeout of its own. While a request
//! of the connection is being answered (a search may take seconds) the
//! connection is busy, not idle: [`busy`] marks it so.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// A TCP listener handing out [`IdleStream`]s.
pub(crate) struct IdleListener {
    inner: TcpListener,
    idle: Duration,
}

impl IdleListener {
    pub(crate) fn new(inner: TcpListener, idle: Duration) -> IdleListener {
        IdleListener { inner, idle }
    }
}

impl Listener for IdleListener {
    type Io = IdleStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (s, a) = Listener::accept(&mut self.inner).await;
        (IdleStream::new(s, self.idle), a)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection that errs with `TimedOut` when it has been idle (no byte
/// read or written) for `idle` while the server waits on it.
pub(crate) struct IdleStream {
    inner: TcpStream,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    busy: Busy,
}

/// Requests of one connection being answered now (the connection's
/// `ConnectInfo`, so the [`busy`] middleware can count them).
#[derive(Clone, Default)]
pub(crate) struct Busy(Arc<AtomicUsize>);

impl Connected<IncomingStream<'_, IdleListener>> for Busy {
    fn connect_info(stream: IncomingStream<'_, IdleListener>) -> Busy {
        stream.io().busy.clone()
    }
}

/// Decrements the count when the answer is done or its future dropped.
struct Answering(Busy);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Middleware: hands the connection's [`Busy`] count to the handler (a
/// router used without [`IdleListener`], as in tests, has none).
pub(crate) async fn busy(mut req: Request, next: Next) -> Response {
    if let Some(ConnectInfo(b)) = req.extensions().get::<ConnectInfo<Busy>>().cloned() {
        req.extensions_mut().insert(b);
    }
    next.run(req).await
}

impl Busy {
    /// Mark the connection busy until the guard is dropped: while the
    /// server computes an answer (the request fully read), not while it
    /// waits for the client.
    pub(crate) fn enter(&self) -> impl Drop {
        self.0.fetch_add(1, Ordering::SeqCst);
        Answering(self.clone())
    }
}

impl IdleStream {
    fn new(inner: TcpStream, idle: Duration) -> IdleStream {
        IdleStream {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            busy: Busy::default(),
        }
    }

    /// Progress: the connection is busy, the clock starts again.
    fn touch(&mut self) {
        let next = Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    /// What a pending read or write becomes once the deadline has passed
    /// (unless a request is being answered: then the clock starts again).
    fn expired<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        if self.deadline.as_mut().poll(cx).is_ready() && self.busy.0.load(Ordering::SeqCst) > 0 {
            self.touch();
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection idle too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for IdleStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Pending => this.expired(cx),
            ready => {
                this.touch();
                ready
            }
        }
    }
}

impl AsyncWrite for IdleStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Pending => this.expired(cx),
            ready => {
                this.touch();
                ready
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
