//! Unit tests of the snapshot types.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::vocab::{StreamId, StreamInfo};

fn group(pending: u64) -> GroupState {
    GroupState {
        consumers: 0,
        pending,
        last_delivered_id: StreamId::new(1, 0),
        entries_read: None,
        ..GroupState::default()
    }
}

#[test]
fn groups_are_sorted_found_by_name_and_keep_the_last_duplicate() {
    let name = |s: &str| -> Name { Arc::from(s.as_bytes()) };
    let groups = Groups::new(vec![
        (name("b"), group(1)),
        (name("a"), group(2)),
        (name("b"), group(3)),
        (name("\u{0}x"), group(4)),
    ]);
    let keys: Vec<&[u8]> = groups.keys().map(|k| &**k).collect();
    assert_eq!(keys, [&b"\0x"[..], b"a", b"b"]);
    assert_eq!(groups.len(), 3);
    assert_eq!(groups.get(b"b").map(|g| g.pending), Some(3));
    assert_eq!(groups.get(b"a").map(|g| g.pending), Some(2));
    assert!(groups.contains_key(b"\0x"));
    assert!(!groups.contains_key(b"c"));
    assert!(Groups::default().is_empty());
}

#[test]
fn pruning_copies_a_shared_map_only_when_something_goes() {
    let map: Arc<BTreeMap<u32, u32>> = Arc::new(BTreeMap::from([(1, 1), (2, 2)]));
    let mut working = map.clone();
    retain_keys(&mut working, |_| true);
    assert!(
        Arc::ptr_eq(&map, &working),
        "nothing removed, nothing copied"
    );
    retain_keys(&mut working, |k| *k == 1);
    assert!(!Arc::ptr_eq(&map, &working));
    assert_eq!(working.keys().collect::<Vec<_>>(), [&1]);
    assert_eq!(map.len(), 2, "the published map is untouched");
}

/// The pending summary's oldest ID is aged by the later clock of the two
/// polls; a stream poll that found nothing pending withholds the age.
#[test]
fn oldest_pending_age_takes_the_later_clock() {
    let key: GroupKey = (Arc::from(&b"s"[..]), Arc::from(&b"g"[..]));
    let with_group = |g: GroupState| TargetSnapshot {
        streams: Arc::new(BTreeMap::from([(
            key.0.clone(),
            Arc::new(StreamState {
                info: StreamInfo::default(),
                time_based_ids: true,
                settings: Arc::default(),
                dead_letter: None,
                groups: Groups::new(vec![(key.1.clone(), g)]),
                ..StreamState::default()
            }),
        )])),
        oldest_pending: Arc::new(BTreeMap::from([(
            key.clone(),
            OldestPending {
                id: StreamId::new(10_000, 0),
                read_at_ms: 15_000,
            },
        )])),
        ..TargetSnapshot::default()
    };
    let mut g = group(3);
    // The summary read it after the stream poll: its own clock.
    g.pending_aged_at_ms = Some(12_000);
    assert_eq!(with_group(g.clone()).oldest_pending_age(&key), Some(5.0));
    // A later stream poll ages it.
    g.pending_aged_at_ms = Some(19_500);
    assert_eq!(with_group(g.clone()).oldest_pending_age(&key), Some(9.5));
    // A stream poll that found nothing pending withholds it.
    g.pending_aged_at_ms = None;
    assert_eq!(with_group(g).oldest_pending_age(&key), None);
    // Without the summary's ID there is no age.
    let mut t = with_group(group(3));
    t.oldest_pending = Arc::default();
    assert_eq!(t.oldest_pending_age(&key), None);
}
