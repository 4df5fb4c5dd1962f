//! What a reply is read as: its [`Plan`], chosen by [`super::sent`] from
//! the command it answers and followed by [`super::replies`].

/// What a reply is read as, chosen from the command it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    /// How its elements are read.
    pub(super) shape: Shape,
    /// The command, for messages (`XRANGE`, `XINFO STREAM`, ...).
    pub(super) command: String,
    /// The most entries or rows the reply may hold (the command's `COUNT`).
    pub(super) limit: Option<u64>,
    /// For `EXEC`: the plans of the commands queued since `MULTI`, one per
    /// element of its array.
    pub(super) queued: Vec<Plan>,
}

/// The shapes of replies the wrapper reads differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// Passed on (long strings aside).
    Plain,
    /// `XRANGE`/`XREVRANGE`: an array of entries, each handed on as its ID.
    Entries,
    /// `XINFO STREAM`: a field list whose `first-entry` and `last-entry`
    /// are handed on as their IDs.
    StreamInfo,
    /// `XINFO STREAM … FULL`: a field list whose `entries` are handed on
    /// as a null and whose `groups` (cut at [`super::ROWS_KEPT`]) are field
    /// lists with their `pending` and `consumers` handed on as nulls: only
    /// the groups' own figures are read, whatever the PELs and consumers
    /// hold.
    StreamFull,
    /// The extended `XPENDING`: an array of rows, at most `COUNT`, whose
    /// consumers are handed on as nulls (an empty name, released by
    /// `XNACK`, as it is).
    Rows,
    /// The summary `XPENDING`: its consumers' names alike, and its holders
    /// cut at [`super::ROWS_KEPT`].
    Summary,
    /// `XINFO GROUPS`, `XINFO CONSUMERS`: an array of rows cut at
    /// [`super::ROWS_KEPT`].
    Cut,
    /// `EXEC`: an array whose elements are the replies of the queued
    /// commands, each read by its own plan.
    Exec,
}

impl Plan {
    /// A reply passed on (long strings aside), answering `command`.
    pub(super) fn plain(command: String) -> Plan {
        Plan {
            shape: Shape::Plain,
            command,
            limit: None,
            queued: Vec::new(),
        }
    }
}
