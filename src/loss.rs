//! Losses and rewinds observed between stream polls: pure bookkeeping over
//! each poll's figures, with no I/O and no clock. The decision table, and
//! the server code each row rests on, is in `docs/lag-and-losses.md`.
//!
//! A loss is an entry removed (trimmed or deleted) while the group had not
//! yet read it. The [`Ledger`] of a group counts a loss in
//! [`Ledger::lost`] only when the server's own figures exclude every
//! history in which the group read the entry first; what they cannot
//! decide goes to [`Ledger::possibly_lost`], as an upper bound in entries,
//! with the reason in [`Ledger::unproven`]. A false page is worse than a
//! missed one, so every figure below is a bound that holds whatever
//! happened between two polls.
//!
//! The proofs rest on a few facts of the server (`t_stream.c`):
//!
//! - **Entries gone ahead of the group.** An entry after the group's
//!   position that no longer exists was removed before the group read it.
//!   Their number is entries-added minus the entries added up to the
//!   group's position (its *rank*, [`Bounds`] from what the poll shows)
//!   minus the undelivered entries still there. A group seen behind the
//!   trimming edge, or before a deleted entry, at any poll has lost those
//!   entries, exactly.
//! - **Entries-read that keeps gaps out** (Redis 7.0–7.4,
//!   [`ReadCounter::KeepsGaps`]): a read adds one per entry delivered, so
//!   entries removed before the group passed them never enter it, and
//!   entries-added − entries-read − lag rises by exactly the entries lost.
//!   Only a re-estimate (after a deletion ahead invalidated the counter)
//!   lowers it, so a rise is always a loss.
//! - **Entries-read re-estimated** (Redis 8, Valkey 8.1.1+,
//!   [`ReadCounter::Reestimates`]): a read from behind the first entry
//!   sets it to the rank of the entry read, the same value a group that
//!   read everything first ends with. There a removal the group passed
//!   over within one interval leaves figures that cannot tell the order:
//!   it is counted as possible, never as lost. Keyspace events make the
//!   interval short enough that the next poll sees the group behind.
//! - **A deletion past the group's position.** Max-deleted-entry-id moves
//!   only to an entry being deleted: moved since the last poll and past the
//!   group's position now, it is one entry the group never read, whatever
//!   its entries-read, once keyevents vouch that no `XGROUP SETID` set the
//!   group back in between ([`Announced::positions_kept_since`]).
//!
//! Each proof is a lower bound of the losses since an earlier poll (its
//! anchor); the counter is raised to the largest bound minus what was
//! counted since that anchor. As every bound is at most the truth since its
//! anchor, the count never exceeds the truth.
//!
//! The first figures after the exporter starts are the baseline, so a loss
//! older than the exporter is not counted again at every restart; with a
//! state file the ledgers come back from it (they are plain data, written
//! with serde), and the first figures are compared with the last poll
//! before the restart, under the same rules as after an outage. A target
//! that comes back as the same server keeps its ledgers; another server
//! (a new `run_id`) is compared with the last poll when its stream's
//! figures continue the last poll's (the same data restarted from disk, or
//! a replica promoted), and otherwise starts a new baseline
//! ([`Ledger::new_baseline`]). A group whose position
//! or entries-read moves backwards was rewound (XGROUP SETID, or recreated
//! under the same name): counted, and a new baseline.

use serde::{Deserialize, Serialize};

use crate::vocab::{GroupInfo, StreamId, StreamInfo};

/// How a server's entries-read counts entries a group never received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadCounter {
    /// Redis 7.0–7.4 and Valkey before 8.1.1: a read adds one per entry it
    /// delivers, so a gap the group skipped stays out of entries-read.
    KeepsGaps,
    /// Redis 8.0+ and Valkey 8.1.1+: a read from behind the first entry
    /// (or past a deletion) re-estimates entries-read as the rank of the
    /// entry read, gap included.
    Reestimates,
    /// Not known (no `INFO` yet, or a server of another kind): only what
    /// holds for both.
    #[default]
    Unknown,
}

impl ReadCounter {
    /// The counter of a server, from `INFO server` (`redis` or `valkey`
    /// and the server's own version).
    pub fn of(server: &str, version: &str) -> ReadCounter {
        let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
        let (major, minor, patch) = (
            parts.next().flatten(),
            parts.next().flatten(),
            parts.next().flatten(),
        );
        let Some(major) = major else {
            return ReadCounter::Unknown;
        };
        let at_least =
            |m: u64, n: u64, p: u64| (major, minor.unwrap_or(0), patch.unwrap_or(0)) >= (m, n, p);
        match server {
            "redis" if at_least(8, 0, 0) => ReadCounter::Reestimates,
            "redis" if major == 7 => ReadCounter::KeepsGaps,
            "valkey" if at_least(8, 1, 1) => ReadCounter::Reestimates,
            "valkey" if major >= 7 => ReadCounter::KeepsGaps,
            _ => ReadCounter::Unknown,
        }
    }
}

/// Entries by the cause of their removal, as far as the figures prove it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByCause {
    /// Removed by trimming (`XTRIM`, `XADD … MAXLEN|MINID`) while the group
    /// had not read them (a trim that empties the stream is a trim): no
    /// deletion can explain their removal.
    pub trimmed: u64,
    /// Removed by `XDEL`, `XDELEX` or `XACKDEL` while the group had not
    /// read them: a deletion reached past the group's position, and no
    /// trim is needed to explain their removal.
    pub deleted: u64,
    /// Removed while the group had not read them, by a trim or by
    /// deletions: the figures cannot tell which (a deletion reached the
    /// first entries and so may a trim have). Paged as a trim.
    pub either: u64,
}

