//! One group as one stream poll read it, and the lag it gives
//! (docs/lag-and-losses.md): where the group stands, whether Redis's own
//! count can be trusted, what the probe must read to settle it, the figure
//! exported and what the next poll needs of this one.
//!
//! The types come first, what a [`Reading`] holds and what it gives; then
//! its methods, top down: [`Reading::compute`] and its steps, the position,
//! Redis's count where it can be trusted and the bounds its counters prove,
//! the reads the probe must make, and the trail.

use super::estimate::{self, Anchor, Evidence, TAIL_FACTOR, UndeliveredSample, Walk};
use crate::vocab::StreamId;
use crate::vocab::{GroupInfo, StreamInfo};

/// One group as one stream poll read it, with what the last poll proved.
#[derive(Clone, Copy, Debug)]
pub struct Reading<'a> {
    /// XINFO STREAM.
    pub stream: &'a StreamInfo,
    /// The group's XINFO GROUPS entry.
    pub group: &'a GroupInfo,
    /// The server's lag arithmetic.
    pub arithmetic: Arithmetic,
    /// What the previous poll proved, if there was one.
    pub previous: Option<&'a Trail>,
    /// Entries present in (previous position, position], when this poll
    /// counted them ([`Reading::advance_to_count`]).
    pub advanced_over: Option<u64>,
}

/// Which lag arithmetic a server runs: what decides whether Redis's own
/// count is taken as is or must be proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arithmetic {
    /// Redis 8.0.0 and later: `lag` is right whenever it is not nil. These
    /// releases carry the three fixes that make it so: redis#13338 (a
    /// deletion after the group's position), redis#13473 (a group behind a
    /// trim) and redis#13958 (a group that reads again after a trim passed
    /// it re-estimates entries-read; listed among 8.0.0's fixes over
    /// 8.0-RC1 in the release notes, and checked on 8.6 by the tests).
    Current,
    /// Everything else: Redis 7.0.x–7.4.x (7.2.7+ and 7.4.2+ carry the first
    /// two fixes, and no release note of theirs lists redis#13958, so their
    /// lag stays too high after a trim overtook a group that read on),
    /// the 8.0 milestones and release candidates (7.9.x), Valkey, and
    /// servers whose version is unknown: `lag` can keep counting trimmed
    /// entries, so it is trusted only where it can be proven.
    Miscounting,
}

impl Arithmetic {
    /// The arithmetic of a server, from `INFO server` (`redis` or `valkey`
    /// and the server's own version).
    pub fn of(server: &str, version: &str) -> Arithmetic {
        if server != "redis" {
            // Valkey (it reports redis_version 7.2.4) keeps the old code for
            // trimmed groups.
            return Arithmetic::Miscounting;
        }
        let major = version
            .split('.')
            .next()
            .and_then(|p| p.parse::<u64>().ok());
        match major {
            Some(8..) => Arithmetic::Current,
            _ => Arithmetic::Miscounting,
        }
    }
}

/// What one poll proved about a group, for the next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trail {
    /// The group's position.
    pub last_delivered: StreamId,
    /// Its entries-read, when Redis knew it.
    pub entries_read: Option<u64>,
    /// Unread entries gone, when proven exactly.
    pub unread_gone: Option<u64>,
    /// The first undelivered entry this poll found.
    pub first_undelivered: Option<StreamId>,
}

/// How a lag figure was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LagMethod {
    /// Redis's `lag` field, or 0 for a group with nothing after it.
    Reported,
    /// An old server's `lag` minus the unread entries it still counts,
    /// proven by earlier polls, or a `lag` that could not be trusted,
    /// replaced by a count of the stream's entries.
    Rederived,
    /// The stream length, because the group is behind the first entry.
    TrimCorrected,
    /// Counted with XRANGE (fewer than `k` undelivered entries).
    Counted,
    /// Estimated by the fallback estimator, within the counters' bounds.
    Estimated,
    /// Nothing sound was available.
    Unknown,
}

