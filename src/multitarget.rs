//! The targets `/probe` adds (docs/configuration.md, multi-target): a probe of an
//! allowed URL starts a [`Poller`] for it, with the daemon's schedule and
//! rate limits, which keeps polling in the background; each probe answers
//! from that target's latest snapshot and renews its lease; a target not
//! probed for `[probe] target_ttl` is dropped (its poller stopped and
//! joined, its series gone). At most `[probe] max_targets` are polled at
//! once.
//!
//! A probed target is keyed by what makes it differ ([`ProbedKey`]): its
//! canonical URL (scheme, so TLS or not, address and database) and the auth
//! module it was probed with (credentials, TLS settings, keyspace events).
//! The same server probed with two modules is two targets, each with its
//! own poller and memory (status windows, loss ledgers), each taking a
//! `max_targets` slot: two Prometheus jobs that probe one server with
//! different modules never restart each other's poller.
//!
//! Probed targets live in snapshot stores of their own, one per target: they
//! never appear in `/metrics` (Prometheus would store every series twice,
//! under the exporter's `instance` and under the probed one), and their
//! names cannot clash with configured targets or with each other.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, MultiTargetRefusal, Target};
use crate::metrics::catalog::EXPORTER_PROBE_REQUESTS;
use crate::poller::Poller;
use crate::snapshot::{SnapshotStore, TargetSnapshot};

/// Why a probe got no answer from a target. Nothing was dialled.
#[derive(Debug, thiserror::Error)]
pub enum MultiTargetError {
    /// The request itself is refused (see [`MultiTargetRefusal`]).
    #[error("{0}")]
    Refused(MultiTargetRefusal),
    /// `[probe] max_targets` targets are polled already.
    #[error(
        "{max} targets are probed already ([probe] max_targets); {url} was not dialled. Probed targets are dropped after [probe] target_ttl without a probe"
    )]
    OverCap {
        /// The cap.
        max: usize,
        /// The canonical URL refused.
        url: String,
    },
    /// The target's client could not be built (its TLS settings).
    #[error(transparent)]
    Client(#[from] crate::backend::ClientSetupError),
}

impl MultiTargetError {
    /// The `result` label of [`EXPORTER_PROBE_REQUESTS`].
    pub fn label(&self) -> &'static str {
        match self {
            MultiTargetError::Refused(r) => r.label(),
            MultiTargetError::OverCap { .. } => "over_cap",
            MultiTargetError::Client(_) => "error",
        }
    }
}

/// What a probe answers from.
#[derive(Debug)]
pub struct ProbeAnswer {
    /// The target's latest snapshot.
    pub snapshot: Arc<TargetSnapshot>,
    /// Set when the first collection had not finished when the answer was
    /// due: how long it was waited for.
    pub waited_in_vain: Option<Duration>,
}

/// What tells probed targets apart: the canonical URL (scheme, address,
/// database) and the auth module named (none for a probe without one).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ProbedKey {
    url: String,
    auth_module: Option<String>,
}

/// One probed target.
struct Entry {
    target: Arc<Target>,
    /// The configuration its poller runs with.
    config: Arc<Config>,
    store: Arc<SnapshotStore>,
    /// Its poller (a reload that changes only intervals starts a successor
    /// with its memory).
    poller: Poller,
    stop: CancellationToken,
    task: JoinHandle<()>,
    /// When it was last probed.
    last_probe: Instant,
}

/// Every probed target, by canonical URL and auth module.
#[derive(Debug)]
pub struct MultiTargets {
    config: Arc<RwLock<Arc<Config>>>,
    /// The daemon's store: only its exporter-wide counters are touched.
    exporter: Arc<SnapshotStore>,
    entries: Mutex<BTreeMap<ProbedKey, Entry>>,
    shutdown: CancellationToken,
    /// Where its tasks run.
    tasks: TaskTracker,
    /// A refusal at the cap was logged and the cap not left since.
    cap_logged: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("target", &self.target.name)
            .finish_non_exhaustive()
    }
}

impl MultiTargets {
    /// The registry, and its task that drops expired targets; both stop
    /// with `shutdown`. Its tasks (that one and every probed target's
    /// poller) are spawned on `tasks`, which the daemon waits for.
    pub fn start(
        config: Arc<RwLock<Arc<Config>>>,
        exporter: Arc<SnapshotStore>,
        shutdown: CancellationToken,
        tasks: TaskTracker,
    ) -> Arc<MultiTargets> {
        let this = Arc::new(MultiTargets {
            config,
            exporter,
            entries: Mutex::new(BTreeMap::new()),
            shutdown,
            tasks,
            cap_logged: std::sync::atomic::AtomicBool::new(false),
        });
        this.publish_counts(&this.current());
        this.tasks
            .spawn(expire(Arc::downgrade(&this), this.shutdown.clone()));
        this
    }

