//! Folding one polled stream into its snapshot entry ([`build_stream`]):
//! the stream's own figures and its groups' folds, keeping the previous
//! entry's allocation when nothing changed.

use std::sync::Arc;

use super::batch::Polled;
use super::group_fold::{Found, GroupFold};
use super::poll_kind::PollKind;
use crate::backend::reply::StreamInfo;
use crate::lag;
use crate::probe::context::ProbeContext;
use crate::probe::state::TargetState;
use crate::safe_names;
use crate::snapshot::{Groups, Name, StreamState};
use crate::status;

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
        info: read.info,
        time_based_ids: time_ids,
        dead_letter: previous.as_ref().and_then(|p| p.dead_letter),
        settings,
        groups: Groups::new(groups),
        groups_dropped: read.dropped,
    };
    reuse(previous.as_ref(), fresh)
}

/// The previous poll's `Arc` when nothing changed, so quiet streams cost no
/// new allocation per poll (and snapshots share them).
fn reuse<T: PartialEq>(previous: Option<&Arc<T>>, fresh: T) -> Arc<T> {
    match previous {
        Some(p) if **p == fresh => p.clone(),
        _ => Arc::new(fresh),
    }
}
