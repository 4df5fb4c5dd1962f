//! A group's status ([`Judged`]): the scheduled poll's sample joins its
//! window and cadence, the rhythm it is judged by is worked out, and what
//! the slow probes saw stuck in it is weighed.

use super::group_fold::GroupFold;
use super::outlook::Outlook;
use super::poll::PollKind;
use crate::backend::reply::GroupInfo;
use crate::cadence;
use crate::lag::LagFigure;
use crate::loss;
use crate::probe::GroupMemory;
use crate::snapshot::Name;
use crate::status;

impl GroupFold<'_> {
    /// The group's status against its window, which a scheduled poll's
    /// sample joins first; none while the server's clock is unknown.
    pub(super) fn judge(
        &self,
        memory: &mut GroupMemory,
        ledger: &loss::Ledger,
        group: &GroupInfo,
        figure: &LagFigure,
        outlook: &Outlook,
        stuck: Option<status::Stuck>,
    ) -> Option<Judged> {
        let at_ms = self.now_ms?;
        let sample = status::Sample {
            at_ms,
            lag: figure.lag,
            lag_seconds: outlook.lag_seconds,
            last_delivered_id: group.last_delivered_id,
            last_generated_id: self.info.last_generated_id,
            pending: group.pending,
            consumers: group.consumers,
            loss_now: ledger.lost_at(at_ms),
            gone_ahead: if self.feed_ledger {
                ledger.gone_unread()
            } else {
                0
            },
            recent_loss: ledger.recent_loss(at_ms, self.hold_ms),
            oldest_pending_id: memory.oldest_pending_id,
            last_read_at_ms: memory.last_read_at_ms.max(memory.last_progress_at_ms),
            stuck,
            retention_margin: outlook.retention_margin,
            trimmed_recently: outlook.trimmed_recently,
            overtake_eta: outlook.overtake_eta,
        };
        if self.kind == PollKind::Scheduled {
            if self.set_from_outside {
                memory.cadence.interrupt();
            }
            memory.cadence.observe(cadence::Seen {
                at_ms,
                last_read_ms: sample.last_read_at_ms,
                last_generated_id: self.info.last_generated_id,
                waiting: sample.undelivered(),
            });
            memory.window.push(&sample);
        }
        let window = self.status_settings.window_duration;
        let learned = memory.cadence.interval(at_ms);
        let patience = cadence::patience(learned, self.ctx.config.schedule.stream, window);
        let read_every = self
            .status_settings
            .read_every
            .or_else(|| cadence::reads_in_runs(learned, window));
        let settings = status::Settings {
            read_every,
            patience,
            pel_patience: cadence::pel_patience(patience, memory.holds.value(at_ms), window),
            ..self.status_settings
        };
        Some(Judged {
            verdict: status::verdict(&memory.window, &sample, &settings),
            rhythm: Rhythm {
                learned,
                read_every,
            },
        })
    }
}

/// A group's verdict, and the rhythm it was judged by.
#[derive(Clone, Copy, Debug)]
pub(super) struct Judged {
    pub(super) verdict: status::Verdict,
    pub(super) rhythm: Rhythm,
}

/// The rhythm a group is judged by: its learned cadence, and the
/// `read_every` that applies (configured, or learned for a group that reads
/// in runs).
#[derive(Clone, Copy, Debug)]
pub(super) struct Rhythm {
    pub(super) learned: Option<std::time::Duration>,
    pub(super) read_every: Option<std::time::Duration>,
}

/// What the slow probes' latest results show stuck in the group, when
/// anything: poison or ghost entries in its PEL (the last scan, or the
/// pending summary's look at its oldest entries), or entries held by
/// consumers inactive past their limit. Poison first: it explains the rest.
pub(super) fn stuck_evidence(
    snapshot: &crate::snapshot::TargetSnapshot,
    key: &(Name, Name),
) -> Option<status::Stuck> {
    let scan = snapshot.scans.get(key).and_then(|s| s.last.as_deref());
    let poison = scan.is_some_and(|scan| scan.poison > 0)
        || snapshot.head_poison.get(key).is_some_and(|&n| n > 0);
    let ghost = scan.is_some_and(|scan| scan.ghost > 0);
    let orphaned = snapshot.consumers.get(key).is_some_and(|c| c.orphaned > 0);
    [
        (poison, status::Stuck::Poison),
        (ghost, status::Stuck::Ghost),
        (orphaned, status::Stuck::Orphaned),
    ]
    .into_iter()
    .find_map(|(seen, stuck)| seen.then_some(stuck))
}
