//! [`TargetClient`], read top to bottom: what it holds for one target and
//! how it is built; batches sent as pipelines; reads of one moment (`MULTI`
//! … `EXEC`); chains of commands that each need the previous reply
//! ([`Sequence`]); replies settled, redirections followed; one pipeline to
//! one node; the routing of keys to nodes (the cluster's slot map re-read,
//! the sentinels asked for the primary); and its pooled connection per
//! node, opened the one way every connection is ([`Dialer::open`]) and
//! named. The parts it is made of live in the rooms below it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisConnectionInfo, Value};
use tokio::time::Instant;

use super::bounded::BoundedReplies;
use super::connection::{
    Dialer, Node, NodeAddr, RedisConnection, STEP_OPENING, closed_under_us, data_settings,
    sentinel_settings, split_addr,
};
use super::redirect::{Decision, MAX_REDIRECTS, decide};
use super::sentinel::primary_addr;
use super::stats::ClientStats;
use super::topology::{Topology, refresh_candidates};
use super::tracking::Tracking;
use crate::backend::command::Command;
use crate::backend::error::{CommandError, TargetError, pipeline_labels};
use crate::backend::paging::Pages;
use crate::backend::ratelimit::RateLimiter;
use crate::backend::reply;
use crate::backend::slot::SlotMap;
use crate::backend::tls::TlsSetup;
use crate::config::{ClientTracking, Limits, Mode, Target};
use crate::vocab::{ErrorKind, ReconnectReason, StatsSnapshot};

/// One reply of a pipeline.
pub(crate) type Reply = Result<Value, CommandError>;

/// Why a client could not be built: its TLS settings are unusable.
#[derive(Debug, thiserror::Error)]
#[error("target {target}: {detail}")]
pub struct ClientSetupError {
    target: String,
    detail: String,
}

/// The connections to one target.
#[derive(Debug)]
pub struct TargetClient {
    pub(super) target: Arc<Target>,
    pub(super) timeout: Duration,
    pipeline_size: usize,
    commands: RateLimiter,
    entries: RateLimiter,
    pub(super) stats: ClientStats,
    /// For `rediss://` targets.
    tls: Option<TlsSetup>,
    topology: Mutex<Topology>,
    /// Outcome of the last round trip: `None` before any, then whether it
    /// reached the server.
    reachable: Mutex<Option<bool>>,
    /// `CLUSTER SHARDS` was refused (before 7.0): use `CLUSTER SLOTS`.
    slots_only: AtomicBool,
    /// Page sizes that follow the server (see `paging`).
    pages: Mutex<Pages>,
    /// `MULTI` was refused (`NOPERM`): reads that want one moment go
    /// without a transaction.
    no_transactions: AtomicBool,
    /// Raised when a reply did not decode: connections opened before are
    /// not used again (see [`TargetClient::distrust_connections`]).
    epoch: AtomicU64,
    /// Client tracking of the poll connections (see `tracking`).
    pub(super) tracking: Tracking,
    /// The removals the keyevent subscriptions announced.
    pub(super) removals: super::removals::RemovalLog,
}

impl TargetClient {
    /// A client for `target`; it connects lazily, on the first command.
    ///
    /// # Errors
    /// When its TLS settings cannot be used (no CA configured and none in
    /// the system).
    pub fn new(target: Arc<Target>, limits: &Limits) -> Result<Self, ClientSetupError> {
        let tls = if target.endpoint.tls {
            if target.tls.insecure_skip_verify {
                tracing::warn!(redis_target = %target.name, "tls_insecure_skip_verify: the server's certificate is not verified; anyone on the path can read the exporter's password and answers");
            }
            Some(
                TlsSetup::new(&target.tls).map_err(|detail| ClientSetupError {
                    target: target.name.clone(),
                    detail,
                })?,
            )
        } else {
            None
        };
        let burst = limits
            .pipeline_size
            .min(limits.commands_per_second as usize)
            .max(1) as u32;
        let standalone: NodeAddr =
            format!("{}:{}", target.endpoint.host, target.endpoint.port).into();
        Ok(TargetClient {
            timeout: limits.command_timeout,
            pipeline_size: burst as usize,
            commands: RateLimiter::with_shares(
                limits.commands_per_second,
                burst,
                &limits.shares_by_rank(),
            ),
            entries: RateLimiter::new(limits.pending_entries_per_second, limits.pending_page),
            stats: ClientStats::default(),
            tls,
            topology: Mutex::new(Topology::for_mode(&target.mode, standalone)),
            reachable: Mutex::new(None),
            slots_only: AtomicBool::new(false),
            no_transactions: AtomicBool::new(false),
            pages: Mutex::new(Pages::new(limits, target.scan_count)),
            epoch: AtomicU64::new(0),
            tracking: Tracking::new(target.client_tracking == ClientTracking::Auto),
            removals: super::removals::RemovalLog::default(),
            target,
        })
    }

    /// The counters.
    pub(crate) fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// A copy of the counters.
    pub(crate) fn stats_snapshot(&self) -> StatsSnapshot {
        self.stats.snapshot(
            (self.commands.waited() + self.entries.waited()).as_secs_f64(),
            self.pages().sizes(),
            self.tracking.stats(),
        )
    }

    fn pages(&self) -> MutexGuard<'_, Pages> {
        self.pages.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `COUNT` of the next discovery `SCAN` page.
    pub(crate) fn scan_page(&self) -> u32 {
        self.pages().scan.current()
    }

    /// The `COUNT` of the next PEL scan `XPENDING` page.
    pub(crate) fn xpending_page(&self) -> u32 {
        self.pages().xpending.current()
    }

