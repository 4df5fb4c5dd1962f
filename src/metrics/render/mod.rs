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

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::catalog::{Custom, METRICS, MetricDef, Source};
use super::text::{Family, Sink, needs_escape};
use crate::snapshot::{
    Consumers, ExporterState, GroupKey, GroupState, Name, OldestPending, ScanState, StreamState,
    TargetSnapshot,
};

mod custom;

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

/// The keys of two maps in order, each with the values the maps hold.
fn outer_join<'m, K: Ord, A, B>(
    a: &'m BTreeMap<K, A>,
    b: &'m BTreeMap<K, B>,
) -> impl Iterator<Item = (&'m K, Option<&'m A>, Option<&'m B>)> {
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    std::iter::from_fn(move || {
        let order = match (a.peek(), b.peek()) {
            (None, None) => return None,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((ka, _)), Some((kb, _))) => ka.cmp(kb),
        };
        Some(match order {
            std::cmp::Ordering::Less => {
                let (k, v) = a.next()?;
                (k, Some(v), None)
            }
            std::cmp::Ordering::Greater => {
                let (k, v) = b.next()?;
                (k, None, Some(v))
            }
            std::cmp::Ordering::Equal => {
                let (k, va) = a.next()?;
                (k, Some(va), b.next().map(|(_, vb)| vb))
            }
        })
    })
}

type Label<'a> = (&'static str, &'a [u8]);

fn group_labels<'a>(t: &'a TargetSnapshot, stream: &'a Name, group: &'a Name) -> [Label<'a>; 3] {
    [
        ("target", t.name.as_bytes()),
        ("stream", stream),
        ("group", group),
    ]
}

/// The label value of the consumers over `max_consumers_per_group`, summed.
const OTHER_CONSUMERS: &str = "__other__";

/// How a real consumer named like [`OTHER_CONSUMERS`] is written, already
/// escaped for the exposition: `\x5f_other__`, its first byte in the `\xNN`
/// form that [`super::text::escape_label`] gives only to bytes that are not
/// UTF-8 (and a `\` of a name is doubled), so no other name is written so and
/// the aggregate never collides with it.
const REAL_OTHER_CONSUMER: &str = "\\\\x5f_other__";

/// One sample of a consumer of `group`: every consumer under its name, but
/// one named like the aggregate of the others, which is escaped.
fn consumer_sample<W: Write>(
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

/// Every group of the targets that are up, with its target and stream.
fn groups_of<'a>(
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
                .any(|c| c.top.iter().any(|c| long(&c.name)))
    })
}

/// The parts of the exposition, in output order. Each reads one or two maps
/// of the target snapshots (the last reads only small per-target state and
/// the exporter's own), and those maps are shared between consecutive
/// snapshots until a probe replaces them: a section whose maps are the same
/// writes the same bytes, so its output can be reused (see
/// [`Renderer::inputs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Stream and group families from the stream poll.
    Streams,
    /// Oldest pending age: the pending summary's IDs, aged by the stream
    /// poll's clock.
    OldestPending,
    /// PEL scan results.
    PelScans,
    /// Consumer families.
    Consumers,
    /// Server info and the exporter's own families: small, always written.
    Targets,
}

impl Section {
    /// The section that writes the families of `source`.
    fn of(source: Source) -> Section {
        match source {
            Source::Stream(_)
            | Source::Group(_)
            | Source::Custom(
                Custom::LostEntries
                | Custom::LastLoss
                | Custom::PossiblyLost
                | Custom::LossUnproven
                | Custom::Status
                | Custom::StatusReason,
            ) => Section::Streams,
            Source::Custom(Custom::OldestPendingAge) => Section::OldestPending,
            Source::Scan(_)
            | Source::Custom(
                Custom::Poison | Custom::PendingByIdle | Custom::PendingByDeliveryCount,
            ) => Section::PelScans,
            Source::GroupConsumers(_)
            | Source::Consumer(_)
            | Source::Custom(Custom::ConsumerPending) => Section::Consumers,
            Source::Target(_)
            | Source::TargetHealth(_)
            | Source::Probe(_)
            | Source::Exporter(_)
            | Source::Process(_)
            | Source::Custom(
                Custom::TargetInfo
                | Custom::PageSizes
                | Custom::Commands
                | Custom::Errors
                | Custom::ItemsSkipped
                | Custom::TargetReady
                | Custom::BuildInfo
                | Custom::LabelsShortened
                | Custom::ProbeRequests,
            ) => Section::Targets,
        }
    }

    /// Every section, in output order.
    pub const ALL: [Section; 5] = [
        Section::Streams,
        Section::OldestPending,
        Section::PelScans,
        Section::Consumers,
        Section::Targets,
    ];
}

/// One map a section reads, held (so it cannot be freed and its address
/// reused) and compared by identity.
#[derive(Clone, Debug)]
enum Input {
    Streams(Arc<BTreeMap<Name, Arc<StreamState>>>),
    OldestPending(Arc<BTreeMap<GroupKey, OldestPending>>),
    PelScans(Arc<BTreeMap<GroupKey, ScanState>>),
    HeadPoison(Arc<BTreeMap<GroupKey, u64>>),
    Consumers(Arc<BTreeMap<GroupKey, Arc<Consumers>>>),
}

impl PartialEq for Input {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Input::Streams(a), Input::Streams(b)) => Arc::ptr_eq(a, b),
            (Input::OldestPending(a), Input::OldestPending(b)) => Arc::ptr_eq(a, b),
            (Input::PelScans(a), Input::PelScans(b)) => Arc::ptr_eq(a, b),
            (Input::HeadPoison(a), Input::HeadPoison(b)) => Arc::ptr_eq(a, b),
            (Input::Consumers(a), Input::Consumers(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Everything a section's output depends on: equal inputs, equal bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct SectionInputs {
    dedupe: bool,
    limit: usize,
    maps: Vec<(Arc<str>, Input)>,
}

/// Where one section's families go, the duplicates they dropped and the
/// label values they shortened.
struct Out<W: Write> {
    sink: Sink<W>,
    dedupe: bool,
    limit: usize,
    counts: SectionCounts,
}

/// What writing a section dropped and shortened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SectionCounts {
    /// Series dropped as duplicates.
    pub duplicates: u64,
    /// Label values shortened to `metrics.max_label_value_bytes`.
    pub shortened: u64,
}

impl<W: Write> Out<W> {
    fn family(&mut self, def: &'static MetricDef, fill: impl FnOnce(&mut Family<'_, W>)) {
        let mut f = Family::new(&mut self.sink, def, self.dedupe, self.limit);
        fill(&mut f);
        self.counts.duplicates += f.duplicates;
        self.counts.shortened += f.shortened;
    }
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
    targets: &'a [Arc<TargetSnapshot>],
    up: Vec<&'a TargetSnapshot>,
    exporter: &'a ExporterState,
    build: BuildInfo,
    dedupe: bool,
    /// Writing a `/probe` answer: no exporter-wide families.
    probe_answer: bool,
    limit: usize,
    /// Label values the sections written before the last one shortened
    /// (the last, the exporter's own, reports it).
    shortened: std::cell::Cell<u64>,
}

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
        total.duplicates += c.duplicates;
        total.shortened += c.shortened;
        renderer.note_shortened(c.shortened);
    }
    Ok((out, total))
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
        out = renderer.section(section, out)?.0;
    }
    Ok(out)
}

#[cfg(test)]
mod golden;
#[cfg(test)]
mod tests;
