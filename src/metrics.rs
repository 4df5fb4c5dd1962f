//! Metrics: the [`catalog`] of every name the exporter emits, [`render()`],
//! which writes a set of snapshots in the Prometheus text format, and
//! [`openmetrics`], which turns that into OpenMetrics and filters families.
//! This is the only module that knows metric names.

pub mod catalog;
pub mod openmetrics;
#[cfg(test)]
mod reference;
mod render;
mod text;

pub use render::{
    BuildInfo, Renderer, Section, SectionCounts, SectionInputs, render, render_probe_answer,
};