    /// Whether the last round trip reached the server (`None` before any).
    pub(crate) fn reachable(&self) -> Option<bool> {
        *self.reachable.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_reachable(&self, ok: bool) {
        *self.reachable.lock().unwrap_or_else(|p| p.into_inner()) = Some(ok);
    }

    /// Commands sent so far by probes of `rank` (see `ratelimit::PRIORITY`).
    pub(crate) fn commands_spent(&self, rank: usize) -> u64 {
        self.commands.spent(rank)
    }

    /// Waits until the PEL scan may read `n` more entries.
    pub(crate) async fn acquire_pending_entries(&self, n: u32) {
        self.entries.acquire(n as usize).await;
    }
}

// Batches: cut into pipelines, each paid for in tokens, each reply settled
// and pruned.
impl TargetClient {
    /// Sends `cmds` to `node` and returns one reply per command, in order.
    /// Batches are split into pipelines of at most the pipeline size whose
    /// replies may hold at most [`PIPELINE_ITEMS`] entries or rows between
    /// them; every command waits for its token first.
    ///
    /// # Errors
    /// A [`TargetError`] when the node cannot be reached or does not answer in
    /// time; server errors of single commands are returned in their reply.
    pub(crate) async fn execute(
        &self,
        node: &NodeAddr,
        cmds: &[Command],
    ) -> Result<Vec<Reply>, TargetError> {
        let mut replies = Vec::with_capacity(cmds.len());
        for chunk in pipelines(cmds, self.pipeline_size) {
            self.commands.acquire(chunk.len()).await;
            self.send_paid(node, chunk, &mut replies).await?;
        }
        Ok(replies)
    }

    /// Sends `cmds` as one pipeline whose tokens were already taken and
    /// appends their settled replies to `replies`.
    async fn send_paid(
        &self,
        node: &NodeAddr,
        cmds: &[Command],
        replies: &mut Vec<Reply>,
    ) -> Result<(), TargetError> {
        let raw = self.round_trip(node, cmds, false).await?;
        for (cmd, value) in cmds.iter().zip(raw) {
            let reply = self.settle(node, cmd, value).await?;
            replies.push(self.pruned(cmd, reply));
        }
        Ok(())
    }

    /// `reply` without the items whose names were too long to keep
    /// (counted as skipped).
    fn pruned(&self, cmd: &Command, mut reply: Reply) -> Reply {
        if let Ok(value) = &mut reply
            && let Some((kind, n)) = reply::prune(cmd, value)
        {
            self.stats.skipped(kind, n);
        }
        reply
    }
}

/// The tokens `cmds` take, sent again (with `ASKING` before each when
/// `asking`): `MULTI` and `EXEC` take none, as when first sent.
fn tokens(cmds: &[Command], asking: bool) -> usize {
    let n = cmds
        .iter()
        .filter(|c| !matches!(c, Command::Multi | Command::Exec))
        .count();
    if asking { 2 * n } else { n }
}

/// The most entries or rows the replies of one pipeline may hold between
/// them (the sum of their commands' `COUNT`s; one command alone may ask for
/// more): what one round trip keeps in memory before it is decoded stays
/// bounded whatever the batch.
const PIPELINE_ITEMS: u64 = 10_000;

/// `cmds` cut into pipelines of at most `size` commands whose replies may
/// hold at most [`PIPELINE_ITEMS`] entries or rows (at least one command
/// each).
fn pipelines(cmds: &[Command], size: usize) -> impl Iterator<Item = &[Command]> {
    let size = size.max(1);
    let mut rest = cmds;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut items = 0u64;
        let mut end = 0;
        while end < rest.len().min(size) {
            items += rest[end].reply_items();
            if end > 0 && items > PIPELINE_ITEMS {
                break;
            }
            end += 1;
        }
        let (chunk, after) = rest.split_at(end);
        rest = after;
        Some(chunk)
    })
}

// Reads that want one moment: groups of commands inside `MULTI` … `EXEC`
// in one pipeline, sent again without a transaction where the server would
// not run one.
impl TargetClient {
    /// Sends `head`, then each group of `atomic` inside `MULTI` … `EXEC`, in
    /// one pipeline: each group's replies describe one moment, with no
    /// other client's command between them (a pipeline alone does not
    /// promise that: the server may read it in pieces). Returns the replies
    /// of `head`, and per group its replies and whether they are of one
    /// moment. A group the server would not run as a transaction (an ACL
    /// without `+multi`, a key it refuses at queueing, a redirection) is
    /// sent again without one; after a `NOPERM` on `MULTI` the client stops
    /// asking for transactions.
    ///
    /// `MULTI` and `EXEC` cost the server next to nothing and take no token
    /// of the rate limit.
    ///
    /// # Errors
    /// As [`TargetClient::execute`].
    pub(crate) async fn execute_atomically(
        &self,
        node: &NodeAddr,
        head: &[Command],
        atomic: &[Vec<Command>],
    ) -> Result<(Vec<Reply>, Vec<(Vec<Reply>, bool)>), TargetError> {
        let inner: usize = atomic.iter().map(Vec::len).sum();
        self.commands.acquire(head.len() + inner).await;
        let transactions = !self
            .no_transactions
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut cmds: Vec<Command> = head.to_vec();
        for group in atomic {
            if transactions {
                cmds.push(Command::Multi);
                cmds.extend(group.iter().cloned());
                cmds.push(Command::Exec);
            } else {
                cmds.extend(group.iter().cloned());
            }
        }
        let raw = self.round_trip(node, &cmds, false).await?;
        let mut raw = raw.into_iter();
        let mut heads = Vec::with_capacity(head.len());
        for cmd in head {
            let value = raw.next().unwrap_or(Value::Nil);
            let reply = self.settle(node, cmd, value).await?;
            heads.push(self.pruned(cmd, reply));
        }
        let mut groups = Vec::with_capacity(atomic.len());
        let mut again: Vec<usize> = Vec::new();
        for (i, group) in atomic.iter().enumerate() {
            if !transactions {
                let mut replies = Vec::with_capacity(group.len());
                for cmd in group {
                    let value = raw.next().unwrap_or(Value::Nil);
                    let reply = self.settle(node, cmd, value).await?;
                    replies.push(self.pruned(cmd, reply));
                }
                groups.push((replies, false));
                continue;
            }
            let multi = raw.next().unwrap_or(Value::Nil);
            let queued: Vec<Value> = raw.by_ref().take(group.len()).collect();
            let exec = raw.next().unwrap_or(Value::Nil);
            if let Value::ServerError(e) = &multi
                && e.code() == "NOPERM"
                && !self
                    .no_transactions
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(redis_target = %self.target.name, "MULTI is not permitted: each stream's XINFO is read without a transaction, and losses that need its two replies of one moment are reported as possible (grant +multi +exec, see docs/configuration.md)");
            }
            match exec {
                Value::Array(items)
                    if items.len() == group.len() && queued.len() == group.len() =>
                {
                    let replies = group
                        .iter()
                        .zip(items)
                        .map(|(cmd, v)| match v {
                            Value::ServerError(e) => Err(self.refusal(cmd, &e)),
                            v => self.pruned(cmd, Ok(v)),
                        })
                        .collect();
                    groups.push((replies, true));
                }
                _ => {
                    groups.push((Vec::new(), false));
                    again.push(i);
                }
            }
        }
        for i in again {
            let mut replies = Vec::with_capacity(atomic[i].len());
            self.send_paid(node, &atomic[i], &mut replies).await?;
            groups[i] = (replies, false);
        }
        Ok((heads, groups))
    }
}

