//! The bounded kinds the exporter names in labels and configuration keys,
//! each with its one list and its label: the probes (the `probe` label, and
//! the keys of `[schedule]`, `[limits] priority` and `min_share`), the kinds
//! of failure a command met (the client classifies server errors into them),
//! why a pooled connection was opened again, and the kinds of item a reply
//! left out because its name was longer than the connection keeps; and what
//! a target's client counted by them (commands, errors, reconnects, skipped
//! items, waits, page sizes, keyspace events), copied into every snapshot.

use std::collections::BTreeMap;

/// The probes, by stable name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProbeKind {
    /// Finds the streams to watch.
    Discovery,
    /// INFO server and memory.
    Info,
    /// XINFO STREAM + GROUPS, lag, lag seconds, dead letters, status.
    Stream,
    /// XPENDING summary: oldest pending age.
    PendingSummary,
    /// XINFO CONSUMERS: per-consumer figures and orphaned entries.
    Consumers,
    /// Paged XPENDING over whole PELs.
    PendingScan,
}

impl ProbeKind {
    /// Every probe, in the order of a first collection.
    pub const ALL: [ProbeKind; 6] = [
        ProbeKind::Discovery,
        ProbeKind::Info,
        ProbeKind::Stream,
        ProbeKind::PendingSummary,
        ProbeKind::Consumers,
        ProbeKind::PendingScan,
    ];

    /// The `probe` label and config key.
    pub fn label(self) -> &'static str {
        match self {
            ProbeKind::Discovery => "discovery",
            ProbeKind::Info => "info",
            ProbeKind::Stream => "stream",
            ProbeKind::PendingSummary => "pending_summary",
            ProbeKind::Consumers => "consumers",
            ProbeKind::PendingScan => "pending_scan",
        }
    }

    /// True for the probes that work group by group and need the stream
    /// poll's list of groups first.
    pub fn per_group(self) -> bool {
        matches!(
            self,
            ProbeKind::PendingSummary | ProbeKind::Consumers | ProbeKind::PendingScan
        )
    }
}

/// What kind of failure, as the bounded `kind` label of the exporter's
/// error counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    /// A pipeline did not complete within `command_timeout`.
    Timeout,
    /// Connecting failed or the connection broke.
    Connection,
    /// Authentication was refused.
    Auth,
    /// The ACL user may not run the command or touch the key.
    NoPerm,
    /// The key is not a stream.
    WrongType,
    /// The group (or the stream) vanished.
    NoGroup,
    /// The stream vanished.
    NoSuchKey,
    /// The server is loading its dataset.
    Loading,
    /// The server is busy running a script.
    Busy,
    /// A MOVED redirection (stale slot map), redirections that did not
    /// settle, or an unreadable cluster topology.
    Cluster,
    /// A reply had an unexpected shape.
    Protocol,
    /// Anything else the server refused.
    Other,
}

impl ErrorKind {
    /// Every kind, so counters can start at 0 for each.
    pub const ALL: [ErrorKind; 12] = [
        ErrorKind::Timeout,
        ErrorKind::Connection,
        ErrorKind::Auth,
        ErrorKind::NoPerm,
        ErrorKind::WrongType,
        ErrorKind::NoGroup,
        ErrorKind::NoSuchKey,
        ErrorKind::Loading,
        ErrorKind::Busy,
        ErrorKind::Cluster,
        ErrorKind::Protocol,
        ErrorKind::Other,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connection => "connection",
            ErrorKind::Auth => "auth",
            ErrorKind::NoPerm => "noperm",
            ErrorKind::WrongType => "wrongtype",
            ErrorKind::NoGroup => "nogroup",
            ErrorKind::NoSuchKey => "nosuchkey",
            ErrorKind::Loading => "loading",
            ErrorKind::Busy => "busy",
            ErrorKind::Cluster => "cluster",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Other => "other",
        }
    }

    /// True for a key or group that no longer exists: an event (a stream
    /// deleted, a group destroyed between two polls), not an error of the
    /// exporter or the server, so it is not counted in `errors_total`.
    pub fn is_vanished(self) -> bool {
        matches!(self, ErrorKind::NoSuchKey | ErrorKind::NoGroup)
    }
}

