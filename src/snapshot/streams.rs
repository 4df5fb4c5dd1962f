//! What the stream poll, the PEL scan and the consumers probe know about
//! each stream, group and consumer: plain figures, filled by the probes from
//! what Redis replied, and judged where Redis can be wrong. A stream keeps
//! its `XINFO STREAM` reply as decoded; a group keeps the figures of its
//! `XINFO GROUPS` row that are rendered, but never the row's `lag`: the
//! snapshot holds only the lag the stream probe judged ([`crate::lag`]), so
//! nothing can render the server's figure where Redis gets it wrong.

use std::sync::Arc;
use std::time::SystemTime;

use super::name::Name;
use crate::config::StreamSettings;
use crate::loss::{ByCause, Unproven};
use crate::status::GroupStatus;
use crate::vocab::{ConsumerInfo, StreamId, StreamInfo};

/// The smallest pending ID of a group, as the pending summary read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OldestPending {
    /// The ID (of a stream with time-based IDs).
    pub id: StreamId,
    /// Server time (ms) of the read.
    pub read_at_ms: u64,
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
    /// The consumers exported by name: at most `max_consumers_per_group`,
    /// those holding the most entries first (the longest silent among
    /// equals), then those that read most recently; lean series write only
    /// those that hold entries or carry a rewritten name.
    pub top: Vec<ExportedConsumer>,
    /// Pending entries of the consumers beyond the cap, when there are any.
    pub other_pending: Option<u64>,
    /// Consumers whose last read attempt is within the status window.
    pub live: u64,
    /// Consumers that have not tried to read for a day or more: workers
    /// gone without `XGROUP DELCONSUMER`.
    pub stale: u64,
    /// PEL entries held by consumers inactive longer than `inactive_after`.
    pub orphaned: u64,
    /// The consumers holding them, under their real names: those holding
    /// the most first (the longest silent among equals), at most
    /// [`CULPRITS_NAMED`](super::culprit::CULPRITS_NAMED).
    pub orphan_holders: Vec<super::culprit::OrphanHolder>,
    /// The inactivity after which entries are orphaned: the stream's
    /// `consumer_inactive_after`, or learned (see
    /// [`crate::cadence::inactive_after`]).
    pub inactive_after: std::time::Duration,
}

/// A consumer as exported: what `XINFO CONSUMERS` said of it, or of the
/// consumers whose names one rewrite (`consumer_names`) made into its name,
/// together (their entries summed, their latest read kept).
#[derive(Clone, Debug, PartialEq)]
pub struct ExportedConsumer {
    /// The consumer, under the name it is exported as.
    pub info: ConsumerInfo,
    /// Its name is a rewrite's: stable across worker restarts, so lean
    /// series keep it whether or not it holds entries.
    pub renamed: bool,
    /// It holds entries and has not read for half its group's orphan limit
    /// or more: longer than the group's consumers usually hold entries (the
    /// limit is at least twice that), so someone may have to act on it.
    pub holds_long: bool,
}

impl ExportedConsumer {
    /// Whether lean series write it: it holds entries longer than its group
    /// usually does (a crashed or stuck worker, the one an on-call acts
    /// on), or its name is a rewrite's. A busy worker holding what it is
    /// processing is not named: with task queues that name every worker
    /// process anew, each restart would add a label value.
    pub fn in_lean(&self) -> bool {
        self.holds_long || self.renamed
    }
}

/// The PEL scan's view of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct ScanState {
    /// The last complete pass, if one completed.
    pub last: Option<Arc<PelScan>>,
    /// Progress of the pass in progress (1.0 when none is unfinished).
    pub progress: f64,
}