/// The lag of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct LagFigure {
    /// Undelivered entries; `None` when unknown.
    pub lag: Option<u64>,
    /// How `lag` was obtained.
    pub method: LagMethod,
    /// Entries removed before the group read them, while it is behind the
    /// first entry (`trimmed_undelivered`); `None` when unknowable.
    pub trimmed_undelivered: Option<u64>,
    /// Entries removed (trimmed or deleted) before the group read them, as
    /// Redis's counters show them now: entries-added − entries-read − lag,
    /// when all three are exact.
    pub unread_gone: Option<u64>,
    /// The oldest undelivered entry still in the stream, when known (for
    /// `lag_seconds`); `None` with `lag == Some(0)` means nothing is undelivered.
    pub first_undelivered: Option<StreamId>,
    /// The group's last-delivered-id is older than the first entry.
    pub behind_first_entry: bool,
    /// The group's last-delivered-id is beyond the last generated ID (SETID
    /// into the future: entries added below it will never be delivered).
    pub ahead_of_stream: bool,
}

impl LagFigure {
    /// True when `lag` is the exporter's own figure rather than Redis's
    /// count or a position that settles it.
    pub fn estimated(&self) -> bool {
        !matches!(
            self.method,
            LagMethod::Reported | LagMethod::Rederived | LagMethod::TrimCorrected
        )
    }

    /// True when `lag` is exact (counted, reported where right, or settled).
    pub fn exact(&self) -> bool {
        self.lag.is_some() && !matches!(self.method, LagMethod::Estimated | LagMethod::Unknown)
    }
}

/// Where the group stands in its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    /// The stream holds no entry.
    Empty,
    /// Beyond the last generated ID.
    Ahead,
    /// At or past the last entry.
    CaughtUp,
    /// Before the first entry (a trim passed the group).
    Behind(StreamId),
    /// Between the first and the last entry.
    Inside,
}

