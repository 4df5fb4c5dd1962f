//! The pending-summary probe, every minute by default: `XPENDING key group`
//! for each group whose PEL the stream poll saw non-empty (an empty one has
//! no smallest ID and nothing stuck, known without asking). It keeps the smallest pending ID, from which the stream
//! probe derives the oldest pending entry's age on every poll, and records
//! that age at once.
//!
//! Poison as soon as it exists: a poison message is retried forever, so it
//! stays among the oldest pending entries. For each group with entries
//! pending, the probe reads the oldest [`HEAD`] of them
//! (`XPENDING key group - + 10`, O(log n)) and counts those delivered at least
//! `poison_delivery_count` times; the group's poison family
//! ([`GROUP_PENDING_POISON`](crate::metrics::catalog::GROUP_PENDING_POISON))
//! shows the larger of that and the last full PEL scan's count, so a poison
//! entry shows at the first run after its last delivery that reached the
//! count, not at the next scan. The look also names who holds those entries
//! ([`PendingHead`]): the poison entries' holders, and each holder's oldest
//! entry, which dates what an orphaned consumer holds; and the ghosts among
//! them, entries older than the stream's first one (trimmed while pending)
//! or, for the oldest that an `XDEL` may have removed, gone from the stream
//! (`XRANGE id id COUNT 1`, sent only for such a group), seen at once
//! rather than at the next PEL scan.
//!
//! On servers with `XNACK` (Redis 8.8+) it also reads how many pending
//! entries `XNACK` released per group (see [`nacks`]).

use super::context::{ProbeContext, ProbeError, Problems};
use super::groups::{group_lines, per_group};
use crate::vocab::ProbeKind;
use std::sync::Arc;

use crate::backend::{Command, RangeEnd, RangeStart, reply};
use crate::snapshot::{Name, OldestPending, PendingHead};
use crate::vocab::StreamId;

/// Oldest pending entries read for the poison check. The connection keeps
/// the holders' names of a page this short (see `backend::client::bounded`),
/// which name the consumers holding poison and orphaned entries.
const HEAD: u32 = 10;

/// Runs the pending-summary probe.
///
/// # Errors
/// When the target cannot be reached or replies cannot be decoded.
pub async fn run(ctx: &ProbeContext) -> Result<(), ProbeError> {
    let pairs = {
        let mut state = ctx.state();
        let (pairs, empty): (Vec<_>, Vec<_>) = group_lines(&state)
            .into_iter()
            .partition(|(_, line)| line.pending > 0);
        // The stream poll saw these PELs empty: what XPENDING would say (no
        // smallest ID, nothing stuck) is known without asking.
        for (key, _) in empty {
            if let Some(memory) = state.groups.get_mut(&key) {
                memory.oldest_pending_id = None;
            }
            if state.snapshot.oldest_pending.contains_key(&key) {
                Arc::make_mut(&mut state.snapshot.oldest_pending).remove(&key);
            }
        }
        pairs.into_iter().map(|(key, _)| key).collect::<Vec<_>>()
    };
    let mut problems = Problems::default();
    let mut pel_heads: Vec<(Name, Name)> = Vec::new();
    per_group(
        ctx,
        &pairs,
        |s, g| Command::XpendingSummary {
            key: s.to_vec(),
            group: g.to_vec(),
        },
        reply::pending_summary,
        &mut problems,
        |now_ms, decoded| {
            let mut state = ctx.state();
            for (s, g, summary) in decoded {
                let key = (s.clone(), g.clone());
                if summary.count > 0 {
                    pel_heads.push(key.clone());
                }
                if let Some(memory) = state.groups.get_mut(&key) {
                    memory.oldest_pending_id = summary.min_id;
                }
                let time_ids = state
                    .snapshot
                    .streams
                    .get(s)
                    .is_some_and(|st| st.time_based_ids);
                if !state.snapshot.has_group(s, g) {
                    continue;
                }
                match (now_ms, summary.min_id) {
                    (Some(now), Some(id)) if time_ids => {
                        let oldest = OldestPending {
                            id,
                            read_at_ms: now,
                        };
                        Arc::make_mut(&mut state.snapshot.oldest_pending).insert(key, oldest);
                    }
                    _ if state.snapshot.oldest_pending.contains_key(&key) => {
                        Arc::make_mut(&mut state.snapshot.oldest_pending).remove(&key);
                    }
                    _ => {}
                }
            }
        },
    )
    .await?;
    // The poison check of every group with entries pending, and who holds
    // its oldest entries; the others' heads go.
    let mut heads: Vec<((Name, Name), PendingHead)> = Vec::new();
    // The oldest head entry of each group that an XDEL may have removed.
    let mut maybe_deleted: std::collections::BTreeMap<(Name, Name), StreamId> =
        std::collections::BTreeMap::new();
    per_group(
        ctx,
        &pel_heads,
        |s, g| Command::XpendingRange {
            key: s.to_vec(),
            group: g.to_vec(),
            start: RangeStart::Min,
            end: RangeEnd::Max,
            count: HEAD,
        },
        reply::pending_entries,
        &mut problems,
        |_, decoded| {
            for (s, g, entries) in decoded {
                let threshold = ctx.config.streams.for_stream(s).poison_delivery_count;
                let (retained_from, deleted_upto) = edges(&ctx.state().snapshot, s);
                let head = PendingHead::of(&entries, threshold, retained_from);
                let key = (s.clone(), g.clone());
                let deleted = entries.iter().map(|e| e.id).find(|id| {
                    retained_from.is_some_and(|first| *id >= first)
                        && deleted_upto.is_some_and(|last| *id <= last)
                });
                if let (Some(id), 0) = (deleted, head.ghost) {
                    maybe_deleted.insert(key.clone(), id);
                }
                heads.push((key, head));
            }
        },
    )
    .await?;
    // Whether that entry's body is still there (XRANGE id id COUNT 1): a
    // worker that deletes what it read instead of acknowledging it leaves
    // ghosts the PEL scan would find only at its next pass.
    let checks: Vec<(Name, Name)> = maybe_deleted.keys().cloned().collect();
    let mut gone = std::collections::BTreeSet::new();
    per_group(
        ctx,
        &checks,
        |s, g| {
            let id = maybe_deleted
                .get(&(s.clone(), g.clone()))
                .copied()
                .unwrap_or_default();
            Command::Xrange {
                key: s.to_vec(),
                start: RangeStart::From(id),
                end: RangeEnd::To(id),
                count: 1,
            }
        },
        reply::range_ids,
        &mut problems,
        |_, decoded| {
            for (s, g, ids) in decoded {
                if ids.is_empty() {
                    gone.insert((s.clone(), g.clone()));
                }
            }
        },
    )
    .await?;
    for (key, head) in &mut heads {
        if gone.contains(key) {
            head.ghost += 1;
        }
    }
    {
        let mut state = ctx.state();
        let fresh: std::collections::BTreeMap<(Name, Name), PendingHead> = heads
            .into_iter()
            .filter(|(k, _)| state.snapshot.has_group(&k.0, &k.1))
            .collect();
        if *state.snapshot.pending_heads != fresh {
            state.snapshot.pending_heads = Arc::new(fresh);
        }
    }
    nacks(ctx, &pairs, &mut problems).await?;
    problems.finish(ProbeKind::PendingSummary)
}

