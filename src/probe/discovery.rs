//! Discovery: which streams to watch. Exact names are taken as they are;
//! patterns are found with `SCAN cursor [MATCH p] COUNT n TYPE stream`,
//! followed to the end of the cursor on every primary, on the slow discovery
//! cadence only (SCAN walks the whole keyspace, whatever it matches).
//!
//! Streams matching an `exclude_streams` glob (of the target, or of the
//! stream's `[[streams]]` rule) are dropped, whether named or found. The
//! result is sorted (exact names first) and cut at `max_streams`; the
//! number cut is exported. Streams no longer found leave the snapshot.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{ProbeContext, ProbeError, ProbeKind, Problems};
use crate::backend::{Command, reply};
use crate::snapshot::Name;

/// Runs discovery.
///
/// # Errors
/// When a primary cannot be reached.
pub async fn run(ctx: &ProbeContext) -> Result<(), ProbeError> {
    let target = &ctx.target;
    let started = tokio::time::Instant::now();
    ctx.client.invalidate_topology();
    let mut problems = Problems::default();
    let mut found: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut keys_walked: Option<u64> = None;
    if !target.patterns.is_empty() {
        // One pattern goes to Redis as MATCH; several are matched locally
        // over one unfiltered pass, so the keyspace is walked once per node.
        let server_match = match target.patterns.as_slice() {
            [only] if only.as_bytes() != b"*" => Some(only.as_bytes().to_vec()),
            _ => None,
        };
        for node in ctx.client.nodes().await? {
            // Each call needs the previous cursor, so the walk cannot be
            // pipelined; it is sent back to back instead (see `Sequence`).
            let mut walk = ctx.client.sequence(node);
            let mut cursor = 0u64;
            loop {
                // The page size follows the server (see backend::paging).
                let count = ctx.client.scan_page();
                let cmd = Command::Scan {
                    cursor,
                    pattern: server_match.clone(),
                    count,
                };
                // A walk that cannot finish keeps the streams watched so far:
                // a refused or garbled page must not make streams vanish.
                let page = match walk.send(&cmd).await? {
                    Ok(v) => match reply::scan_page(&v) {
                        Ok(p) => p,
                        Err(e) => {
                            problems.add(ctx, e);
                            return problems.finish(ProbeKind::Discovery);
                        }
                    },
                    Err(e) => {
                        problems.refused(&e);
                        return problems.finish(ProbeKind::Discovery);
                    }
                };
                problems.answered();
                *keys_walked.get_or_insert(0) += u64::from(count);
                // SCAN may return a key twice and, with ACL key patterns, keys
                // outside them: match locally too.
                found.extend(
                    page.keys
                        .into_iter()
                        .filter(|k| target.patterns.iter().any(|p| p.matches(k))),
                );
                if page.cursor == 0 {
                    break;
                }
                cursor = page.cursor;
            }
        }
    }
    let mut ordered: Vec<Name> = Vec::new();
    let mut seen = BTreeSet::new();
    for exact in &target.streams {
        if seen.insert(exact.clone()) {
            ordered.push(Arc::from(exact.as_slice()));
        }
    }
    for key in found {
        if seen.insert(key.clone()) {
            ordered.push(Arc::from(key.as_slice()));
        }
    }
    // Excluded streams go before the cap, so they never take a place in it.
    ordered.retain(|name| target.watches_stream(&ctx.config.streams.for_stream(name), name));
    let dropped = ordered.len().saturating_sub(target.max_streams);
    if dropped > 0 {
        tracing::warn!(redis_target = %target.name, dropped, max_streams = target.max_streams, "more streams than max_streams; the rest are not watched");
        ordered.truncate(target.max_streams);
    }
    let result = problems.finish(ProbeKind::Discovery);
    if result.is_ok() {
        let mut state = ctx.state();
        // Streams a keyspace event watched during the walk may have been
        // created after the walk passed them: kept until the next run.
        state.watched_by_event.retain(|_, at| *at >= started);
        for name in state.watched_by_event.keys() {
            if ordered.len() < target.max_streams && !ordered.contains(name) {
                ordered.push(name.clone());
            }
        }
        let keep: BTreeSet<&Name> = ordered.iter().collect();
        let before: BTreeSet<&Name> = state.watched().iter().collect();
        let added = ordered.iter().filter(|n| !before.contains(n)).count();
        let removed = before.iter().filter(|n| !keep.contains(*n)).count();
        state.discovery = Some(DiscoveryReport {
            watched: ordered.len(),
            added,
            removed,
            keys_walked,
        });
        state.forget_unwatched_streams(&keep);
        state.snapshot.streams_watched = Some(ordered.len() as u64);
        state.snapshot.streams_dropped = Some(dropped as u64);
        state.set_watched(ordered);
        state.prune_memory();
    }
    result
}

/// What the last successful discovery found, for its log line and the
/// next run's delay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiscoveryReport {
    /// Streams watched.
    pub watched: usize,
    /// Watched now and not before.
    pub added: usize,
    /// Watched before and not now.
    pub removed: usize,
    /// Keys the SCAN walks covered (calls × COUNT); `None` without a walk.
    pub keys_walked: Option<u64>,
}
