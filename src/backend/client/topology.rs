//! Which node serves what, as last known: the one server, the sentinels'
//! primary (see `sentinel`), or the cluster's slot map; the connection slot
//! of each node; and the routing of keys to the node that serves them. The
//! map is marked stale by a `MOVED`, a failed round trip or discovery's
//! cadence; the client re-reads it (`CLUSTER SHARDS` on 7.0+, else `CLUSTER
//! SLOTS`, asked of [`refresh_candidates`]) before the next batch.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::connection::{Node, NodeAddr};
use super::sentinel::SentinelState;
use crate::backend::slot::{SlotMap, key_slot};
use crate::config::Mode;

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

    pub(super) fn cluster_stale(&self) -> bool {
        matches!(self, Topology::Cluster { stale: true, .. })
    }

    /// The cluster's primaries by the current map (empty otherwise).
    pub(super) fn primaries(&self) -> Vec<NodeAddr> {
        match self {
            Topology::Cluster { slots, .. } => slots.primaries(),
            _ => Vec::new(),
        }
    }

    /// Installs a slot map just read.
    pub(super) fn set_slots(&mut self, map: SlotMap) {
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

    /// Every node slot kept (the one server, the sentinels' primary, the
    /// cluster's nodes), for the keepalive.
    pub(super) fn nodes(&self) -> Vec<Arc<Node>> {
        match self {
            Topology::Standalone(node) => vec![node.clone()],
            Topology::Sentinel(state) => state.primary().into_iter().collect(),
            Topology::Cluster { nodes, .. } => nodes.values().cloned().collect(),
        }
    }

    /// Groups keys by the node that serves them, as positions in `keys`.
    /// Outside a cluster, and for a slot no primary serves (a cluster being
    /// reconfigured), the node is `fallback`, whose `MOVED` then says where
    /// the slot went.
    pub(super) fn route<'k>(
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
pub(super) fn refresh_candidates(
    known: Vec<NodeAddr>,
    url: NodeAddr,
    seeds: &[String],
) -> Vec<NodeAddr> {
    let mut candidates = known;
    candidates.push(url);
    candidates.extend(seeds.iter().map(|s| NodeAddr::from(s.as_str())));
    let mut seen = HashSet::new();
    candidates.retain(|a| seen.insert(a.clone()));
    candidates
}

#[cfg(test)]
mod tests {
    use redis::Value;

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
