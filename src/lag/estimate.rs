//! The fallback estimator (SPEC §5, §12): how many entries follow a group's
//! position when Redis cannot say and there are too many to count.
//!
//! Two models, both pure:
//! - **Generated entries** ([`generated_after`], 7.0+): Redis's counters pin
//!   how many entries were ever added up to a few IDs, the [`Anchor`]s: the
//!   stream's last ID, its first entry when nothing inside the window was
//!   deleted, the last ID of each earlier poll (the exporter keeps them), and
//!   other groups' positions. The entries added after the group's position
//!   are entries-added minus the count up to the position, interpolated
//!   between the two anchors around it. Exact but for that interpolation, and
//!   used only when nothing after the position was deleted.
//! - **Retained entries** ([`retained_after`], any server): the first entry
//!   has rank 0, the last rank length − 1, and the sampled undelivered entries
//!   are consecutive, so the entries not accounted for are split between the
//!   two gaps around the sample (first entry … sample, sample … last entry).
//!
//! Both split a gap with a sequence-aware model of how IDs are generated:
//! within one millisecond auto-generated IDs number entries from 0, so an ID's
//! sequence is the count of entries generated before it in its millisecond,
//! and a probe of a millisecond's last ID (`XREVRANGE key ms-max ms-0 COUNT
//! 1`, see [`MsEnds`]) gives how many follow it there. The whole milliseconds
//! in between share what is left evenly. A burst of a thousand entries in one
//! millisecond therefore weighs a thousand entries, not one millisecond, as it
//! did in a plain interpolation over ID times.
//!
//! Error: for a steady producer both models are exact to within a few
//! entries. For bursts the error is what the model cannot see: a burst inside
//! a gap that no anchor, sample or probe touches is spread over the gap's
//! milliseconds. The anchors of earlier polls bound that error by the entries
//! added within one stream poll; without them (the first polls after a start)
//! an unseen burst can move the estimate by up to its size. The caller clamps
//! the result into the bounds Redis's counters prove. `tests/truth.rs`
//! measures steady, bursty and mixed producers on every server.

use std::collections::BTreeMap;

use crate::redis::StreamId;

/// Entries ever added with an ID at or below `id`: a point where Redis's
/// counters pin the generated-entries curve exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Anchor {
    /// The ID.
    pub id: StreamId,
    /// Entries ever added with an ID at or below it.
    pub generated: u64,
}

/// What probes of single milliseconds found: the sequence of the last entry
/// in each probed millisecond, `None` for a probed millisecond with none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MsEnds(BTreeMap<u64, Option<u64>>);

impl MsEnds {
    /// Records a probe of millisecond `ms`: the sequence of its last entry,
    /// or `None` when it holds none.
    pub fn insert(&mut self, ms: u64, last_seq: Option<u64>) {
        let at = self.0.entry(ms).or_insert(last_seq);
        *at = (*at).max(last_seq);
    }

    /// Entries generated in `id`'s millisecond after it, when probed (else 0).
    fn after(&self, id: StreamId) -> f64 {
        match self.0.get(&id.ms) {
            Some(Some(last)) => last.saturating_sub(id.seq) as f64,
            _ => 0.0,
        }
    }

    /// Entries generated in the whole milliseconds `from..=to`, when every
    /// one of them was probed.
    fn whole(&self, from: u64, to: u64) -> Option<f64> {
        if from > to {
            return Some(0.0);
        }
        let span = to - from + 1;
        if span > MAX_WHOLE_PROBES {
            return None;
        }
        (from..=to)
            .map(|ms| {
                self.0
                    .get(&ms)
                    .map(|last| last.map_or(0.0, |s| s as f64 + 1.0))
            })
            .sum()
    }
}

/// Whole milliseconds of a gap worth probing one by one: a gap this short
/// can hold bursts that the even-density model would misplace badly, and
/// probing it costs at most this many `XREVRANGE … COUNT 1`.
const MAX_WHOLE_PROBES: u64 = 8;

/// An interval of a stream, `(p, q]`, whose entries number `total` once a
/// known block `(x, y]` is left out, to be split at `x`: the estimator's
/// one question, for both models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Start (exclusive).
    pub p: StreamId,
    /// The point to place.
    pub x: StreamId,
    /// End of the known block (`x` when there is none).
    pub y: StreamId,
    /// End (inclusive).
    pub q: StreamId,
    /// Entries in `(p, x] ∪ (y, q]`.
    pub total: u64,
}

/// Generated entries in `(a, b]`: a part known from sequences and probes,
/// and the whole milliseconds in between whose entries are unknown (0 when
/// they were all probed).
fn generated(a: StreamId, b: StreamId, ends: &MsEnds) -> (f64, f64) {
    if b <= a {
        (0.0, 0.0)
    } else if a.ms == b.ms {
        ((b.seq - a.seq) as f64, 0.0)
    } else {
        let edges = ends.after(a) + b.seq as f64 + 1.0;
        match ends.whole(a.ms + 1, b.ms - 1) {
            Some(inside) => (edges + inside, 0.0),
            None => (edges, (b.ms - a.ms - 1) as f64),
        }
    }
}

impl Split {
    /// The milliseconds to probe: the ends of `p`'s and `y`'s milliseconds
    /// (how many entries follow them there), and every millisecond inside
    /// the shorter gap when it has few.
    pub fn probes(&self) -> Vec<u64> {
        let mut ms = vec![self.p.ms, self.y.ms];
        let gaps = [(self.p.ms, self.x.ms), (self.y.ms, self.q.ms)];
        let inner = |(a, b): (u64, u64)| b.saturating_sub(a).saturating_sub(1);
        if let Some(&(a, b)) = gaps.iter().min_by_key(|&&g| inner(g)) {
            if (1..=MAX_WHOLE_PROBES).contains(&inner((a, b))) {
                ms.extend(a + 1..b);
            }
        }
        ms.sort_unstable();
        ms.dedup();
        ms
    }

