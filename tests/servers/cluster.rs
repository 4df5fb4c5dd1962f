//! A real Redis Cluster of three primaries. Every stream is
//! found once, every command goes to the primary that owns the stream's
//! slot (checked with each node's own command statistics), ages use the
//! owning node's `TIME`, and a slot migration done while the exporter polls
//! is followed through `ASK` and `MOVED` without a wrong value. Redis 6.2
//! (no `CLUSTER SHARDS`) exercises the `CLUSTER SLOTS` fallback; Redis 7.0
//! and 8.6 and Valkey 9 use `CLUSTER SHARDS`.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::*;
use common::*;
use redis_streams_exporter::probe::ProbeKind;

/// What one test stream holds, by construction.
#[derive(Clone, Debug)]
struct Built {
    name: String,
    node: usize,
    ids: Vec<String>,
    /// Entries delivered to group g1 (g2 was created at `$`: nothing).
    delivered: usize,
    /// Entries of g1 acknowledged.
    acked: usize,
}

impl Built {
    fn lag(&self) -> usize {
        self.ids.len() - self.delivered
    }
    fn pending(&self) -> usize {
        self.delivered - self.acked
    }
}

fn xgroup_create(c: &mut redis::Connection, key: &str, group: &str, at: &str) {
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(group)
        .arg(at)
        .query(c)
        .unwrap();
}

/// `entries` entries; group g1 from 0 with `c1` reading 2 (one acked) and
/// `c2` reading `extra`; group g2 from `$`.
fn build(cluster: &RedisCluster, name: &str, entries: usize, extra: usize) -> Built {
    let node = cluster.owner(name);
    let mut c = cluster.nodes[node].server.conn();
    let ids = xadd_n(&mut c, name, entries);
    xgroup_create(&mut c, name, "g1", "0");
    xgroup_create(&mut c, name, "g2", "$");
    let r1 = read_group(&mut c, name, "g1", "c1", 2);
    let _: i64 = redis::cmd("XACK")
        .arg(name)
        .arg("g1")
        .arg(&r1[0])
        .query(&mut c)
        .unwrap();
    let r2 = read_group(&mut c, name, "g1", "c2", extra);
    assert_eq!(r2.len(), extra);
    Built {
        name: name.to_string(),
        node,
        ids,
        delivered: 2 + extra,
        acked: 1,
    }
}

/// Server time of every node, in ms.
fn node_times(cluster: &RedisCluster) -> Vec<u64> {
    cluster
        .nodes
        .iter()
        .map(|n| server_ms(&mut n.server.conn()))
        .collect()
}

/// Checks every value of `s` against its construction; `before`/`after`
/// are the owning nodes' clocks around the collection.
fn check_stream(m: &Metrics, kind: Server, s: &Built, before: &[u64], after: &[u64]) {
    let name = s.name.as_str();
    assert_eq!(
        m.value("redis_streams_stream_length", &ts(name)),
        s.ids.len() as f64,
        "{name} length"
    );
    assert_eq!(m.value("redis_streams_stream_groups", &ts(name)), 2.0);
    let g1 = tsg(name, "g1");
    assert_eq!(
        m.value("redis_streams_group_lag", &g1),
        s.lag() as f64,
        "{name} g1 lag"
    );
    assert_eq!(
        m.value("redis_streams_group_lag_estimated", &g1),
        if kind.has_lag() { 0.0 } else { 1.0 }
    );
    assert_eq!(
        m.value("redis_streams_group_pending", &g1),
        s.pending() as f64,
        "{name} g1 pending"
    );
    assert_eq!(m.value("redis_streams_group_consumers", &g1), 2.0);
    assert_eq!(
        m.value("redis_streams_consumer_pending", &consumer(name, "c1")),
        1.0
    );
    assert_eq!(
        m.value("redis_streams_consumer_pending", &consumer(name, "c2")),
        (s.delivered - 2) as f64
    );
    // Ages: the owning node's TIME minus the first undelivered entry.
    let first_undelivered = id_ms(&s.ids[s.delivered]);
    let lo = before[s.node].saturating_sub(first_undelivered) as f64 / 1000.0 - 0.001;
    let hi = after[s.node].saturating_sub(first_undelivered) as f64 / 1000.0 + 0.001;
    let v = m.value("redis_streams_group_lag_seconds", &g1);
    assert!(
        v >= lo && v <= hi,
        "{name} g1 lag_seconds {v} not in [{lo}, {hi}]"
    );
    let oldest = id_ms(&s.ids[1]);
    let v = m.value("redis_streams_group_oldest_pending_age_seconds", &g1);
    let (lo, hi) = (
        before[s.node].saturating_sub(oldest) as f64 / 1000.0 - 0.001,
        after[s.node].saturating_sub(oldest) as f64 / 1000.0 + 0.001,
    );
    assert!(
        v >= lo && v <= hi,
        "{name} oldest pending age {v} not in [{lo}, {hi}]"
    );
    let g2 = tsg(name, "g2");
    assert_eq!(m.value("redis_streams_group_lag", &g2), 0.0);
    assert_eq!(m.value("redis_streams_group_lag_seconds", &g2), 0.0);
    assert_eq!(m.value("redis_streams_group_pending", &g2), 0.0);
    assert_eq!(m.value("redis_streams_group_consumers", &g2), 0.0);
}

