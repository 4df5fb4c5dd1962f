use super::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

/// IDs as a producer writing `per_ms[i]` entries in millisecond
/// `start + i` would get them.
fn ids(start: u64, per_ms: &[u64]) -> Vec<StreamId> {
    per_ms
        .iter()
        .enumerate()
        .flat_map(|(i, &n)| (0..n).map(move |s| id(start + i as u64, s)))
        .collect()
}

/// Runs a walk of `split` against the stream `all`, as the probe would.
fn walked(all: &[StreamId], split: &Split) -> MsEnds {
    let mut ends = MsEnds::default();
    let walk = Walk::new(split);
    for _ in 0..WALK_ROUNDS {
        let steps = walk.steps(&ends);
        if steps.is_empty() {
            break;
        }
        let found: Vec<(Step, Option<StreamId>)> = steps
            .into_iter()
            .map(|step| {
                let found = match step {
                    Step::Last { from, to } => all
                        .iter()
                        .filter(|i| (from..=to).contains(&i.ms))
                        .max()
                        .copied(),
                    Step::First { from, to } => all
                        .iter()
                        .filter(|i| (from..=to).contains(&i.ms))
                        .min()
                        .copied(),
                };
                (step, found)
            })
            .collect();
        Walk::apply(&found, &mut ends);
    }
    ends
}

/// Retained-model estimate of the lag of a group whose first undelivered
/// entry is `all[at]`, with a sample of `k` and the probes the probe
/// would send (first entry's, position's and sample end's milliseconds).
fn retained(all: &[StreamId], at: usize, k: usize) -> f64 {
    let sample = &all[at..(at + k).min(all.len())];
    let (first, last, n) = (all[0], all[all.len() - 1], all.len() as u64);
    let split = retained_split(first, last, n, sample, &[]).unwrap();
    let ends = walked(all, &split);
    retained_after(first, last, n, sample, &[], &ends).unwrap()
}

fn within(estimate: f64, truth: usize, tolerance: f64) -> bool {
    (estimate - truth as f64).abs() <= tolerance * truth as f64
}

#[test]
fn steady_producer_is_exact() {
    let all = ids(1_000, &[1; 10_000]);
    for at in [1, 500, 5_000, 9_000] {
        let truth = all.len() - at;
        let e = retained(&all, at, 100);
        assert!((e - truth as f64).abs() <= 2.0, "at {at}: {e} vs {truth}");
    }
}

/// The case that defeated the interpolation over ID times: a thousand
/// entries in two milliseconds, 100 delivered, 90 of the rest deleted.
#[test]
fn one_burst_with_deletions_stays_close() {
    let mut all = ids(5_000, &[600, 400]);
    let delivered = 100;
    // Delete every tenth undelivered entry.
    let mut i = 0;
    all.retain(|_| {
        i += 1;
        i <= delivered || (i - delivered) % 10 != 0
    });
    let truth = all.len() - delivered;
    let e = retained(&all, delivered, 100);
    assert!(within(e, truth, 0.02), "{e} vs {truth}");
}

#[test]
fn bursts_of_hundreds_per_ms_at_any_position() {
    // 40 bursts of 250 entries, one per ms, with idle ms between.
    let per_ms: Vec<u64> = (0..80).map(|i| if i % 2 == 0 { 250 } else { 0 }).collect();
    let all = ids(7_000, &per_ms);
    for at in [300, 2_500, 5_123, 9_000] {
        let truth = all.len() - at;
        let e = retained(&all, at, 100);
        assert!(within(e, truth, 0.05), "at {at}: {e} vs {truth}");
    }
}

#[test]
fn mixed_steady_and_bursts_interleaved() {
    // One entry per ms, and a burst of 120 every 10 ms.
    let per_ms: Vec<u64> = (0..3_000)
        .map(|i| if i % 10 == 3 { 120 } else { 1 })
        .collect();
    let all = ids(9_000, &per_ms);
    for at in [1_000, 10_000, 30_000] {
        let truth = all.len() - at;
        let e = retained(&all, at, 100);
        assert!(within(e, truth, 0.10), "at {at}: {e} vs {truth}");
    }
}

