//! What a client counted: commands sent by label, errors by kind,
//! connections opened again by the reason the last one went, items left
//! out of replies by kind and PEL entries read, copied into every snapshot with the time spent waiting on
//! rate limits and the current page sizes.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::vocab::{
    ClientTrackingStats, ErrorKind, ExtraPollStats, KeyspaceEventsStats, ReconnectReason, SkipKind,
    StatsSnapshot,
};

/// Counters of what the client did, read into every snapshot.
#[derive(Debug, Default)]
pub(crate) struct ClientStats {
    commands: Mutex<BTreeMap<&'static str, u64>>,
    errors: Mutex<BTreeMap<&'static str, u64>>,
    reconnects: Mutex<BTreeMap<&'static str, u64>>,
    skipped: Mutex<BTreeMap<&'static str, u64>>,
    pending_scanned: AtomicU64,
    keyspace_events: Mutex<Option<KeyspaceEventsStats>>,
    extra_polls: Mutex<Option<ExtraPollStats>>,
    /// Times the keyspace-event subscription stopped covering every event:
    /// it stopped being healthy, or an event was dropped.
    keyspace_gaps: AtomicU64,
    /// A stream event arrived since the subscription last became healthy:
    /// the server publishes them (a subscription to a server whose
    /// `notify-keyspace-events` lacks `E` and `t` is healthy and silent).
    stream_events_seen: std::sync::atomic::AtomicBool,
}

fn bump(map: &Mutex<BTreeMap<&'static str, u64>>, label: &'static str, by: u64) {
    // Counters stay usable even if a thread panicked mid-update.
    *map.lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(label)
        .or_insert(0) += by;
}

