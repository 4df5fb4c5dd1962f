//! What a metric family is and how a family file declares one: its type,
//! where its samples come from, the servers that give it, and its unit; the
//! `metric!` and `family!` macros the family files are written in, and the
//! label sets and small conversions they share (flags, timestamps, IDs as
//! time), so an entry's source reads as one expression.

use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

use crate::process::ProcessStats;
use crate::snapshot::{
    Consumers, ExporterState, GroupState, PelScan, ProbeStatus, ScanState, StreamState,
    TargetSnapshot,
};
use crate::vocab::{ConsumerInfo, StreamId};

/// The type of a metric family. The text format (0.0.4) knows the first
/// three; OpenMetrics also the last two, which the text format writes as
/// the types noted. Every type's series have the same names and labels in
/// both formats: a Prometheus that negotiates OpenMetrics, as it does by
/// default, stores what one reading the text format stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    /// A value that can go up and down.
    Gauge,
    /// A value that only goes up (resets when its source resets). Its name
    /// ends in `_total`, which OpenMetrics keeps on the samples only.
    Counter,
    /// A gauge-like value written without a type.
    Untyped,
    /// A distribution as it is now (cumulative `le` buckets that may go
    /// down). The name ends in `_bucket`, which OpenMetrics keeps on the
    /// samples only; the text format writes it untyped, because a gauge with
    /// an `le` label or named `_bucket` fails `promtool check metrics`, while
    /// Prometheus stores untyped samples exactly like gauges.
    GaugeHistogram,
    /// Always 1, labels describing something; a gauge in the text format.
    /// The name ends in `_info`, which OpenMetrics keeps on the samples only.
    Info,
}

impl MetricType {
    /// The type name as written on a `# TYPE` line of the text format.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Gauge | MetricType::Info => "gauge",
            MetricType::Counter => "counter",
            MetricType::Untyped | MetricType::GaugeHistogram => "untyped",
        }
    }

    /// The type name as written on a `# TYPE` line of OpenMetrics.
    pub fn openmetrics(self) -> &'static str {
        match self {
            MetricType::Gauge => "gauge",
            MetricType::Counter => "counter",
            MetricType::Untyped => "unknown",
            MetricType::GaugeHistogram => "gaugehistogram",
            MetricType::Info => "info",
        }
    }

    /// The suffix OpenMetrics puts on the samples of a family of this type
    /// (and the catalog name of the family ends in).
    fn sample_suffix(self) -> &'static str {
        match self {
            MetricType::Counter => "_total",
            MetricType::GaugeHistogram => "_bucket",
            MetricType::Info => "_info",
            _ => "",
        }
    }
}

/// Where a family's samples come from. Each variant but [`Source::Custom`]
/// fixes the label set (checked against [`MetricDef::labels`] when samples
/// are written) and gives one value, or `None` (unknown: no sample), per
/// item it walks.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    /// Each watched stream of the targets that are up (`target`, `stream`).
    Stream(fn(&StreamState) -> Option<f64>),
    /// Each group the stream poll knows (`target`, `stream`, `group`).
    Group(fn(&StreamState, &GroupState) -> Option<f64>),
    /// Each group the PEL scan knows (`target`, `stream`, `group`).
    Scan(fn(&ScanState) -> Option<f64>),
    /// Each group the consumers probe knows (`target`, `stream`, `group`).
    GroupConsumers(fn(&Consumers) -> Option<f64>),
    /// Each consumer exported by name (`target`, `stream`, `group`,
    /// `consumer`).
    Consumer(fn(&ConsumerInfo) -> Option<f64>),
    /// Each target that is up (`target`).
    Target(fn(&TargetSnapshot) -> Option<f64>),
    /// Each target, up or not: the exporter's view of it (`target`).
    TargetHealth(fn(&TargetSnapshot) -> Option<f64>),
    /// Each probe of each target, up or not (`target`, `probe`).
    Probe(fn(&ProbeStatus) -> Option<f64>),
    /// The exporter, in `/metrics` only (no label).
    Exporter(fn(&ExporterState) -> Option<f64>),
    /// The process, in `/metrics` only (no label).
    Process(fn(&ProcessStats) -> Option<f64>),
    /// Written by its own code in the renderer.
    Custom(Custom),
}

