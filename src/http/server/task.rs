//! One accepted connection's task: the TLS handshake within its slot and
//! deadline, then HTTP/1.1 under the deadline of the connection's phase,
//! until it ends, is closed to make room, or shutdown drains it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::conn::{ConnRecord, Phase};
use super::registry::{HandshakeSlot, Registered, Shared};
use super::tracked::{Edge, Tracked};
use crate::http::web_config::Live;

#[allow(clippy::too_many_arguments)] // One task's whole context, passed once.
pub(super) async fn connection(
    shared: Arc<Shared>,
    conn: Arc<ConnRecord>,
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
    conn: &Arc<ConnRecord>,
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
    conn: &Arc<ConnRecord>,
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
