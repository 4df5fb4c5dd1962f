//! The golden exposition: a fixed, hand-built set of snapshots that makes
//! every family of the catalog appear, rendered and compared byte for byte
//! with `tests/golden/exposition.prom` (what `/metrics` serves) and
//! `tests/golden/probe_answer.prom` (what `/probe` answers), both checked
//! with `promtool check metrics`. `scripts/regen.sh` rewrites the files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use super::renderer::BuildInfo;
use super::{render, render_probe_answer};
use crate::config::{Series, StreamSettings};
use crate::loss::ByCause;
use crate::metrics::catalog::METRICS;
use crate::process::ProcessStats;
use crate::snapshot::{
    Consumers, DeadLetter, ExportedConsumer, ExporterState, GroupState, Groups, Name,
    OldestPending, PelScan, ProbeStatus, ScanState, ServerInfo, StreamState, TargetSnapshot,
};
use crate::status::{Basis, GroupStatus};
use crate::vocab::{ClientTrackingStats, ExtraPollStats, KeyspaceEventsStats, StatsSnapshot};
use crate::vocab::{ConsumerInfo, ProbeKind};
use crate::vocab::{Idempotence, StreamId, StreamInfo};

/// A fixed instant: 2026-12-01T00:00:00Z.
const NOW_S: u64 = 1_796_083_200;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn name(s: &[u8]) -> Name {
    Arc::from(s)
}

fn id(ms: u64) -> StreamId {
    StreamId::new(ms, 0)
}

/// A group as the stream poll leaves it, with every optional figure known.
pub(super) fn group(pending: u64, lag: Option<u64>) -> GroupState {
    GroupState {
        consumers: 2,
        pending,
        last_delivered_id: id(NOW_S * 1000 - 30_000),
        entries_read: Some(1_000),
        lag,
        lag_estimated: false,
        lag_seconds: lag.map(|_| 12.5),
        trimmed_undelivered: Some(0),
        lost: Some(ByCause {
            trimmed: 3,
            deleted: 1,
            either: 2,
        }),
        lost_at: crate::loss::LossTimes {
            trimmed: Some(NOW_S * 1000 - 90_000),
            deleted: None,
            either: Some(NOW_S * 1000 - 60_000),
        },
        rewinds: 0,
        rewound_at_ms: None,
        possibly_lost: Some(ByCause {
            trimmed: 0,
            deleted: 7,
            either: 0,
        }),
        loss_unproven: crate::loss::Unproven {
            order_unknown: 2,
            ..Default::default()
        },
        ahead_of_stream: false,
        retention_margin: Some(3_600.0),
        overtake_eta: Some(86_400.0),
        drain_eta: Some(40.0),
        read_interval: Some(14.2),
        read_every: Some(480.0),
        last_read_at_ms: Some(NOW_S * 1000 - 4_000),
        status: Some(GroupStatus::Lagging),
        status_basis: Some(Basis::Window),
        status_reason: Some(crate::status::Reason::KeepingUp),
        pending_aged_at_ms: (pending > 0).then_some(NOW_S * 1000),
    }
}

/// A stream with time-based IDs and every optional figure known.
pub(super) fn stream(length: u64, groups: Vec<(Name, GroupState)>) -> StreamState {
    StreamState {
        info: StreamInfo {
            length,
            groups: groups.len() as u64,
            last_generated_id: id(NOW_S * 1000 - 1_000),
            first_entry_id: Some(id(NOW_S * 1000 - 7_200_000)),
            entries_added: Some(length + 400),
            max_deleted_entry_id: Some(StreamId::default()),
            radix_tree_keys: Some(4),
            radix_tree_nodes: Some(9),
            idempotence: Idempotence {
                producers: Some(2),
                ids: Some(150),
                ids_added: Some(600),
                duplicates: Some(7),
            },
            ..StreamInfo::default()
        },
        time_based_ids: true,
        settings: Arc::new(StreamSettings {
            max_delay: Some(Duration::from_secs(300)),
            read_every: Some(Duration::from_secs(3600)),
            series: Series::Full,
            ..StreamSettings::default()
        }),
        dead_letter: Some(DeadLetter {
            length: 2,
            entries_added: Some(5),
            oldest_age: Some(90.0),
        }),
        groups: Groups::new(groups),
        groups_dropped: 2,
    }
}