impl ByCause {
    /// The `cause` label values, in the order they are written.
    pub const CAUSES: [&'static str; 3] = ["trimmed", "deleted", "trimmed_or_deleted"];

    /// `n` trimmed.
    fn trimmed(n: u64) -> ByCause {
        ByCause {
            trimmed: n,
            ..ByCause::default()
        }
    }

    /// `n` deleted.
    fn deleted(n: u64) -> ByCause {
        ByCause {
            deleted: n,
            ..ByCause::default()
        }
    }

    /// `n` that may be either.
    fn either(n: u64) -> ByCause {
        ByCause {
            either: n,
            ..ByCause::default()
        }
    }

    /// Every cause together.
    pub fn total(&self) -> u64 {
        self.trimmed + self.deleted + self.either
    }

    /// Each cause with its `cause` label value.
    pub fn by_label(&self) -> [(&'static str, u64); 3] {
        let [t, d, e] = Self::CAUSES;
        [(t, self.trimmed), (d, self.deleted), (e, self.either)]
    }

    fn add(&mut self, other: ByCause) {
        self.trimmed += other.trimmed;
        self.deleted += other.deleted;
        self.either += other.either;
    }
}

/// Server time (ms) of the last poll that counted a loss, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossTimes {
    /// The last counted trim of unread entries.
    pub trimmed: Option<u64>,
    /// The last counted deletion of unread entries.
    pub deleted: Option<u64>,
    /// The last counted removal that may be either.
    pub either: Option<u64>,
}

impl LossTimes {
    /// Each cause with its `cause` label value.
    pub fn by_label(&self) -> [(&'static str, Option<u64>); 3] {
        let [t, d, e] = ByCause::CAUSES;
        [(t, self.trimmed), (d, self.deleted), (e, self.either)]
    }

    /// The latest of them.
    pub fn latest(&self) -> Option<u64> {
        self.trimmed.max(self.deleted).max(self.either)
    }
}

/// Poll intervals in which entries may have been lost beyond what was
/// proven, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unproven {
    /// The group read past entries removed in the same interval, and its
    /// server's figures are the same whether it read them first.
    pub order_unknown: u64,
    /// The group's entries-read was unknown at one of the two polls, so
    /// the entries removed around it could not all be placed.
    pub no_entries_read: u64,
    /// The server keeps no entries-added (Redis 6.2): a trim passed the
    /// group's position, and what it took cannot be counted.
    pub no_counters: u64,
}

impl Unproven {
    /// The reasons with their `reason` label values.
    pub fn by_reason(&self) -> [(&'static str, u64); 3] {
        [
            ("order_unknown", self.order_unknown),
            ("no_entries_read", self.no_entries_read),
            ("no_counters", self.no_counters),
        ]
    }
}

/// The most entries a poll counts in the range a group advanced over (one
/// `XRANGE … COUNT` of this many plus one); a longer range is bounded
/// without its count.
pub const RANGE_COUNT_CAP: u32 = 2_000;

/// What one `XRANGE` and one `XPENDING` found in the range a group advanced
/// over, both bounded at the position the poll read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeCount {
    /// Entries of the range that still exist, and the group's pending
    /// entries there that do not: delivered before they were removed
    /// (ghosts), so not lost.
    Survivors {
        /// Entries of the range that still exist.
        present: u64,
        /// Pending entries of the range whose bodies are gone.
        delivered_gone: u64,
    },
    /// More than [`RANGE_COUNT_CAP`], or the command failed.
    NotCounted,
}

/// A closed interval of entry counts; `hi` is `u64::MAX` when unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    /// At least this many.
    pub lo: u64,
    /// At most this many.
    pub hi: u64,
}

impl Bounds {
    /// Nothing known.
    pub const ANY: Bounds = Bounds {
        lo: 0,
        hi: u64::MAX,
    };

    /// Exactly `n`.
    pub fn exact(n: u64) -> Bounds {
        Bounds { lo: n, hi: n }
    }

    /// The value, when known exactly.
    pub fn value(&self) -> Option<u64> {
        (self.lo == self.hi).then_some(self.lo)
    }

    /// Both at once; where they disagree (a counter set from outside), the
    /// span covering both, so that a contradiction never narrows a bound.
    fn and(self, other: Bounds) -> Bounds {
        let (lo, hi) = (self.lo.max(other.lo), self.hi.min(other.hi));
        if lo <= hi {
            Bounds { lo, hi }
        } else {
            Bounds {
                lo: self.lo.min(other.lo),
                hi: self.hi.max(other.hi),
            }
        }
    }

    fn at_least(self, lo: u64) -> Bounds {
        self.and(Bounds { lo, hi: u64::MAX })
    }

    fn at_most(self, hi: u64) -> Bounds {
        self.and(Bounds { lo: 0, hi })
    }
}

