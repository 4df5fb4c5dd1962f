//! Losses and rewinds observed between stream polls: pure bookkeeping over
//! each poll's figures, with no I/O and no clock (the design and its limits
//! are in `docs/lag-and-losses.md`).
//!
//! A trim or a deletion that eats unread entries is often over within one
//! poll: the group reads past the gap a few milliseconds later, and nothing
//! at the next poll shows it. The [`Ledger`] of a group proves such losses
//! two ways and adds them to counters that never decrease:
//!
//! 1. **Across the range the group advanced over.** When entries-read is
//!    known at two consecutive polls, the entries the group passed over are
//!    its advance of entries-read; those that still exist in (previous
//!    last-delivered-id, current last-delivered-id] are counted with one
//!    bounded `XRANGE` ([`Ledger::range_to_count`]). The difference was
//!    removed before the group read it. Servers that re-estimate
//!    entries-read when a group reads past a gap (Valkey, Redis 8) put the
//!    gap into the advance; the arithmetic holds on the re-estimated value.
//! 2. **From Redis's counters at each poll.** Every increase of the unread
//!    entries gone (entries-added − entries-read − lag, exact figures only,
//!    see [`crate::lag`]): older servers keep a gap out of entries-read for
//!    good, so it shows there. An increase is never more than the entries
//!    removed from the stream since the figure it rose from. A fall is the
//!    new baseline at once when the group's entries-read rose by as much
//!    (a counter set with `XGROUP SETID … ENTRIESREAD`, or re-estimated past
//!    a gap, took the gone entries in), and otherwise only once the next
//!    poll confirms it (a figure read while the stream changed dips for one
//!    poll): a loss right after a true fall counts from the fallen figure.
//!
//! The counters cannot tell an entry removed before the group read it from
//! one the group read and its consumers (or a short `MAXLEN`) removed right
//! after. Pending entries of the range whose bodies are gone were delivered
//! (ghosts), and are not lost. Beyond that, a removal in the advanced range
//! is counted only when it stands out: the group's previous advance removed
//! nothing, and nothing was removed from the stream in the interval before.
//! A stream trimmed or cleaned at every poll (`MAXLEN` on `XADD`, consumers
//! that `XACKDEL` what they read) removes what its groups have just read as
//! a matter of course; its removals are counted as unproven instead
//! ([`Unproven`]), never as 0 in silence.
//!
//! The first figures after the exporter starts are the baseline, so a loss
//! older than the exporter is not counted again at every restart. A target
//! that comes back from an outage as the same server (same `run_id`) keeps
//! its ledgers, so a loss during the outage is counted at the next poll;
//! another server starts a new baseline ([`Ledger::reconnected`]). A group
//! whose position or entries-read moves backwards was rewound (XGROUP SETID,
//! or recreated under the same name): that is counted too, and its figures
//! start a new baseline instead of passing for a loss.

use crate::vocab::StreamId;

/// Entries lost by one group, by cause, since the exporter started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Removed by trimming while the group was behind (or the trimming edge
    /// passed its position between two polls; a trim that empties the
    /// stream is a trim).
    pub trimmed: u64,
    /// Removed inside the group's window: XDEL, XDELEX, XACKDEL, DELREF trims.
    pub deleted: u64,
}

/// Poll intervals in which entries were removed from the range a group
/// advanced over, but the loss could not be proven, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unproven {
    /// Entries-read was unknown at one of the two polls (always before
    /// Redis 7.0; after an `XGROUP SETID` without `ENTRIESREAD`; while a
    /// deletion ahead of the group keeps it invalid).
    pub no_entries_read: u64,
    /// The group's previous advance removed entries too: its consumers, or
    /// a window shorter than a poll, remove what it reads.
    pub routine_removal: u64,
    /// The range held more entries than one poll counts
    /// ([`RANGE_COUNT_CAP`]), or its count failed.
    pub not_counted: u64,
}

impl Unproven {
    /// The reasons with their `reason` label values.
    pub fn by_reason(&self) -> [(&'static str, u64); 3] {
        [
            ("no_entries_read", self.no_entries_read),
            ("routine_removal", self.routine_removal),
            ("not_counted", self.not_counted),
        ]
    }
}

/// The most entries a poll counts in the range a group advanced over (one
/// `XRANGE … COUNT` of this many plus one): a range with more stays
/// unproven.
pub const RANGE_COUNT_CAP: u32 = 2_000;

/// What one `XRANGE` found in the range a group advanced over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeCount {
    /// Entries that still exist there, and the group's pending entries
    /// there that do not: delivered before they were removed (ghosts), so
    /// not lost.
    Survivors {
        /// Entries of the range that still exist.
        present: u64,
        /// Pending entries of the range whose bodies are gone.
        delivered_gone: u64,
    },
    /// More than [`RANGE_COUNT_CAP`], or the command failed.
    NotCounted,
}

