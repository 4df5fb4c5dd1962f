//! What a target's poller keeps between probe runs: the working snapshot,
//! each group's memory (status window, trends, loss ledgers, lag trails),
//! the slow probes' results parked while the target is down, and what the
//! budget's log line last said (a pure rule, table-tested: when to say
//! something new).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::memory::{DiscoveryReport, Holder, LastRead, LastWalk, Pass, QuietReads};
use super::status_log;
use crate::backend::NodeAddr;
use crate::config::{Config, Target};
use crate::snapshot::{Name, TargetSnapshot};
use crate::status;
use crate::vocab::{ProbeKind, StreamId};
use crate::{cadence, lag, loss, trend};

/// What the poller remembers about a group between polls, beyond the
/// snapshot: the status window and the probes' working state.
#[derive(Debug, Default)]
pub struct GroupMemory {
    /// The status window over recent stream polls.
    pub window: status::Window,
    /// The group's read cadence, learned over the last hours.
    pub cadence: cadence::Cadence,
    /// How long its consumers hold entries without reading before they read
    /// again (their handlers' time), learned by the consumers probe.
    pub holds: cadence::Holds,
    /// Consumers seen holding entries at the last consumers run, at most
    /// [`super::consumers::HOLDERS_KEPT`].
    pub holders: Vec<Holder>,
    /// Server time of the latest successful read by any consumer.
    pub last_read_at_ms: Option<u64>,
    /// Server time of the latest stream poll that found the group's
    /// position or entries-read advanced.
    pub last_progress_at_ms: Option<u64>,
    /// Smallest pending ID from the latest pending summary.
    pub oldest_pending_id: Option<StreamId>,
    /// What the consumers probe last read of the group, to tell whether an
    /// idle group has anything new to show.
    pub consumers_read: Option<LastRead>,
    /// The PEL scan pass in progress.
    pub scan_pass: Option<Box<Pass>>,
    /// What the last stream poll proved about the group's lag.
    pub lag_trail: Option<lag::Trail>,
    /// The recent polls, for the ETAs.
    pub trend: trend::Trend,
    /// Rewinds seen when the trend was last reset.
    pub rewinds_seen: u64,
    /// The stream's first entry at the last poll, and whether deletions
    /// moved it there (see `probe::stream`'s outlook).
    pub head: Option<StreamId>,
    /// The head last moved by deletions, not only by trimming.
    pub head_deleted: bool,
    /// Server time (ms) of the last poll that found the head moved.
    pub head_moved_at_ms: Option<u64>,
    /// Server time (ms) of the first poll that saw the group.
    pub watched_since_ms: Option<u64>,
}

/// The most facts the estimator's walks keep for a target's next polls, all
/// its streams together: about 3 MiB.
pub const WALKED_KEPT_PER_TARGET: usize = 16 * lag::WALKED_KEPT_PER_STREAM;

