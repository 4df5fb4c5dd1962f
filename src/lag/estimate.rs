//! The fallback estimator (docs/lag-and-losses.md): how many entries follow a group's
//! position when Redis cannot say and there are too many to count.
//!
//! For one group it reads the [`UndeliveredSample`] the probe took after its
//! position and the stream's [`Evidence`] (the walked milliseconds and the
//! anchors), picks a model ([`entries_after`]) and names the walk that model
//! needs ([`walk`]). Two models, both pure:
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
//! a gap that no anchor, sample or probe touches (the stream poll caps the
//! walks' commands) is spread over the gap's milliseconds. What the walks
//! read is kept for the next poll ([`super::walked::Walked`]), whose walks go on
//! where the cap stopped them. The anchors of earlier polls bound that error
//! by the entries added within one stream poll; without them (the first
//! polls after a start) an unseen burst can move the estimate by up to its
//! size. The caller clamps the result into
//! the bounds Redis's counters prove. `tests/servers/motion.rs` measures steady,
//! bursty and mixed producers on every server, and a sparse mixed one whose
//! gaps outlast the walks' default cap.

use std::collections::BTreeMap;

use crate::vocab::{StreamId, StreamInfo};

/// Entries ever added with an ID at or below `id`: a point where Redis's
/// counters pin the generated-entries curve exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Anchor {
    /// The ID.
    pub id: StreamId,
    /// Entries ever added with an ID at or below it.
    pub generated: u64,
}

/// The first undelivered entries, as read by the probe, and, when the lag
/// must be estimated, the last entries after them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UndeliveredSample {
    /// IDs returned by `XRANGE key <successor> + COUNT count`.
    pub ids: Vec<StreamId>,
    /// The COUNT asked for.
    pub count: u32,
    /// IDs returned by `XREVRANGE key + <successor of the last id> COUNT
    /// count` (see [`Reading::tail_request`]), in ID order; empty when not read.
    ///
    /// [`Reading::tail_request`]: super::reading::Reading::tail_request
    pub tail: Vec<StreamId>,
    /// The COUNT asked for the tail; 0 when it was not read.
    pub tail_count: u32,
    /// The group read on, or entries were removed, between XINFO and this
    /// sample: the count is still a lag, but not of XINFO's moment, so no
    /// proof of what was lost (its consumers may have deleted what they
    /// read meanwhile).
    pub changed_meanwhile: bool,
}

impl UndeliveredSample {
    /// A sample of the first undelivered entries only.
    pub fn head(ids: Vec<StreamId>, count: u32) -> UndeliveredSample {
        UndeliveredSample {
            ids,
            count,
            ..UndeliveredSample::default()
        }
    }

    /// True when the reply held every undelivered entry.
    pub(super) fn is_complete(&self) -> bool {
        (self.ids.len() as u64) < u64::from(self.count)
    }

    /// With a tail read: every undelivered entry, when head and tail held
    /// them all between them.
    pub(super) fn counted_with_tail(&self) -> Option<u64> {
        (self.tail_count > 0 && (self.tail.len() as u64) < u64::from(self.tail_count))
            .then(|| (self.ids.len() + self.tail.len()) as u64)
    }
}

/// How many times the head sample's size the tail read asks for: lags
/// below `(1 + TAIL_FACTOR) × k` (up to 499 at the default `k` of 100) are
/// then counted, not estimated, for one bounded read of the last entries; a
/// tail that comes back full cannot show that nothing lies between it and
/// the head.
pub(super) const TAIL_FACTOR: u32 = 4;

/// What the estimator may use beyond the group's own sample.
#[derive(Clone, Copy, Debug, Default)]
pub struct Evidence<'a> {
    /// Last sequence numbers of probed milliseconds.
    pub ends: Option<&'a MsEnds>,
    /// Points of the stream's generated-entries curve (see [`stream_anchors`]).
    ///
    /// [`stream_anchors`]: super::anchors::stream_anchors
    pub anchors: &'a [Anchor],
}

/// What walks over a stream's milliseconds found: the sequence of the last
/// entry of each millisecond read (`None`: it holds none), and ranges of
/// milliseconds known to hold no entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MsEnds {
    last: BTreeMap<u64, Option<u64>>,
    /// Disjoint empty ranges, start → end (inclusive).
    empty: BTreeMap<u64, u64>,
}

impl MsEnds {
    /// Records that the last entry of millisecond `ms` has sequence
    /// `last_seq`, or that it holds none.
    pub fn insert(&mut self, ms: u64, last_seq: Option<u64>) {
        let at = self.last.entry(ms).or_insert(last_seq);
        *at = (*at).max(last_seq);
    }

