//! Builds the exposition from snapshots: fresh families on every render, so
//! anything not in the snapshots is simply not written. Values that are
//! unknown (`None`) are skipped, never written as 0. Data series of a target
//! that is down are withheld; its self-metrics remain.
//!
//! Samples are written straight from the snapshot, label values escaped as
//! they are written; output streams through a [`Sink`], so rendering 10 000
//! streams needs little more memory than its compressed result.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::catalog::{self as c, MetricDef};
use super::text::{Family, Sink, needs_escape, write_value};
use crate::backend::reply::ConsumerInfo;
use crate::backend::{ErrorKind, StreamId};
use crate::snapshot::{
    Consumers, ExporterState, GroupKey, GroupState, Name, PelScan, ScanState, StreamState,
    TargetSnapshot,
};
use crate::status::GroupStatus;

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

fn secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn id_ts(stream: &StreamState, id: StreamId) -> Option<f64> {
    (stream.time_based_ids && !id.is_zero()).then(|| id.seconds())
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

fn last_scan(scan: &ScanState) -> Option<&PelScan> {
    scan.last.as_deref()
}

type Label<'a> = (&'static str, &'a [u8]);

fn group_labels<'a>(t: &'a TargetSnapshot, stream: &'a Name, group: &'a Name) -> [Label<'a>; 3] {
    [
        ("target", t.name.as_bytes()),
        ("stream", stream),
        ("group", group),
    ]
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

/// The parts of the exposition, in output order. Each reads one map of the
/// target snapshots (the last reads only small per-target state and the
/// exporter's own), and those maps are shared between consecutive snapshots
/// until a probe replaces them: a section whose map is the same writes the
/// same bytes, so its output can be reused (see [`Renderer::inputs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Stream and group families from the stream poll.
    Streams,
    /// Oldest pending age, from the pending summary.
    OldestPending,
    /// PEL scan results.
    PelScans,
    /// Consumer families.
    Consumers,
    /// Server info and the exporter's own families: small, always written.
    Targets,
}