/// The mutable state of one target, owned by its poller.
#[derive(Debug, Default)]
pub struct TargetState {
    /// The working copy of the snapshot.
    pub snapshot: TargetSnapshot,
    /// Streams to watch, from discovery, in its order; changed only through
    /// [`Self::set_watched`], [`Self::watch_now`] and
    /// [`Self::forget_vanished_streams`], which keep `watched_index` in step.
    watched: Vec<Name>,
    /// The same streams, for a keyspace event's lookup in O(1): at 10,000
    /// streams a search of the list per `xadd` event cost more than the
    /// event.
    watched_index: std::collections::HashSet<Name>,
    /// Per-group memory, by (stream, group).
    pub groups: BTreeMap<(Name, Name), GroupMemory>,
    /// Memories the state file gave back at start ([`Self::restore`]), of
    /// groups not polled since: each becomes its group's memory at the
    /// group's first poll. Unlike `groups` they outlive the target going
    /// down (the exporter may start while Redis is down); a completed stream
    /// poll drops those of groups it did not see ([`Self::prune_ledgers`]).
    restored: BTreeMap<(Name, Name), GroupMemory>,
    /// Per-group loss and rewind records. Unlike the rest of the memory they
    /// survive the target going down: counters must not restart at every
    /// blip, and `data_loss` holds for `data_loss_hold`.
    pub ledgers: BTreeMap<(Name, Name), loss::Ledger>,
    /// Per-stream points of the generated-entries curve from earlier polls,
    /// for the lag estimator.
    pub anchors: BTreeMap<Name, Vec<lag::Anchor>>,
    /// Per-stream milliseconds the estimator's walks read, for the next
    /// poll's walks to go on from ([`lag::Walked`]).
    pub(crate) walked: BTreeMap<Name, lag::Walked>,
    /// The facts `walked` holds in all.
    pub(crate) walked_facts: usize,
    /// What the last successful discovery found.
    pub discovery: Option<DiscoveryReport>,
    /// The quiet streams' last full reads (see the stream probe).
    pub(crate) quiet: QuietReads,
    /// The last walk of the keyspace, and the runs that skipped one since.
    pub last_walk: Option<LastWalk>,
    /// Failed runs in a row, per probe (discovery's backoff).
    pub failures_in_a_row: BTreeMap<ProbeKind, u32>,
    /// Runs of the consumers probe so far: idle groups are read on every
    /// [`super::groups::idle_every`]th, each on its own turn.
    pub consumers_runs: u64,
    /// Commands of a probe's last run that its next runs will not repeat,
    /// for the poller's figure of what the probe needs.
    pub one_off_commands: BTreeMap<ProbeKind, u64>,
    /// What the budget log line last said ([`BudgetNotice`]).
    pub budget_notice: Option<BudgetNotice>,
    /// Why the target went down, while it is down (logged once).
    pub last_down_reason: Option<String>,
    /// When the target went down, while it is down (see [`Self::fell`]).
    pub down_since: Option<tokio::time::Instant>,
    /// Streams already reported as having non-time IDs (logged once).
    pub non_time_logged: std::collections::BTreeSet<Name>,
    /// Evidence kept through an outage (see [`Parked`]).
    pub parked: Option<Parked>,
    /// Groups whose last PEL scan or consumers run found something (poison,
    /// ghosts, orphaned entries): scanned first after an outage.
    pub findings: std::collections::BTreeSet<(Name, Name)>,
    /// Bumped whenever the data is dropped. A probe run that began before
    /// must not apply what it read: it may have read a server that died
    /// (and restarted, or failed over) in the middle of the run.
    pub generation: u64,
    /// Groups added to `groups` or `ledgers` since the two were last packed
    /// ([`TargetState::pack_group_maps`]).
    pub groups_added_since_packed: usize,
    /// The lag arithmetic of each node's server, from its own version (see
    /// [`lag::Arithmetic::of`]); a node not yet known is read as
    /// miscounting.
    pub arithmetic_by_node: BTreeMap<NodeAddr, lag::Arithmetic>,
    /// How each node's entries-read counts (see [`loss::ReadCounter::of`]);
    /// a node not yet known is [`loss::ReadCounter::Unknown`].
    pub read_counter_by_node: BTreeMap<NodeAddr, loss::ReadCounter>,
    /// Per node, its server's `run_id` as `INFO` last said: each ledger
    /// follows the server of the node its stream is read from (see
    /// [`loss::Ledger::follow_server`]).
    pub run_ids: BTreeMap<NodeAddr, Arc<str>>,
    /// The target went down since the ledgers were last fed: until every
    /// node is known again, nobody knows whether it is the same server.
    pub ledgers_unverified: bool,
    /// Streams an event said were set from outside (`xsetid`,
    /// `xgroup-setid`, `xgroup-create`, `del`), with the number of the last
    /// such event: their next poll starts a new baseline for their groups
    /// (see [`loss::Observation::set_from_outside`]).
    pub set_from_outside: BTreeMap<Name, u64>,
    /// Events counted into `set_from_outside` so far.
    pub outside_events: u64,
    /// Watched streams the last stream poll could not read (refused:
    /// `BUSY`, `LOADING`, `MASTERDOWN`…): absent from the snapshot, but
    /// their group memories and ledgers are kept for when they answer.
    pub unread_streams: std::collections::BTreeSet<Name>,
    /// The status changes the current stream poll logged.
    pub(crate) status_changes: status_log::StatusChanges,
    /// Streams watched on a keyspace event since discovery last ran, and
    /// when: a discovery whose walk began before then keeps them.
    pub watched_by_event: BTreeMap<Name, tokio::time::Instant>,
}

