//! The PEL scan, every 5 minutes by default: pages through the whole pending
//! entries list of every group whose PEL the stream poll saw non-empty (an
//! empty one's pass is known without a page) with
//! `XPENDING key group <start> + <page>`, where each page starts just after the last ID of the previous one, under
//! the `pending_entries_per_second` budget. It never uses the `IDLE` filter,
//! which scans the whole PEL when nothing matches.
//!
//! From each complete pass: the largest idle time, idle and delivery-count
//! buckets, poison entries (delivered at least `poison_delivery_count`
//! times) and ghosts (entries whose body is gone: IDs below the first entry
//! for sure; IDs at or below max-deleted-entry-id checked with a bounded
//! number of `XRANGE id id`). A pass that does not fit in one interval is
//! resumed in the next, and its progress is exported instead of results that
//! pretend it finished.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::time::Instant;

use super::context::{ProbeContext, ProbeError, Problems};
use super::groups::group_lines;
use super::memory::{Accumulator, Pass};
use super::state::TargetState;
use crate::backend::reply::{self, PendingEntry};
use crate::backend::{Command, NodeAddr, RangeEnd, RangeStart, Reply};
use crate::snapshot::{Name, PelScan, ScanState};
use crate::vocab::ProbeKind;
use crate::vocab::StreamId;

/// What the accumulator needs to know about the stream and the settings.
#[derive(Clone, Debug)]
pub struct Rules<'a> {
    /// Idle bucket bounds, seconds.
    pub idle_bounds: &'a [f64],
    /// Delivery-count bucket bounds.
    pub delivery_bounds: &'a [u64],
    /// Poison threshold.
    pub poison_delivery_count: u64,
    /// The stream's first entry; `None` when it is empty.
    pub first_entry_id: Option<StreamId>,
    /// Largest ID removed by XDEL; `None` when the server does not say (6.2).
    pub max_deleted_entry_id: Option<StreamId>,
    /// How many possible ghosts may be checked with XRANGE in one pass.
    pub ghost_budget: u32,
}

impl Accumulator {
    /// Adds one page.
    pub fn add(&mut self, page: &[PendingEntry], rules: &Rules<'_>) {
        if self.idle.is_empty() {
            self.idle = vec![0; rules.idle_bounds.len() + 1];
            self.deliveries = vec![0; rules.delivery_bounds.len() + 1];
        }
        for e in page {
            self.entries += 1;
            // Entries released by XNACK (8.8+) have no owner and no delivery
            // time; their idle is meaningless.
            if !e.released {
                self.max_idle_ms = Some(self.max_idle_ms.map_or(e.idle_ms, |m| m.max(e.idle_ms)));
            }
            let idle_s = e.idle_ms as f64 / 1000.0;
            let slot = rules
                .idle_bounds
                .iter()
                .position(|b| idle_s <= *b)
                .unwrap_or(rules.idle_bounds.len());
            self.idle[slot] += 1;
            let slot = rules
                .delivery_bounds
                .iter()
                .position(|b| e.deliveries <= *b)
                .unwrap_or(rules.delivery_bounds.len());
            self.deliveries[slot] += 1;
            if e.deliveries >= rules.poison_delivery_count {
                self.poison += 1;
            }
            match rules.first_entry_id {
                // Empty stream: every pending entry's body is gone.
                None => self.ghost += 1,
                Some(first) if e.id < first => self.ghost += 1,
                Some(_) => {
                    let maybe_deleted = rules
                        .max_deleted_entry_id
                        .is_none_or(|max| !max.is_zero() && e.id <= max);
                    if maybe_deleted {
                        if self.candidates.len() < rules.ghost_budget as usize {
                            self.candidates.push(e.id);
                        } else {
                            self.unchecked += 1;
                        }
                    }
                }
            }
        }
    }

    /// The results, once the candidates were checked (`confirmed` of them
    /// are ghosts).
    pub fn finish(
        &self,
        confirmed: u64,
        idle_bounds: &Arc<[f64]>,
        delivery_bounds: &Arc<[u64]>,
        at: SystemTime,
    ) -> PelScan {
        let cumulative = |counts: &[u64]| {
            counts
                .iter()
                .scan(0u64, |sum, c| {
                    *sum += c;
                    Some(*sum)
                })
                .collect::<Vec<u64>>()
        };
        let idle = cumulative(if self.idle.is_empty() {
            &[]
        } else {
            &self.idle[..self.idle.len() - 1]
        });
        let deliveries = cumulative(if self.deliveries.is_empty() {
            &[]
        } else {
            &self.deliveries[..self.deliveries.len() - 1]
        });
        PelScan {
            finished_at: at,
            entries: self.entries,
            max_idle_ms: self.max_idle_ms,
            idle_counts: idle
                .into_iter()
                .chain(std::iter::repeat(0))
                .take(idle_bounds.len())
                .collect(),
            idle_bounds: idle_bounds.clone(),
            delivery_counts: deliveries
                .into_iter()
                .chain(std::iter::repeat(0))
                .take(delivery_bounds.len())
                .collect(),
            delivery_bounds: delivery_bounds.clone(),
            poison: self.poison,
            ghost: self.ghost + confirmed,
            ghost_unchecked: self.unchecked,
        }
    }
}