    /// Records that milliseconds `from..=to` hold no entry.
    pub fn insert_empty(&mut self, from: u64, to: u64) {
        if from > to {
            return;
        }
        let (mut start, mut end) = (from, to);
        let touching: Vec<(u64, u64)> = self
            .empty
            .range(..=to.saturating_add(1))
            .filter(|&(_, &e)| e.saturating_add(1) >= from)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.empty.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.empty.insert(start, end);
    }

    /// Keeps only what was learnt of milliseconds `first_ms..last_ms`: the
    /// last one may still receive entries, and those before the first entry
    /// were trimmed away.
    pub fn keep_between(&mut self, first_ms: u64, last_ms: u64) {
        self.last.retain(|&ms, _| ms >= first_ms && ms < last_ms);
        let empty = std::mem::take(&mut self.empty);
        for (from, to) in empty {
            let (from, to) = (from.max(first_ms), to.min(last_ms.saturating_sub(1)));
            if from <= to && from < last_ms {
                self.empty.insert(from, to);
            }
        }
    }

    /// How many facts it holds: milliseconds read and empty ranges.
    pub fn facts(&self) -> usize {
        self.last.len() + self.empty.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty() && self.empty.is_empty()
    }

    /// True when millisecond `ms` was read or is known empty.
    fn knows(&self, ms: u64) -> bool {
        self.last.contains_key(&ms) || self.is_empty_ms(ms)
    }

    fn is_empty_ms(&self, ms: u64) -> bool {
        self.empty_around(ms).is_some()
    }

    /// The known empty range that holds `ms`.
    fn empty_around(&self, ms: u64) -> Option<(u64, u64)> {
        self.empty
            .range(..=ms)
            .next_back()
            .filter(|&(_, &end)| end >= ms)
            .map(|(&start, &end)| (start, end))
    }

    /// The first millisecond of `lo..=hi` neither read nor known empty.
    /// An empty range is stepped over whole: one can span every
    /// millisecond since the epoch (a gap from 0-0), so this takes one
    /// step per fact, never one per millisecond.
    fn first_unknown(&self, mut lo: u64, hi: u64) -> Option<u64> {
        while lo <= hi {
            lo = match self.empty_around(lo) {
                Some((_, end)) => end.checked_add(1)?,
                None if self.last.contains_key(&lo) => lo.checked_add(1)?,
                None => return Some(lo),
            };
        }
        None
    }

    /// The last millisecond of `lo..=hi` neither read nor known empty, as
    /// [`MsEnds::first_unknown`] from the other end.
    fn last_unknown(&self, lo: u64, mut hi: u64) -> Option<u64> {
        while lo <= hi {
            hi = match self.empty_around(hi) {
                Some((start, _)) => start.checked_sub(1)?,
                None if self.last.contains_key(&hi) => hi.checked_sub(1)?,
                None => return Some(hi),
            };
        }
        None
    }

    /// Entries generated in `id`'s millisecond after it, when read (else 0).
    fn after(&self, id: StreamId) -> f64 {
        match self.last.get(&id.ms) {
            Some(Some(last)) => last.saturating_sub(id.seq) as f64,
            _ => 0.0,
        }
    }

    /// Over the whole milliseconds `from..=to`: the entries generated in
    /// those that were read, and how many were not.
    fn inside(&self, from: u64, to: u64) -> (f64, f64) {
        if from > to {
            return (0.0, 0.0);
        }
        let mut covered = 0u64;
        for (&s, &e) in self.empty.range(..=to) {
            if e >= from {
                covered += e.min(to) - s.max(from) + 1;
            }
        }
        let mut known = 0.0;
        for (&ms, last) in self.last.range(from..=to) {
            if !self.is_empty_ms(ms) {
                known += last.map_or(0.0, |s| s as f64 + 1.0);
                covered += 1;
            }
        }
        (known, (to - from + 1).saturating_sub(covered) as f64)
    }
}

/// Round trips a walk may take. Each reads, per gap, the next
/// [`WALK_WIDTH`] milliseconds one by one and then jumps to the next
/// occupied one, so sparse bursts are counted exactly in a few round trips,
/// and a steady stream (every millisecond occupied) is read for
/// `WALK_ROUNDS × (WALK_WIDTH + 1)` milliseconds on each side of the
/// position and modelled beyond.
pub const WALK_ROUNDS: usize = 32;

/// Single milliseconds a walk reads per gap and round trip.
const WALK_WIDTH: u64 = 4;

/// One read of a walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// The last entry in milliseconds `from..=to` (`XREVRANGE key to-max
    /// from-0 COUNT 1`).
    Last {
        /// First millisecond.
        from: u64,
        /// Last millisecond.
        to: u64,
    },
    /// The first entry in milliseconds `from..=to` (`XRANGE key from-0
    /// to-max COUNT 1`).
    First {
        /// First millisecond.
        from: u64,
        /// Last millisecond.
        to: u64,
    },
}

