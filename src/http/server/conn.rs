//! One connection's record: where it stands (its phase), since when, and
//! when bytes last moved, shared by its task, its I/O and the registry; the
//! deadlines of the edge's timeouts are read from it.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::HttpLimits;

/// Where a connection stands; only the first three may be closed to make
/// room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Phase {
    /// TLS handshake in progress.
    Handshake = 1,
    /// Receiving a request's headers (or nothing yet on a new connection).
    Head = 2,
    /// Kept alive between requests.
    Idle = 3,
    /// The router is answering.
    Handling = 4,
    /// The response is being sent.
    Sending = 5,
    /// Closed to make room, or timed out.
    Closing = 6,
}

impl Phase {
    pub(super) fn from_u8(v: u8) -> Phase {
        match v {
            1 => Phase::Handshake,
            2 => Phase::Head,
            3 => Phase::Idle,
            4 => Phase::Handling,
            5 => Phase::Sending,
            _ => Phase::Closing,
        }
    }

    pub(super) fn waiting(self) -> bool {
        matches!(self, Phase::Handshake | Phase::Head | Phase::Idle)
    }
}

/// Milliseconds since the server started, on tokio's clock.
#[derive(Clone, Copy, Debug)]
pub(super) struct Clock {
    pub(super) epoch: Instant,
}

impl Clock {
    pub(super) fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub(super) fn at(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }
}

/// One connection's state, shared by its task, its I/O and the registry.
#[derive(Debug)]
pub(super) struct ConnRecord {
    pub(super) id: u64,
    pub(super) phase: AtomicU8,
    /// When the phase began.
    pub(super) since: AtomicU64,
    /// When a byte last moved either way.
    pub(super) last_io: AtomicU64,
    /// Wakes the connection's task to recompute its deadline.
    pub(super) changed: Notify,
    /// Cancelled to close the connection to make room.
    pub(super) evict: CancellationToken,
    /// Holds one of the `max_tls_handshakes` slots (changed under the
    /// registry's lock).
    pub(super) handshake_slot: AtomicBool,
}

impl ConnRecord {
    pub(super) fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    /// Moves to `phase` unless the connection is already closing.
    pub(super) fn enter(&self, phase: Phase, now: u64) {
        let mut current = self.phase.load(Ordering::Acquire);
        loop {
            if current == Phase::Closing as u8 || current == phase as u8 {
                return;
            }
            self.since.store(now, Ordering::Release);
            match self.phase.compare_exchange(
                current,
                phase as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        self.changed.notify_one();
    }

    pub(super) fn read_some(&self, now: u64) {
        self.last_io.store(now, Ordering::Release);
        // The first byte of the next request on a kept-alive connection
        // starts its header timeout.
        if self
            .phase
            .compare_exchange(
                Phase::Idle as u8,
                Phase::Head as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            self.since.store(now, Ordering::Release);
            self.changed.notify_one();
        }
    }

    pub(super) fn wrote_some(&self, now: u64) {
        self.last_io.store(now, Ordering::Release);
    }

    /// When the current phase runs out, and which limit that is.
    pub(super) fn deadline(&self, limits: &HttpLimits) -> Option<(u64, &'static str)> {
        let ms = |d: Duration| d.as_millis() as u64;
        let since = self.since.load(Ordering::Acquire);
        match self.phase() {
            Phase::Head => Some((
                since + ms(limits.header_read_timeout),
                "header_read_timeout",
            )),
            Phase::Idle => Some((since + ms(limits.idle_timeout), "idle_timeout")),
            Phase::Sending => Some((
                since.max(self.last_io.load(Ordering::Acquire)) + ms(limits.idle_timeout),
                "idle_timeout (response not read)",
            )),
            // The handshake has its own timeout; handlers are bounded by
            // their own design (they never wait on Redis).
            Phase::Handshake | Phase::Handling | Phase::Closing => None,
        }
    }
}