/// What one stream poll saw of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Server time of the poll, in ms, when known.
    pub at_ms: Option<u64>,
    /// The group's last-delivered-id.
    pub last_delivered: StreamId,
    /// Its entries-read, when Redis knows it.
    pub entries_read: Option<u64>,
    /// The stream's first entry, when it has one.
    pub first_entry: Option<StreamId>,
    /// The stream's max-deleted-entry-id (7.0+).
    pub max_deleted: Option<StreamId>,
    /// Entries ever added minus the stream's length: entries removed in all
    /// (7.0+).
    pub removed: Option<u64>,
    /// Unread entries gone, when exact.
    pub unread_gone: Option<u64>,
}

/// What the ledger keeps of the last poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    last_delivered: StreamId,
    entries_read: Option<u64>,
    max_deleted: Option<StreamId>,
    removed: Option<u64>,
    unread_gone: Option<u64>,
    first_entry: Option<StreamId>,
}

/// The counters' unread entries gone at one poll, with what it rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Figure {
    /// Entries-added − entries-read − lag.
    gone: u64,
    /// The group's entries-read then.
    entries_read: Option<u64>,
    /// Entries removed from the stream in all then.
    removed: Option<u64>,
}

impl Figure {
    fn of(gone: u64, o: &Observation) -> Figure {
        Figure {
            gone,
            entries_read: o.entries_read,
            removed: o.removed,
        }
    }

    /// True when the group's own counter explains a fall to `gone` by `o`:
    /// entries-read rose by at least the fall. Reads raise it by what they
    /// deliver, which leaves the figure as it was; only a counter that took
    /// gone entries in (set from outside with `XGROUP SETID … ENTRIESREAD`,
    /// or re-estimated past a gap by Valkey and Redis 8) lowers it. A fall
    /// the counter cannot explain is a misreading.
    fn explains_fall(&self, gone: u64, o: &Observation) -> bool {
        match (self.entries_read, o.entries_read) {
            (Some(then), Some(now)) => now.saturating_sub(then) >= self.gone.saturating_sub(gone),
            _ => false,
        }
    }

    /// The most unread entries that can have gone since this figure: each
    /// was removed from the stream since (an entry removed earlier was in
    /// the figure already). Unbounded when the counters do not say.
    fn new_removals_by(&self, o: &Observation) -> u64 {
        match (self.removed, o.removed) {
            (Some(then), Some(now)) => now.saturating_sub(then),
            _ => u64::MAX,
        }
    }
}

/// What the group's last advance did to the range it passed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Advance {
    /// Nothing in it was removed.
    Clean,
    /// Entries in it were removed.
    Removal,
}

/// The loss and rewind record of one group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Unread entries gone at the last poll that knew it.
    baseline: Option<Figure>,
    /// A lower figure seen once, not yet taken as the new baseline.
    dipped: Option<Figure>,
    /// A lowered baseline and the position it was lowered at: a rise back
    /// to the figure before the dip, with the group still there, is the
    /// rebound of a figure read mid-change, not a loss.
    before_dip: Option<(u64, StreamId, Option<u64>)>,
    /// The last poll.
    last: Option<Seen>,
    /// What the group's last advance did.
    last_advance: Option<Advance>,
    /// Entries were removed from the stream between the last two polls
    /// (trimmed or deleted, anywhere): a stream trimmed or cleaned at every
    /// poll removes entries its groups have just read as a matter of course.
    removed_before: bool,
    /// Losses counted; `None` until a loss could be known once.
    lost: Option<Lost>,
    /// Intervals with a removal that could not be proven a loss.
    unproven: Unproven,
    /// Rewinds counted.
    rewinds: u64,
    /// Server time of the last counted loss.
    last_loss_at_ms: Option<u64>,
}

impl Seen {
    fn of(o: &Observation) -> Seen {
        Seen {
            last_delivered: o.last_delivered,
            entries_read: o.entries_read,
            max_deleted: o.max_deleted,
            removed: o.removed,
            unread_gone: o.unread_gone,
            first_entry: o.first_entry,
        }
    }

