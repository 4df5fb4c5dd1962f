//! The HTTP connection edge: accepts TCP (and TLS) connections and serves
//! the router over HTTP/1.1 on each, within bounds, so no client behaviour
//! can exhaust the process's descriptors or stall other scrapes:
//!
//! - at most `max_connections` open at once (and at most half the process's
//!   descriptor limit). At the cap, the connection that has waited longest
//!   without a request in progress (a TLS handshake, headers not yet
//!   complete, a kept-alive connection between requests) is closed to make
//!   room, and that is logged, at most every ten seconds. A scraper sends its
//!   request at once, so held or trickling connections cannot keep it out.
//! - at most `max_tls_handshakes` handshakes in progress, each within
//!   `tls_handshake_timeout` of accept; at that cap the oldest handshake
//!   gives way.
//! - a request's headers within `header_read_timeout` (from accept on a new
//!   connection, from the first byte of the next request on a kept-alive
//!   one), a kept-alive connection's next request within `idle_timeout`, and
//!   a response that the client stops reading closed after `idle_timeout`.
//! - request heads up to `max_header_bytes` (431 beyond) and bodies up to
//!   `max_body_bytes` (413 beyond).
//!
//! On shutdown the listener is closed at once (the port is free for a new
//! process), idle connections are closed, requests in progress get a short
//! grace to finish.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode, header};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::HttpLimits;
use crate::web::Live;

/// How long requests in progress may take to finish after shutdown starts.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// At most one log line per this interval for each kind of limit reached.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// Pause after a failed accept (such as running out of descriptors), so the
/// loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Where a connection stands; only the first three may be closed to make
/// room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    /// TLS handshake in progress.
    Handshake = 1,
    /// Receiving a request's headers (or nothing yet on a new connection).
    Head = 2,
    /// Kept alive between requests.
    Idle = 3,
    /// The router is answering.
    Handling = 4,
    /// The response is being sent.
    Sending = 5,
    /// Closed to make room, or timed out.
    Closing = 6,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            1 => Phase::Handshake,
            2 => Phase::Head,
            3 => Phase::Idle,
            4 => Phase::Handling,
            5 => Phase::Sending,
            _ => Phase::Closing,
        }
    }

    fn waiting(self) -> bool {
        matches!(self, Phase::Handshake | Phase::Head | Phase::Idle)
    }
}

/// Milliseconds since the server started, on tokio's clock.
#[derive(Clone, Copy, Debug)]
struct Clock {
    epoch: Instant,
}

impl Clock {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn at(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }
}

/// One connection's state, shared by its task, its I/O and the registry.
#[derive(Debug)]
struct Conn {
    id: u64,
    phase: AtomicU8,
    /// When the phase began.
    since: AtomicU64,
    /// When a byte last moved either way.
    last_io: AtomicU64,
    /// Wakes the connection's task to recompute its deadline.
    changed: Notify,
    /// Cancelled to close the connection to make room.
    evict: CancellationToken,
    /// Holds one of the `max_tls_handshakes` slots (changed under the
    /// registry's lock).
    handshake_slot: AtomicBool,
}

