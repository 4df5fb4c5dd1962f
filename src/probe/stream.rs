//! The stream probe, every 15 s by default: `TIME`, then `XINFO STREAM` and
//! `XINFO GROUPS` for each watched stream, pipelined per batch; then, only for
//! groups whose lag or lag age does not follow from XINFO, one bounded
//! `XRANGE`; only for lags that must be estimated, one bounded `XREVRANGE`
//! of the last entries and a few `XREVRANGE … COUNT 1` of single
//! milliseconds (see [`crate::lag`]); then `XINFO STREAM` of configured
//! dead-letter streams. It computes lag, lag seconds, trimmed-undelivered
//! entries and the group status, and rebuilds the stream part of the
//! snapshot, keeping what the other probes contributed to each group.
//!
//! The rooms, top down: `run` (the scheduled and the extra run), `poll`
//! (one poll: node by node, batch after batch, the round trips and then the
//! fold of each stream), `allotment` (the groups the poll may keep), `quiet`
//! (reads that stand for quiet streams), `batch` (a batch's round trips,
//! and what they learnt of each group), `decode` (their replies, decoded),
//! `stream_entry` (each stream folded into the snapshot), `group_fold`
//! (each of its groups: lag, ledger, outlook, status; the kind of poll it
//! is) and `dead_letters`, the last step.

mod allotment;
mod batch;
mod dead_letters;
mod decode;
mod group_fold;
mod poll;
mod quiet;
mod run;
mod stream_entry;

pub use run::{run, run_some};

#[cfg(test)]
pub(super) use poll::walk_budget;
