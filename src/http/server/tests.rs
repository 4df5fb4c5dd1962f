use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::conn::{Clock, ConnRecord, Phase};
use super::registry::{LogGate, Registry, Shared};
use crate::config::HttpLimits;

fn conn(phase: Phase, since: u64) -> ConnRecord {
    ConnRecord {
        id: since,
        phase: AtomicU8::new(phase as u8),
        since: AtomicU64::new(since),
        last_io: AtomicU64::new(since),
        changed: Notify::new(),
        evict: CancellationToken::new(),
        handshake_slot: AtomicBool::new(false),
    }
}

fn shared(max_tls_handshakes: usize) -> Shared {
    Shared {
        limits: HttpLimits {
            max_tls_handshakes,
            ..HttpLimits::default()
        },
        clock: Clock {
            epoch: Instant::now(),
        },
        registry: Mutex::new(Registry::default()),
        next_id: AtomicU64::new(0),
        slots: Arc::new(Semaphore::new(1)),
        connection_cap: LogGate::new(),
        handshake_cap: LogGate::new(),
        accept_errors: LogGate::new(),
    }
}

#[test]
fn deadlines_follow_the_phase() {
    let limits = HttpLimits {
        header_read_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(120),
        ..HttpLimits::default()
    };
    let c = conn(Phase::Head, 1_000);
    assert_eq!(c.deadline(&limits).unwrap().0, 11_000);
    c.enter(Phase::Handling, 2_000);
    assert_eq!(c.deadline(&limits), None);
    c.enter(Phase::Sending, 3_000);
    c.wrote_some(5_000);
    assert_eq!(c.deadline(&limits).unwrap().0, 125_000);
    c.enter(Phase::Idle, 6_000);
    assert_eq!(c.deadline(&limits).unwrap().0, 126_000);
    // The next request's first byte starts the header timeout.
    c.read_some(7_000);
    assert_eq!(c.phase(), Phase::Head);
    assert_eq!(c.deadline(&limits).unwrap().0, 17_000);
    // A closing connection stays closing.
    c.phase.store(Phase::Closing as u8, Ordering::Release);
    c.enter(Phase::Idle, 8_000);
    assert_eq!(c.phase(), Phase::Closing);
}

#[test]
fn eviction_takes_the_longest_waiting_and_spares_busy_connections() {
    let shared = shared(1);
    let add = |phase, since| {
        let c = Arc::new(conn(phase, since));
        shared.registry().conns.insert(c.id, c.clone());
        c
    };
    let busy = add(Phase::Handling, 1);
    let sending = add(Phase::Sending, 2);
    let idle = add(Phase::Idle, 5);
    let head = add(Phase::Head, 3);
    assert!(shared.evict_longest_waiting());
    assert!(head.evict.is_cancelled() && !idle.evict.is_cancelled());
    assert!(shared.evict_longest_waiting());
    assert!(idle.evict.is_cancelled());
    assert!(!shared.evict_longest_waiting(), "only busy ones left");
    assert!(!busy.evict.is_cancelled() && !sending.evict.is_cancelled());
}

#[test]
fn a_new_handshake_takes_the_slot_of_the_oldest() {
    let shared = shared(2);
    let add = |since| {
        let c = Arc::new(conn(Phase::Handshake, since));
        shared.registry().conns.insert(c.id, c.clone());
        c
    };
    let (a, b, c) = (add(1), add(2), add(3));
    assert!(!shared.begin_handshake(&a));
    assert!(!shared.begin_handshake(&b));
    assert!(shared.begin_handshake(&c), "at the cap");
    assert!(a.evict.is_cancelled() && !b.evict.is_cancelled());
    assert_eq!(shared.registry().handshaking, 2);
    shared.end_handshake(&a);
    assert_eq!(shared.registry().handshaking, 2, "a's slot went to c");
    shared.end_handshake(&b);
    shared.end_handshake(&c);
    assert_eq!(shared.registry().handshaking, 0);
}

#[test]
fn log_gate_lets_one_line_through_per_interval() {
    let gate = LogGate::new();
    assert_eq!(gate.due(0), Some(0));
    assert_eq!(gate.due(1), None);
    assert_eq!(gate.due(9_999), None);
    assert_eq!(gate.due(10_000), Some(2));
}
