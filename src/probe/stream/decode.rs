//! The stream probe's first round trip, decoded: the server time and each
//! stream's `XINFO STREAM` and `XINFO GROUPS`, with problems counted and
//! vanished streams set aside (an event, not an error).

use crate::backend::Reply;
use crate::backend::reply::{self, GroupInfo, StreamInfo};
use crate::probe::{ProbeContext, Problems};
use crate::snapshot::Name;
use crate::text;

/// One stream's XINFO, decoded.
#[derive(Clone, Debug)]
pub(super) struct Read {
    pub(super) info: StreamInfo,
    /// The groups watched.
    pub(super) groups: Vec<GroupInfo>,
    /// Groups excluded by the group filters: never read further, but their
    /// positions still inform the lag estimator.
    pub(super) unwatched: Vec<GroupInfo>,
    /// Groups not watched for `max_groups_per_stream`: beyond it among the
    /// watched ones, or beyond the rows the reply kept.
    pub(super) dropped: u64,
}

/// The server time from a `TIME` reply, when it came.
pub(super) fn time_of(ctx: &ProbeContext, r: &Reply, problems: &mut Problems) -> Option<u64> {
    match r {
        Ok(v) => match reply::time_ms(v) {
            Ok(ms) => Some(ms),
            Err(e) => {
                problems.add(ctx, e);
                None
            }
        },
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
) -> Option<Read> {
    let info = match info {
        Ok(v) => match reply::stream_info(v).inspect(|_| problems.answered()) {
            Ok(i) => i,
            Err(e) => {
                problems.add(ctx, e);
                return None;
            }
        },
        Err(e) if e.kind.is_vanished() => {
            // Deleted since discovery: it leaves the watch list now (an
            // event, not an error); discovery finds it again if it returns.
            tracing::debug!(redis_target = %ctx.target.name, stream = %text::printable(&**key), "stream vanished");
            vanished.push(key.clone());
            return None;
        }
        Err(e) => {
            // Not a stream, or not ours to read: counted by the client
            // (errors_total); the stream leaves the output. Logged at debug
            // so a permanent condition cannot flood the log every poll.
            problems.refused(e);
            tracing::debug!(redis_target = %ctx.target.name, stream = %text::printable(&**key), error = %e, "stream skipped");
            return None;
        }
    };
    let settings = ctx.config.streams.for_stream(key);
    let groups = match groups {
        Ok(v) => match reply::groups(v) {
            Ok(g) => g,
            Err(e) => {
                problems.add(ctx, e);
                return None;
            }
        },
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
    Some(Read {
        info,
        groups,
        unwatched,
        dropped,
    })
}
