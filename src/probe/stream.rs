//! The stream probe, every 15 s by default: `TIME`, then `XINFO STREAM` and
//! `XINFO GROUPS` for each watched stream, pipelined per batch; then, only for
//! groups whose lag or lag age does not follow from XINFO, one bounded
//! `XRANGE`; only for lags that must be estimated, one bounded `XREVRANGE`
//! of the last entries and a few `XREVRANGE … COUNT 1` of single
//! milliseconds (see [`crate::lag`]); then `XINFO STREAM` of configured
//! dead-letter streams. It computes lag, lag seconds, trimmed-undelivered
//! entries and the group status, and rebuilds the stream part of the
//! snapshot, keeping what the other probes contributed to each group.
//!
//! The rooms: `batch` sends a batch's round trips and gathers what they
//! read, `decode` decodes its first one, `dead_letters` is the last step.
//! This file polls batch after batch and folds each stream, group by group,
//! into the snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    GroupMemory, ProbeContext, ProbeError, ProbeKind, Problems, TargetState, age_seconds, figures,
};
use crate::backend::Command;
use crate::backend::reply::{GroupInfo, StreamInfo};
use crate::cadence;
use crate::lag::{self, Arithmetic, LagFigure, UndeliveredSample};
use crate::loss;
use crate::snapshot::{GroupState, Groups, Name, StreamState};
use crate::status;
use crate::text;

mod batch;
mod dead_letters;
mod decode;
mod quiet;
use batch::{Batch, Polled, ToRead, observation, undelivered_bounds};
use dead_letters::dead_letters;
use decode::{Allotment, group_share};
pub(crate) use quiet::QuietReads;

/// Whether a poll is the probe's scheduled one or an extra poll of a few
/// streams that keyspace events asked for. Extra polls feed the loss ledgers
/// and the figures like any poll, but add no sample to the status window or
/// the trend: those count scheduled polls, and extra samples would shorten
/// the time the window covers (a burst of events must not turn a few seconds
/// of a stuck group into `stopped`). Their status is judged against the
/// window as the scheduled polls left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PollKind {
    /// Every watched stream, on the probe's schedule.
    Scheduled,
    /// The streams events named, merged into the snapshot.
    Extra,
}

/// Runs the stream probe.
///
/// # Errors
/// When the target cannot be reached or replies cannot be decoded.
pub async fn run(ctx: &ProbeContext) -> Result<(), ProbeError> {
    // One stream poll at a time per target: an extra poll applied in the
    // middle of a scheduled one would be overwritten by older figures.
    let _turn = ctx.stream_polls.lock().await;
    let (watched, generation) = {
        let state = ctx.state();
        (state.watched().to_vec(), state.generation)
    };
    let mut problems = Problems::default();
    let mut vanished: Vec<Name> = Vec::new();
    if watched.is_empty() {
        // Nothing to read, but the stream poll is the target's heartbeat:
        // a dead server must show as down within one poll.
        for node in ctx.client.nodes().await? {
            for r in ctx.client.execute(&node, &[Command::Ping]).await? {
                match r {
                    Ok(_) => problems.answered(),
                    Err(e) => problems.refused(&e),
                }
            }
        }
    }
    let polling = Polling {
        generation,
        kind: PollKind::Scheduled,
    };
    let mut fresh = poll_streams(ctx, polling, &watched, &mut problems, &mut vanished).await?;
    dead_letters(ctx, &mut fresh, &mut problems).await?;
    {
        let mut state = ctx.state();
        ctx.ensure_current(&state, generation)?;
        // Streams watched but not read (refused) keep their memory and
        // ledgers: a busy or loading server says nothing about them.
        state.unread_streams = watched
            .iter()
            .filter(|n| !fresh.contains_key(*n) && !vanished.contains(n))
            .cloned()
            .collect();
        state.snapshot.streams = Arc::new(fresh);
        if !vanished.is_empty() {
            state.forget_vanished_streams(&vanished);
        }
        state.prune_memory();
        state.prune_ledgers();
        state.pack_group_maps();
        state.settle_parked();
        state.status_changes.finish(&ctx.target.name);
    }
    problems.finish(ProbeKind::Stream)
}

