//! Group status: one word per group, judged over a sliding window of
//! stream polls, Burrow-style but without its false alarms on quiet streams.
//!
//! Pure: the poller pushes each poll's [`Sample`] into the group's
//! [`Window`], and [`verdict`] judges the window and the latest sample.
//! Rules in order:
//! 1. `data_loss`: entries were removed before the group read them: the
//!    group is behind a trim that took unread entries, or a loss was counted
//!    at this poll. A loss counted within `data_loss_hold` holds the status
//!    after the group caught up, unless the group is `stopped` or `stalled`
//!    now (news that an old loss must not hide).
//! 2. With `read_every` (batch consumers; configured, or twice the learned
//!    cadence of a group that reads in runs, see
//!    [`crate::cadence::reads_in_runs`]): until `read_every` plus the window
//!    has passed since the last read (or, with no read known, since the
//!    exporter began watching the group), work waiting is not `stopped`, nor
//!    `stalled` unless on evidence (rule 4); it is `lagging` when lag seconds
//!    exceed `max_delay`, `ok` otherwise.
//! 3. `stopped`: there is work (undelivered or pending entries) and nobody
//!    has read for the group's patience (or the group has no consumers): twice
//!    its learned read cadence, at least 4 polls, or the whole window while
//!    the cadence is unknown (see [`crate::cadence`]). A read
//!    is a consumer's last successful read or a poll that found the group's
//!    position or entries-read advanced (liveness by progress), so it holds
//!    from the first poll on.
//! 4. `stalled` at once on evidence: the latest PEL scan or consumers run
//!    found poison, ghost or orphaned entries (a fault already seen needs no
//!    window to confirm it).
//! 5. `stalled`: there is work, consumers read, but over the patience's
//!    polls the last-delivered-id never moved while entries waited, or over
//!    the PEL's patience (which also waits for the consumers' handlers'
//!    learned time) the oldest pending entry stayed the same (a message
//!    retried forever).
//! 6. `lagging`: lag seconds above half of `max_delay` (300 s without one);
//!    trimming closing in on unread entries (an overtake ETA under
//!    `max_delay`, and never under 30 minutes), or a retention margin under
//!    `max_delay`; without a `max_delay`, lag above 0 in every poll of a full
//!    window and never decreasing while the group advances. These are the
//!    conditions of the shipped lag and overtake alerts, so an alert about a
//!    group comes with a status that is not `ok`.
//! 7. `idle`: nothing produced during the window, nothing pending, nothing
//!    undelivered.
//! 8. `ok` otherwise: lag reached 0 in the window, or lag seconds stay under
//!    half of `max_delay`, or the window is too short to say more.
//!
//! A quiet stream (no production, nothing pending) is never `stopped` or
//! `stalled`, whatever its consumers do, because there is no work.

use std::time::Duration;

use crate::vocab::StreamId;

/// The status of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupStatus {
    /// Keeping up.
    Ok,
    /// Nothing to do.
    Idle,
    /// Falling behind.
    Lagging,
    /// Consumers are there but make no progress.
    Stalled,
    /// Nobody consumes while work waits.
    Stopped,
    /// Undelivered entries were trimmed away.
    DataLoss,
}

impl GroupStatus {
    /// Every status, in the order they are rendered.
    pub const ALL: [GroupStatus; 6] = [
        GroupStatus::Ok,
        GroupStatus::Idle,
        GroupStatus::Lagging,
        GroupStatus::Stalled,
        GroupStatus::Stopped,
        GroupStatus::DataLoss,
    ];

    /// How urgent a status is, most urgent first (0): the order the landing
    /// page, `check` and the overview dashboard list groups in. Unknown sits
    /// between the problems and the healthy statuses.
    pub fn urgency(status: Option<GroupStatus>) -> u8 {
        match status {
            Some(GroupStatus::DataLoss) => 0,
            Some(GroupStatus::Stopped) => 1,
            Some(GroupStatus::Stalled) => 2,
            Some(GroupStatus::Lagging) => 3,
            None => 4,
            Some(GroupStatus::Ok) => 5,
            Some(GroupStatus::Idle) => 6,
        }
    }

