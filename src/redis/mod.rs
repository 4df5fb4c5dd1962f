//! Everything that talks to Redis: the allowlisted commands, the client with
//! its connections, rate limit and routing, and the decoding of replies into
//! plain data. No other module sends a command or sees a `redis::Value`
//! outside a reply decoder; this module knows nothing of metric names.

mod client;
mod command;
mod error;
pub mod id;
mod paging;
pub mod reply;
mod slot;
mod tls;

pub use client::{
    ClientSetupError, ClientStats, NodeAddr, Reply, Sequence, StatsSnapshot, TargetClient,
};
pub use command::{CLIENT_NAME, Command, RangeEnd, RangeStart};
pub use error::{CommandError, ErrorKind, TargetError};
pub use id::StreamId;
pub use paging::{LatencyFloor, PageTuner};
pub use slot::key_slot;
