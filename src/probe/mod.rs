//! Probes: what to ask Redis on each schedule, and how the answers become
//! plain data in the target's state. One probe per file, each with a stable
//! [`ProbeKind`] name used in config, labels and logs.
//!
//! A probe reads what it needs from the [`TargetState`] under a short lock,
//! talks to Redis through the [`TargetClient`] without holding the lock, and
//! applies its results under the lock again. It never publishes; the poller
//! does that after every run. Per-item problems (a stream deleted mid-cycle,
//! NOPERM on one key) are counted and skipped; only a failure to reach the
//! target fails the run.

pub(crate) mod consumers;
pub(crate) mod discovery;
mod figures;
pub(crate) mod info;
pub(crate) mod pending_scan;
pub(crate) mod pending_summary;
mod status_log;
pub(crate) mod stream;

#[cfg(test)]
mod budget_tests;
#[cfg(test)]
mod ownership_tests;
#[cfg(test)]
mod packing_tests;
#[cfg(test)]
mod walked_tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::backend::{NodeAddr, TargetClient, TargetError};

use crate::config::{Config, Target};
use crate::snapshot::{Name, TargetSnapshot};
use crate::status;
pub use crate::vocab::ProbeKind;
use crate::vocab::{ErrorKind, StreamId};
use crate::{lag, loss, trend};

/// What the poller remembers about a group between polls, beyond the
/// snapshot: the status window and the probes' working state.
#[derive(Debug, Default)]
pub struct GroupMemory {
    /// The status window over recent stream polls.
    pub window: status::Window,
    /// Server time of the latest successful read by any consumer.
    pub last_read_at_ms: Option<u64>,
    /// Server time of the latest stream poll that found the group's
    /// position or entries-read advanced.
    pub last_progress_at_ms: Option<u64>,
    /// Smallest pending ID from the latest pending summary.
    pub oldest_pending_id: Option<StreamId>,
    /// What the consumers probe last read of the group, to tell whether an
    /// idle group has anything new to show.
    pub consumers_read: Option<consumers::LastRead>,
    /// The PEL scan pass in progress.
    pub scan_pass: Option<Box<pending_scan::Pass>>,
    /// What the last stream poll proved about the group's lag.
    pub lag_trail: Option<lag::Trail>,
    /// The recent polls, for the ETAs.
    pub trend: trend::Trend,
    /// Rewinds seen when the trend was last reset.
    pub rewinds_seen: u64,
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

/// The most facts the estimator's walks keep for a target's next polls, all
/// its streams together: about 3 MiB.
pub const WALKED_KEPT_PER_TARGET: usize = 16 * lag::WALKED_KEPT_PER_STREAM;

/// The mutable state of one target, owned by its poller.
#[derive(Debug, Default)]
pub struct TargetState {
    /// The working copy of the snapshot.
    pub snapshot: TargetSnapshot,
    /// Streams to watch, from discovery.
    pub watched: Vec<Name>,
    /// Per-group memory, by (stream, group).
    pub groups: BTreeMap<(Name, Name), GroupMemory>,
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
    pub discovery: Option<discovery::DiscoveryReport>,
    /// Failed runs in a row, per probe (discovery's backoff).
    pub failures_in_a_row: BTreeMap<ProbeKind, u32>,
    /// Runs of the consumers probe so far: idle groups are read on every
    /// [`consumers::IDLE_EVERY`]th, each on its own turn.
    pub consumers_runs: u64,
    /// Commands of a probe's last run that its next runs will not repeat,
    /// for the poller's figure of what the probe needs.
    pub one_off_commands: BTreeMap<ProbeKind, u64>,
    /// What the budget log line last said ([`BudgetNotice`]).
    pub budget_notice: Option<BudgetNotice>,
    /// Why the target went down, while it is down (logged once).
    pub last_down_reason: Option<String>,
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
    /// The `run_id` of the server the ledgers were kept against.
    pub ledgers_run_id: Option<String>,
    /// The target went down since the ledgers were last fed: until the
    /// server is known again, nobody knows whether it is the same one.
    pub ledgers_unverified: bool,
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
        if self.watched.contains(&stream) {
            return true;
        }
        let settings = config.streams.for_stream(&stream);
        if !target.watches_stream(&settings, &stream) || self.watched.len() >= target.max_streams {
            return false;
        }
        self.watched_by_event
            .insert(stream.clone(), tokio::time::Instant::now());
        self.watched.push(stream);
        self.snapshot.streams_watched = Some(self.watched.len() as u64);
        true
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
        self.snapshot.server = None;
        self.snapshot.streams = Arc::default();
        self.snapshot.prune_groups();
        self.groups.clear();
        self.anchors.clear();
        self.walked.clear();
        self.walked_facts = 0;
        // The ledgers are kept: the same server, back, is compared with the
        // last poll before the outage, so a loss during it is counted.
        self.ledgers_unverified = !self.ledgers.is_empty();
    }

