//! Folding one polled stream into its snapshot entry ([`build_stream`]):
//! each watched group, keyed and found in the target's memory with what the
//! slow probes saw stuck in it, is folded (see `group_fold`), then the
//! stream's own figures are written, keeping the previous entry's
//! allocation when nothing changed.

use std::sync::Arc;

use super::batch::Polled;
use super::group_fold::{GroupFold, PollKind};
use crate::lag;
use crate::probe::context::ProbeContext;
use crate::probe::state::TargetState;
use crate::safe_names;
use crate::snapshot::{Groups, Name, StreamState, TargetSnapshot};
use crate::status;
use crate::vocab::StreamInfo;

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

/// What a stream's poll was: scheduled or extra, from which server, and
/// whether an event said the stream was set from outside since the last.
#[derive(Clone, Copy)]
pub(super) struct Poll<'a> {
    pub(super) kind: PollKind,
    pub(super) run_id: Option<&'a Arc<str>>,
    pub(super) set_from_outside: bool,
    /// What keyevents announced of the stream's removals.
    pub(super) announced: Option<crate::loss::Announced>,
}

/// Folds one polled stream into its snapshot entry: each watched group's
/// lag, ledger, trend and status, then the stream's own figures. The
/// previous entry is kept when nothing changed.
pub(super) fn build_stream(
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
        announced,
    } = poll;
    let Polled {
        read,
        now_ms,
        arithmetic,
        counter,
        ends,
        anchors,
        found,
    } = polled;
    let settings = ctx.config.streams.for_stream(name);
    let time_ids = time_based(&read.info, now_ms);
    if !time_ids && state.non_time_logged.insert(name.clone()) {
        tracing::info!(
            redis_target = %ctx.target.name,
            stream = %safe_names::printable(&**name),
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
        evidence: lag::Evidence {
            ends: Some(&ends),
            anchors: &anchors,
        },
        settings: &settings,
        hold_ms: ctx.config.data_loss_hold.as_millis() as u64,
        counter,
        // After an outage the ledgers wait until the server is known to be
        // the same one (see `TargetState::verify_ledgers`): then this poll
        // is compared with the last one before the outage.
        feed_ledger: !state.ledgers_unverified,
        run_id,
        set_from_outside,
        announced,
    };
    let mut groups = Vec::with_capacity(read.groups.len());
    for (group, found) in read.groups.iter().zip(&found) {
        // The name lives in the map key (the previous poll's, when there is
        // one), not a second time in the group's figures.
        let before = previous
            .as_deref()
            .and_then(|p| p.groups.get_key_value(group.name.as_slice()));
        let gname: Name =
            before.map_or_else(|| Arc::from(group.name.as_slice()), |(k, _)| k.clone());
        let before = before.map(|(_, g)| g);
        let key = (name.clone(), gname.clone());
        let stuck = stuck_evidence(&state.snapshot, &key);
        let (memory, ledger) = state.group_entries(&key);
        let fresh = fold.group(memory, ledger, group, found, before, stuck);
        let was = before.and_then(|b| b.status);
        state
            .status_changes
            .record(&ctx.target.name, name, &gname, was, fresh.status);
        groups.push((gname, fresh));
    }
    if !ends.is_empty() {
        state.remember_walked(name, lag::Walked::keep(ends, &read.info));
    }
    let fresh = StreamState {
        info: read.info,
        time_based_ids: time_ids,
        dead_letter: previous.as_ref().and_then(|p| p.dead_letter),
        settings,
        groups: Groups::new(groups),
        groups_dropped: read.dropped,
    };
    // The previous poll's `Arc` when nothing changed, so quiet streams cost
    // no new allocation per poll (and snapshots share them).
    match previous {
        Some(p) if *p == fresh => p,
        _ => Arc::new(fresh),
    }
}

/// What the slow probes' latest results show stuck in the group, when
/// anything: poison or ghost entries in its PEL (the last scan, or the
/// pending summary's look at its oldest entries), or entries held by
/// consumers inactive past their limit. Poison first: it explains the rest.
fn stuck_evidence(snapshot: &TargetSnapshot, key: &(Name, Name)) -> Option<status::Stuck> {
    let scan = snapshot.scans.get(key).and_then(|s| s.last.as_deref());
    let poison = scan.is_some_and(|scan| scan.poison > 0)
        || snapshot
            .pending_heads
            .get(key)
            .is_some_and(|h| h.poison > 0);
    let ghost = scan.is_some_and(|scan| scan.ghost > 0)
        || snapshot.pending_heads.get(key).is_some_and(|h| h.ghost > 0);
    let orphaned = snapshot.consumers.get(key).is_some_and(|c| c.orphaned > 0);
    [
        (poison, status::Stuck::Poison),
        (ghost, status::Stuck::Ghost),
        (orphaned, status::Stuck::Orphaned),
    ]
    .into_iter()
    .find_map(|(seen, stuck)| seen.then_some(stuck))
}
