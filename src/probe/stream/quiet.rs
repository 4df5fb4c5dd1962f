//! Quiet streams, not read again while something vouches that they have
//! not changed.
//!
//! A stream whose last full read showed nothing undelivered and nothing
//! pending in any group (and, on 8.6, no idempotent producers) can gain
//! work only through a command that changes the stream itself (`XADD`, and
//! `XTRIM`, `XDEL`, `DEL`, a key replaced) or its groups (`XGROUP …`,
//! `XSETID`): reads deliver nothing and acknowledgements and claims need
//! pending entries. Two things can vouch for it ([`Coverage`]):
//!
//! - **Client tracking** (the backend's `tracking`): the node's poll
//!   connection is told of the first change to each stream it read. While
//!   the node's mark is the one of the read and no invalidation named the
//!   stream since, the read stands for the poll without a command. What
//!   tracking does not announce (a group created, moved, destroyed, a
//!   consumer created by a read, `XSETID`) is seen at the stream's safety
//!   check: one `XINFO GROUPS` compared with the groups of the read, spread
//!   over [`safety_interval`] (a share of the command budget, never less
//!   than [`TRACKED_SAFETY_MIN`]); a difference reads the stream in full.
//!   Keyspace events, where configured, name those at once.
//! - **Keyspace events** alone (every stream event but `xadd`): while their
//!   coverage mark is the one of the read and no event named the stream, a
//!   last entry whose ID is the one read then (one `XREVRANGE … COUNT 1`)
//!   proves the figures unchanged. The last entry, not the length: a key
//!   replaced without an event we subscribe to (`RENAME`, `COPY`,
//!   `RESTORE` onto it, `FLUSHALL`, an expiry) has another last entry, or
//!   none, whatever its length. Every [`QUIET_SAFETY`] the stream is read in
//!   full whatever the check says (a copy of the stream itself put in its
//!   place; `XCLAIM … FORCE` of an entry already acknowledged, which Redis
//!   sends only to replicate a claim).
//!
//! A read that stands is folded again at the poll's server time, so ages,
//! the status window and the trend move on exactly as if it had been sent
//! again. An empty stream is always read in full (an emptied key would look
//! the same). A message may arrive between a read and the moment it is
//! remembered: the reads remember which streams were named meanwhile
//! ([`QuietReads::begin`]) and do not keep those.
//!
//! On Redis 6.2 (no `entries-added`, and a read that creates a consumer
//! publishes nothing) every stream is read in full.

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{Command, NodeAddr, RangeEnd, RangeStart, reply};
use crate::probe::context::{ProbeContext, ProbeError};
use crate::probe::memory::{Coverage, QuietRead, QuietReads, StreamRead};
use crate::snapshot::Name;
use crate::vocab::GroupInfo;

/// The longest a quiet stream vouched for by keyspace events alone goes
/// without a full read.
pub const QUIET_SAFETY: Duration = Duration::from_secs(300);

/// The least time between two safety checks of a quiet stream under
/// client tracking.
pub const TRACKED_SAFETY_MIN: Duration = Duration::from_secs(120);

/// The share of `commands_per_second` the safety checks of quiet streams
/// under client tracking spend, one `XINFO GROUPS` each.
pub const SAFETY_SHARE: f64 = 0.05;

/// The most streams named while reads were in flight that are remembered
/// one by one; beyond, the reads in flight are all not kept.
const FORGOTTEN_CAP: usize = 65_536;

/// The mean time between two safety checks of each of `quiet` streams
/// under client tracking: what [`SAFETY_SHARE`] of `commands_per_second`
/// allows, at least [`TRACKED_SAFETY_MIN`]. Each stream's own is between
/// half and one and a half of it ([`spread`]), so the checks do not come in
/// waves.
pub fn safety_interval(quiet: usize, commands_per_second: u32) -> Duration {
    let per_second = (f64::from(commands_per_second) * SAFETY_SHARE).max(f64::MIN_POSITIVE);
    Duration::from_secs_f64(quiet as f64 / per_second).max(TRACKED_SAFETY_MIN)
}