    /// Once the server is known after an outage (or at the first start):
    /// the same server (same `run_id`) keeps every ledger and baseline;
    /// another one (a restart, a failover), or one whose `run_id` cannot be
    /// read, starts a new baseline (the counts are kept).
    pub fn verify_ledgers(&mut self) {
        let run_id = self
            .snapshot
            .server
            .as_ref()
            .map(|s| s.run_id.clone())
            .filter(|r| !r.is_empty());
        let another = match (&run_id, &self.ledgers_run_id) {
            (Some(now), Some(before)) => now != before,
            // Kept against a server never identified, or unidentifiable now.
            _ => self.ledgers_unverified,
        };
        if another {
            for ledger in self.ledgers.values_mut() {
                ledger.reconnected();
            }
        }
        self.ledgers_unverified = false;
        if run_id.is_some() {
            self.ledgers_run_id = run_id;
        }
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
        let known =
            |(s, g): &(Name, Name)| streams.get(s).is_some_and(|st| st.groups.contains_key(g));
        self.groups.retain(|k, _| known(k));
        self.anchors.retain(|s, _| streams.contains_key(s));
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
        self.snapshot.streams_watched = Some(self.watched.len() as u64);
    }

    /// The memory and the loss ledger of a group, both made on its first
    /// poll.
    pub fn group_entries(&mut self, key: &(Name, Name)) -> (&mut GroupMemory, &mut loss::Ledger) {
        let mut added = false;
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

    /// Drops the loss records of groups the last stream poll did not see.
    /// Only a completed stream poll may do this: after an outage the stream
    /// map is empty until the next one, and the records must outlive it.
    pub fn prune_ledgers(&mut self) {
        let streams = &self.snapshot.streams;
        self.ledgers
            .retain(|(s, g), _| streams.get(s).is_some_and(|st| st.groups.contains_key(g)));
    }
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

/// Everything a probe needs.
#[derive(Debug, Clone)]
pub struct ProbeContext {
    /// The whole configuration.
    pub config: Arc<Config>,
    /// This target's configuration.
    pub target: Arc<Target>,
    /// The connections.
    pub client: Arc<TargetClient>,
    /// The state.
    pub state: Arc<Mutex<TargetState>>,
    /// Held through a stream poll, scheduled or extra: one at a time.
    pub stream_polls: Arc<tokio::sync::Mutex<()>>,
}

impl ProbeContext {
    /// Locks the state. Probes hold it only between awaits.
    pub fn state(&self) -> MutexGuard<'_, TargetState> {
        // A panicking probe leaves at worst a partly updated state, which the
        // next run overwrites; keep serving rather than poisoning the target.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The data generation, to be compared with [`Self::ensure_current`].
    pub fn generation(&self) -> u64 {
        self.state().generation
    }

    /// Fails when the target's data was dropped since `generation` was read.
    ///
    /// # Errors
    /// [`ProbeError::Interrupted`].
    pub(crate) fn ensure_current(
        &self,
        state: &TargetState,
        generation: u64,
    ) -> Result<(), ProbeError> {
        if state.generation == generation {
            Ok(())
        } else {
            Err(ProbeError::Interrupted {
                target: self.target.name.clone(),
            })
        }
    }

    /// Counts a per-item error.
    pub(crate) fn count_error(&self, kind: ErrorKind) {
        self.client.stats().error(kind);
    }
}

/// Why a probe run failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    /// The target could not be reached.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The target went down during the run; what it read was discarded.
    #[error("target {target}: went down during the run; its results were discarded")]
    Interrupted {
        /// Target name.
        target: String,
    },
    /// The run had nothing to ask, and the target is unreachable.
    #[error("target {target}: unreachable")]
    Unreachable {
        /// Target name.
        target: String,
    },
    /// The server refused every command of the run.
    #[error("{probe}: the server refused all {count} commands, first: {first}")]
    Refused {
        /// Probe.
        probe: &'static str,
        /// How many.
        count: usize,
        /// The first refusal.
        first: String,
    },
    /// Replies could not be decoded.
    #[error("{probe}: {count} replies could not be decoded, first: {first}")]
    Decode {
        /// Probe.
        probe: &'static str,
        /// How many.
        count: usize,
        /// The first problem.
        first: String,
    },
}

impl ProbeError {
    /// True when the target itself is unreachable (so its data is dropped).
    pub fn target_down(&self) -> bool {
        matches!(
            self,
            ProbeError::Target(
                TargetError::Timeout { .. }
                    | TargetError::Connection { .. }
                    | TargetError::Topology { .. }
            )
        )
    }
}

/// What went wrong in one run, item by item, so the run can do everything
/// it can and then fail once: on any reply it could not decode, or when the
/// server refused every command it sent for a reason that is not about a
/// key (a missing ACL permission, say). A stream deleted mid-run or a key of
/// another type is a fact about that key, not a failure of the probe.
#[derive(Debug, Default)]
pub struct Problems {
    decode_count: usize,
    first_decode: Option<String>,
    answered: usize,
    refused: usize,
    first_refusal: Option<String>,
}

impl Problems {
    /// Records a reply that could not be decoded (counted as `protocol`).
    pub fn add(&mut self, ctx: &ProbeContext, problem: impl std::fmt::Display) {
        ctx.count_error(ErrorKind::Protocol);
        self.decode_count += 1;
        if self.first_decode.is_none() {
            self.first_decode = Some(problem.to_string());
        }
    }

