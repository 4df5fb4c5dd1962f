//! The consumers probe, every minute by default: `XINFO CONSUMERS key group`
//! for the groups whose stream-poll line shows something to learn (see
//! [`ask`]): every run for groups with work, one run in [`idle_every`] (5,
//! more where their reads would take over a twentieth of the budget) for
//! idle groups with consumers, never for groups without consumers (their
//! empty list is known). It exports the top consumers by pending count (the rest
//! summed under `__other__`), counts the entries held by consumers inactive
//! longer than the stream's `consumer_inactive_after` (orphaned), and records
//! when any consumer last read successfully, for the group status.

use std::sync::Arc;
use std::time::Duration;

use super::context::{ProbeContext, ProbeError, Problems};
use super::groups::{GroupLine, group_lines, idle_every, per_group};
use super::memory::{Holder, LastRead};
use super::state::TargetState;
use crate::backend::reply::{self, ConsumerInfo};
use crate::backend::{Command, ROWS_KEPT};
use crate::config::StreamSettings;
use crate::snapshot::{Consumers, ExportedConsumer, Name};
use crate::vocab::ProbeKind;
use crate::vocab::SkipKind;

/// Milliseconds since the consumer last read successfully: `inactive` on
/// 7.2+, `idle` before (which meant the same then). `None` when it never did.
pub fn since_last_read_ms(c: &ConsumerInfo) -> Option<u64> {
    if c.never_active {
        None
    } else {
        Some(c.inactive_ms.unwrap_or(c.idle_ms))
    }
}

/// A consumer that has not tried to read for this long is stale: a worker
/// gone without `XGROUP DELCONSUMER`, counted apart from the idle ones.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// How one group's consumers are summarised for export.
#[derive(Clone, Copy, Debug)]
pub struct Tally<'a> {
    /// Consumers exported by name (`max_consumers_per_group`).
    pub cap: usize,
    /// Inactivity after which a consumer's entries are orphaned.
    pub inactive_after: Duration,
    /// A consumer whose last read attempt is more recent is live: the
    /// status window.
    pub live_within: Duration,
    /// The stream's settings: its consumer-name rewrites.
    pub settings: &'a StreamSettings,
}

/// Caps and summarises one group's consumers. `unlisted_pending` is what
/// consumers the reply left out (past [`ROWS_KEPT`]) hold: summed under
/// `__other__`, and neither orphaned, live nor stale (their reads are
/// unknown).
///
/// Orphaned entries, live and stale consumers are counted per consumer as
/// Redis lists them; then the names a rewrite matches are merged into its
/// name. The order is what an on-call acts on: the consumers holding
/// entries for half the orphan limit or more (longer than the group's
/// consumers usually hold them) first, then the other holders, most
/// entries first and the longest silent among equals, then the consumers
/// holding nothing, rewritten names first and the most recent readers
/// next, so the cap never hides a crashed worker behind busy ones, nor a
/// live worker behind stale ones.
pub fn summarise(all: Vec<ConsumerInfo>, tally: &Tally<'_>, unlisted_pending: u64) -> Consumers {
    let limit = tally.inactive_after.as_millis() as u64;
    let orphaned = all
        .iter()
        .filter(|c| since_last_read_ms(c).is_none_or(|ms| ms >= limit))
        .map(|c| c.pending)
        .sum();
    let live_ms = tally.live_within.as_millis() as u64;
    let live = all.iter().filter(|c| c.idle_ms < live_ms).count() as u64;
    let stale_ms = STALE_AFTER.as_millis() as u64;
    let stale = all.iter().filter(|c| c.idle_ms >= stale_ms).count() as u64;
    let mut exported = renamed(all, tally.settings);
    for c in &mut exported {
        c.holds_long =
            c.info.pending > 0 && since_last_read_ms(&c.info).is_none_or(|ms| ms >= limit / 2);
    }
    // Those holding entries long first, then the other holders (most
    // entries first, the longest silent among equals), then the rest:
    // rewritten names first, then the most recent readers.
    let rank = |c: &ExportedConsumer| match (c.holds_long, c.info.pending > 0) {
        (true, _) => 0,
        (false, true) => 1,
        (false, false) => 2,
    };
    exported.sort_by(|a, b| {
        rank(a).cmp(&rank(b)).then_with(|| {
            if a.info.pending > 0 {
                b.info
                    .pending
                    .cmp(&a.info.pending)
                    .then_with(|| silence(b).cmp(&silence(a)))
            } else {
                b.renamed
                    .cmp(&a.renamed)
                    .then_with(|| a.info.idle_ms.cmp(&b.info.idle_ms))
            }
            .then_with(|| a.info.name.cmp(&b.info.name))
        })
    });
    let cap = tally.cap;
    let other_pending = (exported.len() > cap || unlisted_pending > 0).then(|| {
        exported
            .iter()
            .skip(cap)
            .map(|c| c.info.pending)
            .sum::<u64>()
            + unlisted_pending
    });
    exported.truncate(cap);
    Consumers {
        top: exported,
        other_pending,
        live,
        stale,
        orphaned,
        inactive_after: tally.inactive_after,
    }
}