/// `interval` scaled by a factor between 0.5 and 1.5 that is the stream's
/// own (a hash of its name): streams read at one moment come due spread out.
fn spread(stream: &[u8], interval: Duration) -> Duration {
    // FNV-1a, then SplitMix64's finalizer to spread the last bytes into
    // the high bits: stable across runs and platforms.
    let mut h = stream.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    let fraction = (h >> 11) as f64 / (1u64 << 53) as f64;
    interval.mul_f64(0.5 + fraction)
}

/// What a quiet read needs to stand for this poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Needs {
    /// Nothing: tracking vouches for it.
    Nothing,
    /// Its safety check: `XINFO GROUPS` showing the groups of the read.
    SameGroups,
    /// `XREVRANGE … COUNT 1` showing the last entry of the read.
    SameLastEntry,
}

impl QuietReads {
    /// A message named `stream`: it is read in full next time.
    pub(crate) fn forget(&mut self, stream: &[u8]) {
        self.reads.remove(stream);
        self.forgets += 1;
        if self.forgotten.len() >= FORGOTTEN_CAP {
            self.forgotten.clear();
            self.floor = self.forgets;
        }
        self.forgotten.insert(Name::from(stream), self.forgets);
    }

    /// Keeps only the streams `watched` holds.
    pub(crate) fn retain(&mut self, watched: impl Fn(&Name) -> bool) {
        self.reads.retain(|n, _| watched(n));
    }

    /// Reads are about to be sent (one stream poll at a time per target, so
    /// none is in flight): the mark [`Self::remember`] is given back with
    /// them.
    pub(super) fn begin(&mut self) -> u64 {
        self.forgotten.clear();
        self.forgets
    }

    /// What the read of `stream` needs to stand at `now` under `coverage`,
    /// where tracked safety checks are due every `safety` on average.
    fn needs(
        &self,
        stream: &Name,
        coverage: Coverage,
        safety: Duration,
        now: Instant,
    ) -> Option<(&StreamRead, Needs)> {
        let q = self.reads.get(stream)?;
        let tracked = q.coverage.tracking.is_some() && q.coverage.tracking == coverage.tracking;
        let evented = q.coverage.events.is_some() && q.coverage.events == coverage.events;
        let needs = if tracked {
            if now.saturating_duration_since(q.checked_at) < spread(stream, safety) {
                Needs::Nothing
            } else {
                Needs::SameGroups
            }
        } else if evented && now.saturating_duration_since(q.read_at) < QUIET_SAFETY {
            Needs::SameLastEntry
        } else {
            return None;
        };
        Some((&q.read, needs))
    }

    /// Records a full read of `stream`, begun at `since` ([`Self::begin`]):
    /// kept when the stream is quiet, something covers it and no message
    /// named it since; forgotten otherwise.
    pub(super) fn remember(
        &mut self,
        stream: &Name,
        read: &StreamRead,
        (since, coverage): (u64, Coverage),
        now: Instant,
    ) {
        let named = since < self.floor || self.forgotten.get(stream).is_some_and(|&at| at > since);
        let covered = coverage.events.is_some() || coverage.tracking.is_some();
        if covered && !named && is_quiet(read) {
            let q = QuietRead {
                read: read.clone(),
                coverage,
                read_at: now,
                checked_at: now,
            };
            self.reads.insert(stream.clone(), q);
        } else {
            self.reads.remove(stream);
        }
    }

    /// A safety check found `stream` unchanged at `now`.
    fn checked(&mut self, stream: &Name, now: Instant) {
        if let Some(q) = self.reads.get_mut(stream) {
            q.checked_at = now;
        }
    }

    /// Quiet reads kept.
    pub(super) fn len(&self) -> usize {
        self.reads.len()
    }
}

/// Whether a full read shows nothing that can change without an event or
/// a longer stream.
pub(super) fn is_quiet(read: &StreamRead) -> bool {
    let info = &read.info;
    let Some(added) = info.entries_added else {
        return false;
    };
    let caught_up =
        |g: &GroupInfo| g.pending == 0 && (g.lag == Some(0) || g.entries_read == Some(added));
    read.dropped == 0
        && info.length > 0
        && info.last_entry_id.is_some()
        && info.idempotence.producers.unwrap_or(0) == 0
        && read.groups.iter().chain(&read.unwatched).all(caught_up)
}