impl TargetState {
    /// Watches `stream`, which a keyspace event showed to exist, without
    /// waiting for discovery, when discovery would watch it: the target's
    /// patterns match it (checked by the caller), no `exclude_streams`
    /// drops it and `max_streams` leaves room. True when it is watched.
    pub fn watch_now(&mut self, config: &Config, target: &Target, stream: Name) -> bool {
        if self.is_watched(&stream) {
            return true;
        }
        let settings = config.streams.for_stream(&stream);
        if !target.watches_stream(&settings, &stream) || self.watched.len() >= target.max_streams {
            return false;
        }
        self.watched_by_event
            .insert(stream.clone(), tokio::time::Instant::now());
        self.watched_index.insert(stream.clone());
        self.watched.push(stream);
        self.snapshot.streams_watched = Some(self.watched.len() as u64);
        true
    }

    /// The streams watched, in discovery's order.
    pub fn watched(&self) -> &[Name] {
        &self.watched
    }

    /// Whether `stream` is watched.
    pub fn is_watched(&self, stream: &Name) -> bool {
        self.watched_index.contains(stream)
    }

    /// Whether a group of `stream` had entries left to read at its last
    /// poll (or its lag was unknown, or it was never polled): a removal
    /// now may take entries it has not read.
    pub(crate) fn any_group_behind(&self, stream: &Name) -> bool {
        self.snapshot
            .streams
            .get(stream)
            .is_none_or(|s| s.groups.iter().any(|(_, g)| g.lag != Some(0)))
    }

    /// Replaces the streams watched (discovery's list).
    pub fn set_watched(&mut self, streams: Vec<Name>) {
        self.watched_index = streams.iter().cloned().collect();
        self.watched = streams;
    }

    /// The target is down at `now` (a run could not reach it): `target_up`
    /// is 0, and what the last good polls read stays served for `grace`
    /// after the fall ([`TargetSnapshot::held`](crate::snapshot::TargetSnapshot::held)),
    /// so that a blip does not erase every series of the target (nor reset
    /// the `for:` of the alerts on them); past it, everything read is
    /// dropped ([`Self::forget_data`]). At the fall, runs already under way
    /// may no longer apply what they read (it may mix a server that died
    /// with the one that answers next), and the ledgers wait until `INFO`
    /// shows which server answers. Returns true when this call dropped the
    /// data.
    pub fn fell(&mut self, now: tokio::time::Instant, grace: std::time::Duration) -> bool {
        let since = match self.down_since {
            Some(since) => since,
            None => {
                self.down_since = Some(now);
                self.generation += 1;
                self.ledgers_unverified = !self.ledgers.is_empty();
                // Only what a target that was up read is worth holding.
                self.snapshot.held = self.snapshot.up;
                now
            }
        };
        self.snapshot.up = false;
        if self.snapshot.held && now.saturating_duration_since(since) < grace {
            return false;
        }
        let dropped_now = self.snapshot.held;
        self.forget_data();
        dropped_now
    }

    /// Whether what the target holds has been held for `grace` at `now`
    /// (then it is to be dropped, down or not).
    pub fn held_past(&self, now: tokio::time::Instant, grace: std::time::Duration) -> bool {
        self.snapshot.held
            && self
                .down_since
                .is_some_and(|since| now.saturating_duration_since(since) >= grace)
    }

    /// The target answers again: nothing is held any more.
    pub fn rose(&mut self) {
        self.down_since = None;
        self.snapshot.held = false;
        self.snapshot.up = true;
    }

    /// Drops everything read from Redis, after the target went down: no
    /// stale value may be served as fresh.
    pub fn forget_data(&mut self) {
        // The slow probes' evidence (PEL scans, consumers, poison) would take
        // minutes to come back; keep it, tied to the server it came from.
        if let Some(run_id) = self
            .snapshot
            .server
            .as_ref()
            .map(|s| s.run_id.clone())
            .filter(|r| !r.is_empty())
        {
            if self.parked.is_none() {
                self.parked = Some(Parked {
                    run_id,
                    scans: self.snapshot.scans.clone(),
                    consumers: self.snapshot.consumers.clone(),
                    head_poison: self.snapshot.head_poison.clone(),
                });
            }
        }
        self.generation += 1;
        self.snapshot.up = false;
        self.snapshot.held = false;
        self.snapshot.server = None;
        self.snapshot.streams = Arc::default();
        self.snapshot.prune_groups();
        self.groups.clear();
        self.anchors.clear();
        self.walked.clear();
        self.walked_facts = 0;
        self.unread_streams.clear();
        // The ledgers are kept: the same server, back, is compared with the
        // last poll before the outage, so a loss during it is counted.
        self.ledgers_unverified = !self.ledgers.is_empty();
    }

