//! The latest snapshot of every target, published by the pollers and read
//! by whoever renders; which poller may publish which target.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::exporter::ExporterState;
use super::target::TargetSnapshot;

/// The snapshots, and which poller owns each target name.
#[derive(Debug, Default)]
struct Targets {
    snapshots: BTreeMap<Arc<str>, Arc<TargetSnapshot>>,
    owners: BTreeMap<Arc<str>, u64>,
}

/// A poller's right to publish one target's snapshots. After a reload
/// replaces or removes the poller, its late publications are ignored, so a
/// stopped poller can never bring back a removed or outdated target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner(u64);

impl Owner {
    /// The token as a number (never 0).
    pub fn id(self) -> u64 {
        self.0
    }

    /// A token from [`Self::id`].
    pub fn from_id(id: u64) -> Owner {
        Owner(id)
    }
}

/// The latest snapshot of every target.
#[derive(Debug, Default)]
pub struct SnapshotStore {
    targets: RwLock<Targets>,
    generation: AtomicU64,
    next_owner: AtomicU64,
    /// Wakes whoever renders when anything changes.
    changed: tokio::sync::Notify,
    /// Reload counters.
    pub exporter: ExporterState,
}

impl SnapshotStore {
    /// Makes a new poller the owner of `name`'s snapshots.
    pub fn register(&self, name: &str) -> Owner {
        let owner = self.next_owner.fetch_add(1, Ordering::Relaxed) + 1;
        let mut targets = self.targets.write().unwrap_or_else(|p| p.into_inner());
        targets.owners.insert(name.into(), owner);
        Owner(owner)
    }

    /// Replaces the snapshot of one target, if `owner` still owns it.
    pub fn publish(&self, owner: Owner, snapshot: Arc<TargetSnapshot>) {
        let mut targets = self.targets.write().unwrap_or_else(|p| p.into_inner());
        if targets.owners.get(&snapshot.name) != Some(&owner.0) {
            return;
        }
        targets.snapshots.insert(snapshot.name.clone(), snapshot);
        drop(targets);
        self.bump();
    }

    /// Forgets targets not in `names` (after a reload).
    pub fn retain(&self, names: &[&str]) {
        let mut targets = self.targets.write().unwrap_or_else(|p| p.into_inner());
        targets.snapshots.retain(|name, _| names.contains(&&**name));
        targets.owners.retain(|name, _| names.contains(&&**name));
        drop(targets);
        self.bump();
    }

    /// Marks exporter-level state as changed.
    pub fn touch(&self) {
        self.bump();
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Release);
        self.changed.notify_one();
    }

    /// Completes after the next change (or at once if one happened since the
    /// last call).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Changes whenever anything is published.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The latest snapshots, sorted by target name.
    pub fn targets(&self) -> Vec<Arc<TargetSnapshot>> {
        self.targets
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .snapshots
            .values()
            .cloned()
            .collect()
    }
}
