//! Builds the exposition from snapshots: fresh families on every render, so
//! anything not in the snapshots is simply not written. Values that are
//! unknown (`None`) are skipped, never written as 0. Data series of a target
//! that is down are withheld; its self-metrics remain.
//!
//! Label sets are escaped once per target, stream and group and reused by
//! every family; output streams through a [`Sink`], so rendering 10 000
//! streams needs no more memory than its compressed result.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::catalog::{self as c, MetricDef};
use super::text::{Family, Labels, Sink, needs_escape, write_value};
use crate::redis::{ErrorKind, StreamId};
use crate::snapshot::{
    Consumers, ExporterState, GroupState, PelScan, ScanState, StreamState, TargetSnapshot,
};
use crate::status::GroupStatus;

/// The exporter's own version, for `build_info`.
#[derive(Clone, Copy, Debug)]
pub struct BuildInfo {
    /// Crate version.
    pub version: &'static str,
    /// Source revision.
    pub revision: &'static str,
}

impl BuildInfo {
    /// This build.
    pub const CURRENT: BuildInfo = BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        revision: match option_env!("RSE_GIT_REVISION") {
            Some(r) => r,
            None => "unknown",
        },
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

struct TargetRow<'a> {
    labels: Labels,
    snap: &'a TargetSnapshot,
}

struct StreamRow<'a> {
    labels: Labels,
    state: &'a StreamState,
}

impl GroupRow<'_> {
    fn last_scan(&self) -> Option<&PelScan> {
        self.scan.and_then(|s| s.last.as_deref())
    }
}

/// A group with everything the probes know of it, joined once per render.
struct GroupRow<'a> {
    labels: Labels,
    stream: &'a StreamState,
    state: &'a GroupState,
    oldest_pending_age: Option<f64>,
    consumers: Option<&'a Consumers>,
    scan: Option<&'a ScanState>,
}

