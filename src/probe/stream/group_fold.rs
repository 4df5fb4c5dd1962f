//! Folding one watched group's poll ([`GroupFold`]): its lag figure, its
//! memory and loss ledger, and its entry in the snapshot; the group's
//! outlook and status are worked out in `outlook` and `judge`.

use std::sync::Arc;

use super::batch::{observation, undelivered_bounds};
use super::judge::{Rhythm, stuck_evidence};
use super::poll::PollKind;
use crate::backend::reply::{GroupInfo, StreamInfo};
use crate::lag::{self, Arithmetic, LagFigure, UndeliveredSample};
use crate::loss;
use crate::probe::{GroupMemory, ProbeContext, TargetState, figures};
use crate::snapshot::{GroupState, Name, StreamState};
use crate::status;
use crate::text;

/// What every watched group of one polled stream is folded with.
pub(super) struct GroupFold<'p> {
    pub(super) ctx: &'p ProbeContext,
    pub(super) kind: PollKind,
    pub(super) name: &'p Name,
    pub(super) info: &'p StreamInfo,
    pub(super) now_ms: Option<u64>,
    /// The server time ages are taken at: none when the stream's IDs are
    /// not wall-clock time.
    pub(super) ages_at: Option<u64>,
    pub(super) arithmetic: Arithmetic,
    /// Whether the stream's IDs are wall-clock time.
    pub(super) time_ids: bool,
    /// The stream's entry in the snapshot before this poll.
    pub(super) previous: Option<&'p StreamState>,
    pub(super) evidence: lag::Evidence<'p>,
    pub(super) status_settings: status::Settings,
    /// How long a counted loss stays recent for the status.
    pub(super) hold_ms: u64,
    /// Whether this poll is compared with the ledgers' last one.
    pub(super) feed_ledger: bool,
    /// How the node's entries-read counts.
    pub(super) counter: loss::ReadCounter,
    /// The node's server, as `INFO` last said.
    pub(super) run_id: Option<&'p Arc<str>>,
    /// An event said the stream was set from outside since its last poll.
    pub(super) set_from_outside: bool,
    /// The stream is trimmed only with `ACKED`: trimming never comes for a
    /// group's unread entries, so there is no margin and no overtake.
    pub(super) acked_trimming: bool,
}

/// What the round trips after XINFO learnt of one group.
#[derive(Clone, Copy)]
pub(super) struct Found<'p> {
    pub(super) advanced_over: Option<u64>,
    pub(super) sample: Option<&'p UndeliveredSample>,
    pub(super) counted: Option<loss::RangeCount>,
    /// The stream or the group changed between XINFO and these counts.
    pub(super) changed: bool,
}

impl GroupFold<'_> {
    /// Folds one group's poll into its memory and ledger, and gives its
    /// entry in the snapshot (under the name that keys it).
    pub(super) fn group(
        &self,
        state: &mut TargetState,
        group: &GroupInfo,
        found: Found<'_>,
    ) -> (Name, GroupState) {
        // The name lives in the map key (the previous poll's, when there is
        // one), not a second time in the group's info.
        let gname: Name = self
            .previous
            .and_then(|p| p.groups.get_key_value(group.name.as_slice()))
            .map_or_else(|| Arc::from(group.name.as_slice()), |(k, _)| k.clone());
        let key = (self.name.clone(), gname.clone());
        let stuck_evidence = stuck_evidence(&state.snapshot, &key);
        let (memory, ledger) = state.group_entries(&key);
        let figure = self.lag_figure(memory, group, &gname, found);
        if self.feed_ledger {
            let undelivered =
                undelivered_bounds(self.info, group, &figure, found.sample, found.changed);
            let seen = loss::Observation {
                set_from_outside: self.set_from_outside,
                ..observation(self.info, group, self.now_ms, undelivered, self.counter)
            };
            ledger.follow_server(self.run_id);
            ledger.observe(&seen, found.counted);
        }
        let outlook = self.outlook(memory, ledger, &figure);
        let judged = self.judge(memory, ledger, group, &figure, &outlook, stuck_evidence);
        // Without the server's clock nothing is learned; a configured
        // read_every still applies.
        let rhythm = judged.map_or(
            Rhythm {
                learned: None,
                read_every: self.status_settings.read_every,
            },
            |j| j.rhythm,
        );
        let judged = judged.map(|j| j.verdict);
        let before = self.previous.and_then(|p| p.groups.get(&gname));
        let fresh = GroupState {
            lag: figure.lag,
            lag_estimated: figure.estimated(),
            lag_seconds: outlook.lag_seconds,
            trimmed_undelivered: figure.trimmed_undelivered,
            lost: ledger.lost(),
            lost_at: ledger.loss_times(),
            possibly_lost: ledger.possibly_lost(),
            loss_unproven: ledger.unproven(),
            rewinds: ledger.rewinds(),
            retention_margin: outlook.retention_margin,
            overtake_eta: outlook.overtake_eta,
            drain_eta: outlook.drain_eta,
            read_interval: rhythm.learned.map(|d| d.as_secs_f64()),
            read_every: rhythm.read_every.map(|d| d.as_secs_f64()),
            ahead_of_stream: figure.ahead_of_stream,
            status: judged
                .map(|v| v.status)
                .or_else(|| before.and_then(|b| b.status)),
            status_basis: judged
                .map(|v| v.basis)
                .or_else(|| before.and_then(|b| b.status_basis)),
            status_reason: judged
                .map(|v| v.reason)
                .or_else(|| before.and_then(|b| b.status_reason)),
            // The pending summary's oldest ID is aged by this poll's clock
            // while entries are pending (see
            // `TargetSnapshot::oldest_pending_age`).
            pending_aged_at_ms: self.ages_at.filter(|_| group.pending > 0),
            info: figures::group(group),
        };
        let (target, was) = (&self.ctx.target.name, before.and_then(|b| b.status));
        state
            .status_changes
            .record(target, self.name, &gname, was, fresh.status);
        (gname, fresh)
    }

    /// The group's lag, from this poll and what the last one proved; its
    /// trail and its last progress move on with it.
    fn lag_figure(
        &self,
        memory: &mut GroupMemory,
        group: &GroupInfo,
        gname: &Name,
        found: Found<'_>,
    ) -> LagFigure {
        let reading = lag::Reading {
            stream: self.info,
            group,
            arithmetic: self.arithmetic,
            previous: memory.lag_trail.as_ref(),
            advanced_over: found.advanced_over,
        };
        let figure = reading.compute(found.sample, &self.evidence);
        // Liveness by progress: whatever the consumers' idle and inactive
        // fields say, a group that moved was read.
        let progressed = memory.lag_trail.as_ref().is_some_and(|before| {
            group.last_delivered_id > before.last_delivered
                || matches!((group.entries_read, before.entries_read), (Some(now), Some(then)) if now > then)
        });
        if progressed {
            memory.last_progress_at_ms = self.now_ms.or(memory.last_progress_at_ms);
        }
        memory.lag_trail = Some(reading.trail(&figure));
        let info = self.info;
        tracing::trace!(
            redis_target = %self.ctx.target.name,
            stream = %text::printable(&**self.name),
            group = %text::printable(&**gname),
            added = ?info.entries_added,
            length = info.length,
            first = ?info.first_entry_id,
            last = ?info.last_entry_id,
            max_deleted = ?info.max_deleted_entry_id,
            last_delivered = %group.last_delivered_id,
            entries_read = ?group.entries_read,
            reported = ?group.lag,
            lag = ?figure.lag,
            method = ?figure.method,
            unread_gone = ?figure.unread_gone,
            "lag figure"
        );
        figure
    }
}
