//! Where a group stands in its stream: the positions that settle the lag
//! without counting, and the one (inside the window) that does not.

use super::Reading;
use crate::vocab::StreamId;

/// Where the group stands in its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Position {
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
    pub(super) fn position(&self) -> Position {
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
}