impl Conn {
    fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    /// Moves to `phase` unless the connection is already closing.
    fn enter(&self, phase: Phase, now: u64) {
        let mut current = self.phase.load(Ordering::Acquire);
        loop {
            if current == Phase::Closing as u8 || current == phase as u8 {
                return;
            }
            self.since.store(now, Ordering::Release);
            match self.phase.compare_exchange(
                current,
                phase as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        self.changed.notify_one();
    }

    fn read_some(&self, now: u64) {
        self.last_io.store(now, Ordering::Release);
        // The first byte of the next request on a kept-alive connection
        // starts its header timeout.
        if self
            .phase
            .compare_exchange(
                Phase::Idle as u8,
                Phase::Head as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            self.since.store(now, Ordering::Release);
            self.changed.notify_one();
        }
    }

    fn wrote_some(&self, now: u64) {
        self.last_io.store(now, Ordering::Release);
    }

    /// When the current phase runs out, and which limit that is.
    fn deadline(&self, limits: &HttpLimits) -> Option<(u64, &'static str)> {
        let ms = |d: Duration| d.as_millis() as u64;
        let since = self.since.load(Ordering::Acquire);
        match self.phase() {
            Phase::Head => Some((
                since + ms(limits.header_read_timeout),
                "header_read_timeout",
            )),
            Phase::Idle => Some((since + ms(limits.idle_timeout), "idle_timeout")),
            Phase::Sending => Some((
                since.max(self.last_io.load(Ordering::Acquire)) + ms(limits.idle_timeout),
                "idle_timeout (response not read)",
            )),
            // The handshake has its own timeout; handlers are bounded by
            // their own design (they never wait on Redis).
            Phase::Handshake | Phase::Handling | Phase::Closing => None,
        }
    }
}

/// Logs a recurring event at most once per [`LOG_EVERY`], counting the rest.
#[derive(Debug)]
struct LogGate {
    next: AtomicU64,
    suppressed: AtomicU64,
}

impl LogGate {
    fn new() -> Self {
        LogGate {
            next: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Some(times suppressed since the last line) when a line is due.
    fn due(&self, now: u64) -> Option<u64> {
        let next = self.next.load(Ordering::Acquire);
        if now >= next
            && self
                .next
                .compare_exchange(
                    next,
                    now + LOG_EVERY.as_millis() as u64,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            Some(self.suppressed.swap(0, Ordering::AcqRel))
        } else {
            self.suppressed.fetch_add(1, Ordering::AcqRel);
            None
        }
    }
}

/// Open connections, and how many hold a handshake slot.
#[derive(Debug, Default)]
struct Registry {
    conns: HashMap<u64, Arc<Conn>>,
    handshaking: usize,
}

#[derive(Debug)]
struct Shared {
    limits: HttpLimits,
    clock: Clock,
    registry: Mutex<Registry>,
    next_id: AtomicU64,
    slots: Arc<Semaphore>,
    connection_cap: LogGate,
    handshake_cap: LogGate,
    accept_errors: LogGate,
}

impl Shared {
    fn register(&self, phase: Phase) -> Arc<Conn> {
        let now = self.clock.now();
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            phase: AtomicU8::new(phase as u8),
            since: AtomicU64::new(now),
            last_io: AtomicU64::new(now),
            changed: Notify::new(),
            evict: CancellationToken::new(),
            handshake_slot: AtomicBool::new(false),
        });
        self.registry().conns.insert(conn.id, conn.clone());
        conn
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Closes the connection waiting (not mid-request) whose phase began
    /// earliest. False when every connection is busy.
    fn evict_longest_waiting(&self) -> bool {
        let registry = self.registry();
        let victim = registry
            .conns
            .values()
            .filter(|c| c.phase().waiting())
            .min_by_key(|c| c.since.load(Ordering::Acquire));
        match victim {
            Some(c) => {
                close(c);
                true
            }
            None => false,
        }
    }

    /// Gives `conn` a handshake slot: a free one, or at the cap the slot of
    /// the handshake that started earliest, which is closed. The newest
    /// handshake wins because stalled ones are the oldest. True when one was
    /// closed.
    fn begin_handshake(&self, conn: &Conn) -> bool {
        let mut registry = self.registry();
        let mut closed = false;
        if registry.handshaking < self.limits.max_tls_handshakes {
            registry.handshaking += 1;
        } else {
            let victim = registry
                .conns
                .values()
                .filter(|c| c.id != conn.id && c.handshake_slot.load(Ordering::Acquire))
                .min_by_key(|c| c.since.load(Ordering::Acquire));
            match victim {
                // The slot passes to `conn`: the count stays.
                Some(v) => {
                    v.handshake_slot.store(false, Ordering::Release);
                    close(v);
                    closed = true;
                }
                None => registry.handshaking += 1,
            }
        }
        conn.handshake_slot.store(true, Ordering::Release);
        drop(registry);
        conn.enter(Phase::Handshake, self.clock.now());
        closed
    }

    fn end_handshake(&self, conn: &Conn) {
        let mut registry = self.registry();
        if conn.handshake_slot.swap(false, Ordering::AcqRel) {
            registry.handshaking -= 1;
        }
    }
}

fn close(c: &Conn) {
    c.phase.store(Phase::Closing as u8, Ordering::Release);
    c.evict.cancel();
}

/// Removes a connection from the registry when its task ends.
struct Registered<'a>(&'a Shared, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.registry().conns.remove(&self.1);
    }
}

/// Returns a connection's handshake slot when its handshake ends.
struct HandshakeSlot<'a>(&'a Shared, &'a Conn);

impl Drop for HandshakeSlot<'_> {
    fn drop(&mut self) {
        self.0.end_handshake(self.1);
    }
}

