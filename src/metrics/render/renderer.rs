//! The renderer: which snapshots it writes, and how each section's families
//! are filled from the catalog's sources, sample by sample, straight from
//! the snapshot; what the families share (walking the groups of the targets
//! that are up, a group's labels, what lean series keep, a consumer's
//! sample); and the exporter's own version, which `build_info` reports.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::section::{Input, Out, Section, SectionCounts, SectionInputs};
use crate::metrics::catalog::{Custom, Lean, METRICS, MetricDef, Source};
use crate::metrics::text::{Family, Sink, needs_escape};
use crate::snapshot::{ExporterState, GroupState, Name, StreamState, TargetSnapshot};

/// The exporter's own version, for `build_info` (the same values as `--version`).
#[derive(Clone, Copy, Debug)]
pub struct BuildInfo {
    /// Crate version.
    pub version: &'static str,
    /// Source revision (12 hex digits, or `unknown`).
    pub revision: &'static str,
    /// Build date, RFC 3339 UTC (`SOURCE_DATE_EPOCH` when the build set it).
    pub build_date: &'static str,
}

impl BuildInfo {
    /// This build; build.rs always sets both variables.
    pub const CURRENT: BuildInfo = BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        revision: env!("RSE_GIT_REVISION"),
        build_date: env!("RSE_BUILD_DATE"),
    };
}

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
    /// The targets whose data series are written: up, or down and still
    /// held ([`TargetSnapshot::serves_data`]).
    pub(super) up: Vec<&'a TargetSnapshot>,
    pub(super) exporter: &'a ExporterState,
    pub(super) build: BuildInfo,
    pub(super) dedupe: bool,
    /// Writing a `/probe` answer: no exporter-wide families.
    pub(super) probe_answer: bool,
    pub(super) limit: usize,
    /// What the sections written before the last one counted: the label
    /// values they shortened and the series of each target (the last
    /// section, the exporter's own, reports both).
    pub(super) before: std::cell::RefCell<SectionCounts>,
}

