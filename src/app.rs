//! Wiring: pollers for every target, the renderer, the HTTP server, reloads,
//! the state file and shutdown. Every task the daemon starts is spawned on one
//! [`TaskTracker`] and stopped by one [`CancellationToken`], both made in
//! [`run`]: shutdown drains HTTP, cancels the token and waits (within
//! [`TASKS_GRACE`]) for every task to end. No logic worth unit-testing lives
//! here; the integration tests run [`run`] in-process.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{self, CliOverrides, Config, Target};
use crate::exposition::Exposition;
use crate::http::{self, HttpState, ReloadRequest};
use crate::multitarget::MultiTargets;
use crate::poller::Poller;
use crate::snapshot::SnapshotStore;
use crate::state_file::{SAVE_EVERY, StateFile};

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A target's client could not be built.
    #[error(transparent)]
    Client(#[from] crate::backend::ClientSetupError),
    /// The HTTP listener's address could not be read.
    #[error("HTTP server: {0}")]
    Http(#[from] std::io::Error),
    /// The web config file (TLS, basic auth) is invalid.
    #[error(transparent)]
    Web(#[from] crate::http::web_config::WebConfigError),
}

/// How long shutdown waits for the daemon's tasks (pollers, renderer,
/// reloads) once HTTP has drained. A probe run is dropped at its next await
/// when cancelled, so they end within milliseconds; the bound is for a bug.
const TASKS_GRACE: Duration = Duration::from_secs(5);

/// How long a reload waits for a stopped poller to end before it starts the
/// one that carries its memory on (they end at their next await).
const POLLER_STOP_GRACE: Duration = Duration::from_secs(5);

/// A running poller, how to stop it, and its task.
struct Running {
    poller: Poller,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

struct Supervisor {
    store: Arc<SnapshotStore>,
    config: Arc<RwLock<Arc<Config>>>,
    running: BTreeMap<String, Running>,
    shutdown: CancellationToken,
    /// Where pollers run (the daemon waits for them at shutdown).
    tasks: TaskTracker,
    multi_targets: Arc<MultiTargets>,
    /// Where what the pollers learned is kept across restarts, if anywhere.
    state_file: Option<Arc<StateFile>>,
}

impl Supervisor {
    /// Starts, keeps or stops pollers so they match `next`. A target whose
    /// settings are unchanged keeps its poller when polling is unchanged too;
    /// when only intervals or limits change (`previous` to `next`) its
    /// poller is restarted with its memory; otherwise it starts afresh.
    async fn apply(
        &mut self,
        next: Arc<Config>,
        previous: Option<&Config>,
    ) -> Result<(), AppError> {
        let wanted: BTreeMap<&str, &Arc<Target>> = config::targets_by_name(&next);
        // Build every new poller first so a bad CA file leaves all running.
        let mut starting = Vec::new();
        // Pollers started afresh for a target already polled: they take the
        // loss ledgers of the one they replace once it has stopped.
        let mut afresh: Vec<String> = Vec::new();
        for (name, target) in &wanted {
            let same = self
                .running
                .get(*name)
                .filter(|r| r.poller.context().target == **target);
            let poller = match (same, previous) {
                (Some(_), Some(p)) if !p.polling_changed(&next) => continue,
                (Some(r), Some(p)) if crate::poller::memory_survives(p, &next) => {
                    r.poller.successor(next.clone())?
                }
                _ => {
                    afresh.push((*name).to_string());
                    Poller::new(next.clone(), (*target).clone(), self.store.clone())?
                }
            };
            starting.push(poller);
        }
        let replaced: Vec<&str> = starting
            .iter()
            .map(|p| p.context().target.name.as_str())
            .collect();
        let stopping: Vec<String> = self
            .running
            .keys()
            .filter(|name| !wanted.contains_key(name.as_str()) || replaced.contains(&name.as_str()))
            .cloned()
            .collect();
        // Stopped (all at once) and joined before their successors start: a
        // successor shares its predecessor's memory.
        let stopped: Vec<(String, Running)> = stopping
            .into_iter()
            .filter_map(|name| self.running.remove(&name).map(|r| (name, r)))
            .collect();
        for (_, old) in &stopped {
            old.stop.cancel();
        }
        let mut stopped_pollers = Vec::new();
        for (name, old) in stopped {
            stopped_pollers.push((name.clone(), old.poller.clone()));
            if tokio::time::timeout(POLLER_STOP_GRACE, old.task)
                .await
                .is_err()
            {
                tracing::warn!(redis_target = %name, grace = ?POLLER_STOP_GRACE, "a stopped poller had not ended within the grace");
            }
        }
        for (name, old) in &stopped_pollers {
            let Some(new) = starting
                .iter()
                .find(|p| afresh.contains(name) && p.context().target.name == *name)
            else {
                continue;
            };
            let (was, now) = (&old.context().target, &new.context().target);
            // The same server: the losses its figures prove go on counting.
            if was.endpoint == now.endpoint && was.mode == now.mode {
                let before = old.context().state();
                new.context().state().inherit_ledgers(&before);
            }
        }
        let names: Vec<&str> = wanted.keys().copied().collect();
        self.store.retain(&names);
        if let (Some(file), None) = (&self.state_file, previous) {
            // The first pollers start from what the file kept.
            for poller in &starting {
                let ctx = poller.context();
                file.restore(&ctx.target, &ctx.state);
            }
            file.forget_unclaimed();
        }
        for poller in starting {
            let name = poller.context().target.name.clone();
            let stop = self.shutdown.child_token();
            let task = self.tasks.spawn(poller.clone().run(stop.clone()));
            self.running.insert(name, Running { poller, stop, task });
        }
        if let Some(file) = &self.state_file {
            file.track(
                self.running
                    .values()
                    .map(|r| {
                        let ctx = r.poller.context();
                        (ctx.target.clone(), ctx.state.clone())
                    })
                    .collect(),
            );
        }
        self.store
            .exporter
            .label_limit
            .store(next.metrics.max_label_value_bytes, Ordering::Relaxed);
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = next;
        Ok(())
    }

    /// Reloads the file. The error is for HTTP clients: which keys are wrong,
    /// never file paths (the log has the full story).
    async fn reload(&mut self, overrides: &CliOverrides) -> Result<(), String> {
        let store = self.store.clone();
        let exporter = &store.exporter;
        exporter.reloads.fetch_add(1, Ordering::Relaxed);
        let current = self
            .config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let result = match config::load(current.source.as_deref(), overrides) {
            Err(e) => Err((e.to_string(), public_reason(&e))),
            Ok(next) => {
                let web_changed = |a: &config::Web, b: &config::Web| {
                    a.listen_address != b.listen_address
                        || a.config_file != b.config_file
                        || a.config_file_check_interval != b.config_file_check_interval
                        || a.limits != b.limits
                };
                if web_changed(&next.web, &current.web) {
                    tracing::warn!(
                        "web settings other than telemetry_path take effect after a restart (the web config file's content is reloaded on its own)"
                    );
                }
                if next.state_file != current.state_file {
                    tracing::warn!(
                        "status.state_file takes effect after a restart; the state goes on being written where it was"
                    );
                }
                let next = Arc::new(next);
                let applied = self.apply(next.clone(), Some(&current)).await.map_err(|e| {
                    (
                        e.to_string(),
                        "a target's connection settings could not be applied; the exporter's log says why".to_string(),
                    )
                });
                if applied.is_ok() {
                    self.multi_targets.reconcile(&next).await;
                }
                applied
            }
        };
        self.store.touch();
        match result {
            Ok(()) => {
                exporter.last_reload_ok.store(true, Ordering::Relaxed);
                tracing::info!("configuration reloaded");
                Ok(())
            }
            Err((full, public)) => {
                exporter.reload_failures.fetch_add(1, Ordering::Relaxed);
                exporter.last_reload_ok.store(false, Ordering::Relaxed);
                tracing::error!(error = %full, "configuration reload rejected; the previous configuration stays in force");
                Err(format!(
                    "configuration reload rejected, the previous configuration stays in force: {public}"
                ))
            }
        }
    }
}

/// What a failed reload tells an HTTP client: the keys at fault, not the
/// messages, which may quote file paths (of the file itself, of password or
/// CA files).
fn public_reason(e: &config::ConfigError) -> String {
    let mut keys: Vec<&str> = e.problems.iter().map(|p| p.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.iter().any(|k| k.is_empty()) {
        return "the file could not be read or parsed; the exporter's log says why".into();
    }
    format!(
        "invalid value at {}; the exporter's log says why",
        keys.join(", ")
    )
}

/// Runs the daemon on `listener` until `shutdown` completes. `overrides`
/// are re-applied on every reload. Returns once the listener is closed and
/// connections have drained (within a short grace).
///
/// # Errors
/// When the web config file or a target's client settings are unusable.
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
        .map(crate::http::web_config::Live::load)
        .transpose()?;
    let web_check_interval = config.web.config_file_check_interval;
    let limits = config.web.limits.clone();
    let store = Arc::new(SnapshotStore::default());
    let config = Arc::new(config);
    let shared = Arc::new(RwLock::new(config.clone()));
    let stop_all = CancellationToken::new();
    let tasks = TaskTracker::new();
    let multi_targets = MultiTargets::start(
        shared.clone(),
        store.clone(),
        stop_all.clone(),
        tasks.clone(),
    );
    let exposition = Exposition::start(store.clone(), &tasks, stop_all.clone());
    // Read before the first pollers start, so that they start from it.
    let state_file = config.state_file.clone().map(|path| {
        Arc::new(StateFile::open(
            path,
            &config.targets,
            std::time::SystemTime::now(),
        ))
    });
    let mut supervisor = Supervisor {
        store: store.clone(),
        config: shared.clone(),
        running: BTreeMap::new(),
        shutdown: stop_all.clone(),
        tasks: tasks.clone(),
        multi_targets: multi_targets.clone(),
        state_file: state_file.clone(),
    };
    if let Err(e) = supervisor.apply(config, None).await {
        wind_down(&stop_all, &tasks).await;
        return Err(e);
    }
    if let Some(file) = &state_file {
        tasks.spawn(file.clone().keep_saving(SAVE_EVERY, stop_all.clone()));
    }

    let (reload_tx, mut reload_rx) = mpsc::channel::<ReloadRequest>(4);
    tasks.spawn({
        let stop_all = stop_all.clone();
        async move {
            let mut hup = hangup_signal();
            loop {
                let reply = tokio::select! {
                    req = reload_rx.recv() => match req { Some(r) => Some(r), None => return },
                    _ = recv_hangup(&mut hup) => None,
                    _ = stop_all.cancelled() => return,
                };
                let outcome = supervisor.reload(&overrides).await;
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
            }
        }
    });

    let state = HttpState::with_multi_targets(store, shared, reload_tx, multi_targets, exposition);
    let app = http::router(state, web.clone());
    let stop_http = CancellationToken::new();
    tasks.spawn({
        let (stop_all, stop_http) = (stop_all.clone(), stop_http.clone());
        async move {
            tokio::select! {
                _ = shutdown => {}
                _ = stop_all.cancelled() => {}
            }
            stop_http.cancel();
        }
    });
    if let Some(web) = &web {
        tasks.spawn(web.clone().watch(web_check_interval, stop_all.clone()));
    }
    let tls = web.filter(|w| w.tls());
    let address = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            wind_down(&stop_all, &tasks).await;
            return Err(e.into());
        }
    };
    tracing::info!(
        %address,
        tls = tls.is_some(),
        max_connections = limits.max_connections,
        "listening"
    );
    crate::http::server::serve(listener, app, tls, &limits, stop_http).await;
    wind_down(&stop_all, &tasks).await;
    if let Some(file) = state_file {
        // The pollers have stopped: their state is final.
        file.save_at_shutdown(TASKS_GRACE).await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Stops every task of the daemon and waits for them, within [`TASKS_GRACE`].
async fn wind_down(stop_all: &CancellationToken, tasks: &TaskTracker) {
    stop_all.cancel();
    tasks.close();
    if tokio::time::timeout(TASKS_GRACE, tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            still_running = tasks.len(),
            grace = ?TASKS_GRACE,
            "tasks still running after the shutdown grace; leaving them"
        );
    }
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