    /// The oldest undelivered entry's age as a sort key, oldest first after
    /// [`Self::urgency`]; unknown last.
    pub fn lag_key(lag_seconds: Option<f64>) -> std::cmp::Reverse<u64> {
        std::cmp::Reverse(lag_seconds.map_or(0, |s| (s.max(0.0) * 1000.0) as u64))
    }

    /// The `status` label value.
    pub fn label(self) -> &'static str {
        match self {
            GroupStatus::Ok => "ok",
            GroupStatus::Idle => "idle",
            GroupStatus::Lagging => "lagging",
            GroupStatus::Stalled => "stalled",
            GroupStatus::Stopped => "stopped",
            GroupStatus::DataLoss => "data_loss",
        }
    }
}

/// Entries that cannot progress, seen by the slow probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stuck {
    /// Delivered at least `poison_delivery_count` times.
    Poison,
    /// Pending, but their bodies are gone.
    Ghost,
    /// Held by consumers inactive past their limit.
    Orphaned,
}

/// Why a group has its status: the rule that decided it, exported beside
/// the status so that a dashboard or a page can say why without a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// `data_loss`: a loss was counted at this poll.
    LossCounted,
    /// `data_loss`: entries after the group's position are proven gone.
    EntriesGoneAhead,
    /// `data_loss`: a loss counted within `data_loss_hold`.
    LossHeld,
    /// `stopped`: work waits and the group has no consumer.
    NoConsumers,
    /// `stopped`: work waits and nobody read for the group's patience.
    NoRead,
    /// `stopped`: a group read in runs missed its run by the window.
    RunOverdue,
    /// `stalled`: poison entries.
    Poison,
    /// `stalled`: ghost entries.
    Ghost,
    /// `stalled`: orphaned entries.
    Orphaned,
    /// `stalled`: the position did not move while entries waited.
    PositionStuck,
    /// `stalled`: the same oldest pending entry stayed.
    OldestPendingStuck,
    /// `lagging`: lag seconds above half of `max_delay` (300 s without).
    LagSeconds,
    /// `lagging`: a group read in runs waited past `max_delay`.
    PastMaxDelay,
    /// `lagging`: trimming closes in on unread entries.
    TrimOvertake,
    /// `lagging`: the retention margin is under `max_delay`.
    RetentionMargin,
    /// `lagging`: the lag grows at every poll while the group advances.
    LagGrowing,
    /// `ok`: a group read in runs, between two runs.
    BetweenRuns,
    /// `ok`: work waits, within the limits (lag seconds under the
    /// threshold, the lag not growing).
    WithinLimits,
    /// `ok`: work waits and the window is not full yet.
    Undecided,
    /// `idle`: nothing produced, pending or undelivered.
    NoWork,
    /// `ok`: nothing waits now, and entries were produced in the window.
    KeepingUp,
}

impl Reason {
    /// The `reason` label value.
    pub fn label(self) -> &'static str {
        match self {
            Reason::LossCounted => "loss_counted",
            Reason::EntriesGoneAhead => "entries_gone_ahead",
            Reason::LossHeld => "loss_held",
            Reason::NoConsumers => "no_consumers",
            Reason::NoRead => "no_read",
            Reason::RunOverdue => "run_overdue",
            Reason::Poison => "poison",
            Reason::Ghost => "ghost",
            Reason::Orphaned => "orphaned",
            Reason::PositionStuck => "position_stuck",
            Reason::OldestPendingStuck => "oldest_pending_stuck",
            Reason::LagSeconds => "lag_seconds",
            Reason::PastMaxDelay => "past_max_delay",
            Reason::TrimOvertake => "trim_overtake",
            Reason::RetentionMargin => "retention_margin",
            Reason::LagGrowing => "lag_growing",
            Reason::BetweenRuns => "between_runs",
            Reason::WithinLimits => "within_limits",
            Reason::Undecided => "undecided",
            Reason::NoWork => "no_work",
            Reason::KeepingUp => "keeping_up",
        }
    }
}

impl From<Stuck> for Reason {
    fn from(stuck: Stuck) -> Reason {
        match stuck {
            Stuck::Poison => Reason::Poison,
            Stuck::Ghost => Reason::Ghost,
            Stuck::Orphaned => Reason::Orphaned,
        }
    }
}

