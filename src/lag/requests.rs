//! What the probe must read for a group: the first undelivered entries, the
//! tail, the walk of milliseconds; each asked for only when XINFO and the
//! last poll cannot settle the lag.

use super::model::Model;
use super::position::Position;
use super::sample::TAIL_FACTOR;
use super::{Anchor, Reading, UndeliveredSample, Walk};
use crate::vocab::StreamId;

impl Reading<'_> {
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
    pub(super) fn unmoved_first_undelivered(&self) -> Option<StreamId> {
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
    pub(super) fn needs_estimate(&self, sample: &UndeliveredSample) -> bool {
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
    /// [`estimate::Walk`]), when the lag will be estimated.
    ///
    /// [`estimate::Walk`]: super::estimate::Walk
    pub fn walk(&self, sample: &UndeliveredSample, anchors: &[Anchor]) -> Option<Walk> {
        if !self.needs_estimate(sample) {
            return None;
        }
        let anchors = self.anchors_with_tail(sample, anchors);
        match self.model(sample, &anchors)? {
            Model::Generated(_, split) | Model::Retained(Ok(split)) => Some(Walk::new(&split)),
            Model::Retained(Err(_)) => None,
        }
    }
}
