//! The sections of the exposition, the unit whose output is reused while
//! its maps are unchanged: which families each writes, in output order,
//! what its output depends on (the maps it reads, compared by identity:
//! equal inputs, equal bytes), and where its families go and what writing
//! them dropped as duplicates and shortened (counted per section, since
//! sections are reused apart).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use crate::metrics::catalog::{Custom, MetricDef, Source};
use crate::metrics::text::{Family, Sink};
use crate::snapshot::{Consumers, GroupKey, Name, OldestPending, ScanState, StreamState};

/// The parts of the exposition, in output order. Each reads one or two maps
/// of the target snapshots (the last reads only small per-target state and
/// the exporter's own), and those maps are shared between consecutive
/// snapshots until a probe replaces them: a section whose maps are the same
/// writes the same bytes, so its output can be reused (see
/// [`Renderer::inputs`]).
///
/// [`Renderer::inputs`]: super::renderer::Renderer::inputs
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
                | Custom::Reconnects
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

/// One map a section reads, held (so it cannot be freed and its address
/// reused) and compared by identity.
#[derive(Clone, Debug)]
pub(super) enum Input {
    Streams(Arc<BTreeMap<Name, Arc<StreamState>>>),
    OldestPending(Arc<BTreeMap<GroupKey, OldestPending>>),
    PelScans(Arc<BTreeMap<GroupKey, ScanState>>),
    HeadPoison(Arc<BTreeMap<GroupKey, u64>>),
    Nacked(Arc<BTreeMap<GroupKey, u64>>),
    Consumers(Arc<BTreeMap<GroupKey, Arc<Consumers>>>),
}

impl PartialEq for Input {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Input::Streams(a), Input::Streams(b)) => Arc::ptr_eq(a, b),
            (Input::OldestPending(a), Input::OldestPending(b)) => Arc::ptr_eq(a, b),
            (Input::PelScans(a), Input::PelScans(b)) => Arc::ptr_eq(a, b),
            (Input::HeadPoison(a), Input::HeadPoison(b)) | (Input::Nacked(a), Input::Nacked(b)) => {
                Arc::ptr_eq(a, b)
            }
            (Input::Consumers(a), Input::Consumers(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Everything a section's output depends on: equal inputs, equal bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct SectionInputs {
    pub(super) dedupe: bool,
    pub(super) limit: usize,
    pub(super) maps: Vec<(Arc<str>, Input)>,
}

/// Where one section's families go, the duplicates they dropped and the
/// label values they shortened.
pub(super) struct Out<W: Write> {
    pub(super) sink: Sink<W>,
    pub(super) dedupe: bool,
    pub(super) limit: usize,
    pub(super) counts: SectionCounts,
}

/// What writing a section dropped, shortened and cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SectionCounts {
    /// Series dropped as duplicates.
    pub duplicates: u64,
    /// Label values shortened to `metrics.max_label_value_bytes`.
    pub shortened: u64,
    /// Series written per target (by its `target` label value).
    pub series: BTreeMap<Vec<u8>, u64>,
}

impl SectionCounts {
    /// Adds what another section counted.
    pub fn add(&mut self, other: &SectionCounts) {
        self.duplicates += other.duplicates;
        self.shortened += other.shortened;
        for (target, n) in &other.series {
            *self.series.entry(target.clone()).or_default() += n;
        }
    }
}

impl<W: Write> Out<W> {
    pub(super) fn family(
        &mut self,
        def: &'static MetricDef,
        fill: impl FnOnce(&mut Family<'_, W>),
    ) {
        let mut f = Family::new(&mut self.sink, def, self.dedupe, self.limit);
        fill(&mut f);
        self.counts.duplicates += f.duplicates;
        self.counts.shortened += f.shortened;
        for (target, n) in f.series.drain(..) {
            *self.counts.series.entry(target).or_default() += n;
        }
    }
}
