//! Client tracking: the server announces each stream the exporter read at
//! the stream's next change, with no server configuration.
//!
//! Redis and Valkey keep, for a connection with `CLIENT TRACKING ON`, the
//! keys it read; the next command that modifies one (`XADD`, `XDEL`,
//! `XDELEX`, `XACKDEL`, `XTRIM`, `DEL`, `RENAME`, an expiry, a flush)
//! sends one invalidation for it and forgets it until it is read again.
//! With `REDIRECT id` the invalidations go to the connection with that
//! client ID, which (RESP2) must be subscribed: the exporter's subscriber
//! connection of the node, which reads its ID (`CLIENT ID`) before it
//! subscribes to `__redis__:invalidate` and registers it here. Each node's
//! poll connection turns tracking on towards its subscriber when it is
//! next used. Reads that change nothing (`XREADGROUP`, `XACK`, `XCLAIM`,
//! `XGROUP …`, `XSETID`) send none: what they change is seen at the quiet
//! streams' safety reads, or through keyspace events where configured.
//!
//! What the exporter relies on is the [`Tracking::mark`] of a node: while
//! it is the same, every change to a key the node's poll connection read
//! since has been or will be announced. It changes whenever that may stop
//! being so: a subscriber that drops or reconnects (its invalidations are
//! lost: in RESP2 the server says nothing of a redirect that is gone), a
//! poll connection opened again (its keys are no longer tracked), an
//! invalidation dropped, or a flush. A server or ACL that refuses `CLIENT
//! TRACKING` or `CLIENT ID` leaves the node without a mark: its streams
//! are polled every time, as before, and the refusal is tried again after
//! [`RETRY_REFUSED`].

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::connection::NodeAddr;
use crate::vocab::ClientTrackingStats;

/// How long a refusal of `CLIENT TRACKING` or `CLIENT ID` stands before it
/// is tried again: permissions change rarely, and each try is a refused
/// command in the server's ACL log.
pub(crate) const RETRY_REFUSED: Duration = Duration::from_secs(600);

/// One node's tracking.
#[derive(Debug, Default, Clone, Copy)]
struct NodeTracking {
    /// The subscriber's client ID, while it is subscribed to the
    /// invalidation channel.
    redirect: Option<u64>,
    /// The redirect the poll connection now tracks with.
    on: Option<u64>,
    /// Until when a refusal stands.
    refused_until: Option<Instant>,
}

/// The client tracking of one target's nodes.
#[derive(Debug, Default)]
pub(crate) struct Tracking {
    /// `client_tracking = "auto"`.
    enabled: bool,
    nodes: Mutex<BTreeMap<NodeAddr, NodeTracking>>,
    /// Raised whenever an invalidation may have been missed.
    generation: AtomicU64,
    invalidations: AtomicU64,
    dropped: AtomicU64,
}

impl Tracking {
    /// Tracking as configured.
    pub(crate) fn new(enabled: bool) -> Tracking {
        Tracking {
            enabled,
            ..Tracking::default()
        }
    }

    fn nodes(&self) -> std::sync::MutexGuard<'_, BTreeMap<NodeAddr, NodeTracking>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn gap(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// The node's subscriber is subscribed with client ID `redirect`
    /// (`None`: it is not, or it could not read its ID). Whatever was
    /// tracked before may have lost its invalidations.
    pub(crate) fn register(&self, node: &NodeAddr, redirect: Option<u64>) {
        self.nodes().entry(node.clone()).or_default().redirect = redirect;
        self.gap();
    }

    /// The node is no longer subscribed to at all (it left the topology,
    /// or the subscriptions stopped).
    pub(crate) fn unregister(&self, node: &NodeAddr) {
        self.nodes().remove(node);
        self.gap();
    }

    /// The redirect the node's poll connection should turn tracking on
    /// towards now: the subscriber's ID, when tracking is not on with it
    /// and no refusal stands.
    pub(crate) fn wanted(&self, node: &NodeAddr, now: Instant) -> Option<u64> {
        if !self.enabled {
            return None;
        }
        let nodes = self.nodes();
        let n = nodes.get(node)?;
        let refused = n.refused_until.is_some_and(|until| now < until);
        (n.redirect.is_some() && n.on != n.redirect && !refused)
            .then_some(n.redirect)
            .flatten()
    }

    /// The node's poll connection tracks towards `redirect` from now on.
    pub(crate) fn turned_on(&self, node: &NodeAddr, redirect: u64) {
        let mut nodes = self.nodes();
        let n = nodes.entry(node.clone()).or_default();
        n.on = Some(redirect);
        n.refused_until = None;
        drop(nodes);
        self.gap();
    }

    /// The server refused tracking on the node (`CLIENT TRACKING` or
    /// `CLIENT ID`); true the first time in a row, when it is worth a log
    /// line.
    pub(crate) fn refused(&self, node: &NodeAddr, now: Instant) -> bool {
        let mut nodes = self.nodes();
        let n = nodes.entry(node.clone()).or_default();
        let first = n.refused_until.is_none();
        n.refused_until = Some(now + RETRY_REFUSED);
        first
    }

    /// The node's poll connection was dropped or opened again: nothing it
    /// read before is tracked any more.
    pub(crate) fn connection_reset(&self, node: &NodeAddr) {
        if let Some(n) = self.nodes().get_mut(node) {
            n.on = None;
        }
        self.gap();
    }

