//! What each probe leaves in the target's state for its next run: the
//! consumers probe's last read of a group and the consumers it saw holding
//! entries, discovery's last walk and report, the PEL scan's pass in
//! progress, the stream probe's last full reads of quiet streams. The types
//! live here, below the state that holds them; the probes that fill them
//! keep their behaviour (`impl` blocks) in their own rooms.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::snapshot::Name;
use crate::vocab::{GroupInfo, StreamId, StreamInfo};

/// What the last read of a group's consumers found, beyond what it exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastRead {
    /// Consumers listed.
    pub consumers: u64,
    /// Some consumer held entries.
    pub held: bool,
}

/// A consumer seen holding entries at a consumers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    /// A hash of its name.
    pub(super) name: u64,
    /// Server time (ms) of its last read then.
    pub(super) read_at_ms: u64,
    /// How long it had not read then (ms).
    pub(super) silent_ms: u64,
}

/// The last walk: the keyspace-event coverage mark when it began (`None`
/// when the subscription was not healthy), and the runs that skipped a walk
/// since.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LastWalk {
    /// [`crate::backend`]'s coverage mark at the walk.
    pub coverage: Option<u64>,
    /// Runs since that skipped the walk.
    pub skipped: u32,
}

/// What the last successful discovery found, for its log line and the
/// next run's delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiscoveryReport {
    /// Streams watched.
    pub watched: usize,
    /// Watched now and not before.
    pub added: usize,
    /// Watched before and not now.
    pub removed: usize,
    /// Keys the SCAN walks covered (calls × COUNT); `None` without a walk.
    pub keys_walked: Option<u64>,
}

/// A pass over one group's PEL, possibly spanning several runs.
#[derive(Clone, Debug)]
pub struct Pass {
    /// Where the next page starts; `None` before the first page.
    pub(super) next: Option<StreamId>,
    /// PEL size when the pass began, for progress.
    pub(super) pel_size: u64,
    pub(super) acc: Accumulator,
}

/// Running totals of a pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Accumulator {
    pub(super) entries: u64,
    pub(super) max_idle_ms: Option<u64>,
    /// Entries per idle bucket; the last slot is above every bound.
    pub(super) idle: Vec<u64>,
    /// Entries per delivery-count bucket; the last slot is above every bound.
    pub(super) deliveries: Vec<u64>,
    pub(super) poison: u64,
    pub(super) ghost: u64,
    pub(super) candidates: Vec<StreamId>,
    pub(super) unchecked: u64,
}

/// One stream's XINFO, decoded by the stream probe.
#[derive(Clone, Debug)]
pub(crate) struct StreamRead {
    pub(super) info: StreamInfo,
    /// The groups watched.
    pub(super) groups: Vec<GroupInfo>,
    /// Groups excluded by the group filters: never read further, but their
    /// positions still inform the lag estimator.
    pub(super) unwatched: Vec<GroupInfo>,
    /// Groups not watched for `max_groups_per_stream`: beyond it among the
    /// watched ones, or beyond the rows the reply kept.
    pub(super) dropped: u64,
}

/// A quiet stream's last full read (the stream probe's `quiet` room).
#[derive(Clone, Debug)]
pub(crate) struct QuietRead {
    pub(super) read: StreamRead,
    /// What vouched for the read when it was made.
    pub(super) coverage: Coverage,
    pub(super) read_at: Instant,
    /// When a safety check last found it unchanged (`read_at` before).
    pub(super) checked_at: Instant,
}

/// What vouches for a quiet stream's last read between full reads: the
/// marks that stay the same while nothing that changes it can go unseen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Coverage {
    /// The keyspace-event mark (every stream event but `xadd`).
    pub(crate) events: Option<u64>,
    /// The node's client-tracking mark (every `XADD`, `XDEL`, `XTRIM`,
    /// `DEL` and replacement of a key read).
    pub(crate) tracking: Option<u64>,
}

/// The quiet streams of a target, by name, with the messages that named
/// them while they were being read.
#[derive(Debug, Default)]
pub(crate) struct QuietReads {
    pub(super) reads: HashMap<Name, QuietRead>,
    /// Messages that named a stream so far.
    pub(super) forgets: u64,
    /// The stream each was about, since the reads in flight began: a
    /// message may arrive before the read it follows is remembered.
    pub(super) forgotten: HashMap<Name, u64>,
    /// Reads begun before this count are not kept (`forgotten` was cut).
    pub(super) floor: u64,
}
