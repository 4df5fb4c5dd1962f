//! One group as one stream poll read it, with what the last poll proved:
//! the input of every lag decision, and the counters' arithmetic they share.

use super::{Arithmetic, Trail};
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

impl Reading<'_> {
    /// Entries-read, or 0 for a group at `0-0` on a stream that never had a
    /// deletion (it has read nothing: SETID/CREATE at 0 leaves the counter nil).
    pub(super) fn entries_read(&self) -> Option<u64> {
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
    pub(super) fn gone(&self, lag: u64) -> Option<u64> {
        self.stream.unread_gone(self.entries_read()?, lag)
    }
}
