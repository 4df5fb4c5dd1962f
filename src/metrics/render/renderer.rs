//! The renderer: which snapshots it writes, and how each section's families
//! are filled from the catalog's sources, sample by sample, straight from
//! the snapshot.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::dedupe::any_name_escapes_alike;
use super::groups::{group_labels, groups_of};
use super::inputs::Input;
use super::other_consumers::consumer_sample;
use super::out::Out;
use super::{BuildInfo, Section, SectionCounts, SectionInputs};
use crate::metrics::catalog::{Custom, METRICS, Source};
use crate::metrics::text::{Family, Sink};
use crate::snapshot::{ExporterState, TargetSnapshot};

/// Writes the exposition of some snapshots, section by section.
///
/// Labels are escaped into the output as each sample is written, straight
/// from the snapshot: a render allocates nothing per stream or group, so
/// at 10,000 streams it needs little more memory than its compressed
/// result. The per-group maps are walked in their own (stream, group)
/// order, which is the order of the streams and their groups.
#[derive(Debug)]
pub struct Renderer<'a> {
    pub(super) targets: &'a [Arc<TargetSnapshot>],
    pub(super) up: Vec<&'a TargetSnapshot>,
    pub(super) exporter: &'a ExporterState,
    pub(super) build: BuildInfo,
    pub(super) dedupe: bool,
    /// Writing a `/probe` answer: no exporter-wide families.
    pub(super) probe_answer: bool,
    pub(super) limit: usize,
    /// Label values the sections written before the last one shortened
    /// (the last, the exporter's own, reports it).
    pub(super) shortened: std::cell::Cell<u64>,
}

impl<'a> Renderer<'a> {
    /// A renderer of `targets` (data series only for those that are up).
    pub fn new(
        targets: &'a [Arc<TargetSnapshot>],
        exporter: &'a ExporterState,
        build: BuildInfo,
    ) -> Self {
        let up: Vec<&TargetSnapshot> = targets.iter().map(|t| &**t).filter(|t| t.up).collect();
        let limit = exporter.label_limit.load(Ordering::Relaxed).max(1);
        let dedupe = any_name_escapes_alike(&up, limit);
        Renderer {
            targets,
            up,
            exporter,
            build,
            dedupe,
            probe_answer: false,
            limit,
            shortened: std::cell::Cell::new(0),
        }
    }

    /// Adds label values a section shortened (written or reused) to what the
    /// last section reports.
    pub fn note_shortened(&self, n: u64) {
        self.shortened.set(self.shortened.get() + n);
    }

    /// What `section` would be written from, or `None` when it is written
    /// afresh every time.
    pub fn inputs(&self, section: Section) -> Option<SectionInputs> {
        let maps: fn(&TargetSnapshot) -> Vec<Input> = match section {
            Section::Streams => |t| vec![Input::Streams(t.streams.clone())],
            // The ages are aged by the stream poll's clock.
            Section::OldestPending => |t| {
                vec![
                    Input::OldestPending(t.oldest_pending.clone()),
                    Input::Streams(t.streams.clone()),
                ]
            },
            Section::PelScans => |t| {
                vec![
                    Input::PelScans(t.scans.clone()),
                    Input::HeadPoison(t.head_poison.clone()),
                ]
            },
            Section::Consumers => |t| vec![Input::Consumers(t.consumers.clone())],
            Section::Targets => return None,
        };
        Some(SectionInputs {
            dedupe: self.dedupe,
            limit: self.limit,
            maps: self
                .up
                .iter()
                .flat_map(|t| maps(t).into_iter().map(|m| (t.name.clone(), m)))
                .collect(),
        })
    }

    /// Writes `section` to `out`; returns the writer and what the section
    /// dropped and shortened.
    ///
    /// # Errors
    /// When `out` fails.
    pub fn section<W: Write>(&self, section: Section, out: W) -> io::Result<(W, SectionCounts)> {
        let mut out = Out {
            sink: Sink::new(out),
            dedupe: self.dedupe,
            limit: self.limit,
            counts: SectionCounts::default(),
        };
        let families = METRICS
            .iter()
            .filter(|def| Section::of(def.source) == section && self.writes(def.source));
        for def in families {
            out.family(def, |f| self.samples(f, def.source));
        }
        Ok((out.sink.finish()?, out.counts))
    }

    /// Whether this answer has families from `source`: `/metrics` has all
    /// but the probed target's readiness, a `/probe` answer only the
    /// target's own.
    fn writes(&self, source: Source) -> bool {
        match source {
            Source::Exporter(_)
            | Source::Process(_)
            | Source::Custom(Custom::BuildInfo | Custom::LabelsShortened | Custom::ProbeRequests) => {
                !self.probe_answer
            }
            Source::Custom(Custom::TargetReady) => self.probe_answer,
            _ => true,
        }
    }

    /// Writes a family's samples from the items its source walks.
    fn samples<W: Write>(&self, f: &mut Family<'_, W>, source: Source) {
        match source {
            Source::Stream(value) => {
                for t in &self.up {
                    for (s, st) in t.streams.iter() {
                        if let Some(v) = value(st) {
                            f.sample(&[("target", t.name.as_bytes()), ("stream", s)], v);
                        }
                    }
                }
            }
            Source::Group(value) => {
                for (t, s, st, g, gs) in groups_of(&self.up) {
                    if let Some(v) = value(st, gs) {
                        f.sample(&group_labels(t, s, g), v);
                    }
                }
            }
            Source::Scan(value) => {
                for t in &self.up {
                    for ((s, g), sc) in t.scans.iter() {
                        if let Some(v) = value(sc) {
                            f.sample(&group_labels(t, s, g), v);
                        }
                    }
                }
            }
            Source::GroupConsumers(value) => {
                for t in &self.up {
                    for ((s, g), cs) in t.consumers.iter() {
                        if let Some(v) = value(cs) {
                            f.sample(&group_labels(t, s, g), v);
                        }
                    }
                }
            }
            Source::Consumer(value) => {
                for t in &self.up {
                    for ((s, g), cs) in t.consumers.iter() {
                        for consumer in &cs.top {
                            if let Some(v) = value(consumer) {
                                consumer_sample(f, group_labels(t, s, g), &consumer.name, v);
                            }
                        }
                    }
                }
            }
            Source::Target(value) => {
                for t in &self.up {
                    if let Some(v) = value(t) {
                        f.sample(&[("target", t.name.as_bytes())], v);
                    }
                }
            }
            Source::TargetHealth(value) => {
                for t in self.targets {
                    if let Some(v) = value(t) {
                        f.sample(&[("target", t.name.as_bytes())], v);
                    }
                }
            }
            Source::Probe(value) => {
                for t in self.targets {
                    for (kind, p) in &t.probes {
                        if let Some(v) = value(p) {
                            let labels = [
                                ("target", t.name.as_bytes()),
                                ("probe", kind.label().as_bytes()),
                            ];
                            f.sample(&labels, v);
                        }
                    }
                }
            }
            Source::Exporter(value) => {
                if let Some(v) = value(self.exporter) {
                    f.sample(&[], v);
                }
            }
            Source::Process(value) => {
                if let Some(v) = self.exporter.process.as_ref().and_then(value) {
                    f.sample(&[], v);
                }
            }
            Source::Custom(custom) => self.custom(f, custom),
        }
    }
}
