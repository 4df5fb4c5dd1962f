//! What one target's final snapshot and its watch say: the target's problems
//! and notes, and for each group its status (unknown when the watch was too
//! short for it), what is wrong and what is worth knowing.

use std::time::Duration;

use tokio::time::Instant;

use super::plan::WatchPlan;
use super::report::{GroupReport, TargetReport, short, short_secs};
use super::watched::{Baseline, Watched};
use crate::config::{Config, StreamSettings, Target};
use crate::poller::Poller;
use crate::snapshot::{GroupKey, GroupState, PelScan, StreamState, TargetSnapshot};
use crate::status::{self, Basis, GroupStatus};

/// Age above which the oldest pending entry, or the lag, is a problem for a
/// stream without `max_delay`: the alert rules' default.
pub const DEFAULT_DELAY_THRESHOLD: Duration = Duration::from_secs(300);

/// One group as the watch saw it: its final state and what the watch
/// remembered of it.
struct Seen<'a> {
    key: GroupKey,
    stream: &'a StreamState,
    group: &'a GroupState,
    /// What the watch remembered when it first saw the group.
    base: Option<&'a Baseline>,
    /// How long the group was watched.
    span: Duration,
}

/// The report of one target: what is wrong with the target itself, then a
/// report per group, then what its groups cost the per-group probes.
pub(super) fn target_report(
    config: &Config,
    plan: &WatchPlan,
    poller: &Poller,
    t: &TargetSnapshot,
    watched: &Watched,
) -> TargetReport {
    let target = &poller.context().target;
    let mut report = TargetReport {
        name: target.name.clone(),
        up: t.up,
        streams: t.streams.len(),
        problems: Vec::new(),
        notes: Vec::new(),
        groups: Vec::new(),
    };
    if !t.up {
        report.problems.push(format!(
            "unreachable: {}",
            crate::exposition::down_reason(t)
        ));
        return report;
    }
    target_findings(target, t, &mut report);
    let ended = watched.ended.unwrap_or_else(Instant::now);
    for (s, st) in t.streams.iter() {
        if let Some(every) = st.settings.read_every {
            report.notes.push(format!(
                "{}: read every {} (read_every): work waiting between two runs is ok; stopped only once a run is {} overdue",
                crate::safe_names::printable(&**s),
                short(every),
                short(every + plan.required)
            ));
        }
        for (g, gs) in st.groups.iter() {
            let key = (s.clone(), g.clone());
            let base = watched.groups.get(&key);
            let seen = Seen {
                key,
                stream: st,
                group: gs,
                base,
                span: base.map_or(Duration::ZERO, |b| ended - b.first_seen),
            };
            report
                .groups
                .push(group_report(config, plan, t, watched, &seen));
        }
    }
    if !t.streams.is_empty() {
        report.notes.push(per_group_cost(config, poller));
    }
    report
}

/// What a reachable target shows before any group: failed probes, streams
/// left unwatched, no stream at all.
fn target_findings(target: &Target, t: &TargetSnapshot, report: &mut TargetReport) {
    for (kind, p) in &t.probes {
        if let (false, Some(e)) = (p.success, &p.last_error) {
            report
                .problems
                .push(format!("probe {} failed: {e}", kind.label()));
        }
    }
    if let Some(dropped) = t.streams_dropped.filter(|d| *d > 0) {
        report.problems.push(format!(
            "{dropped} streams over max_streams ({}) are not watched",
            target.max_streams
        ));
    }
    if t.streams.is_empty() {
        report.notes.push("no streams found".to_string());
    }
}