/// What the ledger reads in a stream's figures (`XINFO STREAM`) at one
/// poll, against an earlier one.
trait StreamHistory {
    /// True when no deletion lies at or after the first entry: every entry
    /// from the first on that was ever added is still there, except entries
    /// an `ACKED` trim removed after every group had read them.
    fn no_deletion_past_first(&self) -> bool;
    /// True when a trim reached past `id`: the first entry lies beyond its
    /// successor, or the stream was emptied after generating past it.
    fn trimmed_past(&self, id: StreamId) -> bool;
    /// True when a trim since `before` can have removed entries past `id`:
    /// it reached past `id`, and the first entry moved (a trim removes the
    /// first entry first) or the stream, empty, generated more.
    fn trimmed_past_since(&self, id: StreamId, before: &StreamInfo) -> bool;
    /// True when a deletion lies past `id`.
    fn deleted_past(&self, id: StreamId) -> bool;
    /// True when max-deleted-entry-id moved since `before` and lies past
    /// `id`: it moves only to an entry being deleted, so the entry it names
    /// was deleted since then and was never delivered to a group at `id`
    /// (unless the group was set back past it in between).
    fn newly_deleted_past(&self, id: StreamId, before: &StreamInfo) -> bool;
    /// True when a deletion lies past `id` and something visibly removed
    /// entries since `before` ([`Self::removal_seen_since`]): a deletion
    /// below an older max-deleted-entry-id moves nothing of it, but the
    /// first entry when it takes the first one.
    fn deleted_past_since(&self, id: StreamId, before: &StreamInfo) -> bool;
    /// True when something visibly removed entries since `before`: the
    /// first entry moved (or the stream, empty, generated more),
    /// max-deleted-entry-id moved, or the stream got shorter with nothing
    /// added. Without any of these, entries-added rising
    /// faster than the length is `XSETID … ENTRIESADDED` or a deletion
    /// below an older max-deleted-entry-id, which the figures cannot tell
    /// apart: never a proven loss.
    fn removal_seen_since(&self, before: &StreamInfo) -> bool;
    /// True when these figures cannot follow `before` by adds and
    /// removals alone: `XSETID` (entries-added, last ID or
    /// max-deleted-entry-id set from outside), or the key deleted and made
    /// again. Rank and removal counts do not carry across.
    fn reset_since(&self, before: &StreamInfo) -> bool;
}

impl StreamHistory for StreamInfo {
    fn no_deletion_past_first(&self) -> bool {
        self.max_deleted_entry_id
            .is_some_and(|md| md.is_zero() || self.first_entry_id.is_none_or(|f| md < f))
    }

    fn trimmed_past(&self, id: StreamId) -> bool {
        match self.first_entry_id {
            Some(first) => id.successor().is_some_and(|s| first > s),
            None => self.last_generated_id > id,
        }
    }

    fn trimmed_past_since(&self, id: StreamId, before: &StreamInfo) -> bool {
        self.trimmed_past(id)
            && (self.first_entry_id != before.first_entry_id
                || (self.length == 0 && self.last_generated_id != before.last_generated_id))
    }

    fn deleted_past(&self, id: StreamId) -> bool {
        self.max_deleted_entry_id.is_some_and(|md| md > id)
    }

    fn newly_deleted_past(&self, id: StreamId, before: &StreamInfo) -> bool {
        self.max_deleted_entry_id != before.max_deleted_entry_id && self.deleted_past(id)
    }

    fn deleted_past_since(&self, id: StreamId, before: &StreamInfo) -> bool {
        self.deleted_past(id) && self.removal_seen_since(before)
    }

    fn removal_seen_since(&self, before: &StreamInfo) -> bool {
        self.first_entry_id != before.first_entry_id
            || (self.length == 0 && self.last_generated_id != before.last_generated_id)
            || self.max_deleted_entry_id != before.max_deleted_entry_id
            // Nothing added (no XADD: the last ID stands; no XSETID: the
            // count stands) and fewer entries: only a removal shortens it.
            || (self.entries_added.is_some()
                && self.entries_added == before.entries_added
                && self.last_generated_id == before.last_generated_id
                && self.length < before.length)
    }

    fn reset_since(&self, before: &StreamInfo) -> bool {
        let (Some(added), Some(added_before)) = (self.entries_added, before.entries_added) else {
            return self.last_generated_id < before.last_generated_id;
        };
        let removed_more = self.removed() > before.removed();
        added < added_before
            || self.last_generated_id < before.last_generated_id
            // Every XADD moves the last ID and adds one; XSETID moves either alone.
            || (added > added_before) != (self.last_generated_id > before.last_generated_id)
            // A deletion removes what it records.
            || (self.max_deleted_entry_id != before.max_deleted_entry_id && !removed_more)
            // Removed more with neither a trim (the first entry unmoved)
            // nor a deletion (max-deleted-entry-id unmoved, and below the
            // first entry, so no entry a deletion could take without
            // moving it): entries-added was set from outside (`XSETID …
            // ENTRIESADDED` beside ordinary adds).
            || (removed_more
                && !self.removal_seen_since(before)
                && before.no_deletion_past_first()
                && self.no_deletion_past_first())
    }
}

/// A point in a node's keyevents (see the backend's `removals`): the subscribed
/// connection delivering them and the removal events it had recorded.
/// Marks live in memory only: a restored ledger has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventMark {
    /// The subscribed connection, numbered within the process.
    pub connection: u64,
    /// Removal events recorded on the node so far.
    pub seq: u64,
}

/// Which removals keyevents announced in a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removals {
    /// `xtrim` only: no deletion happened.
    Trims,
    /// `xdel` only: no trim happened.
    Deletions,
    /// Both.
    Both,
}

/// What a node's keyevents announced of one stream, as of a poll: the
/// evidence that names the cause where the figures leave it open (a trim up
/// to an entry and a deletion of that entry, or deletions of every entry
/// before it). Read over the window from an earlier poll's mark with
/// [`Announced::since`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announced {
    /// The mark taken before this poll read the stream.
    pub read_at: EventMark,
    /// A barrier after the read closed the window: every removal of a
    /// command run before the read is recorded.
    pub closed: bool,
    /// Removals recorded before this are not all known.
    pub complete_from: u64,
    /// The number of the stream's last `xtrim`, when one is recorded.
    pub last_trim: Option<u64>,
    /// The number of its last `xdel` (`XDEL`, `XDELEX`, `XACKDEL`).
    pub last_deletion: Option<u64>,
    /// The number of its last event that set it or one of its groups from
    /// outside ([`sets_from_outside`]).
    pub last_set: Option<u64>,
}

