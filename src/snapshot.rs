//! The immutable picture of every target that `/metrics` renders.
//!
//! Pollers build a new [`TargetSnapshot`] after every probe run and publish it
//! in the [`SnapshotStore`]; readers take `Arc`s and never wait on Redis or on
//! a poller. Streams and groups are shared between consecutive snapshots
//! (`Arc`), so publishing after a probe that touched one group is cheap. What
//! is not in the latest snapshot is not rendered: a vanished stream vanishes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use crate::config::StreamSettings;
use crate::redis::StatsSnapshot;
use crate::redis::reply::{ConsumerInfo, GroupInfo, StreamInfo};
use crate::schedule::ProbeKind;
use crate::status::GroupStatus;

/// A binary-safe name (stream, group or consumer).
pub type Name = Arc<[u8]>;

/// What `INFO server` and `INFO memory` said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerInfo {
    /// `redis` or `valkey`.
    pub server: String,
    /// The server's own version (`valkey_version` on Valkey).
    pub version: String,
    /// `standalone`, `cluster` or `sentinel`.
    pub mode: String,
    /// `maxmemory_policy`.
    pub maxmemory_policy: String,
    /// `maxmemory` in bytes.
    pub maxmemory: Option<u64>,
    /// `used_memory` in bytes.
    pub used_memory: Option<u64>,
}

/// The last run of one probe.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProbeStatus {
    /// Whether it succeeded.
    pub success: bool,
    /// How long it took.
    pub duration: Duration,
    /// When it last succeeded.
    pub last_success: Option<SystemTime>,
}

/// The dead-letter stream of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    /// XLEN; 0 when the stream does not exist (yet).
    pub length: u64,
    /// Entries ever added (7.0+).
    pub entries_added: Option<u64>,
}

/// Results of the last complete PEL scan of a group.
#[derive(Clone, Debug, PartialEq)]
pub struct PelScan {
    /// When the pass finished.
    pub finished_at: SystemTime,
    /// Entries read in the pass.
    pub entries: u64,
    /// Largest idle, in ms; `None` for an empty PEL.
    pub max_idle_ms: Option<u64>,
    /// `(le seconds, count)` cumulative.
    pub by_idle: Vec<(f64, u64)>,
    /// `(le deliveries, count)` cumulative.
    pub by_delivery_count: Vec<(u64, u64)>,
    /// Entries delivered at least `poison_delivery_count` times.
    pub poison: u64,
    /// Entries whose body is gone.
    pub ghost: u64,
    /// Possible ghosts left unchecked for lack of budget.
    pub ghost_unchecked: u64,
}

/// The consumers of a group, capped for export.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Consumers {
    /// The consumers exported by name (top N by pending).
    pub top: Vec<ConsumerInfo>,
    /// Pending entries of the consumers beyond the cap, when there are any.
    pub other_pending: Option<u64>,
    /// PEL entries held by consumers inactive longer than the stream's
    /// `consumer_inactive_after`.
    pub orphaned: u64,
}

/// Everything known about one group.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupState {
    /// XINFO GROUPS.
    pub info: GroupInfo,
    /// Undelivered entries; `None` when unknown.
    pub lag: Option<u64>,
    /// `lag` came from the exporter's estimator.
    pub lag_estimated: bool,
    /// Age of the oldest undelivered entry (seconds), for time-based IDs.
    pub lag_seconds: Option<f64>,
    /// Entries trimmed before the group read them; `None` when unknowable.
    pub trimmed_undelivered: Option<u64>,
    /// Age of the smallest pending ID (seconds), from the pending summary.
    pub oldest_pending_age: Option<f64>,
    /// From the consumers probe.
    pub consumers: Option<Consumers>,
    /// Last complete PEL scan.
    pub scan: Option<Arc<PelScan>>,
    /// Progress of the pass in progress (1.0 when none is unfinished).
    pub scan_progress: Option<f64>,
    /// Status over the window.
    pub status: Option<GroupStatus>,
}

/// Everything known about one stream.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamState {
    /// XINFO STREAM.
    pub info: StreamInfo,
    /// IDs carry wall-clock time, so ages are exported.
    pub time_based_ids: bool,
    /// Settings from `[[streams]]`.
    pub settings: Arc<StreamSettings>,
    /// Its dead-letter stream, when configured.
    pub dead_letter: Option<DeadLetter>,
    /// Groups by name.
    pub groups: BTreeMap<Name, Arc<GroupState>>,
}

/// Everything known about one target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetSnapshot {
    /// Target name.
    pub name: Arc<str>,
    /// The last connection attempt succeeded.
    pub up: bool,
    /// A first collection (discovery and stream probe) completed.
    pub ready: bool,
    /// From INFO.
    pub server: Option<ServerInfo>,
    /// Streams watched, once discovery ran.
    pub streams_watched: Option<u64>,
    /// Streams over `max_streams`, once discovery ran.
    pub streams_dropped: Option<u64>,
    /// Streams by name.
    pub streams: BTreeMap<Name, Arc<StreamState>>,
    /// Probe health.
    pub probes: BTreeMap<ProbeKind, ProbeStatus>,
    /// Client counters.
    pub stats: StatsSnapshot,
}

/// Exporter-wide state that is not about a target.
#[derive(Debug)]
pub struct ExporterState {
    /// Reloads attempted.
    pub reloads: AtomicU64,
    /// Reloads rejected.
    pub reload_failures: AtomicU64,
    /// Last reload succeeded (or none attempted).
    pub last_reload_ok: AtomicBool,
}

impl Default for ExporterState {
    fn default() -> Self {
        ExporterState {
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            last_reload_ok: AtomicBool::new(true),
        }
    }
}

/// The latest snapshot of every target.
#[derive(Debug, Default)]
pub struct SnapshotStore {
    targets: RwLock<BTreeMap<Arc<str>, Arc<TargetSnapshot>>>,
    generation: AtomicU64,
    /// Reload counters.
    pub exporter: ExporterState,
}

impl SnapshotStore {
    /// Replaces the snapshot of one target.
    pub fn publish(&self, snapshot: Arc<TargetSnapshot>) {
        let mut targets = self.targets.write().unwrap_or_else(|p| p.into_inner());
        targets.insert(snapshot.name.clone(), snapshot);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Forgets targets not in `names` (after a reload).
    pub fn retain(&self, names: &[&str]) {
        let mut targets = self.targets.write().unwrap_or_else(|p| p.into_inner());
        targets.retain(|name, _| names.contains(&&**name));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Marks exporter-level state as changed.
    pub fn touch(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Changes whenever anything is published.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The latest snapshots, sorted by target name.
    pub fn targets(&self) -> Vec<Arc<TargetSnapshot>> {
        self.targets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// True when every target finished a first collection.
    pub fn ready(&self, expected: usize) -> bool {
        let targets = self.targets.read().unwrap_or_else(|p| p.into_inner());
        targets.len() >= expected && targets.values().all(|t| t.ready)
    }
}
