use super::*;

/// The status and what it rests on.
fn judge(window: &Window, latest: &Sample, settings: &Settings) -> (GroupStatus, Basis) {
    let v = verdict(window, latest, settings);
    (v.status, v.basis)
}

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
        read_every: None,
        patience: Duration::from_secs(75),
        pel_patience: Duration::from_secs(75),
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
        loss_now: false,
        recent_loss: false,
        gone_ahead: 0,
        oldest_pending_id: None,
        last_read_at_ms: Some(1_800_000_000_000 + i * 15_000),
        watched_since_ms: Some(1_800_000_000_000),
        stuck: None,
        retention_margin: None,
        trimmed_recently: true,
        overtake_eta: None,
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
    let st = run(|i, s| s.loss_now = i == 4, Some(300));
    assert_eq!(st, GroupStatus::DataLoss);
    // Entries proven gone after the group's position.
    let st = run(|i, s| s.gone_ahead = if i == 4 { 3 } else { 0 }, Some(300));
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
    assert_eq!(
        status_of(&samples, &settings(Some(300))),
        GroupStatus::WarmingUp
    );
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
    let loss = |_: u64, s: &mut Sample| s.loss_now = true;
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
        (GroupStatus::WarmingUp, Basis::Undecided)
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

/// A batch consumer that reads every 4 minutes: work waits between runs,
/// nobody reads for longer than the window, the position stands still. With
/// `read_every` it is `ok` until the run is overdue by the window, then
/// `stopped`; without, it cycles through `stalled` and `stopped`.
#[test]
fn a_batch_consumer_is_ok_between_runs_and_stopped_once_overdue() {
    let batch = |since_read_ms: u64, read_every: Option<u64>, max_delay: Option<u64>| {
        let samples: Vec<Sample> = (0..5)
            .map(|i| {
                let mut s = sample(i);
                s.lag = Some(40);
                s.lag_seconds = Some(since_read_ms as f64 / 1000.0);
                s.last_delivered_id = StreamId::new(100, 0);
                s.last_generated_id = StreamId::new(100 + i, 0);
                s.last_read_at_ms = Some(sample(4).at_ms - since_read_ms);
                s
            })
            .collect();
        let settings = Settings {
            read_every: read_every.map(Duration::from_secs),
            ..settings(max_delay)
        };
        status_of(&samples, &settings)
    };
    // 3 minutes since the last run, runs every 4: ok, with or without a
    // max_delay it is under.
    assert_eq!(batch(3 * MIN, Some(240), None), GroupStatus::Ok);
    assert_eq!(batch(3 * MIN, Some(240), Some(600)), GroupStatus::Ok);
    // Without read_every, the same group is stopped (nobody read for the
    // whole window).
    assert_eq!(batch(3 * MIN, None, None), GroupStatus::Stopped);
    // Waiting longer than the business tolerates is lagging, not stopped.
    assert_eq!(batch(3 * MIN, Some(240), Some(120)), GroupStatus::Lagging);
    // Overdue: read_every (4 min) + the window (75 s) passed without a read.
    assert_eq!(
        batch(5 * MIN + 15_000, Some(240), None),
        GroupStatus::Stopped
    );
    // An hourly job in the middle of its hour.
    assert_eq!(batch(30 * MIN, Some(3600), None), GroupStatus::Ok);
}

