//! The two answers written whole: the exposition of `/metrics` (every
//! target and the exporter's own families) and a `/probe` answer (one
//! target's series).

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{BuildInfo, Renderer, Section, SectionCounts};
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
