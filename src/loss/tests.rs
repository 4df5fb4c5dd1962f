use super::*;

fn id(ms: u64) -> StreamId {
    StreamId::new(ms, 0)
}

/// A poll of a stream whose IDs are 1-0, 2-0, … (entry n has ID n-0), with
/// the group at `ld` having read `read` entries, the first entry `first`
/// (0 for an empty stream), `removed` entries gone in all, and the
/// counters' unread entries gone.
fn obs(at: u64, ld: u64, read: u64, first: u64, gone: Option<u64>) -> Observation {
    Observation {
        at_ms: Some(at),
        last_delivered: id(ld),
        entries_read: Some(read),
        first_entry: (first > 0).then(|| id(first)),
        max_deleted: Some(StreamId::ZERO),
        removed: Some(first.saturating_sub(1)),
        unread_gone: gone,
    }
}

/// `o` with `removed` entries removed in all (deletions: the first entry
/// stays).
fn removing(o: Observation, removed: u64) -> Observation {
    Observation {
        removed: Some(removed),
        ..o
    }
}

/// Observes `o`, counting the range the ledger asks for with `survivors`
/// (a function of the range's bounds).
fn step(l: &mut Ledger, o: Observation, survivors: impl Fn(u64, u64) -> u64) {
    let range = l
        .range_to_count(&o)
        .map(|(from, to)| RangeCount::Survivors {
            present: survivors(from.ms, to.ms),
            delivered_gone: 0,
        });
    l.observe(&o, range);
}

fn lost(trimmed: u64, deleted: u64) -> Option<Lost> {
    Some(Lost { trimmed, deleted })
}

/// The figures of a loss that stays visible until the group reads past it:
/// 60, then 360, then 0. The counter keeps 360.
#[test]
fn a_loss_that_heals_stays_counted() {
    let mut l = Ledger::default();
    l.observe(&obs(1_000, 100, 100, 50, Some(0)), None);
    assert_eq!(l.lost(), lost(0, 0));
    l.observe(&obs(16_000, 110, 110, 171, Some(60)), None);
    l.observe(&obs(31_000, 120, 120, 481, Some(360)), None);
    // An old server: entries-read keeps the gap out for good.
    step(&mut l, obs(46_000, 700, 340, 481, Some(360)), |from, to| {
        to + 1 - from.max(481)
    });
    assert_eq!(l.lost(), lost(360, 0));
    assert!(l.recent_loss(46_000, 3_600_000));
    assert!(!l.recent_loss(31_000 + 3_600_000, 3_600_000));
}

/// Valkey and Redis 8 re-estimate entries-read when the group reads past a
/// trimmed gap: the gap goes into its advance, and Redis's counters show
/// nothing at either poll. The survivors of the range prove it.
#[test]
fn a_trim_read_past_between_two_polls_is_counted_on_servers_that_re_estimate() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 90, 90, 1, Some(0)), None);
    l.observe(&obs(2, 100, 100, 1, Some(0)), None);
    // 200 entries added; MAXLEN 60 took 1..=140, 40 of them unread; the
    // group then read 141..=200, and entries-read jumped to 200.
    let c = obs(3, 200, 200, 141, Some(0));
    assert_eq!(
        l.range_to_count(&c),
        Some((id(100).successor().unwrap(), id(200)))
    );
    l.observe(
        &c,
        Some(RangeCount::Survivors {
            present: 60,
            delivered_gone: 0,
        }),
    );
    assert_eq!(l.lost(), lost(40, 0));
    assert!(l.lost_at(3));
}

/// Redis 7.0 counts each delivered entry: the gap stays out of
/// entries-read, and only the counters show it. Counted once, not twice.
#[test]
fn a_trim_read_past_on_an_old_server_is_counted_once() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 90, 90, 1, Some(0)), None);
    l.observe(&obs(2, 100, 100, 1, Some(0)), None);
    step(&mut l, obs(3, 200, 160, 141, Some(40)), |from, to| {
        to + 1 - from.max(141)
    });
    assert_eq!(l.lost(), lost(40, 0));
}

