//! What series cost: per group in lean and full series on every server
//! (the table of docs/cost.md is the measured one), worker restarts under
//! random names that churn no series, and the whole exposition at 3,000
//! streams × 2 groups; the caps and filters that bound it.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use redis_streams_exporter::backend::ROWS_KEPT;
use redis_streams_exporter::probe::ProbeKind;

const STREAMS: usize = 3000;

/// Series whose labels name `group` of `stream`, its consumers' included;
/// the second figure leaves out those that come and go with what the polls
/// learned (the read cadence and the ETAs), as docs/cost.md counts them.
fn group_series(m: &Metrics, stream: &str, group: &str) -> (usize, usize) {
    let needle = format!("stream=\"{stream}\",group=\"{group}\"");
    let names: Vec<&str> = m
        .text
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(&needle))
        .map(|l| l.split(['{', ' ']).next().unwrap_or_default())
        .collect();
    let learned = |n: &&str| {
        n.ends_with("_eta_seconds")
            || n.ends_with("_read_interval_seconds")
            || n.ends_with("_read_every_seconds")
    };
    (names.len(), names.iter().filter(|n| !learned(n)).count())
}

/// A row of the series table of docs/cost.md: the figures of its lean and
/// full columns.
fn documented(row: &str) -> (usize, usize) {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cost.md")).unwrap();
    let line = doc
        .lines()
        .find(|l| l.starts_with(&format!("| {row} |")))
        .unwrap_or_else(|| panic!("no row \"{row}\" in the series table of docs/cost.md"));
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    let figure = |i: usize| {
        cells[i]
            .parse()
            .unwrap_or_else(|e| panic!("{line}: column {i}: {e}"))
    };
    (figure(2), figure(3))
}

fn xack(c: &mut redis::Connection, key: &str, group: &str, ids: &[String]) {
    if !ids.is_empty() {
        let _: u64 = redis::cmd("XACK")
            .arg(key)
            .arg(group)
            .arg(ids)
            .query(c)
            .unwrap();
    }
}

/// The groups measured: `healthy` read and acknowledged, `work` and
/// `crowd` holding an entry each, `crowd` with two more holders and three
/// consumers holding nothing, and an entry undelivered to both.
fn groups(c: &mut redis::Connection) {
    xadd_n(c, "s", 2);
    for g in ["healthy", "work", "crowd"] {
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("s")
            .arg(g)
            .arg("0")
            .query(c)
            .unwrap();
    }
    let ids = read_group(c, "s", "healthy", "c", 10);
    xack(c, "s", "healthy", &ids);
    for g in ["work", "crowd"] {
        assert_eq!(read_group(c, "s", g, "c", 1).len(), 1);
    }
    xadd_n(c, "s", 2);
    for consumer in ["c2", "c3"] {
        assert_eq!(read_group(c, "s", "crowd", consumer, 1).len(), 1);
    }
    for consumer in ["idle1", "idle2", "idle3"] {
        let _: i64 = redis::cmd("XGROUP")
            .arg("CREATECONSUMER")
            .arg("s")
            .arg("crowd")
            .arg(consumer)
            .query(c)
            .unwrap();
    }
}

