//! The `check` subcommand: the daemon's own probes, status rules, PEL scan
//! and ghost checks, run from a shell, and a report of what they found
//! (problems first, then one line per target), as a table or JSON.
//!
//! A one-shot run polls every target once (every probe in order, then the
//! stream probe again so the status sees consumer activity and pending
//! entries). What needs a window it cannot know: a group whose position or
//! oldest pending entry does not move (stalled), a lag that keeps growing, a
//! consumer that stopped (which looks exactly like a batch consumer between
//! two runs), pending entries piling up, dead letters arriving. Such a group
//! is reported `unknown`, never `ok` and never `stopped`, and the report
//! says how long to watch.
//!
//! `--watch DURATION` polls for that long: the stream probe about every
//! `schedule.stream` (so the window holds at least a few polls), the other
//! probes on their own intervals and once more at the end, and judges each
//! group over everything it watched. The status rules are the daemon's
//! ([`crate::status`]), over a window that is the watch itself; a status that
//! rests on the window ([`crate::status::Basis::Window`]) is reported only
//! when the group was watched for at least the daemon's window
//! (`status.window × schedule.stream`, 2m30s by default), else `unknown`.
//! A watch shorter than that window is warned about on stderr before it
//! starts, not only in the report at its end.
//!
//! Exit codes: 0 no problem found, 1 problems, 2 usage or configuration
//! error, 3 a target could not be reached (whatever the others show).

mod progress;
mod report;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub use progress::Progress;
pub use report::{GroupReport, Report, TargetReport};

use crate::config::Config;
use crate::poller::Poller;
use crate::probe::ProbeKind;
use crate::snapshot::{Name, SnapshotStore, TargetSnapshot};
use crate::status::{self, Basis, GroupStatus};
use crate::vocab::StreamId;

/// Exit code when no problem was found.
pub const EXIT_OK: u8 = 0;
/// Exit code when a problem was found.
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit code of a usage or configuration error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code when a target could not be reached.
pub const EXIT_UNREACHABLE: u8 = 3;

/// Age above which the oldest pending entry, or the lag, is a problem for a
/// stream without `max_delay`: the alert rules' default.
pub const DEFAULT_DELAY_THRESHOLD: Duration = Duration::from_secs(300);

/// How to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Poll for this long; `None` (or zero): one look.
    pub watch: Option<Duration>,
}

/// When the watch polls.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Plan {
    /// The watch; zero for one look.
    watch: Duration,
    /// Stream polls after the first complete one.
    polls: u32,
    /// The daemon's window, which a status resting on the window needs.
    required: Duration,
}

impl Plan {
    fn new(config: &Config, options: Options) -> Plan {
        let watch = options.watch.unwrap_or_default();
        let interval = config.schedule.stream.max(Duration::from_millis(1));
        // About one poll per stream interval, at least one.
        let polls = if watch.is_zero() {
            0
        } else {
            ((watch.as_secs_f64() / interval.as_secs_f64()).round() as u32).max(1)
        };
        Plan {
            watch,
            polls,
            required: config.schedule.stream * config.status_window as u32,
        }
    }

    /// What a watch shorter than the daemon's window cannot tell, said
    /// before it starts rather than only in the report at its end.
    fn too_short(&self) -> Option<String> {
        (!self.watch.is_zero() && self.watch < self.required).then(|| {
            format!(
                "a watch of {} is shorter than the status window ({}, status.window × schedule.stream): \
                 statuses that need the window (stopped, stalled by a position that does not move, \
                 lagging) will be reported unknown; run `check --watch {}` or longer to judge them",
                short(self.watch),
                short(self.required),
                short(self.required)
            )
        })
    }

    /// The configuration the pollers run with: the daemon's, except that a
    /// watch's stream polls and status window span the watch.
    fn config(&self, config: &Config) -> Config {
        let mut config = config.clone();
        if self.polls > 0 {
            config.schedule.stream = self.watch / self.polls;
            // The first complete poll and every one after it.
            config.status_window = self.polls as usize + 1;
        }
        config
    }
}

