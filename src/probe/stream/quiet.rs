//! Quiet streams, read with one `XREVRANGE … COUNT 1` instead of both
//! `XINFO`.
//!
//! A stream whose last full read showed nothing undelivered and nothing
//! pending in any group (and, on 8.6, no idempotent producers) has figures
//! that change only through commands that publish a keyspace event the
//! exporter subscribes to (`xtrim`, `xdel`, `xsetid`, `xgroup-*`, `del`:
//! reads deliver nothing, acknowledgements and claims need pending entries,
//! a consumer a read creates publishes `xgroup-createconsumer` on 7.0+), or
//! through `XADD`, which is not subscribed (one message per entry) but
//! gives the stream a new last entry. So while keyspace events cover every
//! event (the backend's coverage mark, the same since that read) and no
//! event named the stream since, a last entry whose ID is the one read then
//! proves the figures unchanged, and that read stands for this poll: it is
//! folded again at the poll's server time, so ages, the status window and
//! the trend move on exactly as if it had been sent again. The last entry,
//! not the length: a key replaced without an event we subscribe to
//! (`RENAME`, `COPY`, `RESTORE` onto it, `FLUSHALL`, an expiry) has another
//! last entry, or none, whatever its length. An empty stream is always read
//! in full (an emptied key would look the same). Every [`QUIET_SAFETY`] the
//! stream is read in full whatever the check says: the bound on what no
//! event and no last entry announce (a copy of the stream itself put in its
//! place; `XCLAIM … FORCE` of an entry already acknowledged, which Redis
//! sends only to replicate a claim).
//!
//! On Redis 6.2 (no `entries-added`, and a read that creates a consumer
//! publishes nothing) every stream is read in full.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{Command, NodeAddr, RangeEnd, RangeStart, reply};
use crate::probe::context::{ProbeContext, ProbeError};
use crate::probe::memory::{QuietRead, QuietReads, StreamRead};
use crate::snapshot::Name;
use crate::vocab::GroupInfo;

/// The longest a quiet stream goes without a full read.
pub const QUIET_SAFETY: Duration = Duration::from_secs(300);

impl QuietReads {
    /// An event named `stream`: it is read in full next time.
    pub(crate) fn forget(&mut self, stream: &[u8]) {
        self.reads.remove(stream);
    }

    /// Keeps only the streams `watched` holds.
    pub(crate) fn retain(&mut self, watched: impl Fn(&Name) -> bool) {
        self.reads.retain(|n, _| watched(n));
    }

    /// The read that may stand for `stream` at `now` under `coverage`.
    fn candidate(&self, stream: &Name, coverage: u64, now: Instant) -> Option<&StreamRead> {
        self.reads
            .get(stream)
            .filter(|q| {
                q.coverage == coverage && now.saturating_duration_since(q.read_at) < QUIET_SAFETY
            })
            .map(|q| &q.read)
    }

    /// Records a full read of `stream`: kept when the stream is quiet and
    /// events cover it, forgotten otherwise.
    pub(super) fn remember(
        &mut self,
        stream: &Name,
        read: &StreamRead,
        coverage: Option<u64>,
        now: Instant,
    ) {
        match coverage.filter(|_| is_quiet(read)) {
            Some(coverage) => {
                self.reads.insert(
                    stream.clone(),
                    QuietRead {
                        read: read.clone(),
                        coverage,
                        read_at: now,
                    },
                );
            }
            None => {
                self.reads.remove(stream);
            }
        }
    }
}

/// Whether a full read shows nothing that can change without an event or
/// a longer stream.
pub(super) fn is_quiet(read: &StreamRead) -> bool {
    let info = &read.info;
    let Some(added) = info.entries_added else {
        return false;
    };
    let caught_up =
        |g: &GroupInfo| g.pending == 0 && (g.lag == Some(0) || g.entries_read == Some(added));
    read.dropped == 0
        && info.length > 0
        && info.last_entry_id.is_some()
        && info.idempotence.producers.unwrap_or(0) == 0
        && read.groups.iter().chain(&read.unwatched).all(caught_up)
}