/// A group's status, what it rests on and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: GroupStatus,
    pub basis: Basis,
    pub reason: Reason,
}

/// What one stream poll saw of a group.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Server time of the poll, in ms.
    pub at_ms: u64,
    /// Undelivered entries, when known.
    pub lag: Option<u64>,
    /// Age of the oldest undelivered entry, when known.
    pub lag_seconds: Option<f64>,
    /// The group's position.
    pub last_delivered_id: StreamId,
    /// The stream's last generated ID (production).
    pub last_generated_id: StreamId,
    /// PEL size.
    pub pending: u64,
    /// Consumers in the group.
    pub consumers: u64,
    /// A loss was counted at this poll (see [`crate::loss`]).
    pub loss_now: bool,
    /// Entries after the group's position proven gone at this poll: it is
    /// behind the trimming edge, or before deleted entries.
    pub gone_ahead: u64,
    /// A loss was counted within `data_loss_hold`.
    pub recent_loss: bool,
    /// Smallest pending ID from the latest pending summary.
    pub oldest_pending_id: Option<StreamId>,
    /// Server time (ms) of the most recent read: the latest of the
    /// consumers' last successful read and the last poll that found the
    /// group's position or entries-read advanced (NOACK readers never
    /// become "active" on Redis 7.2+ and Valkey, but their group moves);
    /// `Some(0)` when no consumer ever read; `None` when not yet known.
    pub last_read_at_ms: Option<u64>,
    /// Server time (ms) of the first poll that saw the group since the
    /// exporter started: how long it has been watched.
    pub watched_since_ms: Option<u64>,
    /// The latest PEL scan, pending summary or consumers run found poison,
    /// ghost or orphaned entries in the group: a fault seen, not inferred
    /// from a window.
    pub stuck: Option<Stuck>,
    /// Seconds of ID time between the stream's first entry and the group's
    /// first undelivered one, when known.
    pub retention_margin: Option<f64>,
    /// The stream's first entry moved within the last hour: trimming is
    /// under way (a margin under `max_delay` matters only then, as in
    /// `RedisStreamsRetentionMarginLow`).
    pub trimmed_recently: bool,
    /// Seconds until trimming reaches unread entries at recent rates, when
    /// the margin is shrinking (see [`crate::trend`]).
    pub overtake_eta: Option<f64>,
}

impl Sample {
    /// Entries wait for the group: a known lag above 0, or the stream's
    /// last ID beyond the group's position.
    pub fn undelivered(&self) -> bool {
        match self.lag {
            Some(lag) => lag > 0,
            None => self.last_generated_id > self.last_delivered_id,
        }
    }

    fn has_work(&self) -> bool {
        self.undelivered() || self.pending > 0
    }
}

/// Lag seconds above which a group without a `max_delay` is `lagging`: the
/// shipped `RedisStreamsLagSecondsHigh` alert's threshold for such groups.
pub const DEFAULT_LAG_SECONDS_LAGGING: f64 = 300.0;

/// A trim-overtake ETA under this (or under `max_delay`, when longer) makes
/// a group `lagging`: the shipped `RedisStreamsTrimOvertakingGroup` alert's
/// horizon.
pub const OVERTAKE_HORIZON_SECONDS: f64 = 1800.0;

/// Settings of the evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Polls in a full window.
    pub window: usize,
    /// The window as a duration (polls × stream interval).
    pub window_duration: Duration,
    /// The stream's tolerated delay.
    pub max_delay: Option<Duration>,
    /// How often the stream's groups are read at least (batch consumers).
    pub read_every: Option<Duration>,
    /// How long work may wait unread before the group is `stopped` (or,
    /// while consumers read, `stalled`): the group's learned cadence with
    /// its tolerance, or the window while the cadence is unknown (see
    /// [`crate::cadence::patience`]).
    pub patience: Duration,
    /// How long the oldest pending entry may stay before the group is
    /// `stalled`: the patience, and at least twice how long its consumers
    /// hold entries before reading again (their handlers' time), or the
    /// window while that is unknown (see [`crate::cadence::pel_patience`]).
    pub pel_patience: Duration,
}