fn copy(map: &Mutex<BTreeMap<&'static str, u64>>) -> BTreeMap<&'static str, u64> {
    map.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

impl ClientStats {
    /// Counts one error of `kind`.
    pub(crate) fn error(&self, kind: ErrorKind) {
        bump(&self.errors, kind.label(), 1);
    }

    /// Counts one pooled connection opened again after one dropped for
    /// `reason`.
    pub(super) fn reconnect(&self, reason: ReconnectReason) {
        bump(&self.reconnects, reason.label(), 1);
    }

    /// Counts `n` items of `kind` left out of a reply.
    pub(crate) fn skipped(&self, kind: SkipKind, n: u64) {
        bump(&self.skipped, kind.label(), n);
    }

    /// Counts one command sent, by its label.
    pub(super) fn command(&self, label: &'static str) {
        bump(&self.commands, label, 1);
    }

    /// Counts PEL entries read.
    pub(crate) fn pending_scanned(&self, n: u64) {
        self.pending_scanned.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one keyevent message received; `stream_event` when it is a
    /// stream command's (`x…`), which shows the server publishes them.
    pub(crate) fn keyspace_event(&self, stream_event: bool) {
        let mut ks = self
            .keyspace_events
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        ks.get_or_insert_with(KeyspaceEventsStats::default).received += 1;
        if stream_event {
            self.stream_events_seen.store(true, Ordering::Relaxed);
        }
    }

    /// Counts one keyevent message dropped because the handler's queue was
    /// full.
    pub(crate) fn keyspace_event_dropped(&self) {
        let mut ks = self
            .keyspace_events
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        ks.get_or_insert_with(KeyspaceEventsStats::default).dropped += 1;
        self.keyspace_gaps.fetch_add(1, Ordering::Relaxed);
    }

    /// While every node's subscription is healthy and the server is seen
    /// to publish stream events, a mark that stays the same as long as no
    /// event is missed (no interruption, no drop); `None` otherwise. Two
    /// equal marks say the events covered the time between.
    pub(crate) fn keyspace_coverage(&self) -> Option<u64> {
        let ks = self
            .keyspace_events
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        ks.filter(|k| k.active && self.stream_events_seen.load(Ordering::Relaxed))
            .map(|_| self.keyspace_gaps.load(Ordering::Relaxed))
    }

    /// Counts extra stream polls run and skipped (and makes the counters
    /// shown, zero at first, once the loop that runs them starts).
    pub(crate) fn extra_polls(&self, run: u64, skipped: u64) {
        let mut extra = self.extra_polls.lock().unwrap_or_else(|p| p.into_inner());
        let extra = extra.get_or_insert_with(ExtraPollStats::default);
        extra.run += run;
        extra.skipped += skipped;
    }

    /// Commands sent so far, all labels together.
    pub(crate) fn commands_sent(&self) -> u64 {
        self.commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .sum()
    }

    /// Records whether every node's subscription is healthy.
    pub(crate) fn keyspace_events_active(&self, active: bool) {
        let mut ks = self
            .keyspace_events
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let ks = ks.get_or_insert_with(KeyspaceEventsStats::default);
        if ks.active && !active {
            self.keyspace_gaps.fetch_add(1, Ordering::Relaxed);
            self.stream_events_seen.store(false, Ordering::Relaxed);
        }
        ks.active = active;
    }

    /// A copy of the counters, with what the limiters and the page tuner
    /// know.
    pub(super) fn snapshot(
        &self,
        rate_limited_seconds: f64,
        page_sizes: BTreeMap<&'static str, u32>,
        client_tracking: Option<ClientTrackingStats>,
    ) -> StatsSnapshot {
        StatsSnapshot {
            commands: copy(&self.commands),
            errors: copy(&self.errors),
            reconnects: copy(&self.reconnects),
            skipped: copy(&self.skipped),
            rate_limited_seconds,
            pending_scanned: self.pending_scanned.load(Ordering::Relaxed),
            page_sizes,
            keyspace_events: *self
                .keyspace_events
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
            client_tracking,
            extra_polls: *self.extra_polls.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_commands_errors_and_entries_by_label() {
        let stats = ClientStats::default();
        assert_eq!(
            stats.snapshot(0.0, BTreeMap::new(), None),
            StatsSnapshot::default()
        );
        stats.command("scan");
        stats.command("scan");
        stats.command("xinfo_stream");
        stats.error(ErrorKind::Timeout);
        stats.error(ErrorKind::Cluster);
        stats.error(ErrorKind::Cluster);
        stats.reconnect(ReconnectReason::Closed);
        stats.reconnect(ReconnectReason::Closed);
        stats.pending_scanned(40);
        stats.pending_scanned(2);
        stats.skipped(SkipKind::Group, 2);
        stats.skipped(SkipKind::Group, 1);
        let sizes = BTreeMap::from([("scan", 100)]);
        let snap = stats.snapshot(1.5, sizes.clone(), None);
        assert_eq!(
            snap.commands,
            BTreeMap::from([("scan", 2), ("xinfo_stream", 1)])
        );
        assert_eq!(
            snap.errors,
            BTreeMap::from([
                (ErrorKind::Timeout.label(), 1),
                (ErrorKind::Cluster.label(), 2)
            ])
        );
        assert_eq!(snap.reconnects, BTreeMap::from([("closed", 2)]));
        assert_eq!(snap.pending_scanned, 42);
        assert_eq!(snap.skipped, BTreeMap::from([("group", 3)]));
        assert_eq!(snap.rate_limited_seconds, 1.5);
        assert_eq!(snap.page_sizes, sizes);
        assert_eq!(snap.keyspace_events, None);
        stats.keyspace_events_active(true);
        stats.keyspace_event(false);
        assert_eq!(stats.keyspace_coverage(), None, "no stream event seen");
        stats.keyspace_event(true);
        stats.extra_polls(3, 0);
        stats.extra_polls(0, 4);
        let mark = stats.keyspace_coverage();
        assert!(mark.is_some(), "active");
        stats.keyspace_event_dropped();
        assert_ne!(stats.keyspace_coverage(), mark, "a drop is a gap");
        let mark = stats.keyspace_coverage();
        stats.keyspace_events_active(true);
        assert_eq!(stats.keyspace_coverage(), mark, "still covered");
        stats.keyspace_events_active(false);
        assert_eq!(stats.keyspace_coverage(), None);
        stats.keyspace_events_active(true);
        assert_eq!(stats.keyspace_coverage(), None, "none seen since");
        stats.keyspace_event(true);
        assert_ne!(stats.keyspace_coverage(), mark, "an interruption is a gap");
        let snap = stats.snapshot(0.0, BTreeMap::new(), None);
        assert_eq!(
            snap.keyspace_events,
            Some(KeyspaceEventsStats {
                received: 3,
                dropped: 1,
                active: true,
            })
        );
        assert_eq!(
            snap.extra_polls,
            Some(ExtraPollStats { run: 3, skipped: 4 })
        );
    }

    #[test]
    fn a_snapshot_is_a_copy_not_a_view() {
        let stats = ClientStats::default();
        stats.command("ping");
        let before = stats.snapshot(0.0, BTreeMap::new(), None);
        stats.command("ping");
        assert_eq!(before.commands["ping"], 1);
        assert_eq!(
            stats.snapshot(0.0, BTreeMap::new(), None).commands["ping"],
            2
        );
    }

    #[test]
    fn counters_survive_a_poisoned_lock() {
        let stats = std::sync::Arc::new(ClientStats::default());
        let s = stats.clone();
        let _ = std::thread::spawn(move || {
            let _guard = s.commands.lock();
            panic!("poison the lock");
        })
        .join();
        stats.command("ping");
        assert_eq!(
            stats.snapshot(0.0, BTreeMap::new(), None).commands["ping"],
            1
        );
    }
}
