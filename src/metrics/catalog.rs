//! The metric catalog: every metric name, type, HELP text and label set the
//! exporter can emit, and where each family's values come from, in one place.
//!
//! Nothing else in the crate spells a metric name. Rendering walks
//! [`METRICS`]: a family whose [`Source`] reads one value per stream, group,
//! consumer, target or probe is written from its entry alone, so adding such
//! a metric touches this catalog and the probe that fills the snapshot. The
//! few families with labels of their own ([`Custom`]) have their code in the
//! renderer. Debug builds and tests check every written sample's labels
//! against its entry, and the tests check the dashboards and alert rules
//! against [`METRICS`], so a renamed metric cannot silently break them.
//!
//! The rooms: `def` (what an entry is, and the macros the family files are
//! written in) and the family files `streams`, `pending`, `consumers` and
//! `exporter`, whose lists this file joins into [`METRICS`].

// `def` first: its macros are what the family files are written in.
#[macro_use]
mod def;

mod consumers;
mod exporter;
mod pending;
mod streams;

pub use consumers::*;
pub use def::{Custom, Lean, MetricDef, MetricType, Servers, Source};
pub use exporter::*;
pub use pending::*;
pub use streams::*;

/// Every metric the exporter can emit, in the order families are rendered:
/// each family file's entries, in the order they are written.
pub const METRICS: &[MetricDef] = &ALL;

const FAMILIES: &[&[MetricDef]] = &[
    streams::STREAM_FAMILIES,
    pending::PENDING_FAMILIES,
    consumers::CONSUMER_FAMILIES,
    exporter::EXPORTER_FAMILIES,
];

const ALL: [MetricDef; count(FAMILIES)] = concat(FAMILIES);

const fn count(families: &[&[MetricDef]]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < families.len() {
        n += families[i].len();
        i += 1;
    }
    n
}

/// The families' entries in one array (the const evaluator's loops: an
/// iterator cannot run at compile time).
const fn concat<const N: usize>(families: &[&[MetricDef]]) -> [MetricDef; N] {
    let mut all = [STREAM_LENGTH; N];
    let mut n = 0;
    let mut i = 0;
    while i < families.len() {
        let mut j = 0;
        while j < families[i].len() {
            all[n] = families[i][j];
            n += 1;
            j += 1;
        }
        i += 1;
    }
    all
}

/// Looks a metric up by its full name.
pub fn find(name: &str) -> Option<&'static MetricDef> {
    METRICS.iter().find(|m| m.name == name)
}
