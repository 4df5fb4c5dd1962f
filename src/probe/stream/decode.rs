//! The stream probe's replies, decoded, with problems counted: the first
//! round trip ([`first_round`]: the server time and each stream's `XINFO
//! STREAM` and `XINFO GROUPS`, vanished streams set aside as an event, not
//! an error), the `TIME` of the dead-letter read, and the IDs the later
//! round trips read.

use std::collections::HashSet;

use super::allotment::Allotment;
use crate::backend::Reply;
use crate::backend::reply;
use crate::loss;
use crate::probe::context::{ProbeContext, Problems};
use crate::probe::memory::StreamRead;
use crate::safe_names;
use crate::snapshot::Name;
use crate::vocab::{GroupInfo, StreamId};

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

/// What the first round trip of a batch read: the server time, the streams
/// whose XINFO could be read (in the order asked), and which of those were
/// not read as one moment (their transaction did not hold).
pub(super) struct FirstRound {
    pub(super) now_ms: Option<u64>,
    pub(super) reads: Vec<(Name, StreamRead)>,
    pub(super) unsettled: HashSet<usize>,
}

/// Decodes the first round trip of a batch: `TIME` (`head`), then each
/// stream's `XINFO STREAM` and `XINFO GROUPS` with whether they were read
/// atomically. A stream's groups are split into watched and not, the
/// watched cut to `max_groups_per_stream` (the first by name: `XINFO
/// GROUPS` lists them so) and then to what `allot` leaves. A stream that
/// cannot be read is left out, and added to `vanished` when it was deleted.
pub(super) fn first_round(
    ctx: &ProbeContext,
    names: &[&Name],
    head: &[Reply],
    replies: &[(Vec<Reply>, bool)],
    allot: &mut Allotment,
    problems: &mut Problems,
    vanished: &mut Vec<Name>,
) -> FirstRound {
    let now_ms = head.first().and_then(|r| time_of(ctx, r, problems));
    let mut reads: Vec<(Name, StreamRead)> = Vec::with_capacity(names.len());
    let mut unsettled = HashSet::new();
    let cap = ctx.config.metrics.max_groups_per_stream;
    for (key, (r, atomic)) in names.iter().zip(replies) {
        let (Some(info), Some(groups)) = (r.first(), r.get(1)) else {
            continue;
        };
        let info = match info {
            Ok(v) => {
                let Some(info) = problems.decoded(ctx, reply::stream_info(v)) else {
                    continue;
                };
                problems.answered();
                info
            }
            Err(e) if e.kind.is_vanished() => {
                // Deleted since discovery: it leaves the watch list now (an
                // event, not an error); discovery finds it again if it returns.
                tracing::debug!(redis_target = %ctx.target.name, stream = %safe_names::printable(&***key), "stream vanished");
                vanished.push((*key).clone());
                continue;
            }
            Err(e) => {
                // Not a stream, or not ours to read: counted by the client
                // (errors_total); the stream leaves the output. Logged at debug
                // so a permanent condition cannot flood the log every poll.
                problems.refused(e);
                tracing::debug!(redis_target = %ctx.target.name, stream = %safe_names::printable(&***key), error = %e, "stream skipped");
                continue;
            }
        };
        let settings = ctx.config.streams.for_stream(key);
        let groups = match groups {
            Ok(v) => match problems.decoded(ctx, reply::groups(v)) {
                Some(groups) => groups,
                None => continue,
            },
            Err(e) => {
                problems.refused(e);
                continue;
            }
        };
        let listed = groups.len() as u64;
        let (mut groups, unwatched): (Vec<GroupInfo>, Vec<GroupInfo>) = groups
            .into_iter()
            .partition(|g| ctx.target.watches_group(&settings, &g.name));
        let over_cap = groups.len().saturating_sub(cap) as u64;
        groups.truncate(cap);
        let mut read = StreamRead {
            info,
            groups,
            unwatched,
            dropped: over_cap + info.groups.saturating_sub(listed),
        };
        allot.cut(&mut read);
        if !atomic {
            unsettled.insert(reads.len());
        }
        reads.push(((*key).clone(), read));
    }
    FirstRound {
        now_ms,
        reads,
        unsettled,
    }
}

/// The IDs of an `XRANGE` or `XREVRANGE` reply; a refusal, or a reply that
/// does not decode, is counted as a problem and reads as none.
pub(super) fn range_ids(
    ctx: &ProbeContext,
    r: Reply,
    problems: &mut Problems,
) -> Option<Vec<StreamId>> {
    match r {
        Ok(v) => {
            problems.answered();
            problems.decoded(ctx, reply::range_ids(&v))
        }
        Err(e) => {
            problems.refused(&e);
            None
        }
    }
}

/// What the `XRANGE` and `XPENDING` of a range a group advanced over say:
/// its entries that exist, and its pending entries that do not.
pub(super) fn range_count(
    ctx: &ProbeContext,
    range: Reply,
    pending: Reply,
    problems: &mut Problems,
) -> loss::RangeCount {
    let cap = loss::RANGE_COUNT_CAP as usize;
    let mut decoded = |r: Reply, ids: fn(&_) -> _| match r {
        Ok(v) => {
            problems.answered();
            problems.decoded(ctx, ids(&v))
        }
        Err(e) => {
            problems.refused(&e);
            None
        }
    };
    let present: Option<Vec<StreamId>> = decoded(range, reply::range_ids);
    let pending: Option<Vec<StreamId>> = decoded(pending, |v| {
        reply::pending_entries(v).map(|entries| entries.into_iter().map(|e| e.id).collect())
    });
    match (present, pending) {
        (Some(present), Some(pending)) if present.len() <= cap && pending.len() <= cap => {
            let delivered_gone = pending
                .iter()
                .filter(|id| present.binary_search(id).is_err())
                .count();
            loss::RangeCount::Survivors {
                present: present.len() as u64,
                delivered_gone: delivered_gone as u64,
            }
        }
        _ => loss::RangeCount::NotCounted,
    }
}
