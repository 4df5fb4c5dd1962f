//! What a target's client counted (commands, errors, skipped items, waits,
//! page sizes, keyspace events), copied into every snapshot.

use std::collections::BTreeMap;

/// A copy of the client's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Commands sent, by label.
    pub commands: BTreeMap<&'static str, u64>,
    /// Errors, by kind label.
    pub errors: BTreeMap<&'static str, u64>,
    /// Items replies left out (their names too long to keep), by kind
    /// label.
    pub skipped: BTreeMap<&'static str, u64>,
    /// Seconds spent waiting on rate limits.
    pub rate_limited_seconds: f64,
    /// PEL entries read by the scan.
    pub pending_scanned: u64,
    /// Current page sizes, by command label (`scan`, `xpending_range`).
    pub page_sizes: BTreeMap<&'static str, u32>,
    /// The keyspace-event subscription; `None` while there is none
    /// (`keyspace_events = "off"`, or before it starts).
    pub keyspace_events: Option<KeyspaceEventsStats>,
}

/// What the keyspace-event subscription of a target counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyspaceEventsStats {
    /// Keyevent messages received.
    pub received: u64,
    /// Keyevent messages dropped: received while the handler's queue was
    /// full.
    pub dropped: u64,
    /// Every node's subscription is up and answering.
    pub active: bool,
    /// Extra stream polls run on events.
    pub extra_polls: u64,
    /// Extra stream polls left to the schedule: events asked for them while
    /// the extra polls' share of the command budget was spent.
    pub extra_polls_skipped: u64,
}
