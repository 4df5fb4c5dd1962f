//! The poller of one target: a first collection with every probe in order,
//! then one loop per probe on its own schedule. Each probe kind runs
//! sequentially (a slow run delays only its own next run); different kinds
//! and different targets run concurrently, sharing only the target's rate
//! limit. After every run the target's snapshot is published.
//!
//! When a run cannot reach the target, `target_up` becomes 0 until a run
//! succeeds again; what the last good polls read stays served for a grace
//! of a few stream intervals ([`down_grace`]), so that a blip does not
//! erase the target's series, then is dropped: stale values are never
//! served for longer. Beside the probes, a keepalive sends a `PING` on
//! connections idle for a while, so that a server's or a proxy's idle
//! timeout does not close them between polls.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backend::PRIORITY;
use crate::backend::{ClientSetupError, TargetClient};
use crate::config::{ClientTracking, Config, KeyspaceEvents, Target};
use crate::probe::{self, BudgetNotice, ProbeContext, ProbeError, ProbeKind, TargetState};
use crate::schedule::{self, Next};
use crate::snapshot::{Owner, SnapshotStore};

/// The first wait before a probe whose run panicked runs again; it doubles
/// with each panic of that probe, up to the probe's interval.
const PANIC_BACKOFF: Duration = Duration::from_secs(1);

/// Polls one target.
#[derive(Debug, Clone)]
pub struct Poller {
    ctx: ProbeContext,
    store: Arc<SnapshotStore>,
    /// The right to publish, taken when the poller starts (0 = not yet), so
    /// a poller built but never started takes nothing from the one running.
    owner: Arc<std::sync::atomic::AtomicU64>,
    /// Wakes a probe's loop before its time: the stream poll when discovery
    /// finds new streams; every data probe when the target comes back.
    wakes: Arc<BTreeMap<ProbeKind, tokio::sync::Notify>>,
}

impl Poller {
    /// A poller for `target` that publishes into `store`.
    ///
    /// # Errors
    /// When the target's client cannot be built (unreadable CA file).
    pub fn new(
        config: Arc<Config>,
        target: Arc<Target>,
        store: Arc<SnapshotStore>,
    ) -> Result<Self, ClientSetupError> {
        let client = Arc::new(TargetClient::new(target.clone(), &config.limits)?);
        let mut state = TargetState::default();
        state.snapshot.name = target.name.as_str().into();
        Ok(Poller {
            owner: Arc::default(),
            wakes: wakes(),
            ctx: ProbeContext {
                config,
                target,
                client,
                state: Arc::new(Mutex::new(state)),
                stream_polls: Arc::default(),
            },
            store,
        })
    }

    /// A poller for the same target that polls as `config` says (other
    /// intervals or limits) with this one's memory: status windows, lag
    /// trails, loss ledgers, trends and PEL scans in progress. Start it once
    /// this one has ended. The connections are kept unless the limits
    /// changed (they are built from them).
    ///
    /// # Errors
    /// When a new client cannot be built (unreadable CA file).
    pub fn successor(&self, config: Arc<Config>) -> Result<Self, ClientSetupError> {
        let client = if config.limits == self.ctx.config.limits {
            self.ctx.client.clone()
        } else {
            Arc::new(TargetClient::new(self.ctx.target.clone(), &config.limits)?)
        };
        Ok(Poller {
            owner: Arc::default(),
            wakes: wakes(),
            ctx: ProbeContext {
                config,
                target: self.ctx.target.clone(),
                client,
                state: self.ctx.state.clone(),
                stream_polls: self.ctx.stream_polls.clone(),
            },
            store: self.store.clone(),
        })
    }

    /// Starts `kind`'s next run now, if its loop is waiting.
    fn wake(&self, kind: ProbeKind) {
        if let Some(n) = self.wakes.get(&kind) {
            // Only a waiting loop: a permit kept for a loop not yet started
            // would double its first run.
            n.notify_waiters();
        }
    }

