//! Losses and rewinds observed between stream polls (docs/lag-and-losses.md): pure
//! bookkeeping over each poll's lag figure, with no I/O and no clock.
//!
//! A trim that overtakes a slow group is often over within one poll: the
//! group reads past the gap, and the gauge that showed the loss falls back to
//! 0. The [`Ledger`] of a group therefore counts what the gauge cannot keep:
//! every observed increase of the unread entries gone (entries-added −
//! entries-read − lag, exact figures only, see [`crate::lag`]) is added to
//! a counter and never subtracted. The first figure known after the exporter
//! starts (or after the target came back) is the baseline, so a loss older
//! than the exporter is not counted again at every restart. A group whose
//! position or entries-read moves backwards was rewound (XGROUP SETID, or
//! recreated under the same name): that is counted too, and its figures
//! start a new baseline instead of passing for a loss.

use crate::backend::StreamId;

/// Entries lost by one group, by cause, since the exporter started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Removed by trimming while the group was behind (or the trimming edge
    /// passed its position between two polls).
    pub trimmed: u64,
    /// Removed inside the group's window: XDEL, XDELEX, XACKDEL, DELREF trims.
    pub deleted: u64,
}

/// What one stream poll saw of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Server time of the poll, in ms, when known.
    pub at_ms: Option<u64>,
    /// The group's last-delivered-id.
    pub last_delivered: StreamId,
    /// Its entries-read, when Redis knows it.
    pub entries_read: Option<u64>,
    /// The stream's first entry, when it has one.
    pub first_entry: Option<StreamId>,
    /// The stream's max-deleted-entry-id (7.0+).
    pub max_deleted: Option<StreamId>,
    /// Unread entries gone, when exact.
    pub unread_gone: Option<u64>,
}

/// The loss and rewind record of one group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Unread entries gone at the last poll that knew it.
    baseline: Option<u64>,
    /// A lower figure seen once, not yet taken as the new baseline.
    dipped: Option<u64>,
    /// The position, entries-read and max-deleted-entry-id of the last poll.
    last: Option<(StreamId, Option<u64>, Option<StreamId>)>,
    /// Losses counted; `None` until the figure was known once.
    lost: Option<Lost>,
    /// Rewinds counted.
    rewinds: u64,
    /// Server time of the last counted loss.
    last_loss_at_ms: Option<u64>,
}

impl Ledger {
    /// Records one poll.
    pub fn observe(&mut self, o: &Observation) {
        let previous = self
            .last
            .replace((o.last_delivered, o.entries_read, o.max_deleted));
        let rewound = previous.is_some_and(|(ld, read, _)| {
            o.last_delivered < ld
                || matches!((o.entries_read, read), (Some(now), Some(then)) if now < then)
        });
        if rewound {
            self.rewinds += 1;
            self.baseline = None;
        }
        let Some(gone) = o.unread_gone else {
            return;
        };
        let lost = self.lost.get_or_insert_with(Lost::default);
        // A figure below the baseline is taken only when the next poll
        // confirms it: Redis's counters are read by two commands, and a
        // consumer that reads between them makes one poll's figure dip; the
        // next poll's rebound must not pass for a loss.
        if self.baseline.is_some_and(|b| gone < b) {
            match self.dipped.replace(gone) {
                // Seen lower twice in a row: the figure did go down, from
                // the first lower value on.
                Some(first) => self.baseline = Some(first),
                None => return,
            }
        }
        self.dipped = None;
        if let Some(baseline) = self.baseline.filter(|&b| gone > b) {
            let more = gone - baseline;
            // A deletion past where the group stood last time (the stream's
            // max-deleted-entry-id moved there) took them. Otherwise, when
            // the group is behind the first entry or the trimming edge passed
            // its last position, a trim did.
            let deletion = previous.is_some_and(|(ld, _, deleted_before)| {
                o.max_deleted > deleted_before && o.max_deleted.is_some_and(|d| d > ld)
            });
            let trimmed = !deletion
                && o.first_entry.is_some_and(|first| {
                    o.last_delivered < first
                        || previous.is_some_and(|(ld, _, _)| Some(first) > ld.successor())
                });
            if trimmed {
                lost.trimmed += more;
            } else {
                lost.deleted += more;
            }
            self.last_loss_at_ms = o.at_ms.or(self.last_loss_at_ms);
        }
        self.baseline = Some(gone);
    }

    /// The target went away: what comes back may be another server, so the
    /// next figures start a new baseline; the counts are kept.
    pub fn reconnected(&mut self) {
        self.baseline = None;
        self.dipped = None;
        self.last = None;
    }

    /// Losses counted, once the figure was known at least once.
    pub fn lost(&self) -> Option<Lost> {
        self.lost
    }

    /// Rewinds counted.
    pub fn rewinds(&self) -> u64 {
        self.rewinds
    }

    /// True when the poll at `at_ms` counted a loss.
    pub fn lost_at(&self, at_ms: u64) -> bool {
        self.last_loss_at_ms == Some(at_ms)
    }

