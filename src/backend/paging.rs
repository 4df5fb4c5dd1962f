//! Page sizes that follow the server (docs/design.md): the `COUNT` of discovery's
//! `SCAN` pages and of the PEL scan's `XPENDING` pages. A call over a lot of
//! memory Redis has not touched for a while can take milliseconds where the
//! same call usually takes a tenth of that, and a SLOWLOG at 1 ms then
//! records the exporter. So each call's time is measured, and the page
//! shrinks in proportion when one takes longer than the target (default
//! 1 ms; by half at most), grows back by half while calls take less than a
//! quarter of it and by a quarter while they take less than half, between a
//! floor and the configured size.
//!
//! A call's time is its round trip less the network's: the smallest round
//! trip of a single command seen on the client (each connection's `CLIENT
//! SETNAME`, single SCAN pages), which slowly drifts up so that a changed
//! network is learnt again. A pipeline of `n` pages counts as `n` calls
//! sharing its time.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::command::Command;
use crate::config::Limits;

/// The page size of one kind of paged command.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PageTuner {
    min: u32,
    max: u32,
    current: u32,
    target: Duration,
}

impl PageTuner {
    /// Starts at `max`, never below `min`.
    pub(crate) fn new(min: u32, max: u32, target: Duration) -> Self {
        let max = max.max(1);
        PageTuner {
            min: min.clamp(1, max),
            max,
            current: max,
            target,
        }
    }

    /// The page size to ask for now.
    pub(crate) fn current(&self) -> u32 {
        self.current
    }

    /// Records a round trip of `calls` pages that took `rtt`, the network
    /// taking `floor` of it.
    pub(crate) fn observe(&mut self, rtt: Duration, floor: Duration, calls: usize) {
        let per_call = rtt.saturating_sub(floor) / u32::try_from(calls.max(1)).unwrap_or(u32::MAX);
        if per_call > self.target {
            // In proportion to the excess, by half at most: the page that
            // would have met the target.
            let fitted =
                f64::from(self.current) * self.target.as_secs_f64() / per_call.as_secs_f64();
            self.current = (fitted as u32).max(self.current / 2).max(self.min);
        } else if per_call < self.target / 2 {
            // Back quickly while calls are far under the target: a page
            // shrunk by one slow moment costs the pass many more calls.
            let (num, den) = if per_call < self.target / 4 {
                (3, 2)
            } else {
                (5, 4)
            };
            let grown = (u64::from(self.current) * num).div_ceil(den);
            self.current = u32::try_from(grown).unwrap_or(u32::MAX).min(self.max);
        }
    }
}

/// The network's share of a round trip: the smallest single-command round
/// trip seen, let rise by 1 % a minute so that it follows a network that got
/// slower.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct LatencyFloor(Option<(Duration, Instant)>);

impl LatencyFloor {
    /// Records a single-command round trip at `now`.
    pub(crate) fn observe(&mut self, rtt: Duration, now: Instant) {
        let floor = match self.0 {
            None => rtt,
            Some(_) => rtt.min(self.get(now)),
        };
        self.0 = Some((floor, now));
    }

    /// The floor at `now` (zero before any sample).
    pub(crate) fn get(&self, now: Instant) -> Duration {
        self.0.map_or(Duration::ZERO, |(floor, at)| {
            let minutes = now.saturating_duration_since(at).as_secs_f64() / 60.0;
            floor.mul_f64(1.0 + minutes / 100.0)
        })
    }
}

/// A client's page sizes of the paged commands and the network's share of
/// a round trip.
#[derive(Debug)]
pub(crate) struct Pages {
    pub(crate) scan: PageTuner,
    pub(crate) xpending: PageTuner,
    floor: LatencyFloor,
}

impl Pages {
    /// Pages at their configured sizes (the target's `scan_count` for SCAN).
    pub(crate) fn new(limits: &Limits, scan_count: u32) -> Self {
        Pages {
            scan: PageTuner::new(limits.min_page, scan_count, limits.page_target),
            xpending: PageTuner::new(limits.min_page, limits.pending_page, limits.page_target),
            floor: LatencyFloor::default(),
        }
    }

    /// Learns from a round trip of `cmds` that took `rtt`: single commands
    /// teach the network's share, pipelines of one paged command how long a
    /// page takes.
    pub(crate) fn observe(&mut self, cmds: &[Command], rtt: Duration, now: Instant) {
        if cmds.len() == 1 {
            self.floor.observe(rtt, now);
        }
        let floor = self.floor.get(now);
        if cmds.iter().all(|c| matches!(c, Command::Scan { .. })) {
            self.scan.observe(rtt, floor, cmds.len());
        } else if cmds
            .iter()
            .all(|c| matches!(c, Command::XpendingRange { .. }))
        {
            self.xpending.observe(rtt, floor, cmds.len());
        }
    }

    /// Learns the network's share from an O(1) command (`CLIENT SETNAME`).
    pub(crate) fn observe_network(&mut self, rtt: Duration, now: Instant) {
        self.floor.observe(rtt, now);
    }