fn consumer<'a>(stream: &'a str, name: &'a str) -> [(&'a str, &'a str); 4] {
    [
        ("target", "t"),
        ("stream", stream),
        ("group", "g1"),
        ("consumer", name),
    ]
}

fn commands(m: &Metrics, command: &str) -> f64 {
    m.get(
        "redis_streams_exporter_redis_commands_total",
        &[("target", "t"), ("command", command)],
    )
    .unwrap_or(0.0)
}

fn errors(m: &Metrics, kind: &str) -> f64 {
    m.value(
        "redis_streams_exporter_errors_total",
        &[("target", "t"), ("kind", kind)],
    )
}

/// Series of `family` for target t.
fn count_series(m: &Metrics, family: &str) -> usize {
    m.family(family)
        .iter()
        .filter(|(k, _)| k.contains("target=\"t\""))
        .count()
}

async fn routes_every_stream_to_its_owner(kind: Server) {
    let cluster = RedisCluster::start(kind, 3);
    // Three streams per primary, so every node has work and every slot
    // owner is exercised.
    let mut per_node: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for i in 0.. {
        let name = format!("orders:{i}");
        let owners = per_node.entry(cluster.owner(&name)).or_default();
        if owners.len() < 3 {
            owners.push(name);
        }
        if per_node.len() == 3 && per_node.values().all(|v| v.len() == 3) {
            break;
        }
        assert!(i < 1000, "names never covered three nodes");
    }
    let mut streams = Vec::new();
    for (n, names) in &per_node {
        for (j, name) in names.iter().enumerate() {
            let s = build(&cluster, name, 6 + 2 * j + n, 1 + j);
            assert_eq!(s.node, *n);
            streams.push(s);
        }
    }
    let slots: Vec<u16> = streams.iter().map(|s| cluster.slot(&s.name)).collect();
    eprintln!(
        "{kind:?}: streams {:?} in slots {slots:?}",
        streams
            .iter()
            .map(|s| (&s.name, s.node))
            .collect::<Vec<_>>()
    );

    let config = redis_streams_exporter::config::from_str(
        "test.toml",
        &cluster.target_toml("t"),
        &Default::default(),
    )
    .unwrap();
    let h = Harness::new(config);
    for n in &cluster.nodes {
        n.server.cmd(&["CONFIG", "RESETSTAT"]);
    }
    let before = node_times(&cluster);
    h.collect().await;
    let after = node_times(&cluster);
    let calls: Vec<BTreeMap<String, u64>> = cluster
        .nodes
        .iter()
        .map(|n| command_calls(&n.server))
        .collect();
    let m = h.metrics();
    promtool_check(&m.text);

    // Every stream exactly once, with the values it was built with.
    assert_eq!(
        m.value("redis_streams_exporter_target_up", &[("target", "t")]),
        1.0
    );
    assert_eq!(
        m.value("redis_streams_exporter_streams", &[("target", "t")]),
        9.0
    );
    assert_eq!(count_series(&m, "redis_streams_stream_length"), 9);
    for s in &streams {
        check_stream(&m, kind, s, &before, &after);
    }
    let info = m.family("redis_streams_target_info");
    assert!(
        info.len() == 1 && info[0].0.contains("mode=\"cluster\""),
        "{info:?}"
    );

    // Routing: no redirection, no cluster error, and each node saw exactly
    // the commands for its own streams: XINFO STREAM + GROUPS per stream
    // and XINFO CONSUMERS for g1 (g2 has no consumers: its empty list is
    // known without asking). Without a lag from
    // Redis (6.2) the undelivered entries are counted, and both XINFO are
    // read once more per stream to prove nothing changed meanwhile.
    assert_eq!(errors(&m, "cluster"), 0.0);
    assert_eq!(commands(&m, "asking"), 0.0);
    if !kind.has_cluster_shards() {
        // No CLUSTER SHARDS before 7.0: it is tried once, then SLOTS.
        assert_eq!(commands(&m, "cluster_shards"), 1.0);
        assert_eq!(commands(&m, "cluster_slots"), 1.0);
    } else {
        assert_eq!(commands(&m, "cluster_shards"), 1.0);
        assert_eq!(commands(&m, "cluster_slots"), 0.0);
    }
    let mut xinfo_total = 0;
    for (n, c) in calls.iter().enumerate() {
        let owned = per_node[&n].len() as u64;
        let xinfo = c.get("xinfo").copied().unwrap_or(0);
        let rechecks = if kind.has_lag() { 0 } else { 2 * owned };
        assert_eq!(xinfo, 3 * owned + rechecks, "node {n} XINFO calls: {c:?}");
        assert!(
            c.get("time").copied().unwrap_or(0) >= 1,
            "node {n} never asked for TIME: {c:?}"
        );
        assert_eq!(
            c.get("scan").copied().unwrap_or(0),
            1,
            "node {n} SCAN: {c:?}"
        );
        assert!(
            c.get("xpending").copied().unwrap_or(0) >= 2 * owned,
            "node {n} XPENDING: {c:?}"
        );
        xinfo_total += xinfo;
    }
    let exported_xinfo = commands(&m, "xinfo_stream")
        + commands(&m, "xinfo_groups")
        + commands(&m, "xinfo_consumers");
    assert_eq!(exported_xinfo, xinfo_total as f64);
    eprintln!(
        "{kind:?}: per-node calls {:?}",
        calls
            .iter()
            .map(|c| (c.get("xinfo"), c.get("xpending"), c.get("time")))
            .collect::<Vec<_>>()
    );

    // Steady state: new entries on every node are read at the next poll,
    // still without a redirection.
    for s in streams.iter_mut().step_by(3) {
        let mut c = cluster.nodes[s.node].server.conn();
        s.ids.extend(xadd_n(&mut c, &s.name, 3));
    }
    let before = node_times(&cluster);
    h.probe(ProbeKind::Stream).await;
    let after = node_times(&cluster);
    let m = h.metrics();
    for s in &streams {
        assert_eq!(
            m.value("redis_streams_stream_length", &ts(&s.name)),
            s.ids.len() as f64
        );
        let g1 = tsg(&s.name, "g1");
        assert_eq!(m.value("redis_streams_group_lag", &g1), s.lag() as f64);
        let first = id_ms(&s.ids[s.delivered]) as f64 / 1000.0;
        let v = m.value("redis_streams_group_lag_seconds", &g1);
        assert!(
            v >= before[s.node] as f64 / 1000.0 - first - 0.001
                && v <= after[s.node] as f64 / 1000.0 - first + 0.001
        );
    }
    assert_eq!(errors(&m, "cluster"), 0.0);
    assert_eq!(commands(&m, "asking"), 0.0);
}

