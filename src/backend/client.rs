//! [`TargetClient`]: the connections to one target's servers, the rate limit
//! every command passes, per-command timeouts, cluster routing and sentinel
//! resolution.
//!
//! Probes hand it batches of [`Command`]s for a node and get one reply per
//! command back; it splits batches into pipelines no larger than the rate
//! limit's burst (nor than [`PIPELINE_ITEMS`] entries or rows of replies),
//! waits for tokens, follows `MOVED`/`ASK` redirections, checks that each
//! reply can answer its command, leaves out (and counts) the items whose
//! names were too long to keep, and drops a connection after a timeout, an
//! I/O or protocol error or a reply that did not decode, so the next call
//! starts afresh: a reply left over or missing cannot shift the answers of
//! later round trips. It never retries a failed round trip on its own: the
//! probe's schedule is the retry, which keeps the load on a struggling
//! server flat.
//!
//! The client is built in [`target_client`]; each concern has its own
//! file: [`pipeline`] (batches cut into pipelines), [`transaction`] (reads of
//! one moment), [`round_trip`] (one pipeline to one node), [`sequence`]
//! (commands that each need the previous reply), [`connection`] (connect,
//! auth, TLS, timeouts), [`bounded`] (replies read within bounds, entries as
//! their IDs), [`topology`] (which node serves what: cluster slots and
//! routing), [`sentinel`] (the sentinels' current primary), [`redirect`]
//! (`MOVED`/`ASK`), [`stats`] (what the client counted), `subscriber`
//! (keyspace events) and [`aliases`] (the names its
//! signatures share).
//!
//! [`Command`]: super::command::Command
//! [`PIPELINE_ITEMS`]: pipeline::PIPELINE_ITEMS

mod aliases;
mod bounded;
mod connection;
mod pipeline;
mod redirect;
mod round_trip;
mod sentinel;
mod sequence;
mod stats;
mod subscriber;
mod target_client;
mod topology;
mod transaction;

pub(crate) use self::aliases::{NodeAddr, Reply};
pub(crate) use self::stats::ClientStats;
pub(crate) use self::subscriber::KeyEvent;
pub use self::target_client::ClientSetupError;
pub use self::target_client::TargetClient;

#[cfg(test)]
mod tests;