/// One group's figures, then what is wrong (its status first), then what
/// is worth knowing.
fn group_report(
    config: &Config,
    plan: &WatchPlan,
    t: &TargetSnapshot,
    watched: &Watched,
    seen: &Seen,
) -> GroupReport {
    let (st, gs, key) = (seen.stream, seen.group, &seen.key);
    let status = watched_status(gs, seen.span, plan);
    let scan = t.scans.get(key).and_then(|sc| sc.last.clone());
    let scan_progress = t.scans.get(key).map(|sc| sc.progress);
    let consumers = t.consumers.get(key);
    let mut group = GroupReport {
        stream: key.0.clone(),
        group: key.1.clone(),
        status,
        lag: gs.lag,
        lag_estimated: gs.lag_estimated,
        lag_seconds: gs.lag_seconds,
        pending: gs.pending,
        consumers: gs.consumers,
        oldest_pending_age_seconds: t.oldest_pending_age(key),
        max_idle_seconds: scan
            .as_ref()
            .and_then(|sc| sc.max_idle_ms)
            .map(|ms| ms as f64 / 1000.0),
        poison: scan.as_ref().map(|sc| sc.poison),
        ghosts: scan.as_ref().map(|sc| sc.ghost),
        orphaned: consumers.map(|c| c.orphaned),
        inactive_after: consumers.map(|c| c.inactive_after),
        dead_letters: st.dead_letter.map(|d| d.length),
        trimmed_undelivered: gs.trimmed_undelivered,
        watched_seconds: seen.span.as_secs_f64(),
        problems: Vec::new(),
        notes: Vec::new(),
    };
    let mut problems: Vec<String> = status_problem(config, watched, seen, status)
        .into_iter()
        .collect();
    problems.extend(figure_problems(&group, watched, seen));
    group.problems = problems;
    group.notes = group_notes(&group, plan, seen, scan.as_deref(), scan_progress);
    group
}

/// The group's status as far as the watch can tell: a status resting on
/// the window counts only when the group was watched for the daemon's
/// whole window; `None` is unknown.
fn watched_status(gs: &GroupState, span: Duration, plan: &WatchPlan) -> Option<GroupStatus> {
    match (gs.status, gs.status_basis) {
        (Some(status), Some(Basis::Latest)) => Some(status),
        (Some(status), Some(Basis::Window)) if span >= plan.required => Some(status),
        // Nothing to do is proven; only whether anything was produced
        // meanwhile is not: ok rather than idle.
        (Some(GroupStatus::Idle), Some(Basis::Window)) => Some(GroupStatus::Ok),
        _ => None,
    }
}

/// What a bad status means for this group, in words; `None` for a status
/// that is no problem (or unknown).
fn status_problem(
    config: &Config,
    watched: &Watched,
    seen: &Seen,
    status: Option<GroupStatus>,
) -> Option<String> {
    let (gs, span) = (seen.group, seen.span);
    match status {
        Some(GroupStatus::DataLoss) => Some(data_loss_problem(config, seen)),
        Some(GroupStatus::Stopped) if gs.consumers == 0 => Some(format!(
            "stopped: no consumer in the group, with {} waiting",
            work(gs.lag, gs.pending)
        )),
        Some(GroupStatus::Stopped) => Some(format!(
            "stopped: no consumer read successfully in the {} watched, with {} waiting",
            short(span),
            work(gs.lag, gs.pending)
        )),
        Some(GroupStatus::Stalled) => Some(stalled_problem(watched, seen)),
        Some(GroupStatus::Lagging) => Some(lagging_problem(seen)),
        _ => None,
    }
}

/// `data_loss`: the entries gone while the group is behind the trimming
/// edge, when Redis says, else the losses counted during the check.
fn data_loss_problem(config: &Config, seen: &Seen) -> String {
    let gs = seen.group;
    match gs.trimmed_undelivered {
        Some(n) if n > 0 => {
            // Entries before the first one went by trimming or by XDEL of
            // the head; the ledger's causes tell which, once it counted.
            let how = match gs.lost {
                Some(l) if l.deleted > 0 && l.trimmed + l.either == 0 => "deleted",
                Some(l) if l.deleted + l.either > 0 => "trimmed or deleted",
                _ => "trimmed",
            };
            format!("data_loss: {n} entries were {how} before this group read them")
        }
        _ => format!(
            "data_loss: entries were removed before this group read them (lost {} since the check started; the status holds {} after a loss)",
            gs.lost
                .map_or(0, |l| l.total())
                .saturating_sub(seen.base.map_or(0, |b| b.lost)),
            humantime::format_duration(config.data_loss_hold)
        ),
    }
}

