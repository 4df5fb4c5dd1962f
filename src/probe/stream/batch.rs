//! The stream probe's round trips for one batch of streams on one node:
//! `TIME` and both `XINFO` of every stream in one pipeline; then, each only
//! when some group needs it, the ranges the loss ledgers and the groups'
//! advances ask counted (`XRANGE`, `XPENDING`), the first undelivered
//! entries (`XRANGE`, with `XINFO GROUPS` again), the last entries
//! (`XREVRANGE`), and the walk over single milliseconds; the replies are
//! decoded in `decode`. What the batch learnt is handed back per stream
//! ([`Polled`], with what it found of each group: [`Found`]) for the probe
//! to fold into the snapshot.

use std::collections::{HashMap, HashSet};

use super::allotment::Allotment;
use super::decode::{self, FirstRound, range_count, range_ids};
use crate::backend::reply;
use crate::backend::{Command, NodeAddr, RangeEnd, RangeStart, Reply};
use crate::lag::{self, Arithmetic, MsEnds, UndeliveredSample};
use crate::loss;
use crate::probe::context::{ProbeContext, ProbeError, Problems};
use crate::probe::memory::StreamRead;
use crate::snapshot::Name;
use crate::vocab::{GroupInfo, StreamId, StreamInfo};

/// A watched group of the batch: its stream's place among the streams read,
/// and its own among that stream's watched groups.
type At = (usize, usize);

/// One stream as this poll read it, with what the round trips after XINFO
/// learnt of each watched group (in the order of `read.groups`).
pub(super) struct Polled {
    pub(super) read: StreamRead,
    pub(super) now_ms: Option<u64>,
    pub(super) arithmetic: Arithmetic,
    /// How the node's entries-read counts (see [`loss::ReadCounter`]).
    pub(super) counter: loss::ReadCounter,
    /// The milliseconds the walks read.
    pub(super) ends: MsEnds,
    /// Points of the stream's generated-entries curve.
    pub(super) anchors: Vec<lag::Anchor>,
    /// Per group: what the round trips after XINFO learnt of it.
    pub(super) found: Vec<Found>,
}

/// What the round trips after XINFO learnt of one group.
pub(super) struct Found {
    /// The entries in the range it moved over, where counted.
    pub(super) advanced_over: Option<u64>,
    /// Its first (and last) undelivered entries, where read.
    pub(super) sample: Option<UndeliveredSample>,
    /// What the range its ledger asked for holds, where counted and the
    /// stream did not change meanwhile (a range counted after it changed
    /// is not of XINFO's moment: it bounds nothing).
    pub(super) counted: Option<loss::RangeCount>,
    /// The stream or the group changed between XINFO and the counts that
    /// complete its figures, which then prove nothing.
    pub(super) changed: bool,
}

/// What one batch reads: the streams to read, the quiet ones whose last
/// read stands (see [`super::quiet`]), and the groups the poll has left to
/// give them (see [`Allotment`]).
pub(super) struct ToRead<'n> {
    pub(super) names: &'n [&'n Name],
    pub(super) stand: Vec<(Name, StreamRead)>,
    pub(super) allot: &'n mut Allotment,
}

/// One batch of streams on one node, as far as this poll has read it.
/// Each stream's two XINFO are read in a transaction of their own
/// (`MULTI`/`EXEC`: one key, so one cluster slot), so that they describe
/// one moment.
pub(super) struct Batch<'a> {
    ctx: &'a ProbeContext,
    node: &'a NodeAddr,
    /// The node's own arithmetic and entries-read: a cluster in a rolling
    /// upgrade runs two versions.
    arithmetic: Arithmetic,
    counter: loss::ReadCounter,
    now_ms: Option<u64>,
    /// The streams whose XINFO could be read.
    reads: Vec<(Name, StreamRead)>,
    /// Per stream and group: what the previous poll proved.
    trails: Vec<Vec<Option<lag::Trail>>>,
    /// Per stream: points of its generated-entries curve.
    anchors: Vec<Vec<lag::Anchor>>,
    counted: HashMap<At, loss::RangeCount>,
    advanced: HashMap<At, u64>,
    samples: HashMap<At, UndeliveredSample>,
    /// The groups whose stream or own figures changed between XINFO and
    /// the counts (see [`Batch::sample_heads`]).
    changed: HashSet<At>,
    /// Per stream: the milliseconds the walks read.
    ends: Vec<MsEnds>,
}

