//! The stream probe, every 15 s by default: `TIME`, then `XINFO STREAM` and
//! `XINFO GROUPS` for each watched stream, pipelined per batch; then, only for
//! groups whose lag or lag age does not follow from XINFO, one bounded
//! `XRANGE`; only for lags that must be estimated, one bounded `XREVRANGE`
//! of the last entries and a few `XREVRANGE … COUNT 1` of single
//! milliseconds (see [`crate::lag`]); then `XINFO STREAM` of configured
//! dead-letter streams. It computes lag, lag seconds, trimmed-undelivered
//! entries and the group status, and rebuilds the stream part of the
//! snapshot, keeping what the other probes contributed to each group.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{ProbeContext, ProbeError, ProbeKind, Problems, age_seconds, figures};
use crate::backend::reply::{self, GroupInfo, StreamInfo};
use crate::backend::{Command, RangeEnd, RangeStart};
use crate::lag::{self, Arithmetic, MsEnds, UndeliveredSample};
use crate::loss;
use crate::snapshot::{GroupState, Groups, Name, StreamState};
use crate::vocab::StreamId;
use crate::{status, text};

mod dead_letters;
mod decode;
use dead_letters::dead_letters;
use decode::{Read, decode_stream, time_of};

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
        (state.watched.clone(), state.generation)
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
            .watched
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
    let arithmetic_by_node = ctx.state().arithmetic_by_node.clone();
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
        for batch in mine.chunks(per_batch) {
            // The watched names' allocations are kept, not copied per poll.
            let batch: Vec<&Name> = batch.iter().map(|&i| &watched[i]).collect();
            let mut cmds = Vec::with_capacity(1 + batch.len() * 2);
            cmds.push(Command::Time);
            for key in &batch {
                cmds.push(Command::XinfoStream { key: key.to_vec() });
                cmds.push(Command::XinfoGroups { key: key.to_vec() });
            }
            let replies = ctx.client.execute_in_one_trip(&node, &cmds).await?;
            let now_ms = time_of(ctx, &replies[0], problems);
            let mut reads: Vec<(Name, Read)> = Vec::with_capacity(batch.len());
            for (i, key) in batch.iter().enumerate() {
                if let Some(read) = decode_stream(
                    ctx,
                    key,
                    &replies[1 + 2 * i],
                    &replies[2 + 2 * i],
                    problems,
                    vanished,
                ) {
                    reads.push(((*key).clone(), read));
                }
            }
            // Second round trip: first undelivered entries where needed.
            let (trails, anchors): (Vec<Vec<Option<lag::Trail>>>, Vec<Vec<lag::Anchor>>) = {
                let state = ctx.state();
                reads
                    .iter()
                    .map(|(name, read)| {
                        let trails = read
                            .groups
                            .iter()
                            .map(|g| {
                                state
                                    .groups
                                    .get(&(name.clone(), Name::from(g.name.as_slice())))
                                    .and_then(|m| m.lag_trail)
                            })
                            .collect();
                        let earlier = state.anchors.get(name).map_or(&[][..], |h| h.as_slice());
                        let anchors = if read.unwatched.is_empty() {
                            lag::stream_anchors(&read.info, &read.groups, arithmetic, earlier)
                        } else {
                            let all: Vec<GroupInfo> =
                                read.groups.iter().chain(&read.unwatched).cloned().collect();
                            lag::stream_anchors(&read.info, &all, arithmetic, earlier)
                        };
                        (trails, anchors)
                    })
                    .unzip()
            };
            let reading = |si: usize, gi: usize, advanced: &HashMap<(usize, usize), u64>| {
                let read = &reads[si].1;
                lag::Reading {
                    stream: &read.info,
                    group: &read.groups[gi],
                    arithmetic,
                    previous: trails[si][gi].as_ref(),
                    advanced_over: advanced.get(&(si, gi)).copied(),
                }
            };
            // Ranges the groups advanced over with entries removed, whose
            // survivors prove a loss (see crate::loss).
            let ranges: Vec<((usize, usize), [Command; 2])> = {
                let state = ctx.state();
                let mut ranges = Vec::new();
                for (si, (name, read)) in reads.iter().enumerate() {
                    for (gi, group) in read.groups.iter().enumerate() {
                        let key = (name.clone(), Name::from(group.name.as_slice()));
                        let Some(ledger) = state.ledger_to_feed(&key) else {
                            continue;
                        };
                        let Some((from, to)) =
                            ledger.range_to_count(&observation(&read.info, group, now_ms, None))
                        else {
                            continue;
                        };
                        // The entries of the range that exist, and the
                        // group's pending ones there (all pending IDs are at
                        // or before its position): a pending entry that no
                        // longer exists was delivered before it was removed.
                        ranges.push((
                            (si, gi),
                            [
                                Command::Xrange {
                                    key: name.to_vec(),
                                    start: RangeStart::From(from),
                                    end: RangeEnd::To(to),
                                    count: loss::RANGE_COUNT_CAP + 1,
                                },
                                Command::XpendingRange {
                                    key: name.to_vec(),
                                    group: group.name.clone(),
                                    start: RangeStart::From(from),
                                    count: loss::RANGE_COUNT_CAP + 1,
                                },
                            ],
                        ));
                    }
                }
                ranges
            };
            // Ranges groups moved over since an earlier poll proved unread
            // entries gone (see lag::Reading::advance_to_count).
            let no_counts = HashMap::new();
            let advances: Vec<((usize, usize), Command)> = reads
                .iter()
                .enumerate()
                .flat_map(|(si, (name, read))| {
                    let reading = &reading;
                    let no_counts = &no_counts;
                    (0..read.groups.len()).filter_map(move |gi| {
                        let (from, to) = reading(si, gi, no_counts).advance_to_count()?;
                        Some((
                            (si, gi),
                            Command::Xrange {
                                key: name.to_vec(),
                                start: RangeStart::From(from),
                                end: RangeEnd::To(to),
                                count: loss::RANGE_COUNT_CAP + 1,
                            },
                        ))
                    })
                })
                .collect();
            let mut counted: HashMap<(usize, usize), loss::RangeCount> = HashMap::new();
            let mut advanced: HashMap<(usize, usize), u64> = HashMap::new();
            let mut samples: HashMap<(usize, usize), UndeliveredSample> = HashMap::new();
            if !ranges.is_empty() || !advances.is_empty() {
                let (keys, pairs): (Vec<_>, Vec<_>) = ranges.into_iter().unzip();
                let (advance_keys, advance_cmds): (Vec<_>, Vec<_>) = advances.into_iter().unzip();
                let mut cmds: Vec<Command> = pairs.into_iter().flatten().collect();
                cmds.extend(advance_cmds);
                let replies = ctx.client.execute(&node, &cmds).await?;
                let mut replies = replies.into_iter();
                for key in keys {
                    let (Some(range), Some(pending)) = (replies.next(), replies.next()) else {
                        break;
                    };
                    let count = range_count(ctx, range, pending, problems);
                    counted.insert(key, count);
                }
                for (key, r) in advance_keys.into_iter().zip(replies) {
                    match r {
                        Ok(v) => {
                            problems.answered();
                            match reply::range_ids(&v) {
                                Ok(ids) if ids.len() <= loss::RANGE_COUNT_CAP as usize => {
                                    advanced.insert(key, ids.len() as u64);
                                }
                                // Too many to count: the lag is read from the stream instead.
                                Ok(_) => {}
                                Err(e) => problems.add(ctx, e),
                            }
                        }
                        Err(e) => problems.refused(&e),
                    }
                }
            }
            let mut wanted = Vec::new();
            let mut xranges = Vec::new();
            for (si, (name, read)) in reads.iter().enumerate() {
                for (gi, group) in read.groups.iter().enumerate() {
                    let Some(count) =
                        reading(si, gi, &advanced).sample_request(limits.lag_exact_count)
                    else {
                        continue;
                    };
                    let Some(start) = group.last_delivered_id.successor() else {
                        continue;
                    };
                    wanted.push((si, gi, count));
                    xranges.push(Command::Xrange {
                        key: name.to_vec(),
                        start: RangeStart::From(start),
                        end: as_read(&read.info),
                        count,
                    });
                }
            }
            if !xranges.is_empty() {
                // With the counts, XINFO GROUPS again for the streams whose
                // lag is counted: a count is only as good as the group's
                // position it starts from, and a group that read on between
                // the two round trips (its consumers may delete what they
                // read) makes it no proof of what was lost.
                let mut recheck: Vec<usize> = wanted
                    .iter()
                    .filter(|&&(_, _, count)| count > 1)
                    .map(|&(si, _, _)| si)
                    .collect();
                recheck.sort_unstable();
                recheck.dedup();
                let mut cmds = xranges;
                cmds.extend(recheck.iter().map(|&si| Command::XinfoGroups {
                    key: reads[si].0.to_vec(),
                }));
                let mut replies = ctx.client.execute(&node, &cmds).await?;
                let rechecked = replies.split_off(wanted.len());
                let mut moved: std::collections::HashSet<(usize, usize)> = Default::default();
                for (&si, r) in recheck.iter().zip(rechecked) {
                    let now = match r {
                        Ok(v) => reply::groups(&v).ok(),
                        Err(e) => {
                            problems.refused(&e);
                            None
                        }
                    };
                    for (gi, before) in reads[si].1.groups.iter().enumerate() {
                        let same = now.as_ref().is_some_and(|groups| {
                            groups.iter().any(|g| {
                                g.name == before.name
                                    && g.last_delivered_id == before.last_delivered_id
                                    && g.entries_read == before.entries_read
                            })
                        });
                        if !same {
                            moved.insert((si, gi));
                        }
                    }
                }
                for ((si, gi, count), r) in wanted.into_iter().zip(replies) {
                    match r {
                        Ok(v) => {
                            problems.answered();
                            match reply::range_ids(&v) {
                                Ok(ids) => {
                                    let mut sample = UndeliveredSample::head(ids, count);
                                    sample.group_moved = count > 1 && moved.contains(&(si, gi));
                                    samples.insert((si, gi), sample);
                                }
                                Err(e) => problems.add(ctx, e),
                            }
                        }
                        Err(e) => problems.refused(&e),
                    }
                }
            }
            // Third round trip, only for lags to estimate: the last entries,
            // which count small lags exactly and narrow larger ones.
            let mut tails = Vec::new();
            let mut tail_cmds = Vec::new();
            for (&(si, gi), sample) in &samples {
                if let Some((start, count)) = reading(si, gi, &advanced).tail_request(sample) {
                    tails.push(((si, gi), count));
                    tail_cmds.push(Command::Xrevrange {
                        key: reads[si].0.to_vec(),
                        end: as_read(&reads[si].1.info),
                        start: RangeStart::From(start),
                        count,
                    });
                }
            }
            if !tail_cmds.is_empty() {
                let replies = ctx.client.execute(&node, &tail_cmds).await?;
                for ((key, count), r) in tails.into_iter().zip(replies) {
                    match r {
                        Ok(v) => {
                            problems.answered();
                            match reply::range_ids(&v) {
                                Ok(mut ids) => {
                                    if let Some(sample) = samples.get_mut(&key) {
                                        ids.reverse();
                                        sample.tail = ids;
                                        sample.tail_count = count;
                                    }
                                }
                                Err(e) => problems.add(ctx, e),
                            }
                        }
                        Err(e) => problems.refused(&e),
                    }
                }
            }
            // Then, for lags still to estimate, a walk over the milliseconds
            // around each group's position: one round trip per step, every
            // group's step in it.
            let mut ends: Vec<MsEnds> = vec![MsEnds::default(); reads.len()];
            let walks: Vec<((usize, usize), lag::Walk)> = samples
                .iter()
                .filter_map(|(&(si, gi), sample)| {
                    reading(si, gi, &advanced)
                        .walk(sample, &anchors[si])
                        .map(|w| ((si, gi), w))
                })
                .collect();
            // What earlier polls' walks read of these streams is skipped, so
            // the walks go on where the cap stopped them.
            if !walks.is_empty() {
                let mut state = ctx.state();
                for ((si, _), _) in &walks {
                    if let Some(walked) = state.take_walked(&reads[*si].0) {
                        ends[*si] = walked.recall(&reads[*si].1.info);
                    }
                }
            }
            for _ in 0..lag::WALK_ROUNDS {
                // Walks of one stream share what they learn, so a step that
                // two groups' walks both want is read once.
                let mut steps: Vec<(usize, lag::Step)> = Vec::new();
                for ((si, _), walk) in &walks {
                    let mine: Vec<lag::Step> = walk
                        .steps(&ends[*si])
                        .into_iter()
                        .filter(|st| !steps.contains(&(*si, *st)))
                        .collect();
                    if walk_budget < mine.len() {
                        continue;
                    }
                    walk_budget -= mine.len();
                    steps.extend(mine.into_iter().map(|st| (*si, st)));
                }
                if steps.is_empty() {
                    break;
                }
                let cmds: Vec<Command> = steps
                    .iter()
                    .map(|&(si, step)| walk_command(&reads[si].0, step))
                    .collect();
                let replies = ctx.client.execute(&node, &cmds).await?;
                let mut found: Vec<Vec<(lag::Step, Option<StreamId>)>> =
                    vec![Vec::new(); reads.len()];
                for ((si, step), r) in steps.into_iter().zip(replies) {
                    match r {
                        Ok(v) => {
                            problems.answered();
                            match reply::range_ids(&v) {
                                Ok(ids) => found[si].push((step, ids.first().copied())),
                                Err(e) => problems.add(ctx, e),
                            }
                        }
                        Err(e) => problems.refused(&e),
                    }
                }
                for (si, found) in found.iter().enumerate() {
                    lag::Walk::apply(found, &mut ends[si]);
                }
            }
            let mut state = ctx.state();
            ctx.ensure_current(&state, generation)?;
            let per_stream = reads.into_iter().zip(ends).zip(anchors);
            for (si, (((name, read), ends), anchors)) in per_stream.enumerate() {
                let advanced_over = (0..read.groups.len())
                    .map(|gi| advanced.get(&(si, gi)).copied())
                    .collect();
                let polled = Polled {
                    read,
                    now_ms,
                    arithmetic,
                    ends,
                    anchors,
                    advanced_over,
                };
                let stream = build_stream(
                    ctx,
                    &mut state,
                    kind,
                    &name,
                    polled,
                    |gi| samples.get(&(si, gi)),
                    |gi| counted.get(&(si, gi)).copied(),
                );
                fresh.insert(name, stream);
            }
        }
    }
    Ok(fresh)
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