/// A batch job that died before the exporter started (or deletes its
/// consumer after each run): no read is known. It is `ok` between runs
/// while the exporter's watch is younger than `read_every` plus the
/// window, however old the oldest waiting entry (a job that ran just before
/// the exporter started may leave an old backlog), and `stopped` once the
/// watch is older.
#[test]
fn a_batch_job_with_no_known_read_is_stopped_once_overdue() {
    let judge = |oldest_s: f64, watched_ms: u64, consumers: u64| {
        let samples: Vec<Sample> = (0..5)
            .map(|i| {
                let mut s = sample(i);
                s.lag = Some(40);
                s.lag_seconds = Some(oldest_s);
                s.last_delivered_id = StreamId::new(100, 0);
                s.last_read_at_ms = None;
                s.watched_since_ms = Some(sample(4).at_ms - watched_ms);
                s.consumers = consumers;
                s
            })
            .collect();
        let settings = Settings {
            read_every: Some(Duration::from_secs(240)),
            ..settings(None)
        };
        let mut window = Window::default();
        for s in &samples {
            window.push(s);
        }
        let v = verdict(&window, samples.last().unwrap(), &settings);
        (v.status, v.reason)
    };
    // Within the grace (4 min + 75 s): between runs.
    assert_eq!(
        judge(120.0, 60_000, 1),
        (GroupStatus::Ok, Reason::BetweenRuns)
    );
    // The oldest entry waited longer than the grace, but the watch is
    // young: a run may have just left it.
    assert_eq!(
        judge(400.0, 60_000, 1),
        (GroupStatus::Ok, Reason::BetweenRuns)
    );
    // Watched longer than the grace without a read: the run is overdue.
    assert_eq!(
        judge(400.0, 6 * MIN, 1),
        (GroupStatus::Stopped, Reason::RunOverdue)
    );
    assert_eq!(
        judge(400.0, 6 * MIN, 0),
        (GroupStatus::Stopped, Reason::NoConsumers)
    );
    // IDs not time: no age, the watch alone.
    assert_eq!(
        judge(f64::NAN, 6 * MIN, 1),
        (GroupStatus::Stopped, Reason::RunOverdue)
    );
}

/// Without read_every, the group's learned cadence sets the patience: a
/// batch job learned at 4 minutes is judged as with read_every = 8 minutes;
/// a streaming group learned at the polls' resolution is stopped after 4
/// polls (60 s), not a window.
#[test]
fn the_learned_cadence_sets_how_long_work_may_wait() {
    let silent_for = |since_read_ms: u64, cadence: Option<Duration>| {
        let read_at = sample(4).at_ms - since_read_ms;
        let samples: Vec<Sample> = (0..5)
            .map(|i| {
                let mut s = sample(i);
                s.lag = Some(40);
                s.lag_seconds = Some(since_read_ms as f64 / 1000.0);
                // The position moved with every read.
                let moved = (0..=i).filter(|&j| sample(j).at_ms <= read_at).count();
                s.last_delivered_id = StreamId::new(100 + moved as u64, 0);
                s.last_generated_id = StreamId::new(100 + i, 0);
                s.last_read_at_ms = Some(sample(4).at_ms - since_read_ms);
                s
            })
            .collect();
        // As the stream probe sets them.
        let window = Duration::from_secs(75);
        let settings = Settings {
            patience: crate::cadence::patience(cadence, Duration::from_secs(15), window),
            read_every: crate::cadence::reads_in_runs(cadence, window),
            ..settings(None)
        };
        status_of(&samples, &settings)
    };
    // A batch job learned at 4 minutes reads in runs: judged as with
    // read_every = 8 minutes, overdue after 8 minutes and the window (75 s),
    // and its lag of more than 300 s is not lagging before that.
    let batch = Some(Duration::from_secs(240));
    assert_eq!(silent_for(5 * MIN, batch), GroupStatus::Ok);
    assert_eq!(silent_for(9 * MIN, batch), GroupStatus::Ok);
    assert_eq!(silent_for(9 * MIN + 15_000, batch), GroupStatus::Stopped);
    let streaming = Some(Duration::from_secs(14));
    assert_eq!(silent_for(30_000, streaming), GroupStatus::Ok);
    assert_eq!(silent_for(60_000, streaming), GroupStatus::Stopped);
    // Unknown: the window (75 s here).
    assert_eq!(silent_for(45_000, None), GroupStatus::Ok);
    assert_eq!(silent_for(75_000, None), GroupStatus::Stopped);
}

