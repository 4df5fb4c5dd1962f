//! Everything known about one target: the snapshot a poller publishes
//! after every run, and what `/metrics` renders of it; with the parts that
//! are about the target itself (what INFO said of the server, the last run
//! of each probe) and the pruning of its shared maps, which a published
//! snapshot keeps while the next one drops what vanished.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::name::{GroupKey, Name};
use super::streams::{Consumers, OldestPending, ScanState, StreamState};
use crate::vocab::{ProbeKind, StatsSnapshot};

/// Everything known about one target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetSnapshot {
    /// Target name.
    pub name: Arc<str>,
    /// The last connection attempt succeeded.
    pub up: bool,
    /// Down, and still within the grace after it fell: what the last good
    /// polls read stays served (with `target_up 0`), so one failed poll
    /// does not erase the target's series.
    pub held: bool,
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
    /// Each group's smallest pending ID (the pending summary), for groups
    /// of streams with time-based IDs; see [`Self::oldest_pending_age`].
    pub oldest_pending: Arc<BTreeMap<GroupKey, OldestPending>>,
    /// Poison entries among each stuck group's oldest pending entries (the
    /// pending summary; see `probe::pending_summary`).
    pub head_poison: Arc<BTreeMap<GroupKey, u64>>,
    /// Pending entries released by `XNACK` of each group, on servers that
    /// have it (the pending summary).
    pub nacked: Arc<BTreeMap<GroupKey, u64>>,
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
    /// True once the first collection has an outcome: ready, or discovery
    /// or the stream poll failed (an unreachable target's outcome is
    /// `target_up 0`). What `/readyz` and a first `/probe` wait for, rather
    /// than for the target to be healthy.
    pub fn first_collection_done(&self) -> bool {
        self.ready
            || [ProbeKind::Discovery, ProbeKind::Stream]
                .iter()
                .any(|k| self.probes.get(k).is_some_and(|p| !p.success))
    }

    /// True when its data series are served: it is up, or down and still
    /// held (see [`Self::held`]).
    pub fn serves_data(&self) -> bool {
        self.up || self.held
    }

    /// True when the stream poll knows the group.
    pub fn has_group(&self, stream: &Name, group: &Name) -> bool {
        self.streams
            .get(stream)
            .is_some_and(|s| s.groups.contains_key(group))
    }

    /// Age in seconds of group `key`'s smallest pending ID, by the server
    /// clock of the later of the two polls that know of it: the pending
    /// summary that read the ID, or a stream poll after it, which ages it
    /// while entries are pending. A stream poll that found nothing pending
    /// (or IDs that are not time) withholds it. `None` when unknown.
    pub fn oldest_pending_age(&self, key: &GroupKey) -> Option<f64> {
        let oldest = self.oldest_pending.get(key)?;
        let group = self.streams.get(&key.0).and_then(|s| s.groups.get(&key.1));
        let now_ms = match group.map(|g| g.pending_aged_at_ms) {
            Some(Some(aged_at)) => aged_at.max(oldest.read_at_ms),
            // The stream poll found nothing to age.
            Some(None) => return None,
            None => oldest.read_at_ms,
        };
        // Clamped at 0: IDs can run ahead of the clock.
        Some(now_ms.saturating_sub(oldest.id.ms) as f64 / 1000.0)
    }

    /// Drops the per-group results of groups the stream poll no longer knows.
    pub fn prune_groups(&mut self) {
        let streams = &self.streams;
        let known = |(s, g): &GroupKey| streams.get(s).is_some_and(|st| st.groups.contains_key(g));
        retain_keys(&mut self.oldest_pending, known);
        retain_keys(&mut self.head_poison, known);
        retain_keys(&mut self.nacked, known);
        retain_keys(&mut self.consumers, known);
        retain_keys(&mut self.scans, known);
    }
}

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

impl ServerInfo {
    /// Whether the server has `XNACK` (Redis 8.8+), whose groups report
    /// `nacked-count` in `XINFO STREAM … FULL` and nowhere else: the only
    /// servers that command is sent to. Valkey has no `XNACK` yet.
    pub fn has_xnack(&self) -> bool {
        let mut parts = self.version.split('.').map(|p| p.parse::<u64>().ok());
        let (major, minor) = (parts.next().flatten(), parts.next().flatten());
        self.server == "redis" && (major, minor) >= (Some(8), Some(8))
    }
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
    /// Of those, commands its next runs will not repeat (the first read of
    /// idle groups, which later runs read one at a time).
    pub one_off: u64,
    /// Time between the starts of the last two runs: the cadence achieved.
    pub achieved_interval: Option<Duration>,
    /// When the last run started (exporter clock).
    pub started_at: Option<tokio::time::Instant>,
    /// Runs that panicked (each logged; the probe's loop restarted).
    pub panics: u64,
}

impl ProbeStatus {
    /// Commands per second this probe's cadence needs: its last run's
    /// commands, less those its next runs will not repeat, over its
    /// interval.
    pub fn commands_needed_per_second(&self) -> Option<f64> {
        let interval = self.interval?.as_secs_f64();
        let steady = self.commands.saturating_sub(self.one_off);
        (interval > 0.0).then(|| steady as f64 / interval)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xnack_from_redis_8_8_on() {
        let of = |server: &str, version: &str| ServerInfo {
            server: server.into(),
            version: version.into(),
            ..ServerInfo::default()
        };
        for (server, version, has) in [
            ("redis", "8.8.0", true),
            ("redis", "8.10.1", true),
            ("redis", "9.0.0", true),
            ("redis", "8.6.3", false),
            ("redis", "7.0.15", false),
            ("redis", "", false),
            ("valkey", "9.1.2", false),
        ] {
            assert_eq!(of(server, version).has_xnack(), has, "{server} {version}");
        }
    }
}