/// The families the renderer writes by hand: their labels go beyond one
/// series per item of a [`Source`] (buckets, causes, statuses, the
/// `__other__` consumer, counters by command), or they are about the
/// render itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Custom {
    /// Cause `trimmed` and `deleted` of each group's lost entries.
    LostEntries,
    /// When each group last lost entries of each cause, where it did.
    LastLoss,
    /// Cause `trimmed` and `deleted` of each group's possibly lost entries.
    PossiblyLost,
    /// Each group's unproven intervals, by reason, where there were any.
    LossUnproven,
    /// Each group's status and the rule that decided it.
    Status,
    /// The pending summary's age of each group's oldest pending entry.
    OldestPendingAge,
    /// The larger of the PEL scan's and the pending summary's poison counts.
    Poison,
    /// The pending summary's entries released by `XNACK`.
    Nacked,
    /// Idle-time buckets of the last PEL scan.
    PendingByIdle,
    /// Delivery-count buckets of the last PEL scan.
    PendingByDeliveryCount,
    /// Pending entries by consumer, with those beyond the cap summed.
    ConsumerPending,
    /// The server's description in labels.
    TargetInfo,
    /// Page sizes by command.
    PageSizes,
    /// Commands sent, by command.
    Commands,
    /// Errors by kind, every kind written.
    Errors,
    /// Connections opened again by the reason the last one went, every
    /// reason written.
    Reconnects,
    /// Items left out of replies by kind, every kind written.
    ItemsSkipped,
    /// In `/probe` answers only: the probed target is ready.
    TargetReady,
    /// The series each target costs in this exposition.
    Series,
    /// The exporter's build, in `/metrics` only.
    BuildInfo,
    /// Label values the render shortened, in `/metrics` only.
    LabelsShortened,
    /// `/probe` requests by result, in `/metrics` only while `/probe` is on.
    ProbeRequests,
}

/// One metric family: its name, type, HELP text, label names and source.
#[derive(Clone, Copy, Debug)]
pub struct MetricDef {
    /// Full metric name, with the `redis_streams_` prefix (`process_` for
    /// the process metrics every client library exports).
    pub name: &'static str,
    /// Gauge or counter.
    pub kind: MetricType,
    /// HELP text. Values read from Redis say that the poller caches them.
    pub help: &'static str,
    /// Label names, in the order they are written.
    pub labels: &'static [&'static str],
    /// Where its samples come from.
    pub source: Source,
    /// The servers that give it.
    pub servers: Servers,
    /// What it costs a stream in lean series (`series = "lean"`).
    pub lean: Lean,
}

/// What a family writes for a stream whose `series` is lean (the default;
/// `series = "full"` writes every sample a family has). Every series must
/// earn its place: a zero that says a problem never happened costs
/// Prometheus as much as a signal, so lean leaves such samples out and
/// writes them when there is something to say. Families of targets, probes
/// and the exporter are written whole either way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lean {
    /// Written whole: what an on-call reads, alerts and panels use.
    Always,
    /// Left out when its value is this one: the value that says nothing
    /// happened (0 problems, a flag down, a scan with nothing left to read).
    /// Alerts that compare with it (`> 0`, `== 1`, `< 1`) are the same
    /// either way.
    Unless(f64),
    /// Written only for groups with pending entries: what describes the
    /// pending entries list (the PEL scan's bookkeeping, its largest idle).
    WhilePending,
    /// Per consumer: written for the consumers that hold entries longer
    /// than their group usually does (half its orphan limit or more: a
    /// crashed or stuck worker) or carry a rewritten name
    /// (`consumer_names`); the rest are counted per group. Worker restarts
    /// under random names then cost no series, busy workers included.
    Holders,
    /// Not written: the distributions, for `series = "full"` only.
    Never,
}

impl Lean {
    /// As the metric reference writes it.
    pub fn describe(self) -> String {
        match self {
            Lean::Always => "always".to_string(),
            Lean::Unless(v) => format!("unless {v}"),
            Lean::WhilePending => "while pending".to_string(),
            Lean::Holders => "long holders".to_string(),
            Lean::Never => "full only".to_string(),
        }
    }

    /// Whether lean writes `value` of a group with `pending` entries.
    pub fn keeps(self, value: f64, pending: u64) -> bool {
        match self {
            Lean::Always => true,
            Lean::Unless(nothing) => value != nothing,
            Lean::WhilePending => pending > 0,
            // The walk of the consumers picks them (`ExportedConsumer::in_lean`).
            Lean::Holders => true,
            Lean::Never => false,
        }
    }
}

/// The servers that give a family. A server that does not give it leaves
/// it absent, never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Servers {
    /// Every supported server (Redis 6.2 and later, Valkey).
    All,
    /// Servers with entries-added, entries-read and lag in `XINFO`.
    EntriesRead,
    /// Servers that report each consumer's last successful read.
    Inactive,
    /// Servers with idempotent producers.
    Idempotent,
    /// Servers with `XNACK`.
    Nack,
}

impl Servers {
    /// As the metric reference writes it.
    pub fn describe(self) -> &'static str {
        match self {
            Servers::All => "all",
            Servers::EntriesRead => "Redis 7.0+, Valkey",
            Servers::Inactive => "Redis 7.2+, Valkey",
            Servers::Idempotent => "Redis 8.6+",
            Servers::Nack => "Redis 8.8+",
        }
    }
}

