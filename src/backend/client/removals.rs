//! The removals keyevents announced (`xtrim`, `xdel`), and the events that
//! set a stream or its groups from outside (`xgroup-setid` and the like),
//! per node and stream, and the barrier that makes them complete up to a
//! read: the evidence that tells a trim from deletions where a stream's
//! figures cannot (a trim up to an entry and a deletion of that entry leave
//! the same figures as deletions of every entry before it), and that a
//! group was not set back between two reads (see [`Announced`]).
//!
//! Events arrive on the subscription's connection and the figures on the
//! poll connection, and nothing orders the two. Two facts of the server
//! order them here:
//!
//! - **A mark before a read bounds the window from below.** An event that
//!   arrived before the read was sent was published before the read ran,
//!   so every event of a command run after an earlier read is recorded
//!   after the mark taken before that read ([`RemovalLog::mark`]).
//! - **A barrier after a read bounds it from above.** A `PING` on the
//!   subscribed connection, sent once the read's reply is in, runs after
//!   the read; its reply follows every message published before it. Once
//!   it is answered and the messages before it are recorded
//!   ([`RemovalLog::barrier`]), every removal of a command run before the
//!   read is in the log.
//!
//! Events recorded after the barrier's command may fall into a window they
//! do not belong to: an `xtrim` then makes a deletion's cause unclear again
//! (the more severe reading), never the other way. A window is only read
//! on one subscribed connection from end to end, with nothing forgotten in
//! it (a key too long to keep, the log full): otherwise it says nothing.
//! The log is only memory: marks never outlive the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::connection::NodeAddr;
use super::subscriber::KeyEvent;
use crate::loss::{self, Announced, EventMark};

/// A stream's name, as the log keeps it.
type Name = Arc<[u8]>;

/// The most streams a node's log remembers removals of; beyond it the log
/// is cleared and every window open before is read as unknown (never as
/// "nothing announced").
const REMOVAL_LOG_STREAMS: usize = 100_000;

/// The removal events of one target's subscriptions, per node.
#[derive(Debug, Default)]
pub(crate) struct RemovalLog {
    nodes: Mutex<HashMap<NodeAddr, NodeLog>>,
    /// Connections numbered across nodes and resubscriptions.
    connections: std::sync::atomic::AtomicU64,
}

/// The answers to a node's barriers: which connection answered, how many
/// barriers asked so far it answered, and the mark after the last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Answer {
    connection: Option<u64>,
    answered: u64,
    seq: u64,
}

#[derive(Debug)]
struct NodeLog {
    /// The subscribed connection delivering the node's keyevents.
    connection: Option<u64>,
    /// Removal events recorded on the node, over all its connections.
    seq: u64,
    /// Events recorded before this are not all in the maps.
    complete_from: u64,
    /// Per stream, the number of its last `xtrim`, of its last `xdel` and
    /// of its last event that set it from outside.
    trims: HashMap<Name, u64>,
    deletions: HashMap<Name, u64>,
    sets: HashMap<Name, u64>,
    /// Barriers asked; the subscription wakes on `ask`.
    asked: u64,
    ask: Arc<Notify>,
    answers: watch::Sender<Answer>,
}

impl Default for NodeLog {
    fn default() -> Self {
        NodeLog {
            connection: None,
            seq: 0,
            complete_from: 0,
            trims: HashMap::new(),
            deletions: HashMap::new(),
            sets: HashMap::new(),
            asked: 0,
            ask: Arc::new(Notify::new()),
            answers: watch::Sender::new(Answer::default()),
        }
    }
}

/// The kinds of keyevent a node's log keeps, each in a map of its own.
#[derive(Clone, Copy)]
enum Kept {
    /// `xtrim`.
    Trim,
    /// `xdel` (`XDEL`, `XDELEX`, `XACKDEL`).
    Deletion,
    /// An event that set the stream or a group from outside.
    Set,
}

impl NodeLog {
    /// Forgets what was recorded: windows open before say nothing.
    fn forget(&mut self) {
        self.seq += 1;
        self.complete_from = self.seq;
        self.trims.clear();
        self.deletions.clear();
        self.sets.clear();
    }

