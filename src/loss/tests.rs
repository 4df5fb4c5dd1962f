//! The decision table of docs/lag-and-losses.md, row by row, on a model of
//! the server's stream counters. The model follows `t_stream.c` of Redis
//! 7.0 ([`ReadCounter::KeepsGaps`]) and Redis 8.6 / Valkey 9
//! ([`ReadCounter::Reestimates`]): how a read moves entries-read, when it
//! re-estimates, and what a trim or a deletion records. Every row runs on
//! both, and says what each must count: `lost` (proven) and the most
//! `possible` may add.

use std::collections::BTreeSet;

use super::*;

/// One stream with one group, entry IDs `n-0`, as the server keeps them.
#[derive(Clone, Debug)]
struct Model {
    counter: ReadCounter,
    entries: BTreeSet<u64>,
    added: u64,
    last_generated: u64,
    max_deleted: u64,
    /// The group's last-delivered-id and entries-read (`None`: invalid).
    last: u64,
    read: Option<u64>,
    /// Entries removed while the group had not read them: the truth.
    truth: u64,
    /// Server time, advanced by each poll.
    now: u64,
    /// Polls carry what keyevents announced (a subscription with `Etg`):
    /// the events so far, and the number of the last of each kind.
    announce: bool,
    events: u64,
    last_trim: Option<u64>,
    last_deletion: Option<u64>,
    last_set: Option<u64>,
}

impl Model {
    fn new(counter: ReadCounter) -> Model {
        Model {
            counter,
            entries: BTreeSet::new(),
            added: 0,
            last_generated: 0,
            max_deleted: 0,
            last: 0,
            read: Some(0),
            truth: 0,
            now: 1_000,
            announce: false,
            events: 0,
            last_trim: None,
            last_deletion: None,
            last_set: None,
        }
    }

    /// Publishes a keyevent of this stream; `last` is its kind's number.
    fn publish(events: &mut u64, last: &mut Option<u64>) {
        *events += 1;
        *last = Some(*events);
    }

    fn first(&self) -> Option<u64> {
        self.entries.first().copied()
    }

    fn add(&mut self, n: u64) -> &mut Self {
        for _ in 0..n {
            self.last_generated += 1;
            self.added += 1;
            self.entries.insert(self.last_generated);
        }
        self
    }

    fn remove(&mut self, id: u64) {
        if self.entries.remove(&id) && id > self.last {
            self.truth += 1;
        }
    }

    /// `XTRIM MINID id`: removes every entry below `id`.
    fn trim_below(&mut self, id: u64) -> &mut Self {
        let below: Vec<u64> = self.entries.range(..id).copied().collect();
        if !below.is_empty() {
            Self::publish(&mut self.events, &mut self.last_trim);
        }
        for e in below {
            self.remove(e);
        }
        self
    }

    /// `XTRIM MAXLEN n`.
    fn keep_last(&mut self, n: usize) -> &mut Self {
        if self.entries.len() > n {
            Self::publish(&mut self.events, &mut self.last_trim);
        }
        while self.entries.len() > n {
            let first = self.first().unwrap();
            self.remove(first);
        }
        self
    }

    /// `XDEL` of these IDs.
    fn delete(&mut self, ids: &[u64]) -> &mut Self {
        if ids.iter().any(|id| self.entries.contains(id)) {
            Self::publish(&mut self.events, &mut self.last_deletion);
        }
        for &id in ids {
            if self.entries.contains(&id) {
                self.max_deleted = self.max_deleted.max(id);
                self.remove(id);
            }
        }
        self
    }

    /// `XSETID key <last> ENTRIESADDED <added + n>`.
    fn bump_entries_added(&mut self, n: u64) -> &mut Self {
        self.added += n;
        self.truth += 0;
        self
    }

    /// `XGROUP SETID g <id>` without `ENTRIESREAD`.
    fn set_id(&mut self, id: u64) -> &mut Self {
        Self::publish(&mut self.events, &mut self.last_set);
        self.last = id;
        self.read = None;
        self
    }

    /// Whether a deletion lies in `[from, +∞)` (`streamRangeHasTombstones`).
    fn tombstone_from(&self, from: u64, old: bool) -> bool {
        let first = self.first();
        if self.entries.is_empty() || self.max_deleted == 0 {
            return false;
        }
        if old && first.is_some_and(|f| f > self.max_deleted) {
            return false;
        }
        from <= self.max_deleted
    }

    /// `streamEstimateDistanceFromFirstEverEntry`.
    fn estimate(&self, id: u64) -> Option<u64> {
        let len = self.entries.len() as u64;
        if self.added == 0 {
            return Some(0);
        }
        if len == 0 && id <= self.last_generated {
            return Some(self.added);
        }
        if self.counter == ReadCounter::Reestimates && id != 0 && id < self.max_deleted {
            return None;
        }
        if id == self.last_generated {
            return Some(self.added);
        }
        if id > self.last_generated {
            return None;
        }
        let first = self.first()?;
        if self.max_deleted == 0 || self.max_deleted < first {
            if id < first {
                return Some(self.added - len);
            }
            if id == first {
                return Some(self.added - len + 1);
            }
        }
        None
    }