    /// Records a command the server answered.
    pub fn answered(&mut self) {
        self.answered += 1;
    }

    /// Records a command the server refused (already counted by the client).
    pub(crate) fn refused(&mut self, error: &crate::backend::CommandError) {
        if matches!(
            error.kind,
            ErrorKind::NoSuchKey | ErrorKind::WrongType | ErrorKind::NoGroup
        ) {
            return;
        }
        self.refused += 1;
        if self.first_refusal.is_none() {
            self.first_refusal = Some(error.to_string());
        }
    }

    /// `Err` when a reply could not be decoded or every command was refused.
    ///
    /// # Errors
    /// [`ProbeError::Decode`] or [`ProbeError::Refused`] with the first problem.
    pub(crate) fn finish(self, probe: ProbeKind) -> Result<(), ProbeError> {
        if let Some(first) = self.first_decode {
            return Err(ProbeError::Decode {
                probe: probe.label(),
                count: self.decode_count,
                first,
            });
        }
        match self.first_refusal {
            Some(first) if self.answered == 0 => Err(ProbeError::Refused {
                probe: probe.label(),
                count: self.refused,
                first,
            }),
            _ => Ok(()),
        }
    }
}

/// Runs one probe.
///
/// # Errors
/// When the target cannot be reached or replies cannot be decoded.
pub(crate) async fn run(kind: ProbeKind, ctx: &ProbeContext) -> Result<(), ProbeError> {
    match kind {
        ProbeKind::Discovery => discovery::run(ctx).await,
        ProbeKind::Info => info::run(ctx).await,
        ProbeKind::Stream => stream::run(ctx).await,
        ProbeKind::PendingSummary => pending_summary::run(ctx).await,
        ProbeKind::Consumers => consumers::run(ctx).await,
        ProbeKind::PendingScan => pending_scan::run(ctx).await,
    }
}

/// `(stream, group)` pairs currently in the snapshot.
pub fn known_groups(state: &TargetState) -> Vec<(Name, Name)> {
    state
        .snapshot
        .streams
        .iter()
        .flat_map(|(s, st)| st.groups.keys().map(move |g| (s.clone(), g.clone())))
        .collect()
}

/// What the stream poll's `XINFO GROUPS` line said about a group: the per-
/// group probes ask Redis only where it shows something to learn, and
/// record what it already tells (an empty PEL, no consumers) as known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupLine {
    /// Entries in the group's PEL.
    pub pending: u64,
    /// Consumers in the group.
    pub consumers: u64,
    /// Entries pending or not yet delivered (a lag that is not known to be 0
    /// counts as work: unknown is not none).
    pub work: bool,
}

/// What the per-group probes ask of a target's groups in steady state, at
/// the configured intervals: groups with work are asked every run, idle
/// groups with consumers have their consumers read one run in
/// [`consumers::IDLE_EVERY`], and the rest cost nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GroupCost {
    /// Groups asked every run: pending entries, or consumers and undelivered
    /// entries.
    pub with_work: usize,
    /// Groups with consumers and nothing to do.
    pub idle_with_consumers: usize,
    /// Groups that need no per-group command: nothing pending and no
    /// consumers (undelivered entries or not).
    pub nothing_to_ask: usize,
    /// Per-group commands per second (with the `TIME` of each batch).
    pub per_second: f64,
    /// What asking every group on every run would cost.
    pub every_group_per_second: f64,
}

