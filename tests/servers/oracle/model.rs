//! The oracle's model: the truth about each stream and group, computed from
//! the operations applied (entries by ID, every ID ever added, what was
//! removed and why, each group's last-delivered-id, PEL and consumers, and
//! the entries each group had not read when they were removed).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A stream ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Id(pub u64, pub u64);

impl Id {
    pub const ZERO: Id = Id(0, 0);

    pub fn parse(s: &str) -> Id {
        let (ms, seq) = s.split_once('-').unwrap_or((s, "0"));
        Id(
            ms.parse().unwrap_or_else(|_| panic!("bad id {s}")),
            seq.parse().unwrap_or_else(|_| panic!("bad id {s}")),
        )
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.0, self.1)
    }
}

/// Why an entry left the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// XTRIM, or XADD with MAXLEN/MINID.
    Trimmed,
    /// XDEL, XDELEX, XACKDEL.
    Deleted,
}

/// One consumer group.
#[derive(Clone, Debug, Default)]
pub struct GroupModel {
    pub ld: Id,
    /// Pending entries: owner and delivery count.
    pub pel: BTreeMap<Id, (String, u64)>,
    pub consumers: BTreeSet<String>,
    /// Changes whenever the group's position is set from outside (create,
    /// SETID): losses are accounted per epoch.
    pub epoch: u64,
    /// Entries removed while this group had not read them (ID above its
    /// last-delivered-id at the removal, or removed before the group was
    /// set below them), with their cause.
    pub removed_unread: BTreeMap<Id, Cause>,
}

impl GroupModel {
    pub fn pending_of(&self, consumer: &str) -> usize {
        self.pel.values().filter(|(c, _)| c == consumer).count()
    }
}

/// One stream key.
#[derive(Clone, Debug, Default)]
pub struct StreamModel {
    pub present: BTreeSet<Id>,
    /// Every ID added since the key was created.
    pub ever: BTreeSet<Id>,
    /// Every ID removed since the key was created, with its cause.
    pub removed: BTreeMap<Id, Cause>,
    /// IDs removed by a command that moved neither the first entry nor
    /// max-deleted-entry-id (deletions below an older one): alone between
    /// two polls, such a command leaves the figures of `XSETID …
    /// ENTRIESADDED` beside adds, which prove nothing.
    pub unseen: BTreeSet<Id>,
    pub last_gen: Id,
    pub added: u64,
    pub groups: BTreeMap<String, GroupModel>,
}

impl StreamModel {
    /// Entries present with an ID above `ld`: the true lag.
    pub fn lag(&self, ld: Id) -> u64 {
        self.present
            .range((std::ops::Bound::Excluded(ld), std::ops::Bound::Unbounded))
            .count() as u64
    }

    /// The largest ID ever deleted (XDEL, XDELEX, XACKDEL): the server's
    /// max-deleted-entry-id, as `XSETID` never sets it here.
    pub fn max_deleted(&self) -> Option<Id> {
        self.removed
            .iter()
            .filter(|(_, c)| **c == Cause::Deleted)
            .map(|(id, _)| *id)
            .max()
    }

    /// Entries ever added up to and including `id`: the entries-read a
    /// group set at `id` has.
    pub fn read_up_to(&self, id: Id) -> u64 {
        self.ever.range(..=id).count() as u64
    }

    pub fn add(&mut self, id: Id) {
        assert!(
            id > self.last_gen,
            "model: {id} not above {}",
            self.last_gen
        );
        self.present.insert(id);
        self.ever.insert(id);
        self.last_gen = id;
        self.added += 1;
    }

    /// The entry left the stream.
    pub fn remove(&mut self, id: Id, cause: Cause) {
        if !self.present.remove(&id) {
            return;
        }
        self.removed.insert(id, cause);
        for g in self.groups.values_mut() {
            if id > g.ld {
                g.removed_unread.insert(id, cause);
            }
        }
    }

    /// A group set at `ld` from outside (create, SETID): a new epoch whose
    /// unread removals are those above `ld`.
    pub fn set_group(&mut self, name: &str, ld: Id, epoch: u64) {
        let removed_unread = self
            .removed
            .range((std::ops::Bound::Excluded(ld), std::ops::Bound::Unbounded))
            .map(|(id, c)| (*id, *c))
            .collect();
        let g = self.groups.entry(name.to_string()).or_default();
        g.ld = ld;
        g.epoch = epoch;
        g.removed_unread = removed_unread;
    }
}

/// Every stream of the server.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub streams: BTreeMap<String, StreamModel>,
    next_epoch: u64,
}

impl Model {
    pub fn new_epoch(&mut self) -> u64 {
        self.next_epoch += 1;
        self.next_epoch
    }
}