    /// `XREADGROUP … COUNT n >`: the read path of `streamReplyWithRange`.
    fn read(&mut self, n: usize) -> &mut Self {
        let next: Vec<u64> = self
            .entries
            .range(self.last + 1..)
            .take(n)
            .copied()
            .collect();
        for id in next {
            let increments = match self.counter {
                ReadCounter::Reestimates => {
                    self.read.is_some()
                        && self.first().is_some_and(|f| self.last >= f)
                        && !self.tombstone_from(self.last, false)
                }
                _ => self.read.is_some() && !self.tombstone_from(id, true),
            };
            self.read = if increments {
                self.read.map(|r| r + 1)
            } else {
                self.estimate(id)
            };
            self.last = id;
        }
        self
    }

    fn read_all(&mut self) -> &mut Self {
        self.read(usize::MAX)
    }

    /// What a poll sees, all of one moment, with the exact lag.
    fn poll(&mut self) -> Polled {
        self.now += 1_000;
        let lag = self.entries.range(self.last + 1..).count() as u64;
        Polled {
            at_ms: Some(self.now),
            stream: StreamInfo {
                length: self.entries.len() as u64,
                first_entry_id: self.first().map(id),
                last_generated_id: id(self.last_generated),
                entries_added: Some(self.added),
                max_deleted_entry_id: Some(id(self.max_deleted)),
                ..StreamInfo::default()
            },
            group: GroupInfo {
                last_delivered_id: id(self.last),
                entries_read: self.read,
                ..GroupInfo::default()
            },
            undelivered: Bounds::exact(lag),
            counter: self.counter,
            announced: self.announce.then_some(Announced {
                read_at: EventMark {
                    connection: 1,
                    seq: self.events,
                },
                closed: true,
                complete_from: 0,
                last_trim: self.last_trim,
                last_deletion: self.last_deletion,
                last_set: self.last_set,
            }),
        }
    }

    /// The survivors of a range, as the probe counts them.
    fn count(&self, (from, to): (StreamId, StreamId)) -> RangeCount {
        RangeCount::Survivors {
            present: self
                .entries
                .range(from.ms + u64::from(from.seq > 0)..=to.ms)
                .count() as u64,
            delivered_gone: 0,
        }
    }
}

fn id(ms: u64) -> StreamId {
    StreamId::new(ms, 0)
}

/// What one poll read, as the probe holds it; the ledger sees it through
/// [`Polled::observation`].
struct Polled {
    at_ms: Option<u64>,
    stream: StreamInfo,
    group: GroupInfo,
    undelivered: Bounds,
    counter: ReadCounter,
    announced: Option<Announced>,
}

impl Polled {
    fn observation(&self) -> Observation<'_> {
        Observation {
            announced: self.announced,
            ..Observation::of(
                &self.stream,
                &self.group,
                self.at_ms,
                self.undelivered,
                self.counter,
            )
        }
    }
}

/// A poll fed to the ledger, with the range count it asks for.
fn poll(l: &mut Ledger, m: &mut Model) {
    let polled = m.poll();
    let o = polled.observation();
    let range = l.range_to_count(&o).map(|r| m.count(r));
    l.observe(&o, range);
}

fn lost(l: &Ledger) -> u64 {
    l.lost().map_or(0, |c| c.total())
}

fn possible(l: &Ledger) -> u64 {
    l.possibly_lost().map_or(0, |c| c.total())
}

const BOTH: [ReadCounter; 2] = [ReadCounter::KeepsGaps, ReadCounter::Reestimates];

/// Runs a scenario on both server families: the model after `setup` is the
/// baseline poll, `between` runs between it and the second poll. Returns
/// (truth, lost, possible) per family.
fn run(
    setup: impl Fn(&mut Model),
    between: impl Fn(&mut Model),
) -> Vec<(ReadCounter, u64, u64, u64)> {
    BOTH.iter()
        .map(|&counter| {
            let mut m = Model::new(counter);
            let mut l = Ledger::default();
            setup(&mut m);
            poll(&mut l, &mut m);
            let truth_before = m.truth;
            between(&mut m);
            poll(&mut l, &mut m);
            (counter, m.truth - truth_before, lost(&l), possible(&l))
        })
        .collect()
}

/// The invariant of every row: never more than the truth, and the truth in
/// full between lost and possible.
fn sound(rows: &[(ReadCounter, u64, u64, u64)]) {
    for &(counter, truth, lost, possible) in rows {
        assert!(lost <= truth, "{counter:?}: lost {lost} > truth {truth}");
        assert!(
            truth <= lost + possible,
            "{counter:?}: truth {truth} > lost {lost} + possible {possible}"
        );
    }
}

fn expect(rows: &[(ReadCounter, u64, u64, u64)], counter: ReadCounter, lost: u64, possible: u64) {
    sound(rows);
    let row = rows.iter().find(|r| r.0 == counter).unwrap();
    assert_eq!(
        (row.2, row.3),
        (lost, possible),
        "{counter:?}: (lost, possible)"
    );
}