impl GroupCost {
    /// The cost of `lines` under `config`'s schedule and limits. A PEL scan
    /// is counted at one page per `pending_page` entries; the poison check
    /// of stuck groups' oldest entries is not counted (at most one more
    /// `XPENDING` per group with pending entries).
    pub fn of(lines: &[GroupLine], config: &Config) -> GroupCost {
        let per_batch = config.limits.pipeline_size.saturating_sub(1).max(1) as f64;
        let page = f64::from(config.limits.pending_page.max(1));
        // Commands of a pipelined per-group run of `n` commands.
        let batched = |n: f64| {
            if n > 0.0 {
                n + (n / per_batch).ceil()
            } else {
                0.0
            }
        };
        let every = |kind: ProbeKind| ProbeKind::interval(kind, config).as_secs_f64().max(1e-3);
        let mut cost = GroupCost::default();
        let (mut summaries, mut consumer_reads, mut pages) = (0.0, 0.0, 0.0);
        let (mut all_pages, groups) = (0.0, lines.len() as f64);
        for line in lines {
            let scan_pages = (line.pending as f64 / page).ceil().max(1.0);
            all_pages += scan_pages;
            if line.pending > 0 {
                summaries += 1.0;
                pages += scan_pages;
            }
            match (line.consumers > 0, line.work) {
                (true, true) => {
                    cost.with_work += 1;
                    consumer_reads += 1.0;
                }
                (true, false) => {
                    cost.idle_with_consumers += 1;
                    consumer_reads += 1.0 / consumers::IDLE_EVERY as f64;
                }
                // A PEL without consumers (they were deleted): its pages.
                (false, _) if line.pending > 0 => cost.with_work += 1,
                (false, _) => cost.nothing_to_ask += 1,
            }
        }
        cost.per_second = batched(summaries) / every(ProbeKind::PendingSummary)
            + batched(consumer_reads) / every(ProbeKind::Consumers)
            + pages / every(ProbeKind::PendingScan);
        cost.every_group_per_second = batched(groups) / every(ProbeKind::PendingSummary)
            + batched(groups) / every(ProbeKind::Consumers)
            + all_pages / every(ProbeKind::PendingScan);
        cost
    }
}

/// Every group in the snapshot with its [`GroupLine`].
pub fn group_lines(state: &TargetState) -> Vec<((Name, Name), GroupLine)> {
    state
        .snapshot
        .streams
        .iter()
        .flat_map(|(s, st)| {
            st.groups.iter().map(move |(g, gs)| {
                let line = GroupLine {
                    pending: gs.info.pending,
                    consumers: gs.info.consumers,
                    work: gs.info.pending > 0 || gs.lag != Some(0),
                };
                ((s.clone(), g.clone()), line)
            })
        })
        .collect()
}

/// Seconds between `now_ms` and `then_ms`, clamped at 0 (IDs can run ahead
/// of the clock).
pub fn age_seconds(now_ms: u64, then_ms: u64) -> f64 {
    now_ms.saturating_sub(then_ms) as f64 / 1000.0
}

/// Sends one command per `(stream, group)` pair, pipelined per node in
/// batches that start with `TIME`, decodes each reply with `decode`, and
/// hands each batch's server time and decoded replies to `apply`. A group
/// that vanished since the stream poll (`NOGROUP`) is skipped: the next
/// stream poll removes it; undecodable replies go to `problems`.
///
/// # Errors
/// When the target cannot be reached.
pub(crate) async fn per_group<T>(
    ctx: &ProbeContext,
    pairs: &[(Name, Name)],
    make: impl Fn(&Name, &Name) -> crate::backend::Command,
    decode: impl Fn(&redis::Value) -> Result<T, crate::backend::reply::DecodeError>,
    problems: &mut Problems,
    mut apply: impl FnMut(Option<u64>, Vec<(&Name, &Name, T)>),
) -> Result<(), ProbeError> {
    use crate::backend::{Command, reply};
    let generation = ctx.generation();
    let by_node = ctx
        .client
        .partition(pairs.iter().map(|(s, _)| &**s))
        .await?;
    let per_batch = ctx.config.limits.pipeline_size.saturating_sub(1).max(1);
    for (node, mine) in by_node {
        for batch in mine.chunks(per_batch) {
            let batch: Vec<&(Name, Name)> = batch.iter().map(|&i| &pairs[i]).collect();
            let mut cmds = Vec::with_capacity(batch.len() + 1);
            cmds.push(Command::Time);
            cmds.extend(batch.iter().map(|(s, g)| make(s, g)));
            let mut replies = ctx.client.execute(&node, &cmds).await?;
            let time = replies.remove(0);
            let now_ms = time.ok().and_then(|v| reply::time_ms(&v).ok());
            let mut decoded = Vec::with_capacity(batch.len());
            for ((s, g), r) in batch.iter().map(|p| (&p.0, &p.1)).zip(replies) {
                match r {
                    Ok(v) => {
                        problems.answered();
                        match decode(&v) {
                            Ok(item) => decoded.push((s, g, item)),
                            Err(e) => problems.add(ctx, e),
                        }
                    }
                    Err(e) => {
                        problems.refused(&e);
                        tracing::debug!(redis_target = %ctx.target.name, error = %e, "command refused")
                    }
                }
            }
            ctx.ensure_current(&ctx.state(), generation)?;
            apply(now_ms, decoded);
        }
    }
    Ok(())
}
