//! Metrics: the [`catalog`] of every name the exporter emits, and
//! [`render`], which writes a set of snapshots in the Prometheus text format.
//! This is the only module that knows metric names.

pub mod catalog;
#[cfg(test)]
mod reference;
mod render;
mod text;

pub use render::{
    BuildInfo, Renderer, Section, SectionCounts, SectionInputs, render, render_probe_answer,
};