/// One group being scanned in this run.
struct Work {
    stream: Name,
    group: Name,
    /// PEL size at the last stream poll, for a pass not begun yet.
    pel_size: u64,
    /// Boxed and made on the first page: at 20,000 groups, passes not begun
    /// or finished cost a pointer each, not a whole accumulator.
    pass: Option<Box<Pass>>,
    done: bool,
}

/// The groups of one run, with the passes it took out of the state. A run
/// dropped before its end (a reload that restarts the poller with its state,
/// shutdown, a panic) puts its unfinished passes back, so the next run
/// resumes them where they were instead of starting over.
struct Taken<'a> {
    ctx: &'a ProbeContext,
    generation: u64,
    work: Vec<Work>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if self.work.iter().all(|w| w.done || w.pass.is_none()) {
            return;
        }
        let mut state = self.ctx.state();
        // Positions in the PELs of a server that went away mean nothing.
        if state.generation != self.generation {
            return;
        }
        for w in self.work.drain(..).filter(|w| !w.done) {
            if let (Some(pass), Some(memory)) = (w.pass, state.groups.get_mut(&(w.stream, w.group)))
            {
                memory.scan_pass.get_or_insert(pass);
            }
        }
    }
}

/// Runs the PEL scan until every pass is complete or the interval is used up.
///
/// # Errors
/// When the target cannot be reached or replies cannot be decoded.
pub async fn run(ctx: &ProbeContext) -> Result<(), ProbeError> {
    let deadline = Instant::now() + ctx.config.schedule.pending_scan;
    // Bucket bounds, shared by the results of every group.
    let idle_bounds: Arc<[f64]> = ctx.config.metrics.pending_idle_buckets.as_slice().into();
    let delivery_bounds: Arc<[u64]> = ctx.config.metrics.delivery_count_buckets.as_slice().into();
    let mut problems = Problems::default();
    let generation = ctx.generation();
    let mut taken = Taken {
        ctx,
        generation,
        work: Vec::new(),
    };
    taken.work = take_work(ctx, &idle_bounds, &delivery_bounds);
    let by_node = ctx
        .client
        .partition(taken.work.iter().map(|w| &*w.stream))
        .await?;
    let mut scan = Scan {
        ctx,
        generation,
        deadline,
        idle_bounds,
        delivery_bounds,
        work: &mut taken.work,
        problems: &mut problems,
    };
    let outcome = scan.nodes(by_node).await;
    carry_over(ctx, generation, std::mem::take(&mut taken.work))?;
    outcome?;
    problems.finish(ProbeKind::PendingScan)
}

/// The groups this run scans, with the passes earlier runs left them,
/// groups with findings first. The groups whose PEL the stream poll saw
/// empty get their results now, without a page.
fn take_work(
    ctx: &ProbeContext,
    idle_bounds: &Arc<[f64]>,
    delivery_bounds: &Arc<[u64]>,
) -> Vec<Work> {
    let mut state = ctx.state();
    let (mut pairs, empty): (Vec<_>, Vec<_>) = group_lines(&state)
        .into_iter()
        .partition(|(_, line)| line.pending > 0);
    // The stream poll saw these PELs empty: the pass over them is known
    // without a page (no entries, so no buckets, poison or ghosts), and
    // a pass begun before they emptied means nothing any more.
    let known_empty = Accumulator::default();
    for ((stream, group), _) in empty {
        if let Some(memory) = state.groups.get_mut(&(stream.clone(), group.clone())) {
            memory.scan_pass = None;
        }
        let result = known_empty.finish(0, idle_bounds, delivery_bounds, SystemTime::now());
        set_progress(&mut state, &stream, &group, Some(result), 1.0);
    }
    // Groups with findings first: after an outage (or any slow pass)
    // their poison, ghost and orphan figures come back soonest.
    pairs.sort_by_key(|(k, _)| !state.findings.contains(k));
    pairs
        .into_iter()
        .map(|((stream, group), line)| {
            let pel_size = line.pending;
            let pass = state
                .groups
                .get_mut(&(stream.clone(), group.clone()))
                .and_then(|m| m.scan_pass.take());
            Work {
                stream,
                group,
                pel_size,
                pass,
                done: false,
            }
        })
        .collect()
}