    /// Streams with something recorded, counted once per map.
    fn kept(&self) -> usize {
        self.trims.len() + self.deletions.len() + self.sets.len()
    }
}

impl RemovalLog {
    fn nodes(&self) -> MutexGuard<'_, HashMap<NodeAddr, NodeLog>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A subscription to `node`'s keyevent channels began: its connection's
    /// number, and what wakes it when a barrier is asked. Windows open
    /// before say nothing.
    pub(crate) fn connected(&self, node: &NodeAddr) -> (u64, Arc<Notify>) {
        let connection = 1 + self
            .connections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut nodes = self.nodes();
        let log = nodes.entry(node.clone()).or_default();
        log.forget();
        log.connection = Some(connection);
        // Barriers asked of an earlier connection were answered (with
        // nothing) when it ended; this one answers from now on.
        let answer = Answer {
            connection: Some(connection),
            answered: log.asked,
            seq: log.seq,
        };
        log.answers.send_replace(answer);
        (connection, log.ask.clone())
    }

    /// The subscription `connection` to `node` ended: barriers waiting on
    /// it are answered with nothing.
    pub(crate) fn disconnected(&self, node: &NodeAddr, connection: u64) {
        let mut nodes = self.nodes();
        let Some(log) = nodes.get_mut(node) else {
            return;
        };
        if log.connection == Some(connection) {
            log.connection = None;
            log.answers.send_modify(|a| a.connection = None);
        }
    }

    /// Records a keyevent from `node`: `xtrim`, `xdel` and the events that
    /// set a stream from outside are what the windows read.
    pub(crate) fn record(&self, node: &NodeAddr, event: &KeyEvent) {
        let kind = match event.event.as_str() {
            "xtrim" => Kept::Trim,
            "xdel" => Kept::Deletion,
            other if loss::sets_from_outside(other) => Kept::Set,
            _ => return,
        };
        let mut nodes = self.nodes();
        let Some(log) = nodes.get_mut(node) else {
            return;
        };
        if log.kept() >= REMOVAL_LOG_STREAMS {
            log.forget();
        }
        log.seq += 1;
        let seq = log.seq;
        let key: Name = Arc::from(event.key.as_slice());
        let last = match kind {
            Kept::Trim => &mut log.trims,
            Kept::Deletion => &mut log.deletions,
            Kept::Set => &mut log.sets,
        };
        last.insert(key, seq);
    }

    /// A keyevent from `node` could not be read (its key too long to keep):
    /// it may have been a removal of any stream.
    pub(crate) fn unreadable(&self, node: &NodeAddr) {
        if let Some(log) = self.nodes().get_mut(node) {
            log.forget();
        }
    }

    /// The barriers asked of `node` so far, for the subscription to answer.
    pub(crate) fn asked(&self, node: &NodeAddr) -> u64 {
        self.nodes().get(node).map_or(0, |l| l.asked)
    }

    /// `connection` answered the barriers asked up to `asked`: its `PING`
    /// was answered and every message before the answer recorded.
    pub(crate) fn answer(&self, node: &NodeAddr, connection: u64, asked: u64) {
        let mut nodes = self.nodes();
        let Some(log) = nodes.get_mut(node) else {
            return;
        };
        if log.connection != Some(connection) {
            return;
        }
        let seq = log.seq;
        log.answers.send_modify(|a| {
            *a = Answer {
                connection: Some(connection),
                answered: asked,
                seq,
            }
        });
    }

    /// The mark to take before a read from `node`; `None` while no
    /// subscription delivers its keyevents.
    pub(crate) fn mark(&self, node: &NodeAddr) -> Option<EventMark> {
        let nodes = self.nodes();
        let log = nodes.get(node)?;
        Some(EventMark {
            connection: log.connection?,
            seq: log.seq,
        })
    }

