//! The ground floor: the project's vocabulary, plain data that every other
//! module may use and that imports nothing of the project. Stream IDs, the
//! decoded replies of the stream commands, the probes' names, the kinds of
//! failure and of skipped items, and the client's counters. The Redis client decodes into these
//! types; the arithmetic (lag, losses, trends, status), the snapshot and the
//! metrics read them without knowing the client.
//!
//! The rooms: `id` (stream IDs), `replies` (the decoded replies) and `kinds`
//! (the probes, the kinds of failure and of skipped items, and the client's
//! counters kept by them).

mod id;
mod kinds;
mod replies;

pub use id::StreamId;
pub use kinds::{
    ClientTrackingStats, ErrorKind, ExtraPollStats, KeyspaceEventsStats, ProbeKind,
    ReconnectReason, SkipKind, StatsSnapshot,
};
pub use replies::{
    ConsumerInfo, GroupInfo, GroupNacks, Idempotence, PendingEntry, PendingSummary, ROWS_KEPT,
    StreamInfo,
};