fn consumer(name: &[u8], pending: u64, inactive_ms: Option<u64>) -> ExportedConsumer {
    ExportedConsumer {
        info: ConsumerInfo {
            name: name.to_vec(),
            pending,
            idle_ms: 1_500,
            inactive_ms,
            never_active: false,
        },
        renamed: false,
        holds_long: pending > 0 && inactive_ms.is_none_or(|ms| ms >= 150_000),
    }
}

/// The consumers of a group: two holding entries, a rewritten name holding
/// none (lean keeps it), one holding none (lean leaves it out), and what
/// the consumers beyond the cap hold.
fn consumers() -> Consumers {
    let mut kind = consumer(b"reaper", 0, Some(20_000));
    kind.renamed = true;
    Consumers {
        top: vec![
            consumer(b"worker-1", 5, Some(1_000)),
            // Longer than the label limit: shortened, with a hash.
            consumer(&[b'w'; 100], 1, None),
            kind,
            consumer(b"worker-2", 0, Some(2_000)),
        ],
        other_pending: Some(1),
        live: 3,
        stale: 1,
        orphaned: 1,
        inactive_after: std::time::Duration::from_secs(300),
    }
}

fn probes() -> BTreeMap<ProbeKind, ProbeStatus> {
    ProbeKind::ALL
        .into_iter()
        .map(|kind| {
            let ok = kind != ProbeKind::Consumers;
            let status = ProbeStatus {
                success: ok,
                duration: Duration::from_millis(25),
                last_success: ok.then(|| at(NOW_S - 5)),
                interval: Some(Duration::from_secs(15)),
                last_error: (!ok).then(|| Arc::from("timeout")),
                commands: 30,
                one_off: 0,
                achieved_interval: Some(Duration::from_millis(15_250)),
                started_at: None,
                panics: u64::from(kind == ProbeKind::PendingScan),
            };
            (kind, status)
        })
        .collect()
}

fn stats() -> StatsSnapshot {
    StatsSnapshot {
        commands: BTreeMap::from([("xinfo_stream", 40), ("xpending", 12), ("asking", 1)]),
        errors: BTreeMap::from([("timeout", 2)]),
        reconnects: BTreeMap::from([("closed", 5), ("timeout", 1)]),
        skipped: BTreeMap::from([("group", 1), ("key", 3)]),
        rate_limited_seconds: 0.75,
        pending_scanned: 5_000,
        page_sizes: BTreeMap::from([("scan", 1_000), ("xpending_range", 250)]),
        keyspace_events: Some(KeyspaceEventsStats {
            received: 42,
            dropped: 3,
            active: true,
        }),
        client_tracking: Some(ClientTrackingStats {
            active: true,
            invalidations: 230,
            dropped: 0,
        }),
        extra_polls: Some(ExtraPollStats { run: 7, skipped: 2 }),
    }
}