/// Per group, in lean and full series: a healthy group (one consumer that
/// reads and acknowledges everything), a group with work (one consumer
/// holding an entry for longer than the group usually does, one entry
/// undelivered) and a crowd (the same, and two more consumers holding an
/// entry each as long, three holding nothing). A healthy
/// group costs at most 12 series in lean on every server; on Redis 7.0 the
/// figures are those of docs/cost.md.
async fn series_per_group_in_each_mode(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let mut figures = BTreeMap::new();
    for mode in ["lean", "full"] {
        // The same groups anew for each mode: the holders' silence is then
        // the same in both (the consumer of `work` would otherwise be
        // orphaned by the full pass, its silence the lean pass's too).
        let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
        groups(&mut c);
        let h = Harness::as_configured(config_for(
            &server,
            &format!(
                "[[streams]]\nmatch = \"s\"\nseries = \"{mode}\"\nconsumer_inactive_after = \"1s\"\n"
            ),
        ));
        h.collect().await;
        // A few rounds of work for the healthy group, which reads and
        // acknowledges each entry before the next poll.
        for _ in 0..4 {
            xadd_n(&mut c, "s", 1);
            let ids = read_group(&mut c, "s", "healthy", "c", 10);
            xack(&mut c, "s", "healthy", &ids);
            h.probe(ProbeKind::Stream).await;
            h.probe(ProbeKind::PendingSummary).await;
            h.probe(ProbeKind::Consumers).await;
            h.probe(ProbeKind::PendingScan).await;
        }
        // The holders of the other groups now hold their entries for half
        // the orphan limit: held long, as a crashed worker's are.
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        h.probe(ProbeKind::Stream).await;
        h.probe(ProbeKind::Consumers).await;
        let m = h.metrics();
        assert_eq!(
            m.value("redis_streams_group_pending", &tsg("s", "healthy")),
            0.0
        );
        assert_eq!(
            m.value("redis_streams_group_pending", &tsg("s", "crowd")),
            3.0
        );
        let healthy = group_series(&m, "s", "healthy");
        let work = group_series(&m, "s", "work");
        let crowd = group_series(&m, "s", "crowd");
        eprintln!("{kind:?} {mode}: healthy {healthy:?}, with work {work:?}, crowd {crowd:?}");
        if mode == "lean" {
            assert!(
                healthy.0 <= 12,
                "{kind:?}: a healthy group costs {} series",
                healthy.0
            );
            // Consumers holding nothing cost nothing: three of them, counted.
            let consumers: BTreeSet<&str> = m
                .family("redis_streams_consumer_pending")
                .iter()
                .filter(|(k, _)| k.contains("group=\"crowd\""))
                .filter_map(|(k, _)| k.split("consumer=\"").nth(1)?.split('"').next())
                .collect();
            assert_eq!(consumers, BTreeSet::from(["c", "c2", "c3"]));
            assert_eq!(
                m.value("redis_streams_group_consumers", &tsg("s", "crowd")),
                6.0
            );
            assert_eq!(
                m.value("redis_streams_group_consumers_live", &tsg("s", "crowd")),
                6.0
            );
            assert_eq!(
                m.get("redis_streams_group_consumers_stale", &tsg("s", "crowd")),
                None
            );
            // The one series a group's status costs.
            let status = m.family("redis_streams_group_status");
            assert_eq!(status.len(), 3, "{status:?}");
        }
        // No server of the suite has XNACK (Redis 8.8+): its family is
        // absent in either mode, and its command never sent.
        assert!(m.family("redis_streams_group_pending_nacked").is_empty());
        assert!(!m.text.contains("command=\"xinfo_stream_full\""));
        // What the target costs is what it serves.
        let served = m
            .text
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains("{target=\"t\""))
            .count();
        assert_eq!(
            m.value("redis_streams_exporter_series", &[("target", "t")]),
            served as f64
        );
        figures.insert(mode, (healthy.1, work.1, crowd.1));
    }
    if kind == Server::Redis70 {
        let (lean, full) = (figures["lean"], figures["full"]);
        assert_eq!(
            documented("a healthy group, one consumer"),
            (lean.0, full.0),
            "{figures:?}"
        );
        assert_eq!(
            documented("a group with work, one consumer"),
            (lean.1, full.1),
            "{figures:?}"
        );
        // Per more consumer holding entries, and holding none.
        assert_eq!(
            documented("each more consumer holding entries long"),
            (
                (lean.2 - lean.1) / 2,
                (full.2 - full.1 - 3 * (full.2 - full.1) / 5) / 2
            ),
            "{figures:?}"
        );
        assert_eq!(
            documented("each more consumer holding none"),
            (0, (full.2 - full.1) / 5),
            "{figures:?}"
        );
    }
}

per_server!(series_per_group_in_each_mode);