impl Announced {
    /// The removals announced between the read marked `earlier` and this
    /// one: `None` unless the window is closed, on one connection and
    /// complete, and something was announced in it. Nothing announced
    /// proves nothing: the server may not publish (its
    /// `notify-keyspace-events`); an `xdel` or `xtrim` proves it does, and
    /// so that the other kind, had it happened, would be here too.
    pub fn since(&self, earlier: EventMark) -> Option<Removals> {
        if !self.vouches(earlier) {
            return None;
        }
        let trims = self.last_trim.is_some_and(|n| n > earlier.seq);
        let deletions = self.last_deletion.is_some_and(|n| n > earlier.seq);
        match (trims, deletions) {
            (true, true) => Some(Removals::Both),
            (true, false) => Some(Removals::Trims),
            (false, true) => Some(Removals::Deletions),
            (false, false) => None,
        }
    }

    /// True when the window from the read marked `earlier` vouches that
    /// nothing set the stream or its groups from outside: closed, on one
    /// connection, complete, with an `xdel` in it (the server publishes
    /// stream events, so an `xgroup-setid` would be there too) and no such
    /// event. Then a group's position did not go back and forth between
    /// the two reads: an entry past its position now was never delivered.
    pub fn positions_kept_since(&self, earlier: EventMark) -> bool {
        self.vouches(earlier)
            && self.last_deletion.is_some_and(|n| n > earlier.seq)
            && self.last_set.is_none_or(|n| n <= earlier.seq)
    }

    /// Closed by a barrier, on the connection of `earlier`, and with every
    /// event since `earlier` recorded.
    fn vouches(&self, earlier: EventMark) -> bool {
        self.closed
            && earlier.connection == self.read_at.connection
            && earlier.seq >= self.complete_from
    }
}

/// True for keyevents that set a stream's counters or a group's position
/// from outside (`XSETID`, `XGROUP SETID`, a group or the key made anew):
/// the ledgers start a new baseline across them rather than read them as
/// losses (`XSETID … ENTRIESADDED`) or reads.
pub fn sets_from_outside(event: &str) -> bool {
    matches!(event, "xsetid" | "xgroup-setid" | "xgroup-create" | "del")
}

/// True when removals since `before` leave to the keyevents what the
/// figures cannot decide; only then does a poll ask them to close their
/// window (see [`Announced`]):
/// - the cause of a loss: the first entry moved (or the stream, emptied,
///   generated more) and a deletion lies at or after the old first entry,
///   so a trim up to the new first entry and deletions read alike;
/// - a deletion past a group's position (`groups`, as read now):
///   max-deleted-entry-id moved past it, which proves one entry lost to it
///   once the window shows that nothing set the group back meanwhile.
pub fn events_may_decide(now: &StreamInfo, before: &StreamInfo, groups: &[GroupInfo]) -> bool {
    let head_moved = now.first_entry_id != before.first_entry_id
        || (now.length == 0 && now.last_generated_id != before.last_generated_id);
    let cause_open = head_moved
        && now.max_deleted_entry_id.is_some_and(|md| {
            !md.is_zero() && before.first_entry_id.is_none_or(|first| md >= first)
        });
    let deleted_ahead = groups
        .iter()
        .any(|g| now.newly_deleted_past(g.last_delivered_id, before));
    cause_open || deleted_ahead
}

/// What one stream poll saw of a group, all of one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation<'a> {
    /// Server time of the poll, in ms, when known.
    pub at_ms: Option<u64>,
    /// The stream.
    pub stream: &'a StreamInfo,
    /// The group (its position and entries-read; its `lag` is not read:
    /// `undelivered` is what the poll proved of it).
    pub group: &'a GroupInfo,
    /// Undelivered entries still in the stream, at the moment of the other
    /// figures: exact where counted or known right, else bounds.
    pub undelivered: Bounds,
    /// How the server's entries-read counts.
    pub counter: ReadCounter,
    /// The server said the group or the stream was set from outside since
    /// the last poll (keyspace events `xgroup-setid`, `xgroup-create`,
    /// `xsetid`): a new baseline.
    pub set_from_outside: bool,
    /// What keyevents announced of the stream's removals, when a
    /// subscription delivers them.
    pub announced: Option<Announced>,
}