// Commands sent one at a time, each after the previous reply (SCAN's
// cursor), their tokens prepaid in growing batches so a walk runs back to
// back.
impl TargetClient {
    /// A chain of commands to `node` where each needs the previous reply
    /// (SCAN's cursor), sent back to back: see [`Sequence`].
    pub(crate) fn sequence(&self, node: NodeAddr) -> Sequence<'_> {
        Sequence {
            client: self,
            node,
            prepaid: 0,
            next_batch: 1,
        }
    }
}

/// Commands sent one at a time, each after the previous reply, with the
/// rate limit's tokens taken 1, 2, 4, … up to a burst at a time instead of
/// one per command.
///
/// Paced one by one, a SCAN walk reaches the server every 2 ms (at 500
/// commands/s), each call finding its caches cold: on Redis 7.0 with 1M keys
/// a walk at COUNT 500 cost 0.94 s of Redis time spaced that way against
/// 0.62 s back to back, and more of its calls crossed 1 ms. Prepaying keeps
/// within the bucket (at most `burst + rate × t` tokens over any `t`); the
/// batches grow from one, so a short chain (a small keyspace: one call per
/// node) is not held up waiting for tokens it will not use, and no chain
/// leaves more tokens unused than it sent, nor more than a burst.
#[derive(Debug)]
pub(crate) struct Sequence<'a> {
    client: &'a TargetClient,
    node: NodeAddr,
    prepaid: usize,
    next_batch: usize,
}

impl Sequence<'_> {
    /// Sends `cmd` and returns its reply.
    ///
    /// # Errors
    /// As [`TargetClient::execute`].
    pub(crate) async fn send(&mut self, cmd: &Command) -> Result<Reply, TargetError> {
        if self.prepaid == 0 {
            let batch = self.next_batch.min(self.client.commands.burst()).max(1);
            self.client.commands.acquire(batch).await;
            self.prepaid = batch;
            self.next_batch = batch * 2;
        }
        self.prepaid -= 1;
        let mut reply = Vec::with_capacity(1);
        self.client
            .send_paid(&self.node, std::slice::from_ref(cmd), &mut reply)
            .await?;
        // `round_trip` returns one reply per command or an error; a missing
        // one would read as a nil reply, which no decoder accepts.
        Ok(reply.pop().unwrap_or(Ok(Value::Nil)))
    }
}

// Replies settled: server errors read, redirections followed (see
// `redirect`).
impl TargetClient {
    /// Turns a raw reply from `node` into a [`Reply`], following `MOVED`
    /// and `ASK` (see `redirect`): at most [`MAX_REDIRECTS`] hops.
    async fn settle(
        &self,
        node: &NodeAddr,
        cmd: &Command,
        mut value: Value,
    ) -> Result<Reply, TargetError> {
        let mut at = node.clone();
        for _ in 0..MAX_REDIRECTS {
            let Value::ServerError(err) = &value else {
                return Ok(Ok(value));
            };
            let (code, details) = (
                err.code().to_string(),
                err.details().unwrap_or_default().to_string(),
            );
            let (target, asking) = match decide(&code, &details, &at) {
                Decision::Follow { to, asking } => (to, asking),
                Decision::Unreadable => break,
                Decision::Refused => return Ok(Err(self.refusal(cmd, err))),
            };
            if !asking {
                self.stats.error(ErrorKind::Cluster);
                self.topo().moved();
            }
            self.commands.acquire(if asking { 2 } else { 1 }).await;
            let mut raw = self
                .round_trip(&target, std::slice::from_ref(cmd), asking)
                .await?;
            value = raw.pop().unwrap_or(Value::Nil);
            at = target;
        }
        self.stats.error(ErrorKind::Cluster);
        Ok(Err(CommandError {
            kind: ErrorKind::Cluster,
            command: cmd.label(),
            code: "REDIRECT".into(),
            message: format!("still redirected after {MAX_REDIRECTS} hops (last node {at})"),
        }))
    }