/// A group whose consumers read but whose oldest pending entry stays is
/// stalled once it stayed for the PEL's patience in polls: 60 s (4 polls)
/// for a streaming group whose consumers hold entries briefly, the window
/// (75 s, 5 polls here) while either is unknown, longer for long handlers.
#[test]
fn stalled_waits_for_the_patience_in_polls() {
    let stalled_after = |cadence: Option<Duration>, holds: Option<Duration>| {
        let window = Duration::from_secs(75);
        let patience = crate::cadence::patience(cadence, Duration::from_secs(15), window);
        let settings = Settings {
            patience,
            pel_patience: crate::cadence::pel_patience(patience, holds, window),
            ..settings(None)
        };
        let mut window = Window::default();
        (0..10)
            .find(|&i| {
                let mut s = sample(i);
                s.pending = 4;
                s.oldest_pending_id = Some(StreamId::new(90, 0));
                window.push(&s);
                judge(&window, &s, &settings).0 == GroupStatus::Stalled
            })
            .map(|i| i + 1)
    };
    let secs = |s| Some(Duration::from_secs(s));
    // Consumers that hold entries a second: 60 s, 4 polls.
    assert_eq!(stalled_after(secs(10), secs(1)), Some(4));
    // Holds not learned yet: the window (75 s, 5 polls).
    assert_eq!(stalled_after(secs(10), None), Some(5));
    assert_eq!(stalled_after(None, None), Some(5));
    // A group read every minute: 120 s, 8 polls.
    assert_eq!(stalled_after(secs(60), secs(1)), Some(8));
    // Handlers that take 2 minutes: the oldest entry may stay 4.
    assert_eq!(stalled_after(secs(10), secs(120)), None);
}

/// A NOACK reader keeps up; the server never marks its consumers active
/// (last read unknown or "never"), but the group moves: the poller folds the
/// progress into `last_read_at_ms`, and the group is ok.
#[test]
fn a_group_that_moves_is_read_whatever_its_consumers_say() {
    let st = run(
        |i, s| {
            s.lag = Some(3);
            s.last_generated_id = StreamId::new(103 + i, 0);
            // The progress of this poll, folded in by the stream probe.
            s.last_read_at_ms = Some(s.at_ms);
        },
        None,
    );
    assert_eq!(st, GroupStatus::Ok);
    // The consumers' fields alone ("never read"), no progress: stopped.
    let st = run(
        |i, s| {
            s.lag = Some(3);
            s.last_generated_id = StreamId::new(103 + i, 0);
            s.last_delivered_id = StreamId::new(100, 0);
            s.last_read_at_ms = Some(0);
        },
        None,
    );
    assert_eq!(st, GroupStatus::Stopped);
}

/// Poison, ghosts or orphaned entries seen by the slow probes make the group
/// stalled at the poll that sees them, not a window later; a batch
/// consumer's grace does not hide them.
#[test]
fn evidence_makes_a_group_stalled_at_once() {
    let one = |read_every: Option<u64>| {
        let mut s = sample(0);
        s.pending = 3;
        s.stuck = Some(Stuck::Orphaned);
        let settings = Settings {
            read_every: read_every.map(Duration::from_secs),
            ..settings(None)
        };
        let mut window = Window::default();
        window.push(&s);
        judge(&window, &s, &settings)
    };
    assert_eq!(one(None), (GroupStatus::Stalled, Basis::Latest));
    assert_eq!(one(Some(3600)), (GroupStatus::Stalled, Basis::Latest));
    // Without work there is nothing stuck.
    let mut s = sample(0);
    s.stuck = Some(Stuck::Orphaned);
    let mut window = Window::default();
    window.push(&s);
    assert_eq!(judge(&window, &s, &settings(None)).0, GroupStatus::Idle);
}

