//! Where a group is heading (docs/lag-and-losses.md, time to loss and to drain): pure arithmetic
//! over a short window of stream polls, with no I/O and no clock.
//!
//! Two questions an on-call engineer asks first: *will we lose messages, and
//! when?* and *will the backlog drain by itself, and when?*
//!
//! - **Retention margin**: the time part of the group's first undelivered
//!   entry minus that of the stream's first entry, in seconds of ID time.
//!   Trimming removes entries from the front, so this is how much room the
//!   trimming edge has before it reaches undelivered entries.
//! - **Trim-overtake ETA**: margin ÷ the speed at which it shrinks. The speed
//!   is the slope of the margin over the window: the rate at which the
//!   stream's first entry advances (trimming) minus the rate at which the
//!   group's first undelivered entry advances (consumption), both in ID time.
//!   Absent while the margin is not shrinking; 0 once the edge has reached
//!   undelivered entries and trimming is moving it (a margin of 0 on a
//!   stream that is not being trimmed, a young stream read from its start,
//!   threatens nothing yet).
//! - **Drain ETA**: lag ÷ the speed at which it shrinks, that speed being
//!   the slope of the lag over the window (consumption minus production:
//!   entries-read and entries-added where Redis has them, IDs and lengths
//!   otherwise, as the lag itself is derived). Absent while the lag is not
//!   shrinking; 0 when there is none.
//!
//! Slopes are Theil–Sen estimates, the median of the slopes between every
//! pair of polls, so one noisy poll (a burst, a pause, a poll delayed by the
//! rate limit) does not swing them; at least [`MIN_POINTS`] polls are needed,
//! and a value counts as shrinking only when most pairs of polls say so
//! ([`falling`]): a steady value's jitter gives no ETA.

use std::collections::VecDeque;

/// Polls kept per group: 8 polls of 15 s look back 2 minutes.
pub const WINDOW: usize = 8;

/// Polls needed before a slope, hence an ETA, is given.
pub const MIN_POINTS: usize = 3;

/// One poll of a group, as the trend needs it, in 32 bytes: a target keeps
/// [`WINDOW`] of them for each of its groups (20,000 groups at 10,000
/// streams), and `Option`s of their own would make them 56. An unknown value
/// is stored as NaN, or `u64::MAX` for the first entry's time (an ID of that
/// millisecond, year 584 million, reads as unknown), and read back as `None`.
#[derive(Clone, Copy, Debug)]
struct Point {
    /// Server time, ms.
    at_ms: u64,
    /// Retention margin in seconds, when something is undelivered and IDs
    /// are time-based; NaN otherwise.
    margin: f64,
    /// The time part of the stream's first entry, ms (whether trimming moves
    /// the edge); `u64::MAX` when unknown.
    first_entry_ms: u64,
    /// Lag, when known; NaN otherwise (f32: a slope needs no more).
    lag: f32,
    /// Entries the stream retains before the group's first undelivered one
    /// (its length less the lag), when the lag is exact; NaN otherwise.
    ahead: f32,
}

impl Point {
    fn margin(&self) -> Option<f64> {
        known(self.margin)
    }

    fn first_entry_ms(&self) -> Option<u64> {
        (self.first_entry_ms != u64::MAX).then_some(self.first_entry_ms)
    }

    fn lag(&self) -> Option<f64> {
        known(f64::from(self.lag))
    }

    fn ahead(&self) -> Option<f64> {
        known(f64::from(self.ahead))
    }
}

fn known(value: f64) -> Option<f64> {
    (!value.is_nan()).then_some(value)
}

/// The recent polls of one group.
#[derive(Clone, Debug, Default)]
pub struct Trend {
    points: VecDeque<Point>,
}

impl Trend {
    /// Adds a poll. A clock that went backwards (another server after a
    /// failover) starts the window again.
    pub fn push(
        &mut self,
        at_ms: u64,
        margin: Option<f64>,
        first_entry_ms: Option<u64>,
        lag: Option<u64>,
        ahead: Option<u64>,
    ) {
        if self.points.back().is_some_and(|p| p.at_ms >= at_ms) {
            self.points.clear();
        }
        if self.points.len() == WINDOW {
            self.points.pop_front();
        }
        // Room for the whole window at once, not 4 then 8.
        self.points.reserve_exact(WINDOW - self.points.len());
        self.points.push_back(Point {
            at_ms,
            margin: margin.unwrap_or(f64::NAN),
            first_entry_ms: first_entry_ms.unwrap_or(u64::MAX),
            lag: lag.map_or(f32::NAN, |l| l as f32),
            ahead: ahead.map_or(f32::NAN, |a| a as f32),
        });
    }

