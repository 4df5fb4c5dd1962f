//! The accept loop ([`serve`]): the connection cap (lowered to half the
//! descriptor limit), a task per connection, and the shutdown that frees the
//! port at once and gives requests in progress a short grace.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::conn::{Clock, Phase};
use super::registry::{LogGate, Registry, Shared};
use super::task::connection;
use crate::config::HttpLimits;
use crate::http::web_config::Live;

/// How long requests in progress may take to finish after shutdown starts.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Pause after a failed accept (such as running out of descriptors), so the
/// loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

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