/// Workers of a task queue that take a random consumer name at every start
/// and never delete it (streaQ, taskiq): 120 restarts on one group. Each
/// worker claims what a crashed one left once it idled for 300 ms
/// (XAUTOCLAIM, as taskiq's `idle_timeout`), reads three entries and is
/// polled while it processes them (it holds them), then acknowledges them;
/// one in ten crashes with an entry in hand. In lean series, polled after
/// every restart, the consumer label takes a value only for the crashed
/// workers while their entries wait (the culprits an on-call acts on), and
/// the group never costs more than 24 series; with a rewrite of the random
/// names, one value.
async fn worker_restarts_churn_no_series(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "tasks", 1);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("tasks")
        .arg("workers")
        .arg("0")
        .query(&mut c)
        .unwrap();
    // Entries held for 200 ms (half the limit) are held long.
    let limit = "[stream_defaults]\nconsumer_inactive_after = \"400ms\"\n";
    let lean = Harness::as_configured(config_for(&server, limit));
    let renamed = Harness::as_configured(config_for(
        &server,
        &format!(
            "{limit}consumer_names = [{{ regex = \"worker-[0-9a-f]{{16}}\", replacement = \"worker\" }}]\n"
        ),
    ));
    lean.collect().await;
    renamed.collect().await;
    let mut labels: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let mut crashed = BTreeSet::new();
    let mut most = 0;
    for restart in 0u64..120 {
        let name = format!(
            "worker-{:016x}",
            restart.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        );
        let _: redis::Value = redis::cmd("XAUTOCLAIM")
            .arg("tasks")
            .arg("workers")
            .arg(&name)
            .arg(300)
            .arg("0-0")
            .query(&mut c)
            .unwrap();
        let claimed: Vec<String> = redis::cmd("XPENDING")
            .arg("tasks")
            .arg("workers")
            .arg("-")
            .arg("+")
            .arg(10)
            .arg(&name)
            .query::<Vec<(String, String, u64, u64)>>(&mut c)
            .unwrap()
            .into_iter()
            .map(|(id, ..)| id)
            .collect();
        xack(&mut c, "tasks", "workers", &claimed);
        xadd_n(&mut c, "tasks", 3);
        let ids = read_group(&mut c, "tasks", "workers", &name, 10);
        for (mode, h) in [("lean", &lean), ("renamed", &renamed)] {
            h.probe(ProbeKind::Stream).await;
            h.probe(ProbeKind::PendingSummary).await;
            h.probe(ProbeKind::Consumers).await;
            let m = h.metrics();
            for family in [
                "redis_streams_consumer_pending",
                "redis_streams_consumer_idle_seconds",
                "redis_streams_consumer_inactive_seconds",
            ] {
                for (k, _) in m.family(family) {
                    let consumer = k
                        .split("consumer=\"")
                        .nth(1)
                        .and_then(|v| v.split('"').next());
                    labels
                        .entry(mode)
                        .or_default()
                        .insert(consumer.unwrap_or_default().to_string());
                }
            }
            if mode == "lean" {
                most = most.max(group_series(&m, "tasks", "workers").0);
            }
        }
        // One in ten crashes with its last entry unacknowledged.
        let done = if restart % 10 == 9 {
            crashed.insert(name.clone());
            &ids[..ids.len() - 1]
        } else {
            &ids[..]
        };
        xack(&mut c, "tasks", "workers", done);
        tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    }
    let m = lean.metrics();
    assert_eq!(
        m.value("redis_streams_group_consumers", &tsg("tasks", "workers")),
        120.0
    );
    let lean_labels = labels.get("lean").cloned().unwrap_or_default();
    eprintln!(
        "{kind:?}: {} consumer label values, at most {most} series; renamed: {:?}",
        lean_labels.len(),
        labels.get("renamed")
    );
    assert!(lean_labels.len() <= 15, "{kind:?}: {lean_labels:?}");
    assert!(most <= 24, "{kind:?}: the group cost {most} series");
    // The labels that appeared are crashed workers', and most crashed
    // workers were named while their entries waited.
    assert!(
        lean_labels.is_subset(&crashed),
        "{lean_labels:?} beside {crashed:?}"
    );
    assert!(
        lean_labels.len() >= crashed.len() / 2,
        "{lean_labels:?} of {crashed:?}"
    );
    assert_eq!(
        labels.get("renamed").cloned().unwrap_or_default(),
        BTreeSet::from(["worker".to_string()]),
        "every worker under its kind's name"
    );
}

per_server!(worker_restarts_churn_no_series);