per_server!(routes_every_stream_to_its_owner);

/// One look at the daemon's exposition during the migration.
#[derive(Clone, Debug)]
struct Sample {
    at: Instant,
    phase: u8,
    up: Option<f64>,
    a_len: Option<f64>,
    a_lag: Option<f64>,
    a_pending: Option<f64>,
    b_len: Option<f64>,
    b_pending: Option<f64>,
    steady: usize,
    cluster_errors: f64,
    asking: f64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_migration_while_polling() {
    let cluster = RedisCluster::start(Server::Redis70, 3);
    // Two streams in one slot (hash tag), so the slot can be half migrated:
    // one key on the target (ASK), the other still on the source.
    let (a, b) = ("{mig}:a", "{mig}:b");
    let slot = cluster.slot(a);
    assert_eq!(cluster.slot(b), slot);
    let from = cluster.owner(a);
    let to = (from + 1) % 3;
    // One more stream on every node, never moved.
    let mut steady = Vec::new();
    for n in 0..3 {
        let name = (0..)
            .map(|i| format!("steady:{i}"))
            .find(|s| cluster.owner(s) == n)
            .unwrap();
        steady.push(build(&cluster, &name, 5, 1));
    }
    let mut sa = build(&cluster, a, 20, 3);
    let sb = build(&cluster, b, 8, 4);
    eprintln!(
        "slot {slot} of {a} and {b}: node {from} ({}) -> node {to} ({})",
        cluster.nodes[from].addr(),
        cluster.nodes[to].addr()
    );

    let fast = "[schedule]\ndiscovery = \"1s\"\ninfo = \"1s\"\nstream = \"200ms\"\n\
                pending_summary = \"300ms\"\nconsumers = \"300ms\"\npending_scan = \"1s\"\n\
                [limits]\ncommand_timeout = \"1s\"\n";
    let toml = format!("{}{fast}", cluster.target_toml("t"));
    let h = Harness::new(
        redis_streams_exporter::config::from_str("test.toml", &toml, &Default::default()).unwrap(),
    );
    let d = Daemon::start(&toml).await;
    wait_metrics(&d, Duration::from_secs(15), "first collection", |m| {
        m.get("redis_streams_group_pending", &tsg(b, "g1")) == Some(sb.pending() as f64)
            && m.get("redis_streams_consumer_pending", &consumer(a, "c2"))
                .is_some()
    })
    .await;

    // Sample the daemon's exposition continuously.
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let phase = Arc::new(std::sync::atomic::AtomicU8::new(0));
    let sampler = {
        let (samples, phase, base) = (samples.clone(), phase.clone(), d.base.clone());
        let steady_names: Vec<String> = steady.iter().map(|s| s.name.clone()).collect();
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            loop {
                let p = phase.load(std::sync::atomic::Ordering::SeqCst);
                if p == u8::MAX {
                    return;
                }
                let text = client
                    .get(format!("{base}/metrics"))
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                let m = Metrics::parse(&text);
                samples.lock().unwrap().push(Sample {
                    at: Instant::now(),
                    phase: p,
                    up: m.get("redis_streams_exporter_target_up", &[("target", "t")]),
                    a_len: m.get("redis_streams_stream_length", &ts(a)),
                    a_lag: m.get("redis_streams_group_lag", &tsg(a, "g1")),
                    a_pending: m.get("redis_streams_group_pending", &tsg(a, "g1")),
                    b_len: m.get("redis_streams_stream_length", &ts(b)),
                    b_pending: m.get("redis_streams_group_pending", &tsg(b, "g1")),
                    steady: steady_names
                        .iter()
                        .filter(|s| m.get("redis_streams_stream_length", &ts(s)) == Some(5.0))
                        .count(),
                    cluster_errors: errors(&m, "cluster"),
                    asking: commands(&m, "asking"),
                });
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        })
    };