/// The fixed snapshots: `main` up with two streams (one with time-based
/// IDs and every figure, one with explicit IDs and unknown lag, whose name
/// needs escaping), and `down`, which is not up: only its self-metrics.
pub(super) fn targets() -> Vec<Arc<TargetSnapshot>> {
    let orders = name(b"orders");
    let odd = name(b"jobs \"odd\"\\\xff");
    let (billing, audit) = (name(b"billing"), name(b"audit"));
    let payments = name(b"payments");
    let mut estimated = group(7, Some(20));
    estimated.lag_estimated = true;
    estimated.rewinds = 1;
    estimated.rewound_at_ms = Some(NOW_S * 1000 - 120_000);
    estimated.status = Some(GroupStatus::Stalled);
    // Past its stream's max_delay (300 s): outside the objective.
    estimated.lag_seconds = Some(420.0);
    let mut unknown = group(0, None);
    unknown.lag_estimated = true;
    unknown.lost = None;
    unknown.trimmed_undelivered = None;
    unknown.status = None;
    unknown.retention_margin = None;
    unknown.overtake_eta = None;
    unknown.drain_eta = None;
    unknown.read_interval = None;
    unknown.read_every = None;
    let mut explicit = stream(3, vec![(audit.clone(), unknown)]);
    explicit.time_based_ids = false;
    explicit.info.entries_added = None;
    explicit.dead_letter = None;
    explicit.settings = Arc::new(StreamSettings::default());
    let full = stream(
        120,
        vec![
            (billing.clone(), estimated),
            (audit.clone(), group(0, Some(0))),
        ],
    );
    // The same stream in lean series: what they leave out shows beside it.
    let mut lean = full.clone();
    lean.settings = Arc::new(StreamSettings {
        series: Series::Lean,
        ..(*full.settings).clone()
    });
    let streams = BTreeMap::from([
        (orders.clone(), Arc::new(full)),
        (payments.clone(), Arc::new(lean)),
        (odd.clone(), Arc::new(explicit)),
    ]);
    let key = |s: &Name, g: &Name| (s.clone(), g.clone());
    let scan = PelScan {
        finished_at: at(NOW_S - 60),
        entries: 7,
        max_idle_ms: Some(95_000),
        idle_bounds: Arc::from(&[10.0, 60.0, 0.5e3][..]),
        idle_counts: Box::from(&[2, 5, 7][..]),
        delivery_bounds: Arc::from(&[1, 5][..]),
        delivery_counts: Box::from(&[4, 6][..]),
        poison: 1,
        ghost: 1,
        ghost_unchecked: 0,
    };
    let main = TargetSnapshot {
        name: "main".into(),
        up: true,
        held: false,
        ready: true,
        server: Some(ServerInfo {
            server: "redis".into(),
            version: "7.4.2".into(),
            mode: "standalone".into(),
            maxmemory_policy: "noeviction".into(),
            maxmemory: Some(0),
            used_memory: Some(2_097_152),
            run_id: "f00d".into(),
        }),
        streams_watched: Some(2),
        streams_dropped: Some(0),
        streams: Arc::new(streams),
        // Read 5 s before the stream poll, which ages it: 42 s old.
        oldest_pending: Arc::new(
            [&orders, &payments]
                .map(|s| {
                    let oldest = OldestPending {
                        id: id(NOW_S * 1000 - 42_000),
                        read_at_ms: NOW_S * 1000 - 5_000,
                    };
                    (key(s, &billing), oldest)
                })
                .into(),
        ),
        head_poison: Arc::new([&orders, &payments].map(|s| (key(s, &billing), 2)).into()),
        // A server with XNACK: two entries released in one group, none in
        // the other.
        nacked: Arc::new(
            [&orders, &payments]
                .into_iter()
                .flat_map(|s| [(key(s, &billing), 2), (key(s, &audit), 0)])
                .collect(),
        ),
        consumers: Arc::new(
            [&orders, &payments]
                .map(|s| (key(s, &billing), Arc::new(consumers())))
                .into(),
        ),
        scans: Arc::new(
            [&orders, &payments]
                .into_iter()
                .flat_map(|s| {
                    [
                        (
                            key(s, &billing),
                            ScanState {
                                last: Some(Arc::new(scan.clone())),
                                progress: 1.0,
                            },
                        ),
                        (
                            key(s, &audit),
                            ScanState {
                                last: None,
                                progress: 0.25,
                            },
                        ),
                    ]
                })
                .collect(),
        ),
        probes: probes(),
        stats: stats(),
    };
    let down = TargetSnapshot {
        name: "down".into(),
        up: false,
        ready: false,
        // Data the target had before it went down stays unwritten.
        streams: main.streams.clone(),
        probes: BTreeMap::from([(ProbeKind::Discovery, ProbeStatus::default())]),
        stats: StatsSnapshot {
            errors: BTreeMap::from([("connection", 4)]),
            ..StatsSnapshot::default()
        },
        ..TargetSnapshot::default()
    };
    vec![Arc::new(down), Arc::new(main)]
}

