//! The loss ledgers outlive what the server survives: an outage (its grace
//! first, time as a parameter), a server
//! that cannot answer `INFO` for now, refused streams; and start a new
//! baseline for another server, node by node.

use std::sync::Arc;

use crate::backend::NodeAddr;
use crate::probe::state::RunId;
use crate::probe::state::TargetState;
use crate::snapshot::Name;

fn key(stream: &str) -> (Name, Name) {
    (Arc::from(stream.as_bytes()), Arc::from(&b"g"[..]))
}

fn node(n: &str) -> NodeAddr {
    Arc::from(n)
}

fn known(id: &str) -> RunId {
    RunId::Known(id.to_string())
}

#[test]
fn after_an_outage_the_ledgers_wait_for_every_node_to_answer() {
    let mut state = TargetState::default();
    state.group_entries(&key("s"));
    state.verify_ledgers(&[(node("a:1"), known("r1"))]);
    assert!(!state.ledgers_unverified);
    state.forget_data();
    assert!(
        state.ledgers_unverified,
        "an outage: nobody knows the server"
    );
    assert!(state.ledger_to_feed(&key("s")).is_none());
    // Busy, loading: ask again, keep waiting.
    state.verify_ledgers(&[(node("a:1"), RunId::NotNow)]);
    assert!(state.ledgers_unverified);
    assert_eq!(state.ledgers.len(), 1, "the ledger is kept");
    state.verify_ledgers(&[(node("a:1"), known("r1"))]);
    assert!(!state.ledgers_unverified);
    assert!(state.ledger_to_feed(&key("s")).is_some());
}

#[test]
fn each_ledger_follows_the_server_of_its_node() {
    let mut state = TargetState::default();
    state.verify_ledgers(&[(node("a:1"), known("r1")), (node("b:1"), known("r2"))]);
    let (a, b) = (
        state.run_ids[&node("a:1")].clone(),
        state.run_ids[&node("b:1")].clone(),
    );
    // One shard fails over: only its node's run_id changes.
    state.verify_ledgers(&[(node("a:1"), known("r1")), (node("b:1"), known("r3"))]);
    assert_eq!(state.run_ids[&node("a:1")], a);
    assert_ne!(state.run_ids[&node("b:1")], b);
}

#[test]
fn a_server_that_can_never_say_is_another_one_after_an_outage() {
    let mut state = TargetState::default();
    state.group_entries(&key("s"));
    state.forget_data();
    state.verify_ledgers(&[(node("a:1"), RunId::Unknowable)]);
    assert!(!state.ledgers_unverified, "nothing to wait for");
    assert!(state.run_ids.is_empty());
}

#[test]
fn refused_streams_keep_their_memory_and_ledgers() {
    let mut state = TargetState::default();
    state.group_entries(&key("busy"));
    state.group_entries(&key("gone"));
    state.unread_streams.insert(key("busy").0);
    state.prune_memory();
    state.prune_ledgers();
    assert!(state.ledgers.contains_key(&key("busy")));
    assert!(state.groups.contains_key(&key("busy")));
    assert!(!state.ledgers.contains_key(&key("gone")));
}

/// A fall keeps what was read for the grace, the time given as a
/// parameter: served with `target_up 0`, the memory and ledgers kept, the
/// ledgers waiting for `INFO`; past the grace it is dropped, once.
#[test]
fn a_fall_holds_the_data_for_the_grace_then_drops_it() {
    use std::time::Duration;
    let grace = Duration::from_secs(45);
    let mut state = TargetState::default();
    state.group_entries(&key("s"));
    state.verify_ledgers(&[(node("a:1"), known("r1"))]);
    state.rose();
    let streams = state.snapshot.streams.clone();
    let generation = state.generation;
    let t0 = tokio::time::Instant::now();
    assert!(!state.fell(t0, grace));
    assert!(!state.snapshot.up && state.snapshot.held);
    assert!(state.snapshot.serves_data());
    assert_eq!(state.generation, generation + 1, "runs under way stop");
    assert!(state.ledgers_unverified, "the next server is not known yet");
    assert!(state.groups.contains_key(&key("s")), "the memory is kept");
    // Later runs in the grace change nothing more.
    assert!(!state.held_past(t0 + grace - Duration::from_millis(1), grace));
    assert!(state.held_past(t0 + grace, grace));
    assert!(!state.fell(t0 + grace - Duration::from_millis(1), grace));
    assert_eq!(state.generation, generation + 1);
    assert!(state.snapshot.held);
    assert!(Arc::ptr_eq(&state.snapshot.streams, &streams));
    // Past it: dropped, and said so once.
    assert!(state.fell(t0 + grace, grace));
    assert!(!state.snapshot.held && !state.snapshot.serves_data());
    assert!(state.groups.is_empty());
    assert_eq!(state.ledgers.len(), 1, "ledgers outlive an outage");
    assert!(!state.fell(t0 + grace * 2, grace));
    // Back: up, nothing held; a new fall starts a new grace.
    state.rose();
    assert!(state.snapshot.up && !state.snapshot.held);
    let t1 = t0 + grace * 3;
    assert!(!state.fell(t1, grace));
    assert!(state.snapshot.held);
}

/// A target that never came up has nothing to hold.
#[test]
fn a_target_that_was_never_up_holds_nothing() {
    use std::time::Duration;
    let mut state = TargetState::default();
    let t0 = tokio::time::Instant::now();
    assert!(!state.fell(t0, Duration::from_secs(45)));
    assert!(!state.snapshot.held && !state.snapshot.serves_data());
}

/// A blip inside the grace: the target comes back with everything it had.
#[test]
fn a_blip_inside_the_grace_keeps_every_memory() {
    use std::time::Duration;
    let mut state = TargetState::default();
    state.group_entries(&key("s"));
    state.rose();
    let t0 = tokio::time::Instant::now();
    assert!(!state.fell(t0, Duration::from_secs(45)));
    state.rose();
    assert!(state.snapshot.up && !state.snapshot.held);
    assert!(state.down_since.is_none());
    assert!(state.groups.contains_key(&key("s")));
    assert!(state.ledgers.contains_key(&key("s")));
}
