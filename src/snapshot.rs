//! The immutable picture of every target that `/metrics` renders.
//!
//! Pollers build a new [`TargetSnapshot`] after every probe run and publish it
//! in the [`SnapshotStore`]; readers take `Arc`s and never wait on Redis or on
//! a poller. The maps and the streams and groups in them are shared between
//! consecutive snapshots (`Arc`): publishing copies only the maps the last
//! probe changed, and a quiet stream keeps its allocation. What is not in the
//! latest snapshot is not rendered: a vanished stream vanishes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use crate::backend::StatsSnapshot;
use crate::backend::reply::{ConsumerInfo, GroupInfo, StreamInfo};
use crate::config::StreamSettings;
use crate::loss::Lost;
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
    /// `run_id`, new at every start of the server (for a cluster, its
    /// primaries' joined): tells the same server, back after an outage,
    /// from another one; empty when unknown.
    pub run_id: String,
}

/// The last run of one probe.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProbeStatus {
    /// Whether it succeeded.
    pub success: bool,
    /// How long it took.
    pub duration: Duration,
    /// When it last succeeded.
    pub last_success: Option<SystemTime>,
    /// Time from this run to the next one scheduled (the configured interval,
    /// or discovery's adaptive cadence and backoff).
    pub interval: Option<Duration>,
    /// Why the last run failed, when it did (no credentials, no paths).
    pub last_error: Option<Arc<str>>,
    /// Commands the last run sent.
    pub commands: u64,
    /// Time between the starts of the last two runs: the cadence achieved.
    pub achieved_interval: Option<Duration>,
    /// When the last run started (exporter clock).
    pub started_at: Option<tokio::time::Instant>,
}

impl ProbeStatus {
    /// Commands per second this probe's cadence needs: its last run's
    /// commands over its interval.
    pub fn commands_needed_per_second(&self) -> Option<f64> {
        let interval = self.interval?.as_secs_f64();
        (interval > 0.0).then(|| self.commands as f64 / interval)
    }
}

/// The dead-letter stream of a stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeadLetter {
    /// XLEN; 0 when the stream does not exist (yet).
    pub length: u64,
    /// Entries ever added (7.0+).
    pub entries_added: Option<u64>,
    /// Age of its oldest entry by the server's clock, in seconds; `None`
    /// when it holds none or its IDs are not time-based.
    pub oldest_age: Option<f64>,
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
    /// `le` bounds of the idle buckets in seconds, shared by every group.
    pub idle_bounds: Arc<[f64]>,
    /// Entries idle at most each bound (cumulative).
    pub idle_counts: Box<[u64]>,
    /// `le` bounds of the delivery-count buckets, shared by every group.
    pub delivery_bounds: Arc<[u64]>,
    /// Entries delivered at most each bound (cumulative).
    pub delivery_counts: Box<[u64]>,
    /// Entries delivered at least `poison_delivery_count` times.
    pub poison: u64,
    /// Entries whose body is gone.
    pub ghost: u64,
    /// Possible ghosts left unchecked for lack of budget.
    pub ghost_unchecked: u64,
}

impl PelScan {
    /// `(le seconds, entries)` pairs, cumulative.
    pub fn by_idle(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        self.idle_bounds
            .iter()
            .copied()
            .zip(self.idle_counts.iter().copied())
    }

    /// `(le deliveries, entries)` pairs, cumulative.
    pub fn by_delivery_count(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.delivery_bounds
            .iter()
            .copied()
            .zip(self.delivery_counts.iter().copied())
    }
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

/// The PEL scan's view of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct ScanState {
    /// The last complete pass, if one completed.
    pub last: Option<Arc<PelScan>>,
    /// Progress of the pass in progress (1.0 when none is unfinished).
    pub progress: f64,
}

/// A group, by stream and group name.
pub type GroupKey = (Name, Name);