/// How long `c` has not read successfully; never is the longest.
fn silence(c: &ExportedConsumer) -> u64 {
    since_last_read_ms(&c.info).unwrap_or(u64::MAX)
}

/// The consumers under the names they are exported as: those a rewrite of
/// `settings` matches merged into its name (with any consumer already
/// called so), their entries summed and their latest reads kept.
fn renamed(all: Vec<ConsumerInfo>, settings: &StreamSettings) -> Vec<ExportedConsumer> {
    if settings.consumer_names.is_empty() {
        return all
            .into_iter()
            .map(|info| ExportedConsumer {
                info,
                renamed: false,
                holds_long: false,
            })
            .collect();
    }
    let mut by_name: std::collections::BTreeMap<Vec<u8>, ExportedConsumer> =
        std::collections::BTreeMap::new();
    for mut info in all {
        let renamed = match settings.renamed_consumer(&info.name) {
            Some(name) => {
                info.name = name;
                true
            }
            None => false,
        };
        match by_name.entry(info.name.clone()) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(ExportedConsumer {
                    info,
                    renamed,
                    holds_long: false,
                });
            }
            std::collections::btree_map::Entry::Occupied(mut e) => {
                let kept = e.get_mut();
                kept.renamed |= renamed;
                let k = &mut kept.info;
                k.pending += info.pending;
                k.idle_ms = k.idle_ms.min(info.idle_ms);
                k.inactive_ms = match (k.inactive_ms, info.inactive_ms) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                k.never_active &= info.never_active;
            }
        }
    }
    by_name.into_values().collect()
}

/// What the consumers probe does with a group this run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// Send `XINFO CONSUMERS`.
    Read,
    /// Send `XINFO CONSUMERS` out of an idle group's turn: a read its next
    /// runs will not repeat.
    CatchUp,
    /// No consumers: the empty list is known.
    KnownEmpty,
    /// Idle and not its turn: the last read stands.
    Keep,
}

/// Whether to read a group's consumers on run `run`, from its stream-poll
/// `line`, the `last` read, and its `turn` among idle groups, which are read
/// one run in `every` (spread so that each run reads about one in `every`
/// of them, not all of them every `every`th run).
/// An idle group is read at once when the last read no longer matches the
/// line: none yet, another number of consumers, or entries held then (the
/// PEL has emptied since, and orphaned entries must not linger).
pub fn ask(line: GroupLine, last: Option<LastRead>, run: u64, (turn, every): (u64, u64)) -> Ask {
    if line.consumers == 0 {
        return Ask::KnownEmpty;
    }
    if line.work || (run + turn) % every.max(1) == 0 {
        Ask::Read
    } else if last.is_none_or(|l| l.consumers != line.consumers || l.held) {
        Ask::CatchUp
    } else {
        Ask::Keep
    }
}

/// A group's turn among idle groups read one run in `every`: a stable hash
/// of its names.
fn turn(key: &(Name, Name), every: u64) -> (u64, u64) {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() % every.max(1), every)
}

/// Consumers holding entries remembered per group between runs, to learn
/// how long they hold entries before reading again (the longest-silent
/// first: a consumer that stops holding for long is what matters).
pub const HOLDERS_KEPT: usize = 64;

fn name_hash(name: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
}

