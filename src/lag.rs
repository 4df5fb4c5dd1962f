//! Group lag done right (docs/lag-and-losses.md): pure arithmetic over what the stream
//! probe read, with no I/O and no clock.
//!
//! The probe asks [`Reading::sample_request`] whether it must read the first
//! undelivered entries (`XRANGE key <successor of last-delivered-id> + COUNT
//! k`), then, when the count cannot be had otherwise, [`Reading::tail_request`]
//! and [`Reading::walk`] for the milliseconds the estimator needs, and calls [`Reading::compute`] with
//! everything it has. The result says which number to export, whether it is
//! Redis's own count or ours (`lag_estimated`), the entries removed before
//! the group read them, and which entry is the oldest undelivered one (for
//! `lag_seconds`). [`Reading::trail`] is what the next poll needs to know of
//! this one.
//!
//! # Method
//! 1. **Positions that settle it**: an empty stream, a group at or past the
//!    last entry, or a group past the last generated ID (ahead of the stream:
//!    nothing will ever be delivered until IDs pass it) have lag 0. A group
//!    behind the first entry has lag = length: every retained entry is
//!    undelivered, whatever Redis says (old servers keep counting the
//!    trimmed ones).
//! 2. **Counted**: when fewer than `k` entries follow the group, the sample
//!    holds them all.
//! 3. **Redis's count where it is known to be right.** Servers with the
//!    current arithmetic (Redis 7.2.7+, 7.4.2+, 8.x) report a right lag
//!    whenever it is not nil. Old servers (7.0.x, 7.2.0–7.2.6, 7.4.0–7.4.1,
//!    Valkey, or a server whose version is unknown) keep counting entries a
//!    trim removed before the group read them: their `entries-read` misses
//!    the gap, so `lag` = entries-added − entries-read is too high by the
//!    entries lost. Their count is used only when it can be proven: nothing
//!    was ever removed from the stream (entries-added = length), or the last
//!    poll proved how many unread entries were gone (`unread_gone`) and
//!    nothing since can have changed that (no rewind, the trimming edge did
//!    not pass the group's last position, no deletion after it): then the
//!    lag is Redis's count minus that many, re-derived.
//! 4. **Estimated** otherwise (nil lag after XDEL or SETID, no lag before
//!    7.0, an old server's unproven count): see [`estimate`]. The estimate is
//!    clamped into what Redis's counters prove when it knows entries-read:
//!    at least length − min(length, entries-read) and at most
//!    min(length, entries-added − entries-read). `lag_estimated` is 1 for
//!    estimated figures and for counts that stand in for a nil lag (an
//!    unknown is never a fact); a count that checks an untrusted `lag` is Redis's figure proven
//!    or corrected, and exact (`lag_estimated` 0). With nothing sound the
//!    lag is absent, never 0.
//!
//! **Unread entries gone** (`unread_gone`) is entries-added − entries-read −
//! lag, computed only when all three are exact (else it proves nothing): the entries this
//! group will never read because a trim or a deletion removed them first.
//! Trimming is the cause when the group is behind the first entry;
//! deletions (XDEL, XDELEX, XACKDEL, DELREF trims) when it is inside the
//! window.
//!
//! The rooms: `reading` (one group as a poll read it, the lag it gives and
//! what the next poll needs of it: every lag decision), `estimate` (the
//! fallback estimator, the sample and evidence it reads), `anchors` (where
//! Redis's counters pin the stream's generated entries) and `walked` (what
//! the walks learnt, kept for the next poll).

mod anchors;
mod estimate;
mod reading;
mod walked;

pub use anchors::{remember_anchor, stream_anchors};
pub use estimate::{Anchor, Evidence, MsEnds, Split, Step, UndeliveredSample, WALK_ROUNDS, Walk};
pub use reading::{Arithmetic, LagFigure, LagMethod, Reading, Trail};
pub use walked::{WALKED_KEPT_PER_STREAM, Walked};

#[cfg(test)]
mod tests;
