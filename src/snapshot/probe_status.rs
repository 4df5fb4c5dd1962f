//! The last run of each probe: what the probe health metrics and the
//! budget are worked out from.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The last run of one probe.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProbeStatus {
    /// Whether it succeeded.
    pub success: bool,
    /// How long it took.
    pub duration: Duration,
    /// When it last succeeded.
    pub last_success: Option<SystemTime>,
    /// Time from this run to the next one scheduled (the configured interval,
    /// or discovery's adaptive cadence and backoff).
    pub interval: Option<Duration>,
    /// Why the last run failed, when it did (no credentials, no paths).
    pub last_error: Option<Arc<str>>,
    /// Commands the last run sent.
    pub commands: u64,
    /// Of those, commands its next runs will not repeat (the first read of
    /// idle groups, which later runs read one at a time).
    pub one_off: u64,
    /// Time between the starts of the last two runs: the cadence achieved.
    pub achieved_interval: Option<Duration>,
    /// When the last run started (exporter clock).
    pub started_at: Option<tokio::time::Instant>,
    /// Runs that panicked (each logged; the probe's loop restarted).
    pub panics: u64,
}

impl ProbeStatus {
    /// Commands per second this probe's cadence needs: its last run's
    /// commands, less those its next runs will not repeat, over its
    /// interval.
    pub fn commands_needed_per_second(&self) -> Option<f64> {
        let interval = self.interval?.as_secs_f64();
        let steady = self.commands.saturating_sub(self.one_off);
        (interval > 0.0).then(|| steady as f64 / interval)
    }
}