/// What the stream poll knows about one group. The per-group probes keep
/// their results in maps of their own in [`TargetSnapshot`], so each probe
/// replaces only what it owns and never copies the others' data.
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
    /// Entries lost since the exporter started, by cause; `None` until the
    /// figure could be known (never before 7.0).
    pub lost: Option<Lost>,
    /// Times the group's position moved backwards.
    pub rewinds: u64,
    /// last-delivered-id is beyond the stream's last generated ID.
    pub ahead_of_stream: bool,
    /// Seconds of ID time between the stream's first entry and the group's
    /// first undelivered one (time-based IDs, something undelivered).
    pub retention_margin: Option<f64>,
    /// Seconds until trimming reaches undelivered entries, at recent rates.
    pub overtake_eta: Option<f64>,
    /// Seconds until the lag reaches 0, at recent rates.
    pub drain_eta: Option<f64>,
    /// Status over the window.
    pub status: Option<GroupStatus>,
    /// What `status` rests on (see [`crate::status::Basis`]).
    pub status_basis: Option<crate::status::Basis>,
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
    pub groups: Groups,
}

/// A stream's groups, sorted by name. A sorted slice rather than a map: a
/// stream has a handful of groups, and at 10,000 streams a map node per
/// stream would weigh more than the groups in it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Groups(Box<[(Name, GroupState)]>);

type GroupEntry<'a> = (&'a Name, &'a GroupState);

impl Groups {
    /// The groups of `groups`, sorted; of two groups with one name, the last.
    pub fn new(mut groups: Vec<(Name, GroupState)>) -> Self {
        groups.reverse();
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        groups.dedup_by(|dup, kept| dup.0 == kept.0);
        Groups(groups.into_boxed_slice())
    }

    /// The group called `name`, with the name as stored.
    pub fn get_key_value(&self, name: &[u8]) -> Option<GroupEntry<'_>> {
        self.0
            .binary_search_by(|(n, _)| (**n).cmp(name))
            .ok()
            .map(|i| (&self.0[i].0, &self.0[i].1))
    }

    /// The group called `name`.
    pub fn get(&self, name: &[u8]) -> Option<&GroupState> {
        self.get_key_value(name).map(|(_, g)| g)
    }

    /// Whether the stream has a group called `name`.
    pub fn contains_key(&self, name: &[u8]) -> bool {
        self.get_key_value(name).is_some()
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the stream has no group.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Groups in name order.
    pub fn iter(&self) -> impl Iterator<Item = GroupEntry<'_>> {
        self.0.iter().map(|(n, g)| (n, g))
    }

    /// Group names in order.
    pub fn keys(&self) -> impl Iterator<Item = &Name> {
        self.0.iter().map(|(n, _)| n)
    }
}

/// Everything known about one target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetSnapshot {
    /// Target name.
    pub name: Arc<str>,
    /// The last connection attempt succeeded.
    pub up: bool,
    /// Discovery and the stream poll have each succeeded at least once.
    pub ready: bool,
    /// From INFO.
    pub server: Option<ServerInfo>,
    /// Streams watched, once discovery ran.
    pub streams_watched: Option<u64>,
    /// Streams over `max_streams`, once discovery ran.
    pub streams_dropped: Option<u64>,
    /// Streams by name (the stream poll).
    pub streams: Arc<BTreeMap<Name, Arc<StreamState>>>,
    /// Age of each group's smallest pending ID, in seconds: the ID from the
    /// pending summary, aged by the server clock of the latest poll.
    pub oldest_pending_age: Arc<BTreeMap<GroupKey, f64>>,
    /// Poison entries among each stuck group's oldest pending entries (the
    /// pending summary; see `probe::pending_summary`).
    pub head_poison: Arc<BTreeMap<GroupKey, u64>>,
    /// Each group's consumers (the consumers probe).
    pub consumers: Arc<BTreeMap<GroupKey, Arc<Consumers>>>,
    /// Each group's PEL scan.
    pub scans: Arc<BTreeMap<GroupKey, ScanState>>,
    /// Probe health.
    pub probes: BTreeMap<ProbeKind, ProbeStatus>,
    /// Client counters.
    pub stats: StatsSnapshot,
}

impl TargetSnapshot {
    /// True when the stream poll knows the group.
    pub fn has_group(&self, stream: &Name, group: &Name) -> bool {
        self.streams
            .get(stream)
            .is_some_and(|s| s.groups.contains_key(group))
    }