/// The soft limit on open descriptors, from `/proc/self/limits`.
fn descriptor_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Serves `router` on `listener` until `shutdown` is cancelled, with TLS
/// when `tls` is given (its settings are read for each handshake). Returns
/// once the listener is closed and every connection has ended or been cut
/// after the shutdown grace.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<Live>>,
    limits: &HttpLimits,
    shutdown: CancellationToken,
) {
    let mut limits = limits.clone();
    if let Some(soft) = descriptor_limit() {
        // The other half is for Redis connections, files and the runtime.
        let budget = (soft / 2).max(1) as usize;
        if limits.max_connections > budget {
            tracing::warn!(
                max_connections = limits.max_connections,
                descriptor_limit = soft,
                lowered_to = budget,
                "web.max_connections is above half the descriptor limit; lowered (raise LimitNOFILE to allow more)"
            );
            limits.max_connections = budget;
        }
    }
    let shared = Arc::new(Shared {
        clock: Clock {
            epoch: Instant::now(),
        },
        registry: Mutex::new(Registry::default()),
        next_id: AtomicU64::new(0),
        slots: Arc::new(Semaphore::new(limits.max_connections)),
        connection_cap: LogGate::new(),
        handshake_cap: LogGate::new(),
        accept_errors: LogGate::new(),
        limits,
    });
    let mut tasks = JoinSet::new();
    loop {
        while tasks.try_join_next().is_some() {}
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                if let Some(more) = shared.accept_errors.due(shared.clock.now()) {
                    tracing::warn!(error = %e, repeated = more, "accepting a connection failed");
                }
                tokio::select! {
                    _ = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                    _ = shutdown.cancelled() => break,
                }
            }
        };
        let permit = match shared.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let evicted = shared.evict_longest_waiting();
                if let Some(more) = shared.connection_cap.due(shared.clock.now()) {
                    if evicted {
                        tracing::warn!(
                            max_connections = shared.limits.max_connections,
                            times_since_last_message = more,
                            "connection limit reached: closed the connection that waited longest without a request"
                        );
                    } else {
                        tracing::warn!(
                            max_connections = shared.limits.max_connections,
                            times_since_last_message = more,
                            "connection limit reached with every connection busy: new connections wait"
                        );
                    }
                }
                tokio::select! {
                    p = shared.slots.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    _ = shutdown.cancelled() => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let conn = shared.register(if tls.is_some() {
            Phase::Handshake
        } else {
            Phase::Head
        });
        tasks.spawn(connection(
            shared.clone(),
            conn,
            stream,
            peer,
            permit,
            tls.clone(),
            router.clone(),
            shutdown.clone(),
        ));
    }
    // Closing the listener here frees the port before connections drain.
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::debug!(
            left = tasks.len(),
            "closing connections still busy after the shutdown grace"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

#[allow(clippy::too_many_arguments)] // One task's whole context, passed once.
async fn connection(
    shared: Arc<Shared>,
    conn: Arc<Conn>,
    stream: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    tls: Option<Arc<Live>>,
    router: Router,
    shutdown: CancellationToken,
) {
    let _slot = permit;
    let _registered = Registered(&shared, conn.id);
    match tls {
        None => serve_http(stream, &shared, &conn, peer, router, &shutdown).await,
        Some(live) => {
            if let Some(stream) = handshake(stream, &shared, &conn, peer, &live, &shutdown).await {
                conn.enter(Phase::Head, shared.clock.now());
                serve_http(stream, &shared, &conn, peer, router, &shutdown).await;
            }
        }
    }
}

async fn handshake(
    stream: TcpStream,
    shared: &Shared,
    conn: &Arc<Conn>,
    peer: SocketAddr,
    live: &Live,
    shutdown: &CancellationToken,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let deadline = Instant::now() + shared.limits.tls_handshake_timeout;
    let closed_oldest = shared.begin_handshake(conn);
    let _slot = HandshakeSlot(shared, conn);
    if closed_oldest {
        if let Some(more) = shared.handshake_cap.due(shared.clock.now()) {
            tracing::warn!(
                max_tls_handshakes = shared.limits.max_tls_handshakes,
                times_since_last_message = more,
                "TLS handshake limit reached: closed the handshake that started earliest"
            );
        }
    }
    let accept = async {
        let start =
            tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream)
                .await?;
        // Each handshake takes the settings in force, so rotated
        // certificates apply to new connections.
        let config = live
            .current()
            .tls
            .clone()
            .ok_or_else(|| io::Error::other("TLS is not configured"))?;
        start.into_stream(config).await
    };
    tokio::select! {
        r = tokio::time::timeout_at(deadline, accept) => match r {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                None
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                None
            }
        },
        _ = conn.evict.cancelled() => {
            tracing::debug!(%peer, "TLS handshake closed to make room");
            None
        }
        _ = shutdown.cancelled() => None,
    }
}