/// One stream as this poll read it, with the estimator's probes.
struct Polled {
    read: Read,
    now_ms: Option<u64>,
    arithmetic: Arithmetic,
    ends: MsEnds,
    anchors: Vec<lag::Anchor>,
    /// Per group: the entries in the range it moved over, where counted.
    advanced_over: Vec<Option<u64>>,
}

/// Points of a stream's generated-entries curve kept from earlier polls:
/// 16 × 24 bytes per stream, and the thinning keeps them where bursts were.
const ANCHORS_KEPT: usize = 16;

fn build_stream<'s>(
    ctx: &ProbeContext,
    state: &mut super::TargetState,
    kind: PollKind,
    name: &Name,
    polled: Polled,
    sample_for: impl Fn(usize) -> Option<&'s UndeliveredSample>,
    range_for: impl Fn(usize) -> Option<loss::RangeCount>,
) -> Arc<StreamState> {
    let Polled {
        read,
        now_ms,
        arithmetic,
        ends,
        anchors,
        advanced_over,
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
    let status_settings = status::Settings {
        window: ctx.config.status_window,
        window_duration: ctx.config.schedule.stream * ctx.config.status_window as u32,
        max_delay: settings.max_delay,
        read_every: settings.read_every,
    };
    let hold_ms = ctx.config.data_loss_hold.as_millis() as u64;
    lag::remember_anchor(
        state.anchors.entry(name.clone()).or_default(),
        &read.info,
        ANCHORS_KEPT,
    );
    let evidence = lag::Evidence {
        ends: Some(&ends),
        anchors: &anchors,
    };
    // After an outage the ledgers wait until the server is known to be the
    // same one (see `TargetState::verify_ledgers`): then this poll is
    // compared with the last one before the outage.
    let feed_ledger = !state.ledgers_unverified;
    let mut groups = Vec::with_capacity(read.groups.len());
    for (gi, group) in read.groups.iter().enumerate() {
        // The name lives in the map key (the previous poll's, when there is
        // one), not a second time in the group's info.
        let gname: Name = previous
            .as_ref()
            .and_then(|p| p.groups.get_key_value(group.name.as_slice()))
            .map_or_else(|| Arc::from(group.name.as_slice()), |(k, _)| k.clone());
        let key = (name.clone(), gname.clone());
        let stuck_evidence = stuck_evidence(&state.snapshot, &key);
        let (memory, ledger) = state.group_entries(&key);
        let reading = lag::Reading {
            stream: &read.info,
            group,
            arithmetic,
            previous: memory.lag_trail.as_ref(),
            advanced_over: advanced_over.get(gi).copied().flatten(),
        };
        let figure = reading.compute(sample_for(gi), &evidence);
        // Liveness by progress: whatever the consumers' idle and inactive
        // fields say, a group that moved was read.
        let progressed = memory.lag_trail.as_ref().is_some_and(|before| {
            group.last_delivered_id > before.last_delivered
                || matches!((group.entries_read, before.entries_read), (Some(now), Some(then)) if now > then)
        });
        if progressed {
            memory.last_progress_at_ms = now_ms.or(memory.last_progress_at_ms);
        }
        memory.lag_trail = Some(reading.trail(&figure));
        tracing::trace!(
            redis_target = %ctx.target.name,
            stream = %text::printable(&**name),
            group = %text::printable(&*gname),
            added = ?read.info.entries_added,
            length = read.info.length,
            first = ?read.info.first_entry_id,
            last = ?read.info.last_entry_id,
            max_deleted = ?read.info.max_deleted_entry_id,
            last_delivered = %group.last_delivered_id,
            entries_read = ?group.entries_read,
            reported = ?group.lag,
            lag = ?figure.lag,
            method = ?figure.method,
            unread_gone = ?figure.unread_gone,
            "lag figure"
        );
        if feed_ledger {
            ledger.observe(
                &observation(&read.info, group, now_ms, figure.unread_gone),
                range_for(gi),
            );
        }
        let ages = if time_ids { now_ms } else { None };
        let lag_seconds = ages.and_then(|now| match (figure.lag, figure.first_undelivered) {
            (_, Some(first)) => Some(age_seconds(now, first.ms)),
            (Some(0), None) => Some(0.0),
            _ => None,
        });
        // Where the group is heading: the trimming edge's margin and the
        // ETAs from the recent polls (crate::trend).
        let retention_margin = match (time_ids, figure.first_undelivered, read.info.first_entry_id)
        {
            (true, Some(undelivered), Some(first)) => {
                Some(undelivered.ms.saturating_sub(first.ms) as f64 / 1000.0)
            }
            _ => None,
        };
        if ledger.rewinds() != memory.rewinds_seen {
            memory.rewinds_seen = ledger.rewinds();
            memory.trend.clear();
        }
        if let (Some(at), PollKind::Scheduled) = (now_ms, kind) {
            let first_entry_ms = read
                .info
                .first_entry_id
                .filter(|_| time_ids)
                .map(|id| id.ms);
            memory
                .trend
                .push(at, retention_margin, first_entry_ms, figure.lag);
        }
        let overtake_eta = retention_margin.and_then(|_| memory.trend.overtake_eta());
        let drain_eta = memory.trend.drain_eta();
        // The pending summary's oldest ID is aged by this poll's clock
        // while entries are pending (see `TargetSnapshot::oldest_pending_age`).
        let pending_aged_at_ms = ages.filter(|_| group.pending > 0);
        let judged = now_ms.map(|at_ms| {
            let sample = status::Sample {
                at_ms,
                lag: figure.lag,
                lag_seconds,
                last_delivered_id: group.last_delivered_id,
                last_generated_id: read.info.last_generated_id,
                pending: group.pending,
                consumers: group.consumers,
                trimmed_undelivered: figure.trimmed_undelivered,
                loss_now: ledger.lost_at(at_ms),
                recent_loss: ledger.recent_loss(at_ms, hold_ms),
                oldest_pending_id: memory.oldest_pending_id,
                last_read_at_ms: memory.last_read_at_ms.max(memory.last_progress_at_ms),
                stuck_evidence,
                retention_margin,
                overtake_eta,
            };
            if kind == PollKind::Scheduled {
                memory.window.push(&sample);
            }
            status::judge(&memory.window, &sample, &status_settings)
        });
        let before = previous.as_ref().and_then(|p| p.groups.get(&gname));
        let fresh = GroupState {
            lag: figure.lag,
            lag_estimated: figure.estimated(),
            lag_seconds,
            trimmed_undelivered: figure.trimmed_undelivered,
            lost: ledger.lost(),
            loss_unproven: ledger.unproven(),
            rewinds: ledger.rewinds(),
            retention_margin,
            overtake_eta,
            drain_eta,
            ahead_of_stream: figure.ahead_of_stream,
            status: judged
                .map(|(s, _)| s)
                .or_else(|| before.and_then(|b| b.status)),
            status_basis: judged
                .map(|(_, b)| b)
                .or_else(|| before.and_then(|b| b.status_basis)),
            pending_aged_at_ms,
            info: figures::group(group),
        };
        let (target, was) = (&ctx.target.name, before.and_then(|b| b.status));
        state
            .status_changes
            .record(target, name, &gname, was, fresh.status);
        groups.push((gname, fresh));
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
    };
    reuse(previous.as_ref(), fresh)
}

/// True when the slow probes' latest results show the group stuck: poison
/// or ghost entries in its PEL (the last scan, or the pending summary's look
/// at its oldest entries), or entries held by consumers inactive past
/// `consumer_inactive_after`.
fn stuck_evidence(snapshot: &crate::snapshot::TargetSnapshot, key: &(Name, Name)) -> bool {
    let scanned = snapshot
        .scans
        .get(key)
        .and_then(|s| s.last.as_deref())
        .is_some_and(|scan| scan.poison > 0 || scan.ghost > 0);
    let head_poison = snapshot.head_poison.get(key).is_some_and(|&n| n > 0);
    let orphaned = snapshot.consumers.get(key).is_some_and(|c| c.orphaned > 0);
    scanned || head_poison || orphaned
}

/// What the `XRANGE` and `XPENDING` of a range a group advanced over say:
/// its entries that exist, and its pending entries that do not.
fn range_count(
    ctx: &ProbeContext,
    range: crate::backend::Reply,
    pending: crate::backend::Reply,
    problems: &mut Problems,
) -> loss::RangeCount {
    let cap = loss::RANGE_COUNT_CAP as usize;
    let mut decoded = |r: crate::backend::Reply, ids: fn(&_) -> _| match r {
        Ok(v) => {
            problems.answered();
            match ids(&v) {
                Ok(ids) => Some(ids),
                Err(e) => {
                    problems.add(ctx, e);
                    None
                }
            }
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

/// What the loss ledger needs of one group's poll.
fn observation(
    info: &StreamInfo,
    group: &GroupInfo,
    at_ms: Option<u64>,
    unread_gone: Option<u64>,
) -> loss::Observation {
    loss::Observation {
        at_ms,
        last_delivered: group.last_delivered_id,
        entries_read: group.entries_read,
        first_entry: info.first_entry_id,
        max_deleted: info.max_deleted_entry_id,
        removed: info
            .entries_added
            .and_then(|added| added.checked_sub(info.length)),
        unread_gone,
    }
}

/// The end of the stream as XINFO read it. Entries counted after XINFO, in
/// a later round trip, must stop there: entries added meanwhile would make
/// the count larger than the lag Redis's counters describe, and a loss
/// figure (entries-added − entries-read − lag) that dips for one poll would
/// pass for a loss at the next.
fn as_read(info: &StreamInfo) -> RangeEnd {
    RangeEnd::To(info.last_entry_id.unwrap_or(info.last_generated_id))
}

/// Commands the estimator's walks may spend in one stream poll: a tenth of
/// what the rate limit allows over one stream interval, at least 200 so that
/// a short interval still walks, but never more than the whole interval's
/// allowance (a small `commands_per_second` would wait on its own walks).
pub(super) fn walk_budget(commands_per_second: u32, interval: std::time::Duration) -> usize {
    let allowed = (f64::from(commands_per_second) * interval.as_secs_f64()) as usize;
    (allowed / 10).max(200).min(allowed)
}

/// The command that reads one step of an estimator's walk.
fn walk_command(key: &Name, step: lag::Step) -> Command {
    let (from, to) = match step {
        lag::Step::Last { from, to } | lag::Step::First { from, to } => {
            (StreamId::new(from, 0), StreamId::new(to, u64::MAX))
        }
    };
    match step {
        lag::Step::Last { .. } => Command::Xrevrange {
            key: key.to_vec(),
            end: RangeEnd::To(to),
            start: RangeStart::From(from),
            count: 1,
        },
        lag::Step::First { .. } => Command::Xrange {
            key: key.to_vec(),
            start: RangeStart::From(from),
            end: RangeEnd::To(to),
            count: 1,
        },
    }
}

/// The previous poll's `Arc` when nothing changed, so quiet streams cost no
/// new allocation per poll (and snapshots share them).
fn reuse<T: PartialEq>(previous: Option<&Arc<T>>, fresh: T) -> Arc<T> {
    match previous {
        Some(p) if **p == fresh => p.clone(),
        _ => Arc::new(fresh),
    }
}