impl<'a> Renderer<'a> {
    /// A renderer of `targets` (data series only for those that are up,
    /// or down and still held).
    pub fn new(
        targets: &'a [Arc<TargetSnapshot>],
        exporter: &'a ExporterState,
        build: BuildInfo,
    ) -> Self {
        let up: Vec<&TargetSnapshot> = targets
            .iter()
            .map(|t| &**t)
            .filter(|t| t.serves_data())
            .collect();
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
            before: std::cell::RefCell::default(),
        }
    }

    /// Adds what a section counted (written or reused) to what the last
    /// section reports.
    pub fn note(&self, counts: &SectionCounts) {
        self.before.borrow_mut().add(counts);
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
                    Input::Nacked(t.nacked.clone()),
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
            if let Source::Custom(Custom::Series) = def.source {
                // What the sections before and this one's families so far
                // cost each target, and this family's own series.
                let mut so_far = self.before.borrow().clone();
                so_far.add(&out.counts);
                out.family(def, |f| self.series(f, &so_far));
            } else {
                out.family(def, |f| self.samples(f, def));
            }
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

    /// Writes a family's samples from the items its source walks: all of
    /// them for streams whose `series` is full, what the family's
    /// [`Lean`] keeps for the others.
    fn samples<W: Write>(&self, f: &mut Family<'_, W>, def: &MetricDef) {
        let lean = def.lean;
        match def.source {
            Source::Stream(value) => {
                for t in &self.up {
                    for (s, st) in t.streams.iter() {
                        if let Some(v) = value(st).filter(|&v| writes(st, lean, v, 0)) {
                            f.sample(&[("target", t.name.as_bytes()), ("stream", s)], v);
                        }
                    }
                }
            }
            Source::Group(value) => {
                for (t, s, st, g, gs) in groups_of(&self.up) {
                    let pending = gs.pending;
                    if let Some(v) = value(st, gs).filter(|&v| writes(st, lean, v, pending)) {
                        f.sample(&group_labels(t, s, g), v);
                    }
                }
            }
            Source::Scan(value) => {
                for t in &self.up {
                    for ((s, g), sc) in t.scans.iter() {
                        let Some(v) = value(sc) else { continue };
                        if group_writes(t, s, g, lean, v) {
                            f.sample(&group_labels(t, s, g), v);
                        }
                    }
                }
            }
            Source::GroupConsumers(value) => {
                for t in &self.up {
                    for ((s, g), cs) in t.consumers.iter() {
                        let Some(v) = value(cs) else { continue };
                        if group_writes(t, s, g, lean, v) {
                            f.sample(&group_labels(t, s, g), v);
                        }
                    }
                }
            }
            Source::Consumer(value) => {
                for t in &self.up {
                    for ((s, g), cs) in t.consumers.iter() {
                        let full = full_series(t, s);
                        for consumer in cs.top.iter().filter(|c| full || c.in_lean()) {
                            if let Some(v) = value(&consumer.info) {
                                let name = &consumer.info.name;
                                consumer_sample(f, group_labels(t, s, g), name, v);
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

/// Whether stream `st` writes `value` of a family whose lean policy is
/// `lean`, for a group with `pending` entries (0 for the stream's own).
pub(super) fn writes(st: &StreamState, lean: Lean, value: f64, pending: u64) -> bool {
    st.settings.series.full() || lean.keeps(value, pending)
}

/// [`writes`] for the group `(stream, group)` of target `t`, looked up in
/// its stream poll (a group it no longer knows is written as lean).
pub(super) fn group_writes(
    t: &TargetSnapshot,
    stream: &Name,
    group: &Name,
    lean: Lean,
    value: f64,
) -> bool {
    match t.streams.get(stream) {
        Some(st) => {
            let pending = st.groups.get(group).map_or(0, |g| g.pending);
            writes(st, lean, value, pending)
        }
        None => lean.keeps(value, 0),
    }
}

/// Whether the stream `stream` of target `t` writes full series.
pub(super) fn full_series(t: &TargetSnapshot, stream: &Name) -> bool {
    t.streams
        .get(stream)
        .is_some_and(|st| st.settings.series.full())
}

/// True when two different names could be written alike (only shortened
/// ones can), so every family must check for duplicate series.
fn any_name_escapes_alike(up: &[&TargetSnapshot], limit: usize) -> bool {
    let long = |n: &[u8]| needs_escape(n, limit);
    up.iter().any(|t| {
        t.streams
            .iter()
            .any(|(s, st)| long(s) || st.groups.keys().any(|g| long(g)))
            || t.consumers
                .values()
                .any(|c| c.top.iter().any(|c| long(&c.info.name)))
    })
}

pub(super) type Label<'a> = (&'static str, &'a [u8]);

pub(super) fn group_labels<'a>(
    t: &'a TargetSnapshot,
    stream: &'a Name,
    group: &'a Name,
) -> [Label<'a>; 3] {
    [
        ("target", t.name.as_bytes()),
        ("stream", stream),
        ("group", group),
    ]
}

/// Every group of the targets that are up, with its target and stream.
pub(super) fn groups_of<'a>(
    up: &'a [&'a TargetSnapshot],
) -> impl Iterator<
    Item = (
        &'a TargetSnapshot,
        &'a Name,
        &'a StreamState,
        &'a Name,
        &'a GroupState,
    ),
> {
    up.iter().flat_map(|t| {
        t.streams
            .iter()
            .flat_map(move |(s, st)| st.groups.iter().map(move |(g, gs)| (*t, s, &**st, g, gs)))
    })
}

/// The label value of the consumers over `max_consumers_per_group`, summed.
pub(super) const OTHER_CONSUMERS: &str = "__other__";

/// How a real consumer named like [`OTHER_CONSUMERS`] is written, already
/// escaped for the exposition: `\x5f_other__`, its first byte in the `\xNN`
/// form that [`escape_label`](crate::metrics::text::escape_label) gives only to bytes that are not
/// UTF-8 (and a `\` of a name is doubled), so no other name is written so and
/// the aggregate never collides with it.
const REAL_OTHER_CONSUMER: &str = "\\\\x5f_other__";

/// One sample of a consumer of `group`: every consumer under its name, but
/// one named like the aggregate of the others, which is escaped.
pub(super) fn consumer_sample<W: Write>(
    f: &mut Family<'_, W>,
    group: [Label<'_>; 3],
    name: &[u8],
    value: f64,
) {
    let [l1, l2, l3] = group;
    if name == OTHER_CONSUMERS.as_bytes() {
        f.sample_with_literal(
            &[l1, l2, l3],
            Some(("consumer", REAL_OTHER_CONSUMER)),
            value,
        );
    } else {
        f.sample(&[l1, l2, l3, ("consumer", name)], value);
    }
}
