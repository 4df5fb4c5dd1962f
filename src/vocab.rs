//! The ground floor: the project's vocabulary, plain data that every other
//! module may use and that imports nothing of the project. Stream IDs, the
//! decoded replies of the stream commands, the probes' names, the kinds of
//! failure and of skipped items, and the client's counters. The Redis client decodes into these
//! types; the arithmetic (lag, losses, trends, status), the snapshot and the
//! metrics read them without knowing the client.

mod error_kind;
mod id;
mod probe_kind;
mod replies;
mod skip_kind;
mod stats;

pub use error_kind::ErrorKind;
pub use id::StreamId;
pub use probe_kind::ProbeKind;
pub use replies::{
    ConsumerInfo, GroupInfo, GroupNacks, Idempotence, PendingEntry, PendingSummary, ROWS_KEPT,
    StreamInfo,
};
pub use skip_kind::SkipKind;
pub use stats::{KeyspaceEventsStats, StatsSnapshot};
