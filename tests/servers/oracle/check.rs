//! The oracle's comparison: at every poll, each exported figure against the
//! model's truth, and the loss counters against what the contract promises
//! to prove (docs/oracle.md, "What it compares").
//!
//! Losses are accounted per group from a baseline (the exporter's first
//! poll of it, or the first after the group or its stream was set from
//! outside, or after other data came behind the port); a restart on the
//! same data, a `DEBUG RELOAD` and an exporter restart from its state file
//! keep it. Since the baseline, the exported counters must never exceed the
//! truth, cause by cause; each cause must be one the figures show; lost and
//! possibly lost must cover the truth; and every loss the figures prove
//! (between two polls, or between two quiet polls of the concurrent mode)
//! must be counted lost.

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
    /// Unread removals in them: the truth, and by cause (trimmed, deleted).
    pub true_losses: u64,
    pub truth_by_cause: [u64; 2],
    /// Counted lost by the exporter, and by cause (trimmed, deleted,
    /// trimmed_or_deleted).
    pub counted_lost: u64,
    pub counted_by_cause: [u64; 3],
    /// Entries counted as possibly lost, over all intervals.
    pub counted_possible: u64,
    /// Intervals whose loss the server's figures prove, checked counted in
    /// full; of those, the ones across a restart (the server's on its data,
    /// `DEBUG RELOAD`, the exporter's from its state file).
    pub proven_intervals: u64,
    pub proven_across_restarts: u64,
    /// Intervals whose counted causes were checked against what the
    /// figures of the interval show.
    pub causes_checked: u64,
    /// Groups' intervals with `XSETID … ENTRIESADDED` beside removals from
    /// the stream; of those, the ones where a removal reached past the
    /// group, so that the entries `XSETID` counted read as removed ones;
    /// and the entries counted lost there beyond the truth.
    pub setid_mixed: u64,
    pub setid_past_group: u64,
    pub setid_counted_beyond: u64,
    /// Groups' intervals across a restart of the server on its data
    /// (`SAVE`, kill, start), a `DEBUG RELOAD`, a restart of the exporter
    /// from its state file; and of each, those in which the group lost
    /// entries.
    pub restarts: [u64; 3],
    pub restarts_with_loss: [u64; 3],
    /// Concurrent mode: spans between two polls that saw the stream quiet
    /// whose losses the figures prove, checked counted.
    pub proven_spans: u64,
    pub lag_exact: u64,
    pub lag_estimated: u64,
    pub lag_estimate_abs_error: u64,
}

/// What a poll saw of a group and its stream, from the model.
#[derive(Clone, Debug)]
struct Point {
    ld: Id,
    entries_read: Option<u64>,
    lag_exact: bool,
    first: Option<Id>,
    /// The last generated ID, the length and entries-added.
    last: Id,
    len: u64,
    added: u64,
    /// The stream's max-deleted-entry-id: the largest ID ever deleted.
    md: Option<Id>,
    /// The highest ID an entry removed ahead of the group can have.
    ceiling: Id,
    /// Taken while the workload ran.
    concurrent: bool,
    /// The exporter read the stream at this very moment: a quiet run, or a
    /// concurrent poll during which no operation touched the stream.
    exact: bool,
}

impl Point {
    /// A trim since `from` can have taken an entry after `from`'s
    /// position: a trim removes the first entries, so the first entry
    /// moved past that position, or the stream, emptied, generated past it.
    fn trimmed_past_since(&self, from: &Point) -> bool {
        match self.first {
            Some(first) => {
                self.first != from.first && first > Id(from.ld.0, from.ld.1.saturating_add(1))
            }
            None => self.last > from.ld && (from.first.is_some() || self.last != from.last),
        }
    }

    /// An entry after `from`'s position was deleted, at any time.
    fn deleted_past(&self, from: &Point) -> bool {
        self.md.is_some_and(|md| md > from.ld)
    }

