use super::*;
use crate::vocab::StreamId;
use crate::vocab::{GroupInfo, StreamInfo};

fn id(ms: u64) -> StreamId {
    StreamId::new(ms, 0)
}

fn stream(len: u64, first: u64, last: u64) -> StreamInfo {
    StreamInfo {
        length: len,
        groups: 1,
        last_generated_id: id(last),
        first_entry_id: (len > 0).then(|| id(first)),
        last_entry_id: (len > 0).then(|| id(last)),
        entries_added: Some(len),
        max_deleted_entry_id: Some(StreamId::ZERO),
        recorded_first_entry_id: Some(id(first)),
        ..StreamInfo::default()
    }
}

fn group(ld: u64, lag: Option<u64>, read: Option<u64>) -> GroupInfo {
    GroupInfo {
        name: b"g".to_vec(),
        consumers: 1,
        pending: 0,
        last_delivered_id: id(ld),
        entries_read: read,
        lag,
    }
}

fn reading<'a>(
    s: &'a StreamInfo,
    g: &'a GroupInfo,
    arithmetic: Arithmetic,
    previous: Option<&'a Trail>,
) -> Reading<'a> {
    Reading {
        stream: s,
        group: g,
        arithmetic,
        previous,
        advanced_over: None,
    }
}

fn current<'a>(s: &'a StreamInfo, g: &'a GroupInfo) -> Reading<'a> {
    reading(s, g, Arithmetic::Current, None)
}

fn sample(ids: impl IntoIterator<Item = u64>, count: u32) -> UndeliveredSample {
    UndeliveredSample::head(ids.into_iter().map(id).collect(), count)
}

fn none() -> Evidence<'static> {
    Evidence::default()
}

/// The decision table: Redis's own `lag` is trusted as exact only on
/// releases that carry redis#13338, #13473 and #13958 (8.0.0 on); 7.2.7+
/// and 7.4.2+ carry the first two only, the 8.0 release candidates (7.9.x)
/// not the third, Valkey none of them in full.
#[test]
fn arithmetic_follows_the_version() {
    use Arithmetic::*;
    for (server, version, want) in [
        ("redis", "6.2.14", Miscounting),
        ("redis", "7.0.15", Miscounting),
        ("redis", "7.2.4", Miscounting),
        ("redis", "7.2.6", Miscounting),
        ("redis", "7.2.7", Miscounting),
        ("redis", "7.2.11", Miscounting),
        ("redis", "7.4.1", Miscounting),
        ("redis", "7.4.2", Miscounting),
        ("redis", "7.4.7", Miscounting),
        ("redis", "7.9.240", Miscounting),
        ("redis", "8.0.0", Current),
        ("redis", "8.0.2", Current),
        ("redis", "8.6.3", Current),
        ("redis", "9.0.0", Current),
        ("valkey", "8.1.1", Miscounting),
        ("valkey", "9.1.2", Miscounting),
        ("redis", "", Miscounting),
        ("redis", "garbage", Miscounting),
    ] {
        assert_eq!(Arithmetic::of(server, version), want, "{server} {version}");
    }
}

#[test]
fn sound_report_is_used_and_needs_only_the_first_id() {
    let s = stream(10, 1, 10);
    let g = group(4, Some(6), Some(4));
    let r = current(&s, &g);
    assert_eq!(r.sample_request(100), Some(1));
    let f = r.compute(Some(&sample([5], 1)), &none());
    assert_eq!(f.lag, Some(6));
    assert!(!f.estimated());
    assert_eq!(f.first_undelivered, Some(id(5)));
    assert_eq!(f.trimmed_undelivered, Some(0));
    assert_eq!(f.unread_gone, Some(0));
}

#[test]
fn caught_up_needs_no_sample() {
    let s = stream(10, 1, 10);
    let g = group(10, Some(0), Some(10));
    let r = current(&s, &g);
    assert_eq!(r.sample_request(100), None);
    let f = r.compute(None, &none());
    assert_eq!(
        (f.lag, f.estimated(), f.first_undelivered),
        (Some(0), false, None)
    );
}