impl MetricDef {
    /// The family's name in OpenMetrics: the catalog name (the samples'
    /// name) without its type's suffix.
    pub fn openmetrics_name(&self) -> &'static str {
        let suffix = self.kind.sample_suffix();
        self.name.strip_suffix(suffix).unwrap_or(self.name)
    }

    /// The unit OpenMetrics declares (`# UNIT`) and the metric reference
    /// gives: seconds, bytes or ratio, when the family's name ends in it.
    pub fn unit(&self) -> Option<&'static str> {
        if self.kind == MetricType::Info {
            return None;
        }
        let family = self.openmetrics_name();
        ["seconds", "bytes", "ratio"]
            .into_iter()
            .find(|unit| family.strip_suffix(unit).is_some_and(|f| f.ends_with('_')))
    }
}

/// Families are one by name (names are unique in [`METRICS`](super::METRICS)).
impl PartialEq for MetricDef {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for MetricDef {}

/// One family: its const, named for the code that reads it. `servers` names
/// the servers that give it when not every supported one does; `lean` what
/// it writes for lean streams when not every sample ([`Lean::Always`]).
macro_rules! metric {
    ($id:ident, $name:literal, $kind:ident $({ $($field:tt)* })?, $labels:expr, $help:literal, $source:expr $(, servers: $servers:ident)? $(, lean: $lean:expr)?) => {
        #[doc = $help]
        // The help is Prometheus HELP text, not Markdown: `[probe] target_ttl` names a section.
        #[allow(rustdoc::broken_intra_doc_links)]
        pub const $id: MetricDef = MetricDef {
            name: $name,
            kind: MetricType::$kind $({ $($field)* })?,
            help: $help,
            labels: $labels,
            source: $source,
            servers: metric!(@servers $($servers)?),
            lean: metric!(@lean $($lean)?),
        };
    };
    (@servers) => { Servers::All };
    (@servers $servers:ident) => { Servers::$servers };
    (@lean) => { Lean::Always };
    (@lean $lean:expr) => { $lean };
}

/// A family file's entries: each `metric!` and the list `$list` of all of
/// them, in order, which [`METRICS`](super::METRICS) is made of. An entry cannot be left out
/// of the list, so a family written in a family file is always rendered,
/// documented and checked.
macro_rules! family {
    ($list:ident; $(metric!($id:ident, $($entry:tt)*);)*) => {
        $(metric!($id, $($entry)*);)*
        /// This file's families, in the order they are rendered.
        pub(super) const $list: &[MetricDef] = &[$($id),*];
    };
}

// The label sets of the family files.
pub(super) const T: &[&str] = &["target"];
pub(super) const TS: &[&str] = &["target", "stream"];
pub(super) const TSG: &[&str] = &["target", "stream", "group"];
pub(super) const TSGL: &[&str] = &["target", "stream", "group", "le"];
pub(super) const TSGSR: &[&str] = &["target", "stream", "group", "status", "reason"];
pub(super) const TSGCAUSE: &[&str] = &["target", "stream", "group", "cause"];
pub(super) const TSGREASON: &[&str] = &["target", "stream", "group", "reason"];
pub(super) const TSGC: &[&str] = &["target", "stream", "group", "consumer"];
pub(super) const TP: &[&str] = &["target", "probe"];
pub(super) const TCMD: &[&str] = &["target", "command"];

/// 1 or 0.
pub(super) fn flag(on: bool) -> Option<f64> {
    Some(if on { 1.0 } else { 0.0 })
}

/// Seconds since the epoch.
pub(super) fn secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The time part of an ID of `stream`, when its IDs carry time.
pub(super) fn id_ts(stream: &StreamState, id: StreamId) -> Option<f64> {
    (stream.time_based_ids && !id.is_zero()).then(|| id.seconds())
}

pub(super) fn last_scan(scan: &ScanState) -> Option<&PelScan> {
    scan.last.as_deref()
}

/// The largest idle time of a scan's entries: 0 when there were none (nothing
/// idles), unknown when none of them had an owner.
pub(super) fn max_idle_seconds(scan: &PelScan) -> Option<f64> {
    match scan.max_idle_ms {
        Some(ms) => Some(ms as f64 / 1000.0),
        None => (scan.entries == 0).then_some(0.0),
    }
}

/// `value`, while `/probe` is on (its cap is then at least 1).
pub(super) fn probe_on(e: &ExporterState, value: u64) -> Option<f64> {
    (e.multi_target.max_targets.load(Relaxed) > 0).then_some(value as f64)
}
