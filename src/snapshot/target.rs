//! Everything known about one target: the snapshot a poller publishes
//! after every run, and what `/metrics` renders of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    Consumers, GroupKey, Name, OldestPending, ProbeStatus, ScanState, ServerInfo, StreamState,
    retain_keys,
};
use crate::vocab::ProbeKind;
use crate::vocab::StatsSnapshot;

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