/// What the watch remembers of a group from when it first saw it.
#[derive(Clone, Debug)]
struct Baseline {
    first_seen: Instant,
    oldest_pending: Option<StreamId>,
    pending: u64,
    lost: u64,
    rewinds: u64,
}

/// What the watch of one target saw besides its final snapshot.
#[derive(Debug, Default)]
struct Watched {
    groups: BTreeMap<(Name, Name), Baseline>,
    dead_letters: BTreeMap<Name, u64>,
    /// Oldest pending IDs at the end, from the pending summary.
    oldest_pending: BTreeMap<(Name, Name), Option<StreamId>>,
    ended: Option<Instant>,
}

impl Watched {
    /// Records the groups and dead-letter streams seen for the first time.
    fn remember(&mut self, poller: &Poller) {
        let now = Instant::now();
        let state = poller.context().state();
        for (s, st) in state.snapshot.streams.iter() {
            if let Some(dl) = st.dead_letter {
                self.dead_letters.entry(s.clone()).or_insert(dl.length);
            }
            for (g, gs) in st.groups.iter() {
                let key = (s.clone(), g.clone());
                let oldest = state.groups.get(&key).and_then(|m| m.oldest_pending_id);
                self.groups.entry(key).or_insert_with(|| Baseline {
                    first_seen: now,
                    oldest_pending: oldest,
                    pending: gs.info.pending,
                    lost: gs.lost.map_or(0, |l| l.trimmed + l.deleted),
                    rewinds: gs.rewinds,
                });
            }
        }
    }

    fn finish(&mut self, poller: &Poller) {
        self.ended = Some(Instant::now());
        let state = poller.context().state();
        self.oldest_pending = state
            .groups
            .iter()
            .map(|(k, m)| (k.clone(), m.oldest_pending_id))
            .collect();
    }
}