    /// Forgets the window (the group was rewound or the target came back).
    pub fn clear(&mut self) {
        self.points.clear();
    }

    fn series(&self, value: impl Fn(&Point) -> Option<f64>) -> Vec<(f64, f64)> {
        self.points
            .iter()
            .filter_map(|p| Some((p.at_ms as f64 / 1000.0, value(p)?)))
            .collect()
    }

    /// Seconds until trimming reaches the first undelivered entry at the
    /// recent rates; `None` when the margin is unknown or not shrinking.
    pub fn overtake_eta(&self) -> Option<f64> {
        let last = self.points.back()?;
        let now = last.margin()?;
        if now <= 0.0 {
            return self.edge_moved(last).then_some(0.0);
        }
        let slope = falling(&self.series(Point::margin))?;
        // The margin is ID time: a burst of production shrinks it while the
        // group keeps its distance in entries, and a count-capped stream
        // (MAXLEN) is overtaken only when that distance falls too. Where the
        // entries ahead are known, they must fall as well.
        let ahead = self.series(Point::ahead);
        if ahead.len() >= MIN_POINTS {
            falling(&ahead)?;
        }
        Some(now / -slope)
    }

    /// Whether the stream's first entry advanced within the window: trimming
    /// is under way.
    fn edge_moved(&self, last: &Point) -> bool {
        let Some(edge) = last.first_entry_ms() else {
            return false;
        };
        self.points
            .iter()
            .filter_map(Point::first_entry_ms)
            .any(|earlier| earlier < edge)
    }

    /// Seconds until the lag reaches 0 at the recent rates; `None` while it
    /// is not shrinking or unknown.
    pub fn drain_eta(&self) -> Option<f64> {
        let now = self.points.back()?.lag()?;
        if now <= 0.0 {
            return Some(0.0);
        }
        let slope = falling(&self.series(Point::lag))?;
        Some(now / -slope)
    }
}

/// The share of the pairs of polls that must fall (of those that differ)
/// before a value counts as falling.
const FALLING_SHARE: f64 = 0.75;

/// The Theil–Sen slope of `points` when it is negative and the fall is
/// consistent: at least [`FALLING_SHARE`] of the pairs of polls whose values
/// differ went down. A value that holds steady jitters as often down as up
/// (a margin measured to the entry, polls a little early or late): its
/// median slope is as often slightly negative, and an ETA from it would
/// extrapolate the jitter into a page.
pub fn falling(points: &[(f64, f64)]) -> Option<f64> {
    let slope = theil_sen(points).filter(|s| *s < 0.0)?;
    let (mut down, mut differ) = (0u32, 0u32);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 > a.0 && b.1 != a.1 {
                differ += 1;
                down += u32::from(b.1 < a.1);
            }
        }
    }
    (f64::from(down) >= FALLING_SHARE * f64::from(differ)).then_some(slope)
}