/// XDEL of 3 unread entries that the group reads past before the next
/// poll: entries-read (re-estimated at the stream's end) passed over 10
/// entries, 7 of which still exist.
#[test]
fn a_deletion_read_past_between_two_polls_is_counted() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 5, 5, 1, Some(0)), None);
    l.observe(&obs(2, 10, 10, 1, Some(0)), None);
    let c = Observation {
        max_deleted: Some(id(15)),
        removed: Some(3),
        ..obs(3, 20, 20, 1, Some(0))
    };
    assert!(l.range_to_count(&c).is_some());
    l.observe(
        &c,
        Some(RangeCount::Survivors {
            present: 7,
            delivered_gone: 0,
        }),
    );
    assert_eq!(l.lost(), lost(0, 3));
}

/// XTRIM MAXLEN 0 over 20 unread entries is a trim, not a deletion.
#[test]
fn a_trim_to_length_zero_is_a_trim() {
    let mut l = Ledger::default();
    l.observe(
        &Observation {
            removed: Some(0),
            ..obs(1, 10, 10, 1, Some(0))
        },
        None,
    );
    l.observe(
        &Observation {
            first_entry: None,
            removed: Some(30),
            ..obs(2, 10, 10, 0, Some(20))
        },
        None,
    );
    assert_eq!(l.lost(), lost(20, 0));
}

/// Consumers that XACKDEL what they read remove entries from every range
/// the group advances over: that is no loss, and it is said as unproven.
#[test]
fn consumers_that_delete_what_they_read_lose_nothing() {
    let mut l = Ledger::default();
    let mut removed = 0;
    for poll in 1..=5u64 {
        let ld = poll * 10;
        removed += 10;
        let o = Observation {
            max_deleted: Some(id(ld)),
            removed: Some(removed),
            ..obs(poll, ld, ld, 0, Some(0))
        };
        assert_eq!(l.range_to_count(&o), None, "poll {poll}: no count needed");
        l.observe(&o, None);
    }
    assert_eq!(l.lost(), lost(0, 0));
    assert_eq!(l.unproven().routine_removal, 4);
}

/// The range is counted only within the cap: beyond, the interval is
/// unproven, never a silent 0.
#[test]
fn a_range_too_long_to_count_is_unproven() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 90, 90, 1, Some(0)), None);
    l.observe(&obs(2, 100, 100, 1, Some(0)), None);
    l.observe(
        &obs(3, 9_000, 9_000, 141, Some(0)),
        Some(RangeCount::NotCounted),
    );
    assert_eq!(l.lost(), lost(0, 0));
    assert_eq!(l.unproven().not_counted, 1);
}

/// Before Redis 7.0 entries-read does not exist: nothing is counted, the
/// counter is absent, and a trim past the group is said unproven.
#[test]
fn without_entries_read_losses_are_unproven_and_absent() {
    let mut l = Ledger::default();
    let old = |at, ld, first| Observation {
        entries_read: None,
        max_deleted: None,
        removed: None,
        unread_gone: None,
        ..obs(at, ld, 0, first, None)
    };
    l.observe(&old(1, 10, 1), None);
    l.observe(&old(2, 20, 1), None);
    l.observe(&old(3, 90, 50), None);
    assert_eq!(l.lost(), None);
    assert_eq!(l.unproven().no_entries_read, 1);
}

/// A figure read while the stream changed under the poll dips, and comes
/// back: with the group where it stood, the rebound is no loss, even when
/// the dip was seen twice.
#[test]
fn a_rebound_after_a_dip_is_no_loss_while_the_group_stood_still() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 10, 10, 1, Some(4)), None);
    l.observe(&obs(2, 10, 10, 1, Some(1)), None);
    l.observe(&obs(3, 10, 10, 1, Some(1)), None);
    l.observe(&obs(4, 10, 10, 1, Some(4)), None);
    assert_eq!(l.lost(), lost(0, 0));
    // Past the figure before the dip, the rest is a loss (two entries
    // deleted ahead of the group).
    l.observe(&removing(obs(5, 10, 10, 1, Some(6)), 2), None);
    assert_eq!(l.lost().map(|x| x.deleted), Some(2));
}

/// A one-poll dip is no loss either, and a lower figure seen twice is the
/// new baseline once the group moved on.
#[test]
fn a_one_poll_dip_is_no_loss() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 10, 10, 1, Some(4)), None);
    l.observe(&obs(2, 20, 20, 1, Some(1)), None);
    l.observe(&obs(3, 30, 30, 1, Some(4)), None);
    assert_eq!(l.lost(), lost(0, 0));
    l.observe(&obs(4, 40, 40, 1, Some(0)), None);
    l.observe(&obs(5, 50, 50, 1, Some(0)), None);
    l.observe(&removing(obs(6, 60, 60, 1, Some(2)), 2), None);
    assert_eq!(l.lost().map(|x| x.deleted), Some(2));
}

