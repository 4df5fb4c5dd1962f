//! The whole validated [`Config`] and its logging section: what every other
//! module takes, and how a reload tells whether the pollers must restart.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{
    AuthModules, Limits, LogFormat, MetricsSettings, MultiTargetSettings, Schedule, StreamRules,
    Target, Web,
};

/// A fully validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The file it came from, if any (for reload and messages).
    pub source: Option<PathBuf>,
    /// HTTP side.
    pub web: Web,
    /// Logging.
    pub log: Log,
    /// Redis targets, at least one, names unique.
    pub targets: Vec<Arc<Target>>,
    /// Probe intervals.
    pub schedule: Schedule,
    /// Per-target cost limits.
    pub limits: Limits,
    /// Output shaping.
    pub metrics: MetricsSettings,
    /// Polls in the group-status sliding window.
    pub status_window: usize,
    /// How long `data_loss` holds after the last loss was counted.
    pub data_loss_hold: Duration,
    /// Per-stream settings.
    pub streams: StreamRules,
    /// `/probe`: which targets it may poll, for how long, how many.
    pub multi_target: MultiTargetSettings,
    /// Credentials and TLS for probed targets, by name.
    pub auth_modules: AuthModules,
}

/// Logging settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    /// Text or JSON.
    pub format: LogFormat,
    /// A tracing filter directive such as `info` or `redis_streams_exporter=debug`.
    pub level: String,
}

impl Config {
    /// Whether anything that decides how a target is polled, besides the
    /// target itself, differs: a change restarts the pollers.
    pub fn polling_changed(&self, other: &Config) -> bool {
        // Every field is named, so a new setting is sorted here or the build
        // fails (a reload once ignored a changed `data_loss_hold`).
        let Config {
            source: _,
            web: _,
            log: _,
            targets: _,
            multi_target: _,
            auth_modules: _,
            schedule,
            limits,
            metrics,
            status_window,
            data_loss_hold,
            streams,
        } = self;
        *schedule != other.schedule
            || *limits != other.limits
            || *metrics != other.metrics
            || *status_window != other.status_window
            || *data_loss_hold != other.data_loss_hold
            || *streams != other.streams
    }
}

/// Targets by name, for the landing page and reloads.
pub fn targets_by_name(config: &Config) -> BTreeMap<&str, &Arc<Target>> {
    config
        .targets
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::validate;

    #[test]
    fn a_changed_data_loss_hold_is_a_polling_change() {
        let before = validate::from_str("t.toml", "", &Default::default()).unwrap();
        let after = validate::from_str(
            "t.toml",
            "[status]\ndata_loss_hold = \"2h\"\n",
            &Default::default(),
        )
        .unwrap();
        assert_ne!(before.data_loss_hold, after.data_loss_hold);
        assert!(
            before.polling_changed(&after),
            "a reload must hand the pollers the new hold"
        );
        assert!(
            crate::poller::memory_survives(&before, &after),
            "the hold changes no memory: the pollers keep their windows and ledgers"
        );
        assert!(!before.polling_changed(&before.clone()));
    }
}