    /// The current page sizes, by command label.
    pub(crate) fn sizes(&self) -> BTreeMap<&'static str, u32> {
        BTreeMap::from([
            ("scan", self.scan.current()),
            ("xpending_range", self.xpending.current()),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn slow_calls_shrink_the_page_quick_ones_grow_it_back() {
        let mut t = PageTuner::new(10, 200, MS);
        assert_eq!(t.current(), 200);
        // A 3 ms page (0.1 ms of it network): halve.
        t.observe(3 * MS, MS / 10, 1);
        assert_eq!(t.current(), 100);
        t.observe(3 * MS, MS / 10, 1);
        t.observe(3 * MS, MS / 10, 1);
        t.observe(3 * MS, MS / 10, 1);
        t.observe(3 * MS, MS / 10, 1);
        assert_eq!(t.current(), 10, "never below the floor");
        // Quick pages: back up by a quarter each, up to the configured size.
        let mut sizes = Vec::new();
        for _ in 0..20 {
            t.observe(MS / 5, MS / 10, 1);
            sizes.push(t.current());
        }
        assert_eq!(&sizes[..4], &[15, 23, 35, 53]);
        assert_eq!(*sizes.last().unwrap(), 200);
        // In between: unchanged.
        t.observe(MS * 7 / 10, MS / 10, 1);
        assert_eq!(t.current(), 200);
        // A little over the target: the page that would have met it.
        t.observe(MS * 13 / 10 + MS / 10, MS / 10, 1);
        assert_eq!(t.current(), 153);
        // Between a quarter and a half of it: grows by a quarter.
        t.observe(MS * 4 / 10, MS / 10, 1);
        assert_eq!(t.current(), 192);
    }

    #[test]
    fn latency_is_not_the_server_and_pipelines_share_their_time() {
        let mut t = PageTuner::new(10, 500, MS);
        // 5 ms round trips on a 4.8 ms network: 0.2 ms calls, growth held at max.
        t.observe(5 * MS, MS * 48 / 10, 1);
        assert_eq!(t.current(), 500);
        // A pipeline of 100 pages in 30 ms: 0.3 ms each.
        t.observe(30 * MS, Duration::ZERO, 100);
        assert_eq!(t.current(), 500);
        // Of 4 pages in 10 ms: 2.5 ms each.
        t.observe(10 * MS, Duration::ZERO, 4);
        assert_eq!(t.current(), 250);
    }

    #[test]
    fn the_floor_is_the_quickest_round_trip_and_drifts_up_with_time() {
        let t0 = Instant::now();
        let mut f = LatencyFloor::default();
        assert_eq!(f.get(t0), Duration::ZERO);
        f.observe(MS, t0);
        f.observe(MS / 2, t0);
        // Thousands of slow samples at once do not move it.
        for _ in 0..5_000 {
            f.observe(3 * MS, t0);
        }
        assert_eq!(f.get(t0), MS / 2);
        // A network that got slower is learnt again over minutes.
        let later = t0 + Duration::from_secs(60 * 300);
        for _ in 0..10 {
            f.observe(2 * MS, later);
        }
        assert_eq!(f.get(later), 2 * MS);
    }

    #[test]
    fn pages_learn_from_round_trips_of_their_own_command_only() {
        let limits = Limits {
            min_page: 10,
            pending_page: 400,
            page_target: MS,
            ..Limits::default()
        };
        let mut pages = Pages::new(&limits, 200);
        assert_eq!(
            pages.sizes(),
            BTreeMap::from([("scan", 200), ("xpending_range", 400)])
        );
        let now = Instant::now();
        let scan = Command::Scan {
            cursor: 0,
            pattern: None,
            count: 200,
        };
        let xpending = Command::XpendingRange {
            key: b"s".to_vec(),
            group: b"g".to_vec(),
            start: crate::backend::command::RangeStart::Min,
            end: crate::backend::command::RangeEnd::Max,
            count: 400,
        };
        pages.observe_network(MS / 10, now);
        // A slow pipeline of other commands tunes nothing.
        pages.observe(&[Command::Ping, Command::Time], 50 * MS, now);
        assert_eq!(pages.sizes()["scan"], 200);
        // A slow SCAN page shrinks SCAN's pages only.
        pages.observe(std::slice::from_ref(&scan), 5 * MS, now);
        assert_eq!(
            pages.sizes(),
            BTreeMap::from([("scan", 100), ("xpending_range", 400)])
        );
        // A pipeline of slow XPENDING pages shrinks XPENDING's; a mixed one
        // tunes neither.
        pages.observe(&[xpending.clone(), xpending.clone()], 10 * MS, now);
        pages.observe(&[scan.clone(), xpending.clone()], 10 * MS, now);
        assert_eq!(
            pages.sizes(),
            BTreeMap::from([("scan", 100), ("xpending_range", 200)])
        );
    }

    #[test]
    fn the_network_share_is_taken_off_a_page() {
        let limits = Limits {
            min_page: 10,
            page_target: MS,
            ..Limits::default()
        };
        let mut pages = Pages::new(&limits, 200);
        let now = Instant::now();
        // A 4 ms network (a CLIENT SETNAME round trip): a 4.5 ms page took
        // the server 0.5 ms, within the target.
        pages.observe_network(4 * MS, now);
        let scan = Command::Scan {
            cursor: 0,
            pattern: None,
            count: 200,
        };
        pages.observe(std::slice::from_ref(&scan), 4 * MS + MS / 2, now);
        assert_eq!(pages.sizes()["scan"], 200);
    }
}
