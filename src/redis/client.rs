//! [`TargetClient`]: the connections to one target's servers, the rate limit
//! every command passes, per-command timeouts, cluster routing and sentinel
//! resolution.
//!
//! Probes hand it batches of [`Command`]s for a node and get one reply per
//! command back; it splits batches into pipelines no larger than the rate
//! limit's burst, waits for tokens, follows `MOVED`/`ASK` redirections, and
//! drops a connection after a timeout or I/O error so the next call starts
//! afresh. It never retries a failed round trip on its own: the probe's
//! schedule is the retry, which keeps the load on a struggling server flat.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, Value,
};
use tokio::time::Instant;

use super::command::Command;
use super::error::{CommandError, ErrorKind, TargetError};
use super::paging::{LatencyFloor, PageTuner};
use super::reply;
use super::slot::{SlotMap, key_slot};
use super::tls::TlsSetup;
use crate::config::{Limits, Mode, Target};
use crate::ratelimit::RateLimiter;

/// `host:port` of one server.
pub type NodeAddr = Arc<str>;

/// One reply of a pipeline.
pub type Reply = Result<Value, CommandError>;

/// How many redirections one command may follow before giving up.
const MAX_REDIRECTS: usize = 3;

/// How often the sentinel is asked for the primary even when nothing failed.
/// A dead primary is noticed at once (a failed round trip re-asks); this
/// bounds how long a primary demoted while still reachable (a manual
/// `SENTINEL FAILOVER`) keeps being read.
const SENTINEL_REFRESH: Duration = Duration::from_secs(10);

/// Counters of what the client did, read into every snapshot.
#[derive(Debug, Default)]
pub struct ClientStats {
    commands: Mutex<BTreeMap<&'static str, u64>>,
    errors: Mutex<BTreeMap<&'static str, u64>>,
    pending_scanned: std::sync::atomic::AtomicU64,
}

/// A copy of [`ClientStats`] at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Commands sent, by label.
    pub commands: BTreeMap<&'static str, u64>,
    /// Errors, by kind label.
    pub errors: BTreeMap<&'static str, u64>,
    /// Seconds spent waiting on rate limits.
    pub rate_limited_seconds: f64,
    /// PEL entries read by the scan.
    pub pending_scanned: u64,
    /// Current page sizes, by command label (`scan`, `xpending_range`).
    pub page_sizes: BTreeMap<&'static str, u32>,
}

fn bump(map: &Mutex<BTreeMap<&'static str, u64>>, label: &'static str, by: u64) {
    // Counters stay usable even if a thread panicked mid-update.
    *map.lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(label)
        .or_insert(0) += by;
}

impl ClientStats {
    /// Counts one error of `kind`.
    pub fn error(&self, kind: ErrorKind) {
        bump(&self.errors, kind.label(), 1);
    }

    fn command(&self, label: &'static str) {
        bump(&self.commands, label, 1);
    }

