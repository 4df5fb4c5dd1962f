//! Discovery: which streams to watch. Exact names are taken as they are;
//! patterns are found with `SCAN cursor [MATCH p] COUNT n TYPE stream`,
//! followed to the end of the cursor on every primary, on the slow discovery
//! cadence only (SCAN walks the whole keyspace, whatever it matches).
//!
//! Streams matching an `exclude_streams` glob (of the target, or of the
//! stream's `[[streams]]` rule) are dropped, whether named or found. The
//! result is sorted (exact names first) and cut at `max_streams`; the
//! number cut is exported. Streams no longer found leave the snapshot.
//!
//! While the target's keyspace-event subscription has covered every event
//! since the last walk, only one run in [`WALK_EVERY_COVERED`] walks
//! ([`walk_now`]): a stream used as a queue is watched on its
//! `xgroup-create` event (see `events`), so the walk is left to find streams
//! without groups. A run that skips the walk changes nothing.
//!
//! A walk keeps at most `max_streams` names as it goes ([`FirstNames`]),
//! whatever the keyspace holds: 300,000 streams watched 1,000 at a time
//! cost the names of 1,000.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::context::{ProbeContext, ProbeError, Problems};
use super::memory::{DiscoveryReport, LastWalk};
use crate::backend::{Command, reply};
use crate::snapshot::Name;
use crate::vocab::ProbeKind;

/// Runs discovery.
///
/// # Errors
/// When a primary cannot be reached.
pub async fn run(ctx: &ProbeContext) -> Result<(), ProbeError> {
    let target = &ctx.target;
    let started = tokio::time::Instant::now();
    ctx.client.invalidate_topology();
    let coverage = ctx.client.stats().keyspace_coverage();
    if !target.patterns.is_empty() {
        let mut state = ctx.state();
        if !walk_now(state.last_walk, coverage) {
            if let Some(last) = state.last_walk.as_mut() {
                last.skipped += 1;
            }
            // Nothing added or removed this run (the poller logs it so).
            if let Some(report) = state.discovery.as_mut() {
                report.added = 0;
                report.removed = 0;
            }
            return Ok(());
        }
    }
    let mut problems = Problems::default();
    let watches = |name: &[u8]| target.watches_stream(&ctx.config.streams.for_stream(name), name);
    let exact: BTreeSet<&[u8]> = target.streams.iter().map(Vec::as_slice).collect();
    let mut found = FirstNames::new(target.max_streams);
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
                    Ok(v) => match problems.decoded(ctx, reply::scan_page(&v)) {
                        Some(p) => p,
                        None => return problems.finish(ProbeKind::Discovery),
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
                // Named streams and excluded ones go before the cap, so
                // they never take a place in it.
                for key in page.keys {
                    if target.patterns.iter().any(|p| p.matches(&key))
                        && !exact.contains(key.as_slice())
                        && watches(&key)
                    {
                        found.insert(key);
                    }
                }
                if page.cursor == 0 {
                    break;
                }
                cursor = page.cursor;
            }
        }
    }
    let mut ordered: Vec<Name> = Vec::new();
    let mut seen = BTreeSet::new();
    for name in &target.streams {
        if watches(name) && seen.insert(name.as_slice()) {
            ordered.push(Arc::from(name.as_slice()));
        }
    }
    let beyond = found.beyond;
    ordered.extend(found.kept.into_iter().map(|k| Arc::from(k.as_slice())));
    let dropped = ordered.len().saturating_sub(target.max_streams) + beyond;
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
        state.last_walk = Some(LastWalk {
            coverage,
            skipped: 0,
        });
    } else {
        ctx.state().last_walk = None;
    }
    result
}

/// While keyspace events cover every event, discovery walks the keyspace
/// on one run in this many (the others skip it): a walk of 1,000,000 keys,
/// due every 5 minutes, then runs every 30.
pub const WALK_EVERY_COVERED: u32 = 6;

/// Whether this run walks the keyspace: always, unless keyspace events have
/// covered every event since the last walk (the same coverage mark then and
/// now) and fewer than [`WALK_EVERY_COVERED`] runs have passed.
pub fn walk_now(last: Option<LastWalk>, coverage: Option<u64>) -> bool {
    match (last, coverage) {
        (Some(last), Some(now)) if last.coverage == Some(now) => {
            last.skipped + 1 >= WALK_EVERY_COVERED
        }
        _ => true,
    }
}

/// The first names in byte order of those a walk finds, at most `cap` of
/// them, and how many more it found (a name `SCAN` returns twice, as it
/// may while the server rehashes, is counted twice when it is beyond the
/// cap).
#[derive(Debug)]
pub struct FirstNames {
    /// The names kept, sorted.
    pub kept: BTreeSet<Vec<u8>>,
    /// Names found beyond the cap.
    pub beyond: usize,
    cap: usize,
}

impl FirstNames {
    /// None kept yet.
    pub fn new(cap: usize) -> FirstNames {
        FirstNames {
            kept: BTreeSet::new(),
            beyond: 0,
            cap,
        }
    }

    /// Keeps `name` if it is among the first `cap` found so far.
    pub fn insert(&mut self, name: Vec<u8>) {
        if self.kept.contains(&name) {
            return;
        }
        if self.kept.len() < self.cap {
            self.kept.insert(name);
            return;
        }
        self.beyond += 1;
        if self.kept.last().is_some_and(|last| name < *last) {
            self.kept.pop_last();
            self.kept.insert(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_are_rarer_while_events_cover_every_event() {
        let covered = |skipped| {
            Some(LastWalk {
                coverage: Some(4),
                skipped,
            })
        };
        // No walk yet, or no healthy subscription: walk.
        assert!(walk_now(None, Some(4)));
        assert!(walk_now(covered(0), None));
        // The same mark: five runs skip, the sixth walks.
        for skipped in 0..WALK_EVERY_COVERED - 1 {
            assert!(!walk_now(covered(skipped), Some(4)), "{skipped}");
        }
        assert!(walk_now(covered(WALK_EVERY_COVERED - 1), Some(4)));
        // A gap since (an interruption, a dropped event): walk now.
        assert!(walk_now(covered(0), Some(5)));
        // A walk made while the subscription was down covers nothing.
        let uncovered = Some(LastWalk {
            coverage: None,
            skipped: 0,
        });
        assert!(walk_now(uncovered, Some(4)));
    }

    #[test]
    fn a_walk_keeps_the_first_names_up_to_the_cap_and_counts_the_rest() {
        let mut f = FirstNames::new(3);
        for name in ["m", "c", "x", "a", "c", "z", "b", "a"] {
            f.insert(name.as_bytes().to_vec());
        }
        let kept: Vec<&[u8]> = f.kept.iter().map(Vec::as_slice).collect();
        assert_eq!(kept, [b"a", b"b", b"c"]);
        // m, x and z found beyond (each once), duplicates of kept names
        // not counted.
        assert_eq!(f.beyond, 3);
        let mut none = FirstNames::new(5);
        none.insert(b"only".to_vec());
        assert_eq!((none.kept.len(), none.beyond), (1, 0));
    }
}
