//! Running the check: every target watched concurrently, as the daemon
//! polls them, then judged into one report.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::time::Instant;

use super::judge;
use super::plan::{Options, WatchPlan};
use super::progress::Progress;
use super::report::Report;
use super::watched::Watched;
use crate::config::Config;
use crate::poller::Poller;
use crate::probe::ProbeKind;
use crate::snapshot::SnapshotStore;

/// Runs the check and returns its report.
///
/// # Errors
/// When a target's client cannot be built (an unreadable CA file).
pub async fn run(
    config: Arc<Config>,
    options: Options,
    progress: &Progress,
) -> Result<Report, crate::backend::ClientSetupError> {
    let plan = WatchPlan::new(&config, options);
    if let Some(warning) = plan.too_short() {
        progress.warn(&warning);
    }
    let polling = Arc::new(plan.config(&config));
    let store = Arc::new(SnapshotStore::default());
    let mut pollers = Vec::new();
    for target in &polling.targets {
        pollers.push(Poller::new(polling.clone(), target.clone(), store.clone())?);
    }
    progress.start(&pollers, plan.watch, plan.polls);
    // Targets are watched concurrently, as the daemon polls them.
    let mut runs = tokio::task::JoinSet::new();
    for (i, poller) in pollers.into_iter().enumerate() {
        let progress = progress.clone();
        runs.spawn(async move {
            let watched = watch(&poller, plan, &progress, i).await;
            (i, poller, watched)
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = runs.join_next().await {
        match joined {
            Ok(result) => results.push(result),
            // A panicking probe is a bug; the others' results still count.
            Err(e) => tracing::error!(error = %e, "a target's check panicked"),
        }
    }
    progress.finish();
    results.sort_by_key(|(i, _, _)| *i);
    let targets = store.targets();
    let reports = results
        .iter()
        .filter_map(|(_, poller, watched)| {
            let name = &poller.context().target.name;
            let snapshot = targets.iter().find(|t| *t.name == **name)?;
            Some(judge::target_report(
                &config, &plan, poller, snapshot, watched,
            ))
        })
        .collect();
    Ok(Report::new(reports, plan.watch, plan.required))
}

/// Polls one target for the plan.
async fn watch(poller: &Poller, plan: WatchPlan, progress: &Progress, slot: usize) -> Watched {
    let config = poller.context().config.clone();
    let mut watched = Watched::default();
    let mut due: BTreeMap<ProbeKind, Instant> = BTreeMap::new();
    let run = async |kind: ProbeKind, due: &mut BTreeMap<ProbeKind, Instant>| {
        progress.phase(slot, Some(kind));
        let next = poller.run_probe(kind).await;
        let after = match next {
            crate::schedule::Next::After(d) => d,
            crate::schedule::Next::Grid => kind.interval(&config),
        };
        due.insert(kind, Instant::now() + after);
    };
    for kind in ProbeKind::ALL {
        run(kind, &mut due).await;
    }
    // The stream poll again: the first one ran before the consumers and
    // pending-summary probes, so it could not judge activity.
    run(ProbeKind::Stream, &mut due).await;
    watched.remember(poller);
    let start = Instant::now();
    for k in 1..=plan.polls {
        let at = start + plan.watch * k / plan.polls;
        progress.waiting(slot, at, k);
        tokio::time::sleep_until(at).await;
        let last = k == plan.polls;
        for kind in ProbeKind::ALL {
            if kind == ProbeKind::Stream {
                continue;
            }
            // At the end every per-group probe runs once more, so what is
            // reported is as fresh as the last stream poll.
            let is_due = due.get(&kind).is_some_and(|d| *d <= Instant::now());
            if is_due || (last && kind.per_group()) {
                run(kind, &mut due).await;
            }
        }
        run(ProbeKind::Stream, &mut due).await;
        watched.remember(poller);
    }
    progress.phase(slot, None);
    watched.finish(poller);
    watched
}