/// The 7.0.15 miscount (docs/lag-and-losses.md): 10 entries, group read 2,
/// XDEL 5, XTRIM MINID 7 → XLEN 4, Redis says lag 8.
#[test]
fn trim_past_group_corrects_old_server_overcount() {
    let mut s = stream(4, 7, 10);
    s.entries_added = Some(10);
    s.max_deleted_entry_id = Some(id(5));
    let g = group(2, Some(8), Some(2));
    let r = reading(&s, &g, Arithmetic::Miscounting, None);
    assert_eq!(r.sample_request(100), None);
    let f = r.compute(None, &none());
    assert_eq!(f.lag, Some(4));
    assert_eq!(f.method, LagMethod::TrimCorrected);
    assert!(!f.estimated() && f.behind_first_entry);
    // 10 added − 2 read − 4 retained: entries 3, 4, 6 were trimmed, 5 deleted.
    assert_eq!(f.trimmed_undelivered, Some(4));
    assert_eq!(f.unread_gone, Some(4));
    assert_eq!(f.first_undelivered, Some(id(7)));
}

#[test]
fn trim_past_group_without_counters_loss_is_unknown() {
    let mut s = stream(4, 7, 10);
    s.entries_added = None;
    let g = group(2, None, None);
    let f = current(&s, &g).compute(None, &none());
    assert_eq!((f.lag, f.trimmed_undelivered), (Some(4), None));
}

/// A group created at `$` that never caught up: Redis's lag equals the
/// length and entries-read is nil, so the loss cannot be known.
#[test]
fn trim_past_group_with_nil_entries_read_is_unknown_not_zero() {
    let mut s = stream(10, 51, 60);
    s.entries_added = Some(60);
    let g0 = group(0, Some(10), None);
    let f = current(&s, &g0).compute(None, &none());
    assert_eq!(f.lag, Some(10));
    // At 0-0 without deletions, nothing was read: 50 lost.
    assert_eq!(f.trimmed_undelivered, Some(50));
    let g3 = group(3, Some(10), None);
    assert_eq!(
        current(&s, &g3).compute(None, &none()).trimmed_undelivered,
        None
    );
    s.max_deleted_entry_id = Some(id(20));
    assert_eq!(
        current(&s, &g0).compute(None, &none()).trimmed_undelivered,
        None,
        "deletions make the loss unknown"
    );
}

/// Redis 7.0.15, measured: 20 entries, the group reads 10, MAXLEN 8
/// trims 2 of its unread entries, the group reads 3 more. Redis says
/// entries-read 13 and lag 7; 5 entries remain undelivered.
#[test]
fn old_server_count_after_a_gap_is_not_trusted() {
    let mut s = stream(8, 13, 20);
    s.entries_added = Some(20);
    let g = group(15, Some(7), Some(13));
    let before = Trail {
        last_delivered: id(10),
        entries_read: Some(10),
        unread_gone: Some(0),
        first_undelivered: None,
    };
    let r = reading(&s, &g, Arithmetic::Miscounting, Some(&before));
    // The trimming edge passed the group's last position: count.
    assert_eq!(r.sample_request(100), Some(100));
    let f = r.compute(Some(&sample(16..=20, 100)), &none());
    assert_eq!((f.lag, f.method), (Some(5), LagMethod::Rederived));
    assert!(!f.estimated(), "counted in the stream: exact");
    assert_eq!(f.unread_gone, Some(2), "the two trimmed unread entries");
    // The next poll may carry that proof forward: Redis's count minus 2.
    let proven = r.trail(&f);
    let mut s2 = s;
    s2.entries_added = Some(40);
    s2.length = 28;
    s2.last_generated_id = id(40);
    s2.last_entry_id = Some(id(40));
    let g2 = group(17, Some(25), Some(15));
    let mut r2 = reading(&s2, &g2, Arithmetic::Miscounting, Some(&proven));
    // Entries-read rose by 2: the entries the group moved over are counted
    // first (16 and 17 are there: it read them, and the 2 stay gone).
    assert_eq!(
        r2.advance_to_count(),
        Some((id(15).successor().unwrap(), id(17)))
    );
    assert_eq!(r2.sample_request(100), Some(100), "not counted yet");
    r2.advanced_over = Some(2);
    assert_eq!(r2.sample_request(100), Some(1));
    let f2 = r2.compute(Some(&sample([18], 1)), &none());
    assert_eq!((f2.lag, f2.method), (Some(23), LagMethod::Rederived));
    assert!(!f2.estimated());
    assert_eq!(f2.unread_gone, Some(2));
    // The same figures on a server with the current arithmetic are Redis's.
    let r3 = reading(&s2, &g2, Arithmetic::Current, None);
    assert_eq!(r3.compute(Some(&sample([18], 1)), &none()).lag, Some(25));
}