/// The exporter's own state, with `/probe` on.
pub(super) fn exporter() -> ExporterState {
    let e = ExporterState {
        process: Some(ProcessStats {
            cpu_seconds: Some(12.5),
            resident_memory_bytes: Some(20_971_520),
            virtual_memory_bytes: Some(104_857_600),
            open_fds: Some(17),
            max_fds: Some(1_024),
            start_time_seconds: Some((NOW_S - 3_600) as f64),
        }),
        ..ExporterState::default()
    };
    e.label_limit.store(LABEL_LIMIT, Ordering::Relaxed);
    e.reloads.store(3, Ordering::Relaxed);
    e.reload_failures.store(1, Ordering::Relaxed);
    e.last_reload_ok.store(false, Ordering::Relaxed);
    e.multi_target.targets.store(1, Ordering::Relaxed);
    e.multi_target.max_targets.store(100, Ordering::Relaxed);
    e.multi_target.expired.store(2, Ordering::Relaxed);
    e.multi_target.request("ok");
    e.multi_target.request("not_allowed");
    e
}

/// `metrics.max_label_value_bytes` of the fixture.
const LABEL_LIMIT: usize = 64;

const BUILD: BuildInfo = BuildInfo {
    version: "1.2.3",
    revision: "0123456789ab",
    build_date: "2026-12-01T00:00:00Z",
};

fn golden_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file)
}

/// Compares `text` with the golden file, or rewrites it (see
/// [`crate::derived`]).
fn compare(file: &str, text: &str) {
    if let Err(e) = crate::derived::compare_or_rewrite(&golden_path(file), text, "the render") {
        panic!("{e}");
    }
}

/// `promtool check metrics` on a golden file; promtool must be installed.
fn promtool_check(file: &str) {
    let path = golden_path(file);
    let out = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::from(std::fs::File::open(&path).unwrap()))
        .output()
        .unwrap_or_else(|e| panic!("promtool (Debian package prometheus) is needed: {e}"));
    assert!(
        out.status.success(),
        "promtool check metrics {}:\n{}{}",
        path.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The OpenMetrics form of a text exposition, as the daemon serves it.
fn openmetrics(text: &str) -> String {
    let mut w = crate::metrics::openmetrics::to_openmetrics(Vec::new());
    std::io::Write::write_all(&mut w, text.as_bytes()).unwrap();
    let mut out = w.finish().unwrap();
    out.extend_from_slice(crate::metrics::openmetrics::EOF);
    String::from_utf8(out).unwrap()
}

/// A golden OpenMetrics file through the strict parser of the Python
/// client library (`tests/openmetrics/check.py`; scripts/test.sh installs
/// prometheus_client into `.cache/python`): what it says of each family.
fn openmetrics_check(file: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("tests/openmetrics/check.py"))
        .arg(golden_path(file))
        .env("PYTHONPATH", root.join(".cache/python"))
        .output()
        .unwrap_or_else(|e| panic!("python3 is needed: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{file} (prometheus_client in .cache/python: scripts/test.sh --prepare installs it):\n{said}"
    );
    said
}

/// Family names in an exposition (from its `# TYPE` lines).
fn families(text: &str) -> BTreeSet<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect()
}