    /// While every change to what the node's poll connection read is
    /// announced, a mark that stays the same as long as none can have been
    /// missed; `None` otherwise. Two equal marks say the invalidations
    /// covered the time between.
    pub(crate) fn mark(&self, node: &NodeAddr) -> Option<u64> {
        if !self.enabled {
            return None;
        }
        // Read before the node's state: a gap raised meanwhile makes the
        // mark older, never newer, than what it vouches for.
        let generation = self.generation.load(Ordering::Relaxed);
        let nodes = self.nodes();
        let n = nodes.get(node)?;
        (n.redirect.is_some() && n.on == n.redirect).then_some(generation)
    }

    /// Counts an invalidation received.
    pub(crate) fn invalidated(&self) {
        self.invalidations.fetch_add(1, Ordering::Relaxed);
    }

    /// An invalidation was dropped (the handler's queue was full), or the
    /// server flushed its keys: any read may have changed.
    pub(crate) fn lost(&self, dropped: bool) {
        if dropped {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        self.gap();
    }

    /// What tracking counted; `None` when it is off.
    pub(crate) fn stats(&self) -> Option<ClientTrackingStats> {
        self.enabled.then(|| {
            let nodes = self.nodes();
            ClientTrackingStats {
                active: !nodes.is_empty()
                    && nodes
                        .values()
                        .all(|n| n.redirect.is_some() && n.on == n.redirect),
                invalidations: self.invalidations.load(Ordering::Relaxed),
                dropped: self.dropped.load(Ordering::Relaxed),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_holds_while_every_invalidation_can_arrive() {
        let t = Tracking::new(true);
        let a: NodeAddr = "a:1".into();
        let t0 = Instant::now();
        assert_eq!(t.mark(&a), None, "no subscriber yet");
        assert_eq!(t.wanted(&a, t0), None);
        t.register(&a, Some(7));
        assert_eq!(t.mark(&a), None, "the poll connection does not track yet");
        assert_eq!(t.wanted(&a, t0), Some(7));
        t.turned_on(&a, 7);
        assert_eq!(t.wanted(&a, t0), None, "on already");
        let m = t.mark(&a);
        assert!(m.is_some());
        t.invalidated();
        assert_eq!(t.mark(&a), m, "an invalidation received is no gap");
        t.lost(true);
        let m2 = t.mark(&a);
        assert!(m2.is_some() && m2 != m, "a dropped one is");
        t.connection_reset(&a);
        assert_eq!(t.mark(&a), None, "a new poll connection tracks nothing");
        assert_eq!(t.wanted(&a, t0), Some(7));
        t.turned_on(&a, 7);
        let m3 = t.mark(&a);
        assert!(m3.is_some() && m3 != m2);
        // The subscriber reconnects with another ID: the old one's
        // invalidations are lost.
        t.register(&a, Some(9));
        assert_eq!(t.mark(&a), None);
        assert_eq!(t.wanted(&a, t0), Some(9));
        t.turned_on(&a, 9);
        assert!(t.mark(&a).is_some_and(|m| Some(m) != m3));
        assert_eq!(
            t.stats(),
            Some(ClientTrackingStats {
                active: true,
                invalidations: 1,
                dropped: 1
            })
        );
        t.register(&a, None);
        assert_eq!(t.mark(&a), None, "subscriber down");
        assert!(!t.stats().is_some_and(|s| s.active));
    }

    #[test]
    fn a_refusal_stands_for_a_while_then_is_tried_again() {
        let t = Tracking::new(true);
        let a: NodeAddr = "a:1".into();
        let t0 = Instant::now();
        t.register(&a, Some(3));
        assert!(t.refused(&a, t0), "logged once");
        assert!(!t.refused(&a, t0), "not twice in a row");
        assert_eq!(t.wanted(&a, t0 + Duration::from_secs(1)), None);
        assert_eq!(t.mark(&a), None);
        assert_eq!(t.wanted(&a, t0 + RETRY_REFUSED), Some(3));
        t.turned_on(&a, 3);
        assert!(t.refused(&a, t0), "a new streak is logged");
    }

    #[test]
    fn off_tracks_nothing() {
        let t = Tracking::new(false);
        let a: NodeAddr = "a:1".into();
        t.register(&a, Some(1));
        assert_eq!(t.wanted(&a, Instant::now()), None);
        t.turned_on(&a, 1);
        assert_eq!(t.mark(&a), None);
        assert_eq!(t.stats(), None);
    }

    #[test]
    fn every_node_must_track_for_the_target_to() {
        let t = Tracking::new(true);
        let (a, b): (NodeAddr, NodeAddr) = ("a:1".into(), "b:1".into());
        t.register(&a, Some(1));
        t.register(&b, Some(2));
        t.turned_on(&a, 1);
        assert!(t.mark(&a).is_some());
        assert_eq!(t.mark(&b), None);
        assert!(!t.stats().is_some_and(|s| s.active));
        t.turned_on(&b, 2);
        assert!(t.stats().is_some_and(|s| s.active));
        t.unregister(&b);
        assert!(t.stats().is_some_and(|s| s.active), "a only");
    }
}