/// Redis 7.0 keeps a trimmed gap out of entries-read until `XGROUP SETID …
/// ENTRIESREAD` sets the counter right: the figure falls at once (the
/// counter rose by the fall), and a trim right after counts from there.
#[test]
fn a_loss_right_after_a_counter_set_from_outside_counts_in_full() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 3, 3, 1, Some(0)), None);
    // XTRIM MAXLEN 28 of 49 entries, then a read of 29: 18 unread trimmed,
    // kept out of entries-read (3 + 29).
    l.observe(&obs(2, 50, 32, 22, Some(18)), None);
    assert_eq!(l.lost(), lost(18, 0));
    // 13 more entries; XGROUP SETID $ ENTRIESREAD 62.
    l.observe(&obs(3, 62, 62, 22, Some(0)), None);
    // 378 entries with MAXLEN 142: 236 of them trimmed unread.
    l.observe(&obs(4, 62, 62, 299, Some(236)), None);
    assert_eq!(l.lost(), lost(254, 0));
    // A read of 13 past the gap adds nothing.
    step(&mut l, obs(5, 311, 75, 299, Some(236)), |from, to| {
        to + 1 - from.max(299)
    });
    assert_eq!(l.lost(), lost(254, 0));
}

/// Redis 8 re-estimates entries-read when a group reads past a trimmed
/// gap: the figure falls to 0 at once, and a deletion ahead of the group,
/// standing still, counts from there (not from the figure before the
/// fall).
#[test]
fn a_loss_right_after_a_re_estimate_counts_in_full() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 23, 23, 1, Some(0)), None);
    l.observe(&obs(2, 23, 23, 1, Some(0)), None);
    // XTRIM MINID 29: entries 24-28 trimmed unread.
    l.observe(&obs(3, 23, 23, 29, Some(5)), None);
    assert_eq!(l.lost(), lost(5, 0));
    // A read of 7 past the gap: entries-read re-estimated to 35.
    l.observe(&obs(4, 35, 35, 29, Some(0)), None);
    l.observe(&obs(5, 42, 42, 29, Some(0)), None);
    // 7 more entries (43-49); XDEL of 2 read entries and 3 unread.
    let deleted = |at, ld, read, gone| Observation {
        max_deleted: Some(id(49)),
        ..removing(obs(at, ld, read, 29, Some(gone)), 33)
    };
    l.observe(&deleted(6, 42, 42, 3), None);
    assert_eq!(l.lost(), lost(5, 3));
    // Read past the deletions: counted once.
    l.observe(&deleted(7, 42, 42, 3), None);
    let mut o = deleted(8, 63, 63, 0);
    o.removed = Some(33);
    let range = l.range_to_count(&o).map(|_| RangeCount::Survivors {
        present: 18,
        delivered_gone: 0,
    });
    l.observe(&o, range);
    assert_eq!(l.lost(), lost(5, 3));
}

/// The figure cannot rise by more than was removed from the stream since:
/// nothing removed, no loss.
#[test]
fn a_rise_with_nothing_removed_is_no_loss() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 10, 10, 5, Some(2)), None);
    l.observe(&obs(2, 10, 10, 5, Some(5)), None);
    assert_eq!(l.lost(), lost(0, 0));
    l.observe(&removing(obs(3, 10, 10, 5, Some(7)), 5), None);
    assert_eq!(l.lost(), lost(0, 1));
}

#[test]
fn the_first_figure_is_a_baseline_not_a_loss() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 10, 10, 1, Some(400)), None);
    assert_eq!(l.lost(), lost(0, 0));
    assert!(!l.recent_loss(1, 1000));
}

#[test]
fn unknown_figures_keep_the_baseline() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 10, 10, 1, Some(0)), None);
    l.observe(&obs(2, 20, 20, 1, None), None);
    l.observe(&removing(obs(3, 30, 30, 1, Some(7)), 7), None);
    assert_eq!(l.lost().map(|x| x.deleted), Some(7));
}