impl Settings {
    /// A duration in stream polls, rounded up, as the window counts them
    /// (the window's duration is its polls): the runs the `stalled` rules
    /// need.
    fn polls(&self, d: Duration) -> u16 {
        let polls = u32::try_from(self.window.max(1)).unwrap_or(u32::MAX);
        let interval = self.window_duration / polls;
        if interval.is_zero() {
            return u16::try_from(self.window).unwrap_or(u16::MAX);
        }
        let needed = d.as_nanos().div_ceil(interval.as_nanos()).max(1);
        u16::try_from(needed).unwrap_or(u16::MAX)
    }
}

/// The sliding window of one group, kept as run lengths: for each rule,
/// how many of the latest polls in a row satisfied it. "Every poll of the
/// window did X" is then "the run of X is at least the window", so memory
/// per group stays a few dozen bytes whatever the window's length.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Window {
    seen: u16,
    prev: Option<Previous>,
    /// Polls in a row with undelivered entries and the same position.
    position_stuck: u16,
    /// Polls in a row with pending entries and the same oldest pending ID.
    oldest_stuck: u16,
    /// Polls in a row with the same last-generated ID (no production).
    no_production: u16,
    /// Polls in a row with a known positive lag that did not decrease.
    lag_not_decreasing: u16,
    /// Polls since the lag last rose (0: it rose at the latest poll).
    since_lag_rose: u16,
    /// Polls since the position last moved.
    since_position_moved: u16,
}

/// What the next poll is compared with. IDs are only compared for
/// equality, so they are kept as 64-bit fingerprints (a collision would at
/// worst extend a run by one poll).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Previous {
    /// Lag, `u64::MAX` when unknown.
    lag: u64,
    undelivered: bool,
    last_delivered_id: u64,
    last_generated_id: u64,
    /// 0 when there is no pending entry.
    oldest_pending_id: u64,
}

fn fingerprint(id: StreamId) -> u64 {
    // Exact for IDs that differ only in ms or only in seq (each half is mixed
    // bijectively); other pairs collide only by chance.
    id.ms.rotate_left(21) ^ id.seq.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn fingerprint_opt(id: Option<StreamId>) -> u64 {
    id.map_or(0, |id| fingerprint(id) | 1)
}

fn bump(run: u16, holds: bool) -> u16 {
    if holds { run.saturating_add(1) } else { 0 }
}

impl Window {
    /// Adds the latest poll.
    pub fn push(&mut self, s: &Sample) {
        let undelivered = s.undelivered();
        let positive_lag = s.lag.is_some_and(|l| l > 0);
        let stuck_oldest = s.pending > 0 && s.oldest_pending_id.is_some();
        match self.prev {
            None => {
                self.position_stuck = u16::from(undelivered);
                self.oldest_stuck = u16::from(stuck_oldest);
                self.no_production = 1;
                self.lag_not_decreasing = u16::from(positive_lag);
                self.since_lag_rose = u16::MAX;
                self.since_position_moved = u16::MAX;
            }
            Some(p) => {
                let same_position = fingerprint(s.last_delivered_id) == p.last_delivered_id;
                self.position_stuck = if undelivered && same_position && p.undelivered {
                    self.position_stuck.saturating_add(1)
                } else {
                    u16::from(undelivered)
                };
                self.oldest_stuck = if stuck_oldest
                    && fingerprint_opt(s.oldest_pending_id) == p.oldest_pending_id
                {
                    self.oldest_stuck.saturating_add(1)
                } else {
                    u16::from(stuck_oldest)
                };
                self.no_production = bump(
                    self.no_production,
                    fingerprint(s.last_generated_id) == p.last_generated_id,
                )
                .max(1);
                let before = (p.lag != u64::MAX).then_some(p.lag);
                let rose = matches!((s.lag, before), (Some(now), Some(before)) if now > before);
                let held = matches!((s.lag, before), (Some(now), Some(before)) if now >= before);
                self.lag_not_decreasing = if positive_lag && held {
                    self.lag_not_decreasing.saturating_add(1)
                } else {
                    u16::from(positive_lag)
                };
                self.since_lag_rose = if rose {
                    0
                } else {
                    self.since_lag_rose.saturating_add(1)
                };
                self.since_position_moved = if same_position {
                    self.since_position_moved.saturating_add(1)
                } else {
                    0
                };
            }
        }
        self.seen = self.seen.saturating_add(1);
        self.prev = Some(Previous {
            lag: s.lag.unwrap_or(u64::MAX),
            undelivered,
            last_delivered_id: fingerprint(s.last_delivered_id),
            last_generated_id: fingerprint(s.last_generated_id),
            oldest_pending_id: fingerprint_opt(s.oldest_pending_id),
        });
    }
}

/// What a status rests on: the one-shot `check` reports a status only when
/// it saw what proves it, and `unknown` otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Basis {
    /// The latest poll proves it: data loss, work waiting with no consumer,
    /// lag seconds over half of `max_delay`, or no work at all (`ok`).
    Latest,
    /// The window proves it: stalled, lagging by its trend, stopped because
    /// nobody read for the whole window (Redis's last-read times say so,
    /// but a batch consumer between two runs looks the same to a shorter
    /// look), ok while work waits, or idle (no work, and nothing produced
    /// during the window; a shorter look knows only that there is no work).
    Window,
    /// Work waits and the window is not full yet: nothing is proven, and the
    /// daemon reports `ok`.
    Undecided,
}

