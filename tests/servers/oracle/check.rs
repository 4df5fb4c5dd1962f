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
    /// Intervals in which the group lost entries (after its baseline).
    pub intervals_with_loss: u64,
    /// Unread removals in them: the truth.
    pub true_losses: u64,
    /// Of those, counted as lost by the exporter.
    pub counted_lost: u64,
    /// Entries counted as possibly lost, over all intervals.
    pub counted_possible: u64,
    /// Intervals whose loss the server's figures prove, checked counted in
    /// full.
    pub proven_intervals: u64,
    pub lag_exact: u64,
    pub lag_estimated: u64,
    pub lag_estimate_abs_error: u64,
}

#[derive(Clone, Debug)]
struct Point {
    ld: Id,
    entries_read: Option<u64>,
    lag_exact: bool,
    first: Option<Id>,
    /// The highest ID an entry removed ahead of the group can have.
    ceiling: Id,
    /// Taken while the workload ran.
    concurrent: bool,
}

/// One group's losses since its baseline (the exporter's first poll of it,
/// or the first after it was positioned anew or the server changed).
#[derive(Clone, Debug)]
struct Account {
    epoch: u64,
    run_id: String,
    /// Exported (lost, possibly lost) at the baseline.
    base: [f64; 2],
    /// Exported (lost, possibly lost, unproven intervals) at the last poll.
    last: [f64; 3],
    prev: Point,
    /// Unread removals made before the baseline: the baseline's figures
    /// hold them, so they are not counted again.
    before_baseline: std::collections::BTreeSet<Id>,
    /// Unread removals since the baseline.
    truth: u64,
    /// Those that were ahead of the group at the last poll.
    ahead: std::collections::BTreeSet<Id>,
    /// The stream's counters were set from outside (`XSETID`) at the
    /// baseline: entries-read is out of step with entries-added, and the
    /// exporter does not take a group's rank from it.
    counters_set: bool,
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
    /// Polls are taken while the workload runs: figures are not of one
    /// quiet moment, so only the bounds are checked.
    pub concurrent: bool,
    /// In the concurrent mode, each group's unread removals made before the
    /// current poll began: what its figures cannot miss.
    pub before_poll: BTreeMap<(String, String), std::collections::BTreeSet<Id>>,
    accounts: BTreeMap<(String, String), Account>,
    names: BTreeMap<(String, String), Name>,
    /// Streams whose entries-added `XSETID` raised: entries counted there
    /// that were never added look gone to a poll that did not see it.
    counters_set: std::collections::BTreeSet<String>,
    pub stats: Stats,
}

/// What the poll read from the server itself (quiescent during the poll).
pub struct Raw {
    pub run_id: String,
    pub groups: BTreeMap<(String, String), RawGroup>,
}

/// A group's total over the causes of a `{cause}` counter (trimmed,
/// deleted, trimmed_or_deleted); absent when every cause is.
fn by_cause(m: &Metrics, name: &str, s: &str, g: &str) -> Option<f64> {
    let at = |cause| {
        m.get(
            name,
            &[
                ("target", "t"),
                ("stream", s),
                ("group", g),
                ("cause", cause),
            ],
        )
    };
    let causes = ["trimmed", "deleted", "trimmed_or_deleted"].map(at);
    causes
        .iter()
        .any(Option::is_some)
        .then(|| causes.iter().flatten().sum())
}

/// The exporter's (lost, possibly lost, unproven intervals) of a group.
fn exported_losses(m: &Metrics, s: &str, g: &str) -> [f64; 3] {
    let unproven: f64 = ["order_unknown", "no_entries_read", "no_counters"]
        .iter()
        .filter_map(|reason| {
            m.get(
                "redis_streams_group_loss_unproven_total",
                &[
                    ("target", "t"),
                    ("stream", s),
                    ("group", g),
                    ("reason", reason),
                ],
            )
        })
        .sum();
    [
        by_cause(m, "redis_streams_group_lost_entries_total", s, g).unwrap_or(0.0),
        by_cause(m, "redis_streams_group_possibly_lost_entries_total", s, g).unwrap_or(0.0),
        unproven,
    ]
}