/// The conditions of the shipped lag and overtake alerts make the group
/// lagging at the poll that shows them.
#[test]
fn what_the_lag_and_overtake_alerts_see_is_lagging() {
    let with = |f: &dyn Fn(&mut Sample), max_delay: Option<u64>| {
        let mut s = sample(0);
        s.lag = Some(10);
        s.lag_seconds = Some(5.0);
        f(&mut s);
        let mut window = Window::default();
        window.push(&s);
        judge(&window, &s, &settings(max_delay)).0
    };
    assert_eq!(with(&|_| {}, None), GroupStatus::WarmingUp);
    // Lag seconds over 300 s without a max_delay (RedisStreamsLagSecondsHigh).
    assert_eq!(
        with(&|s| s.lag_seconds = Some(301.0), None),
        GroupStatus::Lagging
    );
    assert_eq!(
        with(&|s| s.lag_seconds = Some(299.0), None),
        GroupStatus::WarmingUp
    );
    // An overtake ETA under 30 minutes, or under a longer max_delay.
    assert_eq!(
        with(&|s| s.overtake_eta = Some(1_700.0), None),
        GroupStatus::Lagging
    );
    assert_eq!(
        with(&|s| s.overtake_eta = Some(1_900.0), None),
        GroupStatus::WarmingUp
    );
    assert_eq!(
        with(&|s| s.overtake_eta = Some(3_000.0), Some(3_600)),
        GroupStatus::Lagging
    );
    // A margin under max_delay, even when it does not shrink.
    assert_eq!(
        with(&|s| s.retention_margin = Some(50.0), Some(60)),
        GroupStatus::Lagging
    );
    assert_eq!(
        with(&|s| s.retention_margin = Some(70.0), Some(60)),
        GroupStatus::WarmingUp
    );
    // A stream nobody trimmed within the hour: its first entry is no edge.
    assert_eq!(
        with(
            &|s| {
                s.retention_margin = Some(50.0);
                s.trimmed_recently = false;
            },
            Some(60)
        ),
        GroupStatus::WarmingUp
    );
    // Without a max_delay, a margin alone threatens nothing.
    assert_eq!(
        with(&|s| s.retention_margin = Some(5.0), None),
        GroupStatus::WarmingUp
    );
}

/// Every status comes with the rule that decided it.
#[test]
fn each_status_says_why() {
    let why = |f: &dyn Fn(u64, &mut Sample), max_delay: Option<u64>| {
        let mut window = Window::default();
        let mut last = None;
        for i in 0..5 {
            let mut s = sample(i);
            f(i, &mut s);
            window.push(&s);
            last = Some(s);
        }
        let v = verdict(&window, &last.unwrap(), &settings(max_delay));
        (v.status.label(), v.reason.label())
    };
    let waiting = |i: u64, s: &mut Sample| {
        s.lag = Some(5);
        s.lag_seconds = Some(10.0);
        s.last_generated_id = StreamId::new(110 + i, 0);
    };
    assert_eq!(why(&|_, _| {}, None), ("ok", "keeping_up"));
    assert_eq!(
        why(
            &|i, s| {
                waiting(i, s);
                s.consumers = 0;
            },
            None
        ),
        ("stopped", "no_consumers")
    );
    assert_eq!(
        why(
            &|i, s| {
                waiting(i, s);
                s.last_read_at_ms = Some(s.at_ms - 10 * MIN);
            },
            None
        ),
        ("stopped", "no_read")
    );
    for (stuck, reason) in [
        (Stuck::Poison, "poison"),
        (Stuck::Ghost, "ghost"),
        (Stuck::Orphaned, "orphaned"),
    ] {
        let f = move |i: u64, s: &mut Sample| {
            waiting(i, s);
            s.stuck = Some(stuck);
        };
        assert_eq!(why(&f, None), ("stalled", reason));
    }
    assert_eq!(
        why(
            &|i, s| {
                waiting(i, s);
                s.last_delivered_id = StreamId::new(100, 0);
            },
            None
        ),
        ("stalled", "position_stuck")
    );
    assert_eq!(
        why(
            &|i, s| {
                waiting(i, s);
                s.lag_seconds = Some(400.0);
            },
            None
        ),
        ("lagging", "lag_seconds")
    );
    assert_eq!(
        why(
            &|i, s| {
                waiting(i, s);
                s.overtake_eta = Some(60.0);
            },
            None
        ),
        ("lagging", "trim_overtake")
    );
    assert_eq!(
        why(
            &|_, s| {
                s.loss_now = true;
            },
            None
        ),
        ("data_loss", "loss_counted")
    );
    assert_eq!(
        why(
            &|_, s| {
                s.recent_loss = true;
            },
            None
        ),
        ("data_loss", "loss_held")
    );
    assert_eq!(
        why(
            &|_, s| {
                s.last_generated_id = StreamId::new(50, 0);
                s.last_delivered_id = StreamId::new(50, 0);
            },
            None
        ),
        ("idle", "no_work")
    );
}