/// `stalled`: the oldest pending entry that stayed, or else the position
/// that did not move.
fn stalled_problem(watched: &Watched, seen: &Seen) -> String {
    let (gs, span) = (seen.group, seen.span);
    if span.is_zero() {
        // One look: what it saw in the PEL, not a watch it did not make.
        return "stalled: its oldest pending entries cannot progress (poison, ghost or orphaned entries, below)".to_string();
    }
    let oldest_then = seen.base.and_then(|b| b.oldest_pending);
    let oldest_now = watched.oldest_pending.get(&seen.key).copied().flatten();
    if gs.pending > 0 && oldest_then.is_some() && oldest_then == oldest_now {
        format!(
            "stalled: the oldest pending entry ({}) was not acknowledged in the {} watched",
            oldest_now.map_or_else(String::new, |id| id.to_string()),
            short(span)
        )
    } else {
        format!(
            "stalled: the group's position did not move in the {} watched, with {} waiting",
            short(span),
            work(gs.lag, gs.pending)
        )
    }
}

/// `lagging`: the first of the reasons that holds, from the lag's age to
/// a lag that never fell.
fn lagging_problem(seen: &Seen) -> String {
    let (st, gs, span) = (seen.stream, seen.group, seen.span);
    match (gs.lag_seconds, st.settings.max_delay) {
        (Some(age), Some(max)) if age > max.as_secs_f64() / 2.0 => format!(
            "lagging: the oldest undelivered entry is {} old, over half of max_delay ({})",
            short_secs(age),
            short(max)
        ),
        (Some(age), None) if age > status::DEFAULT_LAG_SECONDS_LAGGING => format!(
            "lagging: the oldest undelivered entry is {} old, over {} (no max_delay set)",
            short_secs(age),
            short_secs(status::DEFAULT_LAG_SECONDS_LAGGING)
        ),
        _ if gs.overtake_eta.is_some() => format!(
            "lagging: at the recent rates trimming reaches entries it has not read in {}",
            short_secs(gs.overtake_eta.unwrap_or_default())
        ),
        (_, Some(max)) if gs.retention_margin.is_some_and(|m| m < max.as_secs_f64()) => format!(
            "lagging: its first unread entry is {} from the trimming edge, under max_delay ({})",
            short_secs(gs.retention_margin.unwrap_or_default()),
            short(max)
        ),
        _ => format!(
            "lagging: the lag never fell in the {} watched (now {})",
            short(span),
            gs.lag.map_or("unknown".to_string(), |l| l.to_string())
        ),
    }
}

/// Age above which the lag or the oldest pending entry is a problem: half
/// of `max_delay`, else the alert rules' default.
fn delay_threshold(settings: &StreamSettings) -> Duration {
    settings
        .max_delay
        .map_or(DEFAULT_DELAY_THRESHOLD, |d| d / 2)
}

/// What the group's figures show wrong whatever its status: old work,
/// poison, ghosts, orphaned entries, a position past the stream's end,
/// dead letters arriving.
fn figure_problems(group: &GroupReport, watched: &Watched, seen: &Seen) -> Vec<String> {
    let (st, gs, span) = (seen.stream, seen.group, seen.span);
    let threshold = delay_threshold(&st.settings);
    let mut problems = Vec::new();
    if let Some(age) = gs.lag_seconds.filter(|a| *a > threshold.as_secs_f64()) {
        if group.status != Some(GroupStatus::Lagging) {
            problems.push(format!(
                "lag: the oldest undelivered entry is {} old (over {})",
                short_secs(age),
                short(threshold)
            ));
        }
    }
    if let Some(age) = group
        .oldest_pending_age_seconds
        .filter(|a| *a > threshold.as_secs_f64())
    {
        problems.push(format!(
            "the oldest pending entry was produced {} ago (over {}) and is still not acknowledged",
            short_secs(age),
            short(threshold)
        ));
    }
    if let Some(n) = group.poison.filter(|n| *n > 0) {
        problems.push(format!(
            "{n} poison entries (delivered at least {} times)",
            st.settings.poison_delivery_count
        ));
    }
    if let Some(n) = group.ghosts.filter(|n| *n > 0) {
        problems.push(format!(
            "{n} ghost entries: pending, but their bodies were trimmed or deleted"
        ));
    }
    if let Some(n) = group.orphaned.filter(|n| *n > 0) {
        problems.push(format!(
            "{n} pending entries held by consumers inactive for more than {}",
            group
                .inactive_after
                .map_or_else(|| "its inactivity limit".to_string(), short)
        ));
    }
    if gs.ahead_of_stream {
        problems.push(
            "last-delivered-id is beyond the stream's last ID: entries added with smaller IDs will never be delivered"
                .to_string(),
        );
    }
    if let (Some(then), Some(now)) = (watched.dead_letters.get(&seen.key.0), group.dead_letters) {
        if now > *then {
            problems.push(format!(
                "{} dead letters arrived in the {} watched",
                now - then,
                short(span)
            ));
        }
    }
    problems
}

