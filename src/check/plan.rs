//! When a watch polls, and the configuration its pollers run with: worked
//! out once from the flags and the daemon's configuration, before anything
//! is polled.

use std::time::Duration;

use super::report::short;
use crate::config::Config;

/// How to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Poll for this long; `None` (or zero): one look.
    pub watch: Option<Duration>,
    /// Also say what each target's groups cost the per-group probes.
    pub verbose: bool,
}

/// When the watch polls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct WatchPlan {
    /// The watch; zero for one look.
    pub(super) watch: Duration,
    /// Stream polls after the first complete one.
    pub(super) polls: u32,
    /// The daemon's window, which a status resting on the window needs.
    pub(super) required: Duration,
    /// Say what the groups cost (`-v`).
    pub(super) verbose: bool,
}

impl WatchPlan {
    pub(super) fn new(config: &Config, options: Options) -> WatchPlan {
        let watch = options.watch.unwrap_or_default();
        let interval = config.schedule.stream.max(Duration::from_millis(1));
        // About one poll per stream interval, at least one.
        let polls = if watch.is_zero() {
            0
        } else {
            ((watch.as_secs_f64() / interval.as_secs_f64()).round() as u32).max(1)
        };
        WatchPlan {
            watch,
            polls,
            required: config.schedule.stream * config.status_window as u32,
            verbose: options.verbose,
        }
    }

    /// What a watch shorter than the daemon's window cannot tell, said
    /// before it starts rather than only in the report at its end.
    pub(super) fn too_short(&self) -> Option<String> {
        (!self.watch.is_zero() && self.watch < self.required).then(|| {
            format!(
                "a watch of {} is shorter than the status window ({}, status.window × schedule.stream): \
                 statuses that need the window (stopped, stalled by a position that does not move, \
                 lagging) will be reported warming_up; run `check --watch {}` or longer to judge them",
                short(self.watch),
                short(self.required),
                short(self.required)
            )
        })
    }

    /// The configuration the pollers run with: the daemon's, except that a
    /// watch's stream polls and status window span the watch.
    pub(super) fn config(&self, config: &Config) -> Config {
        let mut config = config.clone();
        if self.polls > 0 {
            config.schedule.stream = self.watch / self.polls;
            // The first complete poll and every one after it.
            config.status_window = self.polls as usize + 1;
        }
        config
    }
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
        let once = WatchPlan::new(&c, Options::default());
        assert_eq!(once.polls, 0);
        assert_eq!(once.required, Duration::from_secs(150));
        assert_eq!(once.config(&c), c, "one look polls as the daemon does");
        let plan = WatchPlan::new(
            &c,
            Options {
                watch: Some(Duration::from_secs(150)),
                ..Options::default()
            },
        );
        assert_eq!(plan.polls, 10);
        let polling = plan.config(&c);
        assert_eq!(polling.schedule.stream, Duration::from_secs(15));
        assert_eq!(polling.status_window, 11);
        // A short watch still polls at least once more.
        let short_watch = WatchPlan::new(
            &c,
            Options {
                watch: Some(Duration::from_secs(4)),
                ..Options::default()
            },
        );
        assert_eq!(short_watch.polls, 1);
        assert_eq!(
            short_watch.config(&c).schedule.stream,
            Duration::from_secs(4)
        );
        let long = WatchPlan::new(
            &c,
            Options {
                watch: Some(Duration::from_secs(300)),
                ..Options::default()
            },
        );
        assert_eq!((long.polls, long.config(&c).status_window), (20, 21));
    }

    #[test]
    fn a_watch_shorter_than_the_window_is_told_before_it_starts() {
        let c = config("");
        let watch = |secs| {
            WatchPlan::new(
                &c,
                Options {
                    watch: Some(Duration::from_secs(secs)),
                    ..Options::default()
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
        assert_eq!(WatchPlan::new(&c, Options::default()).too_short(), None);
    }
}