/// Unfinished passes carry over to the next run and report progress,
/// unless the target went down meanwhile.
fn carry_over(ctx: &ProbeContext, generation: u64, work: Vec<Work>) -> Result<(), ProbeError> {
    let mut state = ctx.state();
    ctx.ensure_current_and_live(&state, generation)?;
    for w in work.into_iter().filter(|w| !w.done) {
        let progress = match &w.pass {
            Some(p) if p.pel_size > 0 => (p.acc.entries as f64 / p.pel_size as f64).min(0.999),
            _ => 0.0,
        };
        if let Some(memory) = state.groups.get_mut(&(w.stream.clone(), w.group.clone())) {
            memory.scan_pass = w.pass;
        }
        set_progress(&mut state, &w.stream, &w.group, None, progress);
    }
    Ok(())
}

/// One run's paging through the PELs of its groups.
struct Scan<'a> {
    ctx: &'a ProbeContext,
    generation: u64,
    /// No round starts after it: the rest waits for the next run.
    deadline: Instant,
    idle_bounds: Arc<[f64]>,
    delivery_bounds: Arc<[u64]>,
    work: &'a mut [Work],
    problems: &'a mut Problems,
}

impl Scan<'_> {
    /// Scans node after node, until every pass is done or the interval is
    /// used up. An error ends the scan: what it read so far is kept.
    async fn nodes(&mut self, by_node: BTreeMap<NodeAddr, Vec<usize>>) -> Result<(), ProbeError> {
        for (node, mine) in by_node {
            if self.node(&node, &mine).await?.is_break() {
                break;
            }
        }
        Ok(())
    }

    /// Scans the groups `mine` of one node, a pipeline of them at a time,
    /// until their passes are done ([`ControlFlow::Continue`]) or the
    /// interval is used up ([`ControlFlow::Break`]).
    async fn node(
        &mut self,
        node: &NodeAddr,
        mine: &[usize],
    ) -> Result<ControlFlow<()>, ProbeError> {
        let per_round = self.ctx.config.limits.pipeline_size.max(1);
        loop {
            let active: Vec<usize> = mine
                .iter()
                .copied()
                .filter(|&i| !self.work[i].done)
                .take(per_round)
                .collect();
            if active.is_empty() {
                return Ok(ControlFlow::Continue(()));
            }
            if Instant::now() >= self.deadline {
                return Ok(ControlFlow::Break(()));
            }
            self.round(node, &active).await?;
        }
    }

    /// One round: the next page of each active group's PEL in one
    /// pipeline, paid for from the entries budget and added to the passes;
    /// the passes it completes are finished.
    async fn round(&mut self, node: &NodeAddr, active: &[usize]) -> Result<(), ProbeError> {
        let ctx = self.ctx;
        // The page size follows the server (see backend::paging); read
        // each round, so a page shrunk by one slow moment grows back
        // within the pass.
        let page = ctx.client.xpending_page();
        let expected = self.expected(active, page);
        ctx.client
            .acquire_pending_entries(expected.iter().sum())
            .await;
        let cmds = self.page_commands(active, page);
        let replies = ctx.client.execute(node, &cmds).await?;
        // Pages from a server that went away mid-run must not be mixed
        // with the next one's; the passes are dropped with the run.
        ctx.ensure_current_and_live(&ctx.state(), self.generation)?;
        let mut finished = Vec::new();
        let mut excess = 0u32;
        for ((&i, r), expected) in active.iter().zip(replies).zip(&expected) {
            let Some(entries) = self.page_of(i, r) else {
                continue;
            };
            ctx.client.stats().pending_scanned(entries.len() as u64);
            excess += (entries.len() as u32).saturating_sub(*expected);
            if self.add_page(i, &entries, page) {
                finished.push(i);
            }
        }
        if excess > 0 {
            ctx.client.acquire_pending_entries(excess).await;
        }
        for i in finished {
            self.finish(node, i).await?;
        }
        Ok(())
    }

    /// What each active group's page will most likely return: the rest of
    /// the PEL as the stream poll last saw it, up to a page. The entries
    /// budget is paid for that before the pages, and for any excess once
    /// they are in, so small PELs do not cost a whole page each.
    fn expected(&self, active: &[usize], page: u32) -> Vec<u32> {
        active
            .iter()
            .map(|&i| {
                let (pel_size, read) = self.work[i]
                    .pass
                    .as_ref()
                    .map_or((self.work[i].pel_size, 0), |p| (p.pel_size, p.acc.entries));
                pel_size.saturating_sub(read).clamp(1, u64::from(page)) as u32
            })
            .collect()
    }

    /// The `XPENDING` of each active group's next page, just after the
    /// last ID of its previous one.
    fn page_commands(&self, active: &[usize], page: u32) -> Vec<Command> {
        active
            .iter()
            .map(|&i| Command::XpendingRange {
                key: self.work[i].stream.to_vec(),
                group: self.work[i].group.to_vec(),
                start: self.work[i]
                    .pass
                    .as_ref()
                    .and_then(|p| p.next)
                    .map_or(RangeStart::Min, RangeStart::From),
                end: RangeEnd::Max,
                count: page,
            })
            .collect()
    }

    /// The entries of group `i`'s page. A reply that is refused or does not
    /// decode drops the group's pass: the group vanished mid-scan, or the
    /// server refused.
    fn page_of(&mut self, i: usize, r: Reply) -> Option<Vec<PendingEntry>> {
        let problems = &mut *self.problems;
        match r {
            Ok(v) => {
                let entries = problems.decoded(self.ctx, reply::pending_entries(&v));
                match entries {
                    Some(_) => problems.answered(),
                    None => self.work[i].done = true,
                }
                entries
            }
            Err(e) => {
                problems.refused(&e);
                self.work[i].done = true;
                None
            }
        }
    }

    /// Adds a page to group `i`'s pass (begun with its first page); true
    /// when the page completes the pass. A group whose stream left the
    /// snapshot is dropped.
    fn add_page(&mut self, i: usize, entries: &[PendingEntry], page: u32) -> bool {
        let Some((idle_bounds, delivery_bounds, poison, first, max_deleted)) =
            rules_for(self.ctx, &self.work[i])
        else {
            self.work[i].done = true;
            return false;
        };
        let rules = Rules {
            idle_bounds: &idle_bounds,
            delivery_bounds: &delivery_bounds,
            poison_delivery_count: poison,
            first_entry_id: first,
            max_deleted_entry_id: max_deleted,
            ghost_budget: self.ctx.config.limits.ghost_checks_per_scan,
        };
        let pel_size = self.work[i].pel_size;
        let pass = self.work[i].pass.get_or_insert_with(|| {
            Box::new(Pass {
                next: None,
                pel_size,
                acc: Accumulator::default(),
            })
        });
        pass.acc.add(entries, &rules);
        let complete = entries.len() < page as usize;
        match entries.last().and_then(|e| e.id.successor()) {
            Some(next) if !complete => {
                pass.next = Some(next);
                false
            }
            _ => true,
        }
    }

    /// Finishes group `i`'s complete pass: its possible ghosts checked, its
    /// results in the snapshot. The pass is freed now, not at the end of a
    /// run that may cover 20,000 groups.
    async fn finish(&mut self, node: &NodeAddr, i: usize) -> Result<(), ProbeError> {
        let ctx = self.ctx;
        let Some(pass) = self.work[i].pass.take() else {
            return Ok(());
        };
        self.work[i].done = true;
        let confirmed = check_ghosts(ctx, node, &self.work[i].stream, &pass.acc).await?;
        let result = pass.acc.finish(
            confirmed,
            &self.idle_bounds,
            &self.delivery_bounds,
            SystemTime::now(),
        );
        let mut state = ctx.state();
        ctx.ensure_current_and_live(&state, self.generation)?;
        let w = &self.work[i];
        set_progress(&mut state, &w.stream, &w.group, Some(result), 1.0);
        Ok(())
    }
}