    /// The error the server refused `cmd` with, counted unless it says the
    /// key or group is gone. Inside a transaction it is read as such: no
    /// redirection is followed there (the transaction would have been
    /// refused instead).
    fn refusal(&self, cmd: &Command, err: &redis::ServerError) -> CommandError {
        let (code, details) = (
            err.code().to_string(),
            err.details().unwrap_or_default().to_string(),
        );
        let kind = ErrorKind::from_server(&code, &details);
        if !kind.is_vanished() {
            self.stats.error(kind);
        }
        CommandError {
            kind,
            command: cmd.label(),
            code,
            message: details,
        }
    }
}

// One pipeline to one node: the connection, the timeout, the replies
// checked against their commands, and what a failure leaves (the connection
// dropped, the topology suspect, the error counted).
impl TargetClient {
    /// One pipeline to one node, with the timeout. With `asking`, each
    /// command is preceded by `ASKING` and only its own reply is returned.
    ///
    /// A pipeline whose connection was closed under it before any reply
    /// (an idle `timeout` of the server, a proxy's idle limit, `CLIENT
    /// KILL`: see [`closed_under_us`]) is sent once more on a fresh
    /// connection, its tokens taken again: every command of the allowlist
    /// is a read, safe to repeat. Only a failure of that second send is a
    /// failure of the round trip (counted, the target unreachable).
    async fn round_trip(
        &self,
        addr: &NodeAddr,
        cmds: &[Command],
        asking: bool,
    ) -> Result<Vec<Value>, TargetError> {
        let node = self.node(addr);
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for cmd in cmds {
            if asking {
                pipe.add_command(Command::Asking.to_cmd()).ignore();
            }
            pipe.add_command(cmd.to_cmd());
        }
        let mut resent = false;
        loop {
            let mut conn = match self.connection(&node).await {
                Ok(c) => c,
                Err(e) => {
                    self.set_reachable(false);
                    self.invalidate_topology();
                    return Err(e);
                }
            };
            for cmd in cmds {
                if asking {
                    self.stats.command(Command::Asking.label());
                }
                self.stats.command(cmd.label());
            }
            let sent = Instant::now();
            let result = tokio::time::timeout(
                self.timeout,
                pipe.query_async::<Vec<Value>>(&mut conn.inner),
            )
            .await;
            // A reply that broke the protocol still came from a server that
            // answers: the probes fail, the target stays up.
            let violation = conn.violation.get().map(str::to_string);
            if !resent && violation.is_none() && matches!(&result, Ok(Err(e)) if closed_under_us(e))
            {
                resent = true;
                self.drop_connection(&node, &conn, ReconnectReason::Closed)
                    .await;
                self.commands.acquire(tokens(cmds, asking)).await;
                continue;
            }
            if matches!(result, Ok(Ok(_))) {
                node.answered(Instant::now());
                if !asking {
                    self.pages().observe(cmds, sent.elapsed(), Instant::now());
                }
            }
            self.set_reachable(matches!(result, Ok(Ok(_))) || violation.is_some());
            if !matches!(result, Ok(Ok(_))) {
                self.invalidate_topology();
            }
            let err = match result {
                Ok(Ok(values)) if values.len() == cmds.len() => {
                    match reply::pipeline_misfit(cmds, &values) {
                        None => return Ok(values),
                        Some(detail) => self.protocol_error(addr, detail),
                    }
                }
                Ok(Ok(values)) => self.protocol_error(
                    addr,
                    format!(
                        "a pipeline of {} commands got {} replies",
                        cmds.len(),
                        values.len()
                    ),
                ),
                Ok(Err(_)) if violation.is_some() => {
                    self.protocol_error(addr, violation.unwrap_or_default())
                }
                Ok(Err(e)) if e.is_timeout() => self.command_timeout(addr, cmds),
                Err(_) => self.command_timeout(addr, cmds),
                Ok(Err(e)) => self.dialer().connection_error(addr, &e),
            };
            let reason = match err.kind() {
                ErrorKind::Timeout => ReconnectReason::Timeout,
                ErrorKind::Protocol => ReconnectReason::Protocol,
                _ => ReconnectReason::Closed,
            };
            self.drop_connection(&node, &conn, reason).await;
            self.stats.error(err.kind());
            return Err(err);
        }
    }

    /// No answer to `cmds` on an open connection to `addr`.
    fn command_timeout(&self, addr: &NodeAddr, cmds: &[Command]) -> TargetError {
        TargetError::CommandTimeout {
            target: self.target.name.clone(),
            node: addr.to_string(),
            // A transaction's MULTI and EXEC are no news: its commands are.
            commands: pipeline_labels(
                cmds.iter()
                    .filter(|c| !matches!(c, Command::Multi | Command::Exec))
                    .map(Command::label),
            ),
            timeout: self.timeout,
        }
    }

    /// A reply from `addr` that cannot be read, as `detail` says.
    fn protocol_error(&self, addr: &NodeAddr, detail: String) -> TargetError {
        TargetError::Protocol {
            target: self.target.name.clone(),
            node: addr.to_string(),
            detail,
        }
    }
}

