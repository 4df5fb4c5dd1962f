//! The parts of a snapshot and the one probe that writes each: the table
//! that keeps every field with a single writer.

use crate::vocab::ProbeKind;

/// A part of a [`TargetSnapshot`] that a probe fills. Each has one owner,
/// the only probe that writes it ([`Part::owner`]); the others only read
/// it. The poller's bookkeeping may drop entries of what vanished (a
/// target going down, streams no longer watched, groups gone), never write
/// them. The probes' tests check their sources against this table.
///
/// [`TargetSnapshot`]: super::target::TargetSnapshot
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// `server`: what INFO said.
    Server,
    /// `streams_watched`, `streams_dropped`: what discovery chose.
    Watched,
    /// `streams`: streams, their groups and their figures.
    Streams,
    /// `oldest_pending`: each group's smallest pending ID.
    OldestPending,
    /// `pending_heads`: poison and holders among groups' oldest entries.
    PendingHeads,
    /// `consumers`: each group's consumers.
    Consumers,
    /// `scans`: each group's PEL scan.
    Scans,
}

impl Part {
    /// Every part.
    pub const ALL: [Part; 7] = [
        Part::Server,
        Part::Watched,
        Part::Streams,
        Part::OldestPending,
        Part::PendingHeads,
        Part::Consumers,
        Part::Scans,
    ];

    /// The one probe that writes this part.
    pub fn owner(self) -> ProbeKind {
        match self {
            Part::Server => ProbeKind::Info,
            Part::Watched => ProbeKind::Discovery,
            Part::Streams => ProbeKind::Stream,
            Part::OldestPending | Part::PendingHeads => ProbeKind::PendingSummary,
            Part::Consumers => ProbeKind::Consumers,
            Part::Scans => ProbeKind::PendingScan,
        }
    }

    /// The fields of [`TargetSnapshot`] that make this part.
    ///
    /// [`TargetSnapshot`]: super::target::TargetSnapshot
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Part::Server => &["server"],
            Part::Watched => &["streams_watched", "streams_dropped"],
            Part::Streams => &["streams"],
            Part::OldestPending => &["oldest_pending"],
            Part::PendingHeads => &["pending_heads"],
            Part::Consumers => &["consumers"],
            Part::Scans => &["scans"],
        }
    }
}
