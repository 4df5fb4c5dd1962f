//! Helpers the per-group probes share: what each group's `XINFO GROUPS` line
//! says it costs, ages, and the batched per-group round trips.

use super::context::{ProbeContext, ProbeError, Problems};
use super::state::TargetState;
use crate::config::Config;
use crate::snapshot::Name;
use crate::vocab::ProbeKind;

/// An idle group (consumers, nothing pending, nothing undelivered) is read
/// on one run in this many at most: its consumers' idle times grow, but
/// nothing an alert or the status needs can change without the stream
/// poll's line showing it (work, a consumer added or removed).
pub const IDLE_EVERY: u64 = 5;

/// The share of `commands_per_second` the reads of idle groups' consumers
/// may take: beyond it they are read more rarely than one run in
/// [`IDLE_EVERY`] (see [`idle_every`]), so that what the consumers probe
/// costs follows the groups with work, not the groups Redis holds.
pub const IDLE_SHARE: f64 = 0.05;

/// One run in how many an idle group's consumers are read, with `idle` idle
/// groups with consumers: [`IDLE_EVERY`], or more runs where
/// [`IDLE_SHARE`] of the budget over one consumers interval cannot read a
/// fifth of them (at 500 commands/s and 1 m, 1,500 groups a run: 100,000
/// idle groups are each read about once an hour).
pub fn idle_every(idle: usize, config: &Config) -> u64 {
    let interval = ProbeKind::interval(ProbeKind::Consumers, config).as_secs_f64();
    let per_run = (IDLE_SHARE * f64::from(config.limits.commands_per_second) * interval).max(1.0);
    ((idle as f64 / per_run).ceil() as u64).max(IDLE_EVERY)
}

/// What the stream poll's `XINFO GROUPS` line said about a group: the per-
/// group probes ask Redis only where it shows something to learn, and
/// record what it already tells (an empty PEL, no consumers) as known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupLine {
    /// Entries in the group's PEL.
    pub pending: u64,
    /// Consumers in the group.
    pub consumers: u64,
    /// Entries pending or not yet delivered (a lag that is not known to be 0
    /// counts as work: unknown is not none).
    pub work: bool,
}

/// What the per-group probes ask of a target's groups in steady state, at
/// the configured intervals: groups with work are asked every run, idle
/// groups with consumers have their consumers read one run in
/// [`idle_every`], and the rest cost nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GroupCost {
    /// Groups asked every run: pending entries, or consumers and undelivered
    /// entries.
    pub with_work: usize,
    /// Groups with consumers and nothing to do.
    pub idle_with_consumers: usize,
    /// One run in how many their consumers are read ([`idle_every`]).
    pub idle_every: u64,
    /// Groups that need no per-group command: nothing pending and no
    /// consumers (undelivered entries or not).
    pub nothing_to_ask: usize,
    /// Per-group commands per second (with the `TIME` of each batch).
    pub per_second: f64,
    /// What asking every group on every run would cost.
    pub every_group_per_second: f64,
}

impl GroupCost {
    /// The cost of `lines` under `config`'s schedule and limits. A PEL scan
    /// is counted at one page per `pending_page` entries; a group with
    /// pending entries costs two `XPENDING` a pending-summary run (the
    /// summary, then its oldest entries for the poison check).
    pub fn of(lines: &[GroupLine], config: &Config) -> GroupCost {
        let per_batch = config.limits.pipeline_size.saturating_sub(1).max(1) as f64;
        let page = f64::from(config.limits.pending_page.max(1));
        // Commands of a pipelined per-group run of `n` commands.
        let batched = |n: f64| {
            if n > 0.0 {
                n + (n / per_batch).ceil()
            } else {
                0.0
            }
        };
        let every = |kind: ProbeKind| ProbeKind::interval(kind, config).as_secs_f64().max(1e-3);
        let mut cost = GroupCost::default();
        let (mut summaries, mut consumer_reads, mut pages) = (0.0, 0.0, 0.0);
        let (mut all_pages, groups) = (0.0, lines.len() as f64);
        let idle = lines.iter().filter(|l| l.consumers > 0 && !l.work).count();
        cost.idle_every = idle_every(idle, config);
        for line in lines {
            let scan_pages = (line.pending as f64 / page).ceil().max(1.0);
            all_pages += scan_pages;
            if line.pending > 0 {
                summaries += 1.0;
                pages += scan_pages;
            }
            match (line.consumers > 0, line.work) {
                (true, true) => {
                    cost.with_work += 1;
                    consumer_reads += 1.0;
                }
                (true, false) => {
                    cost.idle_with_consumers += 1;
                    consumer_reads += 1.0 / cost.idle_every as f64;
                }
                // A PEL without consumers (they were deleted): its pages.
                (false, _) if line.pending > 0 => cost.with_work += 1,
                (false, _) => cost.nothing_to_ask += 1,
            }
        }
        cost.per_second = 2.0 * batched(summaries) / every(ProbeKind::PendingSummary)
            + batched(consumer_reads) / every(ProbeKind::Consumers)
            + pages / every(ProbeKind::PendingScan);
        cost.every_group_per_second = batched(groups) / every(ProbeKind::PendingSummary)
            + batched(groups) / every(ProbeKind::Consumers)
            + all_pages / every(ProbeKind::PendingScan);
        cost
    }
}

