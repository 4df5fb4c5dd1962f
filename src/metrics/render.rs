//! Builds the exposition from snapshots: fresh families on every render, so
//! anything not in the snapshots is simply not written. Values that are
//! unknown (`None`) are skipped, never written as 0. Data series of a target
//! that is down are withheld; its self-metrics remain.
//!
//! The families are those of the catalog, in its order: each [`Section`]
//! writes the families whose [`Source`] it reads, from the catalog entry
//! alone; the [`Custom`] ones have their code in [`custom`]. Samples are
//! written straight from the snapshot, label values escaped as they are
//! written; output streams through a [`Sink`], so rendering 10 000 streams
//! needs little more memory than its compressed result.
//!
//! This file writes the two answers whole: the exposition of `/metrics`
//! ([`render()`]: every target and the exporter's own families) and a
//! `/probe` answer ([`render_probe_answer`]: one target's series). The
//! rooms: `renderer` (sections filled from the catalog's sources, what the
//! families share, the build's version), `section` (the sections, what their
//! output depends on and what writing them counted) and [`custom`].
//!
//! [`Source`]: super::catalog::Source
//! [`Custom`]: super::catalog::Custom
//! [`Sink`]: super::text::Sink

mod custom;
mod renderer;
mod section;

pub use renderer::{BuildInfo, Renderer};
pub use section::{Section, SectionCounts, SectionInputs};

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::snapshot::{ExporterState, TargetSnapshot};

/// Writes the exposition of `targets` and the exporter state to `out` and
/// returns the writer and what the sections dropped and shortened.
///
/// # Errors
/// When `out` fails.
pub fn render<W: Write>(
    targets: &[Arc<TargetSnapshot>],
    exporter: &ExporterState,
    build: BuildInfo,
    mut out: W,
) -> io::Result<(W, SectionCounts)> {
    let renderer = Renderer::new(targets, exporter, build);
    let mut total = SectionCounts::default();
    for section in Section::ALL {
        let (w, c) = renderer.section(section, out)?;
        out = w;
        total.add(&c);
        renderer.note(&c);
    }
    Ok((out, total))
}

/// Writes a `/probe` answer: one target's series (its data while it is up,
/// and its own health, with `redis_streams_exporter_target_ready`), without
/// the exporter-wide families `/metrics` serves. Label values are shortened
/// beyond `label_limit` bytes, as in `/metrics`.
///
/// # Errors
/// When `out` fails.
pub fn render_probe_answer<W: Write>(
    target: &Arc<TargetSnapshot>,
    label_limit: usize,
    out: W,
) -> io::Result<W> {
    let targets = std::slice::from_ref(target);
    let exporter = ExporterState::default();
    exporter.label_limit.store(label_limit, Ordering::Relaxed);
    let mut renderer = Renderer::new(targets, &exporter, BuildInfo::CURRENT);
    renderer.probe_answer = true;
    let mut out = out;
    for section in Section::ALL {
        let (w, counts) = renderer.section(section, out)?;
        out = w;
        renderer.note(&counts);
    }
    Ok(out)
}

#[cfg(test)]
mod golden;
#[cfg(test)]
mod tests;