/// Not judged yet has one word, `warming_up`, with how long until the
/// group is judged: while its window fills, or while nobody has read
/// since it was first polled, so that a group stopped before the exporter
/// started goes from `warming_up` straight to `stopped`, never through
/// `stalled`.
#[test]
fn not_judged_yet_is_warming_up_until_judged() {
    let settings = settings(None);
    let mut window = Window::default();
    let mut s = sample(0);
    s.lag = Some(3);
    s.lag_seconds = Some(2.0);
    s.last_generated_id = StreamId::new(110, 0);
    window.push(&s);
    let v = verdict(&window, &s, &settings);
    assert_eq!(
        (v.status, v.reason),
        (GroupStatus::WarmingUp, Reason::WindowFilling)
    );
    assert_eq!(v.status.label(), "warming_up");
    assert_eq!(v.reason.label(), "window_filling");
    // Five polls of 15 s: four to come.
    assert_eq!(v.judged_in, Some(Duration::from_secs(60)));
    assert_eq!(GroupStatus::word(None), "warming_up");

    // Stopped 40 s before the first poll, holding entries its consumers
    // no longer read (orphaned), its position still: warming up until its
    // patience (75 s) has passed since the last read, then stopped.
    let start = 1_800_000_000_000;
    let mut window = Window::default();
    let mut seen = Vec::new();
    for i in 0..6 {
        let mut s = sample(i);
        s.lag = Some(20);
        s.lag_seconds = Some(10.0);
        s.pending = 4;
        s.oldest_pending_id = Some(StreamId::new(42, 0));
        s.last_delivered_id = StreamId::new(100, 0);
        s.last_read_at_ms = Some(start - 40_000);
        s.stuck = (i > 0).then_some(Stuck::Orphaned);
        window.push(&s);
        let v = verdict(&window, &s, &settings);
        seen.push((v.status.label(), v.judged_in.map(|d| d.as_secs())));
    }
    assert_eq!(
        seen,
        [
            ("warming_up", Some(60)),
            ("warming_up", Some(20)),
            ("warming_up", Some(5)),
            ("stopped", None),
            ("stopped", None),
            ("stopped", None),
        ]
    );
    // A crashed worker beside a live one: stalled at once.
    let mut s = sample(1);
    s.pending = 4;
    s.stuck = Some(Stuck::Orphaned);
    let mut window = Window::default();
    window.push(&sample(0));
    window.push(&s);
    assert_eq!(verdict(&window, &s, &settings).status, GroupStatus::Stalled);
}

/// Work waiting under the thresholds, once the window is full.
#[test]
fn ok_with_work_is_within_limits() {
    let mut window = Window::default();
    let mut last = None;
    for i in 0..5 {
        let mut s = sample(i);
        s.lag = Some(3);
        s.lag_seconds = Some(2.0);
        s.last_generated_id = StreamId::new(110 + i, 0);
        window.push(&s);
        let v = verdict(&window, &s, &settings(None));
        last = Some((v.status, v.reason));
    }
    assert_eq!(last, Some((GroupStatus::Ok, Reason::WithinLimits)));
}

