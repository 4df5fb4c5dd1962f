//! Group status changes in the log: one info line per change (target,
//! stream, group, from, to), at most [`LINES_PER_POLL`] a stream poll per
//! target; the changes past that are counted in one line at the end of the
//! poll, so an incident that moves every group at once cannot flood the log.
//! A group's first status is not a change: it is not logged.

use crate::safe_names;
use crate::status::GroupStatus;

/// Status change lines per target and stream poll before they are counted
/// instead.
pub const LINES_PER_POLL: usize = 20;

/// What the current stream poll logged of its status changes.
#[derive(Debug, Default)]
pub struct StatusChanges {
    logged: usize,
    not_logged: usize,
}

impl StatusChanges {
    /// Logs the change of a group's status from `from` to `to`, if it is
    /// one; true when a line was written.
    pub fn record(
        &mut self,
        target: &str,
        stream: &[u8],
        group: &[u8],
        from: Option<GroupStatus>,
        to: Option<GroupStatus>,
    ) -> bool {
        let (Some(from), Some(to)) = (from, to) else {
            return false;
        };
        if from == to {
            return false;
        }
        if self.logged == LINES_PER_POLL {
            self.not_logged += 1;
            return false;
        }
        self.logged += 1;
        tracing::info!(
            redis_target = %target,
            stream = %safe_names::printable(stream),
            group = %safe_names::printable(group),
            from = from.label(),
            to = to.label(),
            "group status changed"
        );
        true
    }

    /// Ends the poll: logs how many changes were not logged one by one, and
    /// returns that count.
    pub fn finish(&mut self, target: &str) -> usize {
        let not_logged = self.not_logged;
        if not_logged > 0 {
            tracing::info!(
                redis_target = %target,
                not_logged,
                limit = LINES_PER_POLL,
                "more group status changes in this stream poll than are logged one by one"
            );
        }
        *self = StatusChanges::default();
        not_logged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use GroupStatus::{Ok, Stopped};

    #[test]
    fn a_change_is_logged_once_and_a_flood_is_counted() {
        let mut changes = StatusChanges::default();
        assert!(
            !changes.record("t", b"s", b"g", Some(Ok), Some(Ok)),
            "no change"
        );
        assert!(
            !changes.record("t", b"s", b"g", None, Some(Ok)),
            "a first status"
        );
        let logged = (0..LINES_PER_POLL + 5)
            .filter(|_| changes.record("t", b"s", b"g", Some(Ok), Some(Stopped)))
            .count();
        assert_eq!(logged, LINES_PER_POLL);
        assert_eq!(changes.finish("t"), 5);
        // The next poll starts afresh.
        assert!(changes.record("t", b"s", b"g", Some(Stopped), Some(Ok)));
        assert_eq!(changes.finish("t"), 0);
    }
}