/// Learns from this run's list how long consumers held entries without
/// reading: a consumer that held entries at the last run and has read since
/// held them at least as long as it had not read then. Gives this run's
/// holders to compare the next run with.
pub fn learn_holds(
    holds: &mut crate::cadence::Holds,
    before: &[Holder],
    list: &[ConsumerInfo],
    now_ms: u64,
) -> Vec<Holder> {
    let mut holders = Vec::new();
    for c in list {
        let Some(silent_ms) = since_last_read_ms(c) else {
            continue;
        };
        let name = name_hash(&c.name);
        let read_at_ms = now_ms.saturating_sub(silent_ms);
        if let Ok(i) = before.binary_search_by_key(&name, |h| h.name) {
            if read_at_ms > before[i].read_at_ms {
                holds.record(now_ms, before[i].silent_ms);
            }
        }
        if c.pending > 0 {
            holders.push(Holder {
                name,
                read_at_ms,
                silent_ms,
            });
        }
    }
    if holders.len() > HOLDERS_KEPT {
        holders.sort_unstable_by_key(|h| std::cmp::Reverse(h.silent_ms));
        holders.truncate(HOLDERS_KEPT);
    }
    holders.sort_unstable_by_key(|h| h.name);
    holders
}

/// The consumers and the pending entries a reply of `listed` consumers
/// left out, from the stream poll's line for the group (`consumers`,
/// `pending`): none unless the reply was cut at [`ROWS_KEPT`].
fn unlisted(listed: &[ConsumerInfo], line: Option<(u64, u64)>) -> (u64, u64) {
    let count = listed.len() as u64;
    match line {
        Some((consumers, pending)) if count >= ROWS_KEPT && consumers > count => {
            let held: u64 = listed.iter().map(|c| c.pending).sum();
            (consumers - count, pending.saturating_sub(held))
        }
        _ => (0, 0),
    }
}

/// Records what a read (or what the line told) found for one group; the
/// consumers a cut reply left out.
fn record(
    state: &mut TargetState,
    key: (Name, Name),
    list: Vec<ConsumerInfo>,
    now_ms: Option<u64>,
    cap: usize,
    schedule: (Duration, usize),
) -> u64 {
    let (stream_interval, window) = schedule;
    let line = state
        .snapshot
        .streams
        .get(&key.0)
        .and_then(|s| s.groups.get(&key.1))
        .map(|g| (g.consumers, g.pending));
    let (unlisted_consumers, unlisted_pending) = unlisted(&list, line);
    // A consumer left out may have read last: when any was, the last read
    // is unknown rather than the listed ones' latest.
    let last_read_at_ms = match (now_ms, list.is_empty() || unlisted_consumers > 0) {
        (_, true) | (None, _) => None,
        (Some(now), false) => Some(
            list.iter()
                .filter_map(since_last_read_ms)
                .min()
                .map_or(0, |ms| now.saturating_sub(ms)),
        ),
    };
    let mut holds = None;
    if let Some(memory) = state.groups.get_mut(&key) {
        if let Some(now) = now_ms {
            memory.holders = learn_holds(&mut memory.holds, &memory.holders, &list, now);
            holds = memory.holds.value(now);
        }
        memory.last_read_at_ms = last_read_at_ms;
        memory.consumers_read = Some(LastRead {
            consumers: list.len() as u64 + unlisted_consumers,
            held: list.iter().any(|c| c.pending > 0),
        });
    }
    let Some(stream) = state.snapshot.streams.get(&key.0) else {
        return unlisted_consumers;
    };
    let Some(group) = stream.groups.get(&key.1) else {
        return unlisted_consumers;
    };
    let inactive_after = crate::cadence::inactive_after(
        stream.settings.consumer_inactive_after,
        group.read_interval.map(Duration::from_secs_f64),
        holds,
        stream_interval,
    );
    let tally = Tally {
        cap,
        inactive_after,
        live_within: stream_interval.saturating_mul(window as u32),
        settings: &stream.settings,
    };
    let summary = summarise(list, &tally, unlisted_pending);
    if summary.orphaned > 0 {
        state.findings.insert(key.clone());
    }
    // Unchanged consumers keep their allocation (and are shared with the
    // published snapshot).
    if state
        .snapshot
        .consumers
        .get(&key)
        .is_none_or(|c| **c != summary)
    {
        Arc::make_mut(&mut state.snapshot.consumers).insert(key, Arc::new(summary));
    }
    unlisted_consumers
}