async fn serve_http<T>(
    io: T,
    shared: &Shared,
    conn: &Arc<Conn>,
    peer: SocketAddr,
    router: Router,
    shutdown: &CancellationToken,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = &shared.limits;
    let io = TokioIo::new(Tracked {
        io,
        conn: conn.clone(),
        clock: shared.clock,
    });
    let edge = Edge {
        router: TowerToHyperService::new(router),
        conn: conn.clone(),
        clock: shared.clock,
        max_body: limits.max_body_bytes,
    };
    let http = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        // Header and idle timeouts are kept here, per phase: hyper's one
        // timer would also cut kept-alive connections waiting between scrapes.
        .header_read_timeout(None)
        .max_header_size(limits.max_header_bytes)
        .keep_alive(true)
        .serve_connection(io, edge);
    tokio::pin!(http);
    let mut draining = false;
    loop {
        let deadline = conn.deadline(limits);
        let sleep = tokio::time::sleep_until(deadline.map_or_else(
            || Instant::now() + Duration::from_secs(3600),
            |(ms, _)| shared.clock.at(ms),
        ));
        tokio::select! {
            r = http.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
                }
                return;
            }
            _ = conn.evict.cancelled() => {
                tracing::debug!(%peer, "connection closed to make room");
                return;
            }
            _ = shutdown.cancelled(), if !draining => {
                draining = true;
                if conn.phase().waiting() {
                    return;
                }
                http.as_mut().graceful_shutdown();
            }
            _ = conn.changed.notified() => {}
            _ = sleep => {
                if let Some((ms, limit)) = conn.deadline(limits) {
                    if shared.clock.now() >= ms {
                        tracing::debug!(%peer, limit, "connection timed out");
                        return;
                    }
                }
            }
        }
    }
}

/// The connection's I/O, noting when bytes move.
struct Tracked<T> {
    io: T,
    conn: Arc<Conn>,
    clock: Clock,
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.read_some(self.clock.now());
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.wrote_some(self.clock.now());
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.wrote_some(self.clock.now());
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The router behind the body limit, noting when a request is answered and
/// when its response has been sent.
#[derive(Clone)]
struct Edge {
    router: TowerToHyperService<Router>,
    conn: Arc<Conn>,
    clock: Clock,
    max_body: usize,
}

type EdgeFuture = Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Edge {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = EdgeFuture;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.conn.enter(Phase::Handling, self.clock.now());
        let track = {
            let (conn, clock) = (self.conn.clone(), self.clock);
            move |response: Response<Body>| {
                conn.enter(Phase::Sending, clock.now());
                response.map(|body| TrackedBody { body, conn, clock })
            }
        };
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body as u64) {
            let mut response = Response::new(Body::from(format!(
                "request body larger than {} bytes\n",
                self.max_body
            )));
            *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
            response.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            return Box::pin(std::future::ready(Ok(track(response))));
        }
        // A body without a declared length is cut at the same size.
        let request = request.map(|b| Body::new(http_body_util::Limited::new(b, self.max_body)));
        let answer = hyper::service::Service::call(&self.router, request);
        Box::pin(async move {
            let response = match answer.await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            Ok(track(response))
        })
    }
}

