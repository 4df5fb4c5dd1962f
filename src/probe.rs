//! Probes: what to ask Redis on each schedule, and how the answers become
//! plain data in the target's state. One probe per file, each with a stable
//! [`ProbeKind`] name used in config, labels and logs.
//!
//! A probe reads what it needs from the [`TargetState`] under a short lock,
//! talks to Redis through the [`crate::backend::TargetClient`] without holding the lock, and
//! applies its results under the lock again. It never publishes; the poller
//! does that after every run. Per-item problems (a stream deleted mid-cycle,
//! NOPERM on one key) are counted and skipped; only a failure to reach the
//! target fails the run.
//!
//! This file only dispatches ([`run`]). The rooms: one file per probe;
//! `state` (what a target's poller keeps between runs, and the budget's log
//! line), `context` (what a probe runs with, how it fails, its per-item
//! problems), `groups` (what the per-group probes share), `memory` (what
//! each probe leaves in the state for its next run) and `status_log` (the
//! stream probe's log of status changes).

pub(crate) mod consumers;
mod context;
pub(crate) mod discovery;
mod groups;
pub(crate) mod info;
pub(crate) mod memory;
pub(crate) mod pending_scan;
pub(crate) mod pending_summary;
mod state;
mod status_log;
pub(crate) mod stream;

#[cfg(test)]
mod tests;

pub(crate) use context::ProbeError;
pub use context::{ProbeContext, Problems};
pub use groups::{GroupCost, GroupLine, IDLE_EVERY, group_lines, idle_every};
pub use state::{BudgetNotice, GroupMemory, Parked, TargetState};

pub use crate::vocab::ProbeKind;

/// Runs one probe.
///
/// # Errors
/// When the target cannot be reached or replies cannot be decoded.
pub(crate) async fn run(kind: ProbeKind, ctx: &ProbeContext) -> Result<(), ProbeError> {
    match kind {
        ProbeKind::Discovery => discovery::run(ctx).await,
        ProbeKind::Info => info::run(ctx).await,
        ProbeKind::Stream => stream::run(ctx).await,
        ProbeKind::PendingSummary => pending_summary::run(ctx).await,
        ProbeKind::Consumers => consumers::run(ctx).await,
        ProbeKind::PendingScan => pending_scan::run(ctx).await,
    }
}
