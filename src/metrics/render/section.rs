//! The sections of the exposition, in output order, and which families each
//! writes: the unit whose output is reused while its maps are unchanged.

use crate::metrics::catalog::{Custom, Source};

/// The parts of the exposition, in output order. Each reads one or two maps
/// of the target snapshots (the last reads only small per-target state and
/// the exporter's own), and those maps are shared between consecutive
/// snapshots until a probe replaces them: a section whose maps are the same
/// writes the same bytes, so its output can be reused (see
/// [`Renderer::inputs`]).
///
/// [`Renderer::inputs`]: super::Renderer::inputs
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Stream and group families from the stream poll.
    Streams,
    /// Oldest pending age: the pending summary's IDs, aged by the stream
    /// poll's clock.
    OldestPending,
    /// PEL scan results.
    PelScans,
    /// Consumer families.
    Consumers,
    /// Server info and the exporter's own families: small, always written.
    Targets,
}

impl Section {
    /// The section that writes the families of `source`.
    pub(super) fn of(source: Source) -> Section {
        match source {
            Source::Stream(_)
            | Source::Group(_)
            | Source::Custom(
                Custom::LostEntries
                | Custom::LastLoss
                | Custom::PossiblyLost
                | Custom::LossUnproven
                | Custom::Status,
            ) => Section::Streams,
            Source::Custom(Custom::OldestPendingAge) => Section::OldestPending,
            Source::Scan(_)
            | Source::Custom(
                Custom::Poison
                | Custom::Nacked
                | Custom::PendingByIdle
                | Custom::PendingByDeliveryCount,
            ) => Section::PelScans,
            Source::GroupConsumers(_)
            | Source::Consumer(_)
            | Source::Custom(Custom::ConsumerPending) => Section::Consumers,
            Source::Target(_)
            | Source::TargetHealth(_)
            | Source::Probe(_)
            | Source::Exporter(_)
            | Source::Process(_)
            | Source::Custom(
                Custom::TargetInfo
                | Custom::PageSizes
                | Custom::Commands
                | Custom::Errors
                | Custom::ItemsSkipped
                | Custom::TargetReady
                | Custom::Series
                | Custom::BuildInfo
                | Custom::LabelsShortened
                | Custom::ProbeRequests,
            ) => Section::Targets,
        }
    }

    /// Every section, in output order.
    pub const ALL: [Section; 5] = [
        Section::Streams,
        Section::OldestPending,
        Section::PelScans,
        Section::Consumers,
        Section::Targets,
    ];
}
