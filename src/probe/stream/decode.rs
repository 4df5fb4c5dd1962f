//! The stream probe's first round trip, decoded: the server time and each
//! stream's `XINFO STREAM` and `XINFO GROUPS`, with problems counted and
//! vanished streams set aside (an event, not an error).

use crate::backend::Reply;
use crate::backend::reply::{self, GroupInfo};
use crate::probe::context::{ProbeContext, Problems};
use crate::probe::memory::StreamRead;
use crate::safe_names;
use crate::snapshot::Name;

/// The server time from a `TIME` reply, when it came.
pub(super) fn time_of(ctx: &ProbeContext, r: &Reply, problems: &mut Problems) -> Option<u64> {
    match r {
        Ok(v) => problems.decoded(ctx, reply::time_ms(v)),
        Err(e) => {
            problems.refused(e);
            tracing::debug!(redis_target = %ctx.target.name, error = %e, "TIME refused; ages are not exported");
            None
        }
    }
}

/// One stream's `XINFO STREAM` and `XINFO GROUPS` replies, decoded, with its
/// groups split into watched and not; `None` (and the stream in `vanished`
/// when it was deleted) when they cannot be read.
pub(super) fn decode_stream(
    ctx: &ProbeContext,
    key: &Name,
    info: &Reply,
    groups: &Reply,
    problems: &mut Problems,
    vanished: &mut Vec<Name>,
) -> Option<StreamRead> {
    let info = match info {
        Ok(v) => {
            let info = problems.decoded(ctx, reply::stream_info(v))?;
            problems.answered();
            info
        }
        Err(e) if e.kind.is_vanished() => {
            // Deleted since discovery: it leaves the watch list now (an
            // event, not an error); discovery finds it again if it returns.
            tracing::debug!(redis_target = %ctx.target.name, stream = %safe_names::printable(&**key), "stream vanished");
            vanished.push(key.clone());
            return None;
        }
        Err(e) => {
            // Not a stream, or not ours to read: counted by the client
            // (errors_total); the stream leaves the output. Logged at debug
            // so a permanent condition cannot flood the log every poll.
            problems.refused(e);
            tracing::debug!(redis_target = %ctx.target.name, stream = %safe_names::printable(&**key), error = %e, "stream skipped");
            return None;
        }
    };
    let settings = ctx.config.streams.for_stream(key);
    let groups = match groups {
        Ok(v) => problems.decoded(ctx, reply::groups(v))?,
        Err(e) => {
            problems.refused(e);
            return None;
        }
    };
    let listed = groups.len() as u64;
    let (mut groups, unwatched): (Vec<GroupInfo>, Vec<GroupInfo>) = groups
        .into_iter()
        .partition(|g| ctx.target.watches_group(&settings, &g.name));
    // XINFO GROUPS lists groups by name: the first ones are kept.
    let cap = ctx.config.metrics.max_groups_per_stream;
    let over_cap = groups.len().saturating_sub(cap) as u64;
    groups.truncate(cap);
    let dropped = over_cap + info.groups.saturating_sub(listed);
    Some(StreamRead {
        info,
        groups,
        unwatched,
        dropped,
    })
}

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
    pub(super) fn new(share: usize, left: usize) -> Allotment {
        Allotment { share, left }
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
pub(super) fn group_share(mut wanted: Vec<usize>, per_stream: usize, max_groups: usize) -> usize {
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
            info: crate::backend::reply::StreamInfo::default(),
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
