//! Which kind of poll a stream poll is: scheduled, or extra (asked for by
//! keyspace events); the rest of the probe folds the two differently.

/// Whether a poll is the probe's scheduled one or an extra poll of a few
/// streams that keyspace events asked for. Extra polls feed the loss ledgers
/// and the figures like any poll, but add no sample to the status window or
/// the trend: those count scheduled polls, and extra samples would shorten
/// the time the window covers (a burst of events must not turn a few seconds
/// of a stuck group into `stopped`). Their status is judged against the
/// window as the scheduled polls left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PollKind {
    /// Every watched stream, on the probe's schedule.
    Scheduled,
    /// The streams events named, merged into the snapshot.
    Extra,
}
