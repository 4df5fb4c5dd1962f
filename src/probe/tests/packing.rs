//! The per-group maps are rebuilt (packed) only after enough growth, and
//! packing keeps every group's memory and ledger.

use std::sync::Arc;

use crate::probe::state::TargetState;
use crate::snapshot::Name;

fn key(stream: &str, group: &str) -> (Name, Name) {
    (Arc::from(stream.as_bytes()), Arc::from(group.as_bytes()))
}

#[test]
fn groups_made_on_their_first_poll_are_counted_once() {
    let mut state = TargetState::default();
    let k = key("s", "g");
    state.group_entries(&k).0.rewinds_seen = 7;
    assert_eq!(state.groups_added_since_packed, 1);
    // The same group again: found, not made.
    assert_eq!(state.group_entries(&k).0.rewinds_seen, 7);
    assert_eq!(state.groups_added_since_packed, 1);
    // A ledger that outlived its memory (the target went down) is found,
    // the memory made again: one group added.
    state.groups.clear();
    state.group_entries(&k);
    assert_eq!(state.groups_added_since_packed, 2);
    assert_eq!((state.groups.len(), state.ledgers.len()), (1, 1));
}

#[test]
fn maps_are_packed_after_growing_by_more_than_an_eighth_and_keep_every_group() {
    let mut state = TargetState::default();
    for i in 0..800 {
        state
            .group_entries(&key(&format!("s{i:04}"), "g"))
            .0
            .rewinds_seen = i;
    }
    state.pack_group_maps();
    assert_eq!(
        state.groups_added_since_packed, 0,
        "the first poll's groups are packed"
    );
    assert_eq!((state.groups.len(), state.ledgers.len()), (800, 800));
    for (i, memory) in state.groups.values().enumerate() {
        assert_eq!(memory.rewinds_seen, i as u64);
    }
    // 100 more (an eighth): not yet.
    for i in 800..900 {
        state.group_entries(&key(&format!("s{i:04}"), "g"));
    }
    state.pack_group_maps();
    assert_eq!(state.groups_added_since_packed, 100);
    // Past an eighth of 901: packed.
    for i in 900..1000 {
        state.group_entries(&key(&format!("s{i:04}"), "g"));
    }
    state.pack_group_maps();
    assert_eq!(state.groups_added_since_packed, 0);
    assert_eq!((state.groups.len(), state.ledgers.len()), (1000, 1000));
    assert_eq!(state.groups[&key("s0799", "g")].rewinds_seen, 799);
}
