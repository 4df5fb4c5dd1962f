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

// The macros first: the family files use them.
#[macro_use]
mod macros;

mod consumers;
mod def;
mod exporter;
mod list;
mod pending;
mod streams;
mod values;

pub use consumers::*;
pub use def::{Custom, Lean, MetricDef, MetricType, Servers, Source};
pub use exporter::*;
pub use list::{METRICS, find};
pub use pending::*;
pub use streams::*;
use values::*;
