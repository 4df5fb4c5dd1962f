//! [`METRICS`]: every family file's entries in one array, in the order
//! they are rendered, and the lookup by name.

use super::{
    CONSUMER_FAMILIES, EXPORTER_FAMILIES, MetricDef, PENDING_FAMILIES, STREAM_FAMILIES,
    STREAM_LENGTH,
};

/// Every metric the exporter can emit, in the order families are rendered:
/// each family file's entries, in the order they are written.
pub const METRICS: &[MetricDef] = &ALL;

const FAMILIES: &[&[MetricDef]] = &[
    STREAM_FAMILIES,
    PENDING_FAMILIES,
    CONSUMER_FAMILIES,
    EXPORTER_FAMILIES,
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