    /// This poller's publishing right, taken on first use.
    fn owner(&self) -> Owner {
        use std::sync::atomic::Ordering;
        match self.owner.load(Ordering::Acquire) {
            0 => {
                let owner = self.store.register(&self.ctx.target.name);
                self.owner.store(owner.id(), Ordering::Release);
                owner
            }
            id => Owner::from_id(id),
        }
    }

    /// The probe context (for the one-shot check).
    pub fn context(&self) -> &ProbeContext {
        &self.ctx
    }

    /// Publishes the initial (empty, not ready) snapshot so the target is
    /// listed before its first collection finishes.
    pub fn publish(&self) {
        let snapshot = Arc::new(self.ctx.state().snapshot.clone());
        self.store.publish(self.owner(), snapshot);
    }

    /// Runs every probe once, in order: a first collection done before
    /// anything reads it, as the tests' harness wants it. The daemon's
    /// [`Self::run`] does not wait for the per-group probes, and `check`
    /// runs each probe itself ([`Self::run_probe`]) to follow its progress.
    pub async fn first_collection(&self) {
        for kind in ProbeKind::ALL {
            self.run_probe(kind).await;
        }
    }

    /// Collects until `shutdown`. Every probe run happens in a task of its
    /// own (the first ones) or in its probe's loop task, so a panicking probe
    /// takes down only that run: it is logged, counted
    /// ([`EXPORTER_PROBE_PANICS`](crate::metrics::catalog::EXPORTER_PROBE_PANICS))
    /// and its loop restarts after a backoff, while the other probes keep
    /// running. Returns once every loop has ended.
    pub async fn run(self, shutdown: CancellationToken) {
        self.publish();
        let keepalive = tokio::spawn(keep_warm(self.ctx.client.clone(), shutdown.clone()));
        // Keyspace events and invalidations only make stream polls timelier
        // and cheaper; their task ends with the probes' loops, on the same
        // token.
        let target = &self.ctx.target;
        let listen = target.keyspace_events == KeyspaceEvents::Auto
            || target.client_tracking == ClientTracking::Auto;
        let events = listen.then(|| {
            let this = self.clone();
            tokio::spawn(crate::events::run(
                self.ctx.clone(),
                move || this.publish_now(),
                shutdown.clone(),
            ))
        });
        self.run_probes(shutdown).await;
        if let Some(task) = events {
            let _ = task.await;
        }
        let _ = keepalive.await;
    }

    /// Publishes the target's state as it is, with the client's counters
    /// (after an extra stream poll, or a change of the keyspace-event
    /// subscription's health).
    fn publish_now(&self) {
        let snapshot = {
            let mut state = self.ctx.state();
            state.snapshot.stats = self.ctx.client.stats_snapshot();
            Arc::new(state.snapshot.clone())
        };
        self.store.publish(self.owner(), snapshot);
    }

