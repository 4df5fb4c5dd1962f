//! The groups one poll may keep, under the target's `max_groups`
//! ([`Allotment`]): each stream's share, worked out from what the streams
//! wanted at their last poll ([`group_share`]), and what is left as the
//! poll's streams are read. Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::probe::memory::StreamRead;
use crate::snapshot::{Name, StreamState};

/// The groups one poll may keep per stream, and in all, under the target's
/// `max_groups` (see [`group_share`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Allotment {
    /// Groups any one stream keeps.
    share: usize,
    /// Groups the streams still to be read may keep in all: a stream new
    /// since the share was worked out cannot push the poll over the cap.
    left: usize,
}

impl Allotment {
    /// `share` groups per stream, `left` in all.
    fn new(share: usize, left: usize) -> Allotment {
        Allotment { share, left }
    }

    /// The allotment of a poll of `polled`, given the streams' entries at
    /// their `last` poll: a stream not polled yet wants nothing until it
    /// is, each wants at most `per_stream`, and together they keep at most
    /// `max_groups`. An `extra` poll (of the streams keyspace events named)
    /// shares with the streams it does not poll, and leaves them the groups
    /// they keep.
    pub(super) fn for_poll(
        last: &BTreeMap<Name, Arc<StreamState>>,
        polled: &[Name],
        extra: bool,
        per_stream: usize,
        max_groups: usize,
    ) -> Allotment {
        let wants = |s: &StreamState| {
            s.groups
                .len()
                .saturating_add(usize::try_from(s.groups_dropped).unwrap_or(usize::MAX))
        };
        let mut wanted: Vec<usize> = polled
            .iter()
            .filter_map(|name| last.get(name))
            .map(|s| wants(s))
            .collect();
        let mut kept_elsewhere = 0usize;
        if extra {
            for (_, s) in last.iter().filter(|(name, _)| !polled.contains(name)) {
                wanted.push(wants(s));
                kept_elsewhere = kept_elsewhere.saturating_add(s.groups.len());
            }
        }
        let share = group_share(wanted, per_stream, max_groups);
        Allotment::new(share, max_groups.saturating_sub(kept_elsewhere))
    }

    /// Cuts `read`'s watched groups to its share and to what is left,
    /// counting the rest as dropped. The first by name are kept, as
    /// `max_groups_per_stream` keeps them.
    pub(super) fn cut(&mut self, read: &mut StreamRead) {
        let keep = read.groups.len().min(self.share).min(self.left);
        read.dropped += (read.groups.len() - keep) as u64;
        read.groups.truncate(keep);
        self.left -= keep;
    }
}

/// The share of `max_groups` each stream keeps when the streams want
/// `wanted` groups each (their watched groups at the last poll, at most
/// `per_stream`): the largest level such that no stream keeps more than it
/// and all of them together keep at most `max_groups`. Streams under the
/// level keep every group; only the largest are cut, equally. `per_stream`
/// when everything fits.
fn group_share(mut wanted: Vec<usize>, per_stream: usize, max_groups: usize) -> usize {
    for w in &mut wanted {
        *w = (*w).min(per_stream);
    }
    wanted.sort_unstable();
    let mut left = max_groups;
    let streams = wanted.len();
    for (i, &w) in wanted.iter().enumerate() {
        let rest = streams - i;
        if w.saturating_mul(rest) > left {
            return left / rest;
        }
        left -= w;
    }
    per_stream
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{GroupInfo, StreamInfo};

    #[test]
    fn the_share_leaves_small_streams_whole_and_cuts_the_largest() {
        let cases: &[(&[usize], usize, usize, usize)] = &[
            // wanted, per stream, max groups, share
            (&[], 1000, 10, 1000),
            (&[1, 2, 3], 1000, 6, 1000),
            (&[1, 2, 3], 2, 100, 2),
            (&[1, 1, 500], 1000, 100, 98),
            (&[1, 1, 500, 500], 1000, 100, 49),
            (&[5, 5, 5, 5], 1000, 10, 2),
            (&[5, 5, 5, 5], 1000, 3, 0),
            (&[10_000, 10_000], 1000, 1500, 750),
        ];
        for &(wanted, per_stream, max, share) in cases {
            let got = group_share(wanted.to_vec(), per_stream, max);
            assert_eq!(got, share, "{wanted:?} per stream {per_stream}, max {max}");
            let kept: usize = wanted.iter().map(|&w| w.min(got).min(per_stream)).sum();
            assert!(kept <= max, "{wanted:?}: {kept} kept over {max}");
        }
    }

    #[test]
    fn the_allotment_stops_at_what_is_left() {
        let group = |name: &str| GroupInfo {
            name: name.as_bytes().to_vec(),
            ..GroupInfo::default()
        };
        let read = |n: usize| StreamRead {
            info: StreamInfo::default(),
            groups: (0..n).map(|i| group(&format!("g{i}"))).collect(),
            unwatched: Vec::new(),
            dropped: 1,
        };
        let mut allot = Allotment::new(3, 5);
        let mut first = read(4);
        allot.cut(&mut first);
        assert_eq!((first.groups.len(), first.dropped), (3, 2));
        let mut second = read(4);
        allot.cut(&mut second);
        assert_eq!((second.groups.len(), second.dropped), (2, 3));
        assert_eq!(second.groups[1].name, b"g1");
        let mut third = read(1);
        allot.cut(&mut third);
        assert_eq!((third.groups.len(), third.dropped), (0, 2));
    }
}