/// Every group in the snapshot with its [`GroupLine`].
pub fn group_lines(state: &TargetState) -> Vec<((Name, Name), GroupLine)> {
    state
        .snapshot
        .streams
        .iter()
        .flat_map(|(s, st)| {
            st.groups.iter().map(move |(g, gs)| {
                let line = GroupLine {
                    pending: gs.pending,
                    consumers: gs.consumers,
                    work: gs.pending > 0 || gs.lag != Some(0),
                };
                ((s.clone(), g.clone()), line)
            })
        })
        .collect()
}

/// Seconds between `now_ms` and `then_ms`, clamped at 0 (IDs can run ahead
/// of the clock).
pub fn age_seconds(now_ms: u64, then_ms: u64) -> f64 {
    now_ms.saturating_sub(then_ms) as f64 / 1000.0
}

/// Sends one command per `(stream, group)` pair, pipelined per node in
/// batches that start with `TIME`, decodes each reply with `decode`, and
/// hands each batch's server time and decoded replies to `apply`. A group
/// that vanished since the stream poll (`NOGROUP`) is skipped: the next
/// stream poll removes it; undecodable replies go to `problems`.
///
/// # Errors
/// When the target cannot be reached.
pub(crate) async fn per_group<T>(
    ctx: &ProbeContext,
    pairs: &[(Name, Name)],
    make: impl Fn(&Name, &Name) -> crate::backend::Command,
    decode: crate::backend::reply::Decoder<T>,
    problems: &mut Problems,
    mut apply: impl FnMut(Option<u64>, Vec<(&Name, &Name, T)>),
) -> Result<(), ProbeError> {
    use crate::backend::{Command, reply};
    let generation = ctx.generation();
    let by_node = ctx
        .client
        .partition(pairs.iter().map(|(s, _)| &**s))
        .await?;
    let per_batch = ctx.config.limits.pipeline_size.saturating_sub(1).max(1);
    for (node, mine) in by_node {
        for batch in mine.chunks(per_batch) {
            let batch: Vec<&(Name, Name)> = batch.iter().map(|&i| &pairs[i]).collect();
            let mut cmds = Vec::with_capacity(batch.len() + 1);
            cmds.push(Command::Time);
            cmds.extend(batch.iter().map(|(s, g)| make(s, g)));
            let mut replies = ctx.client.execute(&node, &cmds).await?;
            let time = replies.remove(0);
            let now_ms = time.ok().and_then(|v| reply::time_ms(&v).ok());
            let mut decoded = Vec::with_capacity(batch.len());
            for ((s, g), r) in batch.iter().map(|p| (&p.0, &p.1)).zip(replies) {
                match r {
                    Ok(v) => {
                        problems.answered();
                        if let Some(item) = problems.decoded(ctx, decode(&v)) {
                            decoded.push((s, g, item));
                        }
                    }
                    Err(e) => {
                        problems.refused(&e);
                        tracing::debug!(redis_target = %ctx.target.name, error = %e, "command refused")
                    }
                }
            }
            ctx.ensure_current_and_live(&ctx.state(), generation)?;
            apply(now_ms, decoded);
        }
    }
    Ok(())
}