    /// True when entries were removed from the stream between this poll and
    /// `o`: more removed in all where the counters say (7.0+), else the first
    /// entry moved.
    fn stream_removed_by(&self, o: &Observation) -> bool {
        match (self.removed, o.removed) {
            (Some(before), Some(now)) => now > before,
            _ => o.first_entry != self.first_entry && self.first_entry.is_some(),
        }
    }

    /// True when `o` finds the group moved backwards since.
    fn rewound_by(&self, o: &Observation) -> bool {
        o.last_delivered < self.last_delivered
            || matches!((o.entries_read, self.entries_read), (Some(now), Some(then)) if now < then)
    }

    /// True when entries were removed from the range (this poll's position,
    /// `o`'s position] the group advanced over. A deletion shows as a
    /// max-deleted-entry-id past this position. A trim shows as the first
    /// entry past it (or an emptied stream), and, where the counters allow,
    /// as more entries removed in all than the group had read: a trim that
    /// passed this position removed every entry up to it, so only then did
    /// it reach beyond (IDs are sparse; the first entry alone can move past
    /// the position without a single entry after it being removed).
    fn removal_in_range(&self, o: &Observation) -> bool {
        let ld = self.last_delivered;
        let deleted = o.max_deleted.is_some_and(|d| d > ld);
        let first_past = o.first_entry.is_none_or(|f| f > ld);
        let trimmed = first_past
            && match (o.removed, self.entries_read) {
                (Some(removed), Some(read)) => removed > read,
                _ => o.first_entry.is_none_or(|f| Some(f) > ld.successor()),
            };
        deleted || trimmed
    }

    /// What removed unread entries between this poll and `o`: a deletion
    /// when max-deleted-entry-id moved past the group's position; else a
    /// trim when the first entry moved past it or the stream was emptied;
    /// else a deletion.
    fn cause(&self, o: &Observation) -> Cause {
        let ld = self.last_delivered;
        let deletion = o.max_deleted > self.max_deleted && o.max_deleted.is_some_and(|d| d > ld);
        let trimmed = o
            .first_entry
            .is_none_or(|first| Some(first) > ld.successor());
        if !deletion && trimmed {
            Cause::Trimmed
        } else {
            Cause::Deleted
        }
    }
}

/// Why entries were lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    Trimmed,
    Deleted,
}

impl Lost {
    fn add(&mut self, cause: Cause, n: u64) {
        match cause {
            Cause::Trimmed => self.trimmed += n,
            Cause::Deleted => self.deleted += n,
        }
    }
}

impl Ledger {
    /// The range whose surviving entries the probe must count (`XRANGE key
    /// <from> <to> COUNT RANGE_COUNT_CAP + 1`, both ends inclusive) before
    /// [`Ledger::observe`] can prove a loss in the range the group advanced
    /// over; `None` when this poll needs no count.
    pub fn range_to_count(&self, o: &Observation) -> Option<(StreamId, StreamId)> {
        let last = self.last?;
        let provable = !last.rewound_by(o)
            && o.last_delivered > last.last_delivered
            && last.entries_read.is_some()
            && o.entries_read.is_some()
            && self.last_advance == Some(Advance::Clean)
            && !self.removed_before
            && last.removal_in_range(o);
        provable.then_some((last.last_delivered.successor()?, o.last_delivered))
    }

    /// Records one poll; `range` is what the probe counted of
    /// [`Ledger::range_to_count`], when it asked for a count.
    pub fn observe(&mut self, o: &Observation, range: Option<RangeCount>) {
        let previous = self.last.replace(Seen::of(o));
        let rewound = previous.is_some_and(|p| p.rewound_by(o));
        if rewound {
            self.rewinds += 1;
            self.baseline = None;
            self.dipped = None;
            self.before_dip = None;
            self.last_advance = None;
        }
        if o.unread_gone.is_some() || o.entries_read.is_some() {
            self.lost.get_or_insert_with(Lost::default);
        }
        let mut counted = Lost::default();
        let removed_now = previous.is_some_and(|p| p.stream_removed_by(o));
        if let Some(p) = previous.filter(|p| !rewound && o.last_delivered > p.last_delivered) {
            self.advanced(&p, o, range, &mut counted);
        }
        self.removed_before = removed_now;
        self.counters(previous.filter(|_| !rewound).as_ref(), o, &mut counted);
        if counted != Lost::default() {
            let lost = self.lost.get_or_insert_with(Lost::default);
            lost.trimmed += counted.trimmed;
            lost.deleted += counted.deleted;
            self.last_loss_at_ms = o.at_ms.or(self.last_loss_at_ms);
        }
    }