/// Polls the watched streams among `names` now, as keyspace events asked,
/// and merges them into the snapshot: the other streams keep the entries
/// of their last poll. Dead-letter lengths wait for the scheduled poll.
///
/// # Errors
/// As [`run`].
pub async fn run_some(ctx: &ProbeContext, names: &[Name]) -> Result<(), ProbeError> {
    let _turn = ctx.stream_polls.lock().await;
    let (chosen, generation) = {
        let state = ctx.state();
        let chosen: Vec<Name> = state
            .watched()
            .iter()
            .filter(|w| names.contains(w))
            .cloned()
            .collect();
        (chosen, state.generation)
    };
    if chosen.is_empty() {
        return Ok(());
    }
    let mut problems = Problems::default();
    let mut vanished: Vec<Name> = Vec::new();
    let polling = Polling {
        generation,
        kind: PollKind::Extra,
    };
    let fresh = poll_streams(ctx, polling, &chosen, &mut problems, &mut vanished).await?;
    {
        let mut state = ctx.state();
        ctx.ensure_current(&state, generation)?;
        let streams = Arc::make_mut(&mut state.snapshot.streams);
        for name in &vanished {
            streams.remove(name);
        }
        streams.extend(fresh);
        if !vanished.is_empty() {
            state.forget_vanished_streams(&vanished);
            state.prune_memory();
        }
        state.pack_group_maps();
        state.status_changes.finish(&ctx.target.name);
    }
    problems.finish(ProbeKind::Stream)
}

/// One poll of some streams: which kind, and the data generation it read.
#[derive(Clone, Copy)]
struct Polling {
    generation: u64,
    kind: PollKind,
}

/// Reads `watched` (per node, per batch) and builds their snapshot entries,
/// feeding the group memories and ledgers on the way. Streams found gone
/// are added to `vanished`.
async fn poll_streams(
    ctx: &ProbeContext,
    polling: Polling,
    watched: &[Name],
    problems: &mut Problems,
    vanished: &mut Vec<Name>,
) -> Result<BTreeMap<Name, Arc<StreamState>>, ProbeError> {
    let Polling { generation, kind } = polling;
    let (arithmetic_by_node, counter_by_node, mut allot) = {
        let state = ctx.state();
        (
            state.arithmetic_by_node.clone(),
            state.read_counter_by_node.clone(),
            allotment(ctx, &state.snapshot.streams, watched, kind),
        )
    };
    let limits = &ctx.config.limits;
    // TIME and both XINFO of every stream of a batch go in one pipeline, so
    // a stream's figures are never read in two round trips with writes in
    // between (entries-added from one moment, entries-read from another).
    let per_batch = (limits.pipeline_size.saturating_sub(1) / 2).max(1);
    let mut fresh: BTreeMap<Name, Arc<StreamState>> = BTreeMap::new();
    let mut walk_budget = walk_budget(limits.commands_per_second, ctx.config.schedule.stream);
    let by_node = ctx.client.partition(watched.iter().map(|n| &**n)).await?;
    for (node, mine) in by_node {
        // Each node's own version: a cluster in a rolling upgrade runs two.
        let arithmetic = arithmetic_by_node
            .get(&node)
            .copied()
            .unwrap_or(Arithmetic::Miscounting);
        let counter = counter_by_node.get(&node).copied().unwrap_or_default();
        for batch in mine.chunks(per_batch) {
            // The watched names' allocations are kept, not copied per poll.
            let names: Vec<&Name> = batch.iter().map(|&i| &watched[i]).collect();
            let server = (arithmetic, counter);
            let events_seen = ctx.state().outside_events;
            // Read before the XINFO: a gap after it makes the reads kept
            // now stand for nothing.
            let coverage = ctx.client.stats().keyspace_coverage();
            let (stand, names) = quiet::check(ctx, &node, coverage, &names).await?;
            let standing: std::collections::HashSet<Name> =
                stand.iter().map(|(n, _)| n.clone()).collect();
            let to_read = ToRead {
                names: &names,
                stand,
                allot: &mut allot,
            };
            let mut batch = Batch::read(ctx, &node, server, to_read, problems, vanished).await?;
            batch.count_ranges(problems).await?;
            batch.sample_heads(limits.lag_exact_count, problems).await?;
            batch.read_tails(problems).await?;
            batch.confirm(problems).await?;
            batch.walk(&mut walk_budget, problems).await?;
            let polled = batch.into_polled();
            let mut state = ctx.state();
            ctx.ensure_current(&state, generation)?;
            let run_id = state.run_ids.get(&node).cloned();
            let now = tokio::time::Instant::now();
            for (name, polled) in polled {
                if !standing.contains(&name) {
                    state.quiet.remember(&name, &polled.read, coverage, now);
                }
                let outside = state.take_outside_mark(&name, events_seen);
                let poll = Poll {
                    kind,
                    run_id: run_id.as_ref(),
                    set_from_outside: outside,
                };
                let stream = build_stream(ctx, &mut state, poll, &name, polled);
                fresh.insert(name, stream);
            }
        }
    }
    Ok(fresh)
}