/// A response body that marks the connection idle once sent (or dropped).
struct TrackedBody {
    body: Body,
    conn: Arc<Conn>,
    clock: Clock,
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        self.conn.enter(Phase::Idle, self.clock.now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(phase: Phase, since: u64) -> Conn {
        Conn {
            id: since,
            phase: AtomicU8::new(phase as u8),
            since: AtomicU64::new(since),
            last_io: AtomicU64::new(since),
            changed: Notify::new(),
            evict: CancellationToken::new(),
            handshake_slot: AtomicBool::new(false),
        }
    }

    fn shared(max_tls_handshakes: usize) -> Shared {
        Shared {
            limits: HttpLimits {
                max_tls_handshakes,
                ..HttpLimits::default()
            },
            clock: Clock {
                epoch: Instant::now(),
            },
            registry: Mutex::new(Registry::default()),
            next_id: AtomicU64::new(0),
            slots: Arc::new(Semaphore::new(1)),
            connection_cap: LogGate::new(),
            handshake_cap: LogGate::new(),
            accept_errors: LogGate::new(),
        }
    }

    #[test]
    fn deadlines_follow_the_phase() {
        let limits = HttpLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            ..HttpLimits::default()
        };
        let c = conn(Phase::Head, 1_000);
        assert_eq!(c.deadline(&limits).unwrap().0, 11_000);
        c.enter(Phase::Handling, 2_000);
        assert_eq!(c.deadline(&limits), None);
        c.enter(Phase::Sending, 3_000);
        c.wrote_some(5_000);
        assert_eq!(c.deadline(&limits).unwrap().0, 125_000);
        c.enter(Phase::Idle, 6_000);
        assert_eq!(c.deadline(&limits).unwrap().0, 126_000);
        // The next request's first byte starts the header timeout.
        c.read_some(7_000);
        assert_eq!(c.phase(), Phase::Head);
        assert_eq!(c.deadline(&limits).unwrap().0, 17_000);
        // A closing connection stays closing.
        c.phase.store(Phase::Closing as u8, Ordering::Release);
        c.enter(Phase::Idle, 8_000);
        assert_eq!(c.phase(), Phase::Closing);
    }

    #[test]
    fn eviction_takes_the_longest_waiting_and_spares_busy_connections() {
        let shared = shared(1);
        let add = |phase, since| {
            let c = Arc::new(conn(phase, since));
            shared.registry().conns.insert(c.id, c.clone());
            c
        };
        let busy = add(Phase::Handling, 1);
        let sending = add(Phase::Sending, 2);
        let idle = add(Phase::Idle, 5);
        let head = add(Phase::Head, 3);
        assert!(shared.evict_longest_waiting());
        assert!(head.evict.is_cancelled() && !idle.evict.is_cancelled());
        assert!(shared.evict_longest_waiting());
        assert!(idle.evict.is_cancelled());
        assert!(!shared.evict_longest_waiting(), "only busy ones left");
        assert!(!busy.evict.is_cancelled() && !sending.evict.is_cancelled());
    }

    #[test]
    fn a_new_handshake_takes_the_slot_of_the_oldest() {
        let shared = shared(2);
        let add = |since| {
            let c = Arc::new(conn(Phase::Handshake, since));
            shared.registry().conns.insert(c.id, c.clone());
            c
        };
        let (a, b, c) = (add(1), add(2), add(3));
        assert!(!shared.begin_handshake(&a));
        assert!(!shared.begin_handshake(&b));
        assert!(shared.begin_handshake(&c), "at the cap");
        assert!(a.evict.is_cancelled() && !b.evict.is_cancelled());
        assert_eq!(shared.registry().handshaking, 2);
        shared.end_handshake(&a);
        assert_eq!(shared.registry().handshaking, 2, "a's slot went to c");
        shared.end_handshake(&b);
        shared.end_handshake(&c);
        assert_eq!(shared.registry().handshaking, 0);
    }

    #[test]
    fn log_gate_lets_one_line_through_per_interval() {
        let gate = LogGate::new();
        assert_eq!(gate.due(0), Some(0));
        assert_eq!(gate.due(1), None);
        assert_eq!(gate.due(9_999), None);
        assert_eq!(gate.due(10_000), Some(2));
    }
}