    /// The probes' loops of [`Self::run`], until `shutdown`.
    async fn run_probes(&self, shutdown: CancellationToken) {
        // Discovery, info and the stream poll first, in order; the per-group
        // probes (pending summary, consumers, and the PEL scan, which can run
        // for a whole interval) start right after, concurrently, instead of
        // holding readiness back. Readiness itself waits for a successful
        // discovery and stream poll, however many retries that takes.
        let mut discovery_next = Duration::ZERO;
        let mut first_started = std::collections::HashMap::new();
        for kind in ProbeKind::ALL.into_iter().filter(|k| !k.per_group()) {
            first_started.insert(kind, Instant::now());
            let mut run = tokio::spawn({
                let this = self.clone();
                async move { this.run_probe(kind).await }
            });
            let next = tokio::select! {
                joined = &mut run => joined,
                _ = shutdown.cancelled() => {
                    // Waited for: nothing of this poller outlives it.
                    run.abort();
                    let _ = run.await;
                    return;
                }
            };
            let next = match next {
                Ok(next) => next,
                Err(e) => {
                    self.panicked(kind, e, PANIC_BACKOFF);
                    Next::After(PANIC_BACKOFF)
                }
            };
            if kind == ProbeKind::Discovery {
                discovery_next = match next {
                    Next::After(d) => d,
                    Next::Grid => kind.interval(&self.ctx.config),
                };
            }
        }
        let mut loops = JoinSet::new();
        let mut kinds = std::collections::HashMap::new();
        for kind in ProbeKind::ALL {
            let period = kind.interval(&self.ctx.config);
            let first_due = match kind {
                _ if kind.per_group() => Instant::now(),
                ProbeKind::Discovery => Instant::now() + discovery_next,
                _ => schedule::loop_first_due(
                    first_started
                        .get(&kind)
                        .copied()
                        .unwrap_or_else(Instant::now),
                    Instant::now(),
                    period,
                ),
            };
            let task = loops.spawn(self.clone().probe_loop(kind, first_due, shutdown.clone()));
            kinds.insert(task.id(), kind);
        }
        let mut panics: BTreeMap<ProbeKind, u32> = BTreeMap::new();
        while let Some(joined) = loops.join_next_with_id().await {
            let e = match joined {
                Ok(_) => continue,
                Err(e) => e,
            };
            let Some(kind) = kinds.remove(&e.id()) else {
                continue;
            };
            if !e.is_panic() || shutdown.is_cancelled() {
                continue;
            }
            let n = panics.entry(kind).or_default();
            *n += 1;
            // Doubles with each panic, up to the probe's own interval: a
            // probe that panics on every run runs no more often than asked.
            let backoff = PANIC_BACKOFF
                .saturating_mul(1 << (*n - 1).min(16))
                .min(kind.interval(&self.ctx.config).max(PANIC_BACKOFF));
            self.panicked(kind, e, backoff);
            let task = loops.spawn(self.clone().probe_loop(
                kind,
                Instant::now() + backoff,
                shutdown.clone(),
            ));
            kinds.insert(task.id(), kind);
        }
    }

    /// One probe's loop: runs it at `first_due`, then on its schedule, until
    /// `shutdown`.
    async fn probe_loop(self, kind: ProbeKind, first_due: Instant, shutdown: CancellationToken) {
        let period = kind.interval(&self.ctx.config);
        let wake = self.wakes.get(&kind);
        schedule::every(first_due, period, shutdown, wake, || self.run_probe(kind)).await;
    }