type RulesOwned = (Vec<f64>, Vec<u64>, u64, Option<StreamId>, Option<StreamId>);

/// The settings and stream facts for one group, from the latest snapshot.
fn rules_for(ctx: &ProbeContext, w: &Work) -> Option<RulesOwned> {
    let state = ctx.state();
    let stream = state.snapshot.streams.get(&w.stream)?;
    let m = &ctx.config.metrics;
    Some((
        m.pending_idle_buckets.clone(),
        m.delivery_count_buckets.clone(),
        stream.settings.poison_delivery_count,
        stream.info.first_entry_id,
        stream.info.max_deleted_entry_id,
    ))
}

/// Checks the possible ghosts of a finished pass with `XRANGE id id COUNT 1`;
/// returns how many have no body.
async fn check_ghosts(
    ctx: &ProbeContext,
    node: &NodeAddr,
    stream: &Name,
    acc: &Accumulator,
) -> Result<u64, ProbeError> {
    if acc.candidates.is_empty() {
        return Ok(0);
    }
    let cmds: Vec<Command> = acc
        .candidates
        .iter()
        .map(|id| Command::Xrange {
            key: stream.to_vec(),
            start: RangeStart::From(*id),
            end: RangeEnd::To(*id),
            count: 1,
        })
        .collect();
    let replies = ctx.client.execute(node, &cmds).await?;
    Ok(replies
        .into_iter()
        .filter(|r| matches!(r, Ok(v) if reply::range_ids(v).is_ok_and(|ids| ids.is_empty())))
        .count() as u64)
}

