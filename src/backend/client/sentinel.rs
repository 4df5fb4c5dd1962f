//! The primary of a sentinel target (the state and the reply decoding; the
//! round trips are the client's): asked of the sentinels in order (the
//! first that answers wins), kept for [`SENTINEL_REFRESH`], asked again
//! after any failed round trip, and kept when no sentinel answers (a
//! sentinel restart must not blank a healthy primary's metrics).

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use super::connection::{Node, NodeAddr};
use crate::backend::reply;

/// How often the sentinel is asked for the primary even when nothing failed.
/// A dead primary is noticed at once (a failed round trip re-asks); this
/// bounds how long a primary demoted while still reachable (a manual
/// `SENTINEL FAILOVER`) keeps being read.
const SENTINEL_REFRESH: Duration = Duration::from_secs(10);

/// The primary last given by a sentinel, and when.
#[derive(Debug, Default)]
pub(super) struct SentinelState {
    primary: Option<Arc<Node>>,
    /// `None` before the first answer and after [`Self::expire`].
    resolved_at: Option<Instant>,
}

impl SentinelState {
    /// The primary, while its answer is younger than [`SENTINEL_REFRESH`].
    pub(super) fn fresh(&self, now: Instant) -> Option<Arc<Node>> {
        match (&self.primary, self.resolved_at) {
            (Some(node), Some(at)) if now.saturating_duration_since(at) < SENTINEL_REFRESH => {
                Some(node.clone())
            }
            _ => None,
        }
    }

    /// Asks the sentinels again before the next command.
    pub(super) fn expire(&mut self) {
        self.resolved_at = None;
    }

    /// A sentinel named `addr` at `now`: the same primary keeps its
    /// connection; another (a failover, or the first answer) gets a fresh
    /// slot, and the old connection is dropped with the old node.
    pub(super) fn resolved(&mut self, addr: &str, now: Instant) -> Arc<Node> {
        let node = match &self.primary {
            Some(node) if *node.addr == *addr => node.clone(),
            _ => {
                let node = Node::new(addr.into());
                self.primary = Some(node.clone());
                node
            }
        };
        self.resolved_at = Some(now);
        node
    }

    /// No sentinel answered at `now`: the primary already known stays in
    /// use for another [`SENTINEL_REFRESH`] (its own round trips tell
    /// whether it is still there); `None` when none is known.
    pub(super) fn keep_last(&mut self, now: Instant) -> Option<Arc<Node>> {
        let node = self.primary.clone()?;
        self.resolved_at = Some(now);
        Some(node)
    }

    /// The primary's connection slot, once one is known.
    pub(super) fn primary(&self) -> Option<Arc<Node>> {
        self.primary.clone()
    }

    /// The connection slot for `addr`: the primary's when it is the
    /// primary, else a throwaway one, so a primary the sentinels moved away
    /// from is not kept open.
    pub(super) fn node(&self, addr: &NodeAddr) -> Arc<Node> {
        match &self.primary {
            Some(node) if node.addr == *addr => node.clone(),
            _ => Node::new(addr.clone()),
        }
    }
}

/// The `host:port` in a `SENTINEL GET-MASTER-ADDR-BY-NAME` reply from
/// `sentinel` about `master`, or why there is none.
pub(super) fn primary_addr(sentinel: &str, master: &str, reply: &Value) -> Result<String, String> {
    match reply {
        Value::Array(parts) if parts.len() == 2 => {
            let host = reply::as_bytes(&parts[0]).map(|b| String::from_utf8_lossy(b).into_owned());
            let port = reply::as_int(&parts[1]);
            match (host, port) {
                (Some(h), Some(p)) => Ok(format!("{h}:{p}")),
                _ => Err(format!("sentinel {sentinel} gave a malformed address")),
            }
        }
        Value::Nil => Err(format!(
            "sentinel {sentinel} does not know master {master:?}"
        )),
        other => Err(format!("sentinel {sentinel} answered {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn the_primary_address_is_read_from_the_reply() {
        let ok = Value::Array(vec![bulk("10.0.0.5"), bulk("6380")]);
        assert_eq!(
            primary_addr("s1:26379", "mymaster", &ok),
            Ok("10.0.0.5:6380".into())
        );
        // RESP3 servers may send the port as an integer.
        let int_port = Value::Array(vec![bulk("::1"), Value::Int(7000)]);
        assert_eq!(
            primary_addr("s1:26379", "m", &int_port),
            Ok("::1:7000".into())
        );
    }

    #[test]
    fn an_unusable_reply_says_why() {
        assert_eq!(
            primary_addr("s1:26379", "mymaster", &Value::Nil),
            Err("sentinel s1:26379 does not know master \"mymaster\"".into())
        );
        let short = Value::Array(vec![bulk("10.0.0.5")]);
        assert!(
            primary_addr("s1:26379", "m", &short)
                .unwrap_err()
                .starts_with("sentinel s1:26379 answered ")
        );
        let bad_port = Value::Array(vec![bulk("10.0.0.5"), bulk("port")]);
        assert_eq!(
            primary_addr("s2:26379", "m", &bad_port),
            Err("sentinel s2:26379 gave a malformed address".into())
        );
        assert!(primary_addr("s", "m", &Value::Okay).is_err());
    }

    #[test]
    fn an_answer_is_kept_for_the_refresh_period_then_asked_again() {
        let t0 = Instant::now();
        let mut state = SentinelState::default();
        assert!(state.fresh(t0).is_none(), "nothing before the first answer");
        let node = state.resolved("10.0.0.5:6379", t0);
        let fresh = state.fresh(t0 + SENTINEL_REFRESH / 2);
        assert!(fresh.is_some_and(|n| Arc::ptr_eq(&n, &node)));
        assert!(state.fresh(t0 + SENTINEL_REFRESH).is_none());
        // A failed round trip asks again at once.
        state.resolved("10.0.0.5:6379", t0);
        state.expire();
        assert!(state.fresh(t0).is_none());
    }

    #[test]
    fn the_same_primary_keeps_its_connection_a_failover_gets_a_fresh_one() {
        let t0 = Instant::now();
        let mut state = SentinelState::default();
        let first = state.resolved("10.0.0.5:6379", t0);
        let again = state.resolved("10.0.0.5:6379", t0 + SENTINEL_REFRESH);
        assert!(Arc::ptr_eq(&first, &again));
        let promoted = state.resolved("10.0.0.6:6379", t0 + 2 * SENTINEL_REFRESH);
        assert!(!Arc::ptr_eq(&first, &promoted));
        assert_eq!(&*promoted.addr, "10.0.0.6:6379");
        // The demoted primary's address gets a throwaway slot, the current
        // one its own.
        let old: NodeAddr = "10.0.0.5:6379".into();
        assert!(!Arc::ptr_eq(&state.node(&old), &first));
        assert!(Arc::ptr_eq(&state.node(&promoted.addr), &promoted));
    }

    #[test]
    fn without_any_sentinel_the_last_primary_stays() {
        let t0 = Instant::now();
        let mut state = SentinelState::default();
        assert!(state.keep_last(t0).is_none(), "no primary to keep yet");
        let node = state.resolved("10.0.0.5:6379", t0);
        state.expire();
        let later = t0 + 3 * SENTINEL_REFRESH;
        let kept = state.keep_last(later);
        assert!(kept.is_some_and(|n| Arc::ptr_eq(&n, &node)));
        // Kept for another period before the sentinels are asked again.
        assert!(state.fresh(later + SENTINEL_REFRESH / 2).is_some());
        assert!(state.fresh(later + SENTINEL_REFRESH).is_none());
    }
}
