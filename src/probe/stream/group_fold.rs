//! Folding one watched group's poll ([`GroupFold::group`]), top down: its
//! lag figure and what it proves of the undelivered entries, its loss
//! ledger, where it stands in time and is heading ([`Outlook`]: lag
//! seconds, the trimming edge's margin, the ETAs), its status (the sample
//! joins its window and cadence, then the settings it is judged by are
//! built once from them), and its entry in the snapshot. Which kind of poll
//! it is ([`PollKind`]) decides what joins the window and the trend.

use std::sync::Arc;
use std::time::Duration;

use super::batch::Found;
use crate::config::{StreamSettings, Trimming};
use crate::lag::{self, Arithmetic, LagFigure};
use crate::probe::context::ProbeContext;
use crate::probe::groups::age_seconds;
use crate::probe::state::GroupMemory;
use crate::snapshot::{GroupState, Name};
use crate::vocab::{GroupInfo, StreamInfo};
use crate::{cadence, loss, safe_names, status};

/// Whether a poll is the probe's scheduled one or an extra poll of a few
/// streams that keyspace events asked for. Extra polls feed the loss ledgers
/// and the figures like any poll, but add no sample to the status window or
/// the trend: those count scheduled polls, and extra samples would shorten
/// the time the window covers (a burst of events must not turn a few seconds
/// of a stuck group into `stopped`). Their status is judged against the
/// window as the scheduled polls left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PollKind {
    /// Every watched stream, on the probe's schedule.
    Scheduled,
    /// The streams events named, merged into the snapshot.
    Extra,
}

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
    pub(super) evidence: lag::Evidence<'p>,
    /// The stream's `[[streams]]` settings.
    pub(super) settings: &'p StreamSettings,
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
    /// What keyevents announced of the stream's removals.
    pub(super) announced: Option<loss::Announced>,
}