/// What the stream poll knows about one group. The per-group probes keep
/// their results in maps of their own in [`TargetSnapshot`](super::TargetSnapshot), so each probe
/// replaces only what it owns and never copies the others' data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupState {
    /// Consumers in the group (XINFO GROUPS).
    pub consumers: u64,
    /// PEL size (XINFO GROUPS).
    pub pending: u64,
    /// Last ID delivered to the group (XINFO GROUPS).
    pub last_delivered_id: StreamId,
    /// Entries read (XINFO GROUPS); `None` when unknown or before 7.0.
    pub entries_read: Option<u64>,
    /// Undelivered entries, as the stream probe judged them; `None` when
    /// unknown.
    pub lag: Option<u64>,
    /// `lag` came from the exporter's estimator.
    pub lag_estimated: bool,
    /// Age of the oldest undelivered entry (seconds), for time-based IDs.
    pub lag_seconds: Option<f64>,
    /// Entries trimmed before the group read them; `None` when unknowable.
    pub trimmed_undelivered: Option<u64>,
    /// Entries proven lost since the exporter started, by cause; `None`
    /// until the figure could be known (never before 7.0).
    pub lost: Option<ByCause>,
    /// Server time (ms) of the last counted loss, by cause.
    pub lost_at: crate::loss::LossTimes,
    /// Entries that may have been lost beyond those proven (an upper
    /// bound), by cause; `None` as `lost`.
    pub possibly_lost: Option<ByCause>,
    /// Poll intervals with a possible loss, by reason (see [`crate::loss`]).
    pub loss_unproven: Unproven,
    /// Times the group's position moved backwards.
    pub rewinds: u64,
    /// Server time (ms) of the last counted rewind.
    pub rewound_at_ms: Option<u64>,
    /// last-delivered-id is beyond the stream's last generated ID.
    pub ahead_of_stream: bool,
    /// Seconds of ID time between the stream's first entry and the group's
    /// first undelivered one (time-based IDs, something undelivered).
    pub retention_margin: Option<f64>,
    /// Seconds until trimming reaches undelivered entries, at recent rates.
    pub overtake_eta: Option<f64>,
    /// Seconds until the lag reaches 0, at recent rates.
    pub drain_eta: Option<f64>,
    /// The group's learned read cadence, seconds (see [`crate::cadence`]);
    /// `None` until learned.
    pub read_interval: Option<f64>,
    /// How often the group is read at least, seconds: the stream's
    /// `read_every`, or one learned for a group that reads in runs (see
    /// [`crate::cadence::reads_in_runs`]); `None` otherwise.
    pub read_every: Option<f64>,
    /// Server time (ms) of the group's latest read the polls saw (a
    /// consumer's last read, or its position advancing); `None` until one.
    pub last_read_at_ms: Option<u64>,
    /// Status over the window.
    pub status: Option<GroupStatus>,
    /// Server time (ms) of this poll when it found entries pending in a
    /// stream with time-based IDs: the clock that ages the pending
    /// summary's oldest ID (see [`super::TargetSnapshot::oldest_pending_age`]).
    /// `None` when nothing was pending, IDs are not time or `TIME` failed.
    pub pending_aged_at_ms: Option<u64>,
    /// What `status` rests on (see [`crate::status::Basis`]).
    pub status_basis: Option<crate::status::Basis>,
    /// Why the group has its status (see [`crate::status::Reason`]).
    pub status_reason: Option<crate::status::Reason>,
    /// `warming_up`: how long until the group is judged, from this poll,
    /// when known.
    pub judged_in: Option<std::time::Duration>,
}

/// Everything known about one stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamState {
    /// What XINFO STREAM said.
    pub info: StreamInfo,
    /// IDs carry wall-clock time, so ages are exported.
    pub time_based_ids: bool,
    /// Settings from `[[streams]]`.
    pub settings: Arc<StreamSettings>,
    /// Its dead-letter stream, when configured.
    pub dead_letter: Option<DeadLetter>,
    /// Groups by name.
    pub groups: Groups,
    /// Groups not watched for `max_groups_per_stream`.
    pub groups_dropped: u64,
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