/// Redis 7.0.15 (found by the oracle, seed 2020): 9 entries trimmed before
/// the group read any, then the group read 26; `XGROUP SETID … ENTRIESREAD
/// 135` moves it to the 135th entry ever added with a counter that already
/// accounts for the 9. Redis's lag (223) is then right: carrying the 9
/// forward gave 214. A group that reads the same range keeps them.
#[test]
fn old_server_carried_loss_follows_the_counter_not_the_position() {
    let mut s = stream(349, 10, 358);
    s.entries_added = Some(358);
    let before = Trail {
        last_delivered: id(35),
        entries_read: Some(26),
        unread_gone: Some(9),
        first_undelivered: None,
    };
    let set = group(135, Some(223), Some(135));
    let mut r = reading(&s, &set, Arithmetic::Miscounting, Some(&before));
    assert_eq!(
        r.advance_to_count(),
        Some((id(35).successor().unwrap(), id(135)))
    );
    r.advanced_over = Some(100);
    assert_eq!(r.trusted_report(), Some((223, LagMethod::Reported)));
    let f = r.compute(Some(&sample([136], 1)), &none());
    assert_eq!((f.lag, f.unread_gone), (Some(223), Some(0)));
    assert!(!f.estimated());
    // Read by the consumers instead: entries-read 126, Redis says 232.
    let read = group(135, Some(232), Some(126));
    let mut r = reading(&s, &read, Arithmetic::Miscounting, Some(&before));
    r.advanced_over = Some(100);
    assert_eq!(r.trusted_report(), Some((223, LagMethod::Rederived)));
    // A counter raised past what the range holds cannot be explained: the
    // lag is read from the stream.
    let odd = group(135, Some(100), Some(258));
    let mut r = reading(&s, &odd, Arithmetic::Miscounting, Some(&before));
    r.advanced_over = Some(100);
    assert_eq!(r.trusted_report(), None);
    // Nothing gone before, or the current arithmetic: nothing to count.
    let clean = Trail {
        unread_gone: Some(0),
        ..before
    };
    assert_eq!(
        reading(&s, &read, Arithmetic::Miscounting, Some(&clean)).advance_to_count(),
        None
    );
    assert_eq!(
        reading(&s, &read, Arithmetic::Current, Some(&before)).advance_to_count(),
        None
    );
}

#[test]
fn old_server_count_is_trusted_when_nothing_was_removed() {
    let s = stream(10, 1, 10);
    let g = group(4, Some(6), Some(4));
    let r = reading(&s, &g, Arithmetic::Miscounting, None);
    assert_eq!(r.sample_request(100), Some(1));
    assert_eq!(r.compute(Some(&sample([5], 1)), &none()).lag, Some(6));
}