impl<'a> Observation<'a> {
    /// What the loss ledger needs of one group's poll; `undelivered` is what
    /// the poll proved of its lag (the stream probe bounds it from its counts).
    pub fn of(
        stream: &'a StreamInfo,
        group: &'a GroupInfo,
        at_ms: Option<u64>,
        undelivered: Bounds,
        counter: ReadCounter,
    ) -> Observation<'a> {
        Observation {
            at_ms,
            stream,
            group,
            undelivered,
            counter,
            set_from_outside: false,
            announced: None,
        }
    }

    /// The rank of the group's position (entries ever added up to and
    /// including it) that this poll's figures allow, given what was known
    /// of it before; and whether its entries-read is in doubt (it
    /// contradicted the stream's figures since the last baseline:
    /// `ENTRIESREAD` or `ENTRIESADDED` set from outside), then not used.
    fn rank(&self, known: Bounds, doubt: bool) -> (Bounds, bool) {
        let facts = self.rank_from_positions(known);
        let Some(read) = self.group.entries_read else {
            return (facts, doubt);
        };
        if doubt {
            // Back in step once the positions pin the rank to it (a read
            // re-estimated it, or the group is at the last ID).
            return match facts.value() {
                Some(exact) if exact == read => (facts, false),
                _ => (facts, true),
            };
        }
        let counted = match self.counter {
            ReadCounter::Reestimates => Bounds::exact(read),
            // Entries-read counts what was delivered: at most the rank.
            _ => Bounds {
                lo: read,
                hi: u64::MAX,
            },
        };
        let (lo, hi) = (facts.lo.max(counted.lo), facts.hi.min(counted.hi));
        if lo <= hi {
            (Bounds { lo, hi }, false)
        } else {
            (facts, true)
        }
    }

    /// The rank as the positions and the lag show it, without entries-read.
    fn rank_from_positions(&self, known: Bounds) -> Bounds {
        let s = self.stream;
        let ld = self.group.last_delivered_id;
        let Some(added) = s.entries_added else {
            return Bounds::ANY;
        };
        if ld.is_zero() {
            return Bounds::exact(0);
        }
        if ld >= s.last_generated_id {
            return Bounds::exact(added);
        }
        let rank = known.at_most(added.saturating_sub(self.undelivered.lo));
        if s.length == 0 {
            return rank.at_most(added);
        }
        if !s.no_deletion_past_first() {
            return rank;
        }
        match s.first_entry_id {
            // Every entry from the first on is there or was read by every
            // group before an ACKED trim took it: the rank is entries-added
            // minus the undelivered entries.
            Some(first) if ld >= first => rank.and(Bounds {
                lo: added.saturating_sub(self.undelivered.hi),
                hi: added.saturating_sub(self.undelivered.lo),
            }),
            // Everything before the first entry was removed.
            _ => rank.at_most(added.saturating_sub(s.length)),
        }
    }

    /// Entries after the group's position that are gone: removed before it
    /// read them. Zero when nothing after it can have been removed.
    fn gone_ahead(&self, rank: Bounds) -> Bounds {
        let s = self.stream;
        let ld = self.group.last_delivered_id;
        if !s.trimmed_past(ld) && !s.deleted_past(ld) {
            return Bounds::exact(0);
        }
        let Some(added) = s.entries_added else {
            return Bounds::ANY;
        };
        Bounds {
            lo: added
                .saturating_sub(rank.hi)
                .saturating_sub(self.undelivered.hi),
            hi: added
                .saturating_sub(rank.lo)
                .saturating_sub(self.undelivered.lo),
        }
    }

    /// The counters' figure entries-added − entries-read − lag, when all
    /// three are exact: on [`ReadCounter::KeepsGaps`] the entries lost since
    /// entries-read was last set, on [`ReadCounter::Reestimates`] those
    /// gone ahead.
    fn counters(&self) -> Option<u64> {
        self.stream
            .unread_gone(self.group.entries_read?, self.undelivered.value()?)
    }
}

/// What the ledger keeps of the last poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    stream: StreamInfo,
    last_delivered: StreamId,
    entries_read: Option<u64>,
    undelivered: Bounds,
    rank: Bounds,
    /// Entries-read contradicted the figures since the baseline.
    doubt: bool,
    gone_ahead: Bounds,
    /// The counters' figure, when exact, and how entries-read counts.
    counters: Option<u64>,
    counter: ReadCounter,
    /// The keyevents' mark before this read (not kept in a state file:
    /// marks are of one process).
    #[serde(skip)]
    read_at: Option<EventMark>,
}

impl Seen {
    /// True when `o` finds the group moved backwards since.
    fn rewound_by(&self, o: &Observation) -> bool {
        o.group.last_delivered_id < self.last_delivered
            || matches!((o.group.entries_read, self.entries_read), (Some(now), Some(then)) if now < then)
    }

    /// True when the group's position is beyond the last ID generated.
    fn ahead_of_stream(&self) -> bool {
        self.last_delivered > self.stream.last_generated_id
    }

    /// The highest ID an entry gone ahead of the group can have had.
    fn gone_ahead_ceiling(&self) -> StreamId {
        let s = &self.stream;
        let edge = s.first_entry_id.unwrap_or(s.last_generated_id);
        s.max_deleted_entry_id.map_or(edge, |md| edge.max(md))
    }
}

/// The counters' figure at the last poll that had it, and what the ledger
/// had counted then.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct CountersAnchor {
    figure: u64,
    counted: u64,
    removed: u64,
    last_delivered: StreamId,
    stream: StreamInfo,
}

/// What one interval between two polls proved, and what it could not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Interval {
    /// Entries proven lost (a lower bound).
    proven: u64,
    /// Entries that may have been lost in it (an upper bound), when known.
    at_most: Option<u64>,
}

/// The loss and rewind record of one group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// The last poll of the current baseline.
    last: Option<Seen>,
    /// The last poll whose counters' figure was exact.
    anchor: Option<CountersAnchor>,
    /// Losses proven; `None` until the server showed entries-added.
    lost: Option<ByCause>,
    /// Losses possible beyond those proven; `None` as `lost`.
    possibly_lost: Option<ByCause>,
    /// Intervals with a possible loss, by reason.
    unproven: Unproven,
    /// Rewinds counted.
    rewinds: u64,
    /// Server time of the last counted rewind.
    rewound_at_ms: Option<u64>,
    /// Server time of the last counted loss.
    last_loss_at_ms: Option<u64>,
    /// The same, by cause.
    loss_times: LossTimes,
    /// The `run_id` of the server the figures were read from.
    server: Option<std::sync::Arc<str>>,
    /// The server changed (another `run_id`) since the last poll: the next
    /// figures are compared with it only if they continue it.
    server_changed: bool,
}

impl Ledger {
    /// The figures come from the server `run_id` (when known): another
    /// server than the last poll's (a restart, a failover) starts a new
    /// baseline; the counts are kept.
    pub fn follow_server(&mut self, run_id: Option<&std::sync::Arc<str>>) {
        let Some(run_id) = run_id else {
            return;
        };
        if self
            .server
            .as_ref()
            .is_some_and(|before| **before != **run_id)
        {
            self.server_changed = true;
        }
        if self.server.as_deref() != Some(&**run_id) {
            self.server = Some(run_id.clone());
        }
    }