/// Batch consumers every 4, 30 and 120 minutes, polled every 15 s for 12
/// hours, with the settings the stream probe derives (the learned cadence,
/// or `read_every` a minute above the period): the statuses they get while
/// the cadence is learned and after. Production is steady (2 entries a
/// poll); each run reads everything. Prints one `RHYTHM` line per case.
#[test]
fn batch_consumers_are_judged_by_their_rhythm() {
    use crate::cadence;
    let poll = Duration::from_secs(15);
    let window = poll * 10;
    for period_min in [4u64, 30, 120] {
        for read_every in [None, Some(Duration::from_secs((period_min + 1) * 60))] {
            let period_ms = period_min * MIN;
            let (mut w, mut c) = (Window::default(), cadence::Cadence::default());
            let start = 1_800_000_000_000u64;
            let mut counts: std::collections::BTreeMap<(&str, &str), u32> = Default::default();
            let mut learned_at = None;
            for i in 0..(12 * 3600 / 15) {
                let at = start + i * 15_000;
                let last_run = start + (at - start) / period_ms * period_ms;
                let produced = StreamId::new(100 + i * 2, 0);
                // Each run reads everything produced before it.
                let read_upto = StreamId::new(100 + (last_run - start) / 15_000 * 2, 0);
                let lag = produced.ms - read_upto.ms;
                let s = Sample {
                    at_ms: at,
                    lag: Some(lag),
                    lag_seconds: (lag > 0).then(|| (at - last_run) as f64 / 1000.0),
                    last_delivered_id: read_upto,
                    last_generated_id: produced,
                    pending: 0,
                    consumers: 1,
                    last_read_at_ms: Some(last_run),
                    trimmed_recently: false,
                    ..sample(i)
                };
                c.observe(cadence::Seen {
                    at_ms: at,
                    last_read_ms: s.last_read_at_ms,
                    last_generated_id: s.last_generated_id,
                    waiting: s.undelivered(),
                    interval_ms: poll.as_millis() as u64,
                });
                w.push(&s);
                let learned = c.interval(at);
                if learned.is_some() && learned_at.is_none() {
                    learned_at = Some(at - start);
                }
                let patience = cadence::patience(learned, poll, window);
                let settings = Settings {
                    window: 10,
                    window_duration: window,
                    max_delay: None,
                    read_every: read_every.or_else(|| cadence::reads_in_runs(learned, window)),
                    patience,
                    pel_patience: cadence::pel_patience(patience, None, window),
                };
                let v = verdict(&w, &s, &settings);
                let phase = if learned.is_some() || read_every.is_some() {
                    "after"
                } else {
                    "before"
                };
                *counts.entry((phase, v.status.label())).or_default() += 1;
            }
            let learned = c.interval(start + 12 * 3600 * 1000);
            println!(
                "RHYTHM | batch every {period_min} min | read_every {} | learned {:?} after {} | polls per status before/after: {:?}",
                read_every.map_or("unset".into(), |d| format!("{} min", d.as_secs() / 60)),
                learned,
                learned_at.map_or("never".to_string(), |ms| format!("{} min", ms / MIN)),
                counts
            );
            // Once the rhythm is known (configured or learned), a batch
            // job on time is never stopped, stalled or lagging.
            for ((phase, status), n) in &counts {
                if *phase == "after" {
                    assert!(
                        matches!(*status, "ok" | "idle"),
                        "every {period_min} min, read_every {read_every:?}: {n} polls {status}"
                    );
                }
            }
            if read_every.is_none() {
                assert!(learned.is_some(), "every {period_min} min: learned");
            }
        }
    }
}