/// A walk over the whole milliseconds of a [`Split`]'s two gaps, the ones
/// next to the position first. From an end of a gap, a round trip reads the
/// next [`WALK_WIDTH`] milliseconds one by one and jumps over the empty ones
/// beyond: a `Last` over the rest of the gap gives its last occupied
/// millisecond and that millisecond's size at once, a `First` its first
/// occupied millisecond (read one by one next time). Each gap is walked from
/// its end at the position; the shorter one from both ends, so that it is
/// often read whole, and then the even-density model has nothing to split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// `p`'s and `y`'s milliseconds: how many entries follow them there.
    edges: [u64; 2],
    /// The first gap's milliseconds, walked down from `x`.
    first: Option<(u64, u64)>,
    /// The second gap's milliseconds, walked up from `y`.
    second: Option<(u64, u64)>,
    /// Which gap is also walked from its other end.
    shorter_is_first: bool,
}

impl Walk {
    /// A walk of `split`'s gaps.
    pub fn new(split: &Split) -> Walk {
        let gap = |a: StreamId, b: StreamId| (b.ms > a.ms + 1).then(|| (a.ms + 1, b.ms - 1));
        let (first, second) = (gap(split.p, split.x), gap(split.y, split.q));
        let span = |g: Option<(u64, u64)>| g.map_or(0, |(a, b)| b - a);
        Walk {
            edges: [split.p.ms, split.y.ms],
            first,
            second,
            shorter_is_first: span(first) <= span(second),
        }
    }

    /// The reads of the next round trip, given what `ends` knows; empty when
    /// the walk is over.
    pub fn steps(&self, ends: &MsEnds) -> Vec<Step> {
        let mut steps: Vec<Step> = self
            .edges
            .iter()
            .filter(|&&ms| !ends.knows(ms))
            .map(|&ms| Step::Last { from: ms, to: ms })
            .collect();
        steps.dedup();
        let walk = |steps: &mut Vec<Step>, gap: Option<(u64, u64)>, down: bool, up: bool| {
            let Some((lo, hi)) = gap else {
                return;
            };
            // What earlier rounds learnt narrows the gap from both ends.
            let Some(lo) = ends.first_unknown(lo, hi) else {
                return;
            };
            let Some(hi) = ends.last_unknown(lo, hi) else {
                return;
            };
            let (mut from, mut to) = (lo, hi);
            if down {
                let near = to.saturating_sub(WALK_WIDTH - 1).max(from);
                steps.extend((near..=to).map(|ms| Step::Last { from: ms, to: ms }));
                to = near.saturating_sub(1);
            }
            if up && from <= to {
                let near = from.saturating_add(WALK_WIDTH - 1).min(to);
                steps.extend((from..=near).map(|ms| Step::Last { from: ms, to: ms }));
                from = near + 1;
            }
            if from <= to && from >= lo {
                if down {
                    steps.push(Step::Last { from, to });
                }
                if up {
                    steps.push(Step::First { from, to });
                }
            }
        };
        walk(&mut steps, self.first, true, self.shorter_is_first);
        walk(&mut steps, self.second, !self.shorter_is_first, true);
        steps
    }

    /// Records what one round's steps found (`None`: no entry).
    pub fn apply(found: &[(Step, Option<StreamId>)], ends: &mut MsEnds) {
        for &(step, id) in found {
            match (step, id) {
                (Step::Last { to, .. }, Some(id)) => {
                    ends.insert(id.ms, Some(id.seq));
                    ends.insert_empty(id.ms.saturating_add(1), to);
                }
                (Step::First { from, .. }, Some(id)) => {
                    // The millisecond found is read whole next round.
                    ends.insert_empty(from, id.ms.saturating_sub(1));
                }
                (Step::Last { from, to } | Step::First { from, to }, None) => {
                    ends.insert_empty(from, to);
                }
            }
        }
    }
}

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
/// and the number of whole milliseconds in between whose entries are
/// unknown.
fn generated(a: StreamId, b: StreamId, ends: &MsEnds) -> (f64, f64) {
    if b <= a {
        (0.0, 0.0)
    } else if a.ms == b.ms {
        ((b.seq - a.seq) as f64, 0.0)
    } else {
        let edges = ends.after(a) + b.seq as f64 + 1.0;
        let (known, unknown) = ends.inside(a.ms + 1, b.ms - 1);
        (edges + known, unknown)
    }
}