    /// The range whose survivors the probe should count (`XRANGE key <from>
    /// <to> COUNT RANGE_COUNT_CAP + 1` and the group's `XPENDING` over the
    /// same range) to bound a possible loss: the group advanced past a
    /// deletion, where the figures alone cannot say how many of the entries
    /// it passed are gone. `None` when this poll needs no count.
    pub fn range_to_count(&self, o: &Observation) -> Option<(StreamId, StreamId)> {
        let last = self.last.as_ref()?;
        let wanted = !self.starts_over(last, o)
            && o.group.last_delivered_id > last.last_delivered
            && o.stream.deleted_past(last.last_delivered)
            && o.stream.removed() > last.stream.removed();
        wanted.then(|| Some((last.last_delivered.successor()?, o.group.last_delivered_id)))?
    }

    /// Records one poll; `range` is what the probe counted of
    /// [`Ledger::range_to_count`], when it asked for a count.
    pub fn observe(&mut self, o: &Observation, range: Option<RangeCount>) {
        // Another server: the same data (restarted from its own RDB or AOF,
        // or a replica promoted with the same history) continues the last
        // poll's figures, and what happened across the restart is proven
        // as any interval; other data (`FLUSHALL`, another server behind the
        // address) does not, and starts a new baseline.
        if std::mem::take(&mut self.server_changed)
            && self
                .last
                .is_some_and(|p| o.stream.reset_since(&p.stream) || p.rewound_by(o))
        {
            self.new_baseline();
        }
        let previous = self.last.take();
        // The rank of an ID stays as it was while entries are added after
        // it; a group ahead of its stream may see entries added below its
        // position.
        let comparable = previous.filter(|p| !self.starts_over(p, o));
        let known = comparable
            .filter(|p| p.last_delivered == o.group.last_delivered_id && !p.ahead_of_stream())
            .map_or(Bounds::ANY, |p| p.rank);
        // Counters set from outside (`XSETID`, an event that says so) leave
        // entries-read out of step with entries-added: not used until the
        // positions show it back in step.
        let set_outside =
            o.set_from_outside || previous.is_some_and(|p| o.stream.reset_since(&p.stream));
        let doubt = set_outside || comparable.is_some_and(|p| p.doubt);
        let (mut rank, doubt) = o.rank(known, doubt);
        if let Some(p) = previous.filter(|p| !self.starts_over(p, o))
            && o.group.last_delivered_id > p.last_delivered
        {
            // The entry at the new position was delivered: one more at least.
            rank = rank.at_least(p.rank.lo.saturating_add(u64::from(!p.ahead_of_stream())));
        }
        let seen = Seen {
            stream: *o.stream,
            last_delivered: o.group.last_delivered_id,
            entries_read: o.group.entries_read,
            undelivered: o.undelivered,
            rank,
            doubt,
            gone_ahead: o.gone_ahead(rank),
            counters: o.counters(),
            counter: o.counter,
            // A read that stood for a quiet stream has no mark of its own:
            // the earlier one starts a longer window, which can only hold
            // more events (the more severe reading).
            read_at: o
                .announced
                .map(|a| a.read_at)
                .or(previous.and_then(|p| p.read_at)),
        };
        if o.stream.entries_added.is_some() {
            self.lost.get_or_insert_with(ByCause::default);
            self.possibly_lost.get_or_insert_with(ByCause::default);
        }
        match previous {
            Some(p) if p.rewound_by(o) => {
                self.rewinds += 1;
                self.rewound_at_ms = o.at_ms.or(self.rewound_at_ms);
                self.anchor = None;
            }
            Some(p) if self.starts_over(&p, o) => self.anchor = None,
            Some(p) => self.interval_ended(&p, &seen, o, range),
            None => {}
        }
        self.last = Some(seen);
        self.move_anchor(o);
    }

    /// True when `o` cannot be compared with `p`: the stream or the group
    /// was set from outside, or the stream was made anew.
    fn starts_over(&self, p: &Seen, o: &Observation) -> bool {
        // Entries-read changes only with the position it counts to, unless
        // the group was set from outside (a SETID to where it stood).
        let counter_set =
            o.group.last_delivered_id == p.last_delivered && o.group.entries_read != p.entries_read;
        // A group that did not move keeps its rank; entries-added and its
        // backlog that put it elsewhere were set from outside (`XSETID …
        // ENTRIESADDED` beside a removal, which `reset_since` cannot see).
        let rank_moved = o.group.last_delivered_id == p.last_delivered
            && !p.ahead_of_stream()
            && disjoint(p.rank, o.rank_from_positions(Bounds::ANY));
        o.set_from_outside
            || counter_set
            || rank_moved
            || p.rewound_by(o)
            || o.stream.reset_since(&p.stream)
    }

