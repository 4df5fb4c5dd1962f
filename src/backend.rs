//! Everything that talks to Redis: the allowlisted commands, the client with
//! its connections, rate limit and routing, and the decoding of replies into
//! plain data. No other module sends a command or sees a `redis::Value`
//! outside a reply decoder; this module knows nothing of metric names.
//!
//! # Layout
//! - `client`: [`TargetClient`] (pipelines, transactions, routing) in one
//!   file, and a room each for what it is made of: connections (the one
//!   way every connection is opened), replies read within bounds, the
//!   topology, the sentinels' primary, redirections, counters; keyspace
//!   events above it.
//! - `ratelimit`: the token buckets every command passes, served by
//!   priority ([`PRIORITY`]); `paging`: page sizes that follow the server.
//! - `command`: the allowlist; [`reply`]: replies decoded into plain data;
//!   `slot`: cluster key slots and the slot map; `tls`: `rediss://`;
//!   `error`: what failed, typed. The types replies decode into live in
//!   [`crate::vocab`].
//!
//! (Named `backend` so that it does not shadow the `redis` crate.)

mod client;
mod command;
mod error;
mod paging;
mod ratelimit;
pub mod reply;
mod slot;
mod tls;

// The public surface is what the binary and the tests use; the rest is the
// crate's own.
/// The rows of a list without a `COUNT` that a reply keeps (see
/// `client::bounded`).
pub use crate::vocab::ROWS_KEPT;
pub use client::{ClientSetupError, KEEPALIVE_IDLE, TargetClient};
pub(crate) use client::{KeyEvent, Listen, NodeAddr, Notice, RemovalLog, Reply, Subscription};
pub use command::CLIENT_NAME;
pub(crate) use command::{Command, RangeEnd, RangeStart};
pub(crate) use error::{CommandError, TargetError};
pub(crate) use ratelimit::PRIORITY;