/// What is worth knowing about the group but not wrong: an estimated lag,
/// rewinds, pending growing, a PEL scan short of its end, dead letters.
fn group_notes(
    group: &GroupReport,
    plan: &WatchPlan,
    seen: &Seen,
    scan: Option<&PelScan>,
    scan_progress: Option<f64>,
) -> Vec<String> {
    let (gs, span) = (seen.group, seen.span);
    let mut notes = Vec::new();
    if gs.lag_estimated && gs.lag.is_some() {
        notes.push("lag estimated (Redis gave none that can be trusted)".to_string());
    }
    if let Some(base) = seen.base {
        if gs.rewinds > base.rewinds {
            notes.push(format!(
                "the group's position moved backwards {} times",
                gs.rewinds - base.rewinds
            ));
        }
        if !plan.watch.is_zero() && gs.pending > base.pending {
            notes.push(format!(
                "pending grew from {} to {} in the {} watched",
                base.pending,
                gs.pending,
                short(span)
            ));
        }
    }
    match (scan, scan_progress) {
        (Some(sc), _) if sc.ghost_unchecked > 0 => notes.push(format!(
            "{} possible ghosts not checked (limits.ghost_checks_per_scan)",
            sc.ghost_unchecked
        )),
        (None, Some(p)) if gs.pending > 0 => notes.push(format!(
            "the PEL scan did not finish ({:.0}% read): poison and ghosts unknown",
            p * 100.0
        )),
        _ => {}
    }
    if let Some(dl) = group.dead_letters.filter(|n| *n > 0) {
        if plan.watch.is_zero() {
            notes.push(format!(
                "{dl} dead letters (whether more arrive needs --watch)"
            ));
        }
    }
    notes
}

/// What the target's groups cost the per-group probes at the daemon's
/// intervals: idle groups cost little or nothing, and the note says so.
fn per_group_cost(config: &Config, poller: &Poller) -> String {
    let lines: Vec<crate::probe::GroupLine> = crate::probe::group_lines(&poller.context().state())
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    let cost = crate::probe::GroupCost::of(&lines, config);
    format!(
        "per-group probes: about {:.1} commands/s at the configured intervals \
         ({:.1}/s if every group were asked every run): {} asked every run, \
         {} idle with consumers (read one run in {}), {} with nothing to ask",
        cost.per_second,
        cost.every_group_per_second,
        plural_groups(cost.with_work),
        cost.idle_with_consumers,
        cost.idle_every,
        cost.nothing_to_ask,
    )
}

/// "1 group", "3 groups".
fn plural_groups(n: usize) -> String {
    if n == 1 {
        "1 group".to_string()
    } else {
        format!("{n} groups")
    }
}

/// "12 undelivered and 3 pending entries", for messages.
fn work(lag: Option<u64>, pending: u64) -> String {
    match (lag.filter(|l| *l > 0), pending) {
        (Some(l), 0) => format!("{l} undelivered entries"),
        (Some(l), p) => format!("{l} undelivered and {p} pending entries"),
        (None, 0) => "undelivered work".to_string(),
        (None, p) => format!("{p} pending entries"),
    }
}