    /// Entries left the stream since `from`, visibly: the first entry or
    /// max-deleted-entry-id moved, the stream, empty, generated more, or it
    /// is shorter with nothing added. A deletion below an older
    /// max-deleted-entry-id beside adds shows in none of them, and reads as
    /// `XSETID … ENTRIESADDED` beside adds: possibly lost, never proven
    /// (docs/lag-and-losses.md).
    fn removal_seen_since(&self, from: &Point) -> bool {
        self.first != from.first
            || self.md != from.md
            || (self.first.is_none() && self.last != from.last)
            || (self.added == from.added && self.last == from.last && self.len < from.len)
    }
}

/// A poll whose figures of the group's stream are known to be the model's
/// (no operation touched the stream while it ran), in the concurrent mode:
/// losses since then that its figures and a later such poll's prove must
/// be counted, whatever the polls between saw.
#[derive(Clone, Debug)]
struct Exact {
    point: Point,
    /// Exported lost (all causes) then.
    lost: f64,
    /// The account's truth then.
    truth: std::collections::BTreeSet<Id>,
}

/// One group's losses since its baseline (the exporter's first poll of it,
/// or the first after it was positioned anew, its stream's counters were
/// set from outside, or other data came behind the port).
#[derive(Clone, Debug)]
struct Account {
    epoch: u64,
    run_id: String,
    /// Exported (lost, possibly lost) at the baseline, and lost by cause
    /// (trimmed, deleted, trimmed_or_deleted).
    base: [f64; 2],
    base_causes: [f64; 3],
    /// Concurrent mode: the last poll that saw the stream quiet.
    exact: Option<Exact>,
    /// Exported (lost, possibly lost, unproven intervals) at the last poll,
    /// and lost by cause.
    last: [f64; 3],
    last_causes: [f64; 3],
    prev: Point,
    /// The last poll whose figures gave the exporter the group's rank and
    /// undelivered entries (an exact lag, entries-read known): what its
    /// counters prove is counted from there, with the causes the figures
    /// since then show. Unknown (`sure` false) after a poll the workload
    /// ran during, which the exporter may have taken for it.
    anchor: Option<Point>,
    anchor_sure: bool,
    /// Unread removals made before the baseline: the baseline's figures
    /// hold them, so they are not counted again.
    before_baseline: std::collections::BTreeSet<Id>,
    /// Unread removals since the baseline, and of those, removed by a trim.
    truth: u64,
    truth_trimmed: u64,
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
    /// Streams whose entries-added `XSETID` raised: a group standing
    /// before the first entry sees the entries counted there that were
    /// never added as gone after its position, and its status says
    /// `data_loss` (excused here; never counted lost, which is checked).
    counters_set: std::collections::BTreeSet<String>,
    /// A concurrent run: its polls that see a stream quiet are compared
    /// with each other ([`Exact`]).
    live: bool,
    /// In the concurrent mode, the streams the operations during the
    /// current poll touch.
    pub busy: std::collections::BTreeSet<String>,
    /// Per group, the entries `XSETID … ENTRIESADDED` counted on its stream
    /// since it exists that the exporter has not counted lost yet: where the
    /// figures cannot show the `XSETID`, they read as entries added and
    /// removed, and may be counted lost once (see `losses`).
    phantoms: BTreeMap<(String, String), u64>,
    /// Each group's number of consumers at the last poll.
    consumers_seen: BTreeMap<(String, String), usize>,
    pub stats: Stats,
}

/// What the poll read from the server itself (quiescent during the poll).
pub struct Raw {
    pub run_id: String,
    pub groups: BTreeMap<(String, String), RawGroup>,
}

/// The `cause` label values, in the order of the oracle's arrays.
const CAUSES: [&str; 3] = ["trimmed", "deleted", "trimmed_or_deleted"];