#[test]
fn old_server_proof_breaks_on_rewind_deletion_or_trim() {
    let mut s = stream(500, 501, 1000);
    s.entries_added = Some(1000);
    let proven = Trail {
        last_delivered: id(600),
        entries_read: Some(600),
        unread_gone: Some(0),
        first_undelivered: None,
    };
    let ok = group(700, Some(300), Some(700));
    let r = reading(&s, &ok, Arithmetic::Miscounting, Some(&proven));
    assert_eq!(r.trusted_report(), Some((300, LagMethod::Reported)));
    let back = group(550, Some(450), Some(550));
    let r = reading(&s, &back, Arithmetic::Miscounting, Some(&proven));
    assert_eq!(r.trusted_report(), None, "rewound");
    let mut deleted = s;
    deleted.max_deleted_entry_id = Some(id(650));
    let r = reading(&deleted, &ok, Arithmetic::Miscounting, Some(&proven));
    assert_eq!(r.trusted_report(), None, "deletion after the last position");
    let mut trimmed = s;
    trimmed.first_entry_id = Some(id(650));
    let r = reading(&trimmed, &ok, Arithmetic::Miscounting, Some(&proven));
    assert_eq!(r.trusted_report(), None, "trim passed the last position");
    let unproven = Trail {
        unread_gone: None,
        ..proven
    };
    let r = reading(&s, &ok, Arithmetic::Miscounting, Some(&unproven));
    assert_eq!(r.trusted_report(), None);
}

/// A stopped group's first undelivered entry is read once: the next polls
/// reuse it while the group has not moved and no deletion reached it.
#[test]
fn a_stopped_groups_first_undelivered_entry_is_read_once() {
    let s = stream(10, 1, 10);
    let g = group(4, Some(6), Some(4));
    let r = current(&s, &g);
    assert_eq!(r.sample_request(100), Some(1), "nothing known yet");
    let f = r.compute(Some(&sample([5], 1)), &none());
    let trail = r.trail(&f);
    assert_eq!(trail.first_undelivered, Some(id(5)));
    // Next poll: the group sits still, the producer went on.
    let mut later = stream(12, 1, 12);
    later.max_deleted_entry_id = Some(StreamId::ZERO);
    let r = reading(&later, &g, Arithmetic::Current, Some(&trail));
    assert_eq!(r.sample_request(100), None, "reused");
    let f = r.compute(None, &none());
    assert_eq!((f.lag, f.first_undelivered), (Some(6), Some(id(5))));
    // Each of these makes it read again.
    let moved = group(5, Some(5), Some(5));
    let r = reading(&later, &moved, Arithmetic::Current, Some(&trail));
    assert_eq!(r.sample_request(100), Some(1), "the group moved");
    let mut deleted = later;
    deleted.max_deleted_entry_id = Some(id(5));
    let r = reading(&deleted, &g, Arithmetic::Current, Some(&trail));
    assert_eq!(r.sample_request(100), Some(1), "the entry was deleted");
    let mut unknown = later;
    unknown.max_deleted_entry_id = None;
    let r = reading(&unknown, &g, Arithmetic::Current, Some(&trail));
    assert_eq!(r.sample_request(100), Some(1), "deletions unknown");
    let reread = group(4, Some(6), None);
    let r = reading(&later, &reread, Arithmetic::Current, Some(&trail));
    assert_eq!(r.sample_request(100), Some(1), "entries-read unknown");
}

/// XDEL of unread entries inside the window: Redis's lag is nil,
/// entries-read still valid; the count proves what was deleted.
#[test]
fn deletions_inside_the_window_are_unread_gone() {
    let mut s = stream(8, 1, 10);
    s.entries_added = Some(10);
    s.max_deleted_entry_id = Some(id(6));
    let g = group(3, None, Some(3));
    let r = current(&s, &g);
    assert_eq!(r.sample_request(100), Some(100));
    let f = r.compute(Some(&sample([4, 7, 8, 9, 10], 100)), &none());
    assert_eq!(f.lag, Some(5));
    assert_eq!(f.unread_gone, Some(2));
    assert_eq!(f.trimmed_undelivered, Some(0));
    assert!(f.exact());
}

/// A group that read on between XINFO and its count proves nothing
/// about losses that poll (its consumers may delete what they read).
#[test]
fn a_count_raced_by_the_group_is_no_proof_of_loss() {
    let mut s = stream(8, 1, 10);
    s.entries_added = Some(10);
    s.max_deleted_entry_id = Some(id(6));
    let g = group(3, None, Some(3));
    let mut sm = sample([4, 7, 8, 9, 10], 100);
    sm.changed_meanwhile = true;
    let f = current(&s, &g).compute(Some(&sm), &none());
    assert_eq!(f.lag, Some(5));
    assert_eq!(f.unread_gone, None);
}

