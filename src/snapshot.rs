//! The immutable picture of every target that `/metrics` renders.
//!
//! Pollers build a new [`TargetSnapshot`] after every probe run and publish it
//! in the [`SnapshotStore`]; readers take `Arc`s and never wait on Redis or on
//! a poller. The maps and the streams and groups in them are shared between
//! consecutive snapshots (`Arc`): publishing copies only the maps the last
//! probe changed, and a quiet stream keeps its allocation. What is not in the
//! latest snapshot is not rendered: a vanished stream vanishes.
//!
//! The rooms: `target` (the snapshot of one target: what INFO said, the
//! last run of each probe, the pruning of its shared maps), `part` (its
//! parts and their one writer each), `streams` (streams, groups,
//! consumers), `culprit` (who holds the entries that cannot progress),
//! `exporter` (state not about a target), `store` (the latest
//! snapshots) and `name` (the names they are keyed by).

mod culprit;
mod exporter;
mod name;
mod part;
mod store;
mod streams;
mod target;

pub use culprit::{
    CULPRITS_NAMED, Culprit, CulpritKind, HeadEntry, OrphanHolder, PendingHead, culprits,
    duration_words,
};
pub use exporter::{ExporterState, MultiTargetCounters};
pub use name::{GroupKey, Name};
pub use part::Part;
pub use store::{Owner, SnapshotStore};
pub use streams::{
    Consumers, DeadLetter, ExportedConsumer, GroupState, Groups, OldestPending, PelScan, ScanState,
    StreamState,
};
pub use target::{ProbeStatus, ServerInfo, TargetSnapshot, retain_keys};

#[cfg(test)]
mod tests;
