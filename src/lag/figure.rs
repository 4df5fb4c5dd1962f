//! The lag of one group as the exporter exports it, and how it was
//! obtained: what tells Redis's count from the exporter's own.

use crate::vocab::StreamId;

/// How a lag figure was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LagMethod {
    /// Redis's `lag` field, or 0 for a group with nothing after it.
    Reported,
    /// An old server's `lag` minus the unread entries it still counts,
    /// proven by earlier polls, or a `lag` that could not be trusted,
    /// replaced by a count of the stream's entries.
    Rederived,
    /// The stream length, because the group is behind the first entry.
    TrimCorrected,
    /// Counted with XRANGE (fewer than `k` undelivered entries).
    Counted,
    /// Estimated by the fallback estimator, within the counters' bounds.
    Estimated,
    /// Nothing sound was available.
    Unknown,
}

/// The lag of one group.
#[derive(Clone, Debug, PartialEq)]
pub struct LagFigure {
    /// Undelivered entries; `None` when unknown.
    pub lag: Option<u64>,
    /// How `lag` was obtained.
    pub method: LagMethod,
    /// Entries removed before the group read them, while it is behind the
    /// first entry (`trimmed_undelivered`); `None` when unknowable.
    pub trimmed_undelivered: Option<u64>,
    /// Entries removed (trimmed or deleted) before the group read them, as
    /// Redis's counters show them now: entries-added − entries-read − lag,
    /// when all three are exact.
    pub unread_gone: Option<u64>,
    /// The oldest undelivered entry still in the stream, when known (for
    /// `lag_seconds`); `None` with `lag == Some(0)` means nothing is undelivered.
    pub first_undelivered: Option<StreamId>,
    /// The group's last-delivered-id is older than the first entry.
    pub behind_first_entry: bool,
    /// The group's last-delivered-id is beyond the last generated ID (SETID
    /// into the future: entries added below it will never be delivered).
    pub ahead_of_stream: bool,
}

impl LagFigure {
    /// True when `lag` is the exporter's own figure rather than Redis's
    /// count or a position that settles it.
    pub fn estimated(&self) -> bool {
        !matches!(
            self.method,
            LagMethod::Reported | LagMethod::Rederived | LagMethod::TrimCorrected
        )
    }

    /// True when `lag` is exact (counted, reported where right, or settled).
    pub fn exact(&self) -> bool {
        self.lag.is_some() && !matches!(self.method, LagMethod::Estimated | LagMethod::Unknown)
    }
}