/// The whole exposition at 3,000 streams × 2 groups whose consumer holds
/// an entry and has one more undelivered: lean and full series, each
/// total made of the per-stream and per-group figures and the exporter's
/// own series; a group excluded by a glob costs no series and no command.
#[tokio::test]
async fn series_at_3000_streams_by_2_groups() {
    let server = RedisServer::start(Server::Redis70);
    fill(&server);
    let lean = measure(&server, "", "").await;
    let full = measure(&server, "", "[stream_defaults]\nseries = \"full\"\n").await;
    let one_group = measure(&server, "exclude_groups = [\"g2\"]\n", "").await;
    for (name, m) in [
        ("lean", &lean),
        ("full", &full),
        ("lean, g2 excluded", &one_group),
    ] {
        eprintln!(
            "{name}: {} series in all ({} more ETAs), {} per group, {} per stream",
            m.total + m.etas,
            m.etas,
            m.per_group,
            m.per_stream
        );
        assert!(m.etas <= 2 * 2 * STREAMS);
    }
    // Every stream and group was read.
    assert_eq!(
        lean.metrics
            .value("redis_streams_exporter_streams", &[("target", "t")]),
        STREAMS as f64
    );
    assert_eq!(
        lean.metrics.family("redis_streams_group_lag").len(),
        2 * STREAMS
    );
    // A group with work costs what the table says, in each mode, but for
    // its consumer, who just read its entry: lean series do not name it.
    let (lean_doc, full_doc) = documented("a group with work, one consumer");
    let (per_holder, _) = documented("each more consumer holding entries long");
    assert_eq!(
        (lean.per_group, full.per_group),
        (lean_doc - per_holder, full_doc)
    );
    // Totals are streams × per-stream + groups × per-group + the exporter's
    // own series, which do not depend on the streams.
    let fixed = |m: &Measured, groups: usize| {
        m.total as i64 - (STREAMS * m.per_stream + groups * m.per_group) as i64
    };
    assert_eq!(fixed(&lean, 2 * STREAMS), fixed(&full, 2 * STREAMS));
    assert!(
        fixed(&lean, 2 * STREAMS) < 200,
        "{}",
        fixed(&lean, 2 * STREAMS)
    );
    assert_eq!(
        lean.metrics
            .value("redis_streams_exporter_series", &[("target", "t")]) as usize,
        lean.total + lean.etas - lean.untargeted,
    );
    // The distributions are full series only.
    for family in [
        "redis_streams_group_pending_by_idle_bucket",
        "redis_streams_group_pending_by_delivery_count_bucket",
    ] {
        assert_eq!(full.metrics.family(family).len(), 2 * STREAMS * 7);
        assert!(!lean.metrics.text.contains(family), "{family}");
    }
    // An excluded group has no series and costs no per-group command.
    assert!(!one_group.metrics.text.contains("group=\"g2\""));
    assert_eq!(one_group.per_group, lean.per_group);
    assert_eq!(
        one_group.total as i64 - fixed(&lean, 2 * STREAMS),
        (STREAMS * lean.per_stream + STREAMS * lean.per_group) as i64
    );
    // Per group with entries pending: one summary, one look at its oldest
    // entries (xpending_range) and one scan page (xpending_range too).
    for (probe_command, per_group) in [
        ("xpending_summary", 1),
        ("xinfo_consumers", 1),
        ("xpending_range", 2),
    ] {
        assert_eq!(
            command(&lean, probe_command),
            (per_group * 2 * STREAMS) as f64,
            "{probe_command}"
        );
        assert_eq!(
            command(&one_group, probe_command),
            (per_group * STREAMS) as f64,
            "{probe_command}"
        );
    }
    // Redis's own count of groups still says 2.
    assert_eq!(
        one_group
            .metrics
            .value("redis_streams_stream_groups", &ts("s:0")),
        2.0
    );
}

/// 3,000 streams of 2 entries, each with groups `g1` and `g2` whose consumer
/// `c` holds one entry (1 pending, lag 1).
fn fill(server: &RedisServer) {
    let mut c = server.conn();
    let mut pipe = redis::pipe();
    for i in 0..STREAMS {
        let key = format!("s:{i}");
        pipe.cmd("XADD").arg(&key).arg("*").arg("n").arg(1).ignore();
        pipe.cmd("XADD").arg(&key).arg("*").arg("n").arg(2).ignore();
        for g in ["g1", "g2"] {
            pipe.cmd("XGROUP")
                .arg("CREATE")
                .arg(&key)
                .arg(g)
                .arg("0")
                .ignore();
            pipe.cmd("XREADGROUP")
                .arg("GROUP")
                .arg(g)
                .arg("c")
                .arg("COUNT")
                .arg(1)
                .arg("STREAMS")
                .arg(&key)
                .arg(">")
                .ignore();
        }
    }
    let _: () = pipe.query(&mut c).unwrap();
}