    // Phase 0: steady state, in-process harness too.
    let before = node_times(&cluster);
    h.collect().await;
    let after = node_times(&cluster);
    let m = h.metrics();
    for s in steady.iter().chain([&sa, &sb]) {
        check_stream(&m, Server::Redis70, s, &before, &after);
    }
    assert_eq!(errors(&m, "cluster"), 0.0);
    assert_eq!(commands(&m, "asking"), 0.0);
    tokio::time::sleep(Duration::from_millis(600)).await;

    // Phase 1: the slot is migrating and {mig}:a already moved. Commands
    // for it reach the source, which answers ASK; the exporter asks the
    // target with ASKING. {mig}:b is still served by the source.
    phase.store(1, std::sync::atomic::Ordering::SeqCst);
    cluster.begin_migration(slot, from, to);
    cluster.migrate_key(a, from, to);
    let phase1 = Instant::now();
    let before = node_times(&cluster);
    for kind in ProbeKind::ALL {
        h.probe(kind).await;
    }
    let after = node_times(&cluster);
    let m = h.metrics();
    for s in steady.iter().chain([&sa, &sb]) {
        check_stream(&m, Server::Redis70, s, &before, &after);
    }
    assert_eq!(
        m.value("redis_streams_exporter_streams", &[("target", "t")]),
        5.0,
        "a key seen on both nodes during migration counts once"
    );
    let asking_phase1 = commands(&m, "asking");
    assert!(asking_phase1 > 0.0, "ASK was never followed");
    assert_eq!(
        errors(&m, "cluster"),
        0.0,
        "ASK during a migration is not an error"
    );
    // Keep the slot half migrated for several daemon polls.
    tokio::time::sleep(Duration::from_millis(1500).saturating_sub(phase1.elapsed())).await;

