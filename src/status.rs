//! Group status (SPEC §6): one word per group, judged over a sliding window of
//! stream polls, Burrow-style but without its false alarms on quiet streams.
//!
//! Pure: the poller pushes each poll's [`Sample`] into the group's
//! [`Window`], and [`evaluate`] judges the window and the latest sample.
//! Rules in order:
//! 1. `data_loss`: entries were removed before the group read them: the
//!    group is behind a trim that took unread entries, or a loss was counted
//!    at this poll. A loss counted within `data_loss_hold` holds the status
//!    after the group caught up, unless the group is `stopped` or `stalled`
//!    now (news that an old loss must not hide).
//! 2. `stopped`: there is work (undelivered or pending entries) and no
//!    consumer has read successfully for the whole window (or the group has no
//!    consumers). Judged from the consumers' last successful read, so it holds
//!    from the first poll on.
//! 3. `stalled`: there is work, consumers read, but over a full window the
//!    last-delivered-id never moved while entries waited, or the oldest pending
//!    entry stayed the same (a message retried forever).
//! 4. `lagging`: lag seconds above half of `max_delay`; without a `max_delay`,
//!    lag above 0 in every poll of a full window and never decreasing while the
//!    group advances.
//! 5. `idle`: nothing produced during the window, nothing pending, nothing
//!    undelivered.
//! 6. `ok` otherwise: lag reached 0 in the window, or lag seconds stay under
//!    half of `max_delay`, or the window is too short to say more.
//!
//! A quiet stream (no production, nothing pending) is never `stopped` or
//! `stalled`, whatever its consumers do, because there is no work.

use std::time::Duration;

use crate::backend::StreamId;

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
    /// Entries trimmed before the group read them.
    pub trimmed_undelivered: Option<u64>,
    /// A loss was counted at this poll (see [`crate::loss`]).
    pub loss_now: bool,
    /// A loss was counted within `data_loss_hold`.
    pub recent_loss: bool,
    /// Smallest pending ID from the latest pending summary.
    pub oldest_pending_id: Option<StreamId>,
    /// Server time (ms) of the most recent successful read by any consumer;
    /// `Some(0)` when no consumer ever read; `None` when not yet known.
    pub last_read_at_ms: Option<u64>,
}

impl Sample {
    fn undelivered(&self) -> bool {
        match self.lag {
            Some(lag) => lag > 0,
            None => self.last_generated_id > self.last_delivered_id,
        }
    }

    fn has_work(&self) -> bool {
        self.undelivered() || self.pending > 0
    }
}

/// Settings of the evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Polls in a full window.
    pub window: usize,
    /// The window as a duration (polls × stream interval).
    pub window_duration: Duration,
    /// The stream's tolerated delay.
    pub max_delay: Option<Duration>,
}

/// The sliding window of one group, kept as run lengths: for each rule,
/// how many of the latest polls in a row satisfied it. "Every poll of the
/// window did X" is then "the run of X is at least the window", so memory
/// per group stays a few dozen bytes whatever the window's length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// The status after `latest` was pushed into `window`, and what it rests on.
pub fn judge(window: &Window, latest: &Sample, settings: &Settings) -> (GroupStatus, Basis) {
    let size = u16::try_from(settings.window).unwrap_or(u16::MAX);
    let full = window.seen >= size;
    if latest.loss_now || latest.trimmed_undelivered.is_some_and(|t| t > 0) {
        return (GroupStatus::DataLoss, Basis::Latest);
    }
    // A loss held from earlier polls does not hide a group that stops or
    // stalls now: that is news, the old loss is not.
    let (status, basis) = evaluate_now(window, latest, settings, full, size);
    if latest.recent_loss && !matches!(status, GroupStatus::Stopped | GroupStatus::Stalled) {
        (GroupStatus::DataLoss, Basis::Latest)
    } else {
        (status, basis)
    }
}