    /// The group advanced from `p` to `o`: a loss in the range it passed
    /// over, proven by the count of survivors, or an unproven interval.
    fn advanced(
        &mut self,
        p: &Seen,
        o: &Observation,
        range: Option<RangeCount>,
        counted: &mut Lost,
    ) {
        if !p.removal_in_range(o) {
            self.last_advance = Some(Advance::Clean);
            return;
        }
        let routine = self.last_advance != Some(Advance::Clean) || self.removed_before;
        self.last_advance = Some(Advance::Removal);
        let (Some(read_before), Some(read_now)) = (p.entries_read, o.entries_read) else {
            self.unproven.no_entries_read += 1;
            return;
        };
        if routine {
            self.unproven.routine_removal += 1;
            return;
        }
        let Some(RangeCount::Survivors {
            present,
            delivered_gone,
        }) = range
        else {
            self.unproven.not_counted += 1;
            return;
        };
        let passed_over = read_now.saturating_sub(read_before);
        // Unread entries gone that the last poll's counters still showed
        // (counted then, or part of the baseline) and that the group's
        // advance now covers: not lost a second time.
        let absorbed = match (p.unread_gone, o.unread_gone) {
            (Some(before), Some(now)) => before.saturating_sub(now),
            (Some(before), None) => before,
            (None, _) => 0,
        };
        let lost = passed_over
            .saturating_sub(present)
            .saturating_sub(delivered_gone)
            .saturating_sub(absorbed);
        if lost > 0 {
            counted.add(p.cause(o), lost);
        }
    }

    /// Every increase of the unread entries gone that Redis's counters show
    /// (exact figures only), against the baseline.
    fn counters(&mut self, previous: Option<&Seen>, o: &Observation, counted: &mut Lost) {
        let Some(gone) = o.unread_gone else {
            return;
        };
        let now = Figure::of(gone, o);
        if let Some(before) = self.baseline.filter(|b| gone < b.gone) {
            if before.explains_fall(gone, o) {
                // The counter took gone entries in: the figure did fall,
                // and the next loss counts from here.
                self.dipped = None;
                self.before_dip = None;
                self.baseline = Some(now);
                return;
            }
            // A figure below the baseline that the counter does not explain
            // is taken only when the next poll confirms it: a figure read
            // while the stream changed under the poll dips for that poll,
            // and its rebound must not pass for a loss.
            match self.dipped.replace(now) {
                // Seen lower twice in a row: the figure did go down, from
                // the first lower value on.
                Some(first) => {
                    self.before_dip = Some((before.gone, o.last_delivered, o.entries_read));
                    self.baseline = Some(first);
                }
                None => return,
            }
        }
        self.dipped = None;
        if let Some(baseline) = self.baseline.filter(|b| gone > b.gone) {
            // Back up to where it stood before a dip, the group not having
            // moved since: the dip was the misreading, not this.
            let floor = match self.before_dip {
                Some((before, ld, read)) if ld == o.last_delivered && read == o.entries_read => {
                    before.max(baseline.gone)
                }
                _ => baseline.gone,
            };
            // A rise beyond what was removed from the stream since is a
            // misreading too.
            let more = gone.saturating_sub(floor).min(baseline.new_removals_by(o));
            if more > 0 {
                let cause = match previous {
                    Some(p) => p.cause(o),
                    None => Cause::Deleted,
                };
                counted.add(cause, more);
            }
        }
        self.baseline = Some(now);
    }

    /// The target came back as another server (a new `run_id`): the next
    /// figures start a new baseline; the counts are kept.
    pub fn reconnected(&mut self) {
        self.baseline = None;
        self.dipped = None;
        self.before_dip = None;
        self.last = None;
        self.last_advance = None;
        self.removed_before = false;
    }

    /// Losses counted, once a loss could be known at least once.
    pub fn lost(&self) -> Option<Lost> {
        self.lost
    }

    /// Intervals with a removal that could not be proven a loss.
    pub fn unproven(&self) -> Unproven {
        self.unproven
    }

    /// Rewinds counted.
    pub fn rewinds(&self) -> u64 {
        self.rewinds
    }

    /// True when the poll at `at_ms` counted a loss.
    pub fn lost_at(&self, at_ms: u64) -> bool {
        self.last_loss_at_ms == Some(at_ms)
    }

    /// True when a loss was counted within `hold_ms` before `now_ms`.
    pub fn recent_loss(&self, now_ms: u64, hold_ms: u64) -> bool {
        self.last_loss_at_ms
            .is_some_and(|at| now_ms.saturating_sub(at) < hold_ms)
    }
}

#[cfg(test)]
mod tests;