/// What kind of item was left out, as the bounded `kind` label of the
/// exporter's skipped-items counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipKind {
    /// A consumer group of `XINFO GROUPS` (the stream's other groups stay).
    Group,
    /// A consumer of `XINFO CONSUMERS` (the group's other consumers stay).
    Consumer,
    /// A key of discovery's `SCAN`: not watched.
    Key,
    /// A keyspace-event message whose key was left out: it asks for no
    /// poll.
    Event,
}

impl SkipKind {
    /// Every kind, so counters can start at 0 for each.
    pub const ALL: [SkipKind; 4] = [
        SkipKind::Group,
        SkipKind::Consumer,
        SkipKind::Key,
        SkipKind::Event,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            SkipKind::Group => "group",
            SkipKind::Consumer => "consumer",
            SkipKind::Key => "key",
            SkipKind::Event => "event",
        }
    }
}

/// Why a pooled connection to a node was dropped, as the bounded `reason`
/// label of the exporter's reconnect counter: counted when the connection
/// that replaces it opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReconnectReason {
    /// The server or something between closed it (end of stream, reset,
    /// broken pipe): an idle `timeout`, a proxy's or load balancer's idle
    /// limit, `CLIENT KILL`, a restart.
    Closed,
    /// It did not answer within `command_timeout`.
    Timeout,
    /// A reply broke the protocol or did not decode: no later reply on it
    /// could be trusted.
    Protocol,
}

impl ReconnectReason {
    /// Every reason, so counters can start at 0 for each.
    pub const ALL: [ReconnectReason; 3] = [
        ReconnectReason::Closed,
        ReconnectReason::Timeout,
        ReconnectReason::Protocol,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            ReconnectReason::Closed => "closed",
            ReconnectReason::Timeout => "timeout",
            ReconnectReason::Protocol => "protocol",
        }
    }
}

/// A copy of the client's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatsSnapshot {
    /// Commands sent, by label.
    pub commands: BTreeMap<&'static str, u64>,
    /// Errors, by kind label.
    pub errors: BTreeMap<&'static str, u64>,
    /// Pooled connections opened again after one was dropped, by the
    /// reason it was dropped ([`ReconnectReason`]'s label).
    pub reconnects: BTreeMap<&'static str, u64>,
    /// Items replies left out (their names too long to keep), by kind
    /// label.
    pub skipped: BTreeMap<&'static str, u64>,
    /// Seconds spent waiting on rate limits.
    pub rate_limited_seconds: f64,
    /// PEL entries read by the scan.
    pub pending_scanned: u64,
    /// Current page sizes, by command label (`scan`, `xpending_range`).
    pub page_sizes: BTreeMap<&'static str, u32>,
    /// The keyspace-event subscription; `None` while there is none
    /// (`keyspace_events = "off"`, or before it starts).
    pub keyspace_events: Option<KeyspaceEventsStats>,
    /// Client tracking; `None` when `client_tracking = "off"`.
    pub client_tracking: Option<ClientTrackingStats>,
    /// The extra stream polls events and invalidations asked for; `None`
    /// when neither keyspace events nor client tracking is on.
    pub extra_polls: Option<ExtraPollStats>,
}

/// What the keyspace-event subscription of a target counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyspaceEventsStats {
    /// Keyevent messages received.
    pub received: u64,
    /// Keyevent messages dropped: received while the handler's queue was
    /// full.
    pub dropped: u64,
    /// Every node's subscription is up and answering.
    pub active: bool,
}

/// What client tracking of a target counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientTrackingStats {
    /// Every node's poll connection tracks, towards a subscriber that is
    /// subscribed.
    pub active: bool,
    /// Invalidations received (one per key).
    pub invalidations: u64,
    /// Invalidations dropped: received while the handler's queue was
    /// full (every stream is read again).
    pub dropped: u64,
}

/// The extra stream polls of a target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtraPollStats {
    /// Extra stream polls run.
    pub run: u64,
    /// Extra stream polls left to the schedule: asked for while the extra
    /// polls' share of the command budget was spent.
    pub skipped: u64,
}