    /// Drops the per-group results of groups the stream poll no longer knows.
    pub fn prune_groups(&mut self) {
        let streams = &self.streams;
        let known = |(s, g): &GroupKey| streams.get(s).is_some_and(|st| st.groups.contains_key(g));
        retain_keys(&mut self.oldest_pending_age, known);
        retain_keys(&mut self.head_poison, known);
        retain_keys(&mut self.consumers, known);
        retain_keys(&mut self.scans, known);
    }
}

/// Keeps the entries whose key passes `keep`, copying a map shared with a
/// published snapshot only when something is to be removed.
pub fn retain_keys<K: Ord + Clone, V: Clone>(
    map: &mut Arc<BTreeMap<K, V>>,
    keep: impl Fn(&K) -> bool,
) {
    if map.keys().any(|k| !keep(k)) {
        Arc::make_mut(map).retain(|k, _| keep(k));
    }
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
    /// The process's own figures, read when the exposition is rendered
    /// (`None` in the live state, and where /proc cannot be read).
    pub process: Option<crate::process::ProcessStats>,
    /// `metrics.max_label_value_bytes` of the configuration in force.
    pub label_limit: AtomicUsize,
    /// What `/probe` is doing.
    pub probes: ProbeCounters,
}

/// `/probe` at a glance, for `/metrics`.
#[derive(Debug, Default)]
pub struct ProbeCounters {
    /// Targets polled for `/probe` now.
    pub targets: AtomicU64,
    /// `[probe] max_targets`.
    pub max_targets: AtomicU64,
    /// Targets dropped after their time to live.
    pub expired: AtomicU64,
    /// Requests by result (`ok` or the refusal's label).
    pub requests: std::sync::Mutex<BTreeMap<&'static str, u64>>,
}

impl ProbeCounters {
    /// Counts one request.
    pub fn request(&self, result: &'static str) {
        *self
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(result)
            .or_insert(0) += 1;
    }

    fn copy(&self) -> ProbeCounters {
        ProbeCounters {
            targets: AtomicU64::new(self.targets.load(Ordering::Relaxed)),
            max_targets: AtomicU64::new(self.max_targets.load(Ordering::Relaxed)),
            expired: AtomicU64::new(self.expired.load(Ordering::Relaxed)),
            requests: std::sync::Mutex::new(
                self.requests
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            ),
        }
    }
}

impl ExporterState {
    /// A copy of the counters at this moment.
    pub fn copy(&self) -> ExporterState {
        ExporterState {
            reloads: AtomicU64::new(self.reloads.load(Ordering::Relaxed)),
            reload_failures: AtomicU64::new(self.reload_failures.load(Ordering::Relaxed)),
            last_reload_ok: AtomicBool::new(self.last_reload_ok.load(Ordering::Relaxed)),
            process: self.process,
            label_limit: AtomicUsize::new(self.label_limit.load(Ordering::Relaxed)),
            probes: self.probes.copy(),
        }
    }
}

impl Default for ExporterState {
    fn default() -> Self {
        ExporterState {
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            last_reload_ok: AtomicBool::new(true),
            process: None,
            label_limit: AtomicUsize::new(crate::config::DEFAULT_MAX_LABEL_VALUE_BYTES),
            probes: ProbeCounters::default(),
        }
    }
}

/// The snapshots, and which poller owns each target name.
#[derive(Debug, Default)]
struct Targets {
    snapshots: BTreeMap<Arc<str>, Arc<TargetSnapshot>>,
    owners: BTreeMap<Arc<str>, u64>,
}

/// A poller's right to publish one target's snapshots. After a reload
/// replaces or removes the poller, its late publications are ignored, so a
/// stopped poller can never bring back a removed or outdated target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner(u64);

impl Owner {
    /// The token as a number (never 0).
    pub fn id(self) -> u64 {
        self.0
    }

    /// A token from [`Self::id`].
    pub fn from_id(id: u64) -> Owner {
        Owner(id)
    }
}

