//! Which node serves what: the one server, the sentinels' primary (see
//! `sentinel`), or the cluster's slot map read with `CLUSTER SHARDS` (7.0+)
//! or `CLUSTER SLOTS`; and the routing of keys to the node that serves
//! them. The map is marked stale by a `MOVED`, a failed round trip or
//! discovery's cadence, and re-read before the next batch.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use redis::{RedisConnectionInfo, Value};
use tokio::time::Instant;

use super::connection::{Node, split_addr};
use super::sentinel::{SentinelState, primary_addr};
use super::{NodeAddr, TargetClient};
use crate::backend::command::Command;
use crate::backend::error::TargetError;
use crate::backend::slot::{SlotMap, key_slot};
use crate::config::Mode;
use crate::vocab::ErrorKind;

/// The servers of a target as last known. The variant is chosen from the
/// mode when the client is built and never changes.
#[derive(Debug)]
pub(super) enum Topology {
    Standalone(Arc<Node>),
    Sentinel(SentinelState),
    Cluster {
        nodes: HashMap<NodeAddr, Arc<Node>>,
        slots: SlotMap,
        stale: bool,
    },
}

impl Topology {
    /// The topology of a new client in `mode`; `standalone` is the URL's
    /// address. A cluster starts stale, a sentinel target unresolved.
    pub(super) fn for_mode(mode: &Mode, standalone: NodeAddr) -> Topology {
        match mode {
            Mode::Standalone => Topology::Standalone(Node::new(standalone)),
            Mode::Sentinel { .. } => Topology::Sentinel(SentinelState::default()),
            Mode::Cluster { .. } => Topology::Cluster {
                nodes: HashMap::new(),
                slots: SlotMap::default(),
                stale: true,
            },
        }
    }

    /// Asks for the topology again before the next command: the cluster
    /// map is re-read, the sentinels asked again.
    pub(super) fn suspect(&mut self) {
        match self {
            Topology::Cluster { stale, .. } => *stale = true,
            Topology::Sentinel(state) => state.expire(),
            Topology::Standalone(_) => {}
        }
    }

    /// A `MOVED` said the slot map is out of date.
    pub(super) fn moved(&mut self) {
        if let Topology::Cluster { stale, .. } = self {
            *stale = true;
        }
    }

    fn cluster_stale(&self) -> bool {
        matches!(self, Topology::Cluster { stale: true, .. })
    }

    /// The cluster's primaries by the current map (empty otherwise).
    fn primaries(&self) -> Vec<NodeAddr> {
        match self {
            Topology::Cluster { slots, .. } => slots.primaries(),
            _ => Vec::new(),
        }
    }

    /// Installs a slot map just read.
    fn set_slots(&mut self, map: SlotMap) {
        if let Topology::Cluster { slots, stale, .. } = self {
            *slots = map;
            *stale = false;
        }
    }

    /// The connection slot for `addr`, created for cluster nodes first seen
    /// in a redirection.
    pub(super) fn node(&mut self, addr: &NodeAddr) -> Arc<Node> {
        match self {
            Topology::Standalone(node) if node.addr == *addr => node.clone(),
            Topology::Sentinel(state) => state.node(addr),
            Topology::Cluster { nodes, .. } => nodes
                .entry(addr.clone())
                .or_insert_with(|| Node::new(addr.clone()))
                .clone(),
            // An address that is no longer current: a throwaway slot.
            Topology::Standalone(_) => Node::new(addr.clone()),
        }
    }

    /// Groups keys by the node that serves them, as positions in `keys`.
    /// Outside a cluster, and for a slot no primary serves (a cluster being
    /// reconfigured), the node is `fallback`, whose `MOVED` then says where
    /// the slot went.
    fn route<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        fallback: &NodeAddr,
    ) -> BTreeMap<NodeAddr, Vec<usize>> {
        let mut out: BTreeMap<NodeAddr, Vec<usize>> = BTreeMap::new();
        for (i, key) in keys.into_iter().enumerate() {
            let node = match self {
                Topology::Cluster { slots, .. } => {
                    slots.owner(key_slot(key)).unwrap_or(fallback).clone()
                }
                _ => fallback.clone(),
            };
            out.entry(node).or_default().push(i);
        }
        out
    }
}

/// The nodes to ask for the cluster map, in order, once each: the primaries
/// of the last map, the URL's address, then the configured seeds.
fn refresh_candidates(known: Vec<NodeAddr>, url: NodeAddr, seeds: &[String]) -> Vec<NodeAddr> {
    let mut candidates = known;
    candidates.push(url);
    candidates.extend(seeds.iter().map(|s| NodeAddr::from(s.as_str())));
    let mut seen = HashSet::new();
    candidates.retain(|a| seen.insert(a.clone()));
    candidates
}

impl TargetClient {
    pub(super) fn topo(&self) -> std::sync::MutexGuard<'_, Topology> {
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

    /// Marks the topology for re-reading on the next [`Self::nodes`] call
    /// (discovery calls this on its own cadence).
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

    /// A node could not be asked: maybe it failed over. The sentinel is
    /// asked again and the cluster map re-read before the next command, so
    /// a promoted replica is found within one poll.
    pub(super) fn topology_suspect(&self) {
        self.topo().suspect();
    }