/// The groups a poll of `polled` may keep, under the target's `max_groups`:
/// each stream's share is worked out from what the streams wanted at their
/// last poll (a stream not polled yet wants nothing until it is), and an
/// extra poll leaves room for the groups the other streams keep.
fn allotment(
    ctx: &ProbeContext,
    last: &BTreeMap<Name, Arc<StreamState>>,
    polled: &[Name],
    kind: PollKind,
) -> Allotment {
    let wants = |s: &StreamState| {
        s.groups
            .len()
            .saturating_add(usize::try_from(s.groups_dropped).unwrap_or(usize::MAX))
    };
    let others = last
        .iter()
        .filter(|(name, _)| kind == PollKind::Extra && !polled.contains(name));
    let wanted = polled
        .iter()
        .filter_map(|name| last.get(name))
        .chain(others.map(|(_, s)| s))
        .map(|s| wants(s))
        .collect();
    let max_groups = ctx.target.max_groups;
    let share = group_share(wanted, ctx.config.metrics.max_groups_per_stream, max_groups);
    let kept_elsewhere: usize = match kind {
        PollKind::Scheduled => 0,
        PollKind::Extra => last
            .iter()
            .filter(|(name, _)| !polled.contains(name))
            .map(|(_, s)| s.groups.len())
            .sum(),
    };
    Allotment::new(share, max_groups.saturating_sub(kept_elsewhere))
}

/// Whether a stream's IDs are wall-clock milliseconds.
fn time_based(info: &StreamInfo, now_ms: Option<u64>) -> bool {
    let now = now_ms.unwrap_or(u64::MAX / 2);
    let lg = info.last_generated_id;
    if lg.is_zero() {
        return true;
    }
    lg.is_plausible_time(now) && info.first_entry_id.is_none_or(|f| f.is_plausible_time(now))
}

/// Points of a stream's generated-entries curve kept from earlier polls:
/// 16 × 24 bytes per stream, and the thinning keeps them where bursts were.
const ANCHORS_KEPT: usize = 16;

/// How long after the stream's first entry last moved it counts as trimmed
/// recently: the hour of the shipped rules' `delta(...first_entry...[1h])`.
const TRIMMED_RECENTLY_MS: u64 = 3_600_000;

/// Folds one polled stream into its snapshot entry: each watched group's
/// lag, ledger, trend and status, then the stream's own figures. The
/// previous entry is kept when nothing changed.
/// What a stream's poll was: scheduled or extra, from which server, and
/// whether an event said the stream was set from outside since the last.
#[derive(Clone, Copy)]
struct Poll<'a> {
    kind: PollKind,
    run_id: Option<&'a Arc<str>>,
    set_from_outside: bool,
}

