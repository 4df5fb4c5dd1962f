//! Cost follows the work, on every server (Redis 6.2, 7.0, 8.6 and Valkey
//! 9): the per-group probes send commands only where the stream poll's
//! `XINFO GROUPS` line shows something to learn, counted on the server
//! itself (`INFO commandstats`), and what that line tells is exported as
//! known. One group at a time, each on an emptied server:
//! - idle without consumers: nothing at all;
//! - idle with a consumer: one `XINFO CONSUMERS` in five consumers runs;
//! - undelivered entries, nothing pending: `XINFO CONSUMERS` every run, no
//!   `XPENDING`;
//! - pending entries: every command, every run; once acknowledged, the
//!   PEL figures are those of an empty PEL at the next runs.
//!
//! Each scenario prints one `COST` line per kind (server, kind, commands per
//! five runs of each per-group probe).

use crate::common;

use std::collections::BTreeMap;

use common::*;
use redis_streams_exporter::probe::ProbeKind;

/// Runs of each per-group probe counted per kind of group.
const RUNS: u64 = 5;

/// Calls per command since the last `CONFIG RESETSTAT`, the test's own
/// `INFO` and `CONFIG` aside; subcommands (7.0+) folded into their command,
/// as 6.2 reports them.
fn calls(c: &mut redis::Connection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    let mut calls = BTreeMap::new();
    for line in info.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else {
            continue;
        };
        let (name, stats) = rest.split_once(':').unwrap();
        let command = name.split('|').next().unwrap();
        if command == "info" || command == "config" {
            continue;
        }
        let n: u64 = stats
            .strip_prefix("calls=")
            .and_then(|s| s.split(',').next())
            .unwrap()
            .parse()
            .unwrap();
        *calls.entry(command.to_string()).or_default() += n;
    }
    calls
}

fn reset(c: &mut redis::Connection) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(c).unwrap();
}

/// Commands the per-group probes sent in [`RUNS`] runs of each.
async fn per_group_runs(h: &Harness, c: &mut redis::Connection) -> BTreeMap<String, u64> {
    reset(c);
    for _ in 0..RUNS {
        h.probe(ProbeKind::PendingSummary).await;
        h.probe(ProbeKind::Consumers).await;
        h.probe(ProbeKind::PendingScan).await;
    }
    calls(c)
}

fn cmd(c: &mut redis::Connection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query(c).unwrap();
}

fn expect(kind: Server, what: &str, got: &BTreeMap<String, u64>, want: &[(&str, u64)]) {
    println!("COST | {kind:?} | {what} | {got:?}");
    let want: BTreeMap<String, u64> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    assert_eq!(got, &want, "{kind:?}, {what}: commands in {RUNS} runs");
}

/// What the exporter shows of a group whose PEL is empty: counts of 0, no
/// age of an oldest entry, no distribution, and a scan that is complete.
fn empty_pel_exported(h: &Harness, kind: Server, what: &str) {
    let m = h.metrics();
    let g = tsg("s", "g");
    for family in [
        "redis_streams_group_pending",
        "redis_streams_group_pending_poison",
        "redis_streams_group_pending_ghost",
        "redis_streams_group_pending_ghost_unchecked",
        "redis_streams_group_pending_orphaned",
        "redis_streams_group_pending_max_idle_seconds",
    ] {
        assert_eq!(m.get(family, &g), Some(0.0), "{kind:?}, {what}: {family}");
    }
    assert_eq!(
        m.get("redis_streams_group_pending_scan_progress_ratio", &g),
        Some(1.0),
        "{kind:?}, {what}"
    );
    assert!(
        m.get("redis_streams_group_pending_scan_timestamp_seconds", &g)
            .is_some(),
        "{kind:?}, {what}: the scan's result is known"
    );
    for family in [
        "redis_streams_group_oldest_pending_age_seconds",
        "redis_streams_group_pending_by_idle_bucket",
        "redis_streams_group_pending_by_delivery_count_bucket",
    ] {
        assert!(
            m.family(family).is_empty(),
            "{kind:?}, {what}: {family} {:?}",
            m.family(family)
        );
    }
}

/// A fresh server state and a harness that has collected once.
async fn setup(server: &RedisServer, c: &mut redis::Connection, build: &[&[&str]]) -> Harness {
    cmd(c, &["FLUSHALL"]);
    for args in build {
        cmd(c, args);
    }
    let h = Harness::new(config_for(server, ""));
    h.collect().await;
    h
}

