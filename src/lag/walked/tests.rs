use super::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

/// A stream whose entries span milliseconds `first..=last`.
fn stream(first: u64, last: u64, max_deleted: Option<StreamId>) -> StreamInfo {
    StreamInfo {
        length: 100,
        last_generated_id: id(last, 0),
        first_entry_id: Some(id(first, 0)),
        last_entry_id: Some(id(last, 0)),
        max_deleted_entry_id: max_deleted,
        ..StreamInfo::default()
    }
}

/// Read milliseconds 100..=109 (each holding 3 entries) and 200..=209 empty.
fn learnt() -> MsEnds {
    let mut ends = MsEnds::default();
    for ms in 100..=109 {
        ends.insert(ms, Some(2));
    }
    ends.insert_empty(200, 209);
    ends
}

#[test]
fn keeps_what_lies_before_the_last_entry_and_after_the_first() {
    // The last entry sits in ms 205: it may still fill, and so may the
    // milliseconds after it; 100..=101 were trimmed away.
    let kept = Walked::keep(learnt(), &stream(102, 205, None)).unwrap();
    let mut want = MsEnds::default();
    for ms in 102..=109 {
        want.insert(ms, Some(2));
    }
    want.insert_empty(200, 204);
    assert_eq!(kept.ends, want);
    assert_eq!(kept.facts(), 9);
}

#[test]
fn nothing_worth_keeping_is_none() {
    assert_eq!(Walked::keep(MsEnds::default(), &stream(1, 500, None)), None);
    // All of it at or past the last entry.
    assert_eq!(Walked::keep(learnt(), &stream(1, 100, None)), None);
    // An empty stream.
    let empty = StreamInfo::default();
    assert_eq!(Walked::keep(learnt(), &empty), None);
}

#[test]
fn more_than_the_cap_is_not_kept() {
    let mut ends = MsEnds::default();
    for ms in 0..WALKED_KEPT_PER_STREAM as u64 + 1 {
        ends.insert(ms * 2, Some(0));
    }
    let big = stream(0, 1 << 20, None);
    assert_eq!(Walked::keep(ends.clone(), &big), None);
    ends.keep_between(0, (WALKED_KEPT_PER_STREAM as u64) * 2);
    assert!(Walked::keep(ends, &big).is_some());
}

#[test]
fn recalled_while_the_stream_only_grew() {
    let deleted = Some(id(50, 0));
    let kept = Walked::keep(learnt(), &stream(100, 300, deleted)).unwrap();
    // More entries since: the same facts.
    assert_eq!(kept.clone().recall(&stream(100, 400, deleted)), kept.ends);
    // A deletion since (7.0+ moves max-deleted-entry-id): start over.
    let later = stream(100, 400, Some(id(105, 1)));
    assert_eq!(kept.clone().recall(&later), MsEnds::default());
    // The last generated ID went back: another stream under the same name.
    assert_eq!(kept.recall(&stream(100, 250, deleted)), MsEnds::default());
}