    /// True when a loss was counted within `hold_ms` before `now_ms`.
    pub fn recent_loss(&self, now_ms: u64, hold_ms: u64) -> bool {
        self.last_loss_at_ms
            .is_some_and(|at| now_ms.saturating_sub(at) < hold_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    fn obs(at: u64, ld: u64, read: u64, first: u64, gone: Option<u64>) -> Observation {
        Observation {
            at_ms: Some(at),
            last_delivered: id(ld),
            entries_read: Some(read),
            first_entry: Some(id(first)),
            max_deleted: Some(StreamId::ZERO),
            unread_gone: gone,
        }
    }

    /// A trim that overtakes a group: 60, then 360, then 0 after the group read past
    /// the gap. The counter keeps 360.
    #[test]
    fn a_loss_that_heals_stays_counted() {
        let mut l = Ledger::default();
        l.observe(&obs(1_000, 100, 100, 50, Some(0)));
        assert_eq!(l.lost(), Some(Lost::default()));
        l.observe(&obs(16_000, 110, 110, 171, Some(60)));
        l.observe(&obs(31_000, 120, 120, 481, Some(360)));
        l.observe(&obs(46_000, 700, 1_060, 481, Some(0)));
        assert_eq!(
            l.lost(),
            Some(Lost {
                trimmed: 360,
                deleted: 0
            })
        );
        assert!(l.recent_loss(46_000, 3_600_000));
        assert!(!l.recent_loss(31_000 + 3_600_000, 3_600_000));
        // A later loss adds to it.
        l.observe(&obs(61_000, 800, 1_160, 481, Some(5)));
        assert_eq!(l.lost().map(|x| x.deleted), Some(5));
    }

    /// A consumer reading between the two XINFO commands of a poll makes
    /// the figure dip for that poll; the rebound is no loss. A lower figure
    /// seen twice is the new baseline.
    #[test]
    fn a_one_poll_dip_is_no_loss() {
        let mut l = Ledger::default();
        l.observe(&obs(1, 10, 10, 1, Some(4)));
        l.observe(&obs(2, 20, 20, 1, Some(1)));
        l.observe(&obs(3, 30, 30, 1, Some(4)));
        assert_eq!(l.lost(), Some(Lost::default()));
        l.observe(&obs(4, 40, 40, 1, Some(0)));
        l.observe(&obs(5, 50, 50, 1, Some(0)));
        l.observe(&obs(6, 60, 60, 1, Some(2)));
        assert_eq!(l.lost().map(|x| x.deleted), Some(2));
    }

    #[test]
    fn the_first_figure_is_a_baseline_not_a_loss() {
        let mut l = Ledger::default();
        l.observe(&obs(1, 10, 10, 1, Some(400)));
        assert_eq!(l.lost(), Some(Lost::default()));
        assert!(!l.recent_loss(1, 1000));
    }

    #[test]
    fn unknown_figures_keep_the_baseline() {
        let mut l = Ledger::default();
        l.observe(&obs(1, 10, 10, 1, Some(0)));
        l.observe(&obs(2, 20, 20, 1, None));
        l.observe(&obs(3, 30, 30, 1, Some(7)));
        assert_eq!(l.lost().map(|x| x.deleted), Some(7));
        // Never known: absent.
        let mut never = Ledger::default();
        never.observe(&obs(1, 10, 10, 1, None));
        assert_eq!(never.lost(), None);
    }

    #[test]
    fn trim_passing_the_last_position_counts_as_trimmed() {
        let mut l = Ledger::default();
        l.observe(&obs(1, 10, 10, 1, Some(0)));
        // The group read on past the gap within one poll (old server: the
        // gap stays in entries-read).
        l.observe(&obs(2, 30, 28, 15, Some(2)));
        assert_eq!(
            l.lost(),
            Some(Lost {
                trimmed: 2,
                deleted: 0
            })
        );
    }

    /// A group at 0-0 is behind the first entry without any trim: a
    /// deletion ahead of it is a deletion.
    #[test]
    fn a_deletion_is_a_deletion_even_behind_the_first_entry() {
        let mut l = Ledger::default();
        l.observe(&obs(1, 0, 0, 1, Some(0)));
        l.observe(&Observation {
            max_deleted: Some(id(8)),
            ..obs(2, 0, 0, 1, Some(2))
        });
        assert_eq!(
            l.lost(),
            Some(Lost {
                trimmed: 0,
                deleted: 2
            })
        );
    }

    #[test]
    fn rewinds_are_counted_and_reset_the_baseline() {
        let mut l = Ledger::default();
        l.observe(&obs(1, 100, 100, 1, Some(0)));
        // SETID back to 10 with ENTRIESREAD 10: figures move, no loss.
        l.observe(&obs(2, 10, 10, 1, Some(3)));
        assert_eq!(l.rewinds(), 1);
        assert_eq!(l.lost(), Some(Lost::default()));
        // entries-read going back alone is a rewind too.
        l.observe(&obs(3, 10, 5, 1, Some(3)));
        assert_eq!(l.rewinds(), 2);
        l.reconnected();
        l.observe(&obs(4, 5, 1, 1, Some(9)));
        assert_eq!(l.rewinds(), 2, "no comparison across a reconnection");
        assert_eq!(l.lost(), Some(Lost::default()));
    }
}