pub fn status_of(m: &Metrics, s: &str, g: &str) -> Option<String> {
    m.status(s, g).map(|(status, _)| status)
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
    pub fn new(kind: Server, concurrent: bool) -> Checker {
        Checker {
            kind,
            concurrent,
            before_poll: BTreeMap::new(),
            accounts: BTreeMap::new(),
            counters_set: Default::default(),
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
        for e in events {
            if let Event::StreamSet { s } = e {
                self.counters_set.insert(STREAMS[*s].to_string());
            }
        }
        if self.concurrent {
            // The model is the state after the operations, the exporter's
            // figures of a moment during them: only the loss bounds hold.
            for (key, st) in &model.streams {
                for name in st.groups.keys() {
                    let Some(r) = raw.groups.get(&(key.clone(), name.clone())) else {
                        continue;
                    };
                    self.losses(poll, key, name, model, m, r, &raw.run_id, events)?;
                }
            }
            return Ok(());
        }
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

    /// The loss contract: never more lost than the truth; the truth in
    /// full between lost and possibly lost; every loss the server's figures
    /// prove counted as lost; a possible loss said with its reason.
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
        let now = exported_losses(m, key, name);
        let l = tsg(key, name);
        let point = Point {
            ld: g.ld,
            entries_read: r.entries_read,
            lag_exact: m.get("redis_streams_group_lag_estimated", &l) == Some(0.0),
            first: st.present.first().copied(),
            ceiling: st.present.first().copied().unwrap_or(st.last_gen).max(
                st.removed
                    .iter()
                    .filter(|(_, c)| **c == Cause::Deleted)
                    .map(|(id, _)| *id)
                    .max()
                    .unwrap_or(Id::ZERO),
            ),
            concurrent: self.concurrent,
        };
        let id = (key.to_string(), name.to_string());
        let s_index = STREAMS.iter().position(|s| *s == key).unwrap();
        let g_index = GROUPS.iter().position(|x| *x == name).unwrap();
        let positioned = events.contains(&Event::Positioned {
            s: s_index,
            g: g_index,
        }) || events.contains(&Event::StreamSet { s: s_index });
        let fresh = || Account {
            epoch: g.epoch,
            run_id: run_id.to_string(),
            base: [now[0], now[1]],
            last: now,
            prev: point.clone(),
            before_baseline: g.removed_unread.keys().copied().collect(),
            truth: 0,
            ahead: Default::default(),
            counters_set: events.contains(&Event::StreamSet { s: s_index }),
        };
        let Some(acct) = self.accounts.get_mut(&id) else {
            self.accounts.insert(id, fresh());
            return Ok(());
        };
        if acct.epoch != g.epoch || positioned || acct.run_id != run_id {
            // Positioned from outside, or another server: a new baseline.
            // What the exporter counted across it can only have come from
            // the interval's own removals.
            let counted = now[0] - acct.last[0];
            let removed: u64 = events
                .iter()
                .filter_map(|e| match e {
                    Event::Removed { s, n } if *s == s_index => Some(*n),
                    _ => None,
                })
                .sum();
            if counted > removed as f64 {
                return fail(
                    poll,
                    "lost_across_reposition",
                    format!(
                        "{at}: counted {counted} lost across a new baseline; {removed} entries were removed in it"
                    ),
                );
            }
            *acct = fresh();
            return Ok(());
        }
        let prev = acct.prev.clone();
        let truth_ids: Vec<Id> = g
            .removed_unread
            .keys()
            .filter(|id| !acct.before_baseline.contains(id))
            .copied()
            .collect();
        let truth = truth_ids.len() as u64;
        let new_truth = truth - acct.truth;
        let lost = now[0] - acct.base[0];
        let possible = now[1] - acct.base[1];
        let lost_delta = now[0] - acct.last[0];
        let possible_delta = now[1] - acct.last[1];
        if new_truth > 0 {
            self.stats.intervals_with_loss += 1;
            self.stats.true_losses += new_truth;
        }
        self.stats.counted_lost += lost_delta.max(0.0) as u64;
        self.stats.counted_possible += possible_delta.max(0.0) as u64;
        let detail = || {
            format!(
                "{at}: interval ({}, {}], entries-read {:?} -> {:?}, first entry {:?} -> {:?}, lag exact {} -> {}; since the baseline: truth {truth} (this interval {new_truth}), lost {lost} (+{lost_delta}), possibly lost {possible} (+{possible_delta})",
                prev.ld,
                g.ld,
                prev.entries_read,
                point.entries_read,
                prev.first,
                point.first,
                prev.lag_exact,
                point.lag_exact
            )
        };
        if !self.kind.has_lag() {
            if now[0] != 0.0 || now[1] != 0.0 {
                return fail(poll, "loss_without_counters", detail());
            }
        } else {
            if lost > truth as f64 {
                return fail(poll, "false_loss", detail());
            }
            if !self.concurrent && lost + possible < truth as f64 {
                return fail(poll, "missed_loss", detail());
            }
            if let Some(before) = self.before_poll.get(&id).filter(|_| self.concurrent) {
                // Removals done before the poll began are in its figures.
                let floor = before
                    .iter()
                    .filter(|id| !acct.before_baseline.contains(id))
                    .count();
                if lost + possible < floor as f64 {
                    return fail(
                        poll,
                        "missed_loss",
                        format!(
                            "{} ({floor} unread removals before the poll began)",
                            detail()
                        ),
                    );
                }
            }
            if possible_delta > 0.0 && now[2] <= acct.last[2] {
                return fail(poll, "possible_without_reason", detail());
            }
            // What the figures prove where the group's rank is known at
            // both polls (entries-read re-estimated by the server, exact
            // lags): every unread removal of the interval still ahead of it,
            // when it did not move or moved past everything that was gone
            // ahead before.
            let ahead = truth_ids
                .iter()
                .filter(|id| **id > g.ld && !acct.ahead.contains(id))
                .count() as u64;
            let reestimates = matches!(self.kind, Server::Redis8 | Server::Valkey9);
            let known = |p: &Point| p.lag_exact && p.entries_read.is_some();
            if !self.concurrent
                && !prev.concurrent
                && reestimates
                && !acct.counters_set
                && known(&prev)
                && known(&point)
                && g.ld <= st.last_gen
                && (g.ld == prev.ld || g.ld >= prev.ceiling)
            {
                self.stats.proven_intervals += 1;
                if lost_delta < ahead as f64 {
                    return fail(
                        poll,
                        "proven_ahead_not_counted",
                        format!("{} ({ahead} unread removals ahead of the group)", detail()),
                    );
                }
            }
            // Redis 7.0: entries-read valid at both polls, exact lags, and
            // no deletion the group could have read past: entries-read kept
            // every gap out, so the interval's losses are exactly its rise.
            let md = st
                .removed
                .iter()
                .filter(|(_, c)| **c == Cause::Deleted)
                .map(|(id, _)| *id)
                .max();
            let no_reestimate =
                md.is_none_or(|md| md <= prev.ld || prev.first.is_some_and(|f| md < f));
            if !self.concurrent
                && !prev.concurrent
                && self.kind == Server::Redis70
                && prev.entries_read.is_some()
                && point.entries_read.is_some()
                && prev.lag_exact
                && point.lag_exact
                && no_reestimate
            {
                self.stats.proven_intervals += 1;
                if lost_delta < new_truth as f64 {
                    return fail(poll, "proven_gap_not_counted", detail());
                }
            }
        }
        acct.ahead = truth_ids.iter().filter(|id| **id > g.ld).copied().collect();
        acct.prev = point;
        acct.last = now;
        acct.truth = truth;
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
        let had_loss = self.accounts.get(&id).is_some_and(|a| a.truth > 0) || outstanding > 0;
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
            // Entries `XSETID` added to entries-added look gone to a poll
            // that did not see it happen: one cannot tell them from trimmed
            // ones.
            Some("data_loss") if !entry.had_loss && !self.counters_set.contains(key) => {
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

fn label(series: &str, name: &str) -> String {
    let needle = format!("{name}=\"");
    let start = series.find(&needle).unwrap() + needle.len();
    let end = series[start..].find('"').unwrap() + start;
    series[start..end].to_string()
}