// Row 1: a trim of unread entries that the group reads past before the next
// poll. 7.0 keeps the gap out of entries-read: proven exactly. 8.x and Valkey
// re-estimate it in: the same figures as a group that read first.
#[test]
fn trim_read_past_between_polls() {
    let rows = run(
        |m| {
            m.add(110).read(10);
        },
        |m| {
            m.keep_last(60).read_all();
        },
    );
    assert_eq!(rows[0].1, 40);
    expect(&rows, ReadCounter::KeepsGaps, 40, 0);
    expect(&rows, ReadCounter::Reestimates, 0, 40);
}

// Row 2: the group is behind the trimming edge at the poll: the entries
// between its position and the first entry are lost, exactly, everywhere.
#[test]
fn group_behind_the_edge_at_a_poll() {
    let rows = run(
        |m| {
            m.add(110).read(10);
        },
        |m| {
            m.keep_last(60);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 40, 0);
    expect(&rows, ReadCounter::Reestimates, 40, 0);
}

// Row 3: a retention job trims what the group has read (MINID its
// position) while it reads on. Nothing is lost; 7.0 proves it, 8.x cannot
// tell the order of the reads and the trim.
#[test]
fn retention_trim_to_the_group_position() {
    let rows = run(
        |m| {
            m.add(100).read(10);
        },
        |m| {
            m.read(30);
            let at = m.last;
            m.trim_below(at).add(20).read(5);
        },
    );
    assert_eq!(rows[0].1, 0);
    expect(&rows, ReadCounter::KeepsGaps, 0, 0);
    expect(&rows, ReadCounter::Reestimates, 0, 29);
}

// Row 4: a worker deletes what it read. Nothing lost anywhere; a deletion
// after the group's old position leaves the order unknown on every server.
#[test]
fn worker_deletes_what_it_read() {
    let rows = run(
        |m| {
            m.add(50).read(10);
        },
        |m| {
            m.read(10);
            m.delete(&[11, 12, 13, 14, 15, 16, 17, 18, 19, 20]).read(5);
        },
    );
    assert_eq!(rows[0].1, 0);
    expect(&rows, ReadCounter::KeepsGaps, 0, 10);
    expect(&rows, ReadCounter::Reestimates, 0, 10);
}

// Row 5: deletions at or before the group's old position cannot be losses.
#[test]
fn deletions_behind_the_old_position() {
    let rows = run(
        |m| {
            m.add(50).read(20);
        },
        |m| {
            m.delete(&[3, 5, 20]).read(10);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 0, 0);
    expect(&rows, ReadCounter::Reestimates, 0, 0);
}

// Row 6: `XSETID … ENTRIESADDED` raises entries-added with nothing added or
// removed: a new baseline, not a loss.
#[test]
fn xsetid_entries_added_is_a_new_baseline() {
    let rows = run(
        |m| {
            m.add(50).read(20);
        },
        |m| {
            m.bump_entries_added(1_000);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 0, 0);
    expect(&rows, ReadCounter::Reestimates, 0, 0);
}

// Row 7: XDEL of 3 unread entries mid-stream, read past before the next poll
// (the group stops short of the last entry, so entries-read stays invalid):
// the order is unknown, all 3 possible.
#[test]
fn deletion_read_past_mid_stream() {
    let rows = run(
        |m| {
            m.add(30).read(10);
        },
        |m| {
            m.delete(&[14, 15, 16]).read(10);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 0, 3);
    expect(&rows, ReadCounter::Reestimates, 0, 3);
}

// Row 8: XDEL of the entries right after the group's position, read past
// with the next entry: 7.0 increments entries-read past the gap (proven),
// 8.x re-estimates (possible).
#[test]
fn deletion_right_after_the_position_read_past() {
    let rows = run(
        |m| {
            m.add(30).read(10);
        },
        |m| {
            m.delete(&[11, 12, 13]).read(5);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 3, 0);
    expect(&rows, ReadCounter::Reestimates, 0, 3);
}

// Row 9: XDEL of unread entries that the group has not reached at the next
// poll (a keyspace event's poll): lost, exactly, everywhere.
#[test]
fn deletion_ahead_of_the_group() {
    let rows = run(
        |m| {
            m.add(30).read(10);
        },
        |m| {
            m.delete(&[14, 15, 16]);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 3, 0);
    expect(&rows, ReadCounter::Reestimates, 3, 0);
}

// Row 10: a group created at `$` (no entries-read) that never reads while
// `XADD … MAXLEN 10` takes 90 of the 100 entries added after it: its position
// was the last ID at the first poll, so its rank is known.
#[test]
fn group_without_entries_read_overtaken() {
    let rows = run(
        |m| {
            m.add(20).set_id(20);
        },
        |m| {
            m.add(100).keep_last(10);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 90, 0);
    expect(&rows, ReadCounter::Reestimates, 90, 0);
}

// Row 11: the same group first seen mid-stream (rank unknown): a group that
// did not move passed nothing, so the entries added against the change of
// its backlog count the removals after it.
#[test]
fn unmoved_group_without_entries_read() {
    let rows = run(
        |m| {
            m.add(50).set_id(20);
        },
        |m| {
            m.add(40).keep_last(30);
        },
    );
    assert_eq!(rows[0].1, 40);
    expect(&rows, ReadCounter::KeepsGaps, 40, 0);
    expect(&rows, ReadCounter::Reestimates, 40, 0);
}

// Row 14: a producer cancels (`XDEL`) entries it just added, ahead of a group
// that read past an earlier deletion, so entries-read is unknown at both
// polls and the rank of its position too. max-deleted-entry-id moved past
// the group's position now: the entry there was deleted in the interval and
// never delivered, unless the group was set back past it in between, which
// only keyevents exclude. With them (`xdel` announced, no `xgroup-setid`):
// one lost at least, the other removals possible; without them: possible.
#[test]
fn a_deletion_ahead_of_a_group_without_entries_read() {
    let setup = |announce: bool| {
        move |m: &mut Model| {
            m.announce = announce;
            m.add(30).read(5).delete(&[10]).read(10);
            assert_eq!(m.read, None, "the counter was invalidated");
        }
    };
    for (between, announce, lost, possible) in [
        (&[33][..], true, 1, 0),
        (&[33, 34][..], true, 1, 1),
        (&[33][..], false, 0, 1),
        // Passed over before the poll: the order is unknown.
        (&[17][..], true, 0, 1),
    ] {
        let rows = run(setup(announce), |m| {
            m.add(6).delete(between).read(2);
        });
        expect(&rows, ReadCounter::KeepsGaps, lost, possible);
        expect(&rows, ReadCounter::Reestimates, lost, possible);
    }
    // Read past, deleted once delivered, and the group set back behind it
    // (`XGROUP SETID`) but still past its last polled position: nothing
    // lost, and the announced `xgroup-setid` keeps the ledger from the count.
    let rows = run(setup(true), |m| {
        m.add(6).read(20).delete(&[33]).set_id(31);
    });
    assert!(rows.iter().all(|r| r.1 == 0 && r.2 == 0), "{rows:?}");
}

// Row 12: `XTRIM MAXLEN 0` over 20 unread entries.
#[test]
fn stream_emptied() {
    let rows = run(
        |m| {
            m.add(30).read(10);
        },
        |m| {
            m.keep_last(0);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 20, 0);
    expect(&rows, ReadCounter::Reestimates, 20, 0);
}

// Row 13: a capped stream (MAXLEN 15) that turns over within each poll while
// a consumer keeps up: nothing lost. 7.0 proves it; on 8.x the 10 entries
// trimmed after the old position may as well have been trimmed first.
#[test]
fn capped_window_with_a_consumer_keeping_up() {
    let rows = run(
        |m| {
            m.add(20).read_all();
        },
        |m| {
            for _ in 0..5 {
                m.add(5).keep_last(15).read_all();
            }
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 0, 0);
    expect(&rows, ReadCounter::Reestimates, 0, 10);
}

/// A loss proven ahead of the group is not counted again when the group
/// reads past it, and a new loss ahead after that is counted in full.
#[test]
fn a_loss_ahead_counts_once_then_the_next_one_in_full() {
    for counter in BOTH {
        let mut m = Model::new(counter);
        let mut l = Ledger::default();
        m.add(100).read(10);
        poll(&mut l, &mut m);
        m.keep_last(60);
        poll(&mut l, &mut m);
        assert_eq!(lost(&l), 30, "{counter:?}");
        m.read_all();
        poll(&mut l, &mut m);
        assert_eq!(lost(&l), 30, "{counter:?}: read past");
        m.add(50).keep_last(20);
        poll(&mut l, &mut m);
        assert_eq!((m.truth, lost(&l)), (60, 60), "{counter:?}: new loss ahead");
        assert!(l.recent_loss(m.now, 1_000));
    }
}

/// A rewind is counted and starts a new baseline: the entries it makes the
/// group read again are not a loss.
#[test]
fn a_rewind_is_counted_and_not_a_loss() {
    for counter in BOTH {
        let mut m = Model::new(counter);
        let mut l = Ledger::default();
        m.add(50).read(40);
        poll(&mut l, &mut m);
        m.set_id(10);
        poll(&mut l, &mut m);
        m.keep_last(45);
        poll(&mut l, &mut m);
        assert_eq!(l.rewinds(), 1);
        assert_eq!(lost(&l), 0, "{counter:?}");
    }
}

/// Another server (a new `run_id`): the next poll is a baseline, whatever
/// its figures say.
#[test]
fn a_new_server_starts_a_new_baseline() {
    let mut m = Model::new(ReadCounter::KeepsGaps);
    let mut l = Ledger::default();
    m.add(50).read(10);
    poll(&mut l, &mut m);
    l.new_baseline();
    m.keep_last(10);
    poll(&mut l, &mut m);
    assert_eq!((lost(&l), possible(&l)), (0, 0));
}

/// An event said the group was set from outside: no comparison across it.
#[test]
fn set_from_outside_is_a_new_baseline() {
    let mut m = Model::new(ReadCounter::Reestimates);
    let mut l = Ledger::default();
    m.add(50).read(10);
    poll(&mut l, &mut m);
    m.keep_last(10);
    let polled = m.poll();
    let o = Observation {
        set_from_outside: true,
        ..polled.observation()
    };
    l.observe(&o, None);
    assert_eq!((lost(&l), possible(&l)), (0, 0));
}

/// Redis 6.2 keeps no entries-added: nothing is counted, and a trim that
/// passed the group's position is marked.
#[test]
fn no_counters_before_7_0() {
    let mut m = Model::new(ReadCounter::Unknown);
    let mut l = Ledger::default();
    m.add(50).read(10);
    let strip = |mut p: Polled| {
        p.stream.entries_added = None;
        p.stream.max_deleted_entry_id = None;
        p.group.entries_read = None;
        p
    };
    l.observe(&strip(m.poll()).observation(), None);
    m.keep_last(10).read_all();
    l.observe(&strip(m.poll()).observation(), None);
    assert_eq!((l.lost(), l.possibly_lost()), (None, None));
    assert_eq!(l.unproven().no_counters, 1);
}

/// Bounds on the undelivered entries (an estimated lag) prove only what
/// holds at both ends of the bounds.
#[test]
fn estimated_lag_proves_only_its_low_end() {
    let mut m = Model::new(ReadCounter::Reestimates);
    let mut l = Ledger::default();
    m.add(100).read(10);
    poll(&mut l, &mut m);
    m.keep_last(60);
    let mut p = m.poll();
    p.undelivered = Bounds { lo: 40, hi: 60 };
    l.observe(&p.observation(), None);
    assert!(lost(&l) <= 30);
    assert!(lost(&l) + possible(&l) >= 30);
}

#[test]
fn read_counter_by_server_and_version() {
    let cases = [
        ("redis", "7.0.15", ReadCounter::KeepsGaps),
        ("redis", "7.4.2", ReadCounter::KeepsGaps),
        ("redis", "8.0.0", ReadCounter::Reestimates),
        ("redis", "8.6.3", ReadCounter::Reestimates),
        ("redis", "6.2.14", ReadCounter::Unknown),
        ("valkey", "8.0.2", ReadCounter::KeepsGaps),
        ("valkey", "8.1.1", ReadCounter::Reestimates),
        ("valkey", "9.1.2", ReadCounter::Reestimates),
        ("redis", "", ReadCounter::Unknown),
    ];
    for (server, version, want) in cases {
        assert_eq!(ReadCounter::of(server, version), want, "{server} {version}");
    }
}

/// Rounds of the random test: `RSE_LOSS_ROUNDS` for a longer hunt.
fn rounds() -> u64 {
    std::env::var("RSE_LOSS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// Random sequences of reads, trims, deletions and adds on both families,
/// with and without keyevents: the ledger never counts more than the
/// truth, and lost plus possible always covers it.
#[test]
fn random_histories_stay_within_the_truth() {
    let mut seed: u64 = 0x5eed;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n.max(1)
    };
    for round in 0..rounds() {
        for (counter, announce) in BOTH.into_iter().flat_map(|c| [(c, false), (c, true)]) {
            let mut m = Model::new(counter);
            m.announce = announce;
            let mut l = Ledger::default();
            let mut log: Vec<String> = Vec::new();
            m.add(20);
            if round % 3 == 0 {
                m.set_id(m.last_generated);
            }
            poll(&mut l, &mut m);
            let start = m.truth;
            // Truth of intervals in which the group was set from outside: a
            // new baseline, which need not be covered.
            let mut excused = 0;
            let mut polled_at = (m.last, m.read);
            for _ in 0..8 {
                let before = m.truth;
                let mut set = false;
                for _ in 0..next(5) {
                    let op = next(9);
                    match op {
                        0 | 1 => {
                            m.add(1 + next(20));
                        }
                        2 => {
                            m.read(1 + next(15) as usize);
                        }
                        3 => {
                            let keep = next(m.entries.len() as u64 + 1) as usize;
                            m.keep_last(keep);
                        }
                        4 => {
                            let at = m.last.saturating_sub(next(5)) + next(4);
                            m.trim_below(at);
                        }
                        5 => {
                            let ids: Vec<u64> = (0..1 + next(3))
                                .map(|_| 1 + next(m.last_generated.max(1)))
                                .collect();
                            m.delete(&ids);
                        }
                        6 => {
                            // A worker deletes what the group read.
                            let upto = m.last;
                            let ids: Vec<u64> = m.entries.range(..=upto).take(3).copied().collect();
                            m.delete(&ids);
                        }
                        // Not back to where the last poll saw a group
                        // without entries-read: its figures would be those
                        // of a group that never moved (docs: keyspace
                        // events tell).
                        7 if next(4) == 0 => {
                            let to = next(m.last_generated + 2);
                            if !(to == polled_at.0 && polled_at.1.is_none()) {
                                m.set_id(to);
                                set = true;
                            }
                        }
                        7 => {
                            let at = m.last;
                            m.trim_below(at);
                        }
                        _ => {
                            m.read(1 + next(40) as usize);
                        }
                    }
                    log.push(format!(
                        "op {op}: last {} read {:?} first {:?} len {} added {} md {} truth {}",
                        m.last,
                        m.read,
                        m.first(),
                        m.entries.len(),
                        m.added,
                        m.max_deleted,
                        m.truth
                    ));
                }
                poll(&mut l, &mut m);
                polled_at = (m.last, m.read);
                log.push(format!("poll: lost {} possible {}", lost(&l), possible(&l)));
                if set {
                    excused += m.truth - before;
                }
                let truth = m.truth - start;
                assert!(
                    lost(&l) <= truth,
                    "round {round} {counter:?} (keyevents: {announce}): lost {} > truth {truth}\n{}",
                    lost(&l),
                    log.join("\n")
                );
                assert!(
                    truth - excused <= lost(&l) + possible(&l),
                    "round {round} {counter:?} (keyevents: {announce}): truth {truth} (excused {excused}) > lost {} + possible {}\n{}",
                    lost(&l),
                    possible(&l),
                    log.join("\n")
                );
            }
        }
    }
}

/// The ledger follows the server its figures come from: the same `run_id`
/// keeps comparing; another one (a restart) keeps comparing only figures
/// that continue the last poll's (the same data, loaded from disk), and
/// other data is a new baseline.
#[test]
fn another_server_run_id_is_a_new_baseline_unless_the_data_continues() {
    let (r1, r2, r3): (
        std::sync::Arc<str>,
        std::sync::Arc<str>,
        std::sync::Arc<str>,
    ) = ("r1".into(), "r2".into(), "r3".into());
    let mut m = Model::new(ReadCounter::KeepsGaps);
    let mut l = Ledger::default();
    m.add(50).read(10);
    l.follow_server(Some(&r1));
    poll(&mut l, &mut m);
    m.keep_last(30);
    l.follow_server(Some(&r1));
    poll(&mut l, &mut m);
    assert_eq!(lost(&l), 10, "the same server: compared");
    m.keep_last(20);
    l.follow_server(Some(&r2));
    poll(&mut l, &mut m);
    assert_eq!(lost(&l), 20, "a restart on the same data: compared");
    // Another server with other data: fewer entries added than before.
    let mut other = Model::new(ReadCounter::KeepsGaps);
    other.add(30).read(5);
    other.keep_last(10);
    l.follow_server(Some(&r3));
    poll(&mut l, &mut other);
    assert_eq!(lost(&l), 20, "other data: a baseline");
    l.follow_server(None);
    other.keep_last(5);
    poll(&mut l, &mut other);
    assert_eq!(lost(&l), 25, "an unknown run_id changes nothing: compared");
}

// The time of the last loss, by cause, is the time of the poll that counted
// it: a trim, then a deletion, then a poll that counts nothing.
#[test]
fn the_last_loss_of_each_cause_is_timed() {
    for counter in BOTH {
        let mut m = Model::new(counter);
        let mut l = Ledger::default();
        m.add(110).read(10);
        poll(&mut l, &mut m);
        assert_eq!(l.loss_times(), LossTimes::default(), "{counter:?}");
        m.keep_last(60);
        poll(&mut l, &mut m);
        let trimmed_at = m.now;
        assert_eq!(
            l.loss_times(),
            LossTimes {
                trimmed: Some(trimmed_at),
                deleted: None,
                either: None,
            },
            "{counter:?}"
        );
        let first = m.first().unwrap();
        m.delete(&[first + 5, first + 6]);
        poll(&mut l, &mut m);
        let deleted_at = m.now;
        m.add(5);
        poll(&mut l, &mut m);
        assert_eq!(
            l.loss_times(),
            LossTimes {
                trimmed: Some(trimmed_at),
                deleted: Some(deleted_at),
                either: None,
            },
            "{counter:?}"
        );
        assert!(l.lost_at(deleted_at) && !l.lost_at(m.now), "{counter:?}");
    }
}

/// The cause is what the figures prove: a trim alone is a trim; a worker
/// of another group deleting the head entries it processed leaves the
/// figures of a trim up to there and one deletion, so the slower group's
/// loss is the cause of its own (paged as a trim), never `deleted`.
#[test]
fn the_cause_is_what_the_figures_prove() {
    for counter in BOTH {
        let causes = |between: &dyn Fn(&mut Model)| {
            let mut m = Model::new(counter);
            let mut l = Ledger::default();
            m.add(20).read(2);
            poll(&mut l, &mut m);
            between(&mut m);
            poll(&mut l, &mut m);
            (m.truth, l.lost().unwrap_or_default())
        };
        let (truth, lost) = causes(&|m| {
            m.delete(&[1, 2, 3, 4, 5, 6, 7, 8]);
        });
        assert_eq!(truth, 6, "{counter:?}");
        assert_eq!(
            lost,
            ByCause {
                either: 6,
                ..ByCause::default()
            },
            "{counter:?}: deletions of the head, or a trim and one deletion"
        );
        let (truth, lost) = causes(&|m| {
            m.keep_last(12);
        });
        assert_eq!(truth, 6, "{counter:?}");
        assert_eq!(
            lost,
            ByCause {
                trimmed: 6,
                ..ByCause::default()
            },
            "{counter:?}: a trim"
        );
    }
}

/// What a subscription announced, as of a poll whose read was marked at
/// `read_seq` on connection `connection`, with the window closed.
fn announced(connection: u64, read_seq: u64, trim: Option<u64>, del: Option<u64>) -> Announced {
    Announced {
        read_at: EventMark {
            connection,
            seq: read_seq,
        },
        closed: true,
        complete_from: 0,
        last_trim: trim,
        last_deletion: del,
        last_set: None,
    }
}

/// Keyevents name the cause the figures leave open, over the interval
/// from the last poll's read to this one's: `xdel` alone is a deletion
/// (the faster group's worker), `xtrim` alone a trim; both, an unclosed
/// window, another connection or a window with nothing announced leave it
/// to the figures. A read that stood for a quiet stream in between keeps
/// the earlier mark.
#[test]
fn keyevents_name_the_cause_the_figures_leave_open() {
    let head_deleted = |m: &mut Model| {
        m.delete(&[1, 2, 3, 4, 5, 6, 7, 8]);
    };
    // 1-5 trimmed (3-5 unread), then 6-8 deleted.
    let trim_and_delete = |m: &mut Model| {
        m.keep_last(14).delete(&[6, 7, 8]);
    };
    type Case<'a> = (&'a str, &'a dyn Fn(&mut Model), Option<Announced>, ByCause);
    let cause = |trimmed, deleted, either| ByCause {
        trimmed,
        deleted,
        either,
    };
    let cases: [Case; 7] = [
        (
            "xdel only",
            &head_deleted,
            Some(announced(1, 8, None, Some(8))),
            cause(0, 6, 0),
        ),
        ("no subscription", &head_deleted, None, cause(0, 0, 6)),
        (
            "xdel before the last read only",
            &head_deleted,
            Some(announced(1, 8, None, Some(2))),
            cause(0, 0, 6),
        ),
        (
            "another connection",
            &head_deleted,
            Some(announced(2, 8, None, Some(8))),
            cause(0, 0, 6),
        ),
        (
            "not closed by a barrier",
            &head_deleted,
            Some(Announced {
                closed: false,
                ..announced(1, 8, None, Some(8))
            }),
            cause(0, 0, 6),
        ),
        (
            "xtrim and xdel",
            &trim_and_delete,
            Some(announced(1, 8, Some(6), Some(8))),
            cause(0, 0, 6),
        ),
        (
            "xtrim only, an older deletion past the position",
            &|m: &mut Model| {
                m.keep_last(11);
            },
            Some(announced(1, 8, Some(8), None)),
            cause(6, 0, 0),
        ),
    ];
    for counter in BOTH {
        for (what, between, now, want) in &cases {
            let mut m = Model::new(counter);
            let mut l = Ledger::default();
            m.add(20).read(2);
            // An older deletion past the group's position (entry 20).
            m.delete(&[20]);
            m.truth = 0;
            let base = m.poll();
            let o = Observation {
                announced: Some(announced(1, 3, None, Some(3))),
                ..base.observation()
            };
            l.observe(&o, None);
            // The quiet read that stands for it: the same figures, no mark.
            l.observe(&base.observation(), None);
            between(&mut m);
            let after = m.poll();
            let o = Observation {
                announced: *now,
                ..after.observation()
            };
            l.observe(&o, None);
            assert_eq!(m.truth, 6, "{counter:?} {what}");
            assert_eq!(l.lost().unwrap_or_default(), *want, "{counter:?} {what}");
        }
    }
}

/// `XSETID … ENTRIESADDED` beside a producer in the same interval: the
/// entries-added rise has no trim and no deletion behind it, so it is a
/// new baseline, never a loss, on either read path.
#[test]
fn entries_added_set_beside_a_producer_is_no_loss() {
    let rows = run(
        |m| {
            m.add(20).read(5);
        },
        |m| {
            m.bump_entries_added(1000).add(3).read(2);
        },
    );
    for counter in BOTH {
        expect(&rows, counter, 0, 0);
    }
}

// Every entry of the stream deleted while the group had read none: all of
// them were lost to it, by deletion (the stream is empty, max-deleted-entry-id
// moved to its last entry).
#[test]
fn every_unread_entry_deleted() {
    let rows = run(
        |m| {
            m.add(4);
        },
        |m| {
            m.delete(&[1, 2, 3, 4]);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 4, 0);
    expect(&rows, ReadCounter::Reestimates, 4, 0);
}

// A deletion below an older max-deleted-entry-id in an interval with nothing
// added (`XACKDEL` of a faster group's entries after an `XDEL` of a later
// one): the stream is shorter with entries-added and the last ID unmoved,
// which only a removal does, so the unread entry it took is lost.
#[test]
fn a_deletion_below_max_deleted_with_nothing_added() {
    let rows = run(
        |m| {
            m.add(12).delete(&[12]);
        },
        |m| {
            m.delete(&[11]);
        },
    );
    expect(&rows, ReadCounter::KeepsGaps, 1, 0);
    expect(&rows, ReadCounter::Reestimates, 1, 0);
}

/// A trim of unread entries and a faster group's worker deleting the new
/// head in one interval (found by the oracle: `XTRIM … MAXLEN` beside a
/// worker's `XACK`+`XDEL`). The faster group then stands at
/// max-deleted-entry-id, one below the first entry, as after deletions
/// alone; but a trim up to there and one deletion leave the same figures,
/// so nothing proves the head went by deletions: the cause is the one of
/// its own, never `deleted` for what the trim took.
#[test]
fn a_trim_beside_a_head_deleted_by_another_group_is_not_a_deletion() {
    for counter in BOTH {
        let mut m = Model::new(counter);
        let mut l = Ledger::default();
        m.add(20).read(2);
        poll(&mut l, &mut m);
        // 1-5 trimmed (3-5 unread), then the faster group's worker deletes
        // 6-8, which it read: it stands at 8 with entries-read 8.
        m.keep_last(15).delete(&[6, 7, 8]);
        poll(&mut l, &mut m);
        assert_eq!(m.truth, 6, "{counter:?}");
        assert_eq!(
            l.lost().unwrap_or_default(),
            ByCause {
                either: 6,
                ..ByCause::default()
            },
            "{counter:?}: 3 trimmed and 3 deleted, which the figures cannot tell apart"
        );
    }
}

/// A poll whose count of the undelivered entries was not of its `XINFO`'s
/// moment (the stream changed under it: bounds only) leaves a trim it saw
/// possible; the next poll with an exact count proves it from the counters'
/// rise since the last exact one, whatever its own interval removed (found
/// by the oracle's concurrent mode: the rise was capped by the entries the
/// last interval removed).
#[test]
fn a_poll_without_an_exact_count_between_two_with_one() {
    for (counter, read_past, trimmed_last) in [
        (ReadCounter::KeepsGaps, true, 5),
        (ReadCounter::KeepsGaps, false, 0),
        (ReadCounter::Reestimates, false, 0),
        (ReadCounter::Reestimates, false, 5),
    ] {
        let mut m = Model::new(counter);
        let mut l = Ledger::default();
        m.add(110).read(10);
        poll(&mut l, &mut m);
        m.keep_last(60);
        let mut p = m.poll();
        p.undelivered = Bounds { lo: 0, hi: 100 };
        l.observe(&p.observation(), None);
        if read_past {
            m.read(5);
        }
        if trimmed_last > 0 && read_past {
            m.keep_last(50);
        } else if trimmed_last > 0 {
            m.add(trimmed_last).keep_last(60);
        }
        poll(&mut l, &mut m);
        assert_eq!(m.truth, 40 + trimmed_last, "{counter:?}");
        assert_eq!(
            lost(&l),
            40 + trimmed_last,
            "{counter:?}, read past {read_past}, {trimmed_last} trimmed in the last interval: lost {:?}, possibly {:?}",
            l.lost(),
            l.possibly_lost()
        );
        assert_eq!(
            l.lost().unwrap_or_default().trimmed,
            lost(&l),
            "{counter:?}"
        );
    }
}

/// What the counters prove since an earlier poll (the last one with an
/// exact count) went since then: a gap of deleted entries the group read
/// past, then a trim, is not all a trim (found by the oracle's concurrent
/// mode: the rise was labelled by the last interval's figures alone).
#[test]
fn a_rise_since_an_earlier_poll_takes_the_causes_since_then() {
    let mut m = Model::new(ReadCounter::KeepsGaps);
    let mut l = Ledger::default();
    m.add(110).read(10);
    poll(&mut l, &mut m);
    // 11-20 deleted unread, read past (a gap entries-read keeps out).
    m.delete(&(11..=20).collect::<Vec<_>>()).read(25);
    let mut p = m.poll();
    p.undelivered = Bounds { lo: 0, hi: 100 };
    l.observe(&p.observation(), None);
    // 1-10 and 21-50 trimmed: 46-50 unread.
    m.keep_last(60);
    poll(&mut l, &mut m);
    assert_eq!(m.truth, 15);
    let lost = l.lost().unwrap_or_default();
    assert_eq!(lost.total(), 15, "{lost:?}");
    assert!(
        lost.trimmed <= 5 && lost.deleted <= 10,
        "5 trimmed and 10 deleted, counted {lost:?}"
    );
}

/// `XSETID … ENTRIESADDED` beside adds and a trim of entries the group had
/// read: the group did not move, yet entries-added and its backlog now put
/// its rank 11 higher than the last poll knew it, which only counters set
/// from outside do. A new baseline: the entries that were never added are
/// not counted lost when a later trim passes the group (found by the
/// oracle: they were).
#[test]
fn entries_added_set_beside_a_trim_is_no_loss_later() {
    for counter in BOTH {
        let mut m = Model::new(counter);
        let mut l = Ledger::default();
        m.add(20).read(19);
        poll(&mut l, &mut m);
        m.bump_entries_added(11).add(11).keep_last(20);
        poll(&mut l, &mut m);
        assert_eq!((m.truth, lost(&l)), (0, 0), "{counter:?}");
        // A producer at the edge: each add trims the oldest entry.
        for _ in 0..31 {
            m.add(1).keep_last(20);
        }
        poll(&mut l, &mut m);
        assert_eq!(m.truth, 23, "{counter:?}");
        assert!(
            lost(&l) <= 23 && lost(&l) + possible(&l) >= 23,
            "{counter:?}: lost {:?}, possibly {:?}",
            l.lost(),
            l.possibly_lost()
        );
    }
}
