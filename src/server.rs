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

mod conn;
mod tracked;
use conn::{Clock, Conn, Phase};
use tracked::{Edge, Tracked};

/// How long requests in progress may take to finish after shutdown starts.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// At most one log line per this interval for each kind of limit reached.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// Pause after a failed accept (such as running out of descriptors), so the
/// loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

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

#[cfg(test)]
mod tests;
