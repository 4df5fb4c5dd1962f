//! The gate that keeps a recurring warning (a cap reached, accept failing)
//! to one log line per interval, counting the lines it held back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// At most one log line per this interval for each kind of limit reached.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Logs a recurring event at most once per [`LOG_EVERY`], counting the rest.
#[derive(Debug)]
pub(super) struct LogGate {
    next: AtomicU64,
    suppressed: AtomicU64,
}

impl LogGate {
    pub(super) fn new() -> Self {
        LogGate {
            next: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Some(times suppressed since the last line) when a line is due.
    pub(super) fn due(&self, now: u64) -> Option<u64> {
        let next = self.next.load(Ordering::Acquire);
        if now >= next
            && self
                .next
                .compare_exchange(
                    next,
                    now + LOG_EVERY.as_millis() as u64,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            Some(self.suppressed.swap(0, Ordering::AcqRel))
        } else {
            self.suppressed.fetch_add(1, Ordering::AcqRel);
            None
        }
    }
}
