//! When probes run: the probes' stable names with their intervals, and the
//! loop that runs them. Pure: the next start is a function of when the last run
//! was due, when it finished and the interval, so it is tested without a
//! clock; the loop itself runs on tokio time and is tested under paused time.
//!
//! Missed ticks are skipped, never made up: a run that overruns its interval
//! is followed by the next slot on the original grid, not by a burst of
//! catch-up runs that would hammer a server that was just slow.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Config;

use crate::vocab::ProbeKind;

impl ProbeKind {
    /// Its interval.
    pub fn interval(self, config: &Config) -> Duration {
        let s = &config.schedule;
        match self {
            ProbeKind::Discovery => s.discovery,
            ProbeKind::Info => s.info,
            ProbeKind::Stream => s.stream,
            ProbeKind::PendingSummary => s.pending_summary,
            ProbeKind::Consumers => s.consumers,
            ProbeKind::PendingScan => s.pending_scan,
        }
    }
}

/// The first slot `due + k * period` (k ≥ 1) that is not before `finished`.
pub fn next_start(due: Instant, finished: Instant, period: Duration) -> Instant {
    let next = due + period;
    if next >= finished {
        return next;
    }
    let behind = finished.duration_since(next);
    let skipped = behind.as_nanos().div_ceil(period.as_nanos().max(1));
    next + period * u32::try_from(skipped).unwrap_or(u32::MAX)
}

/// When a probe's loop is first due, given when its run of the first
/// collection started: one period after that start, or `now` when that run
/// overran its period. The loop then anchors its grid at its own first run:
/// a first collection that took longer than the period (it counts lags that
/// later polls reuse) is not carried into the grid, where the next run,
/// started late on an old slot, would skip one.
pub fn loop_first_due(first_started: Instant, now: Instant, period: Duration) -> Instant {
    (first_started + period).max(now)
}

/// What a run asks of the loop that runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The next free slot on the grid of the period.
    Grid,
    /// This long after the run finished: a backoff, or an adaptive cadence.
    After(Duration),
}

/// Runs `run` at `first`, then when each run asks (on the grid of `period`
/// unless it says otherwise), until `shutdown`. A notification on `wake`
/// starts the next run at once. Runs never overlap: the next one waits for
/// the previous to finish.
pub async fn every<F, Fut>(
    first: Instant,
    period: Duration,
    shutdown: CancellationToken,
    wake: Option<&Notify>,
    mut run: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Next>,
{
    let never = Notify::new();
    let wake = wake.unwrap_or(&never);
    let mut due = first;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(due) => {}
            _ = wake.notified() => {}
            _ = shutdown.cancelled() => return,
        }
        let started = Instant::now();
        let next = tokio::select! {
            next = run() => next,
            _ = shutdown.cancelled() => return,
        };
        let finished = Instant::now();
        due = match next {
            Next::Grid => next_start(due.min(started), finished, period),
            Next::After(delay) => finished + delay,
        };
    }
}

/// The shortest time between two discoveries.
pub const DISCOVERY_MIN: Duration = Duration::from_secs(10);

/// Keyspace size up to which discovery runs at [`DISCOVERY_MIN`].
pub const DISCOVERY_SMALL_KEYSPACE: u64 = 100_000;

/// How discovery went, for its next delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiscoveryRun {
    /// It succeeded.
    pub ok: bool,
    /// Failures in a row, this one included (0 after a success).
    pub failures_in_a_row: u32,
    /// Keys the SCAN walks covered (calls × COUNT); `None` without a walk.
    pub keys_walked: Option<u64>,
}