// Which node serves what (see `topology`): the primaries to ask, keys
// routed to them, the cluster's slot map re-read and the sentinels asked
// when the topology is suspect.
impl TargetClient {
    fn topo(&self) -> MutexGuard<'_, Topology> {
        self.topology.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The primaries to ask: the one server, the sentinel's current primary,
    /// or every cluster primary (refreshing the slot map when it is stale).
    ///
    /// # Errors
    /// When the sentinel or the cluster topology cannot be read.
    pub(crate) async fn nodes(&self) -> Result<Vec<NodeAddr>, TargetError> {
        match &self.target.mode {
            Mode::Standalone => match &*self.topo() {
                Topology::Standalone(node) => Ok(vec![node.addr.clone()]),
                _ => unreachable_topology(),
            },
            Mode::Sentinel { .. } => Ok(vec![self.sentinel_primary().await?.addr.clone()]),
            Mode::Cluster { .. } => {
                let stale = self.topo().cluster_stale();
                if stale {
                    self.refresh_cluster().await?;
                }
                match &*self.topo() {
                    Topology::Cluster { slots, .. } => Ok(slots.primaries()),
                    _ => unreachable_topology(),
                }
            }
        }
    }

    /// Marks the topology for re-reading on the next [`Self::nodes`] call:
    /// the sentinels are asked again and the cluster map re-read. Discovery
    /// calls this on its own cadence, and a failed round trip at once (a
    /// node could not be asked: maybe it failed over), so a promoted replica
    /// is found within one poll.
    pub(crate) fn invalidate_topology(&self) {
        self.topo().suspect();
    }

    /// Groups keys by the node that serves them, as positions in `keys`
    /// (in order), so callers keep their own items without a lookup.
    ///
    /// # Errors
    /// When the topology cannot be read.
    pub(crate) async fn partition<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
    ) -> Result<BTreeMap<NodeAddr, Vec<usize>>, TargetError> {
        let nodes = self.nodes().await?;
        let Some(fallback) = nodes.first() else {
            return Err(self.topology_error("no primary to ask".into()));
        };
        Ok(self.topo().route(keys, fallback))
    }

    /// The node slot for `addr` (see [`Topology::node`]).
    fn node(&self, addr: &NodeAddr) -> Arc<Node> {
        self.topo().node(addr)
    }

    fn topology_error(&self, detail: String) -> TargetError {
        TargetError::Topology {
            target: self.target.name.clone(),
            detail,
        }
    }

    /// Re-reads the cluster slot map from any reachable node: `CLUSTER
    /// SHARDS` (7.0+), else `CLUSTER SLOTS`.
    async fn refresh_cluster(&self) -> Result<(), TargetError> {
        let Mode::Cluster { seeds } = &self.target.mode else {
            return Ok(());
        };
        let known = self.topo().primaries();
        let url = format!(
            "{}:{}",
            self.target.endpoint.host, self.target.endpoint.port
        );
        let candidates = refresh_candidates(known, url.into(), seeds);
        let tls = self.target.endpoint.tls;
        let mut last_problem = String::from("no node to ask");
        for addr in candidates {
            let asked_host = split_addr(&addr).map(|(h, _)| h).unwrap_or_default();
            let shards = if self.slots_only.load(Ordering::Relaxed) {
                None
            } else {
                self.commands.acquire(1).await;
                match self
                    .round_trip(&addr, &[Command::ClusterShards], false)
                    .await
                {
                    // Before 7.0 (or without +cluster|shards): CLUSTER
                    // SLOTS from now on, without asking again.
                    Ok(mut v) => match v.pop().unwrap_or(Value::Nil) {
                        Value::ServerError(_) => {
                            self.slots_only.store(true, Ordering::Relaxed);
                            None
                        }
                        other => Some(other),
                    },
                    Err(e) => {
                        last_problem = e.to_string();
                        continue;
                    }
                }
            };
            let map = match shards {
                Some(shards) => SlotMap::from_shards(&shards, tls, &asked_host),
                None => {
                    self.commands.acquire(1).await;
                    match self
                        .round_trip(&addr, &[Command::ClusterSlots], false)
                        .await
                    {
                        Ok(mut v) => match v.pop().unwrap_or(Value::Nil) {
                            Value::ServerError(e) => {
                                last_problem = format!(
                                    "{addr}: CLUSTER SLOTS: {} {}",
                                    e.code(),
                                    e.details().unwrap_or_default()
                                );
                                continue;
                            }
                            slots => SlotMap::from_slots(&slots, &asked_host),
                        },
                        Err(e) => {
                            last_problem = e.to_string();
                            continue;
                        }
                    }
                }
            };
            match map {
                Ok(map) if !map.is_empty() => {
                    self.topo().set_slots(map);
                    return Ok(());
                }
                Ok(_) => last_problem = format!("{addr} reported no slots"),
                Err(e) => last_problem = format!("{addr}: {e}"),
            }
        }
        self.stats.error(ErrorKind::Cluster);
        Err(self.topology_error(format!("cannot read the cluster topology: {last_problem}")))
    }

    /// The current primary according to the sentinels (the first that
    /// answers), re-asked every `SENTINEL_REFRESH` (10 s), after any failed round
    /// trip and on every discovery run.
    async fn sentinel_primary(&self) -> Result<Arc<Node>, TargetError> {
        if let Topology::Sentinel(state) = &*self.topo() {
            if let Some(node) = state.fresh(Instant::now()) {
                return Ok(node);
            }
        }
        let Mode::Sentinel {
            sentinels,
            master_name,
            username,
            password,
        } = &self.target.mode
        else {
            return Err(self.topology_error("not in sentinel mode".into()));
        };
        let mut last_problem = String::from("no sentinel configured");
        for sentinel in sentinels {
            let addr: NodeAddr = sentinel.as_str().into();
            let settings = sentinel_settings(username.as_deref(), password.as_ref());
            let mut conn = match self.connect(&addr, settings).await {
                Ok(c) => c,
                Err(e) => {
                    last_problem = e.to_string();
                    continue;
                }
            };
            let cmd = Command::SentinelMasterAddr {
                name: master_name.clone(),
            };
            self.commands.acquire(1).await;
            self.stats.command(cmd.label());
            let reply = tokio::time::timeout(
                self.timeout,
                cmd.to_cmd().query_async::<Value>(&mut conn.inner),
            )
            .await;
            let addr = match reply {
                Ok(Ok(value)) => primary_addr(sentinel, master_name, &value),
                Ok(Err(e)) => Err(format!("sentinel {sentinel}: {e}")),
                Err(_) => Err(format!(
                    "sentinel {sentinel} did not answer within {:?}",
                    self.timeout
                )),
            };
            let addr = match addr {
                Ok(addr) => addr,
                Err(problem) => {
                    last_problem = problem;
                    continue;
                }
            };
            let Topology::Sentinel(state) = &mut *self.topo() else {
                return unreachable_topology();
            };
            return Ok(state.resolved(&addr, Instant::now()));
        }
        if let Topology::Sentinel(state) = &mut *self.topo() {
            if let Some(node) = state.keep_last(Instant::now()) {
                tracing::warn!(redis_target = %self.target.name, primary = %node.addr, problem = %last_problem, "no sentinel answered; keeping the last known primary");
                return Ok(node);
            }
        }
        self.stats.error(ErrorKind::Connection);
        Err(self.topology_error(format!("no sentinel gave the primary: {last_problem}")))
    }
}