impl Section {
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
    OldestPending(Arc<BTreeMap<GroupKey, f64>>),
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
            Section::OldestPending => |t| vec![Input::OldestPending(t.oldest_pending_age.clone())],
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
        match section {
            Section::Streams => self.streams(&mut out),
            Section::OldestPending => self.oldest_pending(&mut out),
            Section::PelScans => self.pel_scans(&mut out),
            Section::Consumers => self.consumers(&mut out),
            Section::Targets => self.targets(&mut out),
        }
        Ok((out.sink.finish()?, out.counts))
    }

    fn streams<W: Write>(&self, out: &mut Out<W>) {
        // Streams.
        type StreamValue = fn(&StreamState) -> Option<f64>;
        let stream_families: [(&'static MetricDef, StreamValue); 16] = [
            (&c::STREAM_LENGTH, |s| Some(s.info.length as f64)),
            (&c::STREAM_ENTRIES_ADDED, |s| {
                s.info.entries_added.map(|v| v as f64)
            }),
            (&c::STREAM_FIRST_ENTRY_TS, |s| {
                s.info.first_entry_id.and_then(|id| id_ts(s, id))
            }),
            (&c::STREAM_LAST_ENTRY_TS, |s| {
                id_ts(s, s.info.last_generated_id)
            }),
            (&c::STREAM_GROUPS, |s| Some(s.info.groups as f64)),
            (&c::STREAM_TIME_BASED_IDS, |s| {
                Some(if s.time_based_ids { 1.0 } else { 0.0 })
            }),
            (&c::STREAM_DEAD_LETTER_LENGTH, |s| {
                s.dead_letter.map(|dl| dl.length as f64)
            }),
            (&c::STREAM_DEAD_LETTER_ADDED, |s| {
                s.dead_letter
                    .and_then(|dl| dl.entries_added)
                    .map(|v| v as f64)
            }),
            (&c::STREAM_MAX_DELAY, |s| {
                s.settings.max_delay.map(|d| d.as_secs_f64())
            }),
            (&c::STREAM_DEAD_LETTER_OLDEST_AGE, |s| {
                s.dead_letter.and_then(|dl| dl.oldest_age)
            }),
            (&c::STREAM_RADIX_TREE_KEYS, |s| {
                s.info.radix_tree_keys.map(|v| v as f64)
            }),
            (&c::STREAM_RADIX_TREE_NODES, |s| {
                s.info.radix_tree_nodes.map(|v| v as f64)
            }),
            (&c::STREAM_IDEMPOTENT_IDS_ADDED, |s| {
                s.info.idempotence.ids_added.map(|v| v as f64)
            }),
            (&c::STREAM_IDEMPOTENT_DUPLICATES, |s| {
                s.info.idempotence.duplicates.map(|v| v as f64)
            }),
            (&c::STREAM_IDEMPOTENT_PRODUCERS, |s| {
                s.info.idempotence.producers.map(|v| v as f64)
            }),
            (&c::STREAM_IDEMPOTENT_IDS, |s| {
                s.info.idempotence.ids.map(|v| v as f64)
            }),
        ];
        for (def, value) in stream_families {
            out.family(def, |f| {
                for t in &self.up {
                    for (s, st) in t.streams.iter() {
                        if let Some(v) = value(st) {
                            f.sample(&[("target", t.name.as_bytes()), ("stream", s)], v);
                        }
                    }
                }
            });
        }

        // Groups, from the stream poll.
        type GroupValue = fn(&StreamState, &GroupState) -> Option<f64>;
        let group_families: [(&'static MetricDef, GroupValue); 13] = [
            (&c::GROUP_LAG, |_, g| g.lag.map(|v| v as f64)),
            (&c::GROUP_LAG_ESTIMATED, |_, g| {
                Some(if g.lag_estimated { 1.0 } else { 0.0 })
            }),
            (&c::GROUP_LAG_SECONDS, |_, g| g.lag_seconds),
            (&c::GROUP_ENTRIES_READ, |_, g| {
                g.info.entries_read.map(|v| v as f64)
            }),
            (&c::GROUP_LAST_DELIVERED_TS, |s, g| {
                id_ts(s, g.info.last_delivered_id)
            }),
            (&c::GROUP_CONSUMERS, |_, g| Some(g.info.consumers as f64)),
            (&c::GROUP_PENDING, |_, g| Some(g.info.pending as f64)),
            (&c::GROUP_TRIMMED_UNDELIVERED, |_, g| {
                g.trimmed_undelivered.map(|v| v as f64)
            }),
            (&c::GROUP_REWINDS, |_, g| Some(g.rewinds as f64)),
            (&c::GROUP_AHEAD_OF_STREAM, |_, g| {
                Some(if g.ahead_of_stream { 1.0 } else { 0.0 })
            }),
            (&c::GROUP_RETENTION_MARGIN, |_, g| g.retention_margin),
            (&c::GROUP_TRIM_OVERTAKE_ETA, |_, g| g.overtake_eta),
            (&c::GROUP_DRAIN_ETA, |_, g| g.drain_eta),
        ];
        for (def, value) in group_families {
            out.family(def, |f| {
                for (t, s, st, g, gs) in groups_of(&self.up) {
                    if let Some(v) = value(st, gs) {
                        f.sample(&group_labels(t, s, g), v);
                    }
                }
            });
        }
        out.family(&c::GROUP_LOST_ENTRIES, |f| {
            for (t, s, _, g, gs) in groups_of(&self.up) {
                let Some(lost) = gs.lost else {
                    continue;
                };
                let [l1, l2, l3] = group_labels(t, s, g);
                for (cause, n) in [("trimmed", lost.trimmed), ("deleted", lost.deleted)] {
                    f.sample(&[l1, l2, l3, ("cause", cause.as_bytes())], n as f64);
                }
            }
        });
        out.family(&c::GROUP_STATUS, |f| {
            for (t, s, _, g, gs) in groups_of(&self.up) {
                let Some(current) = gs.status else {
                    continue;
                };
                let [l1, l2, l3] = group_labels(t, s, g);
                for status in GroupStatus::ALL {
                    let on = if status == current { 1.0 } else { 0.0 };
                    f.sample(&[l1, l2, l3, ("status", status.label().as_bytes())], on);
                }
            }
        });
    }

    fn oldest_pending<W: Write>(&self, out: &mut Out<W>) {
        // Groups, from the pending summary.
        out.family(&c::GROUP_OLDEST_PENDING_AGE, |f| {
            for t in &self.up {
                for ((s, g), age) in t.oldest_pending_age.iter() {
                    f.sample(&group_labels(t, s, g), *age);
                }
            }
        });
    }

    fn pel_scans<W: Write>(&self, out: &mut Out<W>) {
        // Groups, from the PEL scan.
        type ScanValue = fn(&ScanState) -> Option<f64>;
        // Poison: the larger of the last scan's count and the pending
        // summary's count among a stuck group's oldest entries.
        out.family(&c::GROUP_PENDING_POISON, |f| {
            for t in &self.up {
                for (key, scan, head) in outer_join(&t.scans, &t.head_poison) {
                    let scanned = scan.and_then(last_scan).map(|s| s.poison);
                    if let Some(v) = scanned.into_iter().chain(head.copied()).max() {
                        f.sample(&group_labels(t, &key.0, &key.1), v as f64);
                    }
                }
            }
        });
        let scan_families: [(&'static MetricDef, ScanValue); 5] = [
            (&c::GROUP_PENDING_MAX_IDLE, |sc| {
                last_scan(sc).map(|s| s.max_idle_ms.map_or(0.0, |ms| ms as f64 / 1000.0))
            }),
            (&c::GROUP_PENDING_GHOST, |sc| {
                last_scan(sc).map(|s| s.ghost as f64)
            }),
            (&c::GROUP_PENDING_GHOST_UNCHECKED, |sc| {
                last_scan(sc).map(|s| s.ghost_unchecked as f64)
            }),
            (&c::GROUP_PENDING_SCAN_TS, |sc| {
                last_scan(sc).map(|s| secs(s.finished_at))
            }),
            (&c::GROUP_PENDING_SCAN_PROGRESS, |sc| Some(sc.progress)),
        ];
        for (def, value) in scan_families {
            out.family(def, |f| {
                for t in &self.up {
                    for ((s, g), sc) in t.scans.iter() {
                        if let Some(v) = value(sc) {
                            f.sample(&group_labels(t, s, g), v);
                        }
                    }
                }
            });
        }
        let mut le = Vec::with_capacity(24);
        out.family(&c::GROUP_PENDING_BY_IDLE, |f| {
            for t in &self.up {
                for ((s, g), sc) in t.scans.iter() {
                    // No bounds configured: the family is not exported.
                    let Some(scan) = last_scan(sc).filter(|s| !s.idle_bounds.is_empty()) else {
                        continue;
                    };
                    let [l1, l2, l3] = group_labels(t, s, g);
                    for (bound, n) in scan.by_idle() {
                        le.clear();
                        write_value(&mut le, bound);
                        f.sample(&[l1, l2, l3, ("le", &le)], n as f64);
                    }
                    f.sample(&[l1, l2, l3, ("le", b"+Inf")], scan.entries as f64);
                }
            }
        });
        out.family(&c::GROUP_PENDING_BY_DELIVERY_COUNT, |f| {
            for t in &self.up {
                for ((s, g), sc) in t.scans.iter() {
                    let Some(scan) = last_scan(sc).filter(|s| !s.delivery_bounds.is_empty()) else {
                        continue;
                    };
                    let [l1, l2, l3] = group_labels(t, s, g);
                    for (bound, n) in scan.by_delivery_count() {
                        le.clear();
                        le.extend_from_slice(itoa::Buffer::new().format(bound).as_bytes());
                        f.sample(&[l1, l2, l3, ("le", &le)], n as f64);
                    }
                    f.sample(&[l1, l2, l3, ("le", b"+Inf")], scan.entries as f64);
                }
            }
        });
    }

    fn consumers<W: Write>(&self, out: &mut Out<W>) {
        // Groups and consumers, from the consumers probe.
        out.family(&c::GROUP_PENDING_ORPHANED, |f| {
            for t in &self.up {
                for ((s, g), cs) in t.consumers.iter() {
                    f.sample(&group_labels(t, s, g), cs.orphaned as f64);
                }
            }
        });
        out.family(&c::CONSUMER_PENDING, |f| {
            for t in &self.up {
                for ((s, g), cs) in t.consumers.iter() {
                    let [l1, l2, l3] = group_labels(t, s, g);
                    for consumer in &cs.top {
                        let labels = [l1, l2, l3, ("consumer", &*consumer.name)];
                        f.sample(&labels, consumer.pending as f64);
                    }
                    // What the consumers beyond the cap hold, together.
                    if let Some(other) = cs.other_pending {
                        f.sample(&[l1, l2, l3, ("consumer", b"__other__")], other as f64);
                    }
                }
            }
        });
        type ConsumerValue = fn(&ConsumerInfo) -> Option<f64>;
        let consumer_families: [(&'static MetricDef, ConsumerValue); 2] = [
            (&c::CONSUMER_IDLE, |c| Some(c.idle_ms as f64 / 1000.0)),
            (&c::CONSUMER_INACTIVE, |c| {
                c.inactive_ms.map(|ms| ms as f64 / 1000.0)
            }),
        ];
        for (def, value) in consumer_families {
            out.family(def, |f| {
                for t in &self.up {
                    for ((s, g), cs) in t.consumers.iter() {
                        let [l1, l2, l3] = group_labels(t, s, g);
                        for consumer in &cs.top {
                            if let Some(v) = value(consumer) {
                                f.sample(&[l1, l2, l3, ("consumer", &*consumer.name)], v);
                            }
                        }
                    }
                }
            });
        }
    }

    fn targets<W: Write>(&self, out: &mut Out<W>) {
        // Targets that are up.
        out.family(&c::TARGET_INFO, |f| {
            for t in &self.up {
                if let Some(i) = &t.server {
                    let labels = [
                        ("target", t.name.as_bytes()),
                        ("server", i.server.as_bytes()),
                        ("version", i.version.as_bytes()),
                        ("mode", i.mode.as_bytes()),
                        ("maxmemory_policy", i.maxmemory_policy.as_bytes()),
                    ];
                    f.sample(&labels, 1.0);
                }
            }
        });
        type TargetValue = fn(&TargetSnapshot) -> Option<f64>;
        let target_families: [(&'static MetricDef, TargetValue); 2] = [
            (&c::TARGET_MAXMEMORY, |t| {
                t.server
                    .as_ref()
                    .and_then(|i| i.maxmemory)
                    .map(|v| v as f64)
            }),
            (&c::TARGET_USED_MEMORY, |t| {
                t.server
                    .as_ref()
                    .and_then(|i| i.used_memory)
                    .map(|v| v as f64)
            }),
        ];
        for (def, value) in target_families {
            out.family(def, |f| {
                for t in &self.up {
                    if let Some(v) = value(t) {
                        f.sample(&[("target", t.name.as_bytes())], v);
                    }
                }
            });
        }

        // The exporter itself, for every target whatever its state.
        let exporter_families: [(&'static MetricDef, TargetValue); 5] = [
            (&c::EXPORTER_TARGET_UP, |t| {
                Some(if t.up { 1.0 } else { 0.0 })
            }),
            (&c::EXPORTER_STREAMS, |t| {
                t.streams_watched.map(|n| n as f64)
            }),
            (&c::EXPORTER_STREAMS_DROPPED, |t| {
                t.streams_dropped.map(|n| n as f64)
            }),
            (&c::EXPORTER_RATE_LIMITED, |t| {
                Some(t.stats.rate_limited_seconds)
            }),
            (&c::EXPORTER_PENDING_SCANNED, |t| {
                Some(t.stats.pending_scanned as f64)
            }),
        ];
        for (def, value) in exporter_families {
            out.family(def, |f| {
                for t in self.targets {
                    if let Some(v) = value(t) {
                        f.sample(&[("target", t.name.as_bytes())], v);
                    }
                }
            });
        }
        out.family(&c::EXPORTER_PAGE_SIZE, |f| {
            for t in self.targets {
                for (command, size) in &t.stats.page_sizes {
                    let labels = [
                        ("target", t.name.as_bytes()),
                        ("command", command.as_bytes()),
                    ];
                    f.sample(&labels, f64::from(*size));
                }
            }
        });
        type ProbeValue = fn(&crate::snapshot::ProbeStatus) -> Option<f64>;
        let probe_families: [(&'static MetricDef, ProbeValue); 6] = [
            (&c::EXPORTER_PROBE_SUCCESS, |p| {
                Some(if p.success { 1.0 } else { 0.0 })
            }),
            (&c::EXPORTER_PROBE_DURATION, |p| {
                Some(p.duration.as_secs_f64())
            }),
            (&c::EXPORTER_PROBE_LAST_SUCCESS, |p| {
                p.last_success.map(secs)
            }),
            (&c::EXPORTER_PROBE_INTERVAL, |p| {
                p.interval.map(|d| d.as_secs_f64())
            }),
            (&c::EXPORTER_PROBE_COMMANDS_NEEDED, |p| {
                p.commands_needed_per_second()
            }),
            (&c::EXPORTER_PROBE_ACHIEVED_INTERVAL, |p| {
                p.achieved_interval.map(|d| d.as_secs_f64())
            }),
        ];
        for (def, value) in probe_families {
            out.family(def, |f| {
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
            });
        }
        out.family(&c::EXPORTER_COMMANDS, |f| {
            for t in self.targets {
                for (command, n) in &t.stats.commands {
                    let labels = [
                        ("target", t.name.as_bytes()),
                        ("command", command.as_bytes()),
                    ];
                    f.sample(&labels, *n as f64);
                }
            }
        });
        out.family(&c::EXPORTER_ERRORS, |f| {
            for t in self.targets {
                for kind in ErrorKind::ALL {
                    let n = t.stats.errors.get(kind.label()).copied().unwrap_or(0);
                    let labels = [
                        ("target", t.name.as_bytes()),
                        ("kind", kind.label().as_bytes()),
                    ];
                    f.sample(&labels, n as f64);
                }
            }
        });
        if self.probe_answer {
            out.family(&c::EXPORTER_TARGET_READY, |f| {
                for t in self.targets {
                    f.sample(
                        &[("target", t.name.as_bytes())],
                        if t.ready { 1.0 } else { 0.0 },
                    );
                }
            });
            // The rest is about the exporter, served by /metrics.
            return;
        }
        out.family(&c::EXPORTER_BUILD_INFO, |f| {
            let labels = [
                ("version", self.build.version.as_bytes()),
                ("revision", self.build.revision.as_bytes()),
                ("build_date", self.build.build_date.as_bytes()),
            ];
            f.sample(&labels, 1.0);
        });
        out.family(&c::EXPORTER_CONFIG_RELOADS, |f| {
            f.sample(&[], self.exporter.reloads.load(Ordering::Relaxed) as f64);
        });
        out.family(&c::EXPORTER_CONFIG_RELOAD_FAILURES, |f| {
            f.sample(
                &[],
                self.exporter.reload_failures.load(Ordering::Relaxed) as f64,
            );
        });
        out.family(&c::EXPORTER_CONFIG_LAST_RELOAD_OK, |f| {
            f.sample(
                &[],
                if self.exporter.last_reload_ok.load(Ordering::Relaxed) {
                    1.0
                } else {
                    0.0
                },
            );
        });
        out.family(&c::EXPORTER_LABELS_SHORTENED, |f| {
            f.sample(&[], self.shortened.get() as f64);
        });
        let probes = &self.exporter.probes;
        let max_targets = probes.max_targets.load(Ordering::Relaxed);
        // Only when /probe is on (its cap is then at least 1).
        if max_targets > 0 {
            out.family(&c::EXPORTER_PROBED_TARGETS, |f| {
                f.sample(&[], probes.targets.load(Ordering::Relaxed) as f64);
            });
            out.family(&c::EXPORTER_PROBED_TARGETS_MAX, |f| {
                f.sample(&[], max_targets as f64);
            });
            out.family(&c::EXPORTER_PROBED_TARGETS_EXPIRED, |f| {
                f.sample(&[], probes.expired.load(Ordering::Relaxed) as f64);
            });
            out.family(&c::EXPORTER_PROBE_REQUESTS, |f| {
                let requests = probes.requests.lock().unwrap_or_else(|p| p.into_inner());
                for (result, n) in requests.iter() {
                    f.sample(&[("result", result.as_bytes())], *n as f64);
                }
            });
        }
        // The process, as every client library exports it.
        if let Some(p) = &self.exporter.process {
            type ProcessValue = fn(&crate::process::ProcessStats) -> Option<f64>;
            let process_families: [(&'static MetricDef, ProcessValue); 6] = [
                (&c::PROCESS_CPU_SECONDS, |p| p.cpu_seconds),
                (&c::PROCESS_OPEN_FDS, |p| p.open_fds.map(|v| v as f64)),
                (&c::PROCESS_MAX_FDS, |p| p.max_fds.map(|v| v as f64)),
                (&c::PROCESS_VIRTUAL_MEMORY, |p| {
                    p.virtual_memory_bytes.map(|v| v as f64)
                }),
                (&c::PROCESS_RESIDENT_MEMORY, |p| {
                    p.resident_memory_bytes.map(|v| v as f64)
                }),
                (&c::PROCESS_START_TIME, |p| p.start_time_seconds),
            ];
            for (def, value) in process_families {
                if let Some(v) = value(p) {
                    out.family(def, |f| f.sample(&[], v));
                }
            }
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