    /// What `INFO` told of each node. Each ledger compares the `run_id` of
    /// its stream's node with the one it was kept against, so a restart or
    /// a failover of one node (one shard) starts a new baseline for its
    /// streams only. After an outage the ledgers wait until every node
    /// answered: one whose `INFO` was refused for now (busy, loading) keeps
    /// them waiting; one that can never say (no permission) is taken for
    /// another server, as nothing can show it is the same.
    pub fn verify_ledgers(&mut self, nodes: &[(NodeAddr, RunId)]) {
        let mut waiting = false;
        let mut unknowable = false;
        for (node, run_id) in nodes {
            match run_id {
                RunId::Known(id) => {
                    if self.run_ids.get(node).is_none_or(|before| **before != **id) {
                        self.run_ids.insert(node.clone(), Arc::from(id.as_str()));
                    }
                }
                RunId::Unknowable => {
                    self.run_ids.remove(node);
                    unknowable = true;
                }
                RunId::NotNow => waiting = true,
            }
        }
        if waiting {
            return;
        }
        if unknowable && self.ledgers_unverified {
            for ledger in self.ledgers.values_mut() {
                ledger.new_baseline();
            }
        }
        self.ledgers_unverified = false;
    }

    /// The ledgers (and what they were kept against) of `before`, the state
    /// of a poller of the same server that a reload replaced: losses keep
    /// counting across it, once `INFO` shows the same server.
    pub fn inherit_ledgers(&mut self, before: &TargetState) {
        self.ledgers = before.ledgers.clone();
        self.run_ids = before.run_ids.clone();
        self.ledgers_unverified = !self.ledgers.is_empty();
    }

    /// What the state file kept of this target from before the exporter
    /// restarted: each group's memory, taken up at its first poll, and the
    /// loss ledgers, which wait (as after an outage) until `INFO` says
    /// which server each node is, then compare the first poll with the
    /// last one before the restart ([`loss::Ledger::follow_server`]).
    pub fn restore(
        &mut self,
        memories: BTreeMap<(Name, Name), GroupMemory>,
        ledgers: BTreeMap<(Name, Name), loss::Ledger>,
    ) {
        self.restored = memories;
        self.ledgers = ledgers;
        self.ledgers_unverified = !self.ledgers.is_empty();
    }

    /// Every group's memory worth keeping across a restart of the exporter:
    /// those of the groups polled since the start, and those restored and
    /// not polled yet.
    pub fn memories(&self) -> impl Iterator<Item = (&(Name, Name), &GroupMemory)> {
        let polled = &self.groups;
        polled.iter().chain(
            self.restored
                .iter()
                .filter(move |(key, _)| !polled.contains_key(*key)),
        )
    }

    /// Records an event that set `stream` or one of its groups from outside.
    pub fn set_outside(&mut self, stream: Name) {
        self.outside_events += 1;
        self.set_from_outside.insert(stream, self.outside_events);
    }

    /// Whether `stream` was set from outside since its last poll; the mark
    /// goes once a poll that began after the event has read it (`seen`:
    /// the events counted when that poll began).
    pub fn take_outside_mark(&mut self, stream: &Name, seen: u64) -> bool {
        let Some(&at) = self.set_from_outside.get(stream) else {
            return false;
        };
        if at <= seen {
            self.set_from_outside.remove(stream);
        }
        true
    }

    /// The ledger of a group, when this poll may feed it (not while the
    /// server is unverified after an outage).
    pub fn ledger_to_feed(&self, key: &(Name, Name)) -> Option<&loss::Ledger> {
        if self.ledgers_unverified {
            return None;
        }
        self.ledgers.get(key)
    }

    /// A stream's walked milliseconds, taken for this poll's walks.
    pub fn take_walked(&mut self, stream: &Name) -> Option<lag::Walked> {
        let walked = self.walked.remove(stream)?;
        self.walked_facts -= walked.facts();
        Some(walked)
    }