    /// Counts PEL entries read.
    pub fn pending_scanned(&self, n: u64) {
        self.pending_scanned
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A connection slot for one node. The async mutex serialises connecting, so
/// concurrent probes do not open several connections to a node at once.
#[derive(Debug)]
struct Node {
    addr: NodeAddr,
    conn: tokio::sync::Mutex<Option<Conn>>,
}

/// A connection and, for one made on a TLS stream of our own, the task that
/// drives it: aborted with the last clone, as the redis crate does for the
/// connections it makes, so a dropped connection to a server that stopped
/// answering does not keep its socket and task.
#[derive(Clone, Debug)]
struct Conn {
    inner: MultiplexedConnection,
    _driver: Option<Arc<AbortOnDrop>>,
}

#[derive(Debug)]
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Node {
    fn new(addr: NodeAddr) -> Arc<Node> {
        Arc::new(Node {
            addr,
            conn: tokio::sync::Mutex::new(None),
        })
    }
}

#[derive(Debug)]
enum Topology {
    Standalone(Arc<Node>),
    Sentinel {
        primary: Option<Arc<Node>>,
        resolved_at: Option<Instant>,
    },
    Cluster {
        nodes: HashMap<NodeAddr, Arc<Node>>,
        slots: SlotMap,
        stale: bool,
    },
}

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
}

/// The page sizes of the paged commands and the network's share of a round
/// trip.
#[derive(Debug)]
struct Pages {
    scan: PageTuner,
    xpending: PageTuner,
    floor: LatencyFloor,
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
        let topology = match &target.mode {
            Mode::Standalone => Topology::Standalone(Node::new(
                format!("{}:{}", target.endpoint.host, target.endpoint.port).into(),
            )),
            Mode::Sentinel { .. } => Topology::Sentinel {
                primary: None,
                resolved_at: None,
            },
            Mode::Cluster { .. } => Topology::Cluster {
                nodes: HashMap::new(),
                slots: SlotMap::default(),
                stale: true,
            },
        };
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
            topology: Mutex::new(topology),
            reachable: Mutex::new(None),
            slots_only: AtomicBool::new(false),
            pages: Mutex::new(Pages {
                scan: PageTuner::new(limits.min_page, target.scan_count, limits.page_target),
                xpending: PageTuner::new(limits.min_page, limits.pending_page, limits.page_target),
                floor: LatencyFloor::default(),
            }),
            target,
        })
    }

    /// The target's configuration.
    pub fn target(&self) -> &Arc<Target> {
        &self.target
    }

    /// The counters.
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// A copy of the counters.
    pub fn stats_snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            commands: self
                .stats
                .commands
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            errors: self
                .stats
                .errors
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            rate_limited_seconds: (self.commands.waited() + self.entries.waited()).as_secs_f64(),
            pending_scanned: self
                .stats
                .pending_scanned
                .load(std::sync::atomic::Ordering::Relaxed),
            page_sizes: {
                let pages = self.pages();
                BTreeMap::from([
                    ("scan", pages.scan.current()),
                    ("xpending_range", pages.xpending.current()),
                ])
            },
        }
    }

    fn pages(&self) -> std::sync::MutexGuard<'_, Pages> {
        self.pages.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `COUNT` of the next discovery `SCAN` page.
    pub fn scan_page(&self) -> u32 {
        self.pages().scan.current()
    }

    /// The `COUNT` of the next PEL scan `XPENDING` page.
    pub fn xpending_page(&self) -> u32 {
        self.pages().xpending.current()
    }

    /// Learns from a round trip: single commands teach the network's share,
    /// pages of the paged commands how long a page takes.
    fn observe_round_trip(&self, cmds: &[Command], rtt: Duration) {
        let mut pages = self.pages();
        let now = tokio::time::Instant::now();
        if cmds.len() == 1 {
            pages.floor.observe(rtt, now);
        }
        let floor = pages.floor.get(now);
        if cmds.iter().all(|c| matches!(c, Command::Scan { .. })) {
            pages.scan.observe(rtt, floor, cmds.len());
        } else if cmds
            .iter()
            .all(|c| matches!(c, Command::XpendingRange { .. }))
        {
            pages.xpending.observe(rtt, floor, cmds.len());
        }
    }

    /// Whether the last round trip reached the server (`None` before any).
    pub fn reachable(&self) -> Option<bool> {
        *self.reachable.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_reachable(&self, ok: bool) {
        *self.reachable.lock().unwrap_or_else(|p| p.into_inner()) = Some(ok);
    }

    /// Commands sent so far by probes of `rank` (see `ratelimit::PRIORITY`).
    pub fn commands_spent(&self, rank: usize) -> u64 {
        self.commands.spent(rank)
    }

    /// Waits until the PEL scan may read `n` more entries.
    pub async fn acquire_pending_entries(&self, n: u32) {
        self.entries.acquire(n as usize).await;
    }

    fn topo(&self) -> std::sync::MutexGuard<'_, Topology> {
        self.topology.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The primaries to ask: the one server, the sentinel's current primary,
    /// or every cluster primary (refreshing the slot map when it is stale).
    ///
    /// # Errors
    /// When the sentinel or the cluster topology cannot be read.
    pub async fn nodes(&self) -> Result<Vec<NodeAddr>, TargetError> {
        match &self.target.mode {
            Mode::Standalone => match &*self.topo() {
                Topology::Standalone(node) => Ok(vec![node.addr.clone()]),
                _ => unreachable_topology(),
            },
            Mode::Sentinel { .. } => Ok(vec![self.sentinel_primary().await?.addr.clone()]),
            Mode::Cluster { .. } => {
                let stale = matches!(&*self.topo(), Topology::Cluster { stale: true, .. });
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

    /// Marks the topology for re-reading on the next [`Self::nodes`] call
    /// (discovery calls this on its own cadence).
    pub fn invalidate_topology(&self) {
        match &mut *self.topo() {
            Topology::Cluster { stale, .. } => *stale = true,
            Topology::Sentinel { resolved_at, .. } => *resolved_at = None,
            Topology::Standalone(_) => {}
        }
    }

    /// Groups keys by the node that serves them, as positions in `keys`
    /// (in order), so callers keep their own items without a lookup.
    ///
    /// # Errors
    /// When the topology cannot be read.
    pub async fn partition<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
    ) -> Result<BTreeMap<NodeAddr, Vec<usize>>, TargetError> {
        let nodes = self.nodes().await?;
        let Some(fallback) = nodes.first() else {
            return Err(self.topology_error("no primary to ask".into()));
        };
        let mut out: BTreeMap<NodeAddr, Vec<usize>> = BTreeMap::new();
        let topo = self.topo();
        for (i, key) in keys.into_iter().enumerate() {
            // A slot no primary serves (a cluster being reconfigured): ask
            // any primary, whose MOVED then says where it went.
            let node = match &*topo {
                Topology::Cluster { slots, .. } => {
                    slots.owner(key_slot(key)).unwrap_or(fallback).clone()
                }
                _ => fallback.clone(),
            };
            out.entry(node).or_default().push(i);
        }
        Ok(out)
    }

    /// Sends `cmds` to `node` and returns one reply per command, in order.
    /// Batches larger than the pipeline size are split; every command waits
    /// for its token first.
    ///
    /// # Errors
    /// A [`TargetError`] when the node cannot be reached or does not answer in
    /// time; server errors of single commands are returned in their reply.
    pub async fn execute(
        &self,
        node: &NodeAddr,
        cmds: &[Command],
    ) -> Result<Vec<Reply>, TargetError> {
        let mut replies = Vec::with_capacity(cmds.len());
        for chunk in cmds.chunks(self.pipeline_size) {
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
            replies.push(self.settle(node, cmd, value).await?);
        }
        Ok(())
    }

    /// A chain of commands to `node` where each needs the previous reply
    /// (SCAN's cursor), sent back to back: see [`Sequence`].
    pub fn sequence(&self, node: NodeAddr) -> Sequence<'_> {
        Sequence {
            client: self,
            node,
            prepaid: 0,
            next_batch: 1,
        }
    }

    /// Turns a raw reply into a [`Reply`], following redirections: `MOVED`
    /// (the slot map is stale: counted as a `cluster` error and the map is
    /// re-read before the next batch) and `ASK` (a slot being migrated:
    /// normal during resharding, so only the `ASKING` command is counted).
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
            let asking = match code.as_str() {
                "MOVED" => false,
                "ASK" => true,
                _ => {
                    let kind = ErrorKind::from_server(&code, &details);
                    if !kind.is_vanished() {
                        self.stats.error(kind);
                    }
                    return Ok(Err(CommandError {
                        kind,
                        command: cmd.label(),
                        code,
                        message: details,
                    }));
                }
            };
            // "<slot> <host:port>"; the host is empty when the server does
            // not know its own address (cluster-preferred-endpoint-type
            // unknown-endpoint): it is then the host just asked.
            let Some(target) = details.split_whitespace().nth(1) else {
                break;
            };
            let target: NodeAddr = match target.strip_prefix(':') {
                Some(port) => match split_addr(&at) {
                    Some((host, _)) => format!("{host}:{port}").into(),
                    None => break,
                },
                None => target.into(),
            };
            if !asking {
                self.stats.error(ErrorKind::Cluster);
                if let Topology::Cluster { stale, .. } = &mut *self.topo() {
                    *stale = true;
                }
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
        let first = cmds.first().map_or("pipeline", Command::label);
        let sent = tokio::time::Instant::now();
        let result = tokio::time::timeout(
            self.timeout,
            pipe.query_async::<Vec<Value>>(&mut conn.inner),
        )
        .await;
        if matches!(result, Ok(Ok(_))) && !asking {
            self.observe_round_trip(cmds, sent.elapsed());
        }
        self.set_reachable(matches!(result, Ok(Ok(_))));
        if !matches!(result, Ok(Ok(_))) {
            self.topology_suspect();
        }
        match result {
            Err(_) => {
                self.drop_connection(&node).await;
                self.stats.error(ErrorKind::Timeout);
                Err(TargetError::Timeout {
                    target: self.target.name.clone(),
                    node: addr.to_string(),
                    command: first,
                    timeout: self.timeout,
                })
            }
            Ok(Err(e)) => {
                self.drop_connection(&node).await;
                let err = self.connection_error(addr, &e);
                self.stats.error(err.kind());
                Err(err)
            }
            Ok(Ok(values)) if values.len() == cmds.len() => Ok(values),
            Ok(Ok(values)) => {
                self.drop_connection(&node).await;
                self.stats.error(ErrorKind::Protocol);
                Err(TargetError::Connection {
                    target: self.target.name.clone(),
                    node: addr.to_string(),
                    detail: format!(
                        "pipeline of {} commands returned {} replies",
                        cmds.len(),
                        values.len()
                    ),
                    auth: false,
                })
            }
        }
    }

    /// A node could not be asked: maybe it failed over. The sentinel is
    /// asked again and the cluster map re-read before the next command, so
    /// a promoted replica is found within one poll.
    fn topology_suspect(&self) {
        match &mut *self.topo() {
            Topology::Cluster { stale, .. } => *stale = true,
            Topology::Sentinel { resolved_at, .. } => *resolved_at = None,
            Topology::Standalone(_) => {}
        }
    }

    fn connection_error(&self, addr: &NodeAddr, e: &redis::RedisError) -> TargetError {
        let auth = matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
            || e.kind() == redis::ErrorKind::AuthenticationFailed;
        if let Some(detail) = self.tls.as_ref().and_then(|t| t.explain(e)) {
            return TargetError::Connection {
                target: self.target.name.clone(),
                node: addr.to_string(),
                detail,
                auth: false,
            };
        }
        if e.is_timeout() {
            return TargetError::Timeout {
                target: self.target.name.clone(),
                node: addr.to_string(),
                command: "connect",
                timeout: self.timeout,
            };
        }
        TargetError::Connection {
            target: self.target.name.clone(),
            node: addr.to_string(),
            detail: e.to_string(),
            auth,
        }
    }

    /// The node slot for `addr`, created for cluster nodes first seen in a
    /// redirection.
    fn node(&self, addr: &NodeAddr) -> Arc<Node> {
        let mut topo = self.topo();
        match &mut *topo {
            Topology::Standalone(node) if node.addr == *addr => node.clone(),
            Topology::Sentinel {
                primary: Some(node),
                ..
            } if node.addr == *addr => node.clone(),
            Topology::Cluster { nodes, .. } => nodes
                .entry(addr.clone())
                .or_insert_with(|| Node::new(addr.clone()))
                .clone(),
            // An address that is no longer current (the sentinel moved on):
            // use a throwaway slot so the old primary is not kept open.
            _ => Node::new(addr.clone()),
        }
    }

    async fn drop_connection(&self, node: &Node) {
        *node.conn.lock().await = None;
    }

    async fn connection(&self, node: &Node) -> Result<Conn, TargetError> {
        let mut slot = node.conn.lock().await;
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = self.connect(&node.addr, self.data_settings()).await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    fn data_settings(&self) -> RedisConnectionInfo {
        let mut settings = RedisConnectionInfo::default().set_skip_set_lib_name();
        if !matches!(self.target.mode, Mode::Cluster { .. }) {
            settings = settings.set_db(self.target.endpoint.db);
        }
        if let Some(user) = &self.target.username {
            settings = settings.set_username(user);
        }
        if let Some(pass) = &self.target.password {
            settings = settings.set_password(pass.expose());
        }
        settings
    }

    /// Opens a connection and names it. `CLIENT SETINFO` is suppressed (it is
    /// outside the allowlist and NOPERM for the minimal ACL user).
    async fn connect(
        &self,
        addr: &NodeAddr,
        settings: RedisConnectionInfo,
    ) -> Result<Conn, TargetError> {
        let conn_err = |detail: String| TargetError::Connection {
            target: self.target.name.clone(),
            node: addr.to_string(),
            detail,
            auth: false,
        };
        let (host, port) =
            split_addr(addr).ok_or_else(|| conn_err("not a host:port address".into()))?;
        let has_password = settings.password().is_some();
        let selects_db = settings.db() != 0;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        if has_password {
            self.stats.command("auth");
        }
        if selects_db {
            self.stats.command("select");
        }
        // One deadline for connecting and naming the connection together, so
        // a server that accepts but never answers costs one timeout, not two.
        let deadline = Instant::now() + self.timeout;
        let opened = async {
            match &self.tls {
                Some(tls) => {
                    let stream = tls
                        .connect(&host, port)
                        .await
                        .map_err(redis::RedisError::from)?;
                    let (inner, driver) =
                        MultiplexedConnection::new_with_config(&settings, stream, config).await?;
                    let driver = tokio::spawn(driver).abort_handle();
                    Ok::<_, redis::RedisError>(Conn {
                        inner,
                        _driver: Some(Arc::new(AbortOnDrop(driver))),
                    })
                }
                None => {
                    let info = ConnectionAddr::Tcp(host.clone(), port)
                        .into_connection_info()?
                        .set_redis_settings(settings);
                    let inner = Client::open(info)?
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?;
                    Ok(Conn {
                        inner,
                        _driver: None,
                    })
                }
            }
        };
        let result = tokio::time::timeout_at(deadline, opened).await;
        let mut conn = match result {
            Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                return Err(TargetError::Timeout {
                    target: self.target.name.clone(),
                    node: addr.to_string(),
                    command: "connect",
                    timeout: self.timeout,
                });
            }
            Ok(Err(e)) => {
                let err = self.connection_error(addr, &e);
                self.stats.error(err.kind());
                return Err(err);
            }
            Ok(Ok(conn)) => conn,
        };
        // Naming the connection is a courtesy to operators; a user without
        // CLIENT SETNAME still gets metrics.
        self.stats.command(Command::ClientSetname.label());
        let sent = tokio::time::Instant::now();
        let named = tokio::time::timeout_at(
            deadline,
            Command::ClientSetname
                .to_cmd()
                .query_async::<Value>(&mut conn.inner),
        )
        .await;
        if matches!(named, Ok(Ok(_))) {
            // An O(1) command: its round trip is the network's.
            self.pages()
                .floor
                .observe(sent.elapsed(), tokio::time::Instant::now());
        }
        match named {
            Ok(Ok(Value::ServerError(e))) => self.stats.error(ErrorKind::from_server(
                e.code(),
                e.details().unwrap_or_default(),
            )),
            Ok(Err(e)) if e.code() == Some("NOPERM") => self.stats.error(ErrorKind::NoPerm),
            Ok(Err(e)) => {
                let err = self.connection_error(addr, &e);
                self.stats.error(err.kind());
                return Err(err);
            }
            Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                return Err(TargetError::Timeout {
                    target: self.target.name.clone(),
                    node: addr.to_string(),
                    command: "client_setname",
                    timeout: self.timeout,
                });
            }
            Ok(Ok(_)) => {}
        }
        Ok(conn)
    }

    /// The current primary according to the sentinels (the first that
    /// answers), re-asked every [`SENTINEL_REFRESH`], after any failed round
    /// trip and on every discovery run.
    async fn sentinel_primary(&self) -> Result<Arc<Node>, TargetError> {
        if let Topology::Sentinel {
            primary: Some(node),
            resolved_at: Some(at),
        } = &*self.topo()
        {
            if at.elapsed() < SENTINEL_REFRESH {
                return Ok(node.clone());
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
            let mut settings = RedisConnectionInfo::default().set_skip_set_lib_name();
            if let Some(u) = username {
                settings = settings.set_username(u);
            }
            if let Some(p) = password {
                settings = settings.set_password(p.expose());
            }
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
                Ok(Ok(Value::Array(parts))) if parts.len() == 2 => {
                    let host =
                        reply::as_bytes(&parts[0]).map(|b| String::from_utf8_lossy(b).into_owned());
                    let port = reply::as_int(&parts[1]);
                    match (host, port) {
                        (Some(h), Some(p)) => format!("{h}:{p}"),
                        _ => {
                            last_problem = format!("sentinel {sentinel} gave a malformed address");
                            continue;
                        }
                    }
                }
                Ok(Ok(Value::Nil)) => {
                    last_problem =
                        format!("sentinel {sentinel} does not know master {master_name:?}");
                    continue;
                }
                Ok(Ok(other)) => {
                    last_problem = format!("sentinel {sentinel} answered {other:?}");
                    continue;
                }
                Ok(Err(e)) => {
                    last_problem = format!("sentinel {sentinel}: {e}");
                    continue;
                }
                Err(_) => {
                    last_problem = format!(
                        "sentinel {sentinel} did not answer within {:?}",
                        self.timeout
                    );
                    continue;
                }
            };
            let mut topo = self.topo();
            let Topology::Sentinel {
                primary,
                resolved_at,
            } = &mut *topo
            else {
                return unreachable_topology();
            };
            let node = match primary {
                Some(node) if *node.addr == *addr => node.clone(),
                _ => {
                    // A failover (or the first resolution): start a fresh slot;
                    // the old connection is dropped with the old node.
                    let node = Node::new(addr.into());
                    *primary = Some(node.clone());
                    node
                }
            };
            *resolved_at = Some(Instant::now());
            return Ok(node);
        }
        // No sentinel answered. A primary already known stays in use: a
        // sentinel restart must not blank a healthy primary's metrics, and
        // the primary's own round trips tell whether it is still there (a
        // failed one makes the next call ask the sentinels again).
        if let Topology::Sentinel {
            primary: Some(node),
            resolved_at,
        } = &mut *self.topo()
        {
            tracing::warn!(redis_target = %self.target.name, primary = %node.addr, problem = %last_problem, "no sentinel answered; keeping the last known primary");
            *resolved_at = Some(Instant::now());
            return Ok(node.clone());
        }
        self.stats.error(ErrorKind::Connection);
        Err(self.topology_error(format!("no sentinel gave the primary: {last_problem}")))
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
        let mut candidates: Vec<NodeAddr> = match &*self.topo() {
            Topology::Cluster { slots, .. } => slots.primaries(),
            _ => Vec::new(),
        };
        candidates.push(
            format!(
                "{}:{}",
                self.target.endpoint.host, self.target.endpoint.port
            )
            .into(),
        );
        candidates.extend(seeds.iter().map(|s| NodeAddr::from(s.as_str())));
        let mut seen = std::collections::HashSet::new();
        candidates.retain(|a| seen.insert(a.clone()));
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
                    if let Topology::Cluster { slots, stale, .. } = &mut *self.topo() {
                        *slots = map;
                        *stale = false;
                    }
                    return Ok(());
                }
                Ok(_) => last_problem = format!("{addr} reported no slots"),
                Err(e) => last_problem = format!("{addr}: {e}"),
            }
        }
        self.stats.error(ErrorKind::Cluster);
        Err(self.topology_error(format!("cannot read the cluster topology: {last_problem}")))
    }
}

fn unreachable_topology<T>() -> Result<T, TargetError> {
    // The topology variant is chosen from the mode in `new` and never changes.
    Err(TargetError::Topology {
        target: String::new(),
        detail: "internal: topology does not match mode".into(),
    })
}

fn split_addr(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.parse().ok()?))
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
pub struct Sequence<'a> {
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
    pub async fn send(&mut self, cmd: &Command) -> Result<Reply, TargetError> {
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