#[test]
fn null_lag_small_range_is_counted_exactly() {
    let s = stream(10, 1, 10);
    let g = group(7, None, None);
    let r = current(&s, &g);
    assert_eq!(r.sample_request(100), Some(100));
    let f = r.compute(Some(&sample(8..=10, 100)), &none());
    assert_eq!(f.lag, Some(3));
    assert_eq!(f.method, LagMethod::Counted);
    assert!(f.estimated() && f.exact());
}

#[test]
fn null_lag_large_range_is_estimated_and_clamped() {
    // 1001 entries, one per ms from 1000 to 2000; group at 1499.
    let s = stream(1001, 1000, 2000);
    let g = group(1499, None, None);
    let r = current(&s, &g);
    let sm = sample(1500..1600, 100);
    assert!(r.walk(&sm, &[]).is_some());
    assert!(r.walk(&sample(1500..1550, 100), &[]).is_none(), "counted");
    let f = r.compute(Some(&sm), &none());
    assert_eq!(f.lag, Some(501));
    assert_eq!(f.method, LagMethod::Estimated);
    assert!(f.estimated() && !f.exact());
    assert_eq!(r.trail(&f).unread_gone, None);
}

/// A burst: 1,000 entries in two milliseconds, 100 delivered,
/// 90 of the rest deleted. Redis's counters prove 810 ≤ lag ≤ 900.
#[test]
fn burst_with_deletions_stays_within_the_counters_bounds() {
    let ms = 1_800_000_000_000;
    let mut all: Vec<StreamId> = (0..600)
        .map(|q| StreamId::new(ms, q))
        .chain((0..400).map(|q| StreamId::new(ms + 1, q)))
        .collect();
    let mut i = 0;
    all.retain(|_| {
        i += 1;
        i <= 100 || (i - 100) % 10 != 0
    });
    let s = StreamInfo {
        length: all.len() as u64,
        groups: 1,
        last_generated_id: StreamId::new(ms + 1, 399),
        first_entry_id: all.first().copied(),
        last_entry_id: all.last().copied(),
        entries_added: Some(1000),
        max_deleted_entry_id: Some(StreamId::new(ms + 1, 399)),
        recorded_first_entry_id: all.first().copied(),
        ..StreamInfo::default()
    };
    let g = GroupInfo {
        last_delivered_id: all[99],
        entries_read: Some(100),
        lag: None,
        ..group(0, None, None)
    };
    let r = current(&s, &g);
    assert_eq!(r.counter_bounds(), Some((810, 900)));
    let sm = UndeliveredSample::head(all[100..200].to_vec(), 100);
    let mut ends = MsEnds::default();
    let walk = r.walk(&sm, &[]).unwrap();
    for _ in 0..WALK_ROUNDS {
        let found: Vec<(Step, Option<StreamId>)> = walk
            .steps(&ends)
            .into_iter()
            .map(|step| {
                let (Step::Last { from, to } | Step::First { from, to }) = step;
                let inside = all.iter().filter(|i| (from..=to).contains(&i.ms));
                let found = match step {
                    Step::Last { .. } => inside.max().copied(),
                    Step::First { .. } => inside.min().copied(),
                };
                (step, found)
            })
            .collect();
        Walk::apply(&found, &mut ends);
    }
    let f = r.compute(
        Some(&sm),
        &Evidence {
            ends: Some(&ends),
            anchors: &[],
        },
    );
    let lag = f.lag.unwrap();
    assert!((810..=891).contains(&lag), "{lag}");
}

#[test]
fn null_lag_without_sample_is_unknown_not_zero() {
    let s = stream(10, 1, 10);
    let g = group(3, None, None);
    let f = current(&s, &g).compute(None, &none());
    assert_eq!(f.lag, None);
    assert_eq!(f.method, LagMethod::Unknown);
    assert!(f.estimated());
}