/// Runs the consumers probe.
///
/// # Errors
/// When the target cannot be reached or replies cannot be decoded.
pub async fn run(ctx: &ProbeContext) -> Result<(), ProbeError> {
    let cap = ctx.config.metrics.max_consumers_per_group;
    let interval = (ctx.config.schedule.stream, ctx.config.status_window);
    let pairs = {
        let mut state = ctx.state();
        let run = state.consumers_runs;
        state.consumers_runs += 1;
        let mut pairs = Vec::new();
        let mut catch_up = 0;
        let lines = group_lines(&state);
        let idle = lines
            .iter()
            .filter(|(_, l)| l.consumers > 0 && !l.work)
            .count();
        let every = idle_every(idle, &ctx.config);
        for (key, line) in lines {
            let last = state.groups.get(&key).and_then(|m| m.consumers_read);
            match ask(line, last, run, turn(&key, every)) {
                Ask::Read => pairs.push(key),
                Ask::CatchUp => {
                    catch_up += 1;
                    pairs.push(key);
                }
                // What XINFO CONSUMERS answers for a group without consumers.
                Ask::KnownEmpty => {
                    record(&mut state, key, Vec::new(), None, cap, interval);
                }
                Ask::Keep => {}
            }
        }
        state
            .one_off_commands
            .insert(ProbeKind::Consumers, catch_up);
        pairs
    };
    let mut problems = Problems::default();
    per_group(
        ctx,
        &pairs,
        |s, g| Command::XinfoConsumers {
            key: s.to_vec(),
            group: g.to_vec(),
        },
        reply::consumers,
        &mut problems,
        |now_ms, decoded| {
            let mut state = ctx.state();
            let mut unlisted = 0;
            for (s, g, list) in decoded {
                unlisted += record(
                    &mut state,
                    (s.clone(), g.clone()),
                    list,
                    now_ms,
                    cap,
                    interval,
                );
            }
            if unlisted > 0 {
                ctx.client.stats().skipped(SkipKind::Consumer, unlisted);
            }
        },
    )
    .await?;
    problems.finish(ProbeKind::Consumers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConsumerRename;

    fn c(
        name: &str,
        pending: u64,
        idle_ms: u64,
        inactive_ms: Option<u64>,
        never: bool,
    ) -> ConsumerInfo {
        ConsumerInfo {
            name: name.into(),
            pending,
            idle_ms,
            inactive_ms,
            never_active: never,
        }
    }

    /// Which runs read a group of each kind, over ten runs.
    fn reads(line: GroupLine, last: Option<LastRead>, turn: u64) -> Vec<u64> {
        (0..10)
            .filter(|&run| ask(line, last, run, (turn, 5)) != Ask::Keep)
            .collect()
    }

    #[test]
    fn groups_are_read_where_the_line_shows_something_to_learn() {
        let line = |consumers, pending, work| GroupLine {
            pending,
            consumers,
            work,
        };
        let quiet = Some(LastRead {
            consumers: 2,
            held: false,
        });
        // No consumers: never read, known empty.
        assert!((0..10).all(|run| ask(line(0, 0, false), quiet, run, (0, 5)) == Ask::KnownEmpty));
        assert_eq!(ask(line(0, 0, true), None, 0, (3, 5)), Ask::KnownEmpty);
        // Work (pending or undelivered): every run.
        assert_eq!(
            reads(line(2, 3, true), quiet, 1),
            (0..10).collect::<Vec<_>>()
        );
        assert_eq!(
            reads(line(2, 0, true), quiet, 1),
            (0..10).collect::<Vec<_>>()
        );
        // Idle: one run in five, on the group's own turn.
        assert_eq!(reads(line(2, 0, false), quiet, 0), vec![0, 5]);
        assert_eq!(reads(line(2, 0, false), quiet, 2), vec![3, 8]);
        // Idle, but the last read no longer matches the line: at once, a
        // read the next runs will not repeat.
        assert_eq!(ask(line(2, 0, false), None, 1, (0, 5)), Ask::CatchUp);
        assert_eq!(ask(line(2, 0, false), None, 0, (0, 5)), Ask::Read);
        let fewer = Some(LastRead {
            consumers: 3,
            held: false,
        });
        assert_eq!(ask(line(2, 0, false), fewer, 1, (0, 5)), Ask::CatchUp);
        let held = Some(LastRead {
            consumers: 2,
            held: true,
        });
        assert_eq!(ask(line(2, 0, false), held, 1, (0, 5)), Ask::CatchUp);
    }

    /// A tally of `cap` consumers, orphaned after `inactive_s` seconds,
    /// live within 150 s, renaming by `settings`.
    fn tally(cap: usize, inactive_s: u64, settings: &StreamSettings) -> Tally<'_> {
        Tally {
            cap,
            inactive_after: Duration::from_secs(inactive_s),
            live_within: Duration::from_secs(150),
            settings,
        }
    }

    fn names(s: &Consumers) -> Vec<&str> {
        s.top
            .iter()
            .map(|c| std::str::from_utf8(&c.info.name).unwrap())
            .collect()
    }

    #[test]
    fn caps_by_pending_and_sums_the_rest() {
        let all = vec![
            c("a", 1, 0, Some(0), false),
            c("b", 5, 0, Some(0), false),
            c("c", 3, 0, Some(0), false),
            c("d", 3, 0, Some(0), false),
        ];
        let s = summarise(all, &tally(2, 60, &StreamSettings::default()), 0);
        assert_eq!(names(&s), ["b", "c"]);
        assert_eq!(s.other_pending, Some(4));
        assert_eq!(s.orphaned, 0);
    }

    /// Who is kept under the cap: those holding entries longer than the
    /// group usually does (the crashed worker), the other holders, then the
    /// consumers holding nothing by how recently they tried to read, so a
    /// live worker among hundreds of dead ones with random names is kept,
    /// whatever its name; live and stale are counted over them all.
    #[test]
    fn holders_first_then_the_most_recent_readers() {
        let day = 24 * 3_600_000;
        let mut all: Vec<ConsumerInfo> = (0..300)
            .map(|i| c(&format!("a-dead-{i:03}"), 0, day + i, Some(day + i), false))
            .collect();
        all.push(c("z-live", 0, 200, Some(900), false));
        all.push(c("m-busy", 2, 100, Some(100), false));
        all.push(c("m-crashed", 2, 600_000, Some(600_000), false));
        all.push(c("m-idle", 0, 60_000, Some(60_000), false));
        let s = summarise(all, &tally(4, 300, &StreamSettings::default()), 0);
        assert_eq!(names(&s), ["m-crashed", "m-busy", "z-live", "m-idle"]);
        assert_eq!(s.other_pending, Some(0));
        assert_eq!(s.orphaned, 2);
        assert_eq!((s.live, s.stale), (3, 300));
        // Lean series name the crashed worker only: the busy one holds
        // what it is processing.
        let lean: Vec<bool> = s.top.iter().map(ExportedConsumer::in_lean).collect();
        assert_eq!(lean, [true, false, false, false]);
    }

    /// Consumers a rewrite matches are one consumer under its name: their
    /// entries summed, their latest reads kept, kept in lean series while
    /// holding nothing; orphaned entries are counted per real consumer, so
    /// a crashed worker is not hidden by a live one of its kind.
    #[test]
    fn rewritten_names_merge() {
        let rename = |regex: &str, replacement: &str| ConsumerRename {
            pattern: regex::bytes::Regex::new(&format!("^(?:{regex})$")).unwrap(),
            replacement: replacement.to_string(),
        };
        let settings = StreamSettings {
            consumer_names: vec![
                rename("(?P<kind>[a-z]+)-[0-9a-f]{8}", "${kind}"),
                rename("reaper-.*", "reaper"),
            ],
            ..StreamSettings::default()
        };
        let all = vec![
            c("worker-0badf00d", 3, 900_000, Some(900_000), false),
            c("worker-12345678", 1, 100, Some(500), false),
            c("worker-deadbeef", 0, 50, None, true),
            c("reaper-1", 0, 10_000, Some(10_000), false),
            c("worker", 1, 20, Some(20), false),
            c("other", 0, 5, Some(5), false),
        ];
        let s = summarise(all, &tally(10, 300, &settings), 0);
        assert_eq!(names(&s), ["worker", "reaper", "other"]);
        let worker = &s.top[0];
        assert!(worker.renamed);
        assert_eq!(
            (
                worker.info.pending,
                worker.info.idle_ms,
                worker.info.inactive_ms
            ),
            (5, 20, Some(20))
        );
        assert!(!worker.info.never_active);
        assert_eq!(s.orphaned, 3, "the crashed worker's entries");
        let lean: Vec<bool> = s.top.iter().map(ExportedConsumer::in_lean).collect();
        assert_eq!(lean, [true, true, false]);
        assert_eq!((s.live, s.stale), (5, 0), "all but the crashed worker");
    }

    /// A consumer that held entries and read again held them at least as
    /// long as it had not read at the last run; one that never reads again
    /// (crashed) teaches nothing; consumers holding nothing are not kept.
    #[test]
    fn holds_are_learned_from_consumers_that_read_again() {
        let mut holds = crate::cadence::Holds::default();
        let hour = 3_600_000;
        let mut before = Vec::new();
        // A 100 s handler seen every 30 s, beside a crashed consumer and a
        // consumer holding nothing.
        for (run, silent) in [
            20_000u64, 50_000, 80_000, 10_000, 40_000, 70_000, 100_000, 5_000,
        ]
        .into_iter()
        .enumerate()
        {
            let run = run as u64;
            let list = vec![
                c("handler", 1, silent, Some(silent), false),
                c("crashed", 5, 30_000 * run, Some(30_000 * run), false),
                c("free", 0, 1_000, Some(1_000), false),
            ];
            before = learn_holds(&mut holds, &before, &list, hour + run * 30_000);
            assert_eq!(before.len(), 2, "holders: handler and crashed");
        }
        // Two reads again seen (after 80 s and 100 s): not enough yet.
        assert_eq!(holds.value(hour + 300_000), None);
        let list = vec![c("handler", 1, 60_000, Some(60_000), false)];
        before = learn_holds(&mut holds, &before, &list, hour + 300_000);
        let list = vec![c("handler", 1, 1_000, Some(1_000), false)];
        learn_holds(&mut holds, &before, &list, hour + 330_000);
        // Second longest of 80, 100 and 60 s.
        assert_eq!(holds.value(hour + 330_000), Some(Duration::from_secs(80)));
        // A consumer that reads all the time while it holds entries (it
        // never acknowledges): every run sees a read since the last one,
        // however short its silences look.
        let mut busy = crate::cadence::Holds::default();
        let mut seen = Vec::new();
        for (run, silent) in [900u64, 200, 700, 100].into_iter().enumerate() {
            let list = vec![c("reader", 5 + run as u64, silent, Some(silent), false)];
            seen = learn_holds(&mut busy, &seen, &list, 2 * hour + run as u64 * 30_000);
        }
        assert_eq!(
            busy.value(2 * hour + 90_000),
            Some(Duration::from_millis(700))
        );
    }

    #[test]
    fn a_cut_list_sums_what_it_left_out_under_other() {
        let listed: Vec<ConsumerInfo> = (0..ROWS_KEPT)
            .map(|i| {
                c(
                    &format!("c{i:05}"),
                    u64::from(i < 3),
                    1_000,
                    Some(1_000),
                    false,
                )
            })
            .collect();
        // The line says 100,000 consumers holding 10 entries: 7 are held by
        // consumers the reply left out.
        assert_eq!(
            unlisted(&listed, Some((100_000, 10))),
            (100_000 - ROWS_KEPT, 7)
        );
        // A reply that was not cut (as many as the line, or fewer than the
        // rows kept) leaves nothing out, whatever the line says.
        assert_eq!(unlisted(&listed, Some((ROWS_KEPT, 3))), (0, 0));
        assert_eq!(unlisted(&listed[..5], Some((100_000, 10))), (0, 0));
        assert_eq!(unlisted(&listed, None), (0, 0));
        // The line read at another moment may say fewer pending than listed.
        assert_eq!(
            unlisted(&listed, Some((100_000, 2))),
            (100_000 - ROWS_KEPT, 0)
        );
        let settings = StreamSettings::default();
        let s = summarise(listed, &tally(2, 60, &settings), 7);
        assert_eq!(s.top.len(), 2);
        // One listed holder beyond the two exported, and the 7 left out.
        assert_eq!(s.other_pending, Some(8));
        assert_eq!(s.orphaned, 0, "the listed holders read a second ago");
        let s = summarise(Vec::new(), &tally(2, 60, &settings), 0);
        assert_eq!(s.other_pending, None);
    }

    #[test]
    fn orphaned_uses_inactive_then_idle() {
        let all = vec![
            // 7.2+: polls often (idle small) but has not succeeded for 10 min.
            c("stuck", 4, 100, Some(600_000), false),
            // Before 7.2: idle is time since the last successful read.
            c("old", 2, 600_000, None, false),
            // Never read successfully but holds entries (claimed for it).
            c("never", 1, 0, None, true),
            c("fine", 9, 100, Some(100), false),
        ];
        let s = summarise(all, &tally(10, 120, &StreamSettings::default()), 0);
        assert_eq!(s.orphaned, 7);
        assert_eq!(s.other_pending, None);
    }
}
