//! The first undelivered entries the probe read, and the last entries after
//! them when the lag must be estimated: what counts a lag that Redis's
//! counters cannot give.

use crate::vocab::StreamId;

/// The first undelivered entries, as read by the probe, and, when the lag
/// must be estimated, the last entries after them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UndeliveredSample {
    /// IDs returned by `XRANGE key <successor> + COUNT count`.
    pub ids: Vec<StreamId>,
    /// The COUNT asked for.
    pub count: u32,
    /// IDs returned by `XREVRANGE key + <successor of the last id> COUNT
    /// count` (see [`Reading::tail_request`]), in ID order; empty when not read.
    ///
    /// [`Reading::tail_request`]: super::Reading::tail_request
    pub tail: Vec<StreamId>,
    /// The COUNT asked for the tail; 0 when it was not read.
    pub tail_count: u32,
    /// The group read on, or entries were removed, between XINFO and this
    /// sample: the count is still a lag, but not of XINFO's moment, so no
    /// proof of what was lost (its consumers may have deleted what they
    /// read meanwhile).
    pub changed_meanwhile: bool,
}

impl UndeliveredSample {
    /// A sample of the first undelivered entries only.
    pub fn head(ids: Vec<StreamId>, count: u32) -> UndeliveredSample {
        UndeliveredSample {
            ids,
            count,
            ..UndeliveredSample::default()
        }
    }

    /// True when the reply held every undelivered entry.
    pub(super) fn is_complete(&self) -> bool {
        (self.ids.len() as u64) < u64::from(self.count)
    }

    /// With a tail read: every undelivered entry, when head and tail held
    /// them all between them.
    pub(super) fn counted_with_tail(&self) -> Option<u64> {
        (self.tail_count > 0 && (self.tail.len() as u64) < u64::from(self.tail_count))
            .then(|| (self.ids.len() + self.tail.len()) as u64)
    }
}

/// How many times the head sample's size the tail read asks for: lags
/// below `(1 + TAIL_FACTOR) × k` (up to 499 at the default `k` of 100) are
/// then counted, not estimated, for one bounded read of the last entries; a
/// tail that comes back full cannot show that nothing lies between it and
/// the head.
pub(super) const TAIL_FACTOR: u32 = 4;