fn build_stream(
    ctx: &ProbeContext,
    state: &mut TargetState,
    poll: Poll<'_>,
    name: &Name,
    polled: Polled,
) -> Arc<StreamState> {
    let Poll {
        kind,
        run_id,
        set_from_outside,
    } = poll;
    let Polled {
        read,
        now_ms,
        arithmetic,
        ends,
        anchors,
        advanced_over,
        samples,
        counted,
        changed,
        counter,
    } = polled;
    let settings = ctx.config.streams.for_stream(name);
    let time_ids = time_based(&read.info, now_ms);
    if !time_ids && state.non_time_logged.insert(name.clone()) {
        tracing::info!(
            redis_target = %ctx.target.name,
            stream = %text::printable(&**name),
            last_id = %read.info.last_generated_id,
            "stream IDs are not wall-clock time; ages of this stream are not exported"
        );
    }
    let previous = state.snapshot.streams.get(name).cloned();
    lag::remember_anchor(
        state.anchors.entry(name.clone()).or_default(),
        &read.info,
        ANCHORS_KEPT,
    );
    let fold = GroupFold {
        ctx,
        kind,
        name,
        info: &read.info,
        now_ms,
        ages_at: if time_ids { now_ms } else { None },
        arithmetic,
        time_ids,
        previous: previous.as_deref(),
        evidence: lag::Evidence {
            ends: Some(&ends),
            anchors: &anchors,
        },
        status_settings: status::Settings {
            window: ctx.config.status_window,
            window_duration: ctx.config.schedule.stream * ctx.config.status_window as u32,
            max_delay: settings.max_delay,
            read_every: settings.read_every,
            // Each group's own, from its cadence (see `GroupFold::judge`).
            patience: ctx.config.schedule.stream * ctx.config.status_window as u32,
            pel_patience: ctx.config.schedule.stream * ctx.config.status_window as u32,
        },
        hold_ms: ctx.config.data_loss_hold.as_millis() as u64,
        counter,
        // After an outage the ledgers wait until the server is known to be
        // the same one (see `TargetState::verify_ledgers`): then this poll
        // is compared with the last one before the outage.
        feed_ledger: !state.ledgers_unverified,
        run_id,
        set_from_outside,
        acked_trimming: settings.trimming == crate::config::Trimming::Acked,
    };
    let mut groups = Vec::with_capacity(read.groups.len());
    for (gi, group) in read.groups.iter().enumerate() {
        let found = Found {
            advanced_over: advanced_over.get(gi).copied().flatten(),
            sample: samples.get(gi).and_then(Option::as_ref),
            counted: counted.get(gi).copied().flatten(),
            changed: changed.get(gi).copied().unwrap_or(true),
        };
        groups.push(fold.group(state, group, found));
    }
    if !ends.is_empty() {
        state.remember_walked(name, lag::Walked::keep(ends, &read.info));
    }
    let fresh = StreamState {
        info: figures::stream(&read.info),
        time_based_ids: time_ids,
        dead_letter: previous.as_ref().and_then(|p| p.dead_letter),
        settings,
        groups: Groups::new(groups),
        groups_dropped: read.dropped,
    };
    reuse(previous.as_ref(), fresh)
}

/// What every watched group of one polled stream is folded with.
struct GroupFold<'p> {
    ctx: &'p ProbeContext,
    kind: PollKind,
    name: &'p Name,
    info: &'p StreamInfo,
    now_ms: Option<u64>,
    /// The server time ages are taken at: none when the stream's IDs are
    /// not wall-clock time.
    ages_at: Option<u64>,
    arithmetic: Arithmetic,
    /// Whether the stream's IDs are wall-clock time.
    time_ids: bool,
    /// The stream's entry in the snapshot before this poll.
    previous: Option<&'p StreamState>,
    evidence: lag::Evidence<'p>,
    status_settings: status::Settings,
    /// How long a counted loss stays recent for the status.
    hold_ms: u64,
    /// Whether this poll is compared with the ledgers' last one.
    feed_ledger: bool,
    /// How the node's entries-read counts.
    counter: loss::ReadCounter,
    /// The node's server, as `INFO` last said.
    run_id: Option<&'p Arc<str>>,
    /// An event said the stream was set from outside since its last poll.
    set_from_outside: bool,
    /// The stream is trimmed only with `ACKED`: trimming never comes for a
    /// group's unread entries, so there is no margin and no overtake.
    acked_trimming: bool,
}

/// What the round trips after XINFO learnt of one group.
#[derive(Clone, Copy)]
struct Found<'p> {
    advanced_over: Option<u64>,
    sample: Option<&'p UndeliveredSample>,
    counted: Option<loss::RangeCount>,
    /// The stream or the group changed between XINFO and these counts.
    changed: bool,
}

/// Where a group stands in time, and where it is heading.
struct Outlook {
    lag_seconds: Option<f64>,
    retention_margin: Option<f64>,
    /// The stream's first entry moved within the last hour.
    trimmed_recently: bool,
    overtake_eta: Option<f64>,
    drain_eta: Option<f64>,
}

