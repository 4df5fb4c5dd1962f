//! The consumers probe, every minute by default: `XINFO CONSUMERS key group`
//! for each group. It exports the top consumers by pending count (the rest
//! summed under `__other__`), counts the entries held by consumers inactive
//! longer than the stream's `consumer_inactive_after` (orphaned), and records
//! when any consumer last read successfully, for the group status.

use std::sync::Arc;
use std::time::Duration;

use super::{ProbeContext, ProbeError, ProbeKind, Problems, known_groups, per_group};
use crate::backend::Command;
use crate::backend::reply::{self, ConsumerInfo};
use crate::snapshot::Consumers;

/// Milliseconds since the consumer last read successfully: `inactive` on
/// 7.2+, `idle` before (which meant the same then). `None` when it never did.
pub fn since_last_read_ms(c: &ConsumerInfo) -> Option<u64> {
    if c.never_active {
        None
    } else {
        Some(c.inactive_ms.unwrap_or(c.idle_ms))
    }
}

/// Caps and summarises one group's consumers.
pub fn summarise(mut all: Vec<ConsumerInfo>, cap: usize, inactive_after: Duration) -> Consumers {
    let limit = inactive_after.as_millis() as u64;
    let orphaned = all
        .iter()
        .filter(|c| since_last_read_ms(c).is_none_or(|ms| ms >= limit))
        .map(|c| c.pending)
        .sum();
    // Most pending first; ties broken by name so the exported set is stable.
    all.sort_by(|a, b| b.pending.cmp(&a.pending).then_with(|| a.name.cmp(&b.name)));
    let other_pending = (all.len() > cap).then(|| all[cap..].iter().map(|c| c.pending).sum());
    all.truncate(cap);
    Consumers {
        top: all.into_iter().map(super::figures::consumer).collect(),
        other_pending,
        orphaned,
    }
}

/// Runs the consumers probe.
///
/// # Errors
/// When the target cannot be reached or replies cannot be decoded.
pub async fn run(ctx: &ProbeContext) -> Result<(), ProbeError> {
    let pairs = known_groups(&ctx.state());
    let cap = ctx.config.metrics.max_consumers_per_group;
    let mut problems = Problems::default();
    per_group(
        ctx,
        &pairs,
        |s, g| Command::XinfoConsumers {
            key: s.to_vec(),
            group: g.to_vec(),
        },
        reply::consumers,
        &mut problems,
        |now_ms, decoded| {
            let mut state = ctx.state();
            for (s, g, list) in decoded {
                let last_read_at_ms = match (now_ms, list.is_empty()) {
                    (_, true) | (None, _) => None,
                    (Some(now), false) => Some(
                        list.iter()
                            .filter_map(since_last_read_ms)
                            .min()
                            .map_or(0, |ms| now.saturating_sub(ms)),
                    ),
                };
                if let Some(memory) = state.groups.get_mut(&(s.clone(), g.clone())) {
                    memory.last_read_at_ms = last_read_at_ms;
                }
                let Some(stream) = state.snapshot.streams.get(s) else {
                    continue;
                };
                if !stream.groups.contains_key(g) {
                    continue;
                }
                let inactive_after = stream.settings.consumer_inactive_after;
                let summary = summarise(list, cap, inactive_after);
                let key = (s.clone(), g.clone());
                if summary.orphaned > 0 {
                    state.findings.insert(key.clone());
                }
                // Unchanged consumers keep their allocation (and are shared
                // with the published snapshot).
                if state
                    .snapshot
                    .consumers
                    .get(&key)
                    .is_none_or(|c| **c != summary)
                {
                    Arc::make_mut(&mut state.snapshot.consumers).insert(key, Arc::new(summary));
                }
            }
        },
    )
    .await?;
    problems.finish(ProbeKind::Consumers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(
        name: &str,
        pending: u64,
        idle_ms: u64,
        inactive_ms: Option<u64>,
        never: bool,
    ) -> ConsumerInfo {
        ConsumerInfo {
            name: name.into(),
            pending,
            idle_ms,
            inactive_ms,
            never_active: never,
        }
    }

    #[test]
    fn caps_by_pending_and_sums_the_rest() {
        let all = vec![
            c("a", 1, 0, Some(0), false),
            c("b", 5, 0, Some(0), false),
            c("c", 3, 0, Some(0), false),
            c("d", 3, 0, Some(0), false),
        ];
        let s = summarise(all, 2, Duration::from_secs(60));
        let names: Vec<&[u8]> = s.top.iter().map(|c| c.name.as_slice()).collect();
        assert_eq!(names, vec![b"b".as_slice(), b"c".as_slice()]);
        assert_eq!(s.other_pending, Some(4));
        assert_eq!(s.orphaned, 0);
    }

    #[test]
    fn orphaned_uses_inactive_then_idle() {
        let all = vec![
            // 7.2+: polls often (idle small) but has not succeeded for 10 min.
            c("stuck", 4, 100, Some(600_000), false),
            // Before 7.2: idle is time since the last successful read.
            c("old", 2, 600_000, None, false),
            // Never read successfully but holds entries (claimed for it).
            c("never", 1, 0, None, true),
            c("fine", 9, 100, Some(100), false),
        ];
        let s = summarise(all, 10, Duration::from_secs(120));
        assert_eq!(s.orphaned, 7);
        assert_eq!(s.other_pending, None);
    }
}
