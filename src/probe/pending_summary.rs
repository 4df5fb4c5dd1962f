//! The pending-summary probe, every minute by default: `XPENDING key group`
//! for each group. It keeps the smallest pending ID, from which the stream
//! probe derives the oldest pending entry's age on every poll, and records
//! that age at once.

use super::{ProbeContext, ProbeError, ProbeKind, Problems, age_seconds, known_groups, per_group};
use std::sync::Arc;

use crate::redis::{Command, reply};

/// Runs the pending-summary probe.
///
/// # Errors
/// When the target cannot be reached or replies cannot be decoded.
pub async fn run(ctx: &ProbeContext) -> Result<(), ProbeError> {
    let pairs = known_groups(&ctx.state());
    let mut problems = Problems::default();
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
                        Arc::make_mut(&mut state.snapshot.oldest_pending_age)
                            .insert(key, age_seconds(now, id.ms));
                    }
                    _ if state.snapshot.oldest_pending_age.contains_key(&key) => {
                        Arc::make_mut(&mut state.snapshot.oldest_pending_age).remove(&key);
                    }
                    _ => {}
                }
            }
        },
    )
    .await?;
    problems.finish(ProbeKind::PendingSummary)
}