async fn each_kind_of_group_costs_what_it_shows(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let add: &[&str] = &["XADD", "s", "*", "n", "1"];

    // Idle, no consumers: nothing to ask.
    let h = setup(
        &server,
        &mut c,
        &[add, add, &["XGROUP", "CREATE", "s", "g", "$"]],
    )
    .await;
    let got = per_group_runs(&h, &mut c).await;
    expect(kind, "idle, no consumers", &got, &[]);
    empty_pel_exported(&h, kind, "idle, no consumers");
    assert!(
        h.metrics()
            .family("redis_streams_consumer_pending")
            .is_empty()
    );

    // Idle with a consumer: its consumers once in five runs.
    let h = setup(
        &server,
        &mut c,
        &[
            add,
            &["XGROUP", "CREATE", "s", "g", "$"],
            &["XGROUP", "CREATECONSUMER", "s", "g", "c"],
        ],
    )
    .await;
    let got = per_group_runs(&h, &mut c).await;
    expect(
        kind,
        "idle, one consumer",
        &got,
        &[("time", 1), ("xinfo", 1)],
    );
    empty_pel_exported(&h, kind, "idle, one consumer");
    assert_eq!(
        h.metrics().get(
            "redis_streams_consumer_pending",
            &[
                ("target", "t"),
                ("stream", "s"),
                ("group", "g"),
                ("consumer", "c")
            ]
        ),
        Some(0.0)
    );

    // Undelivered entries, nothing pending: consumers every run.
    let h = setup(
        &server,
        &mut c,
        &[
            add,
            &["XGROUP", "CREATE", "s", "g", "$"],
            &["XGROUP", "CREATECONSUMER", "s", "g", "c"],
            add,
            add,
        ],
    )
    .await;
    let got = per_group_runs(&h, &mut c).await;
    expect(
        kind,
        "undelivered, nothing pending",
        &got,
        &[("time", RUNS), ("xinfo", RUNS)],
    );
    empty_pel_exported(&h, kind, "undelivered, nothing pending");

    // Pending entries: the summary, the poison check of the oldest entries
    // (it stayed put since the last summary), a page of the PEL scan, and
    // the consumers, every run.
    cmd(&mut c, &["FLUSHALL"]);
    xadd_n(&mut c, "s", 3);
    cmd(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    let ids = read_group(&mut c, "s", "g", "c", 10);
    assert_eq!(ids.len(), 3);
    let h = Harness::new(config_for(&server, ""));
    h.collect().await;
    let got = per_group_runs(&h, &mut c).await;
    let mut want = vec![("time", 3 * RUNS), ("xinfo", RUNS), ("xpending", 3 * RUNS)];
    if !kind.has_lag() {
        // 6.2 reports no max-deleted-entry-id: the scan checks whether each
        // pending entry's body is still there.
        want.push(("xrange", 3 * RUNS));
    }
    expect(kind, "pending", &got, &want);
    let m = h.metrics();
    let g = tsg("s", "g");
    assert_eq!(m.get("redis_streams_group_pending", &g), Some(3.0));
    assert!(
        m.get("redis_streams_group_oldest_pending_age_seconds", &g)
            .is_some()
    );
    assert!(
        !m.family("redis_streams_group_pending_by_idle_bucket")
            .is_empty()
    );

    // Acknowledged: the next stream poll sees the PEL empty, and the next
    // runs export an empty PEL without an XPENDING; the consumers are read
    // once more (they held entries), then once in five runs.
    let mut ack = redis::cmd("XACK");
    ack.arg("s").arg("g").arg(&ids);
    let _: u64 = ack.query(&mut c).unwrap();
    h.probe(ProbeKind::Stream).await;
    let got = per_group_runs(&h, &mut c).await;
    let consumer_reads = got.get("xinfo").copied().unwrap_or(0);
    assert!(
        (1..=2).contains(&consumer_reads),
        "{kind:?}: {consumer_reads} consumer reads after the PEL emptied"
    );
    assert_eq!(got.get("xpending"), None, "{kind:?}: {got:?}");
    empty_pel_exported(&h, kind, "acknowledged");
}

per_server!(each_kind_of_group_costs_what_it_shows);

fn needed(m: &Metrics, probe: &str) -> f64 {
    m.value(
        "redis_streams_exporter_probe_commands_per_second_needed",
        &[("target", "t"), ("probe", probe)],
    )
}

/// The budget figures follow the work: a target whose groups are all idle
/// without consumers needs no per-group command at all; with idle consumers,
/// what the consumers probe needs is what its runs send from the second run
/// on (the first run's reads of every idle group are not counted as a need:
/// later runs read them one run in five).
#[tokio::test]
async fn the_budget_need_follows_the_work() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    for i in 0..10 {
        let s = format!("quiet{i}");
        cmd(&mut c, &["XADD", &s, "*", "n", "1"]);
        cmd(&mut c, &["XGROUP", "CREATE", &s, "g", "$"]);
    }
    let h = Harness::new(config_for(&server, ""));
    h.collect().await;
    let m = h.metrics();
    for probe in ["pending_summary", "consumers", "pending_scan"] {
        assert_eq!(needed(&m, probe), 0.0, "{probe} of an idle target");
    }
    assert!(needed(&m, "stream") > 0.0);

    // The same groups with a consumer each, and one group with work.
    for i in 0..10 {
        let s = format!("quiet{i}");
        cmd(&mut c, &["XGROUP", "CREATECONSUMER", &s, "g", "c"]);
    }
    cmd(&mut c, &["XADD", "busy", "*", "n", "1"]);
    cmd(&mut c, &["XGROUP", "CREATE", "busy", "g", "0"]);
    read_group(&mut c, "busy", "g", "c", 1);
    let h = Harness::new(config_for(&server, ""));
    reset(&mut c);
    h.collect().await;
    let first_run = calls(&mut c);
    let consumers_interval = 30.0;
    let first_need = needed(&h.metrics(), "consumers") * consumers_interval;
    // Besides XINFO STREAM and GROUPS of the eleven streams, XINFO
    // CONSUMERS of all eleven groups (in one batch, with its TIME).
    let consumer_reads = first_run["xinfo"] - 2 * 11;
    assert_eq!(consumer_reads, 11, "{first_run:?}");
    assert!(
        first_need < (consumer_reads + 1) as f64,
        "the first run's catch-up is not a need: {first_need} of {}",
        consumer_reads + 1
    );
    let mut idle_reads = 0;
    for run in 1..=5 {
        reset(&mut c);
        h.probe(ProbeKind::Consumers).await;
        let got = calls(&mut c);
        let sent = got.get("xinfo").copied().unwrap_or(0) + got.get("time").copied().unwrap_or(0);
        let need = needed(&h.metrics(), "consumers") * consumers_interval;
        assert!(
            (need - sent as f64).abs() < 1e-6,
            "run {run}: needs {need}, sent {sent} ({got:?})"
        );
        idle_reads += got.get("xinfo").copied().unwrap_or(0) - 1;
    }
    assert_eq!(idle_reads, 10, "each idle group once in five runs");
}