/// The fixture shows only states the stream poll can produce: a lag it
/// could not know is marked estimated (`LagFigure::estimated` is true for
/// `LagMethod::Unknown`), never shown as Redis's count.
#[test]
fn the_fixture_holds_only_states_the_stream_poll_produces() {
    let unknown = crate::lag::LagFigure {
        lag: None,
        method: crate::lag::LagMethod::Unknown,
        trimmed_undelivered: None,
        unread_gone: None,
        first_undelivered: None,
        behind_first_entry: false,
        ahead_of_stream: false,
    };
    assert!(unknown.estimated());
    for t in targets() {
        for (s, st) in t.streams.iter() {
            for (g, gs) in st.groups.iter() {
                assert!(
                    gs.lag.is_some() || gs.lag_estimated,
                    "{}/{}: lag absent with lag_estimated 0",
                    String::from_utf8_lossy(s),
                    String::from_utf8_lossy(g)
                );
                assert!(
                    st.time_based_ids || gs.lag_seconds.is_none(),
                    "{}/{}: an age without time-based IDs",
                    String::from_utf8_lossy(s),
                    String::from_utf8_lossy(g)
                );
            }
        }
    }
}

#[test]
fn golden_exposition_and_probe_answer() {
    let targets = targets();
    let (out, counts) = render(&targets, &exporter(), BUILD, Vec::new()).unwrap();
    assert_eq!((counts.duplicates, counts.shortened), (0, 4));
    let metrics = String::from_utf8(out).unwrap();
    compare("exposition.prom", &metrics);
    promtool_check("exposition.prom");

    let main = targets.iter().find(|t| &*t.name == "main").unwrap();
    let out = render_probe_answer(main, LABEL_LIMIT, Vec::new()).unwrap();
    let probe = String::from_utf8(out).unwrap();
    compare("probe_answer.prom", &probe);
    promtool_check("probe_answer.prom");

    // Each target's series are what redis_streams_exporter_series says, in
    // both answers.
    for (text, targets) in [(&metrics, &["main", "down"][..]), (&probe, &["main"][..])] {
        for target in targets {
            let label = format!("{{target=\"{target}\"");
            let written = text
                .lines()
                .filter(|l| !l.starts_with('#') && l.contains(&label))
                .count();
            let said = format!("redis_streams_exporter_series{{target=\"{target}\"}} {written}\n");
            assert!(
                text.contains(&said),
                "{target}: {written} series written:\n{text}"
            );
        }
    }

    // Within the objective where max_delay is set and the lag in seconds
    // known (12.5 s and 420 s against 300 s), absent elsewhere; lean series
    // keep it.
    let within: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("redis_streams_group_within_objective{"))
        .collect();
    assert_eq!(
        within,
        [
            "redis_streams_group_within_objective{target=\"main\",stream=\"orders\",group=\"audit\"} 1",
            "redis_streams_group_within_objective{target=\"main\",stream=\"orders\",group=\"billing\"} 0",
            "redis_streams_group_within_objective{target=\"main\",stream=\"payments\",group=\"audit\"} 1",
            "redis_streams_group_within_objective{target=\"main\",stream=\"payments\",group=\"billing\"} 0",
        ],
        "{metrics}"
    );

    // The same in OpenMetrics, judged by a strict parser: every family
    // there, with its OpenMetrics type.
    compare("exposition.om", &openmetrics(&metrics));
    compare("probe_answer.om", &openmetrics(&probe));
    let parsed = openmetrics_check("exposition.om") + &openmetrics_check("probe_answer.om");
    for def in METRICS {
        let line = format!("{} {} ", def.kind.openmetrics(), def.openmetrics_name());
        assert!(parsed.contains(&line), "{line}: not parsed:\n{parsed}");
    }

    // Every family of the catalog appears in one of the two.
    let written: BTreeSet<&str> = families(&metrics)
        .union(&families(&probe))
        .copied()
        .collect();
    let missing: Vec<&str> = METRICS
        .iter()
        .map(|m| m.name)
        .filter(|n| !written.contains(n))
        .collect();
    assert!(
        missing.is_empty(),
        "families the fixture does not produce: {missing:?}"
    );
    assert_eq!(written.len(), METRICS.len(), "{written:?}");
}
