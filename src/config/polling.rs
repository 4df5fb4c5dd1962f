//! How often each probe runs ([`Schedule`]) and what it may cost a target
//! ([`Limits`]): the command budget, its priorities and shares, page sizes.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::vocab::ProbeKind;

/// Probe intervals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// SCAN for patterns.
    pub discovery: Duration,
    /// INFO server and memory.
    pub info: Duration,
    /// XINFO STREAM + XINFO GROUPS (length and lag).
    pub stream: Duration,
    /// XPENDING summary.
    pub pending_summary: Duration,
    /// XINFO CONSUMERS.
    pub consumers: Duration,
    /// Paged XPENDING over whole PELs.
    pub pending_scan: Duration,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            discovery: Duration::from_secs(300),
            info: Duration::from_secs(60),
            stream: Duration::from_secs(15),
            pending_summary: Duration::from_secs(30),
            consumers: Duration::from_secs(30),
            pending_scan: Duration::from_secs(300),
        }
    }
}

/// Per-target cost limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Token bucket over every command sent.
    pub commands_per_second: u32,
    /// PEL entries the scan may read per second.
    pub pending_entries_per_second: u32,
    /// Entries per XPENDING page.
    pub pending_page: u32,
    /// Deadline for one pipeline round trip.
    pub command_timeout: Duration,
    /// Commands per pipeline.
    pub pipeline_size: usize,
    /// Largest undelivered range counted exactly with XRANGE when lag is unknown.
    pub lag_exact_count: u32,
    /// `XRANGE id id` checks per PEL scan pass for possible ghosts.
    pub ghost_checks_per_scan: u32,
    /// Probe names, highest priority first, for the command budget.
    pub priority: Vec<String>,
    /// The least share of the command budget each probe keeps when others
    /// want it too, by probe name (those not listed: none).
    pub min_share: BTreeMap<String, f64>,
    /// The time one SCAN or XPENDING page should take at most: page sizes
    /// shrink when calls take longer and grow back when they are quick.
    pub page_target: Duration,
    /// The smallest page the tuning goes down to.
    pub min_page: u32,
}

/// The probes' names, as `[limits] priority` and `min_share` spell them.
pub fn probe_names() -> [&'static str; 6] {
    ProbeKind::ALL.map(ProbeKind::label)
}

impl Limits {
    /// The rank of probe `name` (0 is the highest).
    pub fn rank(&self, name: &str) -> usize {
        self.priority
            .iter()
            .position(|p| p == name)
            .unwrap_or(self.priority.len().saturating_sub(1))
    }

    /// The minimum shares by rank.
    pub fn shares_by_rank(&self) -> Vec<f64> {
        self.priority
            .iter()
            .map(|p| self.min_share.get(p).copied().unwrap_or(0.0))
            .collect()
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            commands_per_second: 500,
            pending_entries_per_second: 50_000,
            pending_page: 500,
            command_timeout: Duration::from_secs(2),
            pipeline_size: 100,
            lag_exact_count: 100,
            ghost_checks_per_scan: 1000,
            // The stream poll first: every SLO alert reads length and lag.
            // Then the cheap INFO, discovery (new streams), the pending
            // summary, consumers, and the PEL scan, which can wait longest.
            priority: [
                ProbeKind::Stream,
                ProbeKind::Info,
                ProbeKind::Discovery,
                ProbeKind::PendingSummary,
                ProbeKind::Consumers,
                ProbeKind::PendingScan,
            ]
            .map(|k| k.label().to_string())
            .to_vec(),
            min_share: BTreeMap::from(
                [
                    // 12 % in all: the stream poll of 3,000 streams × 2
                    // groups (6,000 commands) fits its 15 s at 500/s.
                    (ProbeKind::Info, 0.01),
                    (ProbeKind::Discovery, 0.03),
                    (ProbeKind::PendingSummary, 0.03),
                    (ProbeKind::Consumers, 0.03),
                    (ProbeKind::PendingScan, 0.02),
                ]
                .map(|(k, v)| (k.label().to_string(), v)),
            ),
            page_target: Duration::from_millis(1),
            min_page: 10,
        }
    }
}
