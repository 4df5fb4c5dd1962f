//! The oracle's comparison: at every poll, each exported figure against the
//! model's truth, and the loss counters against what the contract promises
//! to prove.
//!
//! Losses are accounted per group and per epoch (an epoch ends when the
//! group is positioned from outside: created, SETID). Over an epoch the
//! exported counters, less their value at the epoch's first poll, must lie
//! between a lower bound (losses the contract proves: for each interval
//! between two polls where entries-read was valid at both, on the same
//! server process, not ahead of the stream and within the counting budget,
//! the entries removed while unread in the range the group advanced over)
//! and an upper bound (the provable intervals' advance of entries-read less
//! the survivors, which is the truth plus entries read and then removed in
//! the same interval; plus, for every other interval, the unread removals
//! the group read past; plus the unread removals still ahead of the group,
//! which a trim that overtook it lets the exporter count before it reads
//! past them).

use std::collections::BTreeMap;

use super::model::{Cause, Id, Model};
use super::ops::{Driver, Event, GROUPS, RawGroup, STREAMS};
use crate::common::{Metrics, Server, tsg};

/// The most entries the exporter counts in one range with XRANGE in a poll
/// (its survivors' budget): a range with more survivors is not provable.
pub const COUNT_BUDGET: u64 = 2000;

#[derive(Clone, Debug)]
pub struct Failure {
    pub poll: usize,
    /// Which check failed (a shrunk replay must fail the same one).
    pub check: String,
    pub detail: String,
}

fn fail<T>(poll: usize, check: &str, detail: String) -> Result<T, Failure> {
    Err(Failure {
        poll,
        check: check.to_string(),
        detail,
    })
}

/// Counts for the report.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub polls: u64,
    pub failed_polls: u64,
    pub provable_intervals: u64,
    pub provable_losses: u64,
    pub unprovable_intervals_with_loss: u64,
    pub unprovable_losses: u64,
    /// Provable intervals where entries were read and then removed in the
    /// same interval: the contract's arithmetic counts them as lost.
    pub read_then_removed: Vec<String>,
    /// Intervals the contract proves that the exporter marked unproven
    /// for a reason the model confirms.
    pub marked_unproven: u64,
    /// Of those, the group's first advance seen, with unread removals.
    pub first_advance_unproven: Vec<String>,
    /// Of those, after an advance from a poll without entries-read that
    /// removed nothing.
    pub misread_routine: Vec<String>,
    pub lag_exact: u64,
    pub lag_estimated: u64,
    pub lag_estimate_abs_error: u64,
}

#[derive(Clone, Debug)]
struct Point {
    ld: Id,
    entries_read: Option<u64>,
    run_id: String,
    ahead: bool,
}

#[derive(Clone, Debug)]
struct Account {
    epoch: u64,
    /// Exported (trimmed, deleted) at the epoch's first poll.
    base: [f64; 2],
    /// Exported (trimmed, deleted) at the last poll.
    last_exported: [f64; 2],
    prev: Point,
    /// Lower and upper bounds so far: trimmed, deleted, total.
    low: [u64; 3],
    high: [u64; 3],
    /// The upper bound for the total without the contract's allowance for
    /// entries read and removed in one interval: the truth.
    high_truth: u64,
    /// Unread removals ahead of the group at the last poll.
    last_outstanding: u64,
    /// Unread removals made before the epoch's first poll: that poll's
    /// figures are the exporter's baseline, so the contract does not
    /// promise to count them (they stay within the upper bound).
    before_baseline: std::collections::BTreeSet<Id>,
    /// Whether the group's last advance in this epoch showed a removal (in
    /// the range it passed over, or a deletion past its old position): the
    /// exporter does not prove a removal that follows one (its consumers
    /// or a short window remove what it reads). `None` before the first.
    last_advance_removal: Option<bool>,
    /// The poll and range of that advance, for failure messages.
    last_advance_at: Option<(usize, Id, Id)>,
    /// Whether that advance started at a poll where entries-read was
    /// unknown.
    last_advance_from_unknown: bool,
    /// Exported unproven intervals by reason at the last poll.
    last_unproven: [f64; 3],
    /// Entries were removed from the stream in the interval before this
    /// one: the exporter does not prove a removal that follows one (a
    /// stream trimmed or cleaned at every poll removes what was just read).
    removed_last_interval: bool,
}