/// The Theil–Sen slope of `points` (the median of the slopes between every
/// pair with distinct x), or `None` with fewer than [`MIN_POINTS`] points.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < MIN_POINTS {
        return None;
    }
    let mut slopes: Vec<f64> = Vec::with_capacity(points.len() * (points.len() - 1) / 2);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            let dx = b.0 - a.0;
            if dx > 0.0 {
                slopes.push((b.1 - a.1) / dx);
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    slopes.sort_by(f64::total_cmp);
    let mid = slopes.len() / 2;
    Some(if slopes.len() % 2 == 0 {
        (slopes[mid - 1] + slopes[mid]) / 2.0
    } else {
        slopes[mid]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_costs_32_bytes_and_unknown_values_read_back_unknown() {
        assert_eq!(std::mem::size_of::<Point>(), 32);
        let mut t = Trend::default();
        t.push(1_000, None, None, None, None);
        t.push(2_000, Some(0.0), Some(0), Some(0), Some(0));
        let read = |p: &Point| (p.margin(), p.first_entry_ms(), p.lag(), p.ahead());
        assert_eq!(read(&t.points[0]), (None, None, None, None));
        assert_eq!(
            read(&t.points[1]),
            (Some(0.0), Some(0), Some(0.0), Some(0.0))
        );
        assert!(t.points.capacity() >= WINDOW);
    }

    fn trend(points: &[(u64, Option<f64>, Option<u64>)]) -> Trend {
        let mut t = Trend::default();
        for &(at, margin, lag) in points {
            // A stream trimmed by 1 s of ID time per second of poll time.
            t.push(at * 1000, margin, Some(at * 1000), lag, None);
        }
        t
    }

    #[test]
    fn steady_closing_edge_gives_the_time_left() {
        // Margin shrinks by 2 s of ID time per 15 s poll: 60 s left → 450 s.
        let t = trend(&[
            (0, Some(68.0), Some(1000)),
            (15, Some(66.0), Some(1000)),
            (30, Some(64.0), Some(1000)),
            (45, Some(62.0), Some(1000)),
            (60, Some(60.0), Some(1000)),
        ]);
        let eta = t.overtake_eta().unwrap();
        assert!((eta - 450.0).abs() < 1e-6, "{eta}");
        // The lag holds: no drain ETA.
        assert_eq!(t.drain_eta(), None);
    }

    #[test]
    fn one_noisy_poll_does_not_swing_it() {
        let t = trend(&[
            (0, Some(68.0), Some(900)),
            (15, Some(66.0), Some(800)),
            (30, Some(10.0), Some(5000)), // a burst, a hiccup
            (45, Some(62.0), Some(600)),
            (60, Some(60.0), Some(500)),
        ]);
        let eta = t.overtake_eta().unwrap();
        assert!((eta - 450.0).abs() < 1.0, "{eta}");
        // Lag falls by 100 per 15 s: 500 left → 75 s.
        let drain = t.drain_eta().unwrap();
        assert!((drain - 75.0).abs() < 1.0, "{drain}");
    }

    #[test]
    fn bursty_production_drains_by_the_trend() {
        // Lag alternates up and down but falls 30 per poll on the whole.
        let lags = [1200, 1260, 1140, 1200, 1080, 1140, 1020, 1080];
        let points: Vec<(u64, Option<f64>, Option<u64>)> = lags
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u64 * 15, None, Some(l)))
            .collect();
        let eta = trend(&points).drain_eta().unwrap();
        // Slope about −2/s: 1080 left → about 540 s.
        assert!((400.0..700.0).contains(&eta), "{eta}");
        assert_eq!(trend(&points).overtake_eta(), None, "nothing known");
    }

    #[test]
    fn stopped_and_recovering_groups() {
        // Stopped: the lag grows, the edge closes in.
        let stopped = trend(&[
            (0, Some(30.0), Some(100)),
            (15, Some(25.0), Some(200)),
            (30, Some(20.0), Some(300)),
        ]);
        assert_eq!(stopped.drain_eta(), None);
        let eta = stopped.overtake_eta().unwrap();
        assert!((eta - 60.0).abs() < 1e-6, "{eta}");
        // Recovering: the lag shrinks, the margin grows.
        let recovering = trend(&[
            (0, Some(20.0), Some(300)),
            (15, Some(40.0), Some(200)),
            (30, Some(60.0), Some(100)),
        ]);
        assert_eq!(recovering.overtake_eta(), None);
        let eta = recovering.drain_eta().unwrap();
        assert!((eta - 15.0).abs() < 1e-6, "{eta}");
    }

    #[test]
    fn settled_and_unknown_cases() {
        assert_eq!(
            trend(&[(0, Some(1.0), Some(5))]).drain_eta(),
            None,
            "one poll"
        );
        let drained = trend(&[(0, None, Some(0))]);
        assert_eq!(drained.drain_eta(), Some(0.0));
        assert_eq!(drained.overtake_eta(), None);
        let overtaken = trend(&[(0, Some(0.0), Some(10)), (15, Some(0.0), Some(20))]);
        assert_eq!(overtaken.overtake_eta(), Some(0.0));
        let unknown = trend(&[(0, Some(0.0), Some(10))]);
        assert_eq!(
            unknown.overtake_eta(),
            None,
            "one poll: is the edge moving?"
        );
        let unknown = trend(&[(0, None, None), (15, None, None), (30, None, None)]);
        assert_eq!((unknown.drain_eta(), unknown.overtake_eta()), (None, None));
    }

    #[test]
    fn an_edge_that_is_not_trimmed_threatens_nothing() {
        // A young stream read from its start: the first undelivered entry
        // shares the first entry's millisecond, and nothing trims it.
        let mut young = Trend::default();
        for i in 0..4u64 {
            young.push(i * 15_000, Some(0.0), Some(5_000), Some(100 + i * 10), None);
        }
        assert_eq!(young.overtake_eta(), None);
        // Trimming starts: the edge moves while it sits at the group.
        young.push(60_000, Some(0.0), Some(9_000), Some(140), None);
        assert_eq!(young.overtake_eta(), Some(0.0));
    }

    #[test]
    fn the_window_slides_and_restarts_on_a_clock_jump() {
        let mut t = Trend::default();
        for i in 0..20u64 {
            t.push(i * 15_000, None, None, Some(1000 - i * 10), None);
        }
        assert_eq!(t.points.len(), WINDOW);
        t.push(1_000, None, None, Some(5), None);
        assert_eq!(t.points.len(), 1);
    }

    /// A margin that holds steady, jittering by a tick either way (a
    /// consumer as fast as the producer near the trimming edge), gives no
    /// ETA whichever way its median slope leans; a steady fall does.
    #[test]
    fn a_steady_margin_that_jitters_gives_no_eta() {
        let jitter = [2.2, 2.0, 2.2, 2.0, 1.8, 2.0, 2.2, 1.8];
        let mut t = Trend::default();
        for (i, m) in jitter.iter().enumerate() {
            t.push(
                1_000 * i as u64,
                Some(*m),
                Some(1_000 * i as u64),
                Some(90),
                None,
            );
        }
        assert_eq!(t.overtake_eta(), None);
        let points: Vec<(f64, f64)> = jitter
            .iter()
            .enumerate()
            .map(|(i, m)| (i as f64, *m))
            .collect();
        assert!(
            theil_sen(&points).is_some_and(|s| s < 0.0),
            "the median leans down"
        );
        let mut t = Trend::default();
        for i in 0..8u64 {
            let m = 10.0 - i as f64 + if i % 2 == 0 { 0.3 } else { -0.3 };
            t.push(1_000 * i, Some(m), Some(1_000 * i), Some(90), None);
        }
        assert!(t.overtake_eta().is_some_and(|eta| (eta - 3.0).abs() < 1.5));
    }

    /// A burst of production compresses the margin in ID time while the
    /// group keeps its distance from the edge in entries: no ETA. The
    /// distance falling too (the edge truly gains) gives one.
    #[test]
    fn a_margin_that_shrinks_while_the_entries_ahead_hold_gives_no_eta() {
        let mut t = Trend::default();
        for i in 0..8u64 {
            t.push(
                1_000 * i,
                Some(2.0 - 0.1 * i as f64),
                Some(1_000 * i),
                Some(90),
                Some(10),
            );
        }
        assert_eq!(t.overtake_eta(), None);
        let mut t = Trend::default();
        for i in 0..8u64 {
            t.push(
                1_000 * i,
                Some(2.0 - 0.1 * i as f64),
                Some(1_000 * i),
                Some(90),
                Some(20 - i),
            );
        }
        assert!(t.overtake_eta().is_some_and(|eta| (eta - 13.0).abs() < 1.0));
    }

    #[test]
    fn theil_sen_is_the_median_slope() {
        assert_eq!(theil_sen(&[(0.0, 0.0), (1.0, 2.0)]), None);
        // Pair slopes 2, 2, 33.3, 2, 49, 96: the median is (2 + 33.3) / 2.
        let s = theil_sen(&[(0.0, 0.0), (1.0, 2.0), (2.0, 4.0), (3.0, 100.0)]).unwrap();
        assert!((s - (2.0 + 100.0 / 3.0) / 2.0).abs() < 1e-9, "{s}");
    }
}