/// The stream's first entry as its last poll saw it, below which a pending
/// entry's body is gone, and its largest deleted ID, at or below which an
/// entry may have been deleted; `None` when the poll did not see the stream
/// or the server does not say. An empty stream's edge is just past its last
/// ID then: every entry up to it is gone, and an entry added and read since
/// that poll has a larger ID, so it is never taken for a ghost.
fn edges(
    snapshot: &crate::snapshot::TargetSnapshot,
    stream: &Name,
) -> (Option<StreamId>, Option<StreamId>) {
    let Some(st) = snapshot.streams.get(stream) else {
        return (None, None);
    };
    let info = &st.info;
    let first = match info.first_entry_id {
        Some(first) => Some(first),
        None if info.length == 0 => info.last_generated_id.successor(),
        None => None,
    };
    (first, info.max_deleted_entry_id)
}

/// On servers with `XNACK`, the entries it released of each group: one
/// `XINFO STREAM … FULL COUNT 1` per stream with entries pending (released
/// entries stay in the PEL), read for its groups' `nacked-count`; a group
/// whose PEL the stream poll saw empty has none. Elsewhere nothing is sent
/// and nothing is known.
async fn nacks(
    ctx: &ProbeContext,
    pending: &[(Name, Name)],
    problems: &mut Problems,
) -> Result<(), ProbeError> {
    let capable = ctx
        .state()
        .snapshot
        .server
        .as_ref()
        .is_some_and(|s| s.has_xnack());
    if !capable {
        let mut state = ctx.state();
        if !state.snapshot.nacked.is_empty() {
            state.snapshot.nacked = Arc::default();
        }
        return Ok(());
    }
    // One group of each stream stands for the stream (the command names
    // none).
    let mut streams: Vec<(Name, Name)> = pending.to_vec();
    streams.dedup_by(|a, b| a.0 == b.0);
    let mut fresh = std::collections::BTreeMap::new();
    per_group(
        ctx,
        &streams,
        |s, _| Command::XinfoStreamNacks { key: s.to_vec() },
        reply::nacked_counts,
        problems,
        |_, decoded| {
            for (s, _, groups) in decoded {
                for group in groups {
                    if let Some(n) = group.nacked {
                        fresh.insert((s.clone(), Name::from(group.name)), n);
                    }
                }
            }
        },
    )
    .await?;
    let mut state = ctx.state();
    let snapshot = &state.snapshot;
    let mut known: std::collections::BTreeMap<(Name, Name), u64> = group_lines(&state)
        .into_iter()
        .filter(|(_, line)| line.pending == 0)
        .map(|(key, _)| (key, 0))
        .collect();
    known.extend(
        fresh
            .into_iter()
            .filter(|(k, _)| snapshot.has_group(&k.0, &k.1)),
    );
    if *state.snapshot.nacked != known {
        state.snapshot.nacked = Arc::new(known);
    }
    Ok(())
}