impl GroupFold<'_> {
    /// Folds one group's poll into its memory and ledger, and gives its
    /// entry in the snapshot; `before` is its entry before this poll, and
    /// `stuck` what the slow probes saw stuck in it.
    pub(super) fn group(
        &self,
        memory: &mut GroupMemory,
        ledger: &mut loss::Ledger,
        group: &GroupInfo,
        found: &Found,
        before: Option<&GroupState>,
        stuck: Option<status::Stuck>,
    ) -> GroupState {
        let (figure, undelivered) = self.lag_figure(memory, group, found);
        if self.feed_ledger {
            let seen = loss::Observation {
                set_from_outside: self.set_from_outside,
                announced: self.announced,
                ..loss::Observation::of(self.info, group, self.now_ms, undelivered, self.counter)
            };
            ledger.follow_server(self.run_id);
            ledger.observe(&seen, found.counted);
        }
        let outlook = self.outlook(memory, ledger, &figure);
        let judged = self.judge(memory, ledger, group, &figure, &outlook, stuck);
        // Without the server's clock nothing is learned; a configured
        // read_every still applies.
        let (learned, read_every) = judged
            .as_ref()
            .map_or((None, self.settings.read_every), |j| {
                (j.learned, j.settings.read_every)
            });
        let verdict = judged.map(|j| j.verdict);
        GroupState {
            consumers: group.consumers,
            pending: group.pending,
            last_delivered_id: group.last_delivered_id,
            entries_read: group.entries_read,
            lag: figure.lag,
            lag_estimated: figure.estimated(),
            lag_seconds: outlook.lag_seconds,
            trimmed_undelivered: figure.trimmed_undelivered,
            lost: ledger.lost(),
            lost_at: ledger.loss_times(),
            possibly_lost: ledger.possibly_lost(),
            loss_unproven: ledger.unproven(),
            rewinds: ledger.rewinds(),
            rewound_at_ms: ledger.rewound_at(),
            retention_margin: outlook.retention_margin,
            overtake_eta: outlook.overtake_eta,
            drain_eta: outlook.drain_eta,
            read_interval: learned.map(|d| d.as_secs_f64()),
            read_every: read_every.map(|d| d.as_secs_f64()),
            last_read_at_ms: memory.last_read_at_ms.max(memory.last_progress_at_ms),
            ahead_of_stream: figure.ahead_of_stream,
            status: verdict
                .map(|v| v.status)
                .or_else(|| before.and_then(|b| b.status)),
            status_basis: verdict
                .map(|v| v.basis)
                .or_else(|| before.and_then(|b| b.status_basis)),
            status_reason: verdict
                .map(|v| v.reason)
                .or_else(|| before.and_then(|b| b.status_reason)),
            judged_in: match verdict {
                Some(v) => v.judged_in,
                None => before.and_then(|b| b.judged_in),
            },
            // The pending summary's oldest ID is aged by this poll's clock
            // while entries are pending (see
            // `TargetSnapshot::oldest_pending_age`).
            pending_aged_at_ms: self.ages_at.filter(|_| group.pending > 0),
        }
    }

    /// The group's lag, from this poll and what the last one proved, and
    /// what it proves of the undelivered entries for the ledger; its trail
    /// and its last progress move on with it.
    fn lag_figure(
        &self,
        memory: &mut GroupMemory,
        group: &GroupInfo,
        found: &Found,
    ) -> (LagFigure, loss::Bounds) {
        let reading = lag::Reading {
            stream: self.info,
            group,
            arithmetic: self.arithmetic,
            previous: memory.lag_trail.as_ref(),
            advanced_over: found.advanced_over,
        };
        let sample = found.sample.as_ref();
        let figure = reading.compute(sample, &self.evidence);
        let (lo, hi) = reading.undelivered(&figure, sample, found.changed);
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
            stream = %safe_names::printable(&**self.name),
            group = %safe_names::printable(&group.name),
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
        (figure, loss::Bounds { lo, hi })
    }
}

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
    fn outlook(
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
        // Trimmed only with `ACKED`, trimming never comes for a group's
        // unread entries: there is no margin and no overtake.
        let acked_trimming = self.settings.trimming == Trimming::Acked;
        let retention_margin = match (self.time_ids, figure.first_undelivered, first_entry) {
            _ if acked_trimming || edge_waits_for_group => None,
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

/// A group's verdict, with the cadence learned and the settings it was
/// judged by.
struct Judged {
    verdict: status::Verdict,
    learned: Option<Duration>,
    settings: status::Settings,
}

impl GroupFold<'_> {
    /// The group's status against its window, which a scheduled poll's
    /// sample joins first, as its cadence does; none while the server's
    /// clock is unknown.
    fn judge(
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
            watched_since_ms: Some(*memory.watched_since_ms.get_or_insert(at_ms)),
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
                interval_ms: self.ctx.config.schedule.stream.as_millis() as u64,
            });
            memory.window.push(&sample);
        }
        let (learned, settings) = self.judged_by(memory, at_ms);
        Some(Judged {
            verdict: status::verdict(&memory.window, &sample, &settings),
            learned,
            settings,
        })
    }

    /// The group's learned cadence at `at_ms`, and the settings it is
    /// judged by: the stream's window and `max_delay`, its `read_every`
    /// (configured, or learned for a group that reads in runs), and the
    /// patience its cadence and its consumers' holds give.
    fn judged_by(&self, memory: &GroupMemory, at_ms: u64) -> (Option<Duration>, status::Settings) {
        let interval = self.ctx.config.schedule.stream;
        let window = self.ctx.config.status_window;
        let window_duration = interval * window as u32;
        let learned = memory.cadence.interval(at_ms);
        let patience = cadence::patience(learned, interval, window_duration);
        let read_every = self
            .settings
            .read_every
            .or_else(|| cadence::reads_in_runs(learned, window_duration));
        let settings = status::Settings {
            window,
            window_duration,
            max_delay: self.settings.max_delay,
            read_every,
            patience,
            pel_patience: cadence::pel_patience(
                patience,
                memory.holds.value(at_ms),
                window_duration,
            ),
        };
        (learned, settings)
    }
}