#[test]
fn report_larger_than_length_is_not_trusted() {
    let s = stream(10, 1, 10);
    let g = group(5, Some(50), None);
    let r = current(&s, &g);
    assert_eq!(r.sample_request(100), Some(100));
    let f = r.compute(Some(&sample(6..=10, 100)), &none());
    assert_eq!((f.lag, f.method), (Some(5), LagMethod::Rederived));
}

#[test]
fn emptied_stream_reports_loss_when_counters_allow() {
    let mut s = stream(0, 0, 10);
    s.entries_added = Some(10);
    let g = group(4, Some(6), Some(4));
    let f = current(&s, &g).compute(None, &none());
    assert_eq!((f.lag, f.trimmed_undelivered), (Some(0), Some(6)));
    let g = group(10, Some(0), Some(10));
    assert_eq!(
        current(&s, &g).compute(None, &none()).trimmed_undelivered,
        Some(0)
    );
}

#[test]
fn setid_into_the_future_is_ahead_of_the_stream() {
    let s = stream(10, 1, 10);
    let g = group(99, None, None);
    let r = current(&s, &g);
    assert_eq!(r.sample_request(100), None);
    let f = r.compute(None, &none());
    assert_eq!(f.lag, Some(0));
    assert!(f.ahead_of_stream);
    let at_end = group(10, None, None);
    assert!(!current(&s, &at_end).compute(None, &none()).ahead_of_stream);
}

#[test]
fn sequence_only_ids_estimate_on_seq() {
    let mut s = stream(1000, 0, 0);
    s.first_entry_id = Some(StreamId::new(5, 1));
    s.last_entry_id = Some(StreamId::new(5, 1000));
    s.last_generated_id = StreamId::new(5, 1000);
    s.entries_added = None;
    let mut g = group(0, None, None);
    g.last_delivered_id = StreamId::new(5, 400);
    let ids: Vec<StreamId> = (401..501).map(|q| StreamId::new(5, q)).collect();
    let f = current(&s, &g).compute(Some(&UndeliveredSample::head(ids, 100)), &none());
    assert_eq!(f.lag, Some(600));
}

#[test]
fn anchors_come_from_counters_and_history() {
    let mut s = stream(500, 501, 1000);
    s.entries_added = Some(1000);
    let groups = [group(700, Some(300), Some(700)), group(600, None, None)];
    let earlier = [Anchor {
        id: id(800),
        generated: 800,
    }];
    let a = stream_anchors(&s, &groups, Arithmetic::Current, &earlier);
    let ids: Vec<u64> = a.iter().map(|a| a.id.ms).collect();
    assert_eq!(ids, [501, 700, 800, 1000]);
    assert_eq!(a[0].generated, 501);
    // Old servers' entries-read may miss a gap: not an anchor.
    let a = stream_anchors(&s, &groups, Arithmetic::Miscounting, &earlier);
    assert_eq!(a.len(), 3);
    // Deletions inside the window: the first entry's count is unknown.
    s.max_deleted_entry_id = Some(id(900));
    assert_eq!(stream_anchors(&s, &[], Arithmetic::Current, &[]).len(), 1);
    s.entries_added = None;
    assert!(stream_anchors(&s, &groups, Arithmetic::Current, &earlier).is_empty());
}

#[test]
fn anchor_history_keeps_bursts_and_restarts_on_recreation() {
    let mut h = Vec::new();
    let mut s = stream(1, 1, 1);
    // One entry per poll, except a burst of 1,000 at poll 10.
    let mut added = 0;
    for p in 1..=40u64 {
        added += if p == 10 { 1000 } else { 1 };
        s.last_generated_id = id(p * 1000);
        s.entries_added = Some(added);
        remember_anchor(&mut h, &s, 8);
    }
    assert_eq!(h.len(), 8);
    // Both sides of the burst are kept.
    assert!(h.iter().any(|a| a.id == id(9000)) && h.iter().any(|a| a.id == id(10_000)));
    s.entries_added = Some(3);
    remember_anchor(&mut h, &s, 8);
    assert_eq!(h.len(), 1, "recreated stream: history restarts");
}

