//! Redis's own count where it can be trusted: as is on a server with the
//! current arithmetic, proven or re-derived on one that miscounts, and the
//! bounds its counters prove.

use super::{Arithmetic, LagFigure, LagMethod, Reading, UndeliveredSample};
use crate::vocab::StreamId;

impl Reading<'_> {
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
}