    // Phase 2: the rest moves and the slot is reassigned. The exporter's map
    // is stale: the source answers MOVED once, the map is re-read, and
    // afterwards every command goes straight to the new owner.
    phase.store(2, std::sync::atomic::Ordering::SeqCst);
    cluster.migrate_key(b, from, to);
    cluster.finish_migration(slot, from, to);
    sa.node = to;
    let mut sb = sb;
    sb.node = to;
    let shards_before = commands(&h.metrics(), "cluster_shards");
    let before = node_times(&cluster);
    h.probe(ProbeKind::Stream).await;
    let after = node_times(&cluster);
    let m = h.metrics();
    for s in [&sa, &sb] {
        assert_eq!(
            m.value("redis_streams_stream_length", &ts(&s.name)),
            s.ids.len() as f64
        );
        assert_eq!(
            m.value("redis_streams_group_lag", &tsg(&s.name, "g1")),
            s.lag() as f64
        );
    }
    let moved = errors(&m, "cluster");
    eprintln!(
        "harness: ASKING sent {asking_phase1} times in phase 1; MOVED followed {moved} times on the first poll after the move"
    );
    // XINFO STREAM + GROUPS of both streams, plus the XRANGE for a's lag age.
    assert!(
        (4.0..=6.0).contains(&moved),
        "MOVED followed {moved} times on the first poll after the move"
    );
    let before2 = node_times(&cluster);
    h.probe(ProbeKind::Stream).await;
    h.probe(ProbeKind::PendingSummary).await;
    h.probe(ProbeKind::Consumers).await;
    let after2 = node_times(&cluster);
    let m = h.metrics();
    for s in steady.iter().chain([&sa, &sb]) {
        check_stream(&m, Server::Redis70, s, &before2, &after2);
    }
    let _ = (before, after);
    assert_eq!(
        errors(&m, "cluster"),
        moved,
        "MOVED after the map was re-read"
    );
    assert_eq!(commands(&m, "asking"), asking_phase1);
    assert_eq!(
        commands(&m, "cluster_shards"),
        shards_before + 1.0,
        "the map is re-read once after MOVED"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // Phase 3: writes on the new owner are reported.
    phase.store(3, std::sync::atomic::Ordering::SeqCst);
    let mut c = cluster.nodes[to].server.conn();
    sa.ids.extend(xadd_n(&mut c, a, 5));
    let m = wait_metrics(
        &d,
        Duration::from_secs(5),
        "new entries after the move",
        |m| m.get("redis_streams_stream_length", &ts(a)) == Some(25.0),
    )
    .await;
    assert_eq!(m.get("redis_streams_group_lag", &tsg(a, "g1")), Some(20.0));
    let settled_errors = errors(&m, "cluster");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let m = d.metrics().await;
    assert_eq!(
        errors(&m, "cluster"),
        settled_errors,
        "redirections continue after the map settled"
    );
    phase.store(u8::MAX, std::sync::atomic::Ordering::SeqCst);
    sampler.await.unwrap();
    d.stop().await;

    // Every look at the daemon while the slot moved: target up, every stream
    // present with its true values.
    let samples = samples.lock().unwrap().clone();
    let mut per_phase = [0usize; 4];
    for s in &samples {
        per_phase[s.phase as usize] += 1;
        let a_len = if s.phase == 3 {
            [20.0, 25.0].as_slice()
        } else {
            &[20.0]
        };
        let a_lag = if s.phase == 3 {
            [15.0, 20.0].as_slice()
        } else {
            &[15.0]
        };
        assert_eq!(s.up, Some(1.0), "{s:?}");
        assert!(s.a_len.is_some_and(|v| a_len.contains(&v)), "{s:?}");
        assert!(s.a_lag.is_some_and(|v| a_lag.contains(&v)), "{s:?}");
        assert_eq!(s.a_pending, Some(4.0), "{s:?}");
        assert_eq!(s.b_len, Some(8.0), "{s:?}");
        assert_eq!(s.b_pending, Some(5.0), "{s:?}");
        assert_eq!(s.steady, 3, "{s:?}");
        if s.phase <= 1 {
            // Steady state, and ASK while half migrated: no error.
            assert_eq!(s.cluster_errors, 0.0, "{s:?}");
        }
        if s.phase == 0 {
            assert_eq!(s.asking, 0.0, "{s:?}");
        }
    }
    let last = samples.last().unwrap();
    let asked: Vec<f64> = samples
        .iter()
        .filter(|s| s.phase == 1)
        .map(|s| s.asking)
        .collect();
    let moved_total = last.cluster_errors;
    eprintln!(
        "daemon samples per phase {per_phase:?} over {:?}; ASKING sent in phase 1: {:?}..{:?}; \
         MOVED followed in total: {moved_total}",
        last.at - samples[0].at,
        asked.first(),
        asked.last(),
    );
    assert!(per_phase.iter().all(|n| *n >= 5), "{per_phase:?}");
    assert!(
        asked.last() > asked.first(),
        "the daemon never followed ASK while the slot was half migrated"
    );
    assert!(
        (1.0..=30.0).contains(&moved_total),
        "MOVED count {moved_total} is not bounded by one stale poll per probe"
    );
}