    /// Counts what the interval from `p` to the poll `o` proved and what it
    /// leaves possible.
    fn interval_ended(&mut self, p: &Seen, now: &Seen, o: &Observation, range: Option<RangeCount>) {
        let s = o.stream;
        let Some(removed) = s.removed() else {
            // Redis 6.2: no entries-added, so no count; a trim that passed
            // the group's position is all that can be said.
            if s.trimmed_past_since(p.last_delivered, &p.stream) {
                self.unproven.no_counters += 1;
            }
            return;
        };
        let removed_since = removed.saturating_sub(p.stream.removed().unwrap_or(removed));
        // Only what visibly removed entries past the position proves: a
        // trim that moved the first entry, a deletion past it with the
        // first entry or max-deleted-entry-id moved. Without either,
        // entries-added set from outside (`XSETID … ENTRIESADDED`) and a
        // deletion below an older max-deleted-entry-id read alike: at most
        // possible.
        let trimmed = s.trimmed_past_since(p.last_delivered, &p.stream);
        let deleted = s.deleted_past_since(p.last_delivered, &p.stream);
        let unseen = !trimmed && !deleted && s.deleted_past(p.last_delivered);
        let counted_before = self.lost.map_or(0, |l| l.total());
        let mut interval = Interval::default();
        let mut ahead = 0;
        if (trimmed || deleted || unseen) && removed_since > 0 {
            if !unseen {
                ahead = gone_ahead_bound(p, now, o).min(removed_since);
            }
            interval.at_most = Some(at_most(p, now, o, range).min(removed_since).max(ahead));
        }
        let announced = p
            .read_at
            .and_then(|at| o.announced.and_then(|a| a.since(at)));
        let split = |n: u64| split_by_cause(n, trimmed, deleted || unseen, announced, p, o);
        // The counters' rise since the last poll whose figure was exact
        // proves the losses since then, not only this interval's (a poll
        // between whose count was not of its moment left them possible),
        // with the causes the figures since then show.
        let counters = self.counters_bound(o, removed, counted_before);
        let by_cause = match self.anchor {
            Some(anchor) if counters > ahead => {
                interval.proven = counters;
                let since_last_poll =
                    anchor.stream == p.stream && anchor.last_delivered == p.last_delivered;
                let since = |id| {
                    (
                        s.trimmed_past_since(id, &anchor.stream),
                        s.deleted_past_since(id, &anchor.stream),
                    )
                };
                match since(anchor.last_delivered) {
                    _ if since_last_poll => split(counters),
                    (true, false) => ByCause::trimmed(counters),
                    (false, true) => ByCause::deleted(counters),
                    _ => ByCause::either(counters),
                }
            }
            _ => {
                interval.proven = ahead;
                split(ahead)
            }
        };
        if interval.proven > 0 {
            self.lost.get_or_insert_with(ByCause::default).add(by_cause);
            self.last_loss_at_ms = o.at_ms.or(self.last_loss_at_ms);
            let times = &mut self.loss_times;
            for (n, at) in [
                (by_cause.trimmed, &mut times.trimmed),
                (by_cause.deleted, &mut times.deleted),
                (by_cause.either, &mut times.either),
            ] {
                if n > 0 {
                    *at = o.at_ms.or(*at);
                }
            }
        }
        let possible = interval
            .at_most
            .map_or(0, |hi| hi.saturating_sub(interval.proven));
        if possible > 0 {
            self.possibly_lost
                .get_or_insert_with(ByCause::default)
                .add(split(possible));
            if p.entries_read.is_some() && o.group.entries_read.is_some() {
                self.unproven.order_unknown += 1;
            } else {
                self.unproven.no_entries_read += 1;
            }
        }
    }

    /// The rise of the counters' figure since the anchor, as far as it is
    /// not counted yet: on every server a lower bound of the losses since
    /// (a rise is a gap skipped or a loss ahead; only a re-estimate lowers
    /// it), never more than the entries removed since.
    fn counters_bound(&self, o: &Observation, removed: u64, counted_before: u64) -> u64 {
        let (Some(anchor), Some(figure)) = (self.anchor, o.counters()) else {
            return 0;
        };
        let s = o.stream;
        // Something after the anchor's position must have been removed,
        // visibly (see `interval_ended`).
        if !s.trimmed_past_since(anchor.last_delivered, &anchor.stream)
            && !s.deleted_past_since(anchor.last_delivered, &anchor.stream)
        {
            return 0;
        }
        let rise = figure
            .saturating_sub(anchor.figure)
            .min(removed.saturating_sub(anchor.removed));
        rise.saturating_sub(counted_before.saturating_sub(anchor.counted))
    }

    /// Keeps the poll as the counters' anchor when its figure is exact.
    fn move_anchor(&mut self, o: &Observation) {
        if let (Some(figure), Some(removed)) = (o.counters(), o.stream.removed()) {
            self.anchor = Some(CountersAnchor {
                figure,
                counted: self.lost.map_or(0, |l| l.total()),
                removed,
                last_delivered: o.group.last_delivered_id,
                stream: *o.stream,
            });
        }
    }

    /// The target came back as another server (a new `run_id`): the next
    /// figures start a new baseline; the counts are kept.
    pub fn new_baseline(&mut self) {
        self.last = None;
        self.anchor = None;
    }

    /// Entries the last poll proved gone unread, lost to the group unless
    /// it is set back: those after its position, and, on a server whose
    /// entries-read keeps gaps out, while the group is behind the first
    /// entry, the gaps it skipped too (entries-added − entries-read − lag,
    /// counted since entries-read was last set).
    pub fn gone_unread(&self) -> u64 {
        let Some(last) = self.last else {
            return 0;
        };
        let behind = last
            .stream
            .first_entry_id
            .is_some_and(|f| last.last_delivered < f);
        let skipped = match last.counters {
            Some(figure) if behind && last.counter == ReadCounter::KeepsGaps && !last.doubt => {
                figure
            }
            _ => 0,
        };
        last.gone_ahead.lo.max(skipped)
    }

    /// Losses proven, once the server showed entries-added.
    pub fn lost(&self) -> Option<ByCause> {
        self.lost
    }

    /// Losses possible beyond those proven (an upper bound), once the
    /// server showed entries-added.
    pub fn possibly_lost(&self) -> Option<ByCause> {
        self.possibly_lost
    }

    /// Intervals with a possible loss, by reason.
    pub fn unproven(&self) -> Unproven {
        self.unproven
    }

    /// Rewinds counted.
    pub fn rewinds(&self) -> u64 {
        self.rewinds
    }

    /// When the last rewind was counted (server time), for the same reason
    /// as [`Self::loss_times`].
    pub fn rewound_at(&self) -> Option<u64> {
        self.rewound_at_ms
    }