/// The status after `latest` was pushed into `window`, what it rests on,
/// and the rule that decided it.
pub fn verdict(window: &Window, latest: &Sample, settings: &Settings) -> Verdict {
    let size = u16::try_from(settings.window).unwrap_or(u16::MAX);
    let full = window.seen >= size;
    let v = |status, basis, reason| Verdict {
        status,
        basis,
        reason,
    };
    // Only what the ledger proved: a loss counted now, or entries gone
    // after the group's position (it will never read them).
    if latest.loss_now {
        return v(GroupStatus::DataLoss, Basis::Latest, Reason::LossCounted);
    }
    if latest.gone_ahead > 0 {
        return v(
            GroupStatus::DataLoss,
            Basis::Latest,
            Reason::EntriesGoneAhead,
        );
    }
    // A loss held from earlier polls does not hide a group that stops or
    // stalls now: that is news, the old loss is not.
    let (status, basis, reason) = evaluate_now(window, latest, settings, full, size);
    if latest.recent_loss && !matches!(status, GroupStatus::Stopped | GroupStatus::Stalled) {
        v(GroupStatus::DataLoss, Basis::Latest, Reason::LossHeld)
    } else {
        v(status, basis, reason)
    }
}

/// The status from the window and the latest poll, a held loss aside.
fn evaluate_now(
    window: &Window,
    latest: &Sample,
    settings: &Settings,
    full: bool,
    size: u16,
) -> (GroupStatus, Basis, Reason) {
    if latest.has_work() {
        let stuck = latest
            .stuck
            .map(|s| (GroupStatus::Stalled, Basis::Latest, Reason::from(s)));
        if let Some(grace) = settings
            .read_every
            .map(|every| every + settings.window_duration)
        {
            // A batch consumer between two runs: the work waits for the next
            // one, and only a delay beyond what the business tolerates says
            // anything before the run is overdue. With no read known (a job
            // that died before the exporter started, or deletes its consumer
            // after each run), the run is overdue once the exporter has
            // watched the group for longer than the grace without a read. Not
            // by the age of the oldest entry waiting: a job that ran just
            // before the exporter started and left a backlog older than the
            // grace looks the same at the first poll.
            let grace_ms = grace.as_millis() as u64;
            let overdue = match latest.last_read_at_ms {
                Some(read_at) => latest.at_ms.saturating_sub(read_at) >= grace_ms,
                None => latest
                    .watched_since_ms
                    .is_some_and(|since| latest.at_ms.saturating_sub(since) >= grace_ms),
            };
            if overdue && latest.last_read_at_ms.is_none() {
                // Nobody is known to have read for longer than the run
                // allows: the job is stopped, whatever the window says.
                let reason = if latest.consumers == 0 {
                    Reason::NoConsumers
                } else {
                    Reason::RunOverdue
                };
                return (GroupStatus::Stopped, Basis::Latest, reason);
            }
            if !overdue {
                let late = matches!(
                    (settings.max_delay, latest.lag_seconds),
                    (Some(max), Some(age)) if age > max.as_secs_f64()
                );
                return if let Some(stuck) = stuck {
                    stuck
                } else if late {
                    (GroupStatus::Lagging, Basis::Latest, Reason::PastMaxDelay)
                } else {
                    (GroupStatus::Ok, Basis::Latest, Reason::BetweenRuns)
                };
            }
        }
        if latest.consumers == 0 {
            return (GroupStatus::Stopped, Basis::Latest, Reason::NoConsumers);
        }
        let no_read = if settings.read_every.is_some() {
            Reason::RunOverdue
        } else {
            Reason::NoRead
        };
        let silent = latest.last_read_at_ms.is_some_and(|read_at| {
            latest.at_ms.saturating_sub(read_at) >= settings.patience.as_millis() as u64
        });
        if silent {
            return (GroupStatus::Stopped, Basis::Window, no_read);
        }
        // Poison, ghosts or orphans need no window: stopped (nobody reads at
        // all) says more, and was judged first.
        if let Some(stuck) = stuck {
            return stuck;
        }
        let (stall, pel_stall) = (
            settings.polls(settings.patience),
            settings.polls(settings.pel_patience),
        );
        if window.seen >= stall && window.position_stuck >= stall {
            return (GroupStatus::Stalled, Basis::Window, Reason::PositionStuck);
        }
        if window.seen >= pel_stall && window.oldest_stuck >= pel_stall {
            return (
                GroupStatus::Stalled,
                Basis::Window,
                Reason::OldestPendingStuck,
            );
        }
        // The thresholds of the shipped lag alerts: half of `max_delay`,
        // or 300 s where none is set.
        let half = settings
            .max_delay
            .map_or(DEFAULT_LAG_SECONDS_LAGGING, |d| d.as_secs_f64() / 2.0);
        if latest.lag_seconds.is_some_and(|age| age > half) {
            return (GroupStatus::Lagging, Basis::Latest, Reason::LagSeconds);
        }
        // Trimming closing in on unread entries within the horizon of the
        // overtake alert, or closer than the business tolerates.
        let max_delay = settings.max_delay.map(|d| d.as_secs_f64());
        let horizon = max_delay.map_or(OVERTAKE_HORIZON_SECONDS, |d| {
            d.max(OVERTAKE_HORIZON_SECONDS)
        });
        let closing_in = latest.overtake_eta.is_some_and(|eta| eta < horizon);
        let margin_short = matches!(
            (latest.retention_margin, max_delay),
            (Some(margin), Some(max)) if margin < max && latest.trimmed_recently
        );
        if closing_in {
            return (GroupStatus::Lagging, Basis::Latest, Reason::TrimOvertake);
        }
        if margin_short {
            return (GroupStatus::Lagging, Basis::Latest, Reason::RetentionMargin);
        }
        match (settings.max_delay, latest.lag_seconds) {
            (Some(_), Some(_)) => {}
            _ => {
                // Positive and never decreasing over the whole window, risen
                // within it, while the group advanced within it.
                let within = size.saturating_sub(2);
                let growing = full
                    && window.lag_not_decreasing >= size
                    && window.since_lag_rose <= within
                    && window.since_position_moved <= within;
                if growing {
                    return (GroupStatus::Lagging, Basis::Window, Reason::LagGrowing);
                }
            }
        }
        return if full {
            (GroupStatus::Ok, Basis::Window, Reason::WithinLimits)
        } else {
            (GroupStatus::Ok, Basis::Undecided, Reason::Undecided)
        };
    }
    // Nothing to do is proven by the latest poll; that nothing was produced
    // either ("idle" rather than "ok") is a fact about the window.
    if window.no_production >= window.seen.min(size) {
        (GroupStatus::Idle, Basis::Window, Reason::NoWork)
    } else {
        (GroupStatus::Ok, Basis::Latest, Reason::KeepingUp)
    }
}

#[cfg(test)]
mod tests;