    /// Logs and counts a probe run that panicked.
    fn panicked(&self, kind: ProbeKind, error: tokio::task::JoinError, restart_in: Duration) {
        let message = match error.try_into_panic() {
            Ok(panic) => panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_string()),
            Err(e) => e.to_string(),
        };
        tracing::error!(
            redis_target = %self.ctx.target.name,
            probe = kind.label(),
            panic = %message,
            ?restart_in,
            "probe panicked; it runs again after a backoff, the other probes go on"
        );
        let snapshot = {
            let mut state = self.ctx.state();
            state.snapshot.probes.entry(kind).or_default().panics += 1;
            Arc::new(state.snapshot.clone())
        };
        self.store.publish(self.owner(), snapshot);
    }

    /// Runs one probe, records its outcome, publishes, and says when it
    /// should run next.
    pub async fn run_probe(&self, kind: ProbeKind) -> Next {
        #[cfg(test)]
        test_hook::before_run(&self.ctx.target.name, kind);
        // While what is served was read before a fall, a per-group probe
        // waits for the stream poll that reads the server again (and wakes
        // it): its figures would join a picture of another moment, perhaps
        // of another server, and add series a target that is down never
        // had while up.
        if kind.per_group() && self.ctx.state().snapshot.held {
            return Next::Grid;
        }
        let run = self.timed_run(kind).await;
        let (snapshot, next) = {
            let mut state = self.ctx.state();
            let next = self.record(&mut state, &run);
            if kind == ProbeKind::Discovery {
                self.after_discovery(&state, &run, next);
            }
            self.follow_reachability(&mut state, &run);
            self.notice_budget(&mut state);
            let succeeded = |k: ProbeKind| {
                state
                    .snapshot
                    .probes
                    .get(&k)
                    .is_some_and(|p| p.last_success.is_some())
            };
            let ready = succeeded(ProbeKind::Discovery) && succeeded(ProbeKind::Stream);
            state.snapshot.ready = ready;
            state.snapshot.stats = self.ctx.client.stats_snapshot();
            (Arc::new(state.snapshot.clone()), next)
        };
        self.store.publish(self.owner(), snapshot);
        next
    }

    /// Runs `kind` with its commands at its rank of the budget (a stream
    /// poll the target interrupted runs again at once), and counts what it
    /// spent.
    async fn timed_run(&self, kind: ProbeKind) -> Run {
        let started = Instant::now();
        let rank = self.ctx.config.limits.rank(kind.label());
        let spent_before = self.ctx.client.commands_spent(rank);
        // Its commands wait for the budget at its rank.
        let run = || PRIORITY.scope(rank, probe::run(kind, &self.ctx));
        let mut result = run().await;
        if kind == ProbeKind::Stream && matches!(result, Err(ProbeError::Interrupted { .. })) {
            // The target went down and came back during the run: read the
            // new server now rather than a whole interval later.
            result = run().await;
        }
        let commands = self.ctx.client.commands_spent(rank) - spent_before;
        // A run that had nothing to ask proves nothing: while the target is
        // unreachable it has not succeeded, whatever it had to do.
        if result.is_ok() && self.ctx.client.reachable() == Some(false) {
            result = Err(ProbeError::Unreachable {
                target: self.ctx.target.name.clone(),
            });
        }
        Run {
            kind,
            result,
            started,
            duration: started.elapsed(),
            commands,
        }
    }

    /// Records a run in its probe's status and failures in a row, logs a
    /// change between success and failure (a failure when it starts, not on
    /// every run of a long outage), and says when the probe runs next.
    fn record(&self, state: &mut TargetState, run: &Run) -> Next {
        let (kind, name, duration) = (run.kind, &self.ctx.target.name, run.duration);
        let period = kind.interval(&self.ctx.config);
        let was = state
            .snapshot
            .probes
            .get(&kind)
            .cloned()
            .unwrap_or_default();
        let failures_in_a_row = if run.result.is_ok() {
            0
        } else {
            state.failures_in_a_row.get(&kind).copied().unwrap_or(0) + 1
        };
        state.failures_in_a_row.insert(kind, failures_in_a_row);
        let next = match kind {
            ProbeKind::Discovery => Next::After(schedule::discovery_next(
                schedule::DiscoveryRun {
                    ok: run.result.is_ok(),
                    failures_in_a_row,
                    keys_walked: state.discovery.and_then(|d| d.keys_walked),
                },
                period,
            )),
            _ => Next::Grid,
        };
        let one_off = state.one_off_commands.remove(&kind).unwrap_or(0);
        let status = state.snapshot.probes.entry(kind).or_default();
        status.duration = duration;
        status.success = run.result.is_ok();
        status.commands = run.commands;
        status.one_off = one_off;
        status.achieved_interval = status
            .started_at
            .map(|before| run.started.saturating_duration_since(before));
        status.started_at = Some(run.started);
        status.interval = Some(wait_after(next, period));
        match &run.result {
            Ok(()) => {
                status.last_success = Some(SystemTime::now());
                status.last_error = None;
                if !was.success {
                    tracing::debug!(redis_target = %name, probe = kind.label(), ?duration, "probe succeeded");
                }
            }
            Err(e) => {
                status.last_error = Some(e.to_string().into());
                if was.success || was.last_success.is_none() && was.duration.is_zero() {
                    tracing::warn!(redis_target = %name, probe = kind.label(), error = %e, "probe failed");
                } else {
                    tracing::debug!(redis_target = %name, probe = kind.label(), error = %e, "probe still failing");
                }
            }
        }
        next
    }

    /// Logs a successful discovery, and has new streams read now, not a
    /// stream interval later.
    fn after_discovery(&self, state: &TargetState, run: &Run, next: Next) {
        let (Ok(()), Some(report)) = (&run.result, state.discovery) else {
            return;
        };
        let (name, duration) = (&self.ctx.target.name, run.duration);
        let next_in = wait_after(next, ProbeKind::Discovery.interval(&self.ctx.config));
        // A run that changed nothing is routine (every 10 s by default): at
        // debug.
        if report.added > 0 || report.removed > 0 {
            tracing::info!(
                redis_target = %name,
                watched = report.watched,
                added = report.added,
                removed = report.removed,
                keys_walked = report.keys_walked,
                ?duration,
                next_in = ?next_in,
                "discovery"
            );
        } else {
            tracing::debug!(
                redis_target = %name,
                watched = report.watched,
                keys_walked = report.keys_walked,
                ?duration,
                next_in = ?next_in,
                "discovery changed nothing"
            );
        }
        if report.added > 0 {
            self.wake(ProbeKind::Stream);
        }
    }

    /// Up or down follows the last round trip, whatever probe made it (a
    /// probe with nothing to ask proves nothing either way). What was read
    /// before a fall stays served, with `target_up 0`, for the grace
    /// ([`down_grace`]), then is dropped, so after a longer outage the
    /// stream series come back with the next stream poll, never stale.
    /// While what is served was read before the fall, only a stream poll
    /// brings `target_up` back to 1.
    fn follow_reachability(&self, state: &mut TargetState, run: &Run) {
        let name = &self.ctx.target.name;
        let down = matches!(&run.result, Err(e) if e.target_down())
            || self.ctx.client.reachable() == Some(false);
        if down {
            let grace = down_grace(&self.ctx.config);
            if state.snapshot.up || state.last_down_reason.is_none() {
                let reason = match &run.result {
                    Err(e) => e.to_string(),
                    Ok(()) => "unreachable".to_string(),
                };
                tracing::warn!(redis_target = %name, %reason, ?grace, "target down; its data series stay served for the grace (target_up 0), then are withdrawn");
                state.last_down_reason = Some(reason);
            }
            if state.fell(Instant::now(), grace) {
                tracing::warn!(redis_target = %name, ?grace, "target still down after the grace; its data series are withdrawn");
            }
        } else if self.ctx.client.reachable() == Some(true) {
            if state.last_down_reason.take().is_some() {
                // Back after an outage: refresh what the slow probes show
                // now rather than one interval later (the PEL scan starts
                // with the groups that had findings).
                for k in ProbeKind::ALL.into_iter().filter(|k| *k != run.kind) {
                    self.wake(k);
                }
            }
            // What is held was read before the fall, perhaps of another
            // server (a restart, a failover): it is not served as fresh.
            // `target_up` stays 0 until a stream poll (woken above) has read
            // the server again, or the grace is over and it is dropped.
            if state.snapshot.held && run.kind != ProbeKind::Stream {
                if !state.held_past(Instant::now(), down_grace(&self.ctx.config)) {
                    return;
                }
                tracing::info!(redis_target = %name, "target answers again after the grace; what it held is withdrawn until the next stream poll");
                state.forget_data();
            }
            if !state.snapshot.up {
                tracing::info!(redis_target = %name, "target up");
            }
            if state.snapshot.held {
                // The per-group probes waited for this stream poll.
                for k in ProbeKind::ALL.into_iter().filter(|k| k.per_group()) {
                    self.wake(k);
                }
            }
            state.rose();
        }
    }

    /// A budget too small for every probe's cadence stretches the lower
    /// ones: says so when it changes, with the figure that would cover it
    /// (again when the need outgrows that figure).
    fn notice_budget(&self, state: &mut TargetState) {
        let (name, limits) = (&self.ctx.target.name, &self.ctx.config.limits);
        let needed: f64 = state
            .snapshot
            .probes
            .values()
            .filter_map(|p| p.commands_needed_per_second())
            .sum();
        let budget = f64::from(limits.commands_per_second);
        let notice = (state.snapshot.probes.len() == ProbeKind::ALL.len())
            .then(|| BudgetNotice::next(state.budget_notice, needed, budget))
            .flatten();
        let Some(notice) = notice else {
            return;
        };
        match notice {
            BudgetNotice::Short { advised } => tracing::warn!(
                redis_target = %name,
                needed = advised,
                commands_per_second = limits.commands_per_second,
                "the command budget cannot keep every probe's interval; the lower-priority ones stretch (limits.commands_per_second = {advised} would cover them)"
            ),
            BudgetNotice::Covers if state.budget_notice.is_some() => tracing::info!(
                redis_target = %name,
                needed = needed.ceil(),
                commands_per_second = limits.commands_per_second,
                "the command budget covers every probe's interval again"
            ),
            // The first verdict, and a quiet one.
            BudgetNotice::Covers => {}
        }
        state.budget_notice = Some(notice);
    }
}