/// A group at 0-0 is behind the first entry without any trim: a deletion
/// ahead of it is a deletion.
#[test]
fn a_deletion_is_a_deletion_even_behind_the_first_entry() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 0, 0, 1, Some(0)), None);
    l.observe(
        &Observation {
            max_deleted: Some(id(8)),
            ..removing(obs(2, 0, 0, 1, Some(2)), 2)
        },
        None,
    );
    assert_eq!(l.lost(), lost(0, 2));
}

/// The ledger outlives an outage of the same server: a loss during it is
/// counted at the first poll after.
#[test]
fn a_loss_during_an_outage_is_counted_after_it() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 90, 90, 1, Some(0)), None);
    l.observe(&obs(2, 100, 100, 1, Some(0)), None);
    // Polls fail for a minute; a trim of 5 unread entries, read past.
    step(&mut l, obs(62, 150, 150, 106, Some(0)), |from, to| {
        to + 1 - from.max(106)
    });
    assert_eq!(l.lost(), lost(5, 0));
    // Another server: the next figures are a baseline.
    l.reconnected();
    l.observe(&obs(63, 10, 10, 1, Some(9)), None);
    assert_eq!(l.lost(), lost(5, 0));
}

#[test]
fn rewinds_are_counted_and_reset_the_baseline() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 100, 100, 1, Some(0)), None);
    // SETID back to 10 with ENTRIESREAD 10: figures move, no loss.
    l.observe(&obs(2, 10, 10, 1, Some(3)), None);
    assert_eq!(l.rewinds(), 1);
    assert_eq!(l.lost(), lost(0, 0));
    // entries-read going back alone is a rewind too.
    l.observe(&obs(3, 10, 5, 1, Some(3)), None);
    assert_eq!(l.rewinds(), 2);
    l.reconnected();
    l.observe(&obs(4, 5, 1, 1, Some(9)), None);
    assert_eq!(l.rewinds(), 2, "no comparison across a reconnection");
    assert_eq!(l.lost(), lost(0, 0));
}

/// A group whose range had a removal after a clean advance, then a trim of
/// entries it had already read (the first entry moves, sparse IDs): the
/// count proves nothing was lost.
#[test]
fn a_trim_of_read_entries_only_is_no_loss() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 2, 2, 1, Some(0)), None);
    l.observe(&obs(2, 3, 3, 1, Some(0)), None);
    // Entries 1..=3 and 10: a trim took 1..=3; the group read 10.
    let c = Observation {
        removed: Some(3),
        ..obs(3, 10, 4, 10, Some(0))
    };
    // Removed (3) is not more than the group had read (3): no count.
    assert_eq!(l.range_to_count(&c), None);
    l.observe(&c, None);
    assert_eq!(l.lost(), lost(0, 0));
}

/// Entries the group read and that were then deleted in the same interval
/// (they are still pending: ghosts) were delivered, not lost.
#[test]
fn pending_entries_deleted_after_delivery_are_no_loss() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 5, 5, 1, Some(0)), None);
    l.observe(&obs(2, 10, 10, 1, Some(0)), None);
    let c = Observation {
        max_deleted: Some(id(15)),
        removed: Some(3),
        ..obs(3, 20, 20, 1, Some(0))
    };
    assert!(l.range_to_count(&c).is_some());
    l.observe(
        &c,
        Some(RangeCount::Survivors {
            present: 7,
            delivered_gone: 3,
        }),
    );
    assert_eq!(l.lost(), lost(0, 0));
}

/// A stream trimmed at every poll (MAXLEN on XADD) with a group close to its
/// edge: a trim that passes the group between two polls is unproven, not a
/// loss, even after a clean advance.
#[test]
fn a_stream_trimmed_at_every_poll_makes_a_trim_past_the_group_unproven() {
    let mut l = Ledger::default();
    l.observe(&obs(1, 100, 100, 50, Some(0)), None);
    // The group advanced cleanly while the edge moved (not past it).
    l.observe(&obs(2, 110, 110, 60, Some(0)), None);
    let c = obs(3, 130, 130, 115, Some(0));
    assert_eq!(l.range_to_count(&c), None);
    l.observe(&c, None);
    assert_eq!(l.lost(), lost(0, 0));
    assert_eq!(l.unproven().routine_removal, 1);
}