struct Measured {
    /// Series, the ETAs apart.
    total: usize,
    /// `…_eta_seconds` series (at most 2 per group).
    etas: usize,
    /// Series without a target label (the exporter's and the process's).
    untargeted: usize,
    /// Series of one group (stream `s:0`, group `g1`), consumers included,
    /// less those that come and go with what the polls learned.
    per_group: usize,
    /// Series of one stream without its groups.
    per_stream: usize,
    commands: BTreeMap<String, f64>,
    metrics: Metrics,
}

/// Measures with `target_keys` in the target's table and `tables` after.
async fn measure(server: &RedisServer, target_keys: &str, tables: &str) -> Measured {
    let h = Harness::as_configured(config_for(
        server,
        &format!(
            "{target_keys}[limits]\ncommands_per_second = 1000000\npending_entries_per_second = 100000000\n{tables}"
        ),
    ));
    h.collect().await;
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    // The ETAs come and go with the trends of the last polls: counted
    // apart, so the budget is exact.
    let (etas, samples): (Vec<&str>, Vec<&str>) = m
        .text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .partition(|l| {
            l.split(['{', ' '])
                .next()
                .is_some_and(|n| n.ends_with("_eta_seconds"))
        });
    let untargeted = samples.iter().filter(|l| !l.contains("{target=\"")).count();
    let per_group = group_series(&m, "s:0", "g1").1;
    let per_stream = samples
        .iter()
        .filter(|l| l.contains("stream=\"s:0\"}"))
        .count();
    let commands = m
        .family("redis_streams_exporter_redis_commands_total")
        .into_iter()
        .map(|(labels, v)| (labels.to_string(), v))
        .collect();
    Measured {
        total: samples.len(),
        etas: etas.len(),
        untargeted,
        per_group,
        per_stream,
        commands,
        metrics: m,
    }
}

fn command(m: &Measured, name: &str) -> f64 {
    m.commands
        .iter()
        .filter(|(labels, _)| labels.contains(&format!("command=\"{name}\"")))
        .map(|(_, v)| *v)
        .sum()
}

/// `exclude_streams` drops streams before `max_streams` counts them, and
/// include/exclude group globs per `[[streams]]` rule.
#[tokio::test]
async fn stream_and_group_filters_per_target_and_rule() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    for key in ["orders:eu", "orders:test:1", "orders:dlq", "audit", "tmp:1"] {
        xadd_n(&mut c, key, 1);
        for g in ["billing", "debug-1", "analytics"] {
            let _: () = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(key)
                .arg(g)
                .arg("0")
                .query(&mut c)
                .unwrap();
        }
    }
    let h = Harness::new(config_for(
        &server,
        "exclude_streams = [\"tmp:*\"]\nexclude_groups = [\"debug-*\"]\nmax_streams = 3\n\
         [stream_defaults]\nexclude_streams = [\"*:dlq\"]\n\
         [[streams]]\nmatch = \"orders:*\"\ninclude_groups = [\"bill*\"]\nexclude_streams = [\"orders:test:*\", \"*:dlq\"]\n",
    ));
    h.collect().await;
    let m = h.metrics();
    let streams: Vec<String> = m
        .family("redis_streams_stream_length")
        .iter()
        .map(|(k, _)| k.to_string())
        .collect();
    assert_eq!(streams.len(), 2, "{streams:?}");
    assert!(streams.iter().any(|s| s.contains("stream=\"orders:eu\"")));
    assert!(streams.iter().any(|s| s.contains("stream=\"audit\"")));
    // Three streams excluded before the cap of 3: nothing was dropped.
    assert_eq!(
        m.value("redis_streams_exporter_streams_dropped", &[("target", "t")]),
        0.0
    );
    let groups: Vec<String> = m
        .family("redis_streams_group_pending")
        .iter()
        .map(|(k, _)| k.to_string())
        .collect();
    assert_eq!(groups.len(), 3, "{groups:?}");
    assert!(
        groups.contains(
            &"redis_streams_group_pending{target=\"t\",stream=\"orders:eu\",group=\"billing\"}"
                .to_string()
        ),
        "{groups:?}"
    );
    assert!(
        groups
            .iter()
            .filter(|g| g.contains("stream=\"audit\""))
            .count()
            == 2
    );
    assert!(!m.text.contains("debug-1"));
}