impl<'a> Batch<'a> {
    /// First round trip: `TIME` and both `XINFO` of every stream in one
    /// pipeline, so a stream's figures are never read in two round trips
    /// with writes in between. Streams that cannot be read are left out
    /// (and added to `vanished` when they are gone). The quiet streams whose
    /// last read `stand` (see [`super::quiet`]) join as if read again. What
    /// earlier polls left of them is recalled at once.
    pub(super) async fn read(
        ctx: &'a ProbeContext,
        node: &'a NodeAddr,
        (arithmetic, counter): (Arithmetic, loss::ReadCounter),
        to_read: ToRead<'_>,
        problems: &mut Problems,
        vanished: &mut Vec<Name>,
    ) -> Result<Batch<'a>, ProbeError> {
        let ToRead {
            names,
            stand,
            allot,
        } = to_read;
        let per_stream: Vec<Vec<Command>> = names
            .iter()
            .map(|key| {
                vec![
                    Command::XinfoStream { key: key.to_vec() },
                    Command::XinfoGroups { key: key.to_vec() },
                ]
            })
            .collect();
        let (head, replies) = ctx
            .client
            .execute_atomically(node, &[Command::Time], &per_stream)
            .await?;
        let FirstRound {
            now_ms,
            mut reads,
            unsettled,
        } = decode::first_round(ctx, names, &head, &replies, allot, problems, vanished);
        reads.extend(stand.into_iter().map(|(name, mut read)| {
            allot.cut(&mut read);
            (name, read)
        }));
        // Figures not read as one moment prove no loss.
        let changed = reads
            .iter()
            .enumerate()
            .filter(|(si, _)| unsettled.contains(si))
            .flat_map(|(si, (_, read))| (0..read.groups.len()).map(move |gi| (si, gi)))
            .collect();
        let mut batch = Batch {
            ctx,
            node,
            arithmetic,
            counter,
            now_ms,
            ends: vec![MsEnds::default(); reads.len()],
            reads,
            trails: Vec::new(),
            anchors: Vec::new(),
            counted: HashMap::new(),
            advanced: HashMap::new(),
            samples: HashMap::new(),
            changed,
        };
        batch.recall();
        Ok(batch)
    }

    /// What earlier polls left of the batch's streams: each watched group's
    /// lag trail, and each stream's generated-entries curve, drawn through
    /// every group's position (the unwatched ones are points too).
    fn recall(&mut self) {
        let state = self.ctx.state();
        (self.trails, self.anchors) = self
            .reads
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
                    lag::stream_anchors(&read.info, &read.groups, self.arithmetic, earlier)
                } else {
                    let all: Vec<GroupInfo> =
                        read.groups.iter().chain(&read.unwatched).cloned().collect();
                    lag::stream_anchors(&read.info, &all, self.arithmetic, earlier)
                };
                (trails, anchors)
            })
            .unzip();
    }

    /// One group as the lag arithmetic reads it; the entries counted over
    /// its advance join once [`Self::count_ranges`] has them.
    fn reading(&self, (si, gi): At) -> lag::Reading<'_> {
        let read = &self.reads[si].1;
        lag::Reading {
            stream: &read.info,
            group: &read.groups[gi],
            arithmetic: self.arithmetic,
            previous: self.trails[si][gi].as_ref(),
            advanced_over: self.advanced.get(&(si, gi)).copied(),
        }
    }

    /// Second round trip, when a group needs it: the ranges the loss
    /// ledgers and the groups' advances ask counted, in one pipeline.
    pub(super) async fn count_ranges(&mut self, problems: &mut Problems) -> Result<(), ProbeError> {
        let ranges = self.ledger_ranges();
        let advances = self.advances();
        if ranges.is_empty() && advances.is_empty() {
            return Ok(());
        }
        let (keys, pairs): (Vec<_>, Vec<_>) = ranges.into_iter().unzip();
        let (advance_keys, advance_cmds): (Vec<_>, Vec<_>) = advances.into_iter().unzip();
        let mut cmds: Vec<Command> = pairs.into_iter().flatten().collect();
        cmds.extend(advance_cmds);
        let replies = self.ctx.client.execute(self.node, &cmds).await?;
        let mut replies = replies.into_iter();
        for key in keys {
            let (Some(range), Some(pending)) = (replies.next(), replies.next()) else {
                break;
            };
            let count = range_count(self.ctx, range, pending, problems);
            self.counted.insert(key, count);
        }
        for (key, r) in advance_keys.into_iter().zip(replies) {
            let Some(ids) = range_ids(self.ctx, r, problems) else {
                continue;
            };
            // Too many to count: the lag is read from the stream instead.
            if ids.len() <= loss::RANGE_COUNT_CAP as usize {
                self.advanced.insert(key, ids.len() as u64);
            }
        }
        Ok(())
    }

    /// Ranges the groups advanced over with entries removed, whose
    /// survivors prove a loss (see crate::loss): the entries of the range
    /// that exist, and the group's pending ones there (all pending IDs are
    /// at or before its position): a pending entry that no longer exists
    /// was delivered before it was removed.
    fn ledger_ranges(&self) -> Vec<(At, [Command; 2])> {
        let state = self.ctx.state();
        let mut ranges = Vec::new();
        for (si, (name, read)) in self.reads.iter().enumerate() {
            for (gi, group) in read.groups.iter().enumerate() {
                let key = (name.clone(), Name::from(group.name.as_slice()));
                let Some(ledger) = state.ledger_to_feed(&key) else {
                    continue;
                };
                let unknown_lag = loss::Bounds::ANY;
                let o = loss::Observation::of(
                    &read.info,
                    group,
                    self.now_ms,
                    unknown_lag,
                    self.counter,
                );
                let Some((from, to)) = ledger.range_to_count(&o) else {
                    continue;
                };
                let pending = Command::XpendingRange {
                    key: name.to_vec(),
                    group: group.name.clone(),
                    start: RangeStart::From(from),
                    end: RangeEnd::To(to),
                    count: loss::RANGE_COUNT_CAP + 1,
                };
                ranges.push(((si, gi), [count_range(name, from, to), pending]));
            }
        }
        ranges
    }

    /// Ranges groups moved over since an earlier poll proved unread
    /// entries gone (see lag::Reading::advance_to_count). Planned before
    /// any is counted, so no reading carries a count yet.
    fn advances(&self) -> Vec<(At, Command)> {
        let mut advances = Vec::new();
        for (si, (name, read)) in self.reads.iter().enumerate() {
            for gi in 0..read.groups.len() {
                if let Some((from, to)) = self.reading((si, gi)).advance_to_count() {
                    advances.push(((si, gi), count_range(name, from, to)));
                }
            }
        }
        advances
    }

    /// Third round trip, for groups whose lag or lag age does not follow
    /// from XINFO: their first undelivered entries, bounded.
    pub(super) async fn sample_heads(&mut self, problems: &mut Problems) -> Result<(), ProbeError> {
        let (wanted, xranges) = self.head_requests(self.ctx.config.limits.lag_exact_count);
        if xranges.is_empty() {
            return Ok(());
        }
        let replies = self.ctx.client.execute(self.node, &xranges).await?;
        for ((at, count), r) in wanted.into_iter().zip(replies) {
            if let Some(ids) = range_ids(self.ctx, r, problems) {
                self.samples.insert(at, UndeliveredSample::head(ids, count));
            }
        }
        Ok(())
    }

    /// After the counts: both XINFO again for the streams whose lag is
    /// counted or re-derived from a count, or whose ledger range was
    /// counted. A count completes the figures XINFO read only if nothing was
    /// removed and the group did not move in between (its consumers may
    /// delete what they read); the figures are the same at both ends only
    /// if nothing changed between them.
    pub(super) async fn confirm(&mut self, problems: &mut Problems) -> Result<(), ProbeError> {
        let recheck = self.streams_to_recheck();
        if recheck.is_empty() {
            return Ok(());
        }
        let mut cmds = Vec::with_capacity(recheck.len() * 2);
        for &si in &recheck {
            let key = self.reads[si].0.to_vec();
            cmds.push(Command::XinfoStream { key: key.clone() });
            cmds.push(Command::XinfoGroups { key });
        }
        let rechecked = self.ctx.client.execute(self.node, &cmds).await?;
        let moved = self.changed_meanwhile(&recheck, rechecked, problems);
        self.changed.extend(moved);
        for (at, sample) in self.samples.iter_mut() {
            sample.changed_meanwhile = self.changed.contains(at);
        }
        Ok(())
    }

    /// The streams to read again after the counts, once each: those with a
    /// sample of more than one entry (head or tail), a range counted for
    /// the lag, or a range a ledger asked counted.
    fn streams_to_recheck(&self) -> Vec<usize> {
        let mut recheck: Vec<usize> = self
            .samples
            .iter()
            .filter(|(_, s)| s.count > 1 || s.tail_count > 0)
            .map(|(&(si, _), _)| si)
            .chain(self.advanced.keys().map(|&(si, _)| si))
            .chain(self.counted.keys().map(|&(si, _)| si))
            .collect();
        recheck.sort_unstable();
        recheck.dedup();
        recheck
    }

    /// The groups whose first undelivered entries are wanted, how many of
    /// each, and the `XRANGE` that reads them, up to the end XINFO saw.
    fn head_requests(&self, exact_limit: u32) -> (Vec<(At, u32)>, Vec<Command>) {
        let mut wanted = Vec::new();
        let mut xranges = Vec::new();
        for (si, (name, read)) in self.reads.iter().enumerate() {
            for (gi, group) in read.groups.iter().enumerate() {
                let Some(count) = self.reading((si, gi)).sample_request(exact_limit) else {
                    continue;
                };
                let Some(start) = group.last_delivered_id.successor() else {
                    continue;
                };
                wanted.push(((si, gi), count));
                xranges.push(Command::Xrange {
                    key: name.to_vec(),
                    start: RangeStart::From(start),
                    end: as_read(&read.info),
                    count,
                });
            }
        }
        (wanted, xranges)
    }

    /// The groups whose figures the second reading does not confirm: the
    /// stream removed entries (or cannot be read), or the group moved.
    /// Entries added meanwhile change nothing: every count stops where XINFO
    /// ended.
    fn changed_meanwhile(
        &self,
        recheck: &[usize],
        rechecked: Vec<Reply>,
        problems: &mut Problems,
    ) -> HashSet<At> {
        let mut changed = HashSet::new();
        let mut replies = rechecked.into_iter();
        for &si in recheck {
            let (stream, groups) = (replies.next(), replies.next());
            let mut decoded = |r: Option<Reply>| match r? {
                Ok(v) => Some(v),
                Err(e) => {
                    problems.refused(&e);
                    None
                }
            };
            let (stream, groups) = (decoded(stream), decoded(groups));
            let before = &self.reads[si].1;
            let stream_same = stream
                .and_then(|v| reply::stream_info(&v).ok())
                .is_some_and(|now| same_removals(&before.info, &now));
            let groups = groups.and_then(|v| reply::groups(&v).ok());
            for (gi, was) in before.groups.iter().enumerate() {
                let same = stream_same
                    && groups.as_ref().is_some_and(|groups| {
                        groups.iter().any(|g| {
                            g.name == was.name
                                && g.last_delivered_id == was.last_delivered_id
                                && g.entries_read == was.entries_read
                        })
                    });
                if !same {
                    changed.insert((si, gi));
                }
            }
        }
        changed
    }

    /// Fourth round trip, only for lags to estimate: the last entries,
    /// which count small lags exactly and narrow larger ones.
    pub(super) async fn read_tails(&mut self, problems: &mut Problems) -> Result<(), ProbeError> {
        let mut tails = Vec::new();
        let mut tail_cmds = Vec::new();
        for (&at, sample) in &self.samples {
            if let Some((start, count)) = self.reading(at).tail_request(sample) {
                let (name, read) = &self.reads[at.0];
                tails.push((at, count));
                tail_cmds.push(Command::Xrevrange {
                    key: name.to_vec(),
                    end: as_read(&read.info),
                    start: RangeStart::From(start),
                    count,
                });
            }
        }
        if tail_cmds.is_empty() {
            return Ok(());
        }
        let replies = self.ctx.client.execute(self.node, &tail_cmds).await?;
        for ((at, count), r) in tails.into_iter().zip(replies) {
            if let Some(mut ids) = range_ids(self.ctx, r, problems)
                && let Some(sample) = self.samples.get_mut(&at)
            {
                ids.reverse();
                sample.tail = ids;
                sample.tail_count = count;
            }
        }
        Ok(())
    }

    /// Then, for lags still to estimate, a walk over the milliseconds
    /// around each group's position: one round trip per step, every
    /// group's step in it, as long as `budget` (the poll's, shared by its
    /// batches) covers the steps.
    pub(super) async fn walk(
        &mut self,
        budget: &mut usize,
        problems: &mut Problems,
    ) -> Result<(), ProbeError> {
        let walks = self.walks();
        if !walks.is_empty() {
            self.recall_walked(&walks);
        }
        for _ in 0..lag::WALK_ROUNDS {
            let steps = self.next_steps(&walks, budget);
            if steps.is_empty() {
                break;
            }
            let cmds: Vec<Command> = steps
                .iter()
                .map(|&(si, step)| walk_command(&self.reads[si].0, step))
                .collect();
            let replies = self.ctx.client.execute(self.node, &cmds).await?;
            let mut found: Vec<Vec<(lag::Step, Option<StreamId>)>> =
                vec![Vec::new(); self.reads.len()];
            for ((si, step), r) in steps.into_iter().zip(replies) {
                if let Some(ids) = range_ids(self.ctx, r, problems) {
                    found[si].push((step, ids.first().copied()));
                }
            }
            for (si, found) in found.iter().enumerate() {
                lag::Walk::apply(found, &mut self.ends[si]);
            }
        }
        Ok(())
    }

    /// The walks the samples leave to do.
    fn walks(&self) -> Vec<(At, lag::Walk)> {
        self.samples
            .iter()
            .filter_map(|(&at, sample)| {
                self.reading(at)
                    .walk(sample, &self.anchors[at.0])
                    .map(|w| (at, w))
            })
            .collect()
    }

    /// What earlier polls' walks read of these streams is skipped, so the
    /// walks go on where the cap stopped them.
    fn recall_walked(&mut self, walks: &[(At, lag::Walk)]) {
        let mut state = self.ctx.state();
        for ((si, _), _) in walks {
            if let Some(walked) = state.take_walked(&self.reads[*si].0) {
                self.ends[*si] = walked.recall(&self.reads[*si].1.info);
            }
        }
    }

    /// One round's steps. Walks of one stream share what they learn, so a
    /// step that two groups' walks both want is read once; a walk whose
    /// steps the budget cannot cover takes none.
    fn next_steps(&self, walks: &[(At, lag::Walk)], budget: &mut usize) -> Vec<(usize, lag::Step)> {
        let mut steps: Vec<(usize, lag::Step)> = Vec::new();
        for ((si, _), walk) in walks {
            let mine: Vec<lag::Step> = walk
                .steps(&self.ends[*si])
                .into_iter()
                .filter(|st| !steps.contains(&(*si, *st)))
                .collect();
            if *budget < mine.len() {
                continue;
            }
            *budget -= mine.len();
            steps.extend(mine.into_iter().map(|st| (*si, st)));
        }
        steps
    }

    /// What the batch read, stream by stream, for the probe to fold in.
    pub(super) fn into_polled(self) -> Vec<(Name, Polled)> {
        let Batch {
            now_ms,
            arithmetic,
            counter,
            reads,
            anchors,
            ends,
            counted,
            advanced,
            mut samples,
            changed,
            ..
        } = self;
        let per_stream = reads.into_iter().zip(ends).zip(anchors);
        per_stream
            .enumerate()
            .map(|(si, (((name, read), ends), anchors))| {
                let found = (0..read.groups.len())
                    .map(|gi| {
                        let changed = changed.contains(&(si, gi));
                        Found {
                            advanced_over: advanced.get(&(si, gi)).copied(),
                            sample: samples.remove(&(si, gi)),
                            counted: counted.get(&(si, gi)).copied().filter(|_| !changed),
                            changed,
                        }
                    })
                    .collect();
                let polled = Polled {
                    read,
                    now_ms,
                    arithmetic,
                    counter,
                    ends,
                    anchors,
                    found,
                };
                (name, polled)
            })
            .collect()
    }
}