impl GroupFold<'_> {
    /// Folds one group's poll into its memory and ledger, and gives its
    /// entry in the snapshot (under the name that keys it).
    fn group(
        &self,
        state: &mut TargetState,
        group: &GroupInfo,
        found: Found<'_>,
    ) -> (Name, GroupState) {
        // The name lives in the map key (the previous poll's, when there is
        // one), not a second time in the group's info.
        let gname: Name = self
            .previous
            .and_then(|p| p.groups.get_key_value(group.name.as_slice()))
            .map_or_else(|| Arc::from(group.name.as_slice()), |(k, _)| k.clone());
        let key = (self.name.clone(), gname.clone());
        let stuck_evidence = stuck_evidence(&state.snapshot, &key);
        let (memory, ledger) = state.group_entries(&key);
        let figure = self.lag_figure(memory, group, &gname, found);
        if self.feed_ledger {
            let undelivered =
                undelivered_bounds(self.info, group, &figure, found.sample, found.changed);
            let seen = loss::Observation {
                set_from_outside: self.set_from_outside,
                ..observation(self.info, group, self.now_ms, undelivered, self.counter)
            };
            ledger.follow_server(self.run_id);
            ledger.observe(&seen, found.counted);
        }
        let outlook = self.outlook(memory, ledger, &figure);
        let judged = self.judge(memory, ledger, group, &figure, &outlook, stuck_evidence);
        // Without the server's clock nothing is learned; a configured
        // read_every still applies.
        let rhythm = judged.map_or(
            Rhythm {
                learned: None,
                read_every: self.status_settings.read_every,
            },
            |j| j.rhythm,
        );
        let judged = judged.map(|j| j.verdict);
        let before = self.previous.and_then(|p| p.groups.get(&gname));
        let fresh = GroupState {
            lag: figure.lag,
            lag_estimated: figure.estimated(),
            lag_seconds: outlook.lag_seconds,
            trimmed_undelivered: figure.trimmed_undelivered,
            lost: ledger.lost(),
            lost_at: ledger.loss_times(),
            possibly_lost: ledger.possibly_lost(),
            loss_unproven: ledger.unproven(),
            rewinds: ledger.rewinds(),
            retention_margin: outlook.retention_margin,
            overtake_eta: outlook.overtake_eta,
            drain_eta: outlook.drain_eta,
            read_interval: rhythm.learned.map(|d| d.as_secs_f64()),
            read_every: rhythm.read_every.map(|d| d.as_secs_f64()),
            ahead_of_stream: figure.ahead_of_stream,
            status: judged
                .map(|v| v.status)
                .or_else(|| before.and_then(|b| b.status)),
            status_basis: judged
                .map(|v| v.basis)
                .or_else(|| before.and_then(|b| b.status_basis)),
            status_reason: judged
                .map(|v| v.reason)
                .or_else(|| before.and_then(|b| b.status_reason)),
            // The pending summary's oldest ID is aged by this poll's clock
            // while entries are pending (see
            // `TargetSnapshot::oldest_pending_age`).
            pending_aged_at_ms: self.ages_at.filter(|_| group.pending > 0),
            info: figures::group(group),
        };
        let (target, was) = (&self.ctx.target.name, before.and_then(|b| b.status));
        state
            .status_changes
            .record(target, self.name, &gname, was, fresh.status);
        (gname, fresh)
    }

    /// The group's lag, from this poll and what the last one proved; its
    /// trail and its last progress move on with it.
    fn lag_figure(
        &self,
        memory: &mut GroupMemory,
        group: &GroupInfo,
        gname: &Name,
        found: Found<'_>,
    ) -> LagFigure {
        let reading = lag::Reading {
            stream: self.info,
            group,
            arithmetic: self.arithmetic,
            previous: memory.lag_trail.as_ref(),
            advanced_over: found.advanced_over,
        };
        let figure = reading.compute(found.sample, &self.evidence);
        // Liveness by progress: whatever the consumers' idle and inactive
        // fields say, a group that moved was read.
        let progressed = memory.lag_trail.as_ref().is_some_and(|before| {
            group.last_delivered_id > before.last_delivered
                || matches!((group.entries_read, before.entries_read), (Some(now), Some(then)) if now > then)
        });
        if progressed {
            memory.last_progress_at_ms = self.now_ms.or(memory.last_progress_at_ms);
        }
        memory.lag_trail = Some(reading.trail(&figure));
        let info = self.info;
        tracing::trace!(
            redis_target = %self.ctx.target.name,
            stream = %text::printable(&**self.name),
            group = %text::printable(&**gname),
            added = ?info.entries_added,
            length = info.length,
            first = ?info.first_entry_id,
            last = ?info.last_entry_id,
            max_deleted = ?info.max_deleted_entry_id,
            last_delivered = %group.last_delivered_id,
            entries_read = ?group.entries_read,
            reported = ?group.lag,
            lag = ?figure.lag,
            method = ?figure.method,
            unread_gone = ?figure.unread_gone,
            "lag figure"
        );
        figure
    }

    /// Lag seconds, and where the group is heading: the trimming edge's
    /// margin and the ETAs from the recent polls (crate::trend), which a
    /// rewind starts over and only scheduled polls extend.
    fn outlook(
        &self,
        memory: &mut GroupMemory,
        ledger: &loss::Ledger,
        figure: &LagFigure,
    ) -> Outlook {
        let lag_seconds =
            self.ages_at
                .and_then(|now| match (figure.lag, figure.first_undelivered) {
                    (_, Some(first)) => Some(age_seconds(now, first.ms)),
                    (Some(0), None) => Some(0.0),
                    _ => None,
                });
        let first_entry = self.info.first_entry_id;
        // The margin measures how far trimming is from unread entries. Where
        // what removes the head waits for the group, a margin says nothing
        // of a threat: a worker deleting what it processed moves the head
        // by deletions (the stream's max-deleted-entry-id lies between the
        // last poll's first entry and this one's), and a retention job trimming to the group's
        // position or ACKED trimming leaves its first undelivered entry the
        // stream's first without removing any it had not read. There a
        // margin would extrapolate into an overtake that never comes; a loss
        // the ledger proves keeps it (0: trimming reached unread entries).
        if first_entry != memory.head {
            // The last deletion lies between the old head and the new one.
            memory.head_deleted = matches!(
                (self.info.max_deleted_entry_id, memory.head, first_entry),
                (Some(deleted), Some(before), Some(now)) if deleted >= before && deleted < now
            );
            if memory.head.is_some() {
                memory.head_moved_at_ms = self.now_ms.or(memory.head_moved_at_ms);
            }
            memory.head = first_entry;
        }
        let trimmed_recently = matches!(
            (self.now_ms, memory.head_moved_at_ms),
            (Some(now), Some(moved)) if now.saturating_sub(moved) < TRIMMED_RECENTLY_MS
        );
        let proven_now = self.now_ms.is_some_and(|at| ledger.lost_at(at));
        let edge_waits_for_group = !proven_now
            && (memory.head_deleted
                || (first_entry.is_some() && figure.first_undelivered == first_entry));
        let retention_margin = match (self.time_ids, figure.first_undelivered, first_entry) {
            _ if self.acked_trimming || edge_waits_for_group => None,
            (true, Some(undelivered), Some(first)) => {
                Some(undelivered.ms.saturating_sub(first.ms) as f64 / 1000.0)
            }
            _ => None,
        };
        if ledger.rewinds() != memory.rewinds_seen {
            memory.rewinds_seen = ledger.rewinds();
            memory.trend.clear();
        }
        // Entries retained before the group's first undelivered one.
        let ahead = figure
            .lag
            .filter(|_| figure.exact())
            .map(|lag| self.info.length.saturating_sub(lag));
        if let (Some(at), PollKind::Scheduled) = (self.now_ms, self.kind) {
            let first_entry_ms = first_entry.filter(|_| self.time_ids).map(|id| id.ms);
            memory
                .trend
                .push(at, retention_margin, first_entry_ms, figure.lag, ahead);
        }
        Outlook {
            lag_seconds,
            retention_margin,
            trimmed_recently,
            overtake_eta: retention_margin.and_then(|_| memory.trend.overtake_eta()),
            drain_eta: memory.trend.drain_eta(),
        }
    }

    /// The group's status against its window, which a scheduled poll's
    /// sample joins first; none while the server's clock is unknown.
    fn judge(
        &self,
        memory: &mut GroupMemory,
        ledger: &loss::Ledger,
        group: &GroupInfo,
        figure: &LagFigure,
        outlook: &Outlook,
        stuck: Option<status::Stuck>,
    ) -> Option<Judged> {
        let at_ms = self.now_ms?;
        let sample = status::Sample {
            at_ms,
            lag: figure.lag,
            lag_seconds: outlook.lag_seconds,
            last_delivered_id: group.last_delivered_id,
            last_generated_id: self.info.last_generated_id,
            pending: group.pending,
            consumers: group.consumers,
            loss_now: ledger.lost_at(at_ms),
            gone_ahead: if self.feed_ledger {
                ledger.gone_unread()
            } else {
                0
            },
            recent_loss: ledger.recent_loss(at_ms, self.hold_ms),
            oldest_pending_id: memory.oldest_pending_id,
            last_read_at_ms: memory.last_read_at_ms.max(memory.last_progress_at_ms),
            stuck,
            retention_margin: outlook.retention_margin,
            trimmed_recently: outlook.trimmed_recently,
            overtake_eta: outlook.overtake_eta,
        };
        if self.kind == PollKind::Scheduled {
            if self.set_from_outside {
                memory.cadence.interrupt();
            }
            memory.cadence.observe(cadence::Seen {
                at_ms,
                last_read_ms: sample.last_read_at_ms,
                last_generated_id: self.info.last_generated_id,
                waiting: sample.undelivered(),
            });
            memory.window.push(&sample);
        }
        let window = self.status_settings.window_duration;
        let learned = memory.cadence.interval(at_ms);
        let patience = cadence::patience(learned, self.ctx.config.schedule.stream, window);
        let read_every = self
            .status_settings
            .read_every
            .or_else(|| cadence::reads_in_runs(learned, window));
        let settings = status::Settings {
            read_every,
            patience,
            pel_patience: cadence::pel_patience(patience, memory.holds.value(at_ms), window),
            ..self.status_settings
        };
        Some(Judged {
            verdict: status::verdict(&memory.window, &sample, &settings),
            rhythm: Rhythm {
                learned,
                read_every,
            },
        })
    }
}

