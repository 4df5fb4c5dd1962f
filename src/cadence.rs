//! A group's read cadence, learned from what the stream polls see: how long
//! new work waits before the group reads, so that `stopped`, `stalled` and
//! orphaned entries are judged against the group's own rhythm rather than
//! fixed windows (a batch job that runs every 4 minutes is not a streaming
//! consumer that fell silent for 4 minutes).
//!
//! Pure. The poller feeds each scheduled poll to [`Cadence::observe`]:
//! - a *wait* starts when the poll finds work the group had not read: the
//!   stream's last ID moved since the previous poll (the work arrived after
//!   that poll and after the group's last read), or entries still wait after
//!   a read (they waited from that read on);
//! - the wait ends at the group's next read (a consumer's last successful
//!   read, or a poll that found the group's position advanced), and its
//!   length is one *interval*.
//!
//! Quiet streams add nothing (no work, no wait), so a night without
//! production does not teach the group that it reads once a night. A wait
//! is known to the poll's resolution: a streaming consumer's intervals are
//! at most one stream interval.
//!
//! The learned value is an order statistic chosen to survive one outage:
//! intervals are kept per hour of server time (the two longest of each hour,
//! for the last [`WAIT_HOURS`] hours); an hour's value is its second-longest
//! interval (its longest when it has one), and the cadence is the lower
//! median of the hours' values (of the hours with two waits or more, when
//! one has: an hour just begun says nothing yet). One stop of a streaming
//! group is one long interval: it is its hour's longest, not its second,
//! and never the median. A batch job's every wait is long, so its hours
//! say so. At least [`MIN_INTERVALS`] intervals are needed; before that the
//! cadence is unknown and the fixed windows apply.

use std::time::Duration;

use crate::vocab::StreamId;

/// Hours of history the cadence is learned from: a job every 3 hours has
/// at least 3 waits in them at any time (one every 2 hours, 5), so the cadence,
/// once learned, is not forgotten between two runs. Rarer jobs need
/// `read_every`.
pub const WAIT_HOURS: usize = 12;
/// Hours of history the consumers' holds are learned from (they are
/// handlers' times, seconds to minutes).
pub const HOLD_HOURS: usize = 6;
/// Intervals needed before the cadence is known.
pub const MIN_INTERVALS: u32 = 3;
/// A learned cadence is tolerated this many times over before work waiting
/// unread says the group stopped, stalled or orphaned its entries.
pub const TOLERANCE: u32 = 2;
/// Stream polls always tolerated, whatever the cadence: a streaming
/// consumer (read every 100 ms) is judged after 4 polls (60 s at the default
/// 15 s), not after the resolution of one poll.
pub const FLOOR_POLLS: u32 = 4;

const HOUR_MS: u64 = 3_600_000;

/// The longest intervals of one hour of server time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Hour {
    /// Hours since the epoch.
    index: u32,
    /// Longest and second-longest interval, ms.
    longest: u32,
    second: u32,
    /// Intervals recorded (saturating).
    count: u16,
}

impl Hour {
    fn value(&self) -> u32 {
        if self.count >= 2 {
            self.second
        } else {
            self.longest
        }
    }
}

/// Durations learned per hour of server time: the longest two of each of
/// the last `N` hours, and the lower median of the hours' values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rhythm<const N: usize> {
    hours: [Hour; N],
}

impl<const N: usize> Default for Rhythm<N> {
    fn default() -> Self {
        Rhythm {
            hours: [Hour::default(); N],
        }
    }
}

/// Written as the hours that hold durations (the exporter's state file);
/// read back keeping the `N` most recent of them.
impl<const N: usize> serde::Serialize for Rhythm<N> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.hours.iter().filter(|h| h.count > 0))
    }
}

impl<'de, const N: usize> serde::Deserialize<'de> for Rhythm<N> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut read = Vec::<Hour>::deserialize(deserializer)?;
        read.retain(|h| h.count > 0);
        // In the order written; the most recent `N` when there are more.
        let mut kept: Vec<usize> = (0..read.len()).collect();
        kept.sort_unstable_by_key(|&i| std::cmp::Reverse(read[i].index));
        kept.truncate(N);
        kept.sort_unstable();
        let mut rhythm = Rhythm::default();
        for (slot, i) in rhythm.hours.iter_mut().zip(kept) {
            *slot = read[i];
        }
        Ok(rhythm)
    }
}

