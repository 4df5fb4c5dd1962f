//! The state every connection task shares: the registry of open connections,
//! and the two ways of making room in it (closing the connection that waited
//! longest at the connection cap, handing over the oldest handshake's slot at
//! the handshake cap), with the guards that leave it when a task ends; and
//! the gates that keep a recurring warning (a cap reached, accept failing)
//! to one log line per interval, counting the lines they held back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use super::conn::{Clock, ConnRecord, Phase};
use crate::config::HttpLimits;

/// Open connections, and how many hold a handshake slot.
#[derive(Debug, Default)]
pub(super) struct Registry {
    pub(super) conns: HashMap<u64, Arc<ConnRecord>>,
    pub(super) handshaking: usize,
}

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) limits: HttpLimits,
    pub(super) clock: Clock,
    pub(super) registry: Mutex<Registry>,
    pub(super) next_id: AtomicU64,
    pub(super) slots: Arc<Semaphore>,
    pub(super) connection_cap: LogGate,
    pub(super) handshake_cap: LogGate,
    pub(super) accept_errors: LogGate,
}

impl Shared {
    pub(super) fn register(&self, phase: Phase) -> Arc<ConnRecord> {
        let now = self.clock.now();
        let conn = Arc::new(ConnRecord {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            phase: AtomicU8::new(phase as u8),
            since: AtomicU64::new(now),
            last_io: AtomicU64::new(now),
            changed: Notify::new(),
            evict: CancellationToken::new(),
            handshake_slot: AtomicBool::new(false),
        });
        self.registry().conns.insert(conn.id, conn.clone());
        conn
    }

    pub(super) fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Closes the connection waiting (not mid-request) whose phase began
    /// earliest. False when every connection is busy.
    pub(super) fn evict_longest_waiting(&self) -> bool {
        let registry = self.registry();
        let victim = registry
            .conns
            .values()
            .filter(|c| c.phase().waiting())
            .min_by_key(|c| c.since.load(Ordering::Acquire));
        match victim {
            Some(c) => {
                close(c);
                true
            }
            None => false,
        }
    }

    /// Gives `conn` a handshake slot: a free one, or at the cap the slot of
    /// the handshake that started earliest, which is closed. The newest
    /// handshake wins because stalled ones are the oldest. True when one was
    /// closed.
    pub(super) fn begin_handshake(&self, conn: &ConnRecord) -> bool {
        let mut registry = self.registry();
        let mut closed = false;
        if registry.handshaking < self.limits.max_tls_handshakes {
            registry.handshaking += 1;
        } else {
            let victim = registry
                .conns
                .values()
                .filter(|c| c.id != conn.id && c.handshake_slot.load(Ordering::Acquire))
                .min_by_key(|c| c.since.load(Ordering::Acquire));
            match victim {
                // The slot passes to `conn`: the count stays.
                Some(v) => {
                    v.handshake_slot.store(false, Ordering::Release);
                    close(v);
                    closed = true;
                }
                None => registry.handshaking += 1,
            }
        }
        conn.handshake_slot.store(true, Ordering::Release);
        drop(registry);
        conn.enter(Phase::Handshake, self.clock.now());
        closed
    }

    pub(super) fn end_handshake(&self, conn: &ConnRecord) {
        let mut registry = self.registry();
        if conn.handshake_slot.swap(false, Ordering::AcqRel) {
            registry.handshaking -= 1;
        }
    }
}

fn close(c: &ConnRecord) {
    c.phase.store(Phase::Closing as u8, Ordering::Release);
    c.evict.cancel();
}

/// Removes a connection from the registry when its task ends.
pub(super) struct Registered<'a>(pub(super) &'a Shared, pub(super) u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.registry().conns.remove(&self.1);
    }
}

/// Returns a connection's handshake slot when its handshake ends.
pub(super) struct HandshakeSlot<'a>(pub(super) &'a Shared, pub(super) &'a ConnRecord);

impl Drop for HandshakeSlot<'_> {
    fn drop(&mut self) {
        self.0.end_handshake(self.1);
    }
}

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