/// One run of a probe, as its outcome is recorded.
struct Run {
    kind: ProbeKind,
    result: Result<(), ProbeError>,
    started: Instant,
    duration: Duration,
    /// Commands it spent (both attempts, when a stream poll was retried).
    commands: u64,
}

/// Stream intervals during which a target that went down keeps its last
/// good data served (see [`down_grace`]).
pub const DOWN_GRACE_POLLS: u32 = 3;

/// How long a target that went down keeps what its last good polls read
/// served, with `target_up 0`: [`DOWN_GRACE_POLLS`] stream intervals (45 s
/// with the default schedule). The data is dropped by the first run after
/// it, within one more stream interval.
pub fn down_grace(config: &Config) -> Duration {
    ProbeKind::Stream.interval(config) * DOWN_GRACE_POLLS
}

/// How long after a run the next one comes, as its probe's status shows it.
fn wait_after(next: Next, period: Duration) -> Duration {
    match next {
        Next::After(d) => d,
        Next::Grid => period,
    }
}

/// True when a poller may keep its memory (status windows, lag trails, loss
/// ledgers, trends, PEL scans in progress) across a reload from `before` to
/// `after`: what differs is at most the schedule and the limits, which say
/// when and how fast to read, not what was read.
pub fn memory_survives(before: &Config, after: &Config) -> bool {
    before.metrics == after.metrics
        && before.status_window == after.status_window
        && before.streams == after.streams
}