    /// The node slot for `addr` (see [`Topology::node`]).
    pub(super) fn node(&self, addr: &NodeAddr) -> Arc<Node> {
        self.topo().node(addr)
    }

    pub(super) fn topology_error(&self, detail: String) -> TargetError {
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
}

pub(super) fn unreachable_topology<T>() -> Result<T, TargetError> {
    // The topology variant is chosen from the mode in `new` and never changes.
    Err(TargetError::Topology {
        target: String::new(),
        detail: "internal: topology does not match mode".into(),
    })
}

impl TargetClient {
    /// The current primary according to the sentinels (the first that
    /// answers), re-asked every `SENTINEL_REFRESH` (10 s), after any failed round
    /// trip and on every discovery run.
    pub(super) async fn sentinel_primary(&self) -> Result<Arc<Node>, TargetError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Topology {
        Topology::for_mode(&Mode::Cluster { seeds: Vec::new() }, "10.0.0.1:7000".into())
    }

    /// A map of two primaries: :7000 serves 0-5460, :7001 serves 5461-10922;
    /// 10923-16383 are unassigned.
    fn two_primaries() -> SlotMap {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let range = |first, last, port| {
            Value::Array(vec![
                Value::Int(first),
                Value::Int(last),
                Value::Array(vec![b("10.0.0.1"), Value::Int(port), b("id")]),
            ])
        };
        let v = Value::Array(vec![range(0, 5460, 7000), range(5461, 10922, 7001)]);
        SlotMap::from_slots(&v, "10.0.0.1").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_cluster_starts_stale_and_a_new_map_makes_it_current() {
        let mut topo = cluster();
        assert!(topo.cluster_stale());
        assert!(topo.primaries().is_empty());
        topo.set_slots(two_primaries());
        assert!(!topo.cluster_stale());
        let primaries = topo.primaries();
        let primaries: Vec<&str> = primaries.iter().map(|a| &**a).collect();
        assert_eq!(primaries, ["10.0.0.1:7000", "10.0.0.1:7001"]);
        topo.moved();
        assert!(topo.cluster_stale(), "MOVED re-reads the map");
        topo.set_slots(two_primaries());
        topo.suspect();
        assert!(topo.cluster_stale(), "a failed round trip re-reads the map");
    }

    #[test]
    fn keys_go_to_the_primary_of_their_slot() {
        let mut topo = cluster();
        topo.set_slots(two_primaries());
        let fallback: NodeAddr = "10.0.0.1:7000".into();
        // Slots as CLUSTER KEYSLOT gives them: foo is unassigned here.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"c"), 7365);
        let keys: [&[u8]; 4] = [b"foo", b"bar", b"c", b"{c}.dead"];
        let routes = topo.route(keys, &fallback);
        assert_eq!(
            routes,
            BTreeMap::from([
                // foo to the fallback, whose MOVED then says where it went.
                (NodeAddr::from("10.0.0.1:7000"), vec![0, 1]),
                (NodeAddr::from("10.0.0.1:7001"), vec![2, 3]),
            ])
        );
        // Positions stay in order within a node.
        for positions in routes.values() {
            assert!(positions.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn outside_a_cluster_every_key_goes_to_the_one_primary() {
        let topo = Topology::for_mode(&Mode::Standalone, "10.0.0.9:6379".into());
        let fallback: NodeAddr = "10.0.0.9:6379".into();
        let keys: [&[u8]; 3] = [b"foo", b"bar", b"baz"];
        assert_eq!(
            topo.route(keys, &fallback),
            BTreeMap::from([(fallback.clone(), vec![0, 1, 2])])
        );
    }

    #[test]
    fn nodes_keep_their_slot_and_strangers_get_a_throwaway() {
        let mut topo = Topology::for_mode(&Mode::Standalone, "10.0.0.9:6379".into());
        let addr: NodeAddr = "10.0.0.9:6379".into();
        assert!(Arc::ptr_eq(&topo.node(&addr), &topo.node(&addr)));
        let other: NodeAddr = "10.0.0.8:6379".into();
        assert!(!Arc::ptr_eq(&topo.node(&other), &topo.node(&other)));
        // A cluster remembers every node it met, redirections included.
        let mut topo = cluster();
        let moved: NodeAddr = "10.0.0.3:7003".into();
        let first = topo.node(&moved);
        assert!(Arc::ptr_eq(&first, &topo.node(&moved)));
    }

    #[test]
    fn the_map_is_asked_of_known_primaries_then_the_url_then_the_seeds_once_each() {
        let known: Vec<NodeAddr> = vec!["10.0.0.1:7000".into(), "10.0.0.2:7001".into()];
        let seeds = vec!["10.0.0.2:7001".to_string(), "10.0.0.3:7002".to_string()];
        let got = refresh_candidates(known, "10.0.0.1:7000".into(), &seeds);
        let got: Vec<&str> = got.iter().map(|a| &**a).collect();
        assert_eq!(got, ["10.0.0.1:7000", "10.0.0.2:7001", "10.0.0.3:7002"]);
        let got = refresh_candidates(Vec::new(), "10.0.0.9:7000".into(), &[]);
        assert_eq!(got.len(), 1);
    }
}