    /// Keeps a stream's walked milliseconds for its next poll, while the
    /// target's streams hold at most [`WALKED_KEPT_PER_TARGET`] facts in all
    /// (beyond, that stream's walks start over next time).
    pub fn remember_walked(&mut self, stream: &Name, walked: Option<lag::Walked>) {
        drop(self.take_walked(stream));
        if let Some(walked) = walked {
            if self.walked_facts + walked.facts() <= WALKED_KEPT_PER_TARGET {
                self.walked_facts += walked.facts();
                self.walked.insert(stream.clone(), walked);
            }
        }
    }

    /// Drops memory and per-group results of groups the stream poll no
    /// longer knows.
    pub fn prune_memory(&mut self) {
        self.snapshot.prune_groups();
        let streams = &self.snapshot.streams;
        let unread = &self.unread_streams;
        let known = |(s, g): &(Name, Name)| {
            unread.contains(s) || streams.get(s).is_some_and(|st| st.groups.contains_key(g))
        };
        self.groups.retain(|k, _| known(k));
        self.anchors.retain(|s, _| streams.contains_key(s));
        self.quiet.retain(|s| streams.contains_key(s));
        self.walked.retain(|s, _| streams.contains_key(s));
        self.walked_facts = self.walked.values().map(lag::Walked::facts).sum();
        if !streams.is_empty() {
            self.findings.retain(known);
        }
    }

    /// Once the server is known again after an outage: the same server
    /// (same run id) gets its parked evidence back, with its original
    /// timestamps, for the groups the stream poll knows and no fresher
    /// result covers; another server (a failover, a restart) does not.
    /// Until both the server and the groups are known, it waits.
    pub fn settle_parked(&mut self) {
        let Some(server) = self.snapshot.server.as_ref() else {
            return;
        };
        if self.snapshot.streams.is_empty() && !server.run_id.is_empty() {
            return;
        }
        let Some(parked) = self.parked.take() else {
            return;
        };
        if parked.run_id != server.run_id {
            return;
        }
        let snapshot = &mut self.snapshot;
        let streams = snapshot.streams.clone();
        let known =
            |(s, g): &(Name, Name)| streams.get(s).is_some_and(|st| st.groups.contains_key(g));
        restore(&mut snapshot.scans, &parked.scans, known);
        restore(&mut snapshot.consumers, &parked.consumers, known);
        restore(&mut snapshot.head_poison, &parked.head_poison, known);
    }

    /// Drops the streams discovery no longer watches from the stream
    /// poll's map (discovery decides what is watched; the stream poll owns
    /// what is known of each stream).
    pub fn forget_unwatched_streams(&mut self, watched: &std::collections::BTreeSet<&Name>) {
        crate::snapshot::retain_keys(&mut self.snapshot.streams, |name| watched.contains(name));
    }

    /// Stops watching streams the stream poll found deleted, until
    /// discovery finds them again, and keeps discovery's count in step.
    pub fn forget_vanished_streams(&mut self, vanished: &[Name]) {
        let gone: std::collections::BTreeSet<&Name> = vanished.iter().collect();
        self.watched.retain(|n| !gone.contains(n));
        self.watched_index.retain(|n| !gone.contains(n));
        self.snapshot.streams_watched = Some(self.watched.len() as u64);
    }

    /// The memory and the loss ledger of a group, both made on its first
    /// poll.
    pub fn group_entries(&mut self, key: &(Name, Name)) -> (&mut GroupMemory, &mut loss::Ledger) {
        let mut added = false;
        if !self.groups.contains_key(key)
            && let Some(memory) = self.restored.remove(key)
        {
            self.groups.insert(key.clone(), memory);
            added = true;
        }
        let memory = get_or_make(&mut self.groups, key, &mut added);
        let ledger = get_or_make(&mut self.ledgers, key, &mut added);
        self.groups_added_since_packed += usize::from(added);
        (memory, ledger)
    }

    /// Rebuilds the per-group maps once groups added since they were last
    /// packed make up more than an eighth of them (the first stream poll
    /// adds them all). A B-tree filled one key at a time in key order, as a
    /// stream poll does, leaves every node it splits half empty; one built
    /// from its sorted entries fills them. At 10,000 streams × 2 groups
    /// that is about 7 MB of the exporter's memory, for a copy that costs a
    /// few milliseconds and happens again only after that much growth.
    pub fn pack_group_maps(&mut self) {
        if self.groups_added_since_packed * 8 <= self.groups.len().max(self.ledgers.len()) {
            return;
        }
        self.groups = std::mem::take(&mut self.groups).into_iter().collect();
        self.ledgers = std::mem::take(&mut self.ledgers).into_iter().collect();
        self.groups_added_since_packed = 0;
    }

