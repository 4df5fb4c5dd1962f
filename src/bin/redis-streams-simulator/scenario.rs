//! The scenarios the simulator knows: their names, the streams they work on
//! and which function drives each (`scenarios/`, a file per family).

use std::io::Write;

use clap::ValueEnum;

/// A failure mode to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub(crate) enum Scenario {
    /// Producer 5/s, two consumers that keep up: nothing should alert.
    Healthy,
    /// A consumer dies holding 20 entries; another keeps consuming.
    CrashedConsumer,
    /// One entry fails on every delivery and is reclaimed forever.
    Poison,
    /// Failing entries go to a dead-letter stream after 3 deliveries.
    DeadLetter,
    /// MAXLEN 50 at 10/s: unacknowledged entries become ghosts, a group without consumer loses entries.
    Trim,
    /// The consumer XDELs entries instead of acknowledging them.
    XdelGhosts,
    /// A steady backlog at 90% of the retained window of a MAXLEN 100 stream.
    TrimWindow,
    /// Outage overtaken by trimming, then a restart 10 entries behind with a nil lag (XGROUP SETID).
    Recovered,
    /// Production at 6/s, consumption at 3/s.
    Outpace,
    /// As outpace, with an undelivered entry deleted (XDEL) every 5 s: Redis reports no lag.
    OutpaceXdel,
    /// Consumers stop after 5 s while production goes on.
    Stopped,
    /// The consumer reads and never acknowledges what it read.
    NeverAcks,
    /// A trim takes 40 unread entries; the group catches up one poll later.
    TrimCatchup,
    /// 3 entries the group has not read yet are deleted (XDEL), once.
    DeleteUnread,
    /// MAXLEN trimming gains on a slow group, which speeds up before it loses entries.
    TrimOvertake,
    /// A group set back 50 entries (XGROUP SETID), and one set an hour ahead of the stream.
    Rewind,
    /// --streams N streams, with --groups G groups each that keep up.
    ManyStreams,
    /// A consumer that keeps --pel-entries entries in flight.
    BigPel,
    /// A queue with pending entries (and, with --set-eviction-policy, an allkeys-lru maxmemory).
    Evictable,
    /// A healthy batch consumer that drains the stream every --batch-every.
    Batch,
    /// A stream nothing is produced to, its consumer waiting: nothing should alert.
    Idle,
    /// A consumer that reads with NOACK and keeps up (nothing is ever pending): nothing should alert.
    NoackReader,
    /// Every scenario from healthy to rewind, and the quiet ones: batch, idle, noack-reader.
    All,
}

impl Scenario {
    /// The scenarios `all` stands for: every fault on one Redis, and the
    /// groups that must raise nothing (healthy, batch, idle, noack-reader).
    pub(crate) const ALL_SINGLE_REDIS: [Scenario; 19] = [
        Scenario::Healthy,
        Scenario::CrashedConsumer,
        Scenario::Poison,
        Scenario::DeadLetter,
        Scenario::Trim,
        Scenario::XdelGhosts,
        Scenario::TrimWindow,
        Scenario::Recovered,
        Scenario::Outpace,
        Scenario::OutpaceXdel,
        Scenario::Stopped,
        Scenario::NeverAcks,
        Scenario::TrimCatchup,
        Scenario::DeleteUnread,
        Scenario::TrimOvertake,
        Scenario::Rewind,
        Scenario::Batch,
        Scenario::Idle,
        Scenario::NoackReader,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Scenario::Healthy => "healthy",
            Scenario::CrashedConsumer => "crashed-consumer",
            Scenario::Poison => "poison",
            Scenario::DeadLetter => "dead-letter",
            Scenario::Trim => "trim",
            Scenario::XdelGhosts => "xdel-ghosts",
            Scenario::TrimWindow => "trim-window",
            Scenario::Recovered => "recovered",
            Scenario::Outpace => "outpace",
            Scenario::OutpaceXdel => "outpace-xdel",
            Scenario::Stopped => "stopped",
            Scenario::NeverAcks => "never-acks",
            Scenario::TrimCatchup => "trim-catchup",
            Scenario::DeleteUnread => "delete-unread",
            Scenario::TrimOvertake => "trim-overtake",
            Scenario::Rewind => "rewind",
            Scenario::ManyStreams => "many-streams",
            Scenario::BigPel => "big-pel",
            Scenario::Evictable => "evictable",
            Scenario::Batch => "batch",
            Scenario::Idle => "idle",
            Scenario::NoackReader => "noack-reader",
            Scenario::All => "all",
        }
    }

    /// The stream the scenario works on (or the key prefix of many-streams).
    pub(crate) fn stream(self, prefix: &str) -> String {
        let suffix = match self {
            Scenario::CrashedConsumer => "crashed",
            Scenario::DeadLetter => "deadletter",
            Scenario::XdelGhosts => "xdel",
            Scenario::TrimWindow => "trimwindow",
            Scenario::OutpaceXdel => "outpacexdel",
            Scenario::TrimCatchup => "trimcatchup",
            Scenario::DeleteUnread => "deleteunread",
            Scenario::TrimOvertake => "trimovertake",
            Scenario::NeverAcks => "neveracks",
            Scenario::NoackReader => "noackreader",
            Scenario::ManyStreams => "",
            Scenario::BigPel => "big",
            Scenario::Evictable => "orders",
            other => other.name(),
        };
        format!("{prefix}{suffix}")
    }

    /// Every key the scenario creates, for `--cleanup`: its stream, the
    /// dead-letter stream it names, or many-streams' `streams` streams.
    pub(crate) fn keys(self, prefix: &str, streams: usize) -> Vec<String> {
        let stream = self.stream(prefix);
        match self {
            Scenario::ManyStreams => (0..streams).map(|i| format!("{stream}{i}")).collect(),
            Scenario::Healthy | Scenario::DeadLetter => vec![format!("{stream}:dlq"), stream],
            _ => vec![stream],
        }
    }
}

/// Prints a progress line; a closed stdout (`| head`) is not an error worth dying for.
pub(crate) fn say(scenario: Scenario, message: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stdout().lock(), "[{}] {message}", scenario.name());
}
