//! The stream probe's two runs: the scheduled poll of every watched stream
//! ([`run`]), which is also the target's heartbeat, and the extra poll of the
//! streams keyspace events named ([`run_some`]), merged into the snapshot.

use std::sync::Arc;

use super::dead_letters::dead_letters;
use super::group_fold::PollKind;
use super::poll::{Polling, poll_streams};
use crate::backend::Command;
use crate::probe::context::{ProbeContext, ProbeError, Problems};
use crate::snapshot::Name;
use crate::vocab::ProbeKind;

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
