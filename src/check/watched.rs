//! What a watch remembers of a target besides its final snapshot: each
//! group as first seen, dead-letter lengths and the oldest pending IDs at
//! the end, which the judge compares against.

use std::collections::BTreeMap;

use tokio::time::Instant;

use crate::poller::Poller;
use crate::snapshot::Name;
use crate::vocab::StreamId;

/// What the watch remembers of a group from when it first saw it.
#[derive(Clone, Debug)]
pub(super) struct Baseline {
    pub(super) first_seen: Instant,
    pub(super) oldest_pending: Option<StreamId>,
    pub(super) pending: u64,
    pub(super) lost: u64,
    pub(super) rewinds: u64,
}

/// What the watch of one target saw besides its final snapshot.
#[derive(Debug, Default)]
pub(super) struct Watched {
    pub(super) groups: BTreeMap<(Name, Name), Baseline>,
    pub(super) dead_letters: BTreeMap<Name, u64>,
    /// Oldest pending IDs at the end, from the pending summary.
    pub(super) oldest_pending: BTreeMap<(Name, Name), Option<StreamId>>,
    pub(super) ended: Option<Instant>,
}

impl Watched {
    /// Records the groups and dead-letter streams seen for the first time.
    pub(super) fn remember(&mut self, poller: &Poller) {
        let now = Instant::now();
        let state = poller.context().state();
        for (s, st) in state.snapshot.streams.iter() {
            if let Some(dl) = st.dead_letter {
                self.dead_letters.entry(s.clone()).or_insert(dl.length);
            }
            for (g, gs) in st.groups.iter() {
                let key = (s.clone(), g.clone());
                let oldest = state.groups.get(&key).and_then(|m| m.oldest_pending_id);
                self.groups.entry(key).or_insert_with(|| Baseline {
                    first_seen: now,
                    oldest_pending: oldest,
                    pending: gs.pending,
                    lost: gs.lost.map_or(0, |l| l.total()),
                    rewinds: gs.rewinds,
                });
            }
        }
    }

    pub(super) fn finish(&mut self, poller: &Poller) {
        self.ended = Some(Instant::now());
        let state = poller.context().state();
        self.oldest_pending = state
            .groups
            .iter()
            .map(|(k, m)| (k.clone(), m.oldest_pending_id))
            .collect();
    }
}