    /// Asks `node`'s subscription for a barrier and waits for it, at most
    /// `timeout`: the mark after which every removal of a command run
    /// before now is recorded. `None` when there is no subscription, it
    /// ended, or it did not answer in time.
    pub(crate) async fn barrier(&self, node: &NodeAddr, timeout: Duration) -> Option<EventMark> {
        let (connection, asked, ask, mut answers) = {
            let mut nodes = self.nodes();
            let log = nodes.get_mut(node)?;
            let connection = log.connection?;
            log.asked += 1;
            (
                connection,
                log.asked,
                log.ask.clone(),
                log.answers.subscribe(),
            )
        };
        ask.notify_one();
        let answered =
            answers.wait_for(|a| a.connection != Some(connection) || a.answered >= asked);
        let answer = *tokio::time::timeout(timeout, answered).await.ok()?.ok()?;
        (answer.connection == Some(connection)).then_some(EventMark {
            connection,
            seq: answer.seq,
        })
    }

    /// What `node`'s keyevents announced of `stream` for a read taken at
    /// `read_at`, closed by `barrier` when one was taken after it.
    pub(crate) fn announced(
        &self,
        node: &NodeAddr,
        stream: &[u8],
        read_at: EventMark,
        barrier: Option<EventMark>,
    ) -> Announced {
        let nodes = self.nodes();
        let log = nodes.get(node);
        let closed = barrier.is_some_and(|b| {
            b.connection == read_at.connection
                && log.is_some_and(|l| l.connection == Some(b.connection))
        });
        Announced {
            read_at,
            closed,
            complete_from: log.map_or(u64::MAX, |l| l.complete_from),
            last_trim: log.and_then(|l| l.trims.get(stream).copied()),
            last_deletion: log.and_then(|l| l.deletions.get(stream).copied()),
            last_set: log.and_then(|l| l.sets.get(stream).copied()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::Removals;

    fn event(event: &str, key: &str) -> KeyEvent {
        KeyEvent {
            event: event.to_string(),
            key: key.as_bytes().to_vec(),
        }
    }

    fn node() -> NodeAddr {
        Arc::from("127.0.0.1:6379")
    }

    /// A log whose node has a subscription: its connection, and the mark
    /// taken once it began.
    fn subscribed() -> (RemovalLog, NodeAddr, u64, EventMark) {
        let log = RemovalLog::default();
        let n = node();
        let (conn, _) = log.connected(&n);
        let mark = log.mark(&n).unwrap();
        (log, n, conn, mark)
    }

    fn name(s: &str) -> Name {
        Arc::from(s.as_bytes())
    }

    #[tokio::test]
    async fn a_window_reads_what_was_announced_between_two_reads() {
        let log = RemovalLog::default();
        let n = node();
        assert_eq!(log.mark(&n), None, "no subscription, no mark");
        let (conn, ask) = log.connected(&n);
        let first = log.mark(&n).unwrap();
        log.record(&n, &event("xdel", "q"));
        log.record(&n, &event("xtrim", "other"));
        log.record(&n, &event("xadd", "q"));
        let second = log.mark(&n).unwrap();
        // The subscription answers the barrier it is woken for.
        let answering = async {
            ask.notified().await;
            log.answer(&n, conn, log.asked(&n));
        };
        let (barrier, ()) = tokio::join!(log.barrier(&n, Duration::from_secs(1)), answering);
        let q = log.announced(&n, &name("q"), second, barrier);
        assert_eq!(q.since(first), Some(Removals::Deletions));
        let other = log.announced(&n, &name("other"), second, barrier);
        assert_eq!(other.since(first), Some(Removals::Trims));
        assert_eq!(
            log.announced(&n, &name("quiet"), second, barrier)
                .since(first),
            None,
            "nothing announced proves nothing (events may be off)"
        );
        // Without the barrier the window is open.
        assert_eq!(
            log.announced(&n, &name("q"), second, None).since(first),
            None
        );
        // A window that starts after the events holds none of them...
        assert_eq!(
            log.announced(&n, &name("q"), second, barrier).since(second),
            None
        );
        // ...but an xtrim recorded after the barrier still falls in the
        // window: the more severe reading, never the milder one.
        log.record(&n, &event("xtrim", "q"));
        let q = log.announced(&n, &name("q"), second, barrier);
        assert_eq!(q.since(first), Some(Removals::Both));
        assert_eq!(q.since(second), Some(Removals::Trims));
    }

    #[tokio::test]
    async fn a_window_across_connections_or_forgotten_events_says_nothing() {
        let (log, n, conn, before) = subscribed();
        log.record(&n, &event("xdel", "q"));
        log.unreadable(&n);
        log.record(&n, &event("xdel", "q"));
        log.answer(&n, conn, 0);
        let barrier = Some(log.mark(&n).unwrap());
        let now = log.mark(&n).unwrap();
        assert_eq!(
            log.announced(&n, &name("q"), now, barrier).since(before),
            None,
            "an unreadable event may have been an xtrim of q"
        );
        // Resubscribed: the old connection's marks say nothing.
        log.disconnected(&n, conn);
        assert_eq!(log.mark(&n), None);
        assert_eq!(log.barrier(&n, Duration::from_millis(10)).await, None);
        let (conn2, _) = log.connected(&n);
        assert_ne!(conn, conn2);
        let after = log.mark(&n).unwrap();
        log.record(&n, &event("xdel", "q"));
        let end = Some(log.mark(&n).unwrap());
        assert_eq!(
            log.announced(&n, &name("q"), after, end).since(before),
            None
        );
        assert_eq!(
            log.announced(&n, &name("q"), after, end).since(after),
            Some(Removals::Deletions)
        );
    }

    #[tokio::test]
    async fn a_barrier_not_answered_in_time_or_by_a_connection_that_ended_is_none() {
        let log = RemovalLog::default();
        let n = node();
        let (conn, _) = log.connected(&n);
        assert_eq!(log.barrier(&n, Duration::from_millis(20)).await, None);
        let waiting = log.barrier(&n, Duration::from_secs(5));
        let ending = async {
            tokio::task::yield_now().await;
            log.disconnected(&n, conn);
        };
        let (got, ()) = tokio::join!(waiting, ending);
        assert_eq!(got, None);
    }

    #[test]
    fn a_full_log_forgets_rather_than_grows() {
        let (log, n, _, before) = subscribed();
        for i in 0..REMOVAL_LOG_STREAMS {
            log.record(&n, &event("xdel", &format!("s{i}")));
        }
        log.record(&n, &event("xdel", "q"));
        let now = log.mark(&n).unwrap();
        let a = log.announced(&n, &name("q"), now, Some(now));
        assert_eq!(a.since(before), None, "the windows open before say nothing");
        assert_eq!(a.last_deletion, Some(now.seq));
        let nodes = log.nodes();
        let l = &nodes[&n];
        assert_eq!(l.kept(), 1);
    }

    #[test]
    fn a_window_tells_whether_a_group_was_set_from_outside() {
        let (log, n, _, first) = subscribed();
        log.record(&n, &event("xdel", "q"));
        log.record(&n, &event("xgroup-createconsumer", "q"));
        log.record(&n, &event("xgroup-setid", "other"));
        let now = log.mark(&n).unwrap();
        let q = log.announced(&n, &name("q"), now, Some(now));
        assert!(q.positions_kept_since(first), "{q:?}");
        assert!(
            !log.announced(&n, &name("q"), now, None)
                .positions_kept_since(first),
            "an open window vouches for nothing"
        );
        let other = log.announced(&n, &name("other"), now, Some(now));
        assert!(
            !other.positions_kept_since(first),
            "no xdel: the server may not publish stream events"
        );
        log.record(&n, &event("xgroup-setid", "q"));
        let set = log.mark(&n).unwrap();
        let q = log.announced(&n, &name("q"), set, Some(set));
        assert!(!q.positions_kept_since(first), "set back in the window");
        log.record(&n, &event("xdel", "q"));
        let later = log.mark(&n).unwrap();
        let q = log.announced(&n, &name("q"), later, Some(later));
        assert!(q.positions_kept_since(set), "the set is before this window");
        assert_eq!(q.since(set), Some(Removals::Deletions));
    }
}
