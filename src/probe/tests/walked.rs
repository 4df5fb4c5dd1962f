//! The walked milliseconds kept per stream stay within the target's cap,
//! and go with the stream or with the target's data.

use std::sync::Arc;

use crate::lag::{MsEnds, WALKED_KEPT_PER_STREAM, Walked};
use crate::probe::state::{TargetState, WALKED_KEPT_PER_TARGET};
use crate::snapshot::Name;
use crate::vocab::StreamId;
use crate::vocab::StreamInfo;

fn name(i: usize) -> Name {
    Arc::from(format!("s{i}").as_bytes())
}

/// A stream's walks that learnt `facts` milliseconds, kept.
fn walked(facts: usize) -> Walked {
    let mut ends = MsEnds::default();
    for ms in 0..facts as u64 {
        ends.insert(ms * 2, Some(0));
    }
    let stream = StreamInfo {
        length: 1,
        last_generated_id: StreamId::new(1 << 30, 0),
        first_entry_id: Some(StreamId::new(0, 0)),
        last_entry_id: Some(StreamId::new(1 << 30, 0)),
        ..StreamInfo::default()
    };
    Walked::keep(ends, &stream).unwrap()
}

#[test]
fn the_target_keeps_at_most_its_cap_and_a_retake_frees_it() {
    let mut state = TargetState::default();
    let streams = WALKED_KEPT_PER_TARGET / WALKED_KEPT_PER_STREAM;
    for i in 0..streams {
        state.remember_walked(&name(i), Some(walked(WALKED_KEPT_PER_STREAM)));
    }
    assert_eq!(state.walked_facts, WALKED_KEPT_PER_TARGET);
    // Full: one more stream's walks start over next time.
    state.remember_walked(&name(streams), Some(walked(1)));
    assert!(state.take_walked(&name(streams)).is_none());
    // A stream taken for its poll and kept again does not count twice.
    let again = state.take_walked(&name(0)).unwrap();
    assert_eq!(state.walked_facts, WALKED_KEPT_PER_TARGET - again.facts());
    state.remember_walked(&name(0), Some(again));
    assert_eq!(state.walked_facts, WALKED_KEPT_PER_TARGET);
    // Kept as nothing: the old one goes.
    state.remember_walked(&name(1), None);
    assert!(state.take_walked(&name(1)).is_none());
    assert_eq!(
        state.walked_facts,
        WALKED_KEPT_PER_TARGET - WALKED_KEPT_PER_STREAM
    );
    // Streams the stream poll no longer knows (here: none) lose theirs.
    state.prune_memory();
    assert_eq!(state.walked_facts, 0);
    assert!(state.take_walked(&name(2)).is_none());
    // The target went down: nothing read from it is kept.
    state.remember_walked(&name(2), Some(walked(3)));
    assert_eq!(state.walked_facts, 3);
    state.forget_data();
    assert_eq!(state.walked_facts, 0);
    assert!(state.take_walked(&name(2)).is_none());
}
