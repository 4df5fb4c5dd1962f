//! Where a group stands in time and where it is heading ([`Outlook`]): lag
//! seconds, the trimming edge's margin and the ETAs from the recent polls.

use super::group_fold::GroupFold;
use super::poll::PollKind;
use crate::lag::LagFigure;
use crate::loss;
use crate::probe::{GroupMemory, age_seconds};

/// How long after the stream's first entry last moved it counts as trimmed
/// recently: the hour of the shipped rules' `delta(...first_entry...[1h])`.
const TRIMMED_RECENTLY_MS: u64 = 3_600_000;

/// Where a group stands in time, and where it is heading.
pub(super) struct Outlook {
    pub(super) lag_seconds: Option<f64>,
    pub(super) retention_margin: Option<f64>,
    /// The stream's first entry moved within the last hour.
    pub(super) trimmed_recently: bool,
    pub(super) overtake_eta: Option<f64>,
    pub(super) drain_eta: Option<f64>,
}

impl GroupFold<'_> {
    /// Lag seconds, and where the group is heading: the trimming edge's
    /// margin and the ETAs from the recent polls (crate::trend), which a
    /// rewind starts over and only scheduled polls extend.
    pub(super) fn outlook(
        &self,
        memory: &mut GroupMemory,
        ledger: &loss::Ledger,
        figure: &LagFigure,
    ) -> Outlook {
        let lag_seconds =
            self.ages_at
                .and_then(|now| match (figure.lag, figure.first_undelivered) {
                    (_, Some(first)) => Some(age_seconds(now, first.ms)),
                    (Some(0), None) => Some(0.0),
                    _ => None,
                });
        let first_entry = self.info.first_entry_id;
        // The margin measures how far trimming is from unread entries. Where
        // what removes the head waits for the group, a margin says nothing
        // of a threat: a worker deleting what it processed moves the head
        // by deletions (the stream's max-deleted-entry-id lies between the
        // last poll's first entry and this one's), and a retention job trimming to the group's
        // position or ACKED trimming leaves its first undelivered entry the
        // stream's first without removing any it had not read. There a
        // margin would extrapolate into an overtake that never comes; a loss
        // the ledger proves keeps it (0: trimming reached unread entries).
        if first_entry != memory.head {
            // The last deletion lies between the old head and the new one.
            memory.head_deleted = matches!(
                (self.info.max_deleted_entry_id, memory.head, first_entry),
                (Some(deleted), Some(before), Some(now)) if deleted >= before && deleted < now
            );
            if memory.head.is_some() {
                memory.head_moved_at_ms = self.now_ms.or(memory.head_moved_at_ms);
            }
            memory.head = first_entry;
        }
        let trimmed_recently = matches!(
            (self.now_ms, memory.head_moved_at_ms),
            (Some(now), Some(moved)) if now.saturating_sub(moved) < TRIMMED_RECENTLY_MS
        );
        let proven_now = self.now_ms.is_some_and(|at| ledger.lost_at(at));
        let edge_waits_for_group = !proven_now
            && (memory.head_deleted
                || (first_entry.is_some() && figure.first_undelivered == first_entry));
        let retention_margin = match (self.time_ids, figure.first_undelivered, first_entry) {
            _ if self.acked_trimming || edge_waits_for_group => None,
            (true, Some(undelivered), Some(first)) => {
                Some(undelivered.ms.saturating_sub(first.ms) as f64 / 1000.0)
            }
            _ => None,
        };
        if ledger.rewinds() != memory.rewinds_seen {
            memory.rewinds_seen = ledger.rewinds();
            memory.trend.clear();
        }
        // Entries retained before the group's first undelivered one.
        let ahead = figure
            .lag
            .filter(|_| figure.exact())
            .map(|lag| self.info.length.saturating_sub(lag));
        if let (Some(at), PollKind::Scheduled) = (self.now_ms, self.kind) {
            let first_entry_ms = first_entry.filter(|_| self.time_ids).map(|id| id.ms);
            memory
                .trend
                .push(at, retention_margin, first_entry_ms, figure.lag, ahead);
        }
        Outlook {
            lag_seconds,
            retention_margin,
            trimmed_recently,
            overtake_eta: retention_margin.and_then(|_| memory.trend.overtake_eta()),
            drain_eta: memory.trend.drain_eta(),
        }
    }
}