/// Anchors from earlier polls pin bursts that no sample sees: steady
/// for 5 s, one burst of 10,000, steady again.
#[test]
fn anchors_pin_a_burst_between_polls() {
    let mut per_ms = vec![1u64; 5_000];
    per_ms.push(10_000);
    per_ms.extend(vec![1u64; 5_000]);
    let all = ids(20_000, &per_ms);
    let added = all.len() as u64;
    // Polls every 1,000 ms saw the last ID and entries-added.
    let anchors: Vec<Anchor> = (1..=11)
        .map(|p| {
            let upto = all.iter().filter(|i| i.ms < 20_000 + p * 1_000).count();
            Anchor {
                id: all[upto - 1],
                generated: upto as u64,
            }
        })
        .collect();
    for at in [2_000, 7_000, 15_000, 17_000] {
        let position = all[at - 1];
        let (_, split) = generated_split(position, &anchors).unwrap();
        let ends = walked(&all, &split);
        let e = generated_after(position, &anchors, added, &ends).unwrap();
        let truth = all.len() - at;
        assert!(within(e, truth, 0.01), "at {at}: {e} vs {truth}");
    }
    // Without them the burst is smeared over the window.
    let e = retained(&all, 2_000, 100);
    assert!(!within(e, all.len() - 2_000, 0.10), "{e}");
}

/// Sparse bursts: 500 entries every 19 ms, in 1 or 2 ms each. The walk
/// reads one burst per round trip, so the gaps next to the position are
/// counted, not modelled.
#[test]
fn sparse_bursts_are_walked() {
    let per_ms: Vec<u64> = (0..240)
        .map(|i| match i % 19 {
            0 => 300,
            1 => 200,
            _ => 0,
        })
        .collect();
    let all = ids(3_000, &per_ms);
    for at in [1_000, 2_600, 3_333, 5_000] {
        let truth = all.len() - at;
        let e = retained(&all, at, 100);
        assert!(within(e, truth, 0.02), "at {at}: {e} vs {truth}");
    }
}

#[test]
fn empty_ranges_merge_and_count_once() {
    let mut ends = MsEnds::default();
    ends.insert_empty(10, 19);
    ends.insert_empty(15, 30);
    ends.insert_empty(31, 31);
    ends.insert(40, Some(4));
    ends.insert(20, None);
    assert_eq!(ends.inside(10, 49), (5.0, 17.0));
    assert_eq!(ends.inside(0, 9), (0.0, 10.0));
}

#[test]
fn degenerate_samples() {
    let all = ids(1, &[1; 10]);
    let ends = MsEnds::default();
    // Sample reaching the last entry: exactly the sample.
    assert_eq!(
        retained_after(all[0], all[9], 10, &all[5..], &[], &ends),
        Some(5.0)
    );
    // Sample starting at the first entry: everything.
    assert_eq!(
        retained_after(all[0], all[9], 10, &all[..3], &[], &ends),
        Some(10.0)
    );
    assert_eq!(retained_after(all[0], all[9], 10, &[], &[], &ends), None);
    // A tail narrows the unknown region: steady stream, head 3..5,
    // tail 8..9: (0, 3] ∪ (5, 8] hold 6 entries, split 3 / 3.
    let split = retained_split(all[0], all[9], 10, &all[3..6], &all[8..]).unwrap();
    assert_eq!((split.q, split.total), (all[8], 6));
    assert_eq!(
        retained_after(all[0], all[9], 10, &all[3..6], &all[8..], &ends),
        Some(7.0)
    );
    // A length read before a trim that the samples read after, or the
    // other way round, can leave fewer entries than the samples hold: the
    // split has nothing to share and the rank's bounds cross (1 > 0).
    let crossed = retained_split(all[0], all[9], 5, &all[3..6], &all[7..]).unwrap();
    assert_eq!(crossed.total, 0);
    assert_eq!(
        retained_after(all[0], all[9], 5, &all[3..6], &all[7..], &ends),
        Some(4.0),
        "the rank is at least the sample's first entry, never a panic"
    );
    // No anchor above the position.
    let anchors = [Anchor {
        id: all[2],
        generated: 3,
    }];
    assert_eq!(generated_after(all[5], &anchors, 10, &ends), None);
}

/// A group at 0-0 whose entries-read is known is an anchor, so a split can
/// start at 0-0 and its first gap spans every millisecond since 1970. Once
/// a round has found that gap empty, the next one must step over what it
/// learnt as a whole: stepping through it one millisecond at a time held
/// the stream poll (and the runtime thread under it) for hours.
#[test]
fn a_walk_from_id_zero_ends() {
    let all = ids(1_796_569_238_480, &[1; 50]);
    let split = Split {
        p: id(0, 0),
        x: all[20],
        y: all[20],
        q: all[49],
        total: 50,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(walked(&all, &split)));
    let ends = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the walk ended within its rounds");
    // The 20 milliseconds below the position were read, the rest since
    // the epoch is known empty.
    assert_eq!(ends.inside(1, 1_796_569_238_499), (20.0, 0.0));
}