/// The latest snapshot of every target.
#[derive(Debug, Default)]
pub struct SnapshotStore {
    targets: RwLock<Targets>,
    generation: AtomicU64,
    next_owner: AtomicU64,
    /// Wakes whoever renders when anything changes.
    changed: tokio::sync::Notify,
    /// Reload counters.
    pub exporter: ExporterState,
}

impl SnapshotStore {
    /// Makes a new poller the owner of `name`'s snapshots.
    pub fn register(&self, name: &str) -> Owner {
        let owner = self.next_owner.fetch_add(1, Ordering::Relaxed) + 1;
        let mut targets = self.targets.write().unwrap_or_else(|p| p.into_inner());
        targets.owners.insert(name.into(), owner);
        Owner(owner)
    }

    /// Replaces the snapshot of one target, if `owner` still owns it.
    pub fn publish(&self, owner: Owner, snapshot: Arc<TargetSnapshot>) {
        let mut targets = self.targets.write().unwrap_or_else(|p| p.into_inner());
        if targets.owners.get(&snapshot.name) != Some(&owner.0) {
            return;
        }
        targets.snapshots.insert(snapshot.name.clone(), snapshot);
        drop(targets);
        self.bump();
    }

    /// Forgets targets not in `names` (after a reload).
    pub fn retain(&self, names: &[&str]) {
        let mut targets = self.targets.write().unwrap_or_else(|p| p.into_inner());
        targets.snapshots.retain(|name, _| names.contains(&&**name));
        targets.owners.retain(|name, _| names.contains(&&**name));
        drop(targets);
        self.bump();
    }

    /// Marks exporter-level state as changed.
    pub fn touch(&self) {
        self.bump();
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Release);
        self.changed.notify_one();
    }

    /// Completes after the next change (or at once if one happened since the
    /// last call).
    pub async fn changed(&self) {
        self.changed.notified().await;
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
            .snapshots
            .values()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::StreamId;

    fn group(pending: u64) -> GroupState {
        GroupState {
            info: GroupInfo {
                name: Vec::new(),
                consumers: 0,
                pending,
                last_delivered_id: StreamId::new(1, 0),
                entries_read: None,
                lag: None,
            },
            lag: None,
            lag_estimated: false,
            lag_seconds: None,
            trimmed_undelivered: None,
            lost: None,
            rewinds: 0,
            ahead_of_stream: false,
            retention_margin: None,
            overtake_eta: None,
            drain_eta: None,
            status: None,
            status_basis: None,
        }
    }

    #[test]
    fn groups_are_sorted_found_by_name_and_keep_the_last_duplicate() {
        let name = |s: &str| -> Name { Arc::from(s.as_bytes()) };
        let groups = Groups::new(vec![
            (name("b"), group(1)),
            (name("a"), group(2)),
            (name("b"), group(3)),
            (name("\u{0}x"), group(4)),
        ]);
        let keys: Vec<&[u8]> = groups.keys().map(|k| &**k).collect();
        assert_eq!(keys, [&b"\0x"[..], b"a", b"b"]);
        assert_eq!(groups.len(), 3);
        assert_eq!(groups.get(b"b").map(|g| g.info.pending), Some(3));
        assert_eq!(groups.get(b"a").map(|g| g.info.pending), Some(2));
        assert!(groups.contains_key(b"\0x"));
        assert!(!groups.contains_key(b"c"));
        assert!(Groups::default().is_empty());
    }

    #[test]
    fn pruning_copies_a_shared_map_only_when_something_goes() {
        let map: Arc<BTreeMap<u32, u32>> = Arc::new(BTreeMap::from([(1, 1), (2, 2)]));
        let mut working = map.clone();
        retain_keys(&mut working, |_| true);
        assert!(
            Arc::ptr_eq(&map, &working),
            "nothing removed, nothing copied"
        );
        retain_keys(&mut working, |k| *k == 1);
        assert!(!Arc::ptr_eq(&map, &working));
        assert_eq!(working.keys().collect::<Vec<_>>(), [&1]);
        assert_eq!(map.len(), 2, "the published map is untouched");
    }
}
