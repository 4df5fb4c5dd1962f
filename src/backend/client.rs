//! [`TargetClient`]: the connections to one target's servers, the rate limit
//! every command passes, per-command timeouts, cluster routing and sentinel
//! resolution.
//!
//! Probes hand it batches of [`Command`]s for a node and get one reply per
//! command back; it splits batches into pipelines no larger than the rate
//! limit's burst (nor than `PIPELINE_ITEMS` entries or rows of replies),
//! waits for tokens, follows `MOVED`/`ASK` redirections, checks that each
//! reply can answer its command, leaves out (and counts) the items whose
//! names were too long to keep, and drops a connection after a timeout, an
//! I/O or protocol error or a reply that did not decode, so the next call
//! starts afresh: a reply left over or missing cannot shift the answers of
//! later round trips. It never retries a failed round trip on its own: the
//! probe's schedule is the retry, which keeps the load on a struggling
//! server flat.
//!
//! The client, its methods read top to bottom, is [`target_client`]; the
//! parts it is made of have a room each, below it: [`connection`]
//! (connections to nodes: addresses, streams, settings, the one way every
//! connection is opened, the pooled connection and its slot), [`bounded`] (replies read within bounds, entries as their
//! IDs), [`topology`] (which node serves what: cluster slots and routing),
//! [`sentinel`] (the sentinels' current primary), [`redirect`] (`MOVED` and
//! `ASK` read) and [`stats`] (what the client counted). Above it,
//! [`subscriber`]: keyspace events, on connections of their own, and
//! [`removals`]: the removals they announced, for the stream polls.
//!
//! [`Command`]: super::command::Command

mod bounded;
mod connection;
mod redirect;
mod removals;
mod sentinel;
mod stats;
mod subscriber;
mod target_client;
mod topology;
mod tracking;

pub(crate) use self::connection::NodeAddr;
pub(crate) use self::removals::RemovalLog;
pub(crate) use self::subscriber::{KeyEvent, Listen, Notice, Subscription};
pub(crate) use self::target_client::Reply;
pub use self::target_client::{ClientSetupError, KEEPALIVE_IDLE, TargetClient};

#[cfg(test)]
mod tests;
