//! The probes' stable names: the `probe` label, and the keys of
//! `[schedule]`, `[limits] priority` and `min_share`. The one list of them.

/// The probes, by stable name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProbeKind {
    /// Finds the streams to watch.
    Discovery,
    /// INFO server and memory.
    Info,
    /// XINFO STREAM + GROUPS, lag, lag seconds, dead letters, status.
    Stream,
    /// XPENDING summary: oldest pending age.
    PendingSummary,
    /// XINFO CONSUMERS: per-consumer figures and orphaned entries.
    Consumers,
    /// Paged XPENDING over whole PELs.
    PendingScan,
}

impl ProbeKind {
    /// Every probe, in the order of a first collection.
    pub const ALL: [ProbeKind; 6] = [
        ProbeKind::Discovery,
        ProbeKind::Info,
        ProbeKind::Stream,
        ProbeKind::PendingSummary,
        ProbeKind::Consumers,
        ProbeKind::PendingScan,
    ];

    /// The `probe` label and config key.
    pub fn label(self) -> &'static str {
        match self {
            ProbeKind::Discovery => "discovery",
            ProbeKind::Info => "info",
            ProbeKind::Stream => "stream",
            ProbeKind::PendingSummary => "pending_summary",
            ProbeKind::Consumers => "consumers",
            ProbeKind::PendingScan => "pending_scan",
        }
    }

    /// True for the probes that work group by group and need the stream
    /// poll's list of groups first.
    pub fn per_group(self) -> bool {
        matches!(
            self,
            ProbeKind::PendingSummary | ProbeKind::Consumers | ProbeKind::PendingScan
        )
    }
}
