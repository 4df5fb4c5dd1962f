//! Where one section's families go, and what writing them dropped as
//! duplicates and shortened: counted per section, since sections are reused
//! apart.

use std::collections::BTreeMap;
use std::io::Write;

use crate::metrics::catalog::MetricDef;
use crate::metrics::text::{Family, Sink};

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