/// Runs the check and returns its report.
///
/// # Errors
/// When a target's client cannot be built (an unreadable CA file).
pub async fn run(
    config: Arc<Config>,
    options: Options,
    progress: &Progress,
) -> Result<Report, crate::backend::ClientSetupError> {
    let plan = Plan::new(&config, options);
    if let Some(warning) = plan.too_short() {
        progress.warn(&warning);
    }
    let polling = Arc::new(plan.config(&config));
    let store = Arc::new(SnapshotStore::default());
    let mut pollers = Vec::new();
    for target in &polling.targets {
        pollers.push(Poller::new(polling.clone(), target.clone(), store.clone())?);
    }
    progress.start(&pollers, plan.watch, plan.polls);
    // Targets are watched concurrently, as the daemon polls them.
    let mut runs = tokio::task::JoinSet::new();
    for (i, poller) in pollers.into_iter().enumerate() {
        let progress = progress.clone();
        runs.spawn(async move {
            let watched = watch(&poller, plan, &progress, i).await;
            (i, poller, watched)
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = runs.join_next().await {
        match joined {
            Ok(result) => results.push(result),
            // A panicking probe is a bug; the others' results still count.
            Err(e) => tracing::error!(error = %e, "a target's check panicked"),
        }
    }
    progress.finish();
    results.sort_by_key(|(i, _, _)| *i);
    let targets = store.targets();
    let reports = results
        .iter()
        .filter_map(|(_, poller, watched)| {
            let name = &poller.context().target.name;
            let snapshot = targets.iter().find(|t| *t.name == **name)?;
            Some(target_report(&config, &plan, poller, snapshot, watched))
        })
        .collect();
    Ok(Report::new(reports, plan.watch, plan.required))
}

/// Polls one target for the plan.
async fn watch(poller: &Poller, plan: Plan, progress: &Progress, slot: usize) -> Watched {
    let config = poller.context().config.clone();
    let mut watched = Watched::default();
    let mut due: BTreeMap<ProbeKind, Instant> = BTreeMap::new();
    let run = async |kind: ProbeKind, due: &mut BTreeMap<ProbeKind, Instant>| {
        progress.phase(slot, Some(kind));
        let next = poller.run_probe(kind).await;
        let after = match next {
            crate::schedule::Next::After(d) => d,
            crate::schedule::Next::Grid => kind.interval(&config),
        };
        due.insert(kind, Instant::now() + after);
    };
    for kind in ProbeKind::ALL {
        run(kind, &mut due).await;
    }
    // The stream poll again: the first one ran before the consumers and
    // pending-summary probes, so it could not judge activity.
    run(ProbeKind::Stream, &mut due).await;
    watched.remember(poller);
    let start = Instant::now();
    for k in 1..=plan.polls {
        let at = start + plan.watch * k / plan.polls;
        progress.waiting(slot, at, k);
        tokio::time::sleep_until(at).await;
        let last = k == plan.polls;
        for kind in ProbeKind::ALL {
            if kind == ProbeKind::Stream {
                continue;
            }
            // At the end every per-group probe runs once more, so what is
            // reported is as fresh as the last stream poll.
            let is_due = due.get(&kind).is_some_and(|d| *d <= Instant::now());
            if is_due || (last && kind.per_group()) {
                run(kind, &mut due).await;
            }
        }
        run(ProbeKind::Stream, &mut due).await;
        watched.remember(poller);
    }
    progress.phase(slot, None);
    watched.finish(poller);
    watched
}

fn target_report(
    config: &Config,
    plan: &Plan,
    poller: &Poller,
    t: &TargetSnapshot,
    watched: &Watched,
) -> TargetReport {
    let target = &poller.context().target;
    let mut report = TargetReport {
        name: target.name.clone(),
        up: t.up,
        streams: t.streams.len(),
        problems: Vec::new(),
        notes: Vec::new(),
        groups: Vec::new(),
    };
    if !t.up {
        report.problems.push(format!(
            "unreachable: {}",
            crate::exposition::down_reason(t)
        ));
        return report;
    }
    for (kind, p) in &t.probes {
        if let (false, Some(e)) = (p.success, &p.last_error) {
            report
                .problems
                .push(format!("probe {} failed: {e}", kind.label()));
        }
    }
    if let Some(dropped) = t.streams_dropped.filter(|d| *d > 0) {
        report.problems.push(format!(
            "{dropped} streams over max_streams ({}) are not watched",
            target.max_streams
        ));
    }
    if t.streams.is_empty() {
        report.notes.push("no streams found".to_string());
    }
    let ended = watched.ended.unwrap_or_else(Instant::now);
    for (s, st) in t.streams.iter() {
        if let Some(every) = st.settings.read_every {
            report.notes.push(format!(
                "{}: read every {} (read_every): work waiting between two runs is ok; stopped only once a run is {} overdue",
                crate::text::printable(&**s),
                short(every),
                short(every + plan.required)
            ));
        }
        let threshold = st
            .settings
            .max_delay
            .map_or(DEFAULT_DELAY_THRESHOLD, |d| d / 2);
        for (g, gs) in st.groups.iter() {
            let key = (s.clone(), g.clone());
            let base = watched.groups.get(&key);
            let span = base.map_or(Duration::ZERO, |b| ended - b.first_seen);
            // A status resting on the window counts only when the group was
            // watched for the daemon's whole window.
            let status = match (gs.status, gs.status_basis) {
                (Some(status), Some(Basis::Latest)) => Some(status),
                (Some(status), Some(Basis::Window)) if span >= plan.required => Some(status),
                // Nothing to do is proven; only whether anything was produced
                // meanwhile is not: ok rather than idle.
                (Some(GroupStatus::Idle), Some(Basis::Window)) => Some(GroupStatus::Ok),
                _ => None,
            };
            let scan = t.scans.get(&key).and_then(|sc| sc.last.clone());
            let scan_progress = t.scans.get(&key).map(|sc| sc.progress);
            let consumers = t.consumers.get(&key);
            let mut group = GroupReport {
                stream: s.clone(),
                group: g.clone(),
                status,
                lag: gs.lag,
                lag_estimated: gs.lag_estimated,
                lag_seconds: gs.lag_seconds,
                pending: gs.info.pending,
                consumers: gs.info.consumers,
                oldest_pending_age_seconds: t.oldest_pending_age(&key),
                max_idle_seconds: scan
                    .as_ref()
                    .and_then(|sc| sc.max_idle_ms)
                    .map(|ms| ms as f64 / 1000.0),
                poison: scan.as_ref().map(|sc| sc.poison),
                ghosts: scan.as_ref().map(|sc| sc.ghost),
                orphaned: consumers.map(|c| c.orphaned),
                dead_letters: st.dead_letter.map(|d| d.length),
                trimmed_undelivered: gs.trimmed_undelivered,
                watched_seconds: span.as_secs_f64(),
                problems: Vec::new(),
                notes: Vec::new(),
            };
            let problems = &mut group.problems;
            match status {
                Some(GroupStatus::DataLoss) => problems.push(match gs.trimmed_undelivered {
                    Some(n) if n > 0 => {
                        format!("data_loss: {n} entries were trimmed before this group read them")
                    }
                    _ => format!(
                        "data_loss: entries were removed before this group read them (lost {} since the check started; the status holds {} after a loss)",
                        gs.lost
                            .map_or(0, |l| l.trimmed + l.deleted)
                            .saturating_sub(base.map_or(0, |b| b.lost)),
                        humantime::format_duration(config.data_loss_hold)
                    ),
                }),
                Some(GroupStatus::Stopped) if gs.info.consumers == 0 => problems.push(format!(
                    "stopped: no consumer in the group, with {} waiting",
                    work(gs.lag, gs.info.pending)
                )),
                Some(GroupStatus::Stopped) => problems.push(format!(
                    "stopped: no consumer read successfully in the {} watched, with {} waiting",
                    short(span),
                    work(gs.lag, gs.info.pending)
                )),
                Some(GroupStatus::Stalled) => {
                    let oldest_then = base.and_then(|b| b.oldest_pending);
                    let oldest_now = watched.oldest_pending.get(&key).copied().flatten();
                    if gs.info.pending > 0 && oldest_then.is_some() && oldest_then == oldest_now {
                        problems.push(format!(
                            "stalled: the oldest pending entry ({}) was not acknowledged in the {} watched",
                            oldest_now.map_or_else(String::new, |id| id.to_string()),
                            short(span)
                        ));
                    } else {
                        problems.push(format!(
                            "stalled: the group's position did not move in the {} watched, with {} waiting",
                            short(span),
                            work(gs.lag, gs.info.pending)
                        ));
                    }
                }
                Some(GroupStatus::Lagging) => problems.push(match (gs.lag_seconds, st.settings.max_delay) {
                    (Some(age), Some(max)) if age > max.as_secs_f64() / 2.0 => format!(
                        "lagging: the oldest undelivered entry is {} old, over half of max_delay ({})",
                        short_secs(age),
                        short(max)
                    ),
                    (Some(age), None) if age > status::DEFAULT_LAG_SECONDS_LAGGING => format!(
                        "lagging: the oldest undelivered entry is {} old, over {} (no max_delay set)",
                        short_secs(age),
                        short_secs(status::DEFAULT_LAG_SECONDS_LAGGING)
                    ),
                    _ if gs.overtake_eta.is_some() => format!(
                        "lagging: at the recent rates trimming reaches entries it has not read in {}",
                        short_secs(gs.overtake_eta.unwrap_or_default())
                    ),
                    (_, Some(max)) if gs.retention_margin.is_some_and(|m| m < max.as_secs_f64()) => format!(
                        "lagging: its first unread entry is {} from the trimming edge, under max_delay ({})",
                        short_secs(gs.retention_margin.unwrap_or_default()),
                        short(max)
                    ),
                    _ => format!(
                        "lagging: the lag never fell in the {} watched (now {})",
                        short(span),
                        gs.lag.map_or("unknown".to_string(), |l| l.to_string())
                    ),
                }),
                _ => {}
            }
            if let Some(age) = gs.lag_seconds.filter(|a| *a > threshold.as_secs_f64()) {
                if status != Some(GroupStatus::Lagging) {
                    problems.push(format!(
                        "lag: the oldest undelivered entry is {} old (over {})",
                        short_secs(age),
                        short(threshold)
                    ));
                }
            }
            if let Some(age) = group
                .oldest_pending_age_seconds
                .filter(|a| *a > threshold.as_secs_f64())
            {
                problems.push(format!(
                    "the oldest pending entry was produced {} ago (over {}) and is still not acknowledged",
                    short_secs(age),
                    short(threshold)
                ));
            }
            if let Some(n) = group.poison.filter(|n| *n > 0) {
                problems.push(format!(
                    "{n} poison entries (delivered at least {} times)",
                    st.settings.poison_delivery_count
                ));
            }
            if let Some(n) = group.ghosts.filter(|n| *n > 0) {
                problems.push(format!(
                    "{n} ghost entries: pending, but their bodies were trimmed or deleted"
                ));
            }
            if let Some(n) = group.orphaned.filter(|n| *n > 0) {
                problems.push(format!(
                    "{n} pending entries held by consumers inactive for more than {}",
                    short(st.settings.consumer_inactive_after)
                ));
            }
            if gs.ahead_of_stream {
                problems.push(
                    "last-delivered-id is beyond the stream's last ID: entries added with smaller IDs will never be delivered"
                        .to_string(),
                );
            }
            if let (Some(then), Some(now)) = (watched.dead_letters.get(s), group.dead_letters) {
                if now > *then {
                    problems.push(format!(
                        "{} dead letters arrived in the {} watched",
                        now - then,
                        short(span)
                    ));
                }
            }
            let notes = &mut group.notes;
            if gs.lag_estimated && gs.lag.is_some() {
                notes.push("lag estimated (Redis gave none that can be trusted)".to_string());
            }
            if let Some(base) = base {
                if gs.rewinds > base.rewinds {
                    notes.push(format!(
                        "the group's position moved backwards {} times",
                        gs.rewinds - base.rewinds
                    ));
                }
                if !plan.watch.is_zero() && gs.info.pending > base.pending {
                    notes.push(format!(
                        "pending grew from {} to {} in the {} watched",
                        base.pending,
                        gs.info.pending,
                        short(span)
                    ));
                }
            }
            match (&scan, scan_progress) {
                (Some(sc), _) if sc.ghost_unchecked > 0 => notes.push(format!(
                    "{} possible ghosts not checked (limits.ghost_checks_per_scan)",
                    sc.ghost_unchecked
                )),
                (None, Some(p)) if gs.info.pending > 0 => notes.push(format!(
                    "the PEL scan did not finish ({:.0}% read): poison and ghosts unknown",
                    p * 100.0
                )),
                _ => {}
            }
            if let Some(dl) = group.dead_letters.filter(|n| *n > 0) {
                if plan.watch.is_zero() {
                    notes.push(format!(
                        "{dl} dead letters (whether more arrive needs --watch)"
                    ));
                }
            }
            report.groups.push(group);
        }
    }
    if !t.streams.is_empty() {
        report.notes.push(per_group_cost(config, poller));
    }
    report
}

/// What the target's groups cost the per-group probes at the daemon's
/// intervals: idle groups cost little or nothing, and the note says so.
fn per_group_cost(config: &Config, poller: &Poller) -> String {
    let lines: Vec<crate::probe::GroupLine> = crate::probe::group_lines(&poller.context().state())
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    let cost = crate::probe::GroupCost::of(&lines, config);
    format!(
        "per-group probes: about {:.1} commands/s at the configured intervals \
         ({:.1}/s if every group were asked every run): {} asked every run, \
         {} idle with consumers (read one run in {}), {} with nothing to ask",
        cost.per_second,
        cost.every_group_per_second,
        plural_groups(cost.with_work),
        cost.idle_with_consumers,
        crate::probe::consumers::IDLE_EVERY,
        cost.nothing_to_ask,
    )
}

/// "1 group", "3 groups".
fn plural_groups(n: usize) -> String {
    if n == 1 {
        "1 group".to_string()
    } else {
        format!("{n} groups")
    }
}

/// "12 undelivered and 3 pending entries", for messages.
fn work(lag: Option<u64>, pending: u64) -> String {
    match (lag.filter(|l| *l > 0), pending) {
        (Some(l), 0) => format!("{l} undelivered entries"),
        (Some(l), p) => format!("{l} undelivered and {p} pending entries"),
        (None, 0) => "undelivered work".to_string(),
        (None, p) => format!("{p} pending entries"),
    }
}

/// A duration as `2m30s`.
pub fn short(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    humantime::format_duration(Duration::from_secs(secs))
        .to_string()
        .replace(' ', "")
}

/// Seconds as `2m30s`.
pub fn short_secs(seconds: f64) -> String {
    if seconds < 1.0 {
        return "0s".to_string();
    }
    short(Duration::from_secs(seconds as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        crate::config::from_str("t.toml", text, &Default::default()).unwrap()
    }

    #[test]
    fn a_watch_spans_its_polls_and_its_window() {
        let c = config("");
        let once = Plan::new(&c, Options::default());
        assert_eq!(once.polls, 0);
        assert_eq!(once.required, Duration::from_secs(150));
        assert_eq!(once.config(&c), c, "one look polls as the daemon does");
        let plan = Plan::new(
            &c,
            Options {
                watch: Some(Duration::from_secs(150)),
            },
        );
        assert_eq!(plan.polls, 10);
        let polling = plan.config(&c);
        assert_eq!(polling.schedule.stream, Duration::from_secs(15));
        assert_eq!(polling.status_window, 11);
        // A short watch still polls at least once more.
        let short_watch = Plan::new(
            &c,
            Options {
                watch: Some(Duration::from_secs(4)),
            },
        );
        assert_eq!(short_watch.polls, 1);
        assert_eq!(
            short_watch.config(&c).schedule.stream,
            Duration::from_secs(4)
        );
        let long = Plan::new(
            &c,
            Options {
                watch: Some(Duration::from_secs(300)),
            },
        );
        assert_eq!((long.polls, long.config(&c).status_window), (20, 21));
    }

    #[test]
    fn a_watch_shorter_than_the_window_is_told_before_it_starts() {
        let c = config("");
        let watch = |secs| {
            Plan::new(
                &c,
                Options {
                    watch: Some(Duration::from_secs(secs)),
                },
            )
        };
        let warning = watch(120).too_short().expect("2m is shorter than 2m30s");
        assert!(
            warning.starts_with("a watch of 2m is shorter than the status window (2m30s"),
            "{warning}"
        );
        assert!(warning.contains("check --watch 2m30s"), "{warning}");
        assert_eq!(watch(150).too_short(), None);
        assert_eq!(Plan::new(&c, Options::default()).too_short(), None);
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(short(Duration::from_secs(150)), "2m30s");
        assert_eq!(short(Duration::from_millis(300)), "300ms");
        assert_eq!(short_secs(0.4), "0s");
        assert_eq!(short_secs(3725.9), "1h2m5s");
    }
}
