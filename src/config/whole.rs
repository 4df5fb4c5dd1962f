//! The whole validated [`Config`], what every other module takes, and the
//! settings it holds itself rather than in a section of its own: logging
//! ([`Log`]), output shaping ([`MetricsSettings`]) and the status window.
//! How a reload tells whether the pollers must restart, and the target a
//! `/probe` asks for.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::multitarget::{AuthModules, MultiTargetRefusal, MultiTargetSettings};
use super::polling::{Limits, Schedule};
use super::streams::StreamRules;
use super::target::Target;
use super::web::Web;
use crate::telemetry::LogFormat;

/// Default number of polls in the status window.
pub const DEFAULT_STATUS_WINDOW: usize = 10;
/// Default time `data_loss` holds after the last counted loss: long enough
/// for whoever is paged to see it, even when the group caught up at once.
pub const DEFAULT_DATA_LOSS_HOLD: Duration = Duration::from_secs(3600);

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
    /// Where the exporter keeps what it learned across its restarts
    /// (`crate::state_file`); read at start only.
    pub state_file: Option<PathBuf>,
    /// Per-stream settings.
    pub streams: StreamRules,
    /// `/probe`: which targets it may poll, for how long, how many.
    pub multi_target: MultiTargetSettings,
    /// Credentials and TLS for probed targets, by name.
    pub auth_modules: AuthModules,
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
            // Read and written by the daemon around its pollers; a change
            // takes effect at the next start.
            state_file: _,
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

    /// The target a probe asks for, or why it is refused
    /// ([`MultiTargetSettings::probe_target`]: its URL against
    /// `allowed_targets`, its credentials and TLS from `auth_module`).
    ///
    /// # Errors
    /// Why the probe is refused; nothing was dialled.
    pub fn probe_target(
        &self,
        url: Option<&str>,
        auth_module: Option<&str>,
    ) -> Result<(String, Target), MultiTargetRefusal> {
        self.multi_target
            .probe_target(&self.auth_modules, url, auth_module)
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

/// Logging settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    /// Text or JSON.
    pub format: LogFormat,
    /// A tracing filter directive such as `info` or `redis_streams_exporter=debug`.
    pub level: String,
}

/// Default cap on a name's bytes in a label value: long enough for any
/// name a person chose, short enough that 200 names of 10 KB (each written
/// in some 36 series) cannot turn a scrape into hundreds of megabytes.
pub const DEFAULT_MAX_LABEL_VALUE_BYTES: usize = 1024;

/// Output shaping.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsSettings {
    /// Consumers exported per group; the rest are summed under `__other__`
    /// (0: only `__other__`). A real consumer named `__other__` is exported
    /// as `\x5f_other__`, so it never collides with the sum.
    pub max_consumers_per_group: usize,
    /// Groups watched per stream, the first by name; the rest are not
    /// watched and are counted (`redis_streams_exporter_groups_dropped`).
    /// At most the rows a reply keeps (`XINFO GROUPS` is cut there). The
    /// default, 200, holds a stream of thousands of per-session groups to
    /// about 2,000 series (docs/cost.md).
    pub max_groups_per_stream: usize,
    /// `le` bounds of `pending_by_idle`, in seconds, ascending; empty: the
    /// family is not exported.
    pub pending_idle_buckets: Vec<f64>,
    /// `le` bounds of `pending_by_delivery_count`, ascending; empty: the
    /// family is not exported.
    pub delivery_count_buckets: Vec<u64>,
    /// Bytes of a name from Redis written in a label value; longer names
    /// are shortened and marked (see `metrics::text`).
    pub max_label_value_bytes: usize,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        MetricsSettings {
            max_consumers_per_group: 50,
            max_groups_per_stream: 200,
            pending_idle_buckets: vec![10.0, 60.0, 300.0, 900.0, 3600.0, 21600.0],
            delivery_count_buckets: vec![1, 2, 3, 5, 10, 20],
            max_label_value_bytes: DEFAULT_MAX_LABEL_VALUE_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::loading::from_str;

    #[test]
    fn a_changed_data_loss_hold_is_a_polling_change() {
        let before = from_str("t.toml", "", &Default::default()).unwrap();
        let after = from_str(
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