/// Time until the next discovery (new streams watched within seconds), at most
/// `max` (the configured `schedule.discovery`):
/// - after a failure, 1 s, 2 s, 4 s … (a server that comes up after the
///   exporter is found within seconds);
/// - without a SCAN walk (exact names only), [`DISCOVERY_MIN`];
/// - after a walk of `k` keys, `DISCOVERY_MIN × (k / 100,000)²`: 10 s up to
///   100,000 keys (a new stream is then watched within one discovery and one
///   stream poll, 25 s at the defaults), growing with the square of the
///   keyspace so that the share of time Redis spends walking it falls as it
///   grows (a walk of 1,000,000 keys waits the full 5 min, as before).
pub fn discovery_next(run: DiscoveryRun, max: Duration) -> Duration {
    let max = max.max(Duration::from_secs(1));
    if !run.ok {
        let exponent = run.failures_in_a_row.saturating_sub(1).min(16);
        return Duration::from_secs(1u64 << exponent).min(max);
    }
    let Some(keys) = run.keys_walked else {
        return DISCOVERY_MIN.min(max);
    };
    let scale = (keys as f64 / DISCOVERY_SMALL_KEYSPACE as f64).max(1.0);
    DISCOVERY_MIN.mul_f64((scale * scale).min(1e6)).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn next_start_skips_missed_slots() {
        let t0 = Instant::now();
        let p = Duration::from_secs(15);
        assert_eq!(next_start(t0, t0 + Duration::from_secs(2), p), t0 + p);
        assert_eq!(next_start(t0, t0 + p, p), t0 + p);
        // A 40 s run skips the 15 s and 30 s slots.
        assert_eq!(
            next_start(t0, t0 + Duration::from_secs(40), p),
            t0 + Duration::from_secs(45)
        );
        assert_eq!(
            next_start(t0, t0 + Duration::from_secs(45), p),
            t0 + Duration::from_secs(45)
        );
    }

    /// Under paused time: runs start on the grid, never overlap, never burst
    /// after a stall, and never come closer together than the period.
    #[tokio::test(start_paused = true)]
    async fn loop_keeps_the_grid_without_bursts() {
        let start = Instant::now();
        let period = Duration::from_secs(15);
        let shutdown = CancellationToken::new();
        let log: Arc<Mutex<Vec<(Duration, Duration)>>> = Arc::default();
        let durations = [1, 1, 50, 1, 1, 1];
        let task = {
            let (log, shutdown) = (log.clone(), shutdown.clone());
            tokio::spawn(async move {
                let mut i = 0usize;
                every(start, period, shutdown, None, || {
                    let log = log.clone();
                    let d = Duration::from_secs(durations[i.min(durations.len() - 1)]);
                    i += 1;
                    async move {
                        let began = Instant::now() - start;
                        tokio::time::sleep(d).await;
                        log.lock().unwrap().push((began, Instant::now() - start));
                        Next::Grid
                    }
                })
                .await;
            })
        };
        tokio::time::sleep(Duration::from_secs(130)).await;
        shutdown.cancel();
        task.await.unwrap();
        let log = log.lock().unwrap().clone();
        let starts: Vec<u64> = log.iter().map(|(s, _)| s.as_secs()).collect();
        // The third run (30 s) takes 50 s; the 45, 60 and 75 s slots are
        // skipped and the next run starts at 90 s.
        assert_eq!(starts, vec![0, 15, 30, 90, 105, 120]);
        for pair in log.windows(2) {
            assert!(pair[1].0 >= pair[0].1, "runs overlap: {pair:?}");
            assert!(
                pair[1].0 - pair[0].0 >= period,
                "runs closer than the period: {pair:?}"
            );
        }
    }

    /// Under paused time: a first collection whose stream poll took 17 s of
    /// a 15 s period, then polls of 13 s. The loop starts when the first run
    /// ends and keeps 15 s from there; anchored at the daemon's start, it
    /// would start on the passed 15 s slot and skip the 30 s one.
    #[tokio::test(start_paused = true)]
    async fn a_first_run_that_overran_does_not_cost_a_slot() {
        let start = Instant::now();
        let period = Duration::from_secs(15);
        tokio::time::sleep(Duration::from_secs(17)).await;
        let first_due = loop_first_due(start, Instant::now(), period);
        assert_eq!(first_due - start, Duration::from_secs(17));
        let shutdown = CancellationToken::new();
        let starts: Arc<Mutex<Vec<u64>>> = Arc::default();
        let task = {
            let (starts, shutdown) = (starts.clone(), shutdown.clone());
            tokio::spawn(async move {
                every(first_due, period, shutdown, None, || {
                    let starts = starts.clone();
                    async move {
                        starts
                            .lock()
                            .unwrap()
                            .push((Instant::now() - start).as_secs());
                        tokio::time::sleep(Duration::from_secs(13)).await;
                        Next::Grid
                    }
                })
                .await;
            })
        };
        tokio::time::sleep(Duration::from_secs(61)).await;
        shutdown.cancel();
        task.await.unwrap();
        let starts = starts.lock().unwrap().clone();
        assert_eq!(starts, vec![17, 32, 47, 62, 77]);
        // A first run within its period keeps the grid of its start.
        assert_eq!(
            loop_first_due(start, start + Duration::from_secs(4), period) - start,
            period
        );
    }

    #[test]
    fn discovery_backs_off_after_failures_and_sizes_to_the_keyspace() {
        let max = Duration::from_secs(300);
        let fail = |n| DiscoveryRun {
            ok: false,
            failures_in_a_row: n,
            keys_walked: None,
        };
        let secs: Vec<u64> = (1..=10)
            .map(|n| discovery_next(fail(n), max).as_secs())
            .collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]);
        let walked = |k| DiscoveryRun {
            ok: true,
            failures_in_a_row: 0,
            keys_walked: Some(k),
        };
        assert_eq!(discovery_next(walked(200), max), DISCOVERY_MIN);
        assert_eq!(discovery_next(walked(100_000), max), DISCOVERY_MIN);
        assert_eq!(discovery_next(walked(200_000), max).as_secs(), 40);
        assert_eq!(discovery_next(walked(1_000_000), max), max);
        let exact = DiscoveryRun {
            ok: true,
            failures_in_a_row: 0,
            keys_walked: None,
        };
        assert_eq!(discovery_next(exact, max), DISCOVERY_MIN);
        // Never longer than configured.
        assert_eq!(
            discovery_next(walked(100_000), Duration::from_secs(3)).as_secs(),
            3
        );
    }

    /// Under paused time: a run that asks for a delay gets it, and a wake
    /// starts the next run at once.
    #[tokio::test(start_paused = true)]
    async fn loop_follows_delays_and_wakes() {
        let start = Instant::now();
        let shutdown = CancellationToken::new();
        let wake = Arc::new(Notify::new());
        let starts: Arc<Mutex<Vec<u64>>> = Arc::default();
        let task = {
            let (starts, shutdown, wake) = (starts.clone(), shutdown.clone(), wake.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                every(
                    start,
                    Duration::from_secs(300),
                    shutdown,
                    Some(&wake),
                    || {
                        starts
                            .lock()
                            .unwrap()
                            .push((Instant::now() - start).as_secs());
                        i += 1;
                        let next = if i < 4 {
                            Next::After(Duration::from_secs(i))
                        } else {
                            Next::Grid
                        };
                        async move { next }
                    },
                )
                .await;
            })
        };
        tokio::time::sleep(Duration::from_secs(20)).await;
        wake.notify_one();
        tokio::time::sleep(Duration::from_secs(1)).await;
        shutdown.cancel();
        task.await.unwrap();
        // 0, +1, +2, +3 (then the grid: 300 s after the slot at 6 s), and
        // the wake at 20 s.
        assert_eq!(*starts.lock().unwrap(), vec![0, 1, 3, 6, 20]);
    }
}
