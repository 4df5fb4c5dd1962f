//! Wiring: pollers for every target, the HTTP server, reloads and shutdown.
//! No logic worth unit-testing lives here; the integration tests run
//! [`run`] in-process.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{self, CliOverrides, Config, Target};
use crate::http::{self, HttpState, ReloadRequest};
use crate::poller::Poller;
use crate::snapshot::SnapshotStore;

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A target's client could not be built.
    #[error(transparent)]
    Client(#[from] crate::redis::ClientSetupError),
    /// The HTTP server failed.
    #[error("HTTP server: {0}")]
    Http(#[from] std::io::Error),
    /// The web config file (TLS, basic auth) is invalid.
    #[error(transparent)]
    Web(#[from] crate::web::WebConfigError),
}

/// A running poller and how to stop it.
struct Running {
    target: Arc<Target>,
    stop: CancellationToken,
}

/// Everything that decides how a target is polled, besides the target
/// itself: a change restarts its poller.
fn polling_changed(a: &Config, b: &Config) -> bool {
    a.schedule != b.schedule
        || a.limits != b.limits
        || a.metrics != b.metrics
        || a.status_window != b.status_window
        || a.streams != b.streams
}

struct Supervisor {
    store: Arc<SnapshotStore>,
    config: Arc<RwLock<Arc<Config>>>,
    running: BTreeMap<String, Running>,
    shutdown: CancellationToken,
}

impl Supervisor {
    /// Starts, keeps or stops pollers so they match `next`.
    fn apply(&mut self, next: Arc<Config>, previous: Option<&Config>) -> Result<(), AppError> {
        let restart_all = previous.is_none_or(|p| polling_changed(p, &next));
        let wanted: BTreeMap<&str, &Arc<Target>> = config::targets_by_name(&next);
        // Build every new client first so a bad CA file leaves all running.
        let mut starting = Vec::new();
        for (name, target) in &wanted {
            let keep = !restart_all
                && self
                    .running
                    .get(*name)
                    .is_some_and(|r| r.target == **target);
            if !keep {
                starting.push(Poller::new(
                    next.clone(),
                    (*target).clone(),
                    self.store.clone(),
                )?);
            }
        }
        self.running.retain(|name, r| {
            let keep = !restart_all && wanted.get(name.as_str()).is_some_and(|t| **t == r.target);
            if !keep {
                r.stop.cancel();
            }
            keep
        });
        let names: Vec<&str> = wanted.keys().copied().collect();
        self.store.retain(&names);
        for poller in starting {
            let target = poller.context().target.clone();
            let stop = self.shutdown.child_token();
            tokio::spawn(poller.clone().run(stop.clone()));
            self.running
                .insert(target.name.clone(), Running { target, stop });
        }
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = next;
        Ok(())
    }

    fn reload(&mut self, overrides: &CliOverrides) -> Result<(), String> {
        let store = self.store.clone();
        let exporter = &store.exporter;
        exporter.reloads.fetch_add(1, Ordering::Relaxed);
        let current = self
            .config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let result = config::load(current.source.as_deref(), overrides)
            .map_err(|e| e.to_string())
            .and_then(|next| {
                if next.web.listen_address != current.web.listen_address
                    || next.web.config_file != current.web.config_file
                {
                    tracing::warn!(
                        "web.listen_address and web.config_file changes take effect after a restart"
                    );
                }
                self.apply(Arc::new(next), Some(&current))
                    .map_err(|e| e.to_string())
            });
        match &result {
            Ok(()) => {
                exporter.last_reload_ok.store(true, Ordering::Relaxed);
                tracing::info!("configuration reloaded");
            }
            Err(e) => {
                exporter.reload_failures.fetch_add(1, Ordering::Relaxed);
                exporter.last_reload_ok.store(false, Ordering::Relaxed);
                tracing::error!(error = %e, "configuration reload rejected; the previous configuration stays in force");
            }
        }
        self.store.touch();
        result
    }
}

/// Runs the daemon on `listener` until `shutdown` completes. `overrides`
/// are re-applied on every reload.
///
/// # Errors
/// When a target's client cannot be built or the HTTP server fails.
pub async fn run(
    config: Config,
    overrides: CliOverrides,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AppError> {
    let web = config
        .web
        .config_file
        .as_deref()
        .map(crate::web::load)
        .transpose()?;
    let store = Arc::new(SnapshotStore::default());
    let config = Arc::new(config);
    let shared = Arc::new(RwLock::new(config.clone()));
    let stop_all = CancellationToken::new();
    let mut supervisor = Supervisor {
        store: store.clone(),
        config: shared.clone(),
        running: BTreeMap::new(),
        shutdown: stop_all.clone(),
    };
    supervisor.apply(config, None)?;

    let (reload_tx, mut reload_rx) = mpsc::channel::<ReloadRequest>(4);
    let reloads = tokio::spawn({
        let stop_all = stop_all.clone();
        async move {
            let mut hup = hangup_signal();
            loop {
                let reply = tokio::select! {
                    req = reload_rx.recv() => match req { Some(r) => Some(r), None => return },
                    _ = recv_hangup(&mut hup) => None,
                    _ = stop_all.cancelled() => return,
                };
                let outcome = supervisor.reload(&overrides);
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
            }
        }
    });

    let state = HttpState::new(store, shared, reload_tx);
    let app = http::router(state, web.as_ref());
    let stop_http = stop_all.clone();
    let stopped = async move {
        tokio::select! {
            _ = shutdown => {}
            _ = stop_http.cancelled() => {}
        }
    };
    let served = match web.and_then(|w| w.tls) {
        Some(tls) => {
            tracing::info!(address = %listener.local_addr()?, "listening (TLS)");
            let listener = crate::web::TlsListener::new(listener, tls)?;
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
        }
        None => {
            tracing::info!(address = %listener.local_addr()?, "listening");
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
        }
    };
    stop_all.cancel();
    let _ = reloads.await;
    tracing::info!("stopped");
    served.map_err(AppError::from)
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = ();

#[cfg(unix)]
fn hangup_signal() -> Hangup {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
}
#[cfg(not(unix))]
fn hangup_signal() -> Hangup {}

#[cfg(unix)]
async fn recv_hangup(h: &mut Hangup) {
    match h {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}
#[cfg(not(unix))]
async fn recv_hangup(_: &mut Hangup) {
    std::future::pending().await
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutting down");
}
