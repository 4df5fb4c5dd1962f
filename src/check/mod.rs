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

mod judge;
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
use crate::snapshot::{Name, SnapshotStore};
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
            Some(judge::target_report(
                &config, &plan, poller, snapshot, watched,
            ))
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