/// The streams among `names` whose last full read stands (their last
/// entry, read now in one pipeline, is the one read then), and the
/// others, to read in full.
///
/// # Errors
/// When the node cannot be reached.
pub(super) async fn check<'n>(
    ctx: &ProbeContext,
    node: &NodeAddr,
    coverage: Option<u64>,
    names: &[&'n Name],
) -> Result<(Vec<(Name, StreamRead)>, Vec<&'n Name>), ProbeError> {
    let Some(coverage) = coverage else {
        return Ok((Vec::new(), names.to_vec()));
    };
    let now = Instant::now();
    let candidates: Vec<(&Name, StreamRead)> = {
        let state = ctx.state();
        names
            .iter()
            .filter_map(|&n| {
                state
                    .quiet
                    .candidate(n, coverage, now)
                    .map(|r| (n, r.clone()))
            })
            .collect()
    };
    if candidates.is_empty() {
        return Ok((Vec::new(), names.to_vec()));
    }
    let cmds: Vec<Command> = candidates
        .iter()
        .map(|(n, _)| Command::Xrevrange {
            key: n.to_vec(),
            end: RangeEnd::Max,
            start: RangeStart::Min,
            count: 1,
        })
        .collect();
    let replies = ctx.client.execute(node, &cmds).await?;
    let mut unchanged: HashSet<&Name> = HashSet::new();
    let mut stands = Vec::new();
    for ((name, read), r) in candidates.into_iter().zip(replies) {
        // Anything else (another entry, none, an error) is read in full,
        // and its own errors say what is wrong.
        let last = r.ok().and_then(|v| reply::range_ids(&v).ok());
        if last.is_some_and(|ids| ids.first().copied() == read.info.last_entry_id) {
            unchanged.insert(name);
            stands.push((name.clone(), read));
        }
    }
    let rest = names
        .iter()
        .filter(|n| !unchanged.contains(*n))
        .copied()
        .collect();
    Ok((stands, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{StreamId, StreamInfo};

    fn read(groups: Vec<GroupInfo>) -> StreamRead {
        StreamRead {
            info: StreamInfo {
                length: 3,
                entries_added: Some(5),
                last_generated_id: StreamId::new(5, 0),
                last_entry_id: Some(StreamId::new(5, 0)),
                ..StreamInfo::default()
            },
            groups,
            unwatched: Vec::new(),
            dropped: 0,
        }
    }

    fn group(pending: u64, lag: Option<u64>, entries_read: Option<u64>) -> GroupInfo {
        GroupInfo {
            name: b"g".to_vec(),
            pending,
            lag,
            entries_read,
            ..GroupInfo::default()
        }
    }

    #[test]
    fn quiet_is_nothing_undelivered_nothing_pending() {
        assert!(is_quiet(&read(Vec::new())), "no groups");
        assert!(is_quiet(&read(vec![group(0, Some(0), Some(5))])));
        // Lag unknown but entries-read at entries-added.
        assert!(is_quiet(&read(vec![group(0, None, Some(5))])));
        assert!(
            !is_quiet(&read(vec![group(1, Some(0), Some(5))])),
            "pending"
        );
        assert!(
            !is_quiet(&read(vec![group(0, Some(2), Some(3))])),
            "undelivered"
        );
        assert!(!is_quiet(&read(vec![group(0, None, None)])), "lag unknown");
        let mut unwatched = read(Vec::new());
        unwatched.unwatched = vec![group(0, Some(1), Some(4))];
        assert!(!is_quiet(&unwatched), "an unwatched group behind");
        let mut old = read(Vec::new());
        old.info.entries_added = None;
        assert!(!is_quiet(&old), "6.2");
        let mut idempotent = read(Vec::new());
        idempotent.info.idempotence.producers = Some(1);
        assert!(!is_quiet(&idempotent), "idempotent producers");
        let mut cut = read(Vec::new());
        cut.dropped = 1;
        assert!(!is_quiet(&cut), "groups left out");
        let mut empty = read(Vec::new());
        empty.info.length = 0;
        empty.info.last_entry_id = None;
        assert!(!is_quiet(&empty), "empty");
    }

    #[test]
    fn a_read_stands_while_covered_unnamed_and_within_the_safety_interval() {
        let t0 = Instant::now();
        let s: Name = std::sync::Arc::from(&b"s"[..]);
        let mut q = QuietReads::default();
        q.remember(&s, &read(Vec::new()), Some(7), t0);
        assert!(q.candidate(&s, 7, t0 + Duration::from_secs(60)).is_some());
        assert!(q.candidate(&s, 8, t0).is_none(), "a gap since");
        assert!(q.candidate(&s, 7, t0 + QUIET_SAFETY).is_none(), "safety");
        q.forget(b"s");
        assert!(q.candidate(&s, 7, t0).is_none(), "an event named it");
        // Not covered, or not quiet: not kept.
        q.remember(&s, &read(Vec::new()), None, t0);
        assert!(q.candidate(&s, 7, t0).is_none());
        q.remember(&s, &read(vec![group(1, Some(0), Some(5))]), Some(7), t0);
        assert!(q.candidate(&s, 7, t0).is_none());
        q.remember(&s, &read(Vec::new()), Some(7), t0);
        q.retain(|_| false);
        assert!(q.candidate(&s, 7, t0).is_none(), "no longer watched");
    }
}