/// A real consumer named `__other__` never collides with the aggregate of
/// the consumers over `max_consumers_per_group`: it is written with its
/// first byte escaped (`\x5f_other__`), a label value no name is written as.
async fn a_consumer_named_like_the_aggregate(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "s", 10);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("s")
        .arg("g")
        .arg("0")
        .query(&mut c)
        .unwrap();
    // a holds 4, __other__ 3, c and d 1 each: the cap of 2 keeps a and
    // __other__ by name and sums c and d.
    for (consumer, n) in [("a", 4), ("__other__", 3), ("c", 1), ("d", 1)] {
        assert_eq!(read_group(&mut c, "s", "g", consumer, n).len(), n);
    }
    let h = Harness::new(config_for(
        &server,
        "[metrics]\nmax_consumers_per_group = 2\n",
    ));
    h.collect().await;
    let m = h.metrics();
    let pending = m.family("redis_streams_consumer_pending");
    let of = |consumer: &str| {
        m.get(
            "redis_streams_consumer_pending",
            &[
                ("target", "t"),
                ("stream", "s"),
                ("group", "g"),
                ("consumer", consumer),
            ],
        )
    };
    assert_eq!(pending.len(), 3, "{pending:?}");
    assert_eq!(of("a"), Some(4.0));
    assert_eq!(of("\\\\x5f_other__"), Some(3.0), "{pending:?}");
    assert_eq!(of("__other__"), Some(2.0), "the aggregate: {pending:?}");
    // The consumer's other series use the same name.
    let idle = m.family("redis_streams_consumer_idle_seconds");
    assert!(
        idle.iter()
            .any(|(k, _)| k.contains("consumer=\"\\\\x5f_other__\"")),
        "{idle:?}"
    );
    assert!(
        !idle
            .iter()
            .any(|(k, _)| k.contains("consumer=\"__other__\"")),
        "{idle:?}"
    );
    assert_eq!(idle.len(), 2, "{idle:?}");
}

per_server!(a_consumer_named_like_the_aggregate);

/// Groups past `max_groups_per_stream` are not watched and are counted;
/// a group with more consumers than a reply keeps has its consumers listed
/// up to the cut, and what the others hold is summed under `__other__`
/// (counted as skipped consumers), the group's own figures unchanged.
async fn groups_and_consumers_beyond_the_caps(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "s", 10);
    let groups: Vec<String> = (0..12).map(|i| format!("g{i:02}")).collect();
    for g in &groups {
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("s")
            .arg(g)
            .arg("0")
            .query(&mut c)
            .unwrap();
    }
    // g00: 10,050 consumers that never read, "a-early" holding 2 and
    // "z-late" holding 3: XINFO CONSUMERS lists them by name, so z-late is
    // past the rows kept.
    let extra = ROWS_KEPT as usize + 50;
    let mut pipe = redis::pipe();
    for i in 0..extra {
        pipe.cmd("XGROUP")
            .arg("CREATECONSUMER")
            .arg("s")
            .arg("g00")
            .arg(format!("c{i:05}"))
            .ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    assert_eq!(read_group(&mut c, "s", "g00", "a-early", 2).len(), 2);
    assert_eq!(read_group(&mut c, "s", "g00", "z-late", 3).len(), 3);
    let h = Harness::new(config_for(
        &server,
        "[metrics]\nmax_groups_per_stream = 5\nmax_consumers_per_group = 1\n",
    ));
    h.collect().await;
    let m = h.metrics();
    let lags = m.family("redis_streams_group_lag");
    assert_eq!(lags.len(), 5, "{lags:?}");
    for g in &groups[..5] {
        assert!(
            m.get("redis_streams_group_lag", &tsg("s", g)).is_some(),
            "{g}"
        );
    }
    assert_eq!(
        m.get("redis_streams_exporter_groups_dropped", &[("target", "t")]),
        Some(7.0)
    );
    assert_eq!(
        m.get("redis_streams_group_pending", &tsg("s", "g00")),
        Some(5.0)
    );
    assert_eq!(
        m.get("redis_streams_group_consumers", &tsg("s", "g00")),
        Some((extra + 2) as f64)
    );
    let pending = |consumer: &str| {
        m.get(
            "redis_streams_consumer_pending",
            &[
                ("target", "t"),
                ("stream", "s"),
                ("group", "g00"),
                ("consumer", consumer),
            ],
        )
    };
    assert_eq!(pending("a-early"), Some(2.0), "{}", m.text);
    assert_eq!(
        pending("__other__"),
        Some(3.0),
        "z-late's, left out of the reply"
    );
    assert_eq!(
        m.get(
            "redis_streams_exporter_items_skipped_total",
            &[("target", "t"), ("kind", "consumer")]
        ),
        Some((extra + 2 - ROWS_KEPT as usize) as f64)
    );
}