/// A group's verdict, and the rhythm it was judged by.
#[derive(Clone, Copy, Debug)]
struct Judged {
    verdict: status::Verdict,
    rhythm: Rhythm,
}

/// The rhythm a group is judged by: its learned cadence, and the
/// `read_every` that applies (configured, or learned for a group that reads
/// in runs).
#[derive(Clone, Copy, Debug)]
struct Rhythm {
    learned: Option<std::time::Duration>,
    read_every: Option<std::time::Duration>,
}

/// What the slow probes' latest results show stuck in the group, when
/// anything: poison or ghost entries in its PEL (the last scan, or the
/// pending summary's look at its oldest entries), or entries held by
/// consumers inactive past their limit. Poison first: it explains the rest.
fn stuck_evidence(
    snapshot: &crate::snapshot::TargetSnapshot,
    key: &(Name, Name),
) -> Option<status::Stuck> {
    let scan = snapshot.scans.get(key).and_then(|s| s.last.as_deref());
    let poison = scan.is_some_and(|scan| scan.poison > 0)
        || snapshot.head_poison.get(key).is_some_and(|&n| n > 0);
    let ghost = scan.is_some_and(|scan| scan.ghost > 0);
    let orphaned = snapshot.consumers.get(key).is_some_and(|c| c.orphaned > 0);
    [
        (poison, status::Stuck::Poison),
        (ghost, status::Stuck::Ghost),
        (orphaned, status::Stuck::Orphaned),
    ]
    .into_iter()
    .find_map(|(seen, stuck)| seen.then_some(stuck))
}

/// Commands the estimator's walks may spend in one stream poll: a tenth of
/// what the rate limit allows over one stream interval, at least 200 so that
/// a short interval still walks, but never more than a fifth of the whole
/// interval's allowance: the walks must leave the poll itself, and the other
/// probes, room to keep their schedule (at 1 s and 500/s, 200 walks a poll
/// with Redis 6.2's counted lags stretched the stream poll to 3 s).
pub(super) fn walk_budget(commands_per_second: u32, interval: std::time::Duration) -> usize {
    let allowed = (f64::from(commands_per_second) * interval.as_secs_f64()) as usize;
    (allowed / 10).max(200).min(allowed / 5).max(1)
}

/// The previous poll's `Arc` when nothing changed, so quiet streams cost no
/// new allocation per poll (and snapshots share them).
fn reuse<T: PartialEq>(previous: Option<&Arc<T>>, fresh: T) -> Arc<T> {
    match previous {
        Some(p) if **p == fresh => p.clone(),
        _ => Arc::new(fresh),
    }
}