/// Whether `groups` (an `XINFO GROUPS` reply) are the groups of `read`.
fn same_groups(read: &StreamRead, mut groups: Vec<GroupInfo>) -> bool {
    let mut kept: Vec<&GroupInfo> = read.groups.iter().chain(&read.unwatched).collect();
    kept.sort_by(|a, b| a.name.cmp(&b.name));
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    kept.len() == groups.len() && kept.into_iter().zip(&groups).all(|(a, b)| a == b)
}

/// The streams among `names` whose last full read stands (tracking vouches
/// for it, or its check, sent now in one pipeline, found it unchanged), and
/// the others, to read in full.
///
/// # Errors
/// When the node cannot be reached.
pub(super) async fn check<'n>(
    ctx: &ProbeContext,
    node: &NodeAddr,
    coverage: Coverage,
    names: &[&'n Name],
) -> Result<(Vec<(Name, StreamRead)>, Vec<&'n Name>), ProbeError> {
    if coverage.events.is_none() && coverage.tracking.is_none() {
        return Ok((Vec::new(), names.to_vec()));
    }
    let now = Instant::now();
    let mut stands = Vec::new();
    let mut rest = Vec::new();
    let mut checks: Vec<(&'n Name, StreamRead, Needs)> = Vec::new();
    {
        let state = ctx.state();
        let safety = safety_interval(state.quiet.len(), ctx.config.limits.commands_per_second);
        for &name in names {
            match state.quiet.needs(name, coverage, safety, now) {
                Some((read, Needs::Nothing)) => stands.push((name.clone(), read.clone())),
                Some((read, needs)) => checks.push((name, read.clone(), needs)),
                None => rest.push(name),
            }
        }
    }
    if checks.is_empty() {
        return Ok((stands, rest));
    }
    let cmds: Vec<Command> = checks
        .iter()
        .map(|(n, _, needs)| match needs {
            Needs::SameGroups => Command::XinfoGroups { key: n.to_vec() },
            _ => Command::Xrevrange {
                key: n.to_vec(),
                end: RangeEnd::Max,
                start: RangeStart::Min,
                count: 1,
            },
        })
        .collect();
    let replies = ctx.client.execute(node, &cmds).await?;
    let mut checked = Vec::new();
    for ((name, read, needs), r) in checks.into_iter().zip(replies) {
        // Anything else (another entry, none, other groups, an error) is
        // read in full, and its own errors say what is wrong.
        let unchanged = match needs {
            Needs::SameGroups => r
                .ok()
                .and_then(|v| reply::groups(&v).ok())
                .is_some_and(|g| same_groups(&read, g)),
            _ => r
                .ok()
                .and_then(|v| reply::range_ids(&v).ok())
                .is_some_and(|ids| ids.first().copied() == read.info.last_entry_id),
        };
        if unchanged {
            if needs == Needs::SameGroups {
                checked.push(name.clone());
            }
            stands.push((name.clone(), read));
        } else {
            rest.push(name);
        }
    }
    let mut state = ctx.state();
    for name in &checked {
        state.quiet.checked(name, now);
    }
    Ok((stands, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{StreamId, StreamInfo};

    fn read(groups: Vec<GroupInfo>) -> StreamRead {
        StreamRead {
            info: StreamInfo {
                length: 3,
                entries_added: Some(5),
                last_generated_id: StreamId::new(5, 0),
                last_entry_id: Some(StreamId::new(5, 0)),
                ..StreamInfo::default()
            },
            groups,
            unwatched: Vec::new(),
            dropped: 0,
        }
    }

    fn group(pending: u64, lag: Option<u64>, entries_read: Option<u64>) -> GroupInfo {
        GroupInfo {
            name: b"g".to_vec(),
            pending,
            lag,
            entries_read,
            ..GroupInfo::default()
        }
    }

    fn events(mark: u64) -> Coverage {
        Coverage {
            events: Some(mark),
            tracking: None,
        }
    }

    fn tracked(mark: u64) -> Coverage {
        Coverage {
            events: None,
            tracking: Some(mark),
        }
    }

    #[test]
    fn quiet_is_nothing_undelivered_nothing_pending() {
        assert!(is_quiet(&read(Vec::new())), "no groups");
        assert!(is_quiet(&read(vec![group(0, Some(0), Some(5))])));
        // Lag unknown but entries-read at entries-added.
        assert!(is_quiet(&read(vec![group(0, None, Some(5))])));
        assert!(
            !is_quiet(&read(vec![group(1, Some(0), Some(5))])),
            "pending"
        );
        assert!(
            !is_quiet(&read(vec![group(0, Some(2), Some(3))])),
            "undelivered"
        );
        assert!(!is_quiet(&read(vec![group(0, None, None)])), "lag unknown");
        let mut unwatched = read(Vec::new());
        unwatched.unwatched = vec![group(0, Some(1), Some(4))];
        assert!(!is_quiet(&unwatched), "an unwatched group behind");
        let mut old = read(Vec::new());
        old.info.entries_added = None;
        assert!(!is_quiet(&old), "6.2");
        let mut idempotent = read(Vec::new());
        idempotent.info.idempotence.producers = Some(1);
        assert!(!is_quiet(&idempotent), "idempotent producers");
        let mut cut = read(Vec::new());
        cut.dropped = 1;
        assert!(!is_quiet(&cut), "groups left out");
        let mut empty = read(Vec::new());
        empty.info.length = 0;
        empty.info.last_entry_id = None;
        assert!(!is_quiet(&empty), "empty");
    }

    #[test]
    fn under_events_a_read_stands_on_its_last_entry_within_the_safety_interval() {
        let t0 = Instant::now();
        let safety = TRACKED_SAFETY_MIN;
        let s: Name = std::sync::Arc::from(&b"s"[..]);
        let mut q = QuietReads::default();
        let since = q.begin();
        q.remember(&s, &read(Vec::new()), (since, events(7)), t0);
        let needs = |q: &QuietReads, c, at| q.needs(&s, c, safety, at).map(|(_, n)| n);
        assert_eq!(
            needs(&q, events(7), t0 + Duration::from_secs(60)),
            Some(Needs::SameLastEntry)
        );
        assert_eq!(needs(&q, events(8), t0), None, "a gap since");
        assert_eq!(needs(&q, events(7), t0 + QUIET_SAFETY), None, "safety");
        assert_eq!(needs(&q, tracked(7), t0), None, "not tracked");
        q.forget(b"s");
        assert_eq!(needs(&q, events(7), t0), None, "an event named it");
        // Not covered, or not quiet: not kept.
        let since = q.begin();
        q.remember(&s, &read(Vec::new()), (since, Coverage::default()), t0);
        assert_eq!(needs(&q, events(7), t0), None);
        let busy = read(vec![group(1, Some(0), Some(5))]);
        q.remember(&s, &busy, (since, events(7)), t0);
        assert_eq!(needs(&q, events(7), t0), None);
        q.remember(&s, &read(Vec::new()), (since, events(7)), t0);
        q.retain(|_| false);
        assert_eq!(needs(&q, events(7), t0), None, "no longer watched");
    }

    #[test]
    fn under_tracking_a_read_stands_with_no_command_until_its_safety_check() {
        let t0 = Instant::now();
        let safety = Duration::from_secs(600);
        let s: Name = std::sync::Arc::from(&b"s"[..]);
        let mut q = QuietReads::default();
        let since = q.begin();
        let both = Coverage {
            events: Some(1),
            tracking: Some(7),
        };
        q.remember(&s, &read(Vec::new()), (since, both), t0);
        let needs = |q: &QuietReads, c, at| q.needs(&s, c, safety, at).map(|(_, n)| n);
        let own = spread(b"s", safety);
        assert!(own >= safety / 2 && own < safety * 3 / 2);
        assert_eq!(needs(&q, both, t0 + own / 2), Some(Needs::Nothing));
        assert_eq!(
            needs(&q, tracked(7), t0 + own / 2),
            Some(Needs::Nothing),
            "events gone: tracking still vouches"
        );
        assert_eq!(needs(&q, both, t0 + own), Some(Needs::SameGroups));
        q.checked(&s, t0 + own);
        assert_eq!(needs(&q, both, t0 + own + own / 2), Some(Needs::Nothing));
        // The tracking mark moved: events alone, on the last entry.
        let evented = Coverage {
            events: Some(1),
            tracking: Some(8),
        };
        assert_eq!(needs(&q, evented, t0), Some(Needs::SameLastEntry));
        assert_eq!(needs(&q, tracked(8), t0), None);
    }

    #[test]
    fn a_stream_named_while_it_was_read_is_not_kept() {
        let t0 = Instant::now();
        let s: Name = std::sync::Arc::from(&b"s"[..]);
        let other: Name = std::sync::Arc::from(&b"o"[..]);
        let mut q = QuietReads::default();
        let since = q.begin();
        // The invalidation of a write after the read arrives before the
        // read is remembered.
        q.forget(b"s");
        q.remember(&s, &read(Vec::new()), (since, tracked(1)), t0);
        q.remember(&other, &read(Vec::new()), (since, tracked(1)), t0);
        assert!(q.needs(&s, tracked(1), TRACKED_SAFETY_MIN, t0).is_none());
        assert!(
            q.needs(&other, tracked(1), TRACKED_SAFETY_MIN, t0)
                .is_some()
        );
        // Named before the read began: kept.
        let since = q.begin();
        q.remember(&s, &read(Vec::new()), (since, tracked(1)), t0);
        assert!(q.needs(&s, tracked(1), TRACKED_SAFETY_MIN, t0).is_some());
        // So many named that they are no longer told apart: nothing begun
        // before is kept.
        let since = q.begin();
        for i in 0..FORGOTTEN_CAP as u32 + 1 {
            q.forget(&i.to_be_bytes());
        }
        q.remember(&other, &read(Vec::new()), (since, tracked(1)), t0);
        assert!(
            q.needs(&other, tracked(1), TRACKED_SAFETY_MIN, t0)
                .is_none()
        );
    }

    #[test]
    fn safety_checks_take_their_share_of_the_budget() {
        assert_eq!(safety_interval(0, 500), TRACKED_SAFETY_MIN);
        assert_eq!(safety_interval(1_000, 500), TRACKED_SAFETY_MIN);
        // 25 checks a second at 500 commands a second.
        assert_eq!(safety_interval(20_000, 500), Duration::from_secs(800));
        assert_eq!(safety_interval(100_000, 500), Duration::from_secs(4_000));
        assert_eq!(safety_interval(100_000, 5_000), Duration::from_secs(400));
        // Spread: between half and one and a half, and not in one place.
        let spreads: Vec<Duration> = (0..1000u32)
            .map(|i| spread(format!("orders:{i}").as_bytes(), Duration::from_secs(100)))
            .collect();
        assert!(
            spreads
                .iter()
                .all(|d| *d >= Duration::from_secs(50) && *d < Duration::from_secs(150))
        );
        let early = spreads
            .iter()
            .filter(|d| **d < Duration::from_secs(100))
            .count();
        assert!(
            (400..600).contains(&early),
            "{early} of 1000 in the first half"
        );
    }

    #[test]
    fn the_groups_of_a_safety_check_are_compared_whole() {
        let g = |name: &[u8], consumers| GroupInfo {
            name: name.to_vec(),
            consumers,
            lag: Some(0),
            entries_read: Some(5),
            ..GroupInfo::default()
        };
        let mut r = read(vec![g(b"b", 1)]);
        r.unwatched = vec![g(b"a", 0)];
        assert!(same_groups(&r, vec![g(b"a", 0), g(b"b", 1)]), "any order");
        assert!(!same_groups(&r, vec![g(b"b", 1)]), "a group destroyed");
        assert!(
            !same_groups(&r, vec![g(b"a", 0), g(b"b", 1), g(b"c", 0)]),
            "a group created"
        );
        assert!(
            !same_groups(&r, vec![g(b"a", 0), g(b"b", 2)]),
            "a consumer created"
        );
        let mut moved = g(b"b", 1);
        moved.lag = Some(3);
        assert!(!same_groups(&r, vec![g(b"a", 0), moved]), "a group moved");
    }
}