/// The head sample (`lag_exact_count`, 100) and the tail read (4 × 100)
/// count a lag exactly only while the tail comes back short: up to 499. At
/// 500 the tail is full and cannot show that nothing lies between the two.
#[test]
fn head_and_tail_count_lags_up_to_499() {
    let figure = |undelivered: u64| {
        // Entries one per ms from 1; the group at 1, so 2..=undelivered + 1
        // are undelivered; Redis gives no lag.
        let s = stream(undelivered + 1, 1, undelivered + 1);
        let g = group(1, None, None);
        let r = current(&s, &g);
        let mut sm = sample(2..=101, 100);
        let (start, count) = r.tail_request(&sm).expect("a full head asks for the tail");
        assert_eq!((start, count), (id(101).successor().unwrap(), 400));
        let tail: Vec<StreamId> = (102..=undelivered + 1).map(id).collect();
        sm.tail = tail[tail.len().saturating_sub(count as usize)..].to_vec();
        sm.tail_count = count;
        r.compute(Some(&sm), &none())
    };
    let counted = figure(499);
    assert_eq!(
        (counted.lag, counted.method),
        (Some(499), LagMethod::Counted)
    );
    assert!(counted.exact());
    let estimated = figure(500);
    assert_eq!(estimated.method, LagMethod::Estimated);
    assert!(!estimated.exact());
}

/// What a poll proves of the undelivered entries for the loss ledger: the
/// lag where exact and unchanged since XINFO, else the sample and the
/// counters' bounds.
#[test]
fn undelivered_entries_are_the_exact_lag_or_the_bounds() {
    let figure = |lag: Option<u64>, method| LagFigure {
        lag,
        method,
        trimmed_undelivered: Some(0),
        unread_gone: None,
        first_undelivered: None,
        behind_first_entry: false,
        ahead_of_stream: false,
    };
    let s = StreamInfo {
        entries_added: Some(1_000),
        ..stream(100, 901, 1_000)
    };
    let no_counters = StreamInfo {
        entries_added: None,
        ..s
    };
    let read = |n: Option<u64>| group(950, None, n);
    let cases = [
        // stream, group, figure, sampled, changed, (at least, at most)
        (
            &s,
            read(Some(950)),
            figure(Some(50), LagMethod::Counted),
            50,
            false,
            (50, 50),
        ),
        (
            &s,
            read(Some(950)),
            figure(Some(50), LagMethod::Reported),
            0,
            false,
            (50, 50),
        ),
        // A count raced by the group proves only what the counters do.
        (
            &s,
            read(Some(950)),
            figure(Some(50), LagMethod::Counted),
            50,
            true,
            (50, 50),
        ),
        (
            &s,
            read(Some(900)),
            figure(Some(50), LagMethod::Counted),
            20,
            true,
            (20, 100),
        ),
        (
            &s,
            read(Some(950)),
            figure(Some(45), LagMethod::Estimated),
            10,
            false,
            (10, 50),
        ),
        (
            &s,
            read(Some(960)),
            figure(None, LagMethod::Unknown),
            0,
            false,
            (0, 40),
        ),
        (
            &s,
            read(Some(40)),
            figure(None, LagMethod::Unknown),
            0,
            false,
            (60, 100),
        ),
        // Without entries-read, or before 7.0: the sample and the length.
        (
            &s,
            read(None),
            figure(Some(45), LagMethod::Estimated),
            10,
            false,
            (10, 100),
        ),
        (
            &no_counters,
            read(Some(40)),
            figure(None, LagMethod::Unknown),
            5,
            false,
            (60, 100),
        ),
        // Counters that contradict the sample never cross.
        (
            &s,
            read(Some(960)),
            figure(None, LagMethod::Unknown),
            70,
            false,
            (40, 40),
        ),
    ];
    for (stream, group, figure, sampled, changed, want) in cases {
        let r = current(stream, &group);
        let sample = (sampled > 0).then(|| sample(951..951 + sampled, 100));
        assert_eq!(
            r.undelivered(&figure, sample.as_ref(), changed),
            want,
            "{:?} {:?} {sampled} {changed}",
            group.entries_read,
            figure.lag
        );
    }
}