/// The status from the window and the latest poll, a held loss aside.
fn evaluate_now(
    window: &Window,
    latest: &Sample,
    settings: &Settings,
    full: bool,
    size: u16,
) -> (GroupStatus, Basis) {
    if latest.has_work() {
        if latest.consumers == 0 {
            return (GroupStatus::Stopped, Basis::Latest);
        }
        let silent = latest.last_read_at_ms.is_some_and(|read_at| {
            latest.at_ms.saturating_sub(read_at) >= settings.window_duration.as_millis() as u64
        });
        if silent {
            return (GroupStatus::Stopped, Basis::Window);
        }
        if full && (window.position_stuck >= size || window.oldest_stuck >= size) {
            return (GroupStatus::Stalled, Basis::Window);
        }
        let half = settings.max_delay.map(|d| d.as_secs_f64() / 2.0);
        match (half, latest.lag_seconds) {
            (Some(half), Some(age)) => {
                if age > half {
                    return (GroupStatus::Lagging, Basis::Latest);
                }
            }
            _ => {
                // Positive and never decreasing over the whole window, risen
                // within it, while the group advanced within it.
                let within = size.saturating_sub(2);
                let growing = full
                    && window.lag_not_decreasing >= size
                    && window.since_lag_rose <= within
                    && window.since_position_moved <= within;
                if growing {
                    return (GroupStatus::Lagging, Basis::Window);
                }
            }
        }
        let basis = if full {
            Basis::Window
        } else {
            Basis::Undecided
        };
        return (GroupStatus::Ok, basis);
    }
    // Nothing to do is proven by the latest poll; that nothing was produced
    // either ("idle" rather than "ok") is a fact about the window.
    if window.no_production >= window.seen.min(size) {
        (GroupStatus::Idle, Basis::Window)
    } else {
        (GroupStatus::Ok, Basis::Latest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    fn status_of(samples: &[Sample], settings: &Settings) -> GroupStatus {
        let mut window = Window::default();
        for s in samples {
            window.push(s);
        }
        judge(&window, samples.last().unwrap(), settings).0
    }

    fn settings(max_delay: Option<u64>) -> Settings {
        Settings {
            window: 5,
            window_duration: Duration::from_secs(75),
            max_delay: max_delay.map(Duration::from_secs),
        }
    }

    fn sample(i: u64) -> Sample {
        Sample {
            at_ms: 1_800_000_000_000 + i * 15_000,
            lag: Some(0),
            lag_seconds: Some(0.0),
            last_delivered_id: StreamId::new(100 + i, 0),
            last_generated_id: StreamId::new(100 + i, 0),
            pending: 0,
            consumers: 2,
            trimmed_undelivered: Some(0),
            loss_now: false,
            recent_loss: false,
            oldest_pending_id: None,
            last_read_at_ms: Some(1_800_000_000_000 + i * 15_000),
        }
    }

    fn run(f: impl Fn(u64, &mut Sample), max_delay: Option<u64>) -> GroupStatus {
        let samples: Vec<Sample> = (0..5)
            .map(|i| {
                let mut s = sample(i);
                f(i, &mut s);
                s
            })
            .collect();
        status_of(&samples, &settings(max_delay))
    }

    #[test]
    fn healthy_group_is_ok() {
        assert_eq!(run(|_, _| {}, Some(300)), GroupStatus::Ok);
    }

    #[test]
    fn quiet_stream_is_idle_not_stopped() {
        // No production for the whole window, consumers gone quiet for an hour.
        let st = run(
            |_, s| {
                s.last_generated_id = StreamId::new(50, 0);
                s.last_delivered_id = StreamId::new(50, 0);
                s.last_read_at_ms = Some(s.at_ms - 60 * MIN);
            },
            Some(300),
        );
        assert_eq!(st, GroupStatus::Idle);
        // Even with no consumers at all.
        let st = run(
            |_, s| {
                s.last_generated_id = StreamId::new(50, 0);
                s.last_delivered_id = StreamId::new(50, 0);
                s.consumers = 0;
            },
            None,
        );
        assert_eq!(st, GroupStatus::Idle);
    }

    #[test]
    fn data_loss_wins() {
        let st = run(
            |i, s| s.trimmed_undelivered = Some(if i == 4 { 3 } else { 0 }),
            Some(300),
        );
        assert_eq!(st, GroupStatus::DataLoss);
        // A loss counted within the hold, after the group caught up.
        let st = run(|i, s| s.recent_loss = i == 4, Some(300));
        assert_eq!(st, GroupStatus::DataLoss);
        // ...does not hide a group that stops now.
        let st = run(
            |i, s| {
                s.recent_loss = true;
                s.last_delivered_id = StreamId::new(100, 0);
                s.lag = Some(10 + i);
                s.last_read_at_ms = Some(1_800_000_000_000 - 10 * MIN);
            },
            Some(300),
        );
        assert_eq!(st, GroupStatus::Stopped);
        // A loss at this poll wins over everything.
        let st = run(
            |i, s| {
                s.loss_now = i == 4;
                s.consumers = 0;
                s.lag = Some(5);
            },
            Some(300),
        );
        assert_eq!(st, GroupStatus::DataLoss);
    }

    #[test]
    fn stopped_when_nobody_reads_while_work_waits() {
        let st = run(
            |i, s| {
                s.last_delivered_id = StreamId::new(100, 0);
                s.lag = Some(10 + i);
                s.last_read_at_ms = Some(1_800_000_000_000 - 10 * MIN);
            },
            Some(300),
        );
        assert_eq!(st, GroupStatus::Stopped);
        // With no consumers, from the first poll.
        let one = vec![Sample {
            consumers: 0,
            lag: Some(3),
            ..sample(0)
        }];
        assert_eq!(status_of(&one, &settings(None)), GroupStatus::Stopped);
        // Pending entries with a dead consumer count as work too.
        let st = run(
            |_, s| {
                s.pending = 4;
                s.last_read_at_ms = Some(0);
            },
            None,
        );
        assert_eq!(st, GroupStatus::Stopped);
    }

    #[test]
    fn stalled_when_position_does_not_move_but_consumers_read() {
        let st = run(
            |_, s| {
                s.last_delivered_id = StreamId::new(100, 0);
                s.lag = Some(20);
                s.lag_seconds = Some(10.0);
            },
            Some(300),
        );
        assert_eq!(st, GroupStatus::Stalled);
    }

    #[test]
    fn stalled_when_the_same_entry_stays_oldest_pending() {
        let st = run(
            |_, s| {
                s.pending = 3;
                s.oldest_pending_id = Some(StreamId::new(42, 0));
            },
            Some(300),
        );
        assert_eq!(st, GroupStatus::Stalled);
        // A moving oldest pending entry is normal at-least-once processing.
        let st = run(
            |i, s| {
                s.pending = 3;
                s.oldest_pending_id = Some(StreamId::new(42 + i, 0));
            },
            Some(300),
        );
        assert_eq!(st, GroupStatus::Ok);
    }

    #[test]
    fn stalled_needs_a_full_window() {
        let samples: Vec<Sample> = (0..3)
            .map(|_| Sample {
                last_delivered_id: StreamId::new(100, 0),
                lag: Some(20),
                ..sample(0)
            })
            .collect();
        assert_eq!(status_of(&samples, &settings(Some(300))), GroupStatus::Ok);
    }

    #[test]
    fn lagging_by_time_against_max_delay() {
        let st = run(
            |i, s| {
                s.lag = Some(5);
                s.lag_seconds = Some(if i == 4 { 200.0 } else { 10.0 });
            },
            Some(300),
        );
        assert_eq!(st, GroupStatus::Lagging);
        // Under half of max_delay it is ok even if lag grows.
        let st = run(
            |i, s| {
                s.lag = Some(5 + i);
                s.lag_seconds = Some(30.0);
            },
            Some(300),
        );
        assert_eq!(st, GroupStatus::Ok);
    }

    #[test]
    fn lagging_by_trend_without_max_delay() {
        let st = run(|i, s| s.lag = Some(10 + i * 5), None);
        assert_eq!(st, GroupStatus::Lagging);
        // Lag that touched zero in the window is ok.
        let st = run(|i, s| s.lag = Some(if i == 2 { 0 } else { 10 + i }), None);
        assert_eq!(st, GroupStatus::Ok);
    }

    /// The window slides: a stall is judged on the latest polls only, and a
    /// single move of the position ends it.
    #[test]
    fn window_slides_over_longer_histories() {
        let stuck = |i: u64, s: &mut Sample| {
            s.last_delivered_id = StreamId::new(if i < 3 { 100 + i } else { 103 }, 0);
            s.lag = Some(20);
            s.lag_seconds = Some(10.0);
        };
        let history: Vec<Sample> = (0..8)
            .map(|i| {
                let mut s = sample(i);
                stuck(i, &mut s);
                s
            })
            .collect();
        // Positions 100, 101, 102, then 103 five times: stalled.
        assert_eq!(
            status_of(&history, &settings(Some(300))),
            GroupStatus::Stalled
        );
        assert_eq!(
            status_of(&history[..7], &settings(Some(300))),
            GroupStatus::Ok,
            "only four polls at 103"
        );
        let mut moved = history.clone();
        let mut next = sample(8);
        stuck(8, &mut next);
        next.last_delivered_id = StreamId::new(104, 0);
        moved.push(next);
        assert_eq!(status_of(&moved, &settings(Some(300))), GroupStatus::Ok);
    }

    /// What each status rests on: only what a short look cannot tell apart
    /// from a healthy group is `Window` or `Undecided`.
    #[test]
    fn what_each_status_rests_on() {
        let judge_all = |f: &dyn Fn(u64, &mut Sample), n: u64, max_delay: Option<u64>| {
            let mut window = Window::default();
            let mut last = None;
            for i in 0..n {
                let mut s = sample(i);
                f(i, &mut s);
                window.push(&s);
                last = Some(s);
            }
            judge(&window, &last.unwrap(), &settings(max_delay))
        };
        let loss = |_: u64, s: &mut Sample| s.trimmed_undelivered = Some(2);
        assert_eq!(
            judge_all(&loss, 1, None),
            (GroupStatus::DataLoss, Basis::Latest)
        );
        let nobody = |_: u64, s: &mut Sample| {
            s.consumers = 0;
            s.lag = Some(3);
        };
        assert_eq!(
            judge_all(&nobody, 1, None),
            (GroupStatus::Stopped, Basis::Latest)
        );
        // Silent consumers: a batch job between runs looks the same.
        let silent = |_: u64, s: &mut Sample| {
            s.lag = Some(3);
            s.last_read_at_ms = Some(s.at_ms - 10 * MIN);
        };
        assert_eq!(
            judge_all(&silent, 1, None),
            (GroupStatus::Stopped, Basis::Window)
        );
        let late = |_: u64, s: &mut Sample| {
            s.lag = Some(5);
            s.lag_seconds = Some(200.0);
        };
        assert_eq!(
            judge_all(&late, 1, Some(300)),
            (GroupStatus::Lagging, Basis::Latest)
        );
        let stuck = |_: u64, s: &mut Sample| {
            s.pending = 3;
            s.oldest_pending_id = Some(StreamId::new(42, 0));
        };
        assert_eq!(
            judge_all(&stuck, 5, None),
            (GroupStatus::Stalled, Basis::Window)
        );
        // The same group seen twice: nothing proven either way.
        assert_eq!(
            judge_all(&stuck, 2, None),
            (GroupStatus::Ok, Basis::Undecided)
        );
        let busy = |i: u64, s: &mut Sample| {
            s.pending = 3;
            s.oldest_pending_id = Some(StreamId::new(42 + i, 0));
        };
        assert_eq!(judge_all(&busy, 5, None), (GroupStatus::Ok, Basis::Window));
        assert_eq!(
            judge_all(&|_, _| {}, 1, None),
            (GroupStatus::Idle, Basis::Window)
        );
        let produced = |i: u64, s: &mut Sample| s.last_generated_id = StreamId::new(100 + i, 0);
        let produced_and_read = |i: u64, s: &mut Sample| {
            produced(i, s);
            s.last_delivered_id = s.last_generated_id;
        };
        assert_eq!(
            judge_all(&produced_and_read, 2, None),
            (GroupStatus::Ok, Basis::Latest)
        );
    }

    #[test]
    fn unknown_lag_with_unread_entries_is_work() {
        let st = run(
            |_, s| {
                s.lag = None;
                s.lag_seconds = None;
                s.last_delivered_id = StreamId::new(90, 0);
                s.last_read_at_ms = Some(0);
            },
            None,
        );
        assert_eq!(st, GroupStatus::Stopped);
    }
}