/// The topology's variant does not match the mode: it is chosen from the
/// mode in [`TargetClient::new`] and never changes, so this does not happen.
fn unreachable_topology<T>() -> Result<T, TargetError> {
    Err(TargetError::Topology {
        target: String::new(),
        detail: "internal: topology does not match mode".into(),
    })
}

// Connections: the pooled one per node, opened (see `connection`) and named,
// dropped when it can no longer be trusted.
impl TargetClient {
    /// The pooled connection to `node`, opened with the target's
    /// credentials and database when there is none, or only one from before
    /// the last [`Self::distrust_connections`]. A connection that replaces
    /// a dropped one is counted as a reconnect, by why that one went.
    /// Tracking is turned on (again) towards the node's subscriber when it
    /// is not yet (see [`Self::track`]).
    async fn connection(&self, node: &Node) -> Result<RedisConnection, TargetError> {
        let mut slot = node.conn.lock().await;
        let epoch = self.epoch.load(Ordering::Relaxed);
        if let Some(conn) = slot.as_ref() {
            if conn.epoch == epoch {
                let mut conn = conn.clone();
                self.track(&node.addr, &mut conn).await;
                return Ok(conn);
            }
            *slot = None;
            node.dropped(ReconnectReason::Protocol);
        }
        let mut conn = self
            .connect(&node.addr, data_settings(&self.target))
            .await?;
        self.tracking.connection_reset(&node.addr);
        let run_id = self.run_id(&node.addr, &mut conn).await;
        if let Some(reason) = node.opened(Instant::now()) {
            self.stats.reconnect(reason);
        }
        self.track(&node.addr, &mut conn).await;
        *slot = Some(conn.clone());
        if !node.server_is(run_id) {
            // Kept for the next command; this one's run must not go on.
            let restarted = TargetError::Restarted {
                target: self.target.name.clone(),
                node: node.addr.to_string(),
            };
            self.stats.error(restarted.kind());
            return Err(restarted);
        }
        Ok(conn)
    }