    /// The estimated entries in `(p, x]`.
    pub fn share(&self, ends: &MsEnds) -> f64 {
        let total = self.total as f64;
        let (s1, w1) = generated(self.p, self.x, ends);
        let (s2, w2) = generated(self.y, self.q, ends);
        let (fixed, whole) = (s1 + s2, w1 + w2);
        // Entries per unknown millisecond that make the model add up to
        // `total`; none when the known parts already hold more (deletions).
        let rho = if whole > 0.0 {
            ((total - fixed) / whole).max(0.0)
        } else {
            0.0
        };
        let (g1, g2) = (s1 + rho * w1, s2 + rho * w2);
        if g1 + g2 <= 0.0 {
            return total / 2.0;
        }
        total * g1 / (g1 + g2)
    }
}

/// The split that places `position` between the anchors around it, when
/// there is one on each side.
pub fn generated_split(position: StreamId, anchors: &[Anchor]) -> Option<(Anchor, Split)> {
    let below = anchors.iter().filter(|a| a.id <= position).max()?;
    let above = anchors.iter().filter(|a| a.id > position).min()?;
    let split = Split {
        p: below.id,
        x: position,
        y: position,
        q: above.id,
        total: above.generated.checked_sub(below.generated)?,
    };
    Some((*below, split))
}

/// Entries added after `position`, from the anchors around it.
pub fn generated_after(
    position: StreamId,
    anchors: &[Anchor],
    entries_added: u64,
    ends: &MsEnds,
) -> Option<f64> {
    let (below, split) = generated_split(position, anchors)?;
    let up_to = if position == below.id {
        below.generated as f64
    } else {
        below.generated as f64 + split.share(ends)
    };
    Some((entries_added as f64 - up_to).max(0.0))
}

/// The split that ranks `sample[0]` in a stream from `first` to `last`
/// (`length` entries), `sample` being consecutive entries of it; `Err` with
/// the answer when the sample settles it.
pub fn retained_split(
    first: StreamId,
    last: StreamId,
    length: u64,
    sample: &[StreamId],
) -> Result<Split, Option<f64>> {
    let (Some(&u), Some(&v)) = (sample.first(), sample.last()) else {
        return Err(None);
    };
    let k = sample.len() as u64;
    if u <= first {
        return Err(Some(length as f64));
    }
    if v >= last || length <= k {
        return Err(Some(k as f64));
    }
    // Entries in (first, u] ∪ (v, last]: all but `first` and the sample
    // after `u`.
    Ok(Split {
        p: first,
        x: u,
        y: v,
        q: last,
        total: length - k,
    })
}

/// Entries at or after `sample[0]`.
pub fn retained_after(
    first: StreamId,
    last: StreamId,
    length: u64,
    sample: &[StreamId],
    ends: &MsEnds,
) -> Option<f64> {
    match retained_split(first, last, length, sample) {
        Err(settled) => settled,
        Ok(split) => {
            let rank = split.share(ends).clamp(1.0, split.total as f64);
            Some(length as f64 - rank)
        }
    }
}

#[cfg(test)]
mod tests {
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

    fn ends_of(all: &[StreamId], ms: &[u64]) -> MsEnds {
        let mut ends = MsEnds::default();
        for &m in ms {
            ends.insert(m, all.iter().filter(|i| i.ms == m).max().map(|i| i.seq));
        }
        ends
    }

    /// Retained-model estimate of the lag of a group whose first undelivered
    /// entry is `all[at]`, with a sample of `k` and the probes the probe
    /// would send (first entry's, position's and sample end's milliseconds).
    fn retained(all: &[StreamId], at: usize, k: usize) -> f64 {
        let sample = &all[at..(at + k).min(all.len())];
        let split = retained_split(all[0], all[all.len() - 1], all.len() as u64, sample).unwrap();
        let ends = ends_of(all, &split.probes());
        retained_after(
            all[0],
            all[all.len() - 1],
            all.len() as u64,
            sample,
            &ends,
        )
        .unwrap()
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
        let per_ms: Vec<u64> = (0..3_000).map(|i| if i % 10 == 3 { 120 } else { 1 }).collect();
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
            let ends = ends_of(&all, &split.probes());
            let e = generated_after(position, &anchors, added, &ends).unwrap();
            let truth = all.len() - at;
            assert!(within(e, truth, 0.01), "at {at}: {e} vs {truth}");
        }
        // Without them the burst is smeared over the window.
        let e = retained(&all, 2_000, 100);
        assert!(!within(e, all.len() - 2_000, 0.10), "{e}");
    }

    #[test]
    fn degenerate_samples() {
        let all = ids(1, &[1; 10]);
        let ends = MsEnds::default();
        // Sample reaching the last entry: exactly the sample.
        assert_eq!(
            retained_after(all[0], all[9], 10, &all[5..], &ends),
            Some(5.0)
        );
        // Sample starting at the first entry: everything.
        assert_eq!(
            retained_after(all[0], all[9], 10, &all[..3], &ends),
            Some(10.0)
        );
        assert_eq!(retained_after(all[0], all[9], 10, &[], &ends), None);
        // No anchor above the position.
        let anchors = [Anchor {
            id: all[2],
            generated: 3,
        }];
        assert_eq!(generated_after(all[5], &anchors, 10, &ends), None);
    }
}
