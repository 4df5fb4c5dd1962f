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

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Config;

/// The probes, by stable name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProbeKind {
    /// Finds the streams to watch.
    Discovery,
    /// INFO server and memory.
    Info,
    /// XINFO STREAM + GROUPS, lag, lag seconds, dead letters, status.
    Stream,
    /// XPENDING summary: oldest pending age.
    PendingSummary,
    /// XINFO CONSUMERS: per-consumer figures and orphaned entries.
    Consumers,
    /// Paged XPENDING over whole PELs.
    PendingScan,
}

impl ProbeKind {
    /// Every probe, in the order of a first collection.
    pub const ALL: [ProbeKind; 6] = [
        ProbeKind::Discovery,
        ProbeKind::Info,
        ProbeKind::Stream,
        ProbeKind::PendingSummary,
        ProbeKind::Consumers,
        ProbeKind::PendingScan,
    ];

    /// The `probe` label and config key.
    pub fn label(self) -> &'static str {
        match self {
            ProbeKind::Discovery => "discovery",
            ProbeKind::Info => "info",
            ProbeKind::Stream => "stream",
            ProbeKind::PendingSummary => "pending_summary",
            ProbeKind::Consumers => "consumers",
            ProbeKind::PendingScan => "pending_scan",
        }
    }

    /// True for the probes that work group by group and need the stream
    /// poll's list of groups first.
    pub fn per_group(self) -> bool {
        matches!(
            self,
            ProbeKind::PendingSummary | ProbeKind::Consumers | ProbeKind::PendingScan
        )
    }

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

/// Runs `run` at `first`, then on the grid of `period`, until `shutdown`.
/// Runs never overlap: the next one waits for the previous to finish.
pub async fn every<F, Fut>(
    first: Instant,
    period: Duration,
    shutdown: CancellationToken,
    mut run: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut due = first;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(due) => {}
            _ = shutdown.cancelled() => return,
        }
        tokio::select! {
            _ = run() => {}
            _ = shutdown.cancelled() => return,
        }
        due = next_start(due, Instant::now(), period);
    }
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
                every(start, period, shutdown, || {
                    let log = log.clone();
                    let d = Duration::from_secs(durations[i.min(durations.len() - 1)]);
                    i += 1;
                    async move {
                        let began = Instant::now() - start;
                        tokio::time::sleep(d).await;
                        log.lock().unwrap().push((began, Instant::now() - start));
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
}
