//! [`TargetClient`]: the connections to one target's servers, the rate limit
//! every command passes, per-command timeouts, cluster routing and sentinel
//! resolution.
//!
//! Probes hand it batches of [`Command`]s for a node and get one reply per
//! command back; it splits batches into pipelines no larger than the rate
//! limit's burst (nor than [`PIPELINE_ITEMS`] entries or rows of replies),
//! waits for tokens, follows `MOVED`/`ASK` redirections, checks that each
//! reply can answer its command, leaves out (and counts) the items whose
//! names were too long to keep, and drops a connection after a timeout, an
//! I/O or protocol error or a reply that did not decode, so the next call
//! starts afresh: a reply left over or missing cannot shift the answers of
//! later round trips. It never retries a failed round trip on its own: the
//! probe's schedule is the retry, which keeps the load on a struggling
//! server flat.
//!
//! This file holds the client and its pipelines; each other concern has its
//! own file: [`connection`] (connect, auth, TLS, timeouts), [`bounded`]
//! (replies read within bounds, entries as their IDs), [`topology`]
//! (which node serves what: cluster slots and routing), [`sentinel`] (the
//! sentinels' current primary), [`redirect`] (`MOVED`/`ASK`) and [`stats`]
//! (what the client counted).

mod bounded;
mod connection;
mod redirect;
mod sentinel;
mod stats;
mod subscriber;
mod topology;

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Value;

use self::topology::Topology;
use super::command::Command;
use super::error::{CommandError, TargetError, pipeline_labels};
use super::paging::Pages;
use super::ratelimit::RateLimiter;
use super::reply;
use super::tls::TlsSetup;
use crate::config::{Limits, Target};
use crate::vocab::StatsSnapshot;

pub use self::bounded::ROWS_KEPT;
pub(crate) use self::stats::ClientStats;
pub(crate) use self::subscriber::KeyEvent;

/// `host:port` of one server.
pub(crate) type NodeAddr = Arc<str>;

/// One reply of a pipeline.
pub(crate) type Reply = Result<Value, CommandError>;

/// The connections to one target.
#[derive(Debug)]
pub struct TargetClient {
    target: Arc<Target>,
    timeout: Duration,
    pipeline_size: usize,
    commands: RateLimiter,
    entries: RateLimiter,
    stats: ClientStats,
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
}

/// Why a client could not be built: its TLS settings are unusable.
#[derive(Debug, thiserror::Error)]
#[error("target {target}: {detail}")]
pub struct ClientSetupError {
    target: String,
    detail: String,
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
        )
    }

    fn pages(&self) -> std::sync::MutexGuard<'_, Pages> {
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

    /// One pipeline to one node, with the timeout. With `asking`, each
    /// command is preceded by `ASKING` and only its own reply is returned.
    async fn round_trip(
        &self,
        addr: &NodeAddr,
        cmds: &[Command],
        asking: bool,
    ) -> Result<Vec<Value>, TargetError> {
        let node = self.node(addr);
        let mut conn = match self.connection(&node).await {
            Ok(c) => c,
            Err(e) => {
                self.set_reachable(false);
                self.topology_suspect();
                return Err(e);
            }
        };
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for cmd in cmds {
            if asking {
                pipe.add_command(Command::Asking.to_cmd()).ignore();
                self.stats.command(Command::Asking.label());
            }
            pipe.add_command(cmd.to_cmd());
            self.stats.command(cmd.label());
        }
        let sent = tokio::time::Instant::now();
        let result = tokio::time::timeout(
            self.timeout,
            pipe.query_async::<Vec<Value>>(&mut conn.inner),
        )
        .await;
        if matches!(result, Ok(Ok(_))) && !asking {
            self.pages()
                .observe(cmds, sent.elapsed(), tokio::time::Instant::now());
        }
        // A reply that broke the protocol still came from a server that
        // answers: the probes fail, the target stays up.
        let violation = conn.violation.get().map(str::to_string);
        self.set_reachable(matches!(result, Ok(Ok(_))) || violation.is_some());
        if !matches!(result, Ok(Ok(_))) {
            self.topology_suspect();
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
            Ok(Err(e)) => self.connection_error(addr, &e),
        };
        self.drop_connection(&node).await;
        self.stats.error(err.kind());
        Err(err)
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

#[cfg(test)]
mod tests;