fn set_progress(
    state: &mut TargetState,
    stream: &Name,
    group: &Name,
    result: Option<PelScan>,
    progress: f64,
) {
    if !state.snapshot.has_group(stream, group) {
        return;
    }
    let entry = Arc::make_mut(&mut state.snapshot.scans)
        .entry((stream.clone(), group.clone()))
        .or_insert(ScanState {
            last: None,
            progress,
        });
    if let Some(result) = result {
        let key = (stream.clone(), group.clone());
        if result.poison > 0 || result.ghost > 0 {
            state.findings.insert(key);
        } else if state
            .snapshot
            .consumers
            .get(&key)
            .is_none_or(|c| c.orphaned == 0)
        {
            state.findings.remove(&key);
        }
        entry.last = Some(Arc::new(result));
    }
    entry.progress = progress;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(ms: u64, idle_ms: u64, deliveries: u64) -> PendingEntry {
        PendingEntry {
            id: StreamId::new(ms, 0),
            released: false,
            holder: None,
            idle_ms,
            deliveries,
        }
    }

    #[test]
    fn buckets_poison_and_ghosts() {
        let idle_bounds = [10.0, 60.0];
        let delivery_bounds = [1, 5];
        let rules = Rules {
            idle_bounds: &idle_bounds,
            delivery_bounds: &delivery_bounds,
            poison_delivery_count: 5,
            first_entry_id: Some(StreamId::new(100, 0)),
            max_deleted_entry_id: Some(StreamId::new(150, 0)),
            ghost_budget: 1,
        };
        let mut acc = Accumulator::default();
        acc.add(
            &[e(50, 5_000, 1), e(120, 30_000, 5), e(140, 90_000, 25)],
            &rules,
        );
        acc.add(&[e(200, 1_000, 2)], &rules);
        let r = acc.finish(
            1,
            &Arc::from(&idle_bounds[..]),
            &Arc::from(&delivery_bounds[..]),
            SystemTime::UNIX_EPOCH,
        );
        assert_eq!(r.entries, 4);
        assert_eq!(r.max_idle_ms, Some(90_000));
        assert_eq!(r.by_idle().collect::<Vec<_>>(), vec![(10.0, 2), (60.0, 3)]);
        assert_eq!(
            r.by_delivery_count().collect::<Vec<_>>(),
            vec![(1, 1), (5, 3)]
        );
        assert_eq!(r.poison, 2);
        // 50 is below the first entry (certain); 120 was checked and
        // confirmed; 140 was over the budget; 200 is above max-deleted.
        assert_eq!((r.ghost, r.ghost_unchecked), (2, 1));
    }

    #[test]
    fn no_tombstone_means_no_candidates() {
        let rules = Rules {
            idle_bounds: &[1.0],
            delivery_bounds: &[1],
            poison_delivery_count: 10,
            first_entry_id: Some(StreamId::new(1, 0)),
            max_deleted_entry_id: Some(StreamId::ZERO),
            ghost_budget: 10,
        };
        let mut acc = Accumulator::default();
        acc.add(&[e(5, 0, 1)], &rules);
        assert!(acc.candidates.is_empty());
        // An empty PEL gives zero counts and no max idle.
        let empty = Accumulator::default().finish(
            0,
            &Arc::from(&[1.0][..]),
            &Arc::from(&[1][..]),
            SystemTime::UNIX_EPOCH,
        );
        assert_eq!(
            (
                empty.entries,
                empty.max_idle_ms,
                empty.by_idle().collect::<Vec<_>>()
            ),
            (0, None, vec![(1.0, 0)])
        );
    }
}