/// A group's `{cause}` counter by cause (trimmed, deleted,
/// trimmed_or_deleted); absent as 0.
fn by_cause(m: &Metrics, name: &str, s: &str, g: &str) -> [f64; 3] {
    CAUSES.map(|cause| {
        m.get(
            name,
            &[
                ("target", "t"),
                ("stream", s),
                ("group", g),
                ("cause", cause),
            ],
        )
        .unwrap_or(0.0)
    })
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
        by_cause(m, "redis_streams_group_lost_entries_total", s, g)
            .iter()
            .sum(),
        by_cause(m, "redis_streams_group_possibly_lost_entries_total", s, g)
            .iter()
            .sum(),
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
            live: concurrent,
            busy: Default::default(),
            phantoms: BTreeMap::new(),
            consumers_seen: BTreeMap::new(),
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
        if events.contains(&Event::NewServer) {
            self.phantoms.clear();
        }
        for e in events {
            if let Event::StreamSet { s, n } = e {
                self.counters_set.insert(STREAMS[*s].to_string());
                let key = STREAMS[*s];
                for name in model
                    .streams
                    .get(key)
                    .into_iter()
                    .flat_map(|st| st.groups.keys())
                {
                    *self
                        .phantoms
                        .entry((key.to_string(), name.clone()))
                        .or_default() += n;
                }
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
        let new_server = events.contains(&Event::NewServer) || events.contains(&Event::Restarted);
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
                // A group without work (nothing pending, a lag of 0) has its
                // consumers read one run in five, or at once when their number
                // changed: a consumer that took the place of another since
                // the last poll may be missing until the group's turn.
                let count = self
                    .consumers_seen
                    .insert((key.clone(), name.clone()), g.consumers.len());
                let kept = g.pel.is_empty()
                    && m.get("redis_streams_group_lag", &l) == Some(0.0)
                    && count == Some(g.consumers.len());
                for c in &g.consumers {
                    let cl = [
                        ("target", "t"),
                        ("stream", key.as_str()),
                        ("group", name.as_str()),
                        ("consumer", c.as_str()),
                    ];
                    let held = m.get("redis_streams_consumer_pending", &cl);
                    if held != Some(g.pending_of(c) as f64) && !(kept && held.is_none()) {
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
        self.consumers_seen.retain(|(s, g), _| {
            model
                .streams
                .get(s)
                .is_some_and(|st| st.groups.contains_key(g))
        });
        self.phantoms.retain(|(s, g), _| {
            model
                .streams
                .get(s)
                .is_some_and(|st| st.groups.contains_key(g))
        });
        Ok(())
    }

    /// The loss contract, per group since its baseline: never more lost
    /// than the truth, nor more of one cause than the truth holds of it;
    /// each cause counted only where the interval's figures show it (the
    /// decision table); the truth in full between lost and possibly lost;
    /// every loss the server's figures prove counted as lost, across
    /// restarts on the same data too, and in the concurrent mode between
    /// two polls that saw the stream quiet; a possible loss said with its
    /// reason.
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
        let causes = by_cause(m, "redis_streams_group_lost_entries_total", key, name);
        let l = tsg(key, name);
        let md = st.max_deleted();
        // The exporter's figures of this stream are the model's: nothing
        // touched it while it polled.
        let quiet = !self.busy.contains(key);
        let point = Point {
            ld: g.ld,
            entries_read: r.entries_read,
            lag_exact: m.get("redis_streams_group_lag_estimated", &l) == Some(0.0),
            first: st.present.first().copied(),
            last: st.last_gen,
            len: st.present.len() as u64,
            added: st.added,
            md,
            ceiling: st
                .present
                .first()
                .copied()
                .unwrap_or(st.last_gen)
                .max(md.unwrap_or(Id::ZERO)),
            concurrent: self.concurrent,
            exact: quiet,
        };
        let id = (key.to_string(), name.to_string());
        let s_index = STREAMS.iter().position(|s| *s == key).unwrap();
        let g_index = GROUPS.iter().position(|x| *x == name).unwrap();
        let positioned = events.contains(&Event::Positioned {
            s: s_index,
            g: g_index,
        });
        // Entries `XSETID … ENTRIESADDED` counted that were never added.
        let phantoms: Option<u64> = events
            .iter()
            .filter_map(|e| match e {
                Event::StreamSet { s, n } if *s == s_index => Some(*n),
                _ => None,
            })
            .reduce(|a, b| a + b);
        let new_server = events.contains(&Event::NewServer);
        let restarts = [Event::Restarted, Event::Reloaded, Event::ExporterRestarted]
            .map(|e| events.contains(&e));
        let removed_in_interval: u64 = events
            .iter()
            .filter_map(|e| match e {
                Event::Removed { s, n } if *s == s_index => Some(*n),
                _ => None,
            })
            .sum();
        let exact_now = self.live && quiet;
        let known = |p: &Point| p.lag_exact && p.entries_read.is_some();
        if std::env::var("RSE_ORACLE_TRACE").is_ok_and(|t| t == format!("{key}/{name}")) {
            let truth = g.removed_unread.len();
            eprintln!(
                "TRACE poll {poll} {key}/{name}{}: ld {} er {:?} lag exact {} first {:?} last {} len {} added {} md {:?} | lost {:?} possible {} unproven {} | truth (all) {truth} | events {events:?}",
                if quiet { "" } else { " (busy)" },
                point.ld,
                point.entries_read,
                point.lag_exact,
                point.first,
                point.last,
                point.len,
                point.added,
                point.md,
                causes,
                now[1],
                now[2]
            );
        }
        let fresh = || Account {
            epoch: g.epoch,
            run_id: run_id.to_string(),
            base: [now[0], now[1]],
            base_causes: causes,
            exact: exact_now.then(|| Exact {
                point: point.clone(),
                lost: now[0],
                truth: Default::default(),
            }),
            last: now,
            last_causes: causes,
            prev: point.clone(),
            anchor: known(&point).then(|| point.clone()),
            anchor_sure: quiet,
            before_baseline: g.removed_unread.keys().copied().collect(),
            truth: 0,
            truth_trimmed: 0,
            ahead: Default::default(),
            counters_set: phantoms.is_some(),
        };
        // Entries `XSETID … ENTRIESADDED` counted on the stream that the
        // exporter may still count lost: where nothing shows the `XSETID`
        // (a trim or a deletion past the group beside it, or a deletion past
        // the first entry already there), n entries added and removed leave
        // the same length, first entry, last ID, entries-added and
        // max-deleted-entry-id (`xsetidCommand` sets entries-added alone; a
        // trim moves the first entry, a deletion max-deleted-entry-id,
        // whatever the number they took: t_stream.c), and a group's
        // entries-read that went on counting across it stays that many
        // below its rank. Each may be counted once, never more.
        let allowance = self.phantoms.get(&id).copied().unwrap_or(0);
        let Some(acct) = self.accounts.get_mut(&id) else {
            self.accounts.insert(id, fresh());
            return Ok(());
        };
        // Counted lost beyond the truth since the baseline, at the last poll.
        let beyond_before = (acct.last[0] - acct.base[0] - acct.truth as f64).max(0.0);
        if acct.epoch != g.epoch
            || positioned
            || new_server
            || (acct.run_id != run_id && !restarts[0])
        {
            // Positioned from outside, or another server with other data:
            // a new baseline. What the exporter counted across it can only
            // have come from the interval's own removals, and from entries
            // `XSETID … ENTRIESADDED` counted (see `allowance`).
            let counted = now[0] - acct.last[0];
            let beyond = (counted - removed_in_interval as f64).max(0.0);
            if beyond_before + beyond > allowance as f64 {
                return fail(
                    poll,
                    "lost_across_reposition",
                    format!(
                        "{at}: counted {counted} lost across a new baseline; {removed_in_interval} entries were removed in it, {} counted by XSETID ENTRIESADDED may still be counted",
                        allowance as f64 - beyond_before
                    ),
                );
            }
            self.consume_phantoms(&id, beyond_before + beyond);
            let acct = self.accounts.get_mut(&id).unwrap();
            *acct = fresh();
            return Ok(());
        }
        // A restart on the same data (the server's or the exporter's), or a
        // reload: the same account, every check as across any interval.
        acct.run_id = run_id.to_string();
        let prev = acct.prev.clone();
        let truth_ids: Vec<(Id, Cause)> = g
            .removed_unread
            .iter()
            .filter(|(id, _)| !acct.before_baseline.contains(id))
            .map(|(id, c)| (*id, *c))
            .collect();
        let truth = truth_ids.len() as u64;
        let truth_trimmed = truth_ids
            .iter()
            .filter(|(_, c)| *c == Cause::Trimmed)
            .count() as u64;
        let truth_deleted = truth - truth_trimmed;
        let new_truth = truth - acct.truth;
        let lost = now[0] - acct.base[0];
        let possible = now[1] - acct.base[1];
        let lost_delta = now[0] - acct.last[0];
        let possible_delta = now[1] - acct.last[1];
        let counted = [0, 1, 2].map(|i| causes[i] - acct.base_causes[i]);
        let counted_delta = [0, 1, 2].map(|i| causes[i] - acct.last_causes[i]);
        if new_truth > 0 {
            self.stats.intervals_with_loss += 1;
            self.stats.true_losses += new_truth;
        }
        self.stats.truth_by_cause[0] += truth_trimmed - acct.truth_trimmed;
        self.stats.truth_by_cause[1] += new_truth - (truth_trimmed - acct.truth_trimmed);
        for (i, delta) in counted_delta.iter().enumerate() {
            self.stats.counted_by_cause[i] += delta.max(0.0) as u64;
        }
        self.stats.counted_lost += lost_delta.max(0.0) as u64;
        self.stats.counted_possible += possible_delta.max(0.0) as u64;
        for (i, across) in restarts.iter().enumerate() {
            if *across {
                self.stats.restarts[i] += 1;
                if new_truth > 0 {
                    self.stats.restarts_with_loss[i] += 1;
                }
            }
        }
        let across_restart = restarts.iter().any(|r| *r);
        // The interval's removals reached past the group's last position:
        // a trim moved the first entry past it, or a deletion past it was
        // seen.
        let trimmed_past = point.trimmed_past_since(&prev);
        let deleted_past = point.deleted_past(&prev);
        let removal_past = trimmed_past || (deleted_past && point.removal_seen_since(&prev));
        let beyond = (lost - truth as f64).max(0.0);
        let detail = || {
            let across = [
                "a restart on the same data",
                "DEBUG RELOAD",
                "an exporter restart",
            ]
            .iter()
            .zip(restarts)
            .filter(|(_, r)| *r)
            .map(|(what, _)| format!(", across {what}"))
            .collect::<String>();
            format!(
                "{at}: interval ({}, {}], entries-read {:?} -> {:?}, first entry {:?} -> {:?}, max-deleted {:?} -> {:?}, lag exact {} -> {}{across}{}; since the baseline: truth {truth} (trimmed {truth_trimmed}, deleted {truth_deleted}; this interval {new_truth}), lost {lost} (+{lost_delta}; trimmed {}, deleted {}, trimmed_or_deleted {}; this interval trimmed {}, deleted {}, trimmed_or_deleted {}), possibly lost {possible} (+{possible_delta})",
                prev.ld,
                g.ld,
                prev.entries_read,
                point.entries_read,
                prev.first,
                point.first,
                prev.md,
                point.md,
                prev.lag_exact,
                point.lag_exact,
                phantoms.map_or(String::new(), |n| format!(
                    ", XSETID ENTRIESADDED +{n} in it (a removal past the group: {removal_past})"
                )),
                counted[0],
                counted[1],
                counted[2],
                counted_delta[0],
                counted_delta[1],
                counted_delta[2],
            )
        };
        if !self.kind.has_lag() {
            if now[0] != 0.0 || now[1] != 0.0 {
                return fail(poll, "loss_without_counters", detail());
            }
        } else {
            // Never more lost than the truth, nor more of a cause than the
            // truth holds of it (counted entries can then be matched with
            // true losses of their cause, `trimmed_or_deleted` with any).
            // At every poll, concurrent or not, whatever the interval holds.
            // Entries `XSETID … ENTRIESADDED` counted may be counted lost
            // (each once), but never in its own interval unless a removal
            // past the group hides it.
            let allowed = |n: u64| (n + allowance) as f64;
            if phantoms.is_some() && removed_in_interval > 0 {
                self.stats.setid_mixed += 1;
                self.stats.setid_past_group += u64::from(removal_past);
            }
            if lost > allowed(truth)
                || (phantoms.is_some() && !removal_past && beyond > beyond_before)
            {
                return fail(
                    poll,
                    "false_loss",
                    format!(
                        "{} ({allowance} counted by XSETID ENTRIESADDED may be counted lost; {beyond} beyond the truth)",
                        detail()
                    ),
                );
            }
            if counted[0] > allowed(truth_trimmed) {
                return fail(poll, "false_cause_trimmed", detail());
            }
            if counted[1] > allowed(truth_deleted) {
                return fail(poll, "false_cause_deleted", detail());
            }
            // Each cause where the figures show it, since the exporter's
            // last poll or since the last one that gave it the group's rank
            // (what the counters prove since then): `trimmed` where a trim
            // reached past the group's position and no deletion lies past
            // it; `deleted` where one does; `trimmed_or_deleted` where both
            // do and the figures cannot tell which took what. Checked where
            // those polls' figures are the model's.
            let since: Vec<&Point> = match &acct.anchor {
                _ if !(prev.exact && point.exact) => Vec::new(),
                _ if known(&prev) => vec![&prev],
                Some(anchor) if acct.anchor_sure => vec![&prev, anchor],
                None if acct.anchor_sure => vec![&prev],
                _ => Vec::new(),
            };
            if !since.is_empty() {
                let shown = |cause: usize| {
                    since.iter().any(|q| {
                        let (trim, deletion) = (point.trimmed_past_since(q), point.deleted_past(q));
                        match cause {
                            0 => trim && !deletion,
                            1 => deletion,
                            _ => trim && deletion,
                        }
                    })
                };
                if counted_delta.iter().any(|d| *d > 0.0) {
                    self.stats.causes_checked += 1;
                }
                for (cause, check) in [
                    (0, "cause_trimmed_unproven"),
                    (1, "cause_deleted_unproven"),
                    (2, "cause_either_where_figures_tell"),
                ] {
                    if counted_delta[cause] > 0.0 && !shown(cause) {
                        return fail(
                            poll,
                            check,
                            format!(
                                "{} (since the last poll: a trim past the group's position {trimmed_past}, a deletion past it {deleted_past}; polls compared: {:?})",
                                detail(),
                                since.iter().map(|q| q.ld).collect::<Vec<_>>()
                            ),
                        );
                    }
                }
            }
        }
        if phantoms.is_some() {
            // `XSETID` set the stream's counters: its interval may start a
            // new baseline (docs/lag-and-losses.md, row 6), so only the
            // bounds above were due; the account starts again.
            self.consume_phantoms(&id, beyond);
            let acct = self.accounts.get_mut(&id).unwrap();
            *acct = fresh();
            return Ok(());
        }
        if self.kind.has_lag() {
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
                .filter(|(id, _)| *id > g.ld && !acct.ahead.contains(id))
                .count() as u64;
            let reestimates = matches!(self.kind, Server::Redis8 | Server::Valkey9);
            if !self.concurrent
                && !prev.concurrent
                && reestimates
                && point.removal_seen_since(&prev)
                && !acct.counters_set
                && known(&prev)
                && known(&point)
                && g.ld <= st.last_gen
                && (g.ld == prev.ld || g.ld >= prev.ceiling)
            {
                self.stats.proven_intervals += 1;
                self.stats.proven_across_restarts += u64::from(across_restart);
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
            let no_reestimate = |from: &Point| {
                md.is_none_or(|md| md <= from.ld || from.first.is_some_and(|f| md < f))
            };
            if !self.concurrent
                && !prev.concurrent
                && self.kind == Server::Redis70
                && prev.entries_read.is_some()
                && point.entries_read.is_some()
                && prev.lag_exact
                && point.lag_exact
                && no_reestimate(&prev)
            {
                self.stats.proven_intervals += 1;
                self.stats.proven_across_restarts += u64::from(across_restart);
                if lost_delta < new_truth as f64 {
                    return fail(poll, "proven_gap_not_counted", detail());
                }
            }
            // The concurrent mode: this poll and the last one that saw the
            // stream quiet read figures of known moments, and every removal
            // between them happened before this poll began. Where those two
            // polls prove the loss (the group did not move, both ranks
            // known; or, on Redis 7.0, entries-read kept every gap out), it
            // is counted by now, whatever the polls between saw.
            if let Some(a) = acct.exact.clone().filter(|_| exact_now) {
                // A deletion below an older max-deleted-entry-id may have
                // fallen alone between two of the exporter's polls, where it
                // proves nothing: not due.
                let new = truth_ids
                    .iter()
                    .filter(|(id, _)| !a.truth.contains(id) && !st.unseen.contains(id))
                    .count() as u64;
                let unmoved = g.ld == a.point.ld;
                let keeps_gaps = self.kind == Server::Redis70 && no_reestimate(&a.point);
                if new > 0
                    && point.removal_seen_since(&a.point)
                    && !acct.counters_set
                    && known(&a.point)
                    && known(&point)
                    && g.ld <= st.last_gen
                    && (unmoved || keeps_gaps)
                {
                    self.stats.proven_spans += 1;
                    if now[0] - a.lost < new as f64 {
                        return fail(
                            poll,
                            "proven_before_poll_not_counted",
                            format!(
                                "{} ({new} unread removals since the poll that last saw the stream quiet, at ({}, entries-read {:?}, first {:?}, max-deleted {:?}); {} counted lost since)",
                                detail(),
                                a.point.ld,
                                a.point.entries_read,
                                a.point.first,
                                a.point.md,
                                now[0] - a.lost
                            ),
                        );
                    }
                }
            }
        }
        if exact_now {
            acct.exact = Some(Exact {
                point: point.clone(),
                lost: now[0],
                truth: truth_ids.iter().map(|(id, _)| *id).collect(),
            });
        }
        acct.ahead = truth_ids
            .iter()
            .filter(|(id, _)| *id > g.ld)
            .map(|(id, _)| *id)
            .collect();
        if !quiet {
            acct.anchor_sure = false;
        } else if known(&point) {
            acct.anchor = Some(point.clone());
            acct.anchor_sure = true;
        }
        acct.prev = point;
        acct.last = now;
        acct.last_causes = causes;
        acct.truth = truth;
        acct.truth_trimmed = truth_trimmed;
        Ok(())
    }

    /// Entries counted lost beyond the truth, taken from what `XSETID …
    /// ENTRIESADDED` may still account for.
    fn consume_phantoms(&mut self, id: &(String, String), used: f64) {
        if used > 0.0 {
            self.stats.setid_counted_beyond += used as u64;
            if let Some(left) = self.phantoms.get_mut(id) {
                *left = left.saturating_sub(used as u64);
            }
        }
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
            // Entries `XSETID` added to entries-added look gone to a
            // group behind the first entry: its status is excused, its
            // loss counter is not (`false_loss`).
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