    fn current(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ProbedKey, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Targets polled now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Answers a probe of `url` with `auth_module`: starts polling the
    /// target if it is new (waiting up to `wait` for its first collection),
    /// renews its lease, and returns its latest snapshot.
    ///
    /// # Errors
    /// Why the probe is refused; nothing was dialled then.
    pub async fn probe(
        &self,
        url: Option<&str>,
        auth_module: Option<&str>,
        wait: Duration,
    ) -> Result<ProbeAnswer, MultiTargetError> {
        let result = self.lease(url, auth_module);
        let counters = &self.exporter.exporter.multi_target;
        counters.request(match &result {
            Ok(_) => "ok",
            Err(e) => e.label(),
        });
        self.exporter.touch();
        let (store, replaced) = result?;
        if let Some(old) = replaced {
            stop(old).await;
        }
        let started = Instant::now();
        loop {
            let snapshot = store
                .targets()
                .into_iter()
                .next()
                .unwrap_or_else(|| Arc::new(TargetSnapshot::default()));
            if snapshot.first_collection_done() {
                return Ok(ProbeAnswer {
                    snapshot,
                    waited_in_vain: None,
                });
            }
            let waited = started.elapsed();
            if waited >= wait || self.shutdown.is_cancelled() {
                return Ok(ProbeAnswer {
                    snapshot,
                    waited_in_vain: Some(waited),
                });
            }
            tokio::time::sleep(Duration::from_millis(20).min(wait - waited)).await;
        }
    }

    /// Finds or starts the target and renews its lease; returns its store
    /// and the entry it replaced (the same URL and module, whose settings a
    /// reload changed since), to stop.
    fn lease(
        &self,
        url: Option<&str>,
        auth_module: Option<&str>,
    ) -> Result<(Arc<SnapshotStore>, Option<Entry>), MultiTargetError> {
        let config = self.current();
        let (canonical, target) = config
            .probe_target(url, auth_module)
            .map_err(MultiTargetError::Refused)?;
        let key = ProbedKey {
            url: canonical,
            auth_module: auth_module.filter(|m| !m.is_empty()).map(str::to_string),
        };
        let module = key.auth_module.as_deref().unwrap_or("");
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(&key) {
            if *entry.target == target {
                entry.last_probe = Instant::now();
                return Ok((entry.store.clone(), None));
            }
        } else if entries.len() >= config.multi_target.max_targets {
            if !self.cap_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    max_targets = config.multi_target.max_targets,
                    refused = %key.url,
                    auth_module = module,
                    "probe refused: [probe] max_targets targets are probed already; further refusals are counted in {}{{result=\"over_cap\"}}",
                    EXPORTER_PROBE_REQUESTS.name
                );
            }
            return Err(MultiTargetError::OverCap {
                max: config.multi_target.max_targets,
                url: key.url,
            });
        }
        let entry = self.start_entry(&config, Arc::new(target))?;
        let store = entry.store.clone();
        let replaced = entries.insert(key.clone(), entry);
        match &replaced {
            Some(_) => tracing::info!(
                redis_target = %key.url,
                auth_module = module,
                "probed target restarted with the settings its auth module has now"
            ),
            None => tracing::info!(
                redis_target = %key.url,
                auth_module = module,
                probed = entries.len(),
                "probed target added; polled until target_ttl passes without a probe of this URL with this auth module"
            ),
        }
        let count = entries.len();
        drop(entries);
        self.set_count(count);
        Ok((store, replaced))
    }

    fn start_entry(
        &self,
        config: &Arc<Config>,
        target: Arc<Target>,
    ) -> Result<Entry, MultiTargetError> {
        let store = Arc::new(SnapshotStore::default());
        let poller = Poller::new(config.clone(), target.clone(), store.clone())?;
        // Listed (not ready) at once, so a probe racing the first poll finds it.
        poller.publish();
        let stop = self.shutdown.child_token();
        let task = self.tasks.spawn(poller.clone().run(stop.clone()));
        Ok(Entry {
            target,
            config: config.clone(),
            store,
            poller,
            stop,
            task,
            last_probe: Instant::now(),
        })
    }

    /// The entry that replaces `old` after a reload that changed only
    /// intervals or limits: `poller` (its successor) starts once the old one
    /// has ended, with its memory and its store.
    fn successor(&self, old: Entry, poller: Poller, config: &Arc<Config>) -> Entry {
        let stop = self.shutdown.child_token();
        let task = self.tasks.spawn({
            let (poller, stop) = (poller.clone(), stop.clone());
            let (old_stop, old_task) = (old.stop, old.task);
            async move {
                old_stop.cancel();
                // They share the memory: one at a time.
                let _ = old_task.await;
                if !stop.is_cancelled() {
                    poller.run(stop).await;
                }
            }
        });
        Entry {
            target: old.target,
            config: config.clone(),
            store: old.store,
            poller,
            stop,
            task,
            last_probe: old.last_probe,
        }
    }

    fn set_count(&self, count: usize) {
        let counters = &self.exporter.exporter.multi_target;
        counters.targets.store(count as u64, Ordering::Relaxed);
        if count < self.current().multi_target.max_targets {
            self.cap_logged.store(false, Ordering::Relaxed);
        }
        self.exporter.touch();
    }

    fn publish_counts(&self, config: &Config) {
        let max = if config.multi_target.allowed_targets.is_empty() {
            0
        } else {
            config.multi_target.max_targets as u64
        };
        self.exporter
            .exporter
            .multi_target
            .max_targets
            .store(max, Ordering::Relaxed);
        self.set_count(self.len());
    }

    /// After a reload: targets the new configuration no longer allows (or
    /// whose auth module is gone) are dropped, and those whose settings or
    /// polling changed are restarted. Their leases are kept.
    pub async fn reconcile(&self, config: &Arc<Config>) {
        let mut stopping = Vec::new();
        {
            let mut entries = self.lock();
            let keys: Vec<ProbedKey> = entries.keys().cloned().collect();
            for key in keys {
                let Some(entry) = entries.get(&key) else {
                    continue;
                };
                let url = &key.url;
                let module = key.auth_module.as_deref().unwrap_or("");
                match config.probe_target(Some(url), key.auth_module.as_deref()) {
                    Err(why) => {
                        tracing::info!(redis_target = %url, auth_module = module, reason = %why, "probed target dropped by the reload");
                        stopping.extend(entries.remove(&key));
                    }
                    Ok((_, target))
                        if target == *entry.target
                            && entry.config.polling_changed(config)
                            && crate::poller::memory_survives(&entry.config, config) =>
                    {
                        match entry.poller.successor(config.clone()) {
                            Ok(poller) => {
                                if let Some(old) = entries.remove(&key) {
                                    let next = self.successor(old, poller, config);
                                    entries.insert(key, next);
                                }
                            }
                            Err(e) => {
                                tracing::warn!(redis_target = %url, auth_module = module, error = %e, "probed target dropped by the reload");
                                stopping.extend(entries.remove(&key));
                            }
                        }
                    }
                    Ok((_, target))
                        if target != *entry.target || entry.config.polling_changed(config) =>
                    {
                        let last_probe = entry.last_probe;
                        match self.start_entry(config, Arc::new(target)) {
                            Ok(mut fresh) => {
                                fresh.last_probe = last_probe;
                                stopping.extend(entries.insert(key, fresh));
                            }
                            Err(e) => {
                                tracing::warn!(redis_target = %url, auth_module = module, error = %e, "probed target dropped by the reload");
                                stopping.extend(entries.remove(&key));
                            }
                        }
                    }
                    Ok(_) => {}
                }
            }
        }
        self.publish_counts(config);
        for entry in stopping {
            stop(entry).await;
        }
    }

    /// Drops the targets whose lease ran out; returns how many.
    async fn expire_now(&self) -> usize {
        let ttl = self.current().multi_target.target_ttl;
        let expired: Vec<(ProbedKey, Entry)> = {
            let mut entries = self.lock();
            let now = Instant::now();
            let keys: Vec<ProbedKey> = entries
                .iter()
                .filter(|(_, e)| now.duration_since(e.last_probe) >= ttl)
                .map(|(key, _)| key.clone())
                .collect();
            keys.into_iter()
                .filter_map(|key| entries.remove(&key).map(|e| (key, e)))
                .collect()
        };
        let n = expired.len();
        for (key, entry) in expired {
            stop(entry).await;
            tracing::info!(redis_target = %key.url, auth_module = key.auth_module.as_deref().unwrap_or(""), ttl = ?ttl, "probed target dropped: not probed within target_ttl");
        }
        // Counted once the pollers are joined: a target counted as expired
        // sends nothing more.
        if n > 0 {
            self.exporter
                .exporter
                .multi_target
                .expired
                .fetch_add(n as u64, Ordering::Relaxed);
            self.set_count(self.len());
        }
        n
    }
}

/// Stops an entry's poller and waits for it to end; its store (and every
/// series in it) goes with the entry.
async fn stop(entry: Entry) {
    entry.stop.cancel();
    if let Err(e) = entry.task.await {
        if e.is_panic() {
            tracing::error!(redis_target = %entry.target.name, "probed target's poller panicked");
        }
    }
}

/// Drops expired targets, checking ten times per `target_ttl` (at most every
/// 10 s, at least every 100 ms), until `shutdown`.
async fn expire(registry: Weak<MultiTargets>, shutdown: CancellationToken) {
    loop {
        let Some(this) = registry.upgrade() else {
            return;
        };
        this.expire_now().await;
        let period = (this.current().multi_target.target_ttl / 10)
            .clamp(Duration::from_millis(100), Duration::from_secs(10));
        drop(this);
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}
