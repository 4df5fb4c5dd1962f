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
//! The rooms: `run` (the scheduled and the extra run), `poll` (one poll,
//! batch after batch, and the `poll_kind` it is), `batch` sends a batch's round trips and gathers what
//! they read, `decode` decodes its first one, `quiet` (reads that stand for
//! quiet streams), `stream_entry` folds each stream into the snapshot,
//! `group_fold` each of its groups (its figures, heading and status);
//! `dead_letters` is the last step.

mod batch;
mod dead_letters;
mod decode;
mod group_fold;
mod poll;
mod poll_kind;
mod quiet;
mod run;
mod stream_entry;

pub use run::{run, run_some};

#[cfg(test)]
pub(super) use poll::walk_budget;