/// How long consumers hold entries before reading again.
pub type Holds = Rhythm<HOLD_HOURS>;

/// What the cadence of one group has learned so far: about 240 bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cadence {
    waits: Rhythm<WAIT_HOURS>,
    /// The latest read seen (server ms).
    last_read_ms: Option<u64>,
    /// When the unread work now waiting began to wait, at the latest.
    waiting_since_ms: Option<u64>,
    /// The previous scheduled poll (server ms).
    prev_poll_ms: Option<u64>,
    /// The stream's last ID at the previous scheduled poll.
    prev_generated: Option<StreamId>,
}

/// What a scheduled poll saw that the cadence learns from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Server time of the poll.
    pub at_ms: u64,
    /// The group's latest read (see [`crate::status::Sample::last_read_at_ms`]);
    /// `None` when not known; `Some(0)` when nobody ever read.
    pub last_read_ms: Option<u64>,
    /// The stream's last generated ID.
    pub last_generated_id: StreamId,
    /// Entries wait for the group (undelivered) at this poll.
    pub waiting: bool,
    /// The stream poll's scheduled interval (ms): work that arrived after
    /// one poll and was read by the next waited at most that long for a
    /// group that reads as polls go; a poll that ran late (the exporter or
    /// the server busy) stretches the gap, not the group's rhythm.
    pub interval_ms: u64,
}

impl Cadence {
    /// Learns from one scheduled poll.
    pub fn observe(&mut self, seen: Seen) {
        let produced = self
            .prev_generated
            .is_some_and(|before| before != seen.last_generated_id);
        self.prev_generated = Some(seen.last_generated_id);
        let read = seen.last_read_ms.filter(|&ms| ms > 0);
        let new_read = match (read, self.last_read_ms) {
            (Some(now), Some(before)) => now > before,
            (Some(_), None) => true,
            _ => false,
        };
        if new_read {
            // Work that arrived since the previous poll and is read by now
            // waited from that poll at the earliest.
            let arrived = produced.then(|| {
                self.prev_poll_ms
                    .unwrap_or(seen.at_ms)
                    .max(self.last_read_ms.unwrap_or(0))
            });
            // Work no poll saw waiting is known to have waited less than the
            // gap between two polls, and a streaming group reads it in far
            // less: the gap is the exporter's lateness when it exceeds the
            // schedule, so the wait counts for one interval at most. Work a
            // poll saw waiting waited, at least, from then on: all of it.
            let unseen = self.waiting_since_ms.is_none();
            if let (Some(read), Some(since)) = (read, self.waiting_since_ms.or(arrived)) {
                if read > since {
                    let wait = read - since;
                    let wait = if unseen {
                        wait.min(seen.interval_ms)
                    } else {
                        wait
                    };
                    self.waits.record(read, wait);
                }
            }
            self.last_read_ms = read;
            // Entries still waiting after the read waited from the read on.
            self.waiting_since_ms = if seen.waiting { read } else { None };
        } else if self.waiting_since_ms.is_none() && (produced || seen.waiting) {
            // The work arrived after the previous poll and after the last
            // read; on a first poll it is known to wait from now only.
            let arrived_after = if produced {
                self.prev_poll_ms.unwrap_or(seen.at_ms)
            } else {
                seen.at_ms
            };
            self.waiting_since_ms = Some(arrived_after.max(self.last_read_ms.unwrap_or(0)));
        }
        self.prev_poll_ms = Some(seen.at_ms);
    }

    /// The learned cadence at `at_ms` (see [`Rhythm::value`]).
    pub fn interval(&self, at_ms: u64) -> Option<Duration> {
        self.waits.value(at_ms)
    }