/// How often the keepalive looks for idle connections (see
/// [`crate::backend::KEEPALIVE_IDLE`]).
const KEEPALIVE_CHECK: Duration = Duration::from_millis(500);

/// Keeps the target's pooled connections open between polls
/// ([`TargetClient::keep_warm`]), until `shutdown`.
async fn keep_warm(client: Arc<TargetClient>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(KEEPALIVE_CHECK) => {}
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = client.keep_warm(Instant::now()) => {}
        }
    }
}

/// One wake-up per probe.
fn wakes() -> Arc<BTreeMap<ProbeKind, tokio::sync::Notify>> {
    Arc::new(
        ProbeKind::ALL
            .into_iter()
            .map(|k| (k, tokio::sync::Notify::new()))
            .collect(),
    )
}

/// Test-only: makes a chosen probe run panic, to prove the loop survives it.
/// Compiled into unit tests only, never into the daemon.
#[cfg(test)]
pub(crate) mod test_hook {
    use std::sync::Mutex;

    use crate::probe::ProbeKind;

    /// (target, probe) pairs whose next run panics, once each.
    static PANIC_ONCE: Mutex<Vec<(String, ProbeKind)>> = Mutex::new(Vec::new());

    /// The next run of `kind` on `target` panics.
    pub(crate) fn panic_once(target: &str, kind: ProbeKind) {
        let mut armed = PANIC_ONCE.lock().unwrap_or_else(|p| p.into_inner());
        armed.push((target.to_string(), kind));
    }

    pub(super) fn before_run(target: &str, kind: ProbeKind) {
        let fire = {
            let mut armed = PANIC_ONCE.lock().unwrap_or_else(|p| p.into_inner());
            let at = armed.iter().position(|(t, k)| t == target && *k == kind);
            at.map(|i| armed.remove(i)).is_some()
        };
        assert!(!fire, "test hook: this {} run panics", kind.label());
    }
}

#[cfg(test)]
#[path = "poller/tests.rs"]
mod tests;
