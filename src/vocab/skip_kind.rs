//! What kind of item a reply left out because its name was longer than
//! the connection keeps, as the bounded `kind` label of the skipped-items
//! counter.

/// What kind of item was left out, as the bounded `kind` label of
/// `redis_streams_exporter_items_skipped_total`.
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
