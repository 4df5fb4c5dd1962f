//! What the estimator's walks learnt of a stream, kept for its next poll.
//!
//! The walks' commands are capped per poll; a gap they could not finish was
//! modelled evenly, and a walk that started over at every poll would stop at
//! the same place every time, so a group standing still would keep the
//! same error. Kept, the milliseconds already read are skipped and the next
//! walk goes on where this one stopped: the estimate converges over a few
//! polls. What a walk read stays true while IDs only grow past the last
//! entry: the last entry's millisecond may still fill, those before it
//! change only by deletion, and a stream whose last generated ID went back
//! or whose deletions moved (`max-deleted-entry-id`, 7.0+) starts over.
//! Deletions on 6.2, which reports no such field, are not seen: there, as
//! on a first poll, the walk counts the IDs generated in a millisecond.

use super::estimate::MsEnds;
use crate::vocab::StreamId;
use crate::vocab::StreamInfo;

/// The most facts (read milliseconds and empty ranges) kept for one stream:
/// about 200 KiB. A stream whose walks learnt more starts over.
pub const WALKED_KEPT_PER_STREAM: usize = 4_096;

/// A stream's walked milliseconds and what they were read under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walked {
    ends: MsEnds,
    last_generated: StreamId,
    max_deleted: Option<StreamId>,
}

impl Walked {
    /// What this poll's walks learnt, trimmed to what holds at the next one;
    /// `None` when that is nothing, or more than [`WALKED_KEPT_PER_STREAM`].
    pub fn keep(mut ends: MsEnds, stream: &StreamInfo) -> Option<Walked> {
        let (Some(first), Some(last)) = (stream.first_entry_id, stream.last_entry_id) else {
            return None;
        };
        ends.keep_between(first.ms, last.ms);
        (!ends.is_empty() && ends.facts() <= WALKED_KEPT_PER_STREAM).then_some(Walked {
            ends,
            last_generated: stream.last_generated_id,
            max_deleted: stream.max_deleted_entry_id,
        })
    }

    /// The milliseconds to start this poll's walks with: the kept ones while
    /// the stream says nothing changed them, else none.
    pub fn recall(self, stream: &StreamInfo) -> MsEnds {
        let same = stream.last_generated_id >= self.last_generated
            && stream.max_deleted_entry_id == self.max_deleted;
        if same { self.ends } else { MsEnds::default() }
    }

    /// How many facts it holds.
    pub fn facts(&self) -> usize {
        self.ends.facts()
    }
}

#[cfg(test)]
mod tests;