impl Reading<'_> {
    /// Computes the lag from XINFO, the sample [`Self::sample_request`]
    /// asked for, and the estimator's evidence.
    pub fn compute(
        &self,
        sample: Option<&UndeliveredSample>,
        evidence: &Evidence<'_>,
    ) -> LagFigure {
        let settled = |lag: u64, method, trimmed, gone, behind| LagFigure {
            lag: Some(lag),
            method,
            trimmed_undelivered: trimmed,
            unread_gone: gone,
            first_undelivered: None,
            behind_first_entry: behind,
            ahead_of_stream: false,
        };
        let reported_or_counted = if self.group.lag.is_some() {
            LagMethod::Reported
        } else {
            LagMethod::Counted
        };
        match self.position() {
            Position::Ahead => LagFigure {
                ahead_of_stream: true,
                ..settled(0, reported_or_counted, Some(0), None, false)
            },
            Position::Empty => {
                // Anything generated after the group's position was removed
                // before it read it.
                let gone = self.gone(0);
                settled(0, reported_or_counted, gone, gone, false)
            }
            Position::CaughtUp => settled(0, reported_or_counted, Some(0), self.gone(0), false),
            Position::Behind(first) => {
                let length = self.stream.length;
                let gone = self.gone(length);
                LagFigure {
                    first_undelivered: Some(first),
                    ..settled(length, LagMethod::TrimCorrected, gone, gone, true)
                }
            }
            Position::Inside => self.inside(sample, evidence),
        }
    }

    /// The lag of a group between the first and the last entry: Redis's
    /// count where it can be trusted, else counted in the sample, else
    /// estimated within the counters' bounds.
    fn inside(&self, sample: Option<&UndeliveredSample>, evidence: &Evidence<'_>) -> LagFigure {
        // Inside the window no undelivered entry can have been trimmed
        // (trimming removes from the head).
        let figure = |lag: Option<u64>, method, first_undelivered| LagFigure {
            lag,
            method,
            trimmed_undelivered: Some(0),
            unread_gone: None,
            first_undelivered,
            behind_first_entry: false,
            ahead_of_stream: false,
        };
        let first_undelivered = sample.and_then(|s| s.ids.first().copied());
        let proof = |s: &UndeliveredSample, lag: u64| {
            if s.changed_meanwhile {
                None
            } else {
                self.gone(lag)
            }
        };
        if let Some((lag, method)) = self.trusted_report() {
            // Redis's count, taken with the counters it came with. The
            // sample read after it (one ID, for the age) may have been
            // changed meanwhile by consumers that read and delete: it never
            // overrides a count known to be right.
            let first_undelivered = first_undelivered
                .or_else(|| self.unmoved_first_undelivered())
                .filter(|_| lag > 0);
            return LagFigure {
                unread_gone: self.gone(lag),
                ..figure(Some(lag), method, first_undelivered)
            };
        }
        if let Some(s) = sample.filter(|s| s.is_complete()) {
            // The sample holds every undelivered entry: the stream itself is
            // the truth, whatever Redis counted.
            let lag = s.ids.len() as u64;
            return LagFigure {
                unread_gone: proof(s, lag),
                ..figure(Some(lag), self.counted(lag), first_undelivered)
            };
        }
        if let Some((s, lag)) = sample.and_then(|s| Some((s, s.counted_with_tail()?))) {
            return LagFigure {
                unread_gone: proof(s, lag),
                ..figure(Some(lag), self.counted(lag), first_undelivered)
            };
        }
        let Some(sample) = sample.filter(|s| !s.ids.is_empty()) else {
            return figure(None, LagMethod::Unknown, first_undelivered);
        };
        let ld = self.group.last_delivered_id;
        let estimated = estimate::entries_after(self.stream, ld, sample, evidence);
        let lag = estimated.map(|e| {
            let k = sample.ids.len() as u64;
            let (low, high) = self
                .counter_bounds()
                .map_or((k, self.stream.length), |(l, h)| (l.max(k), h.max(k)));
            (e.round() as u64).clamp(low, high.max(low))
        });
        let method = if lag.is_some() {
            LagMethod::Estimated
        } else {
            LagMethod::Unknown
        };
        figure(lag, method, first_undelivered)
    }

    /// How a lag counted in the stream is labelled: Redis's own figure when
    /// it said the same; Redis's figure re-derived when it gave one that
    /// could not be trusted (checked against the stream, so
    /// exact); the fallback's count (`lag_estimated 1`: not Redis's) when Redis
    /// gave none.
    fn counted(&self, lag: u64) -> LagMethod {
        match self.group.lag {
            Some(reported) if reported == lag => LagMethod::Reported,
            Some(_) => LagMethod::Rederived,
            None => LagMethod::Counted,
        }
    }

    /// Where the group stands in its stream.
    fn position(&self) -> Position {
        let ld = self.group.last_delivered_id;
        if ld > self.stream.last_generated_id {
            return Position::Ahead;
        }
        if self.stream.length == 0 {
            return Position::Empty;
        }
        if let Some(first) = self.stream.first_entry_id.filter(|f| ld < *f) {
            return Position::Behind(first);
        }
        if self.stream.last_entry_id.is_none_or(|last| ld >= last) {
            return Position::CaughtUp;
        }
        Position::Inside
    }

    /// Entries-read, or 0 for a group at `0-0` on a stream that never had a
    /// deletion (it has read nothing: SETID/CREATE at 0 leaves the counter nil).
    fn entries_read(&self) -> Option<u64> {
        match self.group.entries_read {
            Some(read) => Some(read),
            None if self.group.last_delivered_id.is_zero()
                && self.stream.max_deleted_entry_id == Some(StreamId::ZERO) =>
            {
                Some(0)
            }
            None => None,
        }
    }

    /// Entries-added − entries-read − `lag`, when the counters allow.
    fn gone(&self, lag: u64) -> Option<u64> {
        self.stream.unread_gone(self.entries_read()?, lag)
    }

    /// Redis's count, as is or re-derived, when it can be trusted.
    pub(super) fn trusted_report(&self) -> Option<(u64, LagMethod)> {
        let length = self.stream.length;
        let reported = self.group.lag.filter(|&l| l <= length)?;
        if self.arithmetic == Arithmetic::Current {
            return Some((reported, LagMethod::Reported));
        }
        if self.stream.entries_added == Some(length) {
            // Nothing was ever trimmed or deleted: nothing can be miscounted.
            return Some((reported, LagMethod::Reported));
        }
        let previous = self.previous?;
        let gone = previous.unread_gone?;
        let ld = self.group.last_delivered_id;
        let (read, read_before) = (self.group.entries_read?, previous.entries_read?);
        let moved_on = ld >= previous.last_delivered && read >= read_before;
        // Entries a trim removed must be at or before the group's last
        // position, or the group may have lost some since.
        let edge_behind = self
            .stream
            .first_entry_id
            .is_none_or(|f| Some(f) <= previous.last_delivered.successor());
        // A deletion after the last position may have removed unread entries,
        // and makes the server re-estimate entries-read as the group reads.
        let no_deletion_after = self
            .stream
            .max_deleted_entry_id
            .is_none_or(|d| d <= previous.last_delivered);
        if !(moved_on && edge_behind && no_deletion_after) {
            return None;
        }
        // Reads raise entries-read by the entries they deliver, so what was
        // gone stays gone; a counter set from outside (`XGROUP SETID …
        // ENTRIESREAD`) may have taken the gone entries into account. The
        // entries present in the range the group moved over tell.
        let gone = if gone > 0 && read > read_before {
            let present = if ld == previous.last_delivered {
                0
            } else {
                self.advanced_over?
            };
            (gone + present).checked_sub(read - read_before)?
        } else {
            gone
        };
        let lag = reported.checked_sub(gone)?;
        let method = if gone == 0 {
            LagMethod::Reported
        } else {
            LagMethod::Rederived
        };
        Some((lag, method))
    }

    /// The range whose entries the probe must count before Redis's count
    /// can be re-derived ([`Reading::advanced_over`]): the group read on
    /// since an earlier poll proved unread entries gone, on a server that
    /// miscounts. One `XRANGE` a poll, only for such groups.
    pub fn advance_to_count(&self) -> Option<(StreamId, StreamId)> {
        let previous = self.previous?;
        if self.arithmetic == Arithmetic::Current
            || self.stream.entries_added == Some(self.stream.length)
            || previous.unread_gone.is_none_or(|g| g == 0)
        {
            return None;
        }
        let (read, before) = (self.group.entries_read?, previous.entries_read?);
        let ld = self.group.last_delivered_id;
        if read <= before || ld <= previous.last_delivered {
            return None;
        }
        Some((previous.last_delivered.successor()?, ld))
    }

    /// The bounds Redis's counters prove for the lag of a group inside the
    /// window, when both are known: see [`StreamInfo::lag_bounds`].
    ///
    /// [`StreamInfo::lag_bounds`]: crate::vocab::StreamInfo::lag_bounds
    pub(super) fn counter_bounds(&self) -> Option<(u64, u64)> {
        let (low, high) = self.stream.lag_bounds(self.group.entries_read?);
        let high = high?;
        (low <= high).then_some((low, high))
    }

    /// What the poll proved of the group's undelivered entries at the
    /// moment XINFO read the other figures, as (at least, at most): its lag
    /// where `figure` is exact and nothing changed since (`changed`: the
    /// stream or the group moved before a count that completes it); else at
    /// least the entries `sample` holds (it starts after XINFO's position and
    /// stops at XINFO's last entry, so each was undelivered then), within
    /// the bounds the counters prove.
    pub fn undelivered(
        &self,
        figure: &LagFigure,
        sample: Option<&UndeliveredSample>,
        changed: bool,
    ) -> (u64, u64) {
        if let Some(lag) = figure.lag.filter(|_| figure.exact() && !changed) {
            return (lag, lag);
        }
        let mut low = sample.map_or(0, |s| s.ids.len() as u64);
        let mut high = self.stream.length;
        if let Some(read) = self.group.entries_read {
            let (at_least, at_most) = self.stream.lag_bounds(read);
            low = low.max(at_least);
            high = at_most.unwrap_or(high);
        }
        (low.min(high), high)
    }

    /// How many undelivered entries the probe must read for this group, or
    /// `None` when the lag and its age follow from XINFO alone.
    pub fn sample_request(&self, exact_limit: u32) -> Option<u32> {
        if self.position() != Position::Inside {
            return None;
        }
        match self.trusted_report() {
            Some((0, _)) => None,
            // Only the first entry's ID is needed, for its age, unless the
            // last poll's still holds.
            Some(_) if self.unmoved_first_undelivered().is_some() => None,
            Some(_) => Some(1),
            None => Some(exact_limit.max(1)),
        }
    }

    /// The last poll's first undelivered entry, when it provably still is
    /// the first: the group has not moved (same position, same
    /// entries-read), so the entry after its position is the same one,
    /// unless it was deleted, and every deletion since (XDEL, XACKDEL,
    /// XDELEX) stayed before it (`max-deleted-entry-id` below it; unknown on
    /// 6.2, so never reused there). Trimming cannot have reached it while the
    /// group is inside the window. A stopped group then costs no `XRANGE` a
    /// poll (two commands a stream instead of three, so 3,000 streams fit 15 s).
    fn unmoved_first_undelivered(&self) -> Option<StreamId> {
        let previous = self.previous?;
        let first = previous.first_undelivered?;
        let ld = self.group.last_delivered_id;
        let unmoved = previous.last_delivered == ld
            && previous.entries_read == self.group.entries_read
            && self.group.entries_read.is_some();
        let not_deleted = self.stream.max_deleted_entry_id.is_some_and(|d| d < first);
        let retained = self.stream.first_entry_id.is_some_and(|f| f <= first)
            && self.stream.last_entry_id.is_some_and(|l| first <= l);
        (unmoved && not_deleted && retained && first > ld).then_some(first)
    }

    /// True when, with this sample, the lag must be estimated.
    fn needs_estimate(&self, sample: &UndeliveredSample) -> bool {
        self.position() == Position::Inside
            && !sample.is_complete()
            && !sample.ids.is_empty()
            && sample.counted_with_tail().is_none()
            && self.trusted_report().is_none()
    }

    /// The last entries to read when the lag must be estimated: `XREVRANGE
    /// key + <start> COUNT n`, from just after the sample's last entry. When
    /// fewer than `n` come back the lag is counted exactly; otherwise they
    /// narrow what the estimator must guess.
    pub fn tail_request(&self, sample: &UndeliveredSample) -> Option<(StreamId, u32)> {
        if sample.tail_count > 0 || !self.needs_estimate(sample) {
            return None;
        }
        Some((
            sample.ids.last()?.successor()?,
            sample.count.saturating_mul(TAIL_FACTOR),
        ))
    }

    /// The walk of the stream's milliseconds the estimator needs (see
    /// [`Walk`]), when the lag will be estimated.
    pub fn walk(&self, sample: &UndeliveredSample, anchors: &[Anchor]) -> Option<Walk> {
        if !self.needs_estimate(sample) {
            return None;
        }
        estimate::walk(self.stream, self.group.last_delivered_id, sample, anchors)
    }

    /// What the next poll needs to know of this one.
    pub fn trail(&self, figure: &LagFigure) -> Trail {
        Trail {
            last_delivered: self.group.last_delivered_id,
            entries_read: self.group.entries_read,
            unread_gone: if figure.exact() {
                figure.unread_gone
            } else {
                None
            },
            first_undelivered: figure.first_undelivered,
        }
    }
}