#[derive(Clone, Debug)]
struct Name {
    rewinds: Option<f64>,
    ld: Id,
    run_id: String,
    /// The model has had an unread removal for this group.
    had_loss: bool,
}

pub struct Checker {
    kind: Server,
    /// The exporter's known discrepancies to fail on too (the truth, not
    /// the contract), to shrink them to replays: `RSE_ORACLE_STRICT=all`
    /// or a comma-separated list of `first_advance_unproven`,
    /// `misread_routine`, `false_loss`.
    strict: Vec<String>,
    accounts: BTreeMap<(String, String), Account>,
    names: BTreeMap<(String, String), Name>,
    pub stats: Stats,
}

/// What the poll read from the server itself (quiescent during the poll).
pub struct Raw {
    pub run_id: String,
    pub groups: BTreeMap<(String, String), RawGroup>,
}

fn lost(m: &Metrics, s: &str, g: &str, cause: &str) -> Option<f64> {
    m.get(
        "redis_streams_group_lost_entries_total",
        &[
            ("target", "t"),
            ("stream", s),
            ("group", g),
            ("cause", cause),
        ],
    )
}

fn exported_lost(m: &Metrics, s: &str, g: &str) -> [f64; 2] {
    [
        lost(m, s, g, "trimmed").unwrap_or(0.0),
        lost(m, s, g, "deleted").unwrap_or(0.0),
    ]
}

/// The exporter's unproven loss intervals by reason.
pub const UNPROVEN_REASONS: [&str; 3] = ["no_entries_read", "routine_removal", "not_counted"];

fn exported_unproven(m: &Metrics, s: &str, g: &str) -> [f64; 3] {
    UNPROVEN_REASONS.map(|reason| {
        m.get(
            "redis_streams_group_loss_unproven_total",
            &[
                ("target", "t"),
                ("stream", s),
                ("group", g),
                ("reason", reason),
            ],
        )
        .unwrap_or(0.0)
    })
}

pub fn status_of(m: &Metrics, s: &str, g: &str) -> Option<String> {
    let prefix =
        format!("redis_streams_group_status{{target=\"t\",stream=\"{s}\",group=\"{g}\",status=\"");
    m.family("redis_streams_group_status")
        .iter()
        .find(|(k, v)| k.starts_with(&prefix) && *v == 1.0)
        .map(|(k, _)| k[prefix.len()..k.len() - 2].to_string())
}

/// Checks the model against the server's own replies: a difference is a
/// bug of the oracle, not of the exporter.
pub fn verify_model(d: &mut Driver, poll: usize) -> Result<Raw, Failure> {
    let run_id = d.run_id();
    let mut groups = BTreeMap::new();
    for key in STREAMS {
        let in_model = d.model.streams.contains_key(key);
        if d.exists(key) != in_model {
            return fail(
                poll,
                "model",
                format!("{key}: exists on the server {}", !in_model),
            );
        }
        if !in_model {
            continue;
        }
        let ids = d.server_ids(key);
        let (len, last, added) = d.raw_stream(key);
        let raw = d.raw_groups(key);
        let st = &d.model.streams[key];
        if ids != st.present || len != st.present.len() as u64 || last != st.last_gen {
            return fail(
                poll,
                "model",
                format!(
                    "{key}: server {} entries, last {last}; model {} entries, last {}",
                    ids.len(),
                    st.present.len(),
                    st.last_gen
                ),
            );
        }
        if d.kind.has_lag() && added != Some(st.added) {
            return fail(
                poll,
                "model",
                format!("{key}: entries-added {added:?} vs {}", st.added),
            );
        }
        let names: Vec<&String> = raw.keys().collect();
        let model_names: Vec<&String> = st.groups.keys().collect();
        if names != model_names {
            return fail(
                poll,
                "model",
                format!("{key}: groups {names:?} vs {model_names:?}"),
            );
        }
        for (name, r) in &raw {
            let g = &st.groups[name];
            if r.ld != g.ld
                || r.pending != g.pel.len() as u64
                || r.consumers != g.consumers.len() as u64
            {
                return fail(
                    poll,
                    "model",
                    format!(
                        "{key}/{name}: server ld {} pending {} consumers {}; model {} {} {}",
                        r.ld,
                        r.pending,
                        r.consumers,
                        g.ld,
                        g.pel.len(),
                        g.consumers.len()
                    ),
                );
            }
            groups.insert((key.to_string(), name.clone()), r.clone());
        }
    }
    Ok(Raw { run_id, groups })
}