    /// Goes on after a gap in the polls that nobody watched (the exporter
    /// restarted, and this cadence came back from its state file): the
    /// wait in progress and the last read stay, as they were seen, but work
    /// produced in the gap is known to wait from the next poll only, not
    /// from the last poll before the gap (a wait would be counted from
    /// before the restart).
    pub fn after_gap(&mut self) {
        self.prev_poll_ms = None;
        self.prev_generated = None;
    }

    /// Forgets the waits in progress (the group's position was set from
    /// outside, or the group is new): what follows is not its rhythm.
    pub fn interrupt(&mut self) {
        self.waiting_since_ms = None;
        self.last_read_ms = None;
        self.prev_generated = None;
    }
}

impl<const N: usize> Rhythm<N> {
    /// Records a duration that ended at `at_ms`.
    pub fn record(&mut self, at_ms: u64, interval_ms: u64) {
        let index = u32::try_from(at_ms / HOUR_MS).unwrap_or(u32::MAX);
        let interval = u32::try_from(interval_ms).unwrap_or(u32::MAX);
        let slot = match self
            .hours
            .iter()
            .position(|h| h.count > 0 && h.index == index)
        {
            Some(i) => i,
            None => {
                // The oldest hour (or an empty slot) makes room; an interval
                // older than every hour kept is not worth keeping.
                let (i, oldest) = self
                    .hours
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, h)| (h.count > 0, h.index))
                    .map(|(i, h)| (i, *h))
                    .unwrap_or_default();
                if oldest.count > 0 && oldest.index > index {
                    return;
                }
                self.hours[i] = Hour {
                    index,
                    ..Hour::default()
                };
                i
            }
        };
        let hour = &mut self.hours[slot];
        if interval >= hour.longest {
            hour.second = hour.longest;
            hour.longest = interval;
        } else if interval > hour.second {
            hour.second = interval;
        }
        hour.count = hour.count.saturating_add(1);
    }

    /// What was learned at `at_ms`: the lower median of the last `N`
    /// hours' values (of those with two waits or more, when any has);
    /// `None` before [`MIN_INTERVALS`] durations were seen in them.
    pub fn value(&self, at_ms: u64) -> Option<Duration> {
        let now = u32::try_from(at_ms / HOUR_MS).unwrap_or(u32::MAX);
        let recent = |h: &&Hour| h.count > 0 && now.saturating_sub(h.index) < N as u32;
        let counted: u32 = self
            .hours
            .iter()
            .filter(recent)
            .map(|h| u32::from(h.count))
            .sum();
        if counted < MIN_INTERVALS {
            return None;
        }
        // An hour that has seen one wait so far (most often the hour just
        // begun) is left out while another saw more: its one wait is not
        // its rhythm, and the lower median of two hours would be whatever
        // that wait was, a shorter patience at every hour's start.
        let settled = self.hours.iter().filter(recent).any(|h| h.count >= 2);
        let mut values: Vec<u32> = self
            .hours
            .iter()
            .filter(recent)
            .filter(|h| !settled || h.count >= 2)
            .map(Hour::value)
            .collect();
        values.sort_unstable();
        let median = values[(values.len() - 1) / 2];
        Some(Duration::from_millis(u64::from(median)))
    }
}

/// How long a consumer holding entries may go without reading before they
/// are orphaned: `consumer_inactive_after` when set; otherwise the group's
/// patience, and at least [`TOLERANCE`] times how long its consumers were
/// seen to hold entries without reading and then read again (their
/// handlers' time, once learned);
/// [`crate::config::DEFAULT_CONSUMER_INACTIVE_AFTER`] while the cadence is
/// unknown.
pub fn inactive_after(
    explicit: Option<Duration>,
    cadence: Option<Duration>,
    holds: Option<Duration>,
    stream_interval: Duration,
) -> Duration {
    match (explicit, cadence, holds) {
        (Some(set), _, _) => set,
        (None, Some(c), holds) => {
            let own = patience(Some(c), stream_interval, c);
            holds.map_or(own, |h| own.max(h * TOLERANCE))
        }
        (None, None, _) => crate::config::DEFAULT_CONSUMER_INACTIVE_AFTER,
    }
}

