//! Builds the exposition from snapshots: fresh families on every render, so
//! anything not in the snapshots is simply not written. Values that are
//! unknown (`None`) are skipped, never written as 0. Data series of a target
//! that is down are withheld; its self-metrics remain.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::catalog::{self as c, MetricDef};
use super::text::{Family, needs_escape};
use crate::redis::{ErrorKind, StreamId};
use crate::snapshot::{ExporterState, GroupState, StreamState, TargetSnapshot};
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

/// The streams of targets that are up, with the target name.
fn live(targets: &[Arc<TargetSnapshot>]) -> impl Iterator<Item = (&[u8], &[u8], &StreamState)> {
    targets.iter().filter(|t| t.up).flat_map(|t| {
        t.streams
            .iter()
            .map(move |(name, s)| (t.name.as_bytes(), &**name, &**s))
    })
}

fn groups(
    targets: &[Arc<TargetSnapshot>],
) -> impl Iterator<Item = (&[u8], &[u8], &[u8], &StreamState, &GroupState)> {
    live(targets)
        .flat_map(|(t, s, st)| st.groups.iter().map(move |(g, gs)| (t, s, &**g, st, &**gs)))
}

/// Writes the exposition of `targets` and the exporter state to `out`.
/// Returns the number of series dropped as duplicates.
pub fn render(
    targets: &[Arc<TargetSnapshot>],
    exporter: &ExporterState,
    build: BuildInfo,
    out: &mut Vec<u8>,
) -> u64 {
    let dedupe = live(targets).any(|(_, s, st)| {
        needs_escape(s)
            || st.groups.iter().any(|(g, gs)| {
                needs_escape(g)
                    || gs
                        .consumers
                        .as_ref()
                        .is_some_and(|c| c.top.iter().any(|c| needs_escape(&c.name)))
            })
    });
    let mut duplicates = 0;
    let mut family =
        |def: &'static MetricDef, out: &mut Vec<u8>, fill: &mut dyn FnMut(&mut Family<'_>)| {
            let mut f = Family::new(out, def, dedupe);
            fill(&mut f);
            duplicates += f.duplicates;
        };

    // Streams.
    family(&c::STREAM_LENGTH, out, &mut |f| {
        for (t, s, st) in live(targets) {
            f.sample(&[t, s], st.info.length as f64);
        }
    });
    family(&c::STREAM_ENTRIES_ADDED, out, &mut |f| {
        for (t, s, st) in live(targets) {
            if let Some(v) = st.info.entries_added {
                f.sample(&[t, s], v as f64);
            }
        }
    });
    family(&c::STREAM_FIRST_ENTRY_TS, out, &mut |f| {
        for (t, s, st) in live(targets) {
            if let Some(v) = st.info.first_entry_id.and_then(|id| id_ts(st, id)) {
                f.sample(&[t, s], v);
            }
        }
    });
    family(&c::STREAM_LAST_ENTRY_TS, out, &mut |f| {
        for (t, s, st) in live(targets) {
            if let Some(v) = id_ts(st, st.info.last_generated_id) {
                f.sample(&[t, s], v);
            }
        }
    });
    family(&c::STREAM_GROUPS, out, &mut |f| {
        for (t, s, st) in live(targets) {
            f.sample(&[t, s], st.groups.len() as f64);
        }
    });
    family(&c::STREAM_TIME_BASED_IDS, out, &mut |f| {
        for (t, s, st) in live(targets) {
            f.sample(&[t, s], if st.time_based_ids { 1.0 } else { 0.0 });
        }
    });
    family(&c::STREAM_DEAD_LETTER_LENGTH, out, &mut |f| {
        for (t, s, st) in live(targets) {
            if let Some(dl) = st.dead_letter {
                f.sample(&[t, s], dl.length as f64);
            }
        }
    });
    family(&c::STREAM_DEAD_LETTER_ADDED, out, &mut |f| {
        for (t, s, st) in live(targets) {
            if let Some(v) = st.dead_letter.and_then(|dl| dl.entries_added) {
                f.sample(&[t, s], v as f64);
            }
        }
    });
    family(&c::STREAM_MAX_DELAY, out, &mut |f| {
        for (t, s, st) in live(targets) {
            if let Some(d) = st.settings.max_delay {
                f.sample(&[t, s], d.as_secs_f64());
            }
        }
    });

    // Groups.
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
        (&c::GROUP_OLDEST_PENDING_AGE, |_, g| g.oldest_pending_age),
        (&c::GROUP_PENDING_MAX_IDLE, |_, g| {
            g.scan
                .as_ref()
                .map(|s| s.max_idle_ms.map_or(0.0, |ms| ms as f64 / 1000.0))
        }),
        (&c::GROUP_PENDING_POISON, |_, g| {
            g.scan.as_ref().map(|s| s.poison as f64)
        }),
        (&c::GROUP_PENDING_GHOST, |_, g| {
            g.scan.as_ref().map(|s| s.ghost as f64)
        }),
        (&c::GROUP_PENDING_GHOST_UNCHECKED, |_, g| {
            g.scan.as_ref().map(|s| s.ghost_unchecked as f64)
        }),
        (&c::GROUP_PENDING_ORPHANED, |_, g| {
            g.consumers.as_ref().map(|c| c.orphaned as f64)
        }),
    ];
    for (def, value) in group_families {
        family(def, out, &mut |f| {
            for (t, s, g, st, gs) in groups(targets) {
                if let Some(v) = value(st, gs) {
                    f.sample(&[t, s, g], v);
                }
            }
        });
    }
    family(&c::GROUP_PENDING_BY_IDLE, out, &mut |f| {
        for (t, s, g, _, gs) in groups(targets) {
            let Some(scan) = &gs.scan else { continue };
            for (le, n) in &scan.by_idle {
                f.sample(&[t, s, g, le_label(*le).as_bytes()], *n as f64);
            }
            f.sample(&[t, s, g, b"+Inf"], scan.entries as f64);
        }
    });
    family(&c::GROUP_PENDING_BY_DELIVERY_COUNT, out, &mut |f| {
        for (t, s, g, _, gs) in groups(targets) {
            let Some(scan) = &gs.scan else { continue };
            for (le, n) in &scan.by_delivery_count {
                f.sample(&[t, s, g, le.to_string().as_bytes()], *n as f64);
            }
            f.sample(&[t, s, g, b"+Inf"], scan.entries as f64);
        }
    });
    family(&c::GROUP_TRIMMED_UNDELIVERED, out, &mut |f| {
        for (t, s, g, _, gs) in groups(targets) {
            if let Some(v) = gs.trimmed_undelivered {
                f.sample(&[t, s, g], v as f64);
            }
        }
    });
    family(&c::GROUP_STATUS, out, &mut |f| {
        for (t, s, g, _, gs) in groups(targets) {
            let Some(current) = gs.status else { continue };
            for status in GroupStatus::ALL {
                f.sample(
                    &[t, s, g, status.label().as_bytes()],
                    if status == current { 1.0 } else { 0.0 },
                );
            }
        }
    });
    family(&c::GROUP_PENDING_SCAN_TS, out, &mut |f| {
        for (t, s, g, _, gs) in groups(targets) {
            if let Some(scan) = &gs.scan {
                f.sample(&[t, s, g], secs(scan.finished_at));
            }
        }
    });
    family(&c::GROUP_PENDING_SCAN_PROGRESS, out, &mut |f| {
        for (t, s, g, _, gs) in groups(targets) {
            if let Some(p) = gs.scan_progress {
                f.sample(&[t, s, g], p);
            }
        }
    });

    // Consumers.
    const OTHER: &[u8] = b"__other__";
    family(&c::CONSUMER_PENDING, out, &mut |f| {
        for (t, s, g, _, gs) in groups(targets) {
            let Some(cs) = &gs.consumers else { continue };
            for consumer in &cs.top {
                f.sample(&[t, s, g, &consumer.name], consumer.pending as f64);
            }
            if let Some(other) = cs.other_pending {
                f.sample(&[t, s, g, OTHER], other as f64);
            }
        }
    });
    family(&c::CONSUMER_IDLE, out, &mut |f| {
        for (t, s, g, _, gs) in groups(targets) {
            let Some(cs) = &gs.consumers else { continue };
            for consumer in &cs.top {
                f.sample(&[t, s, g, &consumer.name], consumer.idle_ms as f64 / 1000.0);
            }
        }
    });
    family(&c::CONSUMER_INACTIVE, out, &mut |f| {
        for (t, s, g, _, gs) in groups(targets) {
            let Some(cs) = &gs.consumers else { continue };
            for consumer in &cs.top {
                if let Some(ms) = consumer.inactive_ms {
                    f.sample(&[t, s, g, &consumer.name], ms as f64 / 1000.0);
                }
            }
        }
    });

    // Targets.
    let up = || targets.iter().filter(|t| t.up);
    family(&c::TARGET_INFO, out, &mut |f| {
        for t in up() {
            if let Some(i) = &t.server {
                let labels: [&[u8]; 5] = [
                    t.name.as_bytes(),
                    i.server.as_bytes(),
                    i.version.as_bytes(),
                    i.mode.as_bytes(),
                    i.maxmemory_policy.as_bytes(),
                ];
                f.sample(&labels, 1.0);
            }
        }
    });
    family(&c::TARGET_MAXMEMORY, out, &mut |f| {
        for t in up() {
            if let Some(v) = t.server.as_ref().and_then(|i| i.maxmemory) {
                f.sample(&[t.name.as_bytes()], v as f64);
            }
        }
    });
    family(&c::TARGET_USED_MEMORY, out, &mut |f| {
        for t in up() {
            if let Some(v) = t.server.as_ref().and_then(|i| i.used_memory) {
                f.sample(&[t.name.as_bytes()], v as f64);
            }
        }
    });

    // The exporter itself, for every target whatever its state.
    family(&c::EXPORTER_TARGET_UP, out, &mut |f| {
        for t in targets {
            f.sample(&[t.name.as_bytes()], if t.up { 1.0 } else { 0.0 });
        }
    });
    family(&c::EXPORTER_PROBE_SUCCESS, out, &mut |f| {
        for t in targets {
            for (kind, p) in &t.probes {
                f.sample(
                    &[t.name.as_bytes(), kind.label().as_bytes()],
                    if p.success { 1.0 } else { 0.0 },
                );
            }
        }
    });
    family(&c::EXPORTER_PROBE_DURATION, out, &mut |f| {
        for t in targets {
            for (kind, p) in &t.probes {
                f.sample(
                    &[t.name.as_bytes(), kind.label().as_bytes()],
                    p.duration.as_secs_f64(),
                );
            }
        }
    });
    family(&c::EXPORTER_PROBE_LAST_SUCCESS, out, &mut |f| {
        for t in targets {
            for (kind, p) in &t.probes {
                if let Some(at) = p.last_success {
                    f.sample(&[t.name.as_bytes(), kind.label().as_bytes()], secs(at));
                }
            }
        }
    });
    family(&c::EXPORTER_COMMANDS, out, &mut |f| {
        for t in targets {
            for (command, n) in &t.stats.commands {
                f.sample(&[t.name.as_bytes(), command.as_bytes()], *n as f64);
            }
        }
    });
    family(&c::EXPORTER_ERRORS, out, &mut |f| {
        for t in targets {
            for kind in ErrorKind::ALL {
                let n = t.stats.errors.get(kind.label()).copied().unwrap_or(0);
                f.sample(&[t.name.as_bytes(), kind.label().as_bytes()], n as f64);
            }
        }
    });
    family(&c::EXPORTER_STREAMS, out, &mut |f| {
        for t in targets {
            if let Some(n) = t.streams_watched {
                f.sample(&[t.name.as_bytes()], n as f64);
            }
        }
    });
    family(&c::EXPORTER_STREAMS_DROPPED, out, &mut |f| {
        for t in targets {
            if let Some(n) = t.streams_dropped {
                f.sample(&[t.name.as_bytes()], n as f64);
            }
        }
    });
    family(&c::EXPORTER_RATE_LIMITED, out, &mut |f| {
        for t in targets {
            f.sample(&[t.name.as_bytes()], t.stats.rate_limited_seconds);
        }
    });
    family(&c::EXPORTER_PENDING_SCANNED, out, &mut |f| {
        for t in targets {
            f.sample(&[t.name.as_bytes()], t.stats.pending_scanned as f64);
        }
    });
    family(&c::EXPORTER_BUILD_INFO, out, &mut |f| {
        f.sample(&[build.version.as_bytes(), build.revision.as_bytes()], 1.0);
    });
    family(&c::EXPORTER_CONFIG_RELOADS, out, &mut |f| {
        f.sample(&[], exporter.reloads.load(Ordering::Relaxed) as f64);
    });
    family(&c::EXPORTER_CONFIG_RELOAD_FAILURES, out, &mut |f| {
        f.sample(&[], exporter.reload_failures.load(Ordering::Relaxed) as f64);
    });
    family(&c::EXPORTER_CONFIG_LAST_RELOAD_OK, out, &mut |f| {
        f.sample(
            &[],
            if exporter.last_reload_ok.load(Ordering::Relaxed) {
                1.0
            } else {
                0.0
            },
        );
    });
    duplicates
}

/// `le` label of an idle bucket in seconds.
fn le_label(le: f64) -> String {
    let mut out = Vec::new();
    super::text::write_value(&mut out, le);
    String::from_utf8_lossy(&out).into_owned()
}
