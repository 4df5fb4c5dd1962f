//! What one poll proved about a group, for the next: how an old server's
//! count, once corrected, stays corrected.

use super::{LagFigure, Reading};
use crate::vocab::StreamId;

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

impl Reading<'_> {
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
