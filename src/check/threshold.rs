//! The age at which a delay is a problem when the configuration sets none:
//! the alert rules' default, so `check` and the alerts agree.

use std::time::Duration;

/// Age above which the oldest pending entry, or the lag, is a problem for a
/// stream without `max_delay`: the alert rules' default.
pub const DEFAULT_DELAY_THRESHOLD: Duration = Duration::from_secs(300);
