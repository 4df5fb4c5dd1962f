//! One poll of some streams ([`poll_streams`]): node by node, batch after
//! batch, each batch's round trips and then the fold of its streams into
//! snapshot entries, within the target's group allotment and walk budget.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::allotment::Allotment;
use super::batch::{Batch, ToRead};
use super::group_fold::PollKind;
use super::quiet;
use super::stream_entry::{Poll, build_stream};
use crate::lag::Arithmetic;
use crate::loss;
use crate::probe::context::{ProbeContext, ProbeError, Problems};
use crate::probe::memory::Coverage;
use crate::snapshot::{Name, StreamState};

/// One poll of some streams: which kind, and the data generation it read.
#[derive(Clone, Copy)]
pub(super) struct Polling {
    pub(super) generation: u64,
    pub(super) kind: PollKind,
}

/// Reads `watched` (per node, per batch) and builds their snapshot entries,
/// feeding the group memories and ledgers on the way. Streams found gone
/// are added to `vanished`.
pub(super) async fn poll_streams(
    ctx: &ProbeContext,
    polling: Polling,
    watched: &[Name],
    problems: &mut Problems,
    vanished: &mut Vec<Name>,
) -> Result<BTreeMap<Name, Arc<StreamState>>, ProbeError> {
    let Polling { generation, kind } = polling;
    let limits = &ctx.config.limits;
    let mut walk_budget = walk_budget(limits.commands_per_second, ctx.config.schedule.stream);
    let (arithmetic_by_node, counter_by_node, mut allot) = {
        let state = ctx.state();
        let allot = Allotment::for_poll(
            &state.snapshot.streams,
            watched,
            kind == PollKind::Extra,
            ctx.config.metrics.max_groups_per_stream,
            ctx.target.max_groups,
        );
        (
            state.arithmetic_by_node.clone(),
            state.read_counter_by_node.clone(),
            allot,
        )
    };
    // TIME and both XINFO of every stream of a batch go in one pipeline, so
    // a stream's figures are never read in two round trips with writes in
    // between (entries-added from one moment, entries-read from another).
    let per_batch = (limits.pipeline_size.saturating_sub(1) / 2).max(1);
    let mut fresh: BTreeMap<Name, Arc<StreamState>> = BTreeMap::new();
    let by_node = ctx.client.partition(watched.iter().map(|n| &**n)).await?;
    for (node, mine) in by_node {
        // Each node's own version: a cluster in a rolling upgrade runs two.
        let arithmetic = arithmetic_by_node
            .get(&node)
            .copied()
            .unwrap_or(Arithmetic::Miscounting);
        let counter = counter_by_node.get(&node).copied().unwrap_or_default();
        // The watched names' allocations are kept, not copied per poll.
        let names: Vec<&Name> = mine.iter().map(|&i| &watched[i]).collect();
        // Read before the XINFO: a gap after it makes the reads kept now
        // stand for nothing.
        let coverage = Coverage {
            events: ctx.client.stats().keyspace_coverage(),
            tracking: ctx.client.tracking_mark(&node).await,
        };
        let since = ctx.state().quiet.begin();
        let (stand, to_read) = quiet::check(ctx, &node, coverage, &names).await?;
        let standing: HashSet<Name> = stand.iter().map(|(n, _)| n.clone()).collect();
        // The reads that stand join the first batch: they cost no command,
        // and a batch of them alone would cost a TIME.
        let mut stand = Some(stand);
        let mut batches: Vec<&[&Name]> = to_read.chunks(per_batch).collect();
        if batches.is_empty() && !standing.is_empty() {
            batches.push(&[]);
        }
        for names in batches {
            let server = (arithmetic, counter);
            let events_seen = ctx.state().outside_events;
            let read_at = ctx.client.removals().mark(&node);
            let to_read = ToRead {
                names,
                stand: stand.take().unwrap_or_default(),
                allot: &mut allot,
            };
            let mut batch = Batch::read(ctx, &node, server, to_read, problems, vanished).await?;
            batch.count_ranges(problems).await?;
            batch.sample_heads(problems).await?;
            batch.read_tails(problems).await?;
            batch.confirm(problems).await?;
            batch.walk(&mut walk_budget, problems).await?;
            let polled = batch.into_polled();
            let mut announced = announced(ctx, &node, read_at, &polled, &standing).await;
            let mut state = ctx.state();
            ctx.ensure_current(&state, generation)?;
            let run_id = state.run_ids.get(&node).cloned();
            let now = tokio::time::Instant::now();
            for (name, polled) in polled {
                if !standing.contains(&name) {
                    state
                        .quiet
                        .remember(&name, &polled.read, (since, coverage), now);
                }
                let outside = state.take_outside_mark(&name, events_seen);
                let poll = Poll {
                    kind,
                    run_id: run_id.as_ref(),
                    set_from_outside: outside,
                    announced: announced.remove(&name),
                };
                let stream = build_stream(ctx, &mut state, poll, &name, polled);
                fresh.insert(name, stream);
            }
        }
    }
    Ok(fresh)
}

/// What the keyevents announced of each stream the batch read (not of the
/// reads that stood for quiet streams: their figures are older), with the
/// window closed by a barrier on the node's subscription when a stream's
/// figures since its last poll leave to them what they cannot decide
/// ([`loss::events_may_decide`]): one `PING`
/// on the subscribed connection for the batch, and only then.
async fn announced(
    ctx: &ProbeContext,
    node: &crate::backend::NodeAddr,
    read_at: Option<loss::EventMark>,
    polled: &[(Name, super::batch::Polled)],
    standing: &HashSet<Name>,
) -> HashMap<Name, loss::Announced> {
    let Some(read_at) = read_at else {
        return HashMap::new();
    };
    let read = || polled.iter().filter(|(name, _)| !standing.contains(name));
    let unclear = {
        let state = ctx.state();
        read().any(|(name, p)| {
            state.snapshot.streams.get(name).is_some_and(|before| {
                loss::events_may_decide(&p.read.info, &before.info, &p.read.groups)
            })
        })
    };
    let barrier = if unclear {
        let timeout = ctx.config.limits.command_timeout;
        ctx.client.removals().barrier(node, timeout).await
    } else {
        None
    };
    read()
        .map(|(name, _)| {
            let announced = ctx
                .client
                .removals()
                .announced(node, name, read_at, barrier);
            (name.clone(), announced)
        })
        .collect()
}

/// Commands the estimator's walks may spend in one stream poll: a tenth of
/// what the rate limit allows over one stream interval, at least 200 so that
/// a short interval still walks, but never more than a fifth of the whole
/// interval's allowance: the walks must leave the poll itself, and the other
/// probes, room to keep their schedule (at 1 s and 500/s, 200 walks a poll
/// with Redis 6.2's counted lags stretched the stream poll to 3 s).
pub(in crate::probe) fn walk_budget(
    commands_per_second: u32,
    interval: std::time::Duration,
) -> usize {
    let allowed = (f64::from(commands_per_second) * interval.as_secs_f64()) as usize;
    (allowed / 10).max(200).min(allowed / 5).max(1)
}