impl Split {
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

/// The split that ranks `head[0]` in a stream from `first` to `last`
/// (`length` entries), `head` being consecutive entries of it and `tail`
/// (possibly empty) its last entries, both in ID order; `Err` with the
/// answer when the samples settle it.
pub fn retained_split(
    first: StreamId,
    last: StreamId,
    length: u64,
    head: &[StreamId],
    tail: &[StreamId],
) -> Result<Split, Option<f64>> {
    let (Some(&u), Some(&v)) = (head.first(), head.last()) else {
        return Err(None);
    };
    let k = head.len() as u64;
    if u <= first {
        return Err(Some(length as f64));
    }
    if v >= last || length <= k {
        return Err(Some(k as f64));
    }
    // The entries not in the samples: (first, u] ∪ (v, t] where t is the
    // tail's first entry (or the last entry without a tail).
    let (t, known_tail) = match tail.first() {
        Some(&t) if t > v => (t, tail.len() as u64 - 1),
        _ => (last, 0),
    };
    Ok(Split {
        p: first,
        x: u,
        y: v,
        q: t,
        total: length
            .checked_sub(k + known_tail)
            .ok_or(Some(length as f64))?,
    })
}

/// Entries at or after `head[0]` (see [`retained_split`]).
pub fn retained_after(
    first: StreamId,
    last: StreamId,
    length: u64,
    head: &[StreamId],
    tail: &[StreamId],
    ends: &MsEnds,
) -> Option<f64> {
    match retained_split(first, last, length, head, tail) {
        Err(settled) => settled,
        Ok(split) => {
            // Counters and samples read at different moments can leave
            // nothing to share (total 0): the bounds must not cross.
            let rank = split.share(ends).clamp(1.0, (split.total as f64).max(1.0));
            Some(length as f64 - rank)
        }
    }
}

/// The estimator's model for one group: entries generated after its
/// position between two anchors, or the retained entries around its
/// sample (or the answer the sample settles).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Model {
    /// Entries generated after the position, between two anchors.
    Generated(Anchor, Split),
    /// Retained entries around the sample, or the answer it settles.
    Retained(Result<Split, Option<f64>>),
}

/// The anchors, with the tail's first entry when nothing after the
/// position was deleted (then the entries generated up to it are
/// entries-added minus the tail after it).
fn anchors_with_tail(
    stream: &StreamInfo,
    sample: &UndeliveredSample,
    anchors: &[Anchor],
) -> Vec<Anchor> {
    let mut all = anchors.to_vec();
    if let (Some(&t), Some(added)) = (sample.tail.first(), stream.entries_added) {
        if let Some(generated) = added.checked_sub(sample.tail.len() as u64 - 1) {
            all.push(Anchor { id: t, generated });
            all.sort_unstable();
            all.dedup_by_key(|a| a.id);
        }
    }
    all
}

/// The model for a group at `position`: entries generated after it when
/// nothing after it was deleted and anchors surround it, else the retained
/// entries around its sample.
fn model(
    stream: &StreamInfo,
    position: StreamId,
    sample: &UndeliveredSample,
    anchors: &[Anchor],
) -> Option<Model> {
    let nothing_deleted_after = stream.max_deleted_entry_id.is_some_and(|d| d <= position);
    if nothing_deleted_after && stream.entries_added.is_some() {
        if let Some((below, split)) = generated_split(position, anchors) {
            return Some(Model::Generated(below, split));
        }
    }
    Some(Model::Retained(retained_split(
        stream.first_entry_id?,
        stream.last_entry_id?,
        stream.length,
        &sample.ids,
        &sample.tail,
    )))
}

/// The entries after a group's `position`, estimated with its model from
/// its sample and the stream's evidence, before the caller clamps them.
pub(super) fn entries_after(
    stream: &StreamInfo,
    position: StreamId,
    sample: &UndeliveredSample,
    evidence: &Evidence<'_>,
) -> Option<f64> {
    let empty = MsEnds::default();
    let ends = evidence.ends.unwrap_or(&empty);
    let anchors = anchors_with_tail(stream, sample, evidence.anchors);
    match model(stream, position, sample, &anchors)? {
        Model::Generated(..) => generated_after(position, &anchors, stream.entries_added?, ends),
        Model::Retained(_) => retained_after(
            stream.first_entry_id?,
            stream.last_entry_id?,
            stream.length,
            &sample.ids,
            &sample.tail,
            ends,
        ),
    }
}

/// The walk over the stream's milliseconds that the model of a group at
/// `position` splits, when it has a gap to split.
pub(super) fn walk(
    stream: &StreamInfo,
    position: StreamId,
    sample: &UndeliveredSample,
    anchors: &[Anchor],
) -> Option<Walk> {
    let anchors = anchors_with_tail(stream, sample, anchors);
    match model(stream, position, sample, &anchors)? {
        Model::Generated(_, split) | Model::Retained(Ok(split)) => Some(Walk::new(&split)),
        Model::Retained(Err(_)) => None,
    }
}

#[cfg(test)]
mod tests;