/// Writes the exposition of `targets` and the exporter state to `out` and
/// returns the writer and the number of series dropped as duplicates.
///
/// # Errors
/// When `out` fails.
pub fn render<W: Write>(
    targets: &[Arc<TargetSnapshot>],
    exporter: &ExporterState,
    build: BuildInfo,
    out: W,
) -> io::Result<(W, u64)> {
    let target_rows: Vec<TargetRow<'_>> = targets
        .iter()
        .map(|t| TargetRow {
            labels: Labels::new().with("target", t.name.as_bytes()),
            snap: t,
        })
        .collect();
    let mut streams = Vec::new();
    let mut groups = Vec::new();
    let mut dedupe = false;
    for t in target_rows.iter().filter(|t| t.snap.up) {
        let snap = t.snap;
        for (name, state) in &snap.streams {
            dedupe |= needs_escape(name);
            let labels = t.labels.with("stream", name);
            for (g, gs) in &state.groups {
                let key = (name.clone(), g.clone());
                let consumers = snap.consumers.get(&key).map(|c| &**c);
                dedupe |= needs_escape(g)
                    || consumers.is_some_and(|c| c.top.iter().any(|c| needs_escape(&c.name)));
                groups.push(GroupRow {
                    labels: labels.with("group", g),
                    stream: state,
                    state: gs,
                    oldest_pending_age: snap.oldest_pending_age.get(&key).copied(),
                    consumers,
                    scan: snap.scans.get(&key),
                });
            }
            streams.push(StreamRow { labels, state });
        }
    }
    let mut sink = Sink::new(out);
    let mut duplicates = 0;
    let mut family =
        |sink: &mut Sink<W>, def: &'static MetricDef, fill: &mut dyn FnMut(&mut Family<'_, W>)| {
            let mut f = Family::new(sink, def, dedupe);
            fill(&mut f);
            duplicates += f.duplicates;
        };

    // Streams.
    type StreamValue = fn(&StreamState) -> Option<f64>;
    let stream_families: [(&'static MetricDef, StreamValue); 9] = [
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
        (&c::STREAM_GROUPS, |s| Some(s.groups.len() as f64)),
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
    ];
    for (def, value) in stream_families {
        family(&mut sink, def, &mut |f| {
            for row in &streams {
                if let Some(v) = value(row.state) {
                    f.sample(&row.labels, None, v);
                }
            }
        });
    }

    // Groups.
    type GroupValue = fn(&GroupRow<'_>) -> Option<f64>;
    let group_families: [(&'static MetricDef, GroupValue); 16] = [
        (&c::GROUP_LAG, |r| r.state.lag.map(|v| v as f64)),
        (&c::GROUP_LAG_ESTIMATED, |r| {
            Some(if r.state.lag_estimated { 1.0 } else { 0.0 })
        }),
        (&c::GROUP_LAG_SECONDS, |r| r.state.lag_seconds),
        (&c::GROUP_ENTRIES_READ, |r| {
            r.state.info.entries_read.map(|v| v as f64)
        }),
        (&c::GROUP_LAST_DELIVERED_TS, |r| {
            id_ts(r.stream, r.state.info.last_delivered_id)
        }),
        (&c::GROUP_CONSUMERS, |r| Some(r.state.info.consumers as f64)),
        (&c::GROUP_PENDING, |r| Some(r.state.info.pending as f64)),
        (&c::GROUP_OLDEST_PENDING_AGE, |r| r.oldest_pending_age),
        (&c::GROUP_PENDING_MAX_IDLE, |r| {
            r.last_scan()
                .map(|s| s.max_idle_ms.map_or(0.0, |ms| ms as f64 / 1000.0))
        }),
        (&c::GROUP_PENDING_POISON, |r| {
            r.last_scan().map(|s| s.poison as f64)
        }),
        (&c::GROUP_PENDING_GHOST, |r| {
            r.last_scan().map(|s| s.ghost as f64)
        }),
        (&c::GROUP_PENDING_GHOST_UNCHECKED, |r| {
            r.last_scan().map(|s| s.ghost_unchecked as f64)
        }),
        (&c::GROUP_PENDING_ORPHANED, |r| {
            r.consumers.map(|c| c.orphaned as f64)
        }),
        (&c::GROUP_TRIMMED_UNDELIVERED, |r| {
            r.state.trimmed_undelivered.map(|v| v as f64)
        }),
        (&c::GROUP_PENDING_SCAN_TS, |r| {
            r.last_scan().map(|s| secs(s.finished_at))
        }),
        (&c::GROUP_PENDING_SCAN_PROGRESS, |r| {
            r.scan.map(|s| s.progress)
        }),
    ];
    for (def, value) in group_families {
        family(&mut sink, def, &mut |f| {
            for row in &groups {
                if let Some(v) = value(row) {
                    f.sample(&row.labels, None, v);
                }
            }
        });
    }
    let mut le = Vec::with_capacity(24);
    family(&mut sink, &c::GROUP_PENDING_BY_IDLE, &mut |f| {
        for row in &groups {
            let Some(scan) = row.last_scan() else {
                continue;
            };
            for (bound, n) in scan.by_idle() {
                le.clear();
                write_value(&mut le, bound);
                f.sample(&row.labels, Some(("le", &le)), n as f64);
            }
            f.sample(&row.labels, Some(("le", b"+Inf")), scan.entries as f64);
        }
    });
    family(&mut sink, &c::GROUP_PENDING_BY_DELIVERY_COUNT, &mut |f| {
        for row in &groups {
            let Some(scan) = row.last_scan() else {
                continue;
            };
            for (bound, n) in scan.by_delivery_count() {
                f.sample(
                    &row.labels,
                    Some(("le", itoa::Buffer::new().format(bound).as_bytes())),
                    n as f64,
                );
            }
            f.sample(&row.labels, Some(("le", b"+Inf")), scan.entries as f64);
        }
    });
    family(&mut sink, &c::GROUP_STATUS, &mut |f| {
        for row in &groups {
            let Some(current) = row.state.status else {
                continue;
            };
            for status in GroupStatus::ALL {
                let on = if status == current { 1.0 } else { 0.0 };
                f.sample(&row.labels, Some(("status", status.label().as_bytes())), on);
            }
        }
    });

    // Consumers.
    family(&mut sink, &c::CONSUMER_PENDING, &mut |f| {
        for row in &groups {
            let Some(cs) = row.consumers else {
                continue;
            };
            for consumer in &cs.top {
                f.sample(
                    &row.labels,
                    Some(("consumer", &consumer.name)),
                    consumer.pending as f64,
                );
            }
            if let Some(other) = cs.other_pending {
                f.sample(&row.labels, Some(("consumer", b"__other__")), other as f64);
            }
        }
    });
    family(&mut sink, &c::CONSUMER_IDLE, &mut |f| {
        for row in &groups {
            let Some(cs) = row.consumers else {
                continue;
            };
            for consumer in &cs.top {
                f.sample(
                    &row.labels,
                    Some(("consumer", &consumer.name)),
                    consumer.idle_ms as f64 / 1000.0,
                );
            }
        }
    });
    family(&mut sink, &c::CONSUMER_INACTIVE, &mut |f| {
        for row in &groups {
            let Some(cs) = row.consumers else {
                continue;
            };
            for consumer in &cs.top {
                if let Some(ms) = consumer.inactive_ms {
                    f.sample(
                        &row.labels,
                        Some(("consumer", &consumer.name)),
                        ms as f64 / 1000.0,
                    );
                }
            }
        }
    });

    // Targets that are up.
    family(&mut sink, &c::TARGET_INFO, &mut |f| {
        for t in target_rows.iter().filter(|t| t.snap.up) {
            if let Some(i) = &t.snap.server {
                let labels = t
                    .labels
                    .with("server", i.server.as_bytes())
                    .with("version", i.version.as_bytes())
                    .with("mode", i.mode.as_bytes());
                f.sample(
                    &labels,
                    Some(("maxmemory_policy", i.maxmemory_policy.as_bytes())),
                    1.0,
                );
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
        family(&mut sink, def, &mut |f| {
            for t in target_rows.iter().filter(|t| t.snap.up) {
                if let Some(v) = value(t.snap) {
                    f.sample(&t.labels, None, v);
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
        family(&mut sink, def, &mut |f| {
            for t in &target_rows {
                if let Some(v) = value(t.snap) {
                    f.sample(&t.labels, None, v);
                }
            }
        });
    }
    type ProbeValue = fn(&crate::snapshot::ProbeStatus) -> Option<f64>;
    let probe_families: [(&'static MetricDef, ProbeValue); 3] = [
        (&c::EXPORTER_PROBE_SUCCESS, |p| {
            Some(if p.success { 1.0 } else { 0.0 })
        }),
        (&c::EXPORTER_PROBE_DURATION, |p| {
            Some(p.duration.as_secs_f64())
        }),
        (&c::EXPORTER_PROBE_LAST_SUCCESS, |p| {
            p.last_success.map(secs)
        }),
    ];
    for (def, value) in probe_families {
        family(&mut sink, def, &mut |f| {
            for t in &target_rows {
                for (kind, p) in &t.snap.probes {
                    if let Some(v) = value(p) {
                        f.sample(&t.labels, Some(("probe", kind.label().as_bytes())), v);
                    }
                }
            }
        });
    }
    family(&mut sink, &c::EXPORTER_COMMANDS, &mut |f| {
        for t in &target_rows {
            for (command, n) in &t.snap.stats.commands {
                f.sample(&t.labels, Some(("command", command.as_bytes())), *n as f64);
            }
        }
    });
    family(&mut sink, &c::EXPORTER_ERRORS, &mut |f| {
        for t in &target_rows {
            for kind in ErrorKind::ALL {
                let n = t.snap.stats.errors.get(kind.label()).copied().unwrap_or(0);
                f.sample(&t.labels, Some(("kind", kind.label().as_bytes())), n as f64);
            }
        }
    });
    family(&mut sink, &c::EXPORTER_BUILD_INFO, &mut |f| {
        let labels = Labels::new().with("version", build.version.as_bytes());
        f.sample(&labels, Some(("revision", build.revision.as_bytes())), 1.0);
    });
    let none = Labels::new();
    family(&mut sink, &c::EXPORTER_CONFIG_RELOADS, &mut |f| {
        f.sample(&none, None, exporter.reloads.load(Ordering::Relaxed) as f64);
    });
    family(&mut sink, &c::EXPORTER_CONFIG_RELOAD_FAILURES, &mut |f| {
        f.sample(
            &none,
            None,
            exporter.reload_failures.load(Ordering::Relaxed) as f64,
        );
    });
    family(&mut sink, &c::EXPORTER_CONFIG_LAST_RELOAD_OK, &mut |f| {
        f.sample(
            &none,
            None,
            if exporter.last_reload_ok.load(Ordering::Relaxed) {
                1.0
            } else {
                0.0
            },
        );
    });
    Ok((sink.finish()?, duplicates))
}