/// The `read_every` a group that reads in runs is judged by when none is
/// configured: [`TOLERANCE`] times its learned cadence, when that is longer
/// than the status `window` (a batch job); `None` for a group read
/// continuously or not yet learned. Its work then waits for the next run as
/// with `read_every`: neither `stopped` nor `lagging` (short of `max_delay`)
/// until the run is overdue by the window, and the lag alerts count from it.
pub fn reads_in_runs(cadence: Option<Duration>, window: Duration) -> Option<Duration> {
    cadence
        .map(|c| c * TOLERANCE)
        .filter(|every| *every > window)
}

/// How long the oldest pending entry may stay before the group is judged
/// `stalled`: the group's patience, and at least [`TOLERANCE`] times its
/// consumers' learned holds (a 2-minute handler keeps its entry pending for
/// 2 minutes in a group that reads every second); never less than the
/// `window` while the holds are unknown.
pub fn pel_patience(patience: Duration, holds: Option<Duration>, window: Duration) -> Duration {
    match holds {
        Some(h) => patience.max(h * TOLERANCE),
        None => patience.max(window),
    }
}

/// How long work may wait unread before the group is judged `stopped`,
/// `stalled`, or its consumers' entries orphaned: [`TOLERANCE`] times the
/// learned cadence, never less than [`FLOOR_POLLS`] stream polls; the
/// `fallback` (the fixed window) while the cadence is unknown.
pub fn patience(
    cadence: Option<Duration>,
    stream_interval: Duration,
    fallback: Duration,
) -> Duration {
    match cadence {
        Some(c) => (c * TOLERANCE).max(stream_interval * FLOOR_POLLS),
        None => fallback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1000;
    const MIN: u64 = 60 * S;

    /// Polls every 15 s from `from` to `to` (server ms), with a group that
    /// reads at the times `reads` gives, production on every poll.
    fn run(c: &mut Cadence, from: u64, to: u64, mut read_at: impl FnMut(u64) -> Option<u64>) {
        let mut at = from;
        while at <= to {
            let read = read_at(at);
            let waiting = read.is_none_or(|r| r + 15 * S <= at);
            c.observe(Seen {
                at_ms: at,
                last_read_ms: read,
                last_generated_id: StreamId::new(at, 0),
                waiting,
                interval_ms: 15 * S,
            });
            at += 15 * S;
        }
    }

    /// The latest multiple of `every` at or before `at` (reads of a batch
    /// job), starting at `start`.
    fn batch(start: u64, every: u64) -> impl FnMut(u64) -> Option<u64> {
        move |at| (at >= start).then(|| start + (at - start) / every * every)
    }

    #[test]
    fn a_streaming_group_reads_at_the_polls_resolution() {
        let mut c = Cadence::default();
        // Reads just before every poll.
        run(&mut c, 10 * HOUR_MS, 10 * HOUR_MS + 10 * MIN, |at| {
            Some(at - 100)
        });
        let learned = c.interval(10 * HOUR_MS + 10 * MIN).expect("known");
        assert!(learned <= Duration::from_secs(15), "{learned:?}");
        assert_eq!(
            patience(
                Some(learned),
                Duration::from_secs(15),
                Duration::from_secs(150)
            ),
            Duration::from_secs(60)
        );
    }

    /// Polls that run late (every 75 s instead of 15 s, twice an hour or
    /// all the time: the exporter or the server busy) do not make a group
    /// that reads at once a group that reads in runs: what it read between
    /// two polls no poll saw waiting.
    #[test]
    fn late_polls_are_not_the_groups_rhythm() {
        for late_every in [2, 40, 1] {
            let mut c = Cadence::default();
            let mut at = 10 * HOUR_MS;
            for n in 0..240u64 {
                let gap = if n % late_every == 0 { 75 * S } else { 15 * S };
                at += gap;
                c.observe(Seen {
                    at_ms: at,
                    last_read_ms: Some(at - 300),
                    last_generated_id: StreamId::new(at, 0),
                    waiting: false,
                    interval_ms: 15 * S,
                });
            }
            let learned = c.interval(at).expect("known");
            assert!(
                learned <= Duration::from_secs(15),
                "{late_every}: {learned:?}"
            );
            assert_eq!(
                reads_in_runs(Some(learned), Duration::from_secs(150)),
                None,
                "{late_every}"
            );
        }
    }

    /// A new hour's first wait, shorter than the job's usual ones, does not
    /// pull the cadence down to it until the hour has seen more.
    #[test]
    fn a_new_hours_first_wait_is_not_its_rhythm() {
        let mut c = Cadence::default();
        let start = 40 * HOUR_MS;
        run(
            &mut c,
            start,
            start + HOUR_MS - 15 * S,
            batch(start, 4 * MIN),
        );
        let learned = c.interval(start + HOUR_MS - 15 * S).expect("known");
        assert!(learned >= Duration::from_secs(200), "{learned:?}");
        c.waits.record(start + HOUR_MS + S, 30 * S);
        assert_eq!(c.interval(start + HOUR_MS + S), Some(learned));
        c.waits.record(start + HOUR_MS + 2 * S, 40 * S);
        assert_eq!(
            c.interval(start + HOUR_MS + 2 * S),
            Some(Duration::from_secs(30)),
            "two waits: the hour counts (the lower median of two hours)"
        );
    }

    #[test]
    fn batch_groups_are_learned_at_their_rhythm() {
        for every_min in [4, 30, 120] {
            let every = every_min * MIN;
            let start = 100 * HOUR_MS;
            let mut c = Cadence::default();
            // Unknown before three runs.
            run(&mut c, start, start + 2 * every + MIN, batch(start, every));
            assert_eq!(c.interval(start + 2 * every + MIN), None, "{every_min} min");
            let end = start + 7 * HOUR_MS;
            let mut c = Cadence::default();
            run(&mut c, start, end, batch(start, every));
            let learned = c.interval(end).expect("known").as_secs();
            let want = every / S;
            // The wait is counted from the first poll that saw the work.
            assert!(
                learned <= want && learned + 15 >= want,
                "{every_min} min: learned {learned} s"
            );
        }
    }

    #[test]
    fn one_outage_is_not_the_rhythm() {
        let start = 50 * HOUR_MS;
        let mut c = Cadence::default();
        // Streaming, then silent for 20 minutes, then streaming again, all
        // in one hour.
        run(&mut c, start, start + 59 * MIN, |at| {
            if at < start + 10 * MIN || at > start + 30 * MIN {
                Some(at - 100)
            } else {
                Some(start + 10 * MIN - 100)
            }
        });
        let learned = c.interval(start + 59 * MIN).expect("known");
        assert!(learned <= Duration::from_secs(15), "{learned:?}");
    }

    #[test]
    fn quiet_hours_teach_nothing() {
        let start = 20 * HOUR_MS;
        let mut c = Cadence::default();
        run(&mut c, start, start + 10 * MIN, |at| Some(at - 100));
        // Three quiet hours: no production, nothing waits, no read.
        let mut at = start + 10 * MIN;
        while at < start + 190 * MIN {
            c.observe(Seen {
                at_ms: at,
                last_read_ms: Some(start + 10 * MIN - 100),
                last_generated_id: StreamId::new(start + 10 * MIN, 0),
                waiting: false,
                interval_ms: 15 * S,
            });
            at += 15 * S;
        }
        // Production resumes and is read within the next poll.
        run(&mut c, at, at + 5 * MIN, |t| Some(t - 100));
        let learned = c.interval(at + 5 * MIN).expect("known");
        assert!(learned <= Duration::from_secs(15), "{learned:?}");
    }

    #[test]
    fn the_history_ages_out() {
        let start = 30 * HOUR_MS;
        let mut c = Cadence::default();
        run(&mut c, start, start + 2 * HOUR_MS, batch(start, 30 * MIN));
        assert!(c.interval(start + 2 * HOUR_MS).is_some());
        assert_eq!(c.interval(start + 15 * HOUR_MS), None);
    }

    #[test]
    fn how_long_entries_may_be_held() {
        let d = Duration::from_secs;
        let poll = d(15);
        // Set: that, whatever was learned.
        assert_eq!(inactive_after(Some(d(30)), Some(d(600)), None, poll), d(30));
        // Not learned: the default.
        assert_eq!(inactive_after(None, None, Some(d(5)), poll), d(300));
        // A streaming group: 4 polls; with 2-minute handlers, 4 minutes.
        assert_eq!(inactive_after(None, Some(d(14)), None, poll), d(60));
        assert_eq!(inactive_after(None, Some(d(14)), Some(d(1)), poll), d(60));
        assert_eq!(
            inactive_after(None, Some(d(14)), Some(d(120)), poll),
            d(240)
        );
        // A batch group learned at 30 minutes: an hour.
        assert_eq!(inactive_after(None, Some(d(1800)), None, poll), d(3600));
        // Reads in runs only when twice the cadence exceeds the window.
        assert_eq!(reads_in_runs(Some(d(60)), d(150)), None);
        assert_eq!(reads_in_runs(Some(d(240)), d(150)), Some(d(480)));
        assert_eq!(reads_in_runs(None, d(150)), None);
        // The PEL waits for the handlers, or the window before they are known.
        assert_eq!(pel_patience(d(60), Some(d(120)), d(150)), d(240));
        assert_eq!(pel_patience(d(60), Some(d(1)), d(150)), d(60));
        assert_eq!(pel_patience(d(60), None, d(150)), d(150));
    }

    #[test]
    fn a_cadence_goes_on_after_a_gap_nobody_watched() {
        let start = 40 * HOUR_MS;
        let every = 4 * MIN;
        let mut c = Cadence::default();
        run(&mut c, start, start + HOUR_MS, batch(start, every));
        let learned = c.interval(start + HOUR_MS).expect("known");
        // Written and read back (the state file), then a restart of 10
        // minutes: work produced in the gap and read right after it is not
        // counted as waiting from the last poll before the gap.
        let text = serde_json::to_string(&c).expect("written");
        let mut back: Cadence = serde_json::from_str(&text).expect("read");
        assert_eq!(back, c);
        back.after_gap();
        let after = start + HOUR_MS + 10 * MIN;
        back.observe(Seen {
            at_ms: after,
            last_read_ms: Some(after - 1000),
            last_generated_id: StreamId::new(after, 0),
            waiting: true,
            interval_ms: 15 * S,
        });
        assert_eq!(back.interval(after), Some(learned));
        // Without it, the gap would be a wait that began before it, and
        // the entries still waiting would wait from the last poll before
        // the gap (the longest the hour had was the 4-minute run).
        let mut unwatched = c.clone();
        unwatched.observe(Seen {
            at_ms: after,
            last_read_ms: None,
            last_generated_id: StreamId::new(after, 0),
            waiting: true,
            interval_ms: 15 * S,
        });
        assert!(unwatched.waiting_since_ms < back.waiting_since_ms);
    }

    #[test]
    fn a_rhythm_is_written_as_its_hours_and_read_back_to_its_size() {
        let mut long: Rhythm<4> = Rhythm::default();
        for hour in 0..4u64 {
            long.record(hour * HOUR_MS, 1000 * (hour + 1));
        }
        let text = serde_json::to_string(&long).expect("written");
        let short: Rhythm<2> = serde_json::from_str(&text).expect("read");
        let mut kept: Vec<u32> = short.hours.iter().map(|h| h.index).collect();
        kept.sort_unstable();
        assert_eq!(kept, [2, 3], "the most recent hours");
        let empty: Rhythm<3> = serde_json::from_str("[]").expect("read");
        assert_eq!(empty, Rhythm::default());
        assert_eq!(serde_json::to_string(&empty).expect("written"), "[]");
    }

    #[test]
    fn unknown_reads_and_a_group_nobody_read_learn_nothing() {
        let mut c = Cadence::default();
        run(&mut c, HOUR_MS, 2 * HOUR_MS, |_| None);
        assert_eq!(c.interval(2 * HOUR_MS), None);
        run(&mut c, 2 * HOUR_MS, 3 * HOUR_MS, |_| Some(0));
        assert_eq!(c.interval(3 * HOUR_MS), None);
        assert_eq!(
            patience(None, Duration::from_secs(15), Duration::from_secs(150)),
            Duration::from_secs(150)
        );
    }
}