per_server!(groups_and_consumers_beyond_the_caps);

/// The target's `max_groups` leaves small streams whole and cuts the
/// largest, whatever order the streams are read in; a stream that arrives
/// between polls never takes the poll over the cap.
async fn the_target_group_cap_cuts_the_largest_streams(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let create = |c: &mut redis::Connection, stream: &str, groups: usize| {
        xadd_n(c, stream, 3);
        for i in 0..groups {
            let _: () = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(stream)
                .arg(format!("g{i:02}"))
                .arg("0")
                .query(c)
                .unwrap();
        }
    };
    // Read first, by name: the first poll, which knows nothing of what the
    // streams want, lets it take what is left.
    create(&mut c, "a-big", 10);
    create(&mut c, "b", 1);
    create(&mut c, "c", 2);
    let h = Harness::new(config_for(&server, "max_groups = 8\n"));
    let kept = |h: &Harness| {
        let m = h.metrics();
        let mut kept: BTreeMap<String, usize> = BTreeMap::new();
        for (series, _) in m.family("redis_streams_group_lag") {
            let stream = series
                .split("stream=\"")
                .nth(1)
                .and_then(|s| s.split('"').next());
            *kept.entry(stream.unwrap().to_string()).or_default() += 1;
        }
        let dropped = m.get("redis_streams_exporter_groups_dropped", &[("target", "t")]);
        (kept, dropped)
    };
    h.collect().await;
    let (first, dropped) = kept(&h);
    assert_eq!(first.values().sum::<usize>(), 8, "{first:?}");
    assert_eq!(dropped, Some(5.0));
    for _ in 0..2 {
        h.probe(ProbeKind::Stream).await;
        let (kept, dropped) = kept(&h);
        let want: BTreeMap<String, usize> = [("a-big", 5), ("b", 1), ("c", 2)]
            .map(|(s, n)| (s.to_string(), n))
            .into();
        assert_eq!(kept, want, "each stream's share once their wants are known");
        assert_eq!(dropped, Some(5.0));
        let m = h.metrics();
        for g in ["g00", "g04"] {
            assert!(
                m.get("redis_streams_group_lag", &tsg("a-big", g)).is_some(),
                "{g}: the first by name stay"
            );
        }
    }
    // A newcomer read first: the poll stops at the cap, and the next one
    // shares again.
    create(&mut c, "0-new", 4);
    h.probe(ProbeKind::Discovery).await;
    h.probe(ProbeKind::Stream).await;
    let (kept_now, dropped) = kept(&h);
    assert_eq!(kept_now.values().sum::<usize>(), 8, "{kept_now:?}");
    assert_eq!(dropped, Some(9.0));
    h.probe(ProbeKind::Stream).await;
    let (kept, _) = kept(&h);
    let want: BTreeMap<String, usize> = [("0-new", 2), ("a-big", 2), ("b", 1), ("c", 2)]
        .map(|(s, n)| (s.to_string(), n))
        .into();
    assert_eq!(
        kept, want,
        "shares of 2 over 4 streams wanting 4, 10, 1 and 2"
    );
}

per_server!(the_target_group_cap_cuts_the_largest_streams);