    /// Drops the loss records, and the memories restored from the state
    /// file, of groups the last stream poll did not see. Only a completed
    /// stream poll may do this: after an outage the stream map is empty
    /// until the next one, and the records must outlive it.
    pub fn prune_ledgers(&mut self) {
        let streams = &self.snapshot.streams;
        let unread = &self.unread_streams;
        let seen = |(s, g): &(Name, Name)| {
            unread.contains(s) || streams.get(s).is_some_and(|st| st.groups.contains_key(g))
        };
        self.ledgers.retain(|key, _| seen(key));
        self.restored.retain(|key, _| seen(key));
    }
}

/// What `INFO` said of a node's `run_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunId {
    /// Its `run_id`.
    Known(String),
    /// Refused for now (busy, loading, unreachable): ask again.
    NotNow,
    /// It will never say (`INFO` not permitted, or no `run_id` field).
    Unknowable,
}

/// The value of a group's key, made by `Default` when absent (then `made`
/// is set).
fn get_or_make<'m, V: Default>(
    map: &'m mut BTreeMap<(Name, Name), V>,
    key: &(Name, Name),
    made: &mut bool,
) -> &'m mut V {
    map.entry(key.clone()).or_insert_with(|| {
        *made = true;
        V::default()
    })
}

/// The per-group results of the slow probes, kept while the target is
/// down, with the run id of the server they came from.
#[derive(Debug, Clone)]
pub struct Parked {
    /// The server's run id when they were read.
    pub run_id: String,
    /// PEL scans.
    pub scans: Arc<BTreeMap<(Name, Name), crate::snapshot::ScanState>>,
    /// Consumers.
    pub consumers: Arc<BTreeMap<(Name, Name), Arc<crate::snapshot::Consumers>>>,
    /// Poison among the oldest entries.
    pub head_poison: Arc<BTreeMap<(Name, Name), u64>>,
}

/// Puts back into `map` the entries of `parked` whose key passes `keep` and
/// that `map` does not have.
fn restore<V: Clone>(
    map: &mut Arc<BTreeMap<(Name, Name), V>>,
    parked: &BTreeMap<(Name, Name), V>,
    keep: impl Fn(&(Name, Name)) -> bool,
) {
    let missing: Vec<(&(Name, Name), &V)> = parked
        .iter()
        .filter(|(k, _)| keep(k) && !map.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        let map = Arc::make_mut(map);
        for (k, v) in missing {
            map.insert(k.clone(), v.clone());
        }
    }
}

/// What the budget log line last said about a target: a short budget is
/// logged with the `commands_per_second` that would cover every probe's
/// interval, so an operator can copy the figure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BudgetNotice {
    /// The budget covers every probe's interval.
    Covers,
    /// Too short; this budget was advised.
    Short {
        /// Commands per second that would cover the need when logged.
        advised: f64,
    },
}

impl BudgetNotice {
    /// A need that grows past the last advice by more than this fraction is
    /// logged again; smaller swings are the run-to-run noise of command
    /// counts (the first figure is logged as soon as every probe has run
    /// once, before the slow probes' runs settle).
    const GROWTH: f64 = 0.1;

    /// The notice to log now, for `needed` commands per second against
    /// `budget`, if it says something new after `last`: the budget became
    /// short, or covers again, or the need outgrew the last advice (which
    /// would then no longer cover it). A need that falls while still short
    /// keeps the higher advice: it still covers.
    pub fn next(last: Option<BudgetNotice>, needed: f64, budget: f64) -> Option<BudgetNotice> {
        let now = if needed > budget {
            BudgetNotice::Short {
                advised: needed.ceil(),
            }
        } else {
            BudgetNotice::Covers
        };
        match (last, now) {
            (Some(BudgetNotice::Short { advised }), BudgetNotice::Short { .. }) => {
                (needed > advised * (1.0 + Self::GROWTH)).then_some(now)
            }
            (Some(BudgetNotice::Covers), BudgetNotice::Covers) => None,
            _ => Some(now),
        }
    }
}