impl Checker {
    pub fn new(kind: Server, strict: Vec<String>) -> Checker {
        Checker {
            kind,
            strict,
            accounts: BTreeMap::new(),
            names: BTreeMap::new(),
            stats: Stats::default(),
        }
    }

    /// Compares one successful poll with the model. `events` are those
    /// since the last successful poll.
    pub fn check(
        &mut self,
        poll: usize,
        model: &Model,
        m: &Metrics,
        raw: &Raw,
        events: &[Event],
    ) -> Result<(), Failure> {
        self.stats.polls += 1;
        let new_server = events.contains(&Event::NewServer);
        // The streams exported are the streams there are.
        let exported: Vec<String> = m
            .family("redis_streams_stream_length")
            .iter()
            .map(|(k, _)| label(k, "stream"))
            .collect();
        let truth: Vec<String> = model.streams.keys().cloned().collect();
        if exported != truth {
            return fail(
                poll,
                "streams",
                format!("exported streams {exported:?}, true {truth:?}"),
            );
        }
        for (key, st) in &model.streams {
            let sl = [("target", "t"), ("stream", key.as_str())];
            let len = m.get("redis_streams_stream_length", &sl);
            if len != Some(st.present.len() as f64) {
                return fail(
                    poll,
                    "stream_length",
                    format!("{key}: exported {len:?}, true {}", st.present.len()),
                );
            }
            let added = m.get("redis_streams_stream_entries_added_total", &sl);
            let want = self.kind.has_lag().then_some(st.added as f64);
            if added != want {
                return fail(
                    poll,
                    "entries_added",
                    format!("{key}: exported {added:?}, true {want:?}"),
                );
            }
            let groups = m.get("redis_streams_stream_groups", &sl);
            if groups != Some(st.groups.len() as f64) {
                return fail(
                    poll,
                    "groups",
                    format!("{key}: exported {groups:?}, true {}", st.groups.len()),
                );
            }
            let exported_groups: Vec<String> = m
                .family("redis_streams_group_pending")
                .iter()
                .filter(|(k, _)| label(k, "stream") == *key)
                .map(|(k, _)| label(k, "group"))
                .collect();
            let true_groups: Vec<String> = st.groups.keys().cloned().collect();
            if exported_groups != true_groups {
                return fail(
                    poll,
                    "group_set",
                    format!("{key}: exported groups {exported_groups:?}, true {true_groups:?}"),
                );
            }
            for (name, g) in &st.groups {
                let l = tsg(key, name);
                let at = format!("{key}/{name}");
                let pending = m.get("redis_streams_group_pending", &l);
                if pending != Some(g.pel.len() as f64) {
                    return fail(
                        poll,
                        "group_pending",
                        format!("{at}: exported {pending:?}, true {}", g.pel.len()),
                    );
                }
                let consumers = m.get("redis_streams_group_consumers", &l);
                if consumers != Some(g.consumers.len() as f64) {
                    return fail(
                        poll,
                        "group_consumers",
                        format!("{at}: exported {consumers:?}, true {}", g.consumers.len()),
                    );
                }
                let ahead = m.get("redis_streams_group_ahead_of_stream", &l);
                let true_ahead = if g.ld > st.last_gen { 1.0 } else { 0.0 };
                if ahead != Some(true_ahead) {
                    return fail(
                        poll,
                        "ahead_of_stream",
                        format!(
                            "{at}: exported {ahead:?}, true {true_ahead} (ld {}, last {})",
                            g.ld, st.last_gen
                        ),
                    );
                }
                let r = &raw.groups[&(key.clone(), name.clone())];
                let read = m.get("redis_streams_group_entries_read", &l);
                if read != r.entries_read.map(|n| n as f64) {
                    return fail(
                        poll,
                        "entries_read",
                        format!("{at}: exported {read:?}, Redis {:?}", r.entries_read),
                    );
                }
                // Lag: exact unless flagged, and a flagged one inside [0, XLEN].
                let true_lag = st.lag(g.ld);
                let lag = m.get("redis_streams_group_lag", &l);
                match m.get("redis_streams_group_lag_estimated", &l) {
                    Some(0.0) => {
                        self.stats.lag_exact += 1;
                        if lag != Some(true_lag as f64) {
                            return fail(
                                poll,
                                "lag_exact",
                                format!(
                                    "{at}: exported {lag:?} as exact, true {true_lag} (Redis said {:?}, entries-read {:?}, ld {}, first {:?}, len {})",
                                    r.lag,
                                    r.entries_read,
                                    g.ld,
                                    st.present.first(),
                                    st.present.len()
                                ),
                            );
                        }
                    }
                    Some(1.0) => {
                        self.stats.lag_estimated += 1;
                        if let Some(v) = lag {
                            if !(0.0..=st.present.len() as f64).contains(&v) {
                                return fail(
                                    poll,
                                    "lag_estimate_bounds",
                                    format!(
                                        "{at}: estimated {v} outside [0, {}], true {true_lag}",
                                        st.present.len()
                                    ),
                                );
                            }
                            self.stats.lag_estimate_abs_error += (v - true_lag as f64).abs() as u64;
                        }
                    }
                    other => {
                        return fail(
                            poll,
                            "lag_estimated",
                            format!("{at}: lag_estimated {other:?}, lag {lag:?}"),
                        );
                    }
                }
                for c in &g.consumers {
                    let cl = [
                        ("target", "t"),
                        ("stream", key.as_str()),
                        ("group", name.as_str()),
                        ("consumer", c.as_str()),
                    ];
                    let held = m.get("redis_streams_consumer_pending", &cl);
                    if held != Some(g.pending_of(c) as f64) {
                        return fail(
                            poll,
                            "consumer_pending",
                            format!("{at}/{c}: exported {held:?}, true {}", g.pending_of(c)),
                        );
                    }
                }
                self.losses(poll, key, name, model, m, r, &raw.run_id, events)?;
                self.rewinds_and_status(
                    poll,
                    key,
                    name,
                    model,
                    m,
                    &raw.run_id,
                    events,
                    new_server,
                )?;
            }
        }
        // Accounts of groups gone.
        self.accounts.retain(|(s, g), _| {
            model
                .streams
                .get(s)
                .is_some_and(|st| st.groups.contains_key(g))
        });
        self.names.retain(|(s, g), _| {
            model
                .streams
                .get(s)
                .is_some_and(|st| st.groups.contains_key(g))
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn losses(
        &mut self,
        poll: usize,
        key: &str,
        name: &str,
        model: &Model,
        m: &Metrics,
        r: &RawGroup,
        run_id: &str,
        events: &[Event],
    ) -> Result<(), Failure> {
        let st = &model.streams[key];
        let g = &st.groups[name];
        let at = format!("{key}/{name}");
        let now = exported_lost(m, key, name);
        let unproven_now = exported_unproven(m, key, name);
        let point = Point {
            ld: g.ld,
            entries_read: r.entries_read,
            run_id: run_id.to_string(),
            ahead: g.ld > st.last_gen,
        };
        let outstanding: u64 = g
            .removed_unread
            .range((std::ops::Bound::Excluded(g.ld), std::ops::Bound::Unbounded))
            .count() as u64;
        let id = (key.to_string(), name.to_string());
        let s_index = STREAMS.iter().position(|s| *s == key).unwrap();
        let g_index = GROUPS.iter().position(|x| *x == name).unwrap();
        let removed_in_interval: u64 = events
            .iter()
            .filter_map(|e| match e {
                Event::Removed { s, n } if *s == s_index => Some(*n),
                _ => None,
            })
            .sum();
        let positioned = events.contains(&Event::Positioned {
            s: s_index,
            g: g_index,
        });
        let fresh = |base: [f64; 2]| Account {
            epoch: g.epoch,
            base,
            last_exported: base,
            prev: point.clone(),
            low: [0; 3],
            high: [0; 3],
            high_truth: 0,
            last_outstanding: outstanding,
            before_baseline: g.removed_unread.keys().copied().collect(),
            last_advance_removal: None,
            last_advance_at: None,
            last_advance_from_unknown: false,
            last_unproven: unproven_now,
            removed_last_interval: false,
        };
        let Some(acct) = self.accounts.get_mut(&id) else {
            self.accounts.insert(id, fresh(now));
            return Ok(());
        };
        if acct.epoch != g.epoch || positioned {
            // The group was positioned from outside in this interval: its
            // figures start over. The exporter may have counted in this
            // interval only what could have been lost in it.
            let delta = (now[0] + now[1]) - (acct.last_exported[0] + acct.last_exported[1]);
            let allowed = removed_in_interval + acct.last_outstanding;
            if delta > allowed as f64 {
                return fail(
                    poll,
                    "lost_across_reposition",
                    format!(
                        "{at}: counted {delta} in an interval where the group was positioned anew; at most {allowed} entries could have been lost"
                    ),
                );
            }
            *acct = fresh(now);
            return Ok(());
        }
        let prev = acct.prev.clone();
        let lo = prev.ld;
        let hi = g.ld;
        let before_baseline = &acct.before_baseline;
        let in_range = |c: Option<Cause>, after_baseline: bool| -> u64 {
            if hi <= lo {
                return 0;
            }
            g.removed_unread
                .range((std::ops::Bound::Excluded(lo), std::ops::Bound::Included(hi)))
                .filter(|(id, cause)| {
                    c.is_none_or(|c| **cause == c)
                        && !(after_baseline && before_baseline.contains(id))
                })
                .count() as u64
        };
        let survivors = st.present_in(lo, hi);
        let provable = self.kind.has_lag()
            && prev.entries_read.is_some()
            && point.entries_read.is_some()
            && prev.run_id == point.run_id
            && !prev.ahead
            && !point.ahead
            && survivors <= COUNT_BUDGET;
        let truth = in_range(None, false);
        let proven = in_range(None, true);
        let marked: Vec<&str> = (0..3)
            .filter(|i| unproven_now[*i] > acct.last_unproven[*i])
            .map(|i| UNPROVEN_REASONS[i])
            .collect();
        let lost_now = now[0] + now[1] - acct.last_exported[0] - acct.last_exported[1];
        let advanced = hi > lo;
        // What the exporter sees of this advance: a removal in the range,
        // or a deletion past the old position (max-deleted-entry-id).
        let removal_signal = advanced
            && (st.ever_in(lo, hi) > survivors
                || st
                    .removed
                    .iter()
                    .any(|(id, c)| *c == Cause::Deleted && *id > lo));
        let mut provable = provable;
        if provable && !marked.is_empty() {
            // The exporter calls an interval unproven that the contract
            // proves. Only one reason can stand: the group's previous
            // advance removed entries too (a consumer that deletes what it
            // reads would otherwise pass for a loss at every poll).
            // Documented limitation, counted for the report: the exporter
            // also calls the first advance it sees (after it started, a
            // rewind or a new server) routine, although nothing routine was
            // seen yet.
            //
            // Excluded discrepancy, counted for the report: when the
            // previous advance started at a poll where entries-read was
            // unknown, the exporter takes "the first entry lies past the old
            // position" for a trim (IDs are sparse: a group at 0-0 or at `$`
            // of an empty stream always looks so), calls that advance a
            // removal, and the next advance's provable loss routine.
            let heuristic =
                acct.last_advance_removal == Some(false) && acct.last_advance_from_unknown;
            let routine_ok = marked == ["routine_removal"]
                && (acct.last_advance_removal != Some(false)
                    || heuristic
                    || acct.removed_last_interval);
            if !routine_ok {
                return fail(
                    poll,
                    "unproven_reason",
                    format!(
                        "{at}: interval ({lo}, {hi}] marked unproven {marked:?}, but entries-read was valid at both polls ({:?} -> {:?}), {survivors} survivors (cap {COUNT_BUDGET}), the previous advance {:?} removed {:?}; true unread removals in range: {truth}; max deleted {:?}, first entry {:?}",
                        prev.entries_read,
                        point.entries_read,
                        acct.last_advance_at,
                        acct.last_advance_removal,
                        st.removed
                            .iter()
                            .filter(|(_, c)| **c == Cause::Deleted)
                            .map(|(id, _)| *id)
                            .max(),
                        st.present.first()
                    ),
                );
            }
            let excluded = if heuristic {
                "misread_routine"
            } else {
                "first_advance_unproven"
            };
            if is_strict(&self.strict, excluded)
                && proven > 0
                && (heuristic || acct.last_advance_removal.is_none())
            {
                return fail(
                    poll,
                    excluded,
                    format!(
                        "{at}: ({lo}, {hi}] {proven} unread removals since the baseline read past (entries-read {:?} -> {:?}), marked routine_removal, not counted; the previous advance {:?} removed {:?}",
                        prev.entries_read,
                        point.entries_read,
                        acct.last_advance_at,
                        acct.last_advance_removal
                    ),
                );
            }
            if heuristic && proven > 0 {
                self.stats.misread_routine.push(format!(
                    "poll {poll} {at}: ({lo}, {hi}] {proven} unread removals read past, marked routine_removal because the previous advance {:?} (from a poll without entries-read, nothing removed) was taken for a removal",
                    acct.last_advance_at
                ));
            }
            if acct.last_advance_removal.is_none() && proven > 0 {
                self.stats.first_advance_unproven.push(format!(
                    "poll {poll} {at}: ({lo}, {hi}] {proven} unread removals read past at the group's first advance since the baseline: marked routine_removal, not counted"
                ));
            }
            self.stats.marked_unproven += 1;
            provable = false;
        }
        if provable {
            self.stats.provable_intervals += 1;
            // The contract's figure: every ID added in the range less the
            // survivors. It exceeds the truth by entries read and removed
            // in this same interval.
            let contract = st.ever_in(lo, hi) - survivors;
            let removed_causes: Vec<Cause> = st
                .removed
                .range((std::ops::Bound::Excluded(lo), std::ops::Bound::Included(hi)))
                .map(|(_, c)| *c)
                .collect();
            let trims = removed_causes.contains(&Cause::Trimmed);
            let dels = removed_causes.contains(&Cause::Deleted);
            if contract > truth {
                self.stats.read_then_removed.push(format!(
                    "poll {poll} {at}: ({lo}, {hi}] {contract} removed, {truth} of them unread; the exporter counted {lost_now} lost in this interval{}",
                    if lost_now > truth as f64 { " (a false loss: more than the truth)" } else { "" }
                ));
            }
            self.stats.provable_losses += proven;
            acct.high_truth += truth;
            acct.low[2] += proven;
            acct.high[2] += contract;
            match (trims, dels) {
                (true, false) => {
                    acct.low[0] += proven;
                    acct.high[0] += contract;
                }
                (false, true) => {
                    acct.low[1] += proven;
                    acct.high[1] += contract;
                }
                _ => {
                    acct.high[0] += contract;
                    acct.high[1] += contract;
                }
            }
        } else if truth > 0 {
            self.stats.unprovable_intervals_with_loss += 1;
            self.stats.unprovable_losses += truth;
            for h in &mut acct.high {
                *h += truth;
            }
            acct.high_truth += truth;
            // A loss that cannot be proven is marked, never a silent 0
            // (where Redis reports entries-read at all, on the same server
            // process, after the baseline).
            if self.kind.has_lag()
                && prev.run_id == point.run_id
                && proven > 0
                && lost_now <= 0.0
                && marked.is_empty()
            {
                return fail(
                    poll,
                    "loss_unmarked",
                    format!(
                        "{at}: the group read past {proven} unread removals in ({lo}, {hi}] (entries-read {:?} -> {:?}); neither counted nor marked unproven",
                        prev.entries_read, point.entries_read
                    ),
                );
            }
        }
        acct.removed_last_interval = removed_in_interval > 0;
        if advanced {
            acct.last_advance_removal = Some(removal_signal);
            acct.last_advance_at = Some((poll, lo, hi));
            acct.last_advance_from_unknown = prev.entries_read.is_none();
        }
        if prev.run_id != point.run_id {
            acct.last_advance_removal = None;
        }
        let counted = [
            now[0] - acct.base[0],
            now[1] - acct.base[1],
            now[0] + now[1] - acct.base[0] - acct.base[1],
        ];
        if is_strict(&self.strict, "false_loss")
            && counted[2] > (acct.high_truth + outstanding) as f64
        {
            return fail(
                poll,
                "false_loss",
                format!(
                    "{at}: lost_entries_total counted {} since the epoch's first poll, the group lost at most {} (entries it read and that were removed after are not lost); interval ({lo}, {hi}], entries-read {:?} -> {:?}",
                    counted[2],
                    acct.high_truth + outstanding,
                    prev.entries_read,
                    point.entries_read
                ),
            );
        }
        let cause_names = ["trimmed", "deleted", "total"];
        for i in 0..3 {
            let high = acct.high[i] + outstanding;
            if counted[i] < acct.low[i] as f64 || counted[i] > high as f64 {
                return fail(
                    poll,
                    &format!("lost_{}", cause_names[i]),
                    format!(
                        "{at}: lost_entries_total {} counted {} since the epoch's first poll; provable at least {}, possible at most {} ({} of them unread removals still ahead of the group); interval ({lo}, {hi}], entries-read {:?} -> {:?}, provable {provable}, unread removed in range by cause: trimmed {}, deleted {}",
                        cause_names[i],
                        counted[i],
                        acct.low[i],
                        high,
                        outstanding,
                        prev.entries_read,
                        point.entries_read,
                        in_range(Some(Cause::Trimmed), false),
                        in_range(Some(Cause::Deleted), false),
                    ),
                );
            }
        }
        acct.prev = point;
        acct.last_exported = now;
        acct.last_outstanding = outstanding;
        acct.last_unproven = unproven_now;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn rewinds_and_status(
        &mut self,
        poll: usize,
        key: &str,
        name: &str,
        model: &Model,
        m: &Metrics,
        run_id: &str,
        events: &[Event],
        new_server: bool,
    ) -> Result<(), Failure> {
        let st = &model.streams[key];
        let g = &st.groups[name];
        let at = format!("{key}/{name}");
        let l = tsg(key, name);
        let s_index = STREAMS.iter().position(|s| *s == key).unwrap();
        let g_index = GROUPS.iter().position(|x| *x == name).unwrap();
        let positioned = events
            .iter()
            .filter(|e| {
                **e == Event::Positioned {
                    s: s_index,
                    g: g_index,
                }
            })
            .count() as f64;
        let rewinds = m.get("redis_streams_group_rewinds_total", &l);
        let outstanding = g
            .removed_unread
            .range((std::ops::Bound::Excluded(g.ld), std::ops::Bound::Unbounded))
            .count();
        let id = (key.to_string(), name.to_string());
        let had_loss = self.accounts.get(&id).is_some_and(|a| a.high[2] > 0) || outstanding > 0;
        let entry = self.names.entry(id).or_insert(Name {
            rewinds,
            ld: g.ld,
            run_id: run_id.to_string(),
            had_loss,
        });
        if let (Some(before), Some(now)) = (entry.rewinds, rewinds) {
            let more = now - before;
            let allowed = positioned + if new_server { 1.0 } else { 0.0 };
            if more > allowed {
                return fail(
                    poll,
                    "rewinds",
                    format!(
                        "{at}: {more} rewinds counted, the group was positioned {positioned} times"
                    ),
                );
            }
            if entry.run_id == run_id && g.ld < entry.ld && more < 1.0 {
                return fail(
                    poll,
                    "rewinds",
                    format!(
                        "{at}: last-delivered-id went back from {} to {}, no rewind counted",
                        entry.ld, g.ld
                    ),
                );
            }
        }
        entry.rewinds = rewinds;
        entry.ld = g.ld;
        entry.run_id = run_id.to_string();
        entry.had_loss |= had_loss;
        let status = status_of(m, key, name);
        match status.as_deref() {
            Some("data_loss") if !entry.had_loss => {
                return fail(
                    poll,
                    "status_data_loss",
                    format!("{at}: data_loss, but the model never saw this group lose an entry"),
                );
            }
            Some("stopped") if st.lag(g.ld) == 0 && g.pel.is_empty() => {
                return fail(
                    poll,
                    "status_stopped",
                    format!("{at}: stopped, but the group has no work (lag 0, nothing pending)"),
                );
            }
            _ => {}
        }
        Ok(())
    }
}

/// True when `check` is among the strict checks.
fn is_strict(strict: &[String], check: &str) -> bool {
    strict.iter().any(|s| s == "all" || s == check)
}

/// The value of label `name` in an exposition series key.
fn label(series: &str, name: &str) -> String {
    let needle = format!("{name}=\"");
    let start = series.find(&needle).unwrap() + needle.len();
    let end = series[start..].find('"').unwrap() + start;
    series[start..end].to_string()
}