    /// The `run_id` of the server `conn` reached (`INFO server`, within
    /// the command timeout, no token: once per connection); `None` when it
    /// does not say (refused, not answered). A connection opened again
    /// after one was closed under a command may reach another server (a
    /// restart, a failover at the same address): comparing run ids tells
    /// it from the same server, which a command may simply be sent to again.
    async fn run_id(&self, addr: &NodeAddr, conn: &mut RedisConnection) -> Option<String> {
        let cmd = Command::InfoServer;
        self.stats.command(cmd.label());
        let answer = tokio::time::timeout(
            self.timeout,
            cmd.to_cmd().query_async::<Value>(&mut conn.inner),
        )
        .await;
        let Ok(Ok(value)) = answer else {
            tracing::debug!(redis_target = %self.target.name, node = %addr, "INFO server got no answer on a new connection");
            return None;
        };
        let fields = reply::info_fields(&value).ok()?;
        fields
            .into_iter()
            .find(|(k, _)| k == "run_id")
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty())
    }

    /// Drops `conn`, `node`'s connection, for `reason`; a connection that
    /// already replaced it (another probe found it closed too) stays.
    async fn drop_connection(&self, node: &Node, conn: &RedisConnection, reason: ReconnectReason) {
        let mut slot = node.conn.lock().await;
        if slot.as_ref().is_some_and(|c| c.same(conn)) {
            *slot = None;
            node.dropped(reason);
            self.tracking.connection_reset(&node.addr);
        }
    }

    /// Sends a `PING` on each pooled connection that has not answered for
    /// [`KEEPALIVE_IDLE`] at `now`, so that a server's idle `timeout`, a
    /// proxy's or a load balancer's idle limit does not close it between
    /// polls (`CONFIG` is not on the allowlist and `INFO` does not show the
    /// server's `timeout`: the interval is fixed). Like `MULTI` and `EXEC`
    /// it takes no token: at most one `PING` every 2 s per connection, and
    /// only on connections nothing else uses. A connection that does not
    /// answer is dropped (the next command opens another, counted as a
    /// reconnect); that is no failure of the target. A connection being
    /// opened is left alone.
    pub(crate) async fn keep_warm(&self, now: Instant) {
        let nodes = self.topo().nodes();
        let epoch = self.epoch.load(Ordering::Relaxed);
        for node in nodes {
            if !keepalive_due(node.answered_at(), now) {
                continue;
            }
            let Some(mut conn) = node.conn.try_lock().ok().and_then(|slot| slot.clone()) else {
                continue;
            };
            if conn.epoch != epoch {
                continue;
            }
            self.stats.command(Command::Ping.label());
            let answered = tokio::time::timeout(
                self.timeout,
                Command::Ping.to_cmd().query_async::<Value>(&mut conn.inner),
            )
            .await;
            match answered {
                Ok(Ok(_)) => node.answered(Instant::now()),
                Ok(Err(e)) if !e.is_timeout() => {
                    self.drop_connection(&node, &conn, ReconnectReason::Closed)
                        .await;
                }
                Ok(Err(_)) | Err(_) => {
                    self.drop_connection(&node, &conn, ReconnectReason::Timeout)
                        .await;
                }
            }
        }
    }

    /// Turns client tracking on for the node's poll connection `conn`,
    /// towards the node's subscriber, when the tracking wants it (see
    /// `tracking`). A refusal (`NOPERM`, an unknown or disabled command)
    /// leaves polling as it was, said once; a timeout or a connection
    /// failure is left to the command that follows.
    async fn track(&self, addr: &NodeAddr, conn: &mut RedisConnection) {
        let Some(redirect) = self.tracking.wanted(addr, Instant::now()) else {
            return;
        };
        let cmd = Command::ClientTracking { redirect };
        self.stats.command(cmd.label());
        let reply = tokio::time::timeout(
            self.timeout,
            cmd.to_cmd().query_async::<Value>(&mut conn.inner),
        )
        .await;
        let refusal = match reply {
            Ok(Ok(Value::Okay)) => {
                self.tracking.turned_on(addr, redirect);
                tracing::info!(redis_target = %self.target.name, node = %addr, "client tracking: on; quiet streams are read again when they change");
                return;
            }
            Ok(Ok(Value::ServerError(e))) => e.to_string(),
            Ok(Err(e)) if e.code().is_some() => e.to_string(),
            Ok(Ok(other)) => format!("unexpected reply {other:?}"),
            Ok(Err(_)) | Err(_) => return,
        };
        if self.tracking.refused(addr, Instant::now()) {
            tracing::warn!(redis_target = %self.target.name, node = %addr, error = %refusal, retry = ?super::tracking::RETRY_REFUSED, "client tracking: refused (the ACL user needs +client|tracking, +client|id and &__redis__:invalidate, see docs/keyspace-events.md); every stream is polled every time");
        }
    }

    /// While the node announces every change to what its poll connection
    /// read, a mark that stays the same as long as none can have been
    /// missed (see `tracking`); `None` otherwise. A poll connection the
    /// server closed is dropped first: the keys it read are no longer
    /// tracked, though no command has failed on it yet (a poll of quiet
    /// streams may send none).
    pub(crate) async fn tracking_mark(&self, addr: &NodeAddr) -> Option<u64> {
        let node = self.node(addr);
        let mut slot = node.conn.lock().await;
        if slot.as_ref().is_some_and(RedisConnection::is_closed) {
            *slot = None;
            node.dropped(ReconnectReason::Closed);
            self.tracking.connection_reset(addr);
        }
        drop(slot);
        self.tracking.mark(addr)
    }

    /// Every open connection of the target is dropped before its next use: a
    /// reply did not decode, so the replies on its connection may no longer
    /// answer the commands they are taken for (a server that skipped or
    /// added one would shift every later reply). Which node's it was is not
    /// known where replies are decoded, so all go; each reconnects when next
    /// asked.
    pub(crate) fn distrust_connections(&self) {
        self.epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// What opening a connection to one of the target's nodes takes.
    pub(super) fn dialer(&self) -> Dialer<'_> {
        Dialer {
            target: &self.target.name,
            tls: self.tls.as_ref(),
            timeout: self.timeout,
            stats: &self.stats,
        }
    }

    /// A connection for commands (a node's pooled one, or one to a
    /// sentinel), opened ([`Dialer::open`]) and named (`CLIENT SETNAME`)
    /// within one deadline, so a server that accepts but never
    /// answers costs one timeout, not two. `CLIENT SETINFO` is suppressed in
    /// `settings` (see [`data_settings`]). A connection closed under it
    /// before it answered (`CLIENT KILL`, a proxy; see [`closed_under_us`])
    /// is opened once more within the same deadline; only the second
    /// failure counts.
    async fn connect(
        &self,
        addr: &NodeAddr,
        settings: RedisConnectionInfo,
    ) -> Result<RedisConnection, TargetError> {
        let deadline = Instant::now() + self.timeout;
        if let ConnectAttempt::Open(conn) =
            self.connect_by(addr, settings.clone(), deadline).await?
        {
            return Ok(conn);
        }
        match self.connect_by(addr, settings, deadline).await? {
            ConnectAttempt::Open(conn) => Ok(conn),
            ConnectAttempt::Closed(e) => Err(self.dialer().connection_failure(addr, &e)),
        }
    }

    /// One attempt of [`Self::connect`], by `deadline`.
    ///
    /// # Errors
    /// Every failure but a connection closed under it (counted).
    async fn connect_by(
        &self,
        addr: &NodeAddr,
        settings: RedisConnectionInfo,
        deadline: Instant,
    ) -> Result<ConnectAttempt, TargetError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        let epoch = self.epoch.load(Ordering::Relaxed);
        let opened = self.dialer().open(
            addr,
            settings,
            deadline,
            BoundedReplies::new,
            |settings, stream| async move {
                let violation = stream.violation();
                let (inner, driver) =
                    match MultiplexedConnection::new_with_config(&settings, stream, config).await {
                        Ok(opened) => opened,
                        Err(e) if closed_under_us(&e) => return Ok(ConnectAttempt::Closed(e)),
                        Err(e) => return Err(self.dialer().connection_failure(addr, &e)),
                    };
                let driver = tokio::spawn(driver).abort_handle();
                Ok(ConnectAttempt::Open(RedisConnection::new(
                    inner, violation, epoch, driver,
                )))
            },
        );
        let mut conn = match tokio::time::timeout_at(deadline, opened).await {
            Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                return Err(self.dialer().connect_timeout(addr, STEP_OPENING));
            }
            Ok(Ok(ConnectAttempt::Open(conn))) => conn,
            Ok(closed_or_failed) => return closed_or_failed,
        };
        // Naming the connection is a courtesy to operators; a user without
        // CLIENT SETNAME still gets metrics.
        self.stats.command(Command::ClientSetname.label());
        let sent = Instant::now();
        let named = tokio::time::timeout_at(
            deadline,
            Command::ClientSetname
                .to_cmd()
                .query_async::<Value>(&mut conn.inner),
        )
        .await;
        if matches!(named, Ok(Ok(_))) {
            // An O(1) command: its round trip is the network's.
            self.pages().observe_network(sent.elapsed(), Instant::now());
        }
        match named {
            // A full server answers the first command it reads so, then
            // closes the connection.
            Ok(Ok(Value::ServerError(e)))
                if e.details()
                    .is_some_and(|d| d.starts_with("max number of clients reached")) =>
            {
                let full = TargetError::ServerFull {
                    target: self.target.name.clone(),
                    node: addr.to_string(),
                };
                self.stats.error(full.kind());
                return Err(full);
            }
            Ok(Ok(Value::ServerError(e))) => self.stats.error(ErrorKind::from_server(
                e.code(),
                e.details().unwrap_or_default(),
            )),
            Ok(Err(e)) if e.code() == Some("NOPERM") => self.stats.error(ErrorKind::NoPerm),
            Ok(Err(e)) if closed_under_us(&e) => return Ok(ConnectAttempt::Closed(e)),
            Ok(Err(e)) if !e.is_timeout() => {
                return Err(self.dialer().connection_failure(addr, &e));
            }
            Ok(Err(_)) | Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                return Err(self.dialer().connect_timeout(addr, "CLIENT SETNAME"));
            }
            Ok(Ok(_)) => {}
        }
        Ok(ConnectAttempt::Open(conn))
    }
}