/// The `XRANGE` that counts a range's entries: one past the cap, so a
/// range too long to count is known as one.
fn count_range(key: &Name, from: StreamId, to: StreamId) -> Command {
    Command::Xrange {
        key: key.to_vec(),
        start: RangeStart::From(from),
        end: RangeEnd::To(to),
        count: loss::RANGE_COUNT_CAP + 1,
    }
}

/// True when `now` shows the same removals as `before`: nothing trimmed or
/// deleted, and the stream not set anew (entries added are fine).
fn same_removals(before: &StreamInfo, now: &StreamInfo) -> bool {
    let removed = |i: &StreamInfo| i.entries_added.map(|a| a.saturating_sub(i.length));
    removed(before) == removed(now)
        && before.first_entry_id == now.first_entry_id
        && before.max_deleted_entry_id == now.max_deleted_entry_id
        && before.last_generated_id <= now.last_generated_id
        && (before.entries_added.is_some() || before.length <= now.length)
}

/// The end of the stream as XINFO read it. Entries counted after XINFO, in
/// a later round trip, must stop there: entries added meanwhile would make
/// the count larger than the lag Redis's counters describe, and a loss
/// figure (entries-added − entries-read − lag) that dips for one poll would
/// pass for a loss at the next.
fn as_read(info: &StreamInfo) -> RangeEnd {
    RangeEnd::To(info.last_entry_id.unwrap_or(info.last_generated_id))
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