    /// When the last loss of each cause was counted (server time): what
    /// alerts on a loss read, since a counter's first scraped sample cannot
    /// show a rise (a loss counted before Prometheus first saw the group).
    pub fn loss_times(&self) -> LossTimes {
        self.loss_times
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

/// True when no value lies in both.
fn disjoint(a: Bounds, b: Bounds) -> bool {
    a.lo.max(b.lo) > a.hi.min(b.hi)
}

/// The entries gone ahead of the group now that were not gone ahead of it
/// at the last poll: those the last poll saw ahead are all behind the group
/// now when it passed the highest of them, else at most as many as it saw.
fn gone_ahead_bound(p: &Seen, now: &Seen, o: &Observation) -> u64 {
    let still_ahead = if o.group.last_delivered_id >= p.gone_ahead_ceiling() {
        0
    } else {
        p.gone_ahead.hi
    };
    let fresh = now.gone_ahead.lo.saturating_sub(still_ahead);
    // A group that did not move passed nothing: every entry removed after
    // its position is ahead of it, and the change of the undelivered
    // entries against the entries added counts them whatever its rank.
    let unmoved = if o.group.last_delivered_id == p.last_delivered && !p.ahead_of_stream() {
        unmoved_removals(p, o).lo
    } else {
        0
    };
    // An entry deleted in the interval past the group's position now,
    // whatever its rank (a group without entries-read included), once
    // keyevents exclude an `XGROUP SETID` that set the group back past it
    // and let it read forward again in between.
    let positions_kept = p
        .read_at
        .zip(o.announced)
        .is_some_and(|(at, a)| a.positions_kept_since(at));
    let deleted_ahead = u64::from(
        positions_kept
            && o.stream
                .newly_deleted_past(o.group.last_delivered_id, &p.stream),
    );
    fresh.max(unmoved).max(deleted_ahead)
}

/// Entries removed after the position of a group that did not move:
/// entries added minus the growth of the undelivered entries; anything when
/// either poll lacked entries-added (unknown is not 0).
fn unmoved_removals(p: &Seen, o: &Observation) -> Bounds {
    let (Some(now), Some(before)) = (o.stream.entries_added, p.stream.entries_added) else {
        return Bounds::ANY;
    };
    let added = now.saturating_sub(before);
    Bounds {
        lo: (added + p.undelivered.lo).saturating_sub(o.undelivered.hi),
        hi: (added + p.undelivered.hi.min(u64::MAX - added)).saturating_sub(o.undelivered.lo),
    }
}

/// The most entries the interval from `p` to `o` can have lost: the
/// entries removed after the group's previous position, less those
/// already gone then and those the group had been delivered (ghosts).
fn at_most(p: &Seen, now: &Seen, o: &Observation, range: Option<RangeCount>) -> u64 {
    let s = o.stream;
    let mut bound = u64::MAX;
    if o.group.last_delivered_id == p.last_delivered && !p.ahead_of_stream() {
        bound = bound.min(unmoved_removals(p, o).hi);
    }
    let ghosts = match range {
        Some(RangeCount::Survivors { delivered_gone, .. }) => delivered_gone,
        _ => 0,
    };
    if let Some(removed) = s.removed()
        && s.trimmed_past_since(p.last_delivered, &p.stream)
    {
        // Nothing up to the old position is left: every entry removed
        // beyond it is removed in all, less the entries up to it.
        let beyond = removed
            .saturating_sub(p.rank.lo)
            .saturating_sub(p.gone_ahead.lo)
            .saturating_sub(ghosts);
        bound = bound.min(beyond);
    }
    if let Some(RangeCount::Survivors { present, .. }) = range {
        // Gone in the range the group passed over, and gone ahead of it now,
        // less what was gone ahead of it before.
        let passed = now.rank.hi.saturating_sub(p.rank.lo);
        let gone = passed
            .saturating_sub(present)
            .saturating_sub(ghosts)
            .saturating_add(now.gone_ahead.hi)
            .saturating_sub(p.gone_ahead.lo);
        bound = bound.min(gone);
    }
    if let (ReadCounter::KeepsGaps, Some(before), Some(figure)) =
        (o.counter, p.counters, o.counters())
    {
        // Entries-read valid at both polls and no deletion the group could
        // have read past: nothing re-estimated it, so the counters' rise is
        // every loss of the interval.
        let no_reestimate = s.max_deleted_entry_id.is_some_and(|md| {
            md <= p.last_delivered || p.stream.first_entry_id.is_some_and(|f| md < f)
        });
        if no_reestimate {
            bound = bound.min(figure.saturating_sub(before));
        }
    }
    bound
}

/// Splits `n` entries by cause: a deletion when only a deletion reached
/// past the group's previous position, a trim when only a trim did, and
/// when both did, trimmed or deleted up to the entries the trim can have
/// taken. Deletions alone may explain a head that moved (a faster group's
/// worker deleting what it read), but a trim up to there and a deletion of
/// the last entry before the first one leave the same figures: no proof
/// from them, so keyevents decide (`announced` over the interval) where
/// they say only one kind happened. Where they contradict the figures (a
/// subscriber that missed events), the figures stand.
fn split_by_cause(
    n: u64,
    trimmed: bool,
    deleted: bool,
    announced: Option<Removals>,
    p: &Seen,
    o: &Observation,
) -> ByCause {
    match (trimmed, deleted) {
        (true, true) if announced == Some(Removals::Deletions) => ByCause::deleted(n),
        (true, true) if announced == Some(Removals::Trims) => ByCause::trimmed(n),
        // The first entry moved past the group's position, and deletions
        // since reached past it too.
        (true, true) => {
            // Gone before the first entry: a trim or the deletions; the
            // rest, after it, only a deletion can have removed.
            let before_first = o.stream.removed().unwrap_or(n).saturating_sub(p.rank.lo);
            let either = n.min(before_first);
            ByCause {
                deleted: n - either,
                either,
                ..ByCause::default()
            }
        }
        (false, true) => ByCause::deleted(n),
        _ => ByCause::trimmed(n),
    }
}

#[cfg(test)]
mod tests;