/// How long a pooled connection may go without an answer before the
/// keepalive sends it a `PING` ([`TargetClient::keep_warm`]). A server
/// closes a connection idle for more than its `timeout` seconds, counted
/// in whole seconds: a `PING` at 2 s (2.5 s at most, checked every half
/// second) keeps connections open under a `timeout` of 3 s or more, and
/// under any proxy's or load balancer's idle limit above 2.5 s.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(2);

/// Whether a connection that last answered at `answered_at` is due a
/// keepalive `PING` at `now`.
fn keepalive_due(answered_at: Option<Instant>, now: Instant) -> bool {
    answered_at.is_some_and(|at| now.saturating_duration_since(at) >= KEEPALIVE_IDLE)
}

/// One attempt at opening a connection: open, or closed under it before it
/// answered (the error not yet counted: [`TargetClient::connect`] tries
/// once more).
enum ConnectAttempt {
    Open(RedisConnection),
    Closed(redis::RedisError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::command::{RangeEnd, RangeStart};

    #[test]
    fn a_connection_is_pinged_once_idle_for_the_keepalive_interval() {
        let at = Instant::now();
        assert!(!keepalive_due(None, at), "no connection has answered yet");
        assert!(!keepalive_due(Some(at), at));
        assert!(!keepalive_due(
            Some(at),
            at + KEEPALIVE_IDLE - Duration::from_millis(1)
        ));
        assert!(keepalive_due(Some(at), at + KEEPALIVE_IDLE));
        assert!(keepalive_due(Some(at), at + Duration::from_secs(60)));
        // An answer after the check's own clock (a round trip that ended
        // while the keepalive ran) is not due.
        assert!(!keepalive_due(Some(at + Duration::from_secs(1)), at));
    }

    #[test]
    fn a_pipeline_sent_again_takes_its_tokens_again() {
        assert_eq!(tokens(&[Command::Ping, Command::Time], false), 2);
        assert_eq!(tokens(&[Command::Ping], true), 2, "ASKING before each");
        let atomic = [
            Command::Time,
            Command::Multi,
            Command::Ping,
            Command::Ping,
            Command::Exec,
        ];
        assert_eq!(tokens(&atomic, false), 3, "MULTI and EXEC take none");
    }

    #[test]
    fn pipelines_hold_at_most_a_bounded_number_of_entries() {
        let range = |count| Command::Xrange {
            key: b"s".to_vec(),
            start: RangeStart::Min,
            end: RangeEnd::Max,
            count,
        };
        let sizes = |cmds: &[Command], size| -> Vec<usize> {
            pipelines(cmds, size).map(<[Command]>::len).collect()
        };
        // Small replies: cut by the pipeline size alone.
        let pings = vec![Command::Ping; 250];
        assert_eq!(sizes(&pings, 100), [100, 100, 50]);
        // Ranges of 2,001 entries: four to a pipeline (8,004 entries).
        let counts = vec![range(2_001); 10];
        assert_eq!(sizes(&counts, 100), [4, 4, 2]);
        // One command asking for more than the bound still goes, alone.
        let huge = vec![range(50_000), range(1), Command::Ping];
        assert_eq!(sizes(&huge, 100), [1, 2]);
        assert_eq!(sizes(&[], 100), Vec::<usize>::new());
        // Every command is sent once, in order.
        let mixed: Vec<Command> = (0..30).map(|i| range(i * 100)).collect();
        let flat: Vec<Command> = pipelines(&mixed, 7).flatten().cloned().collect();
        assert_eq!(flat, mixed);
    }
}
