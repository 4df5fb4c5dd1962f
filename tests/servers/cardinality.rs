//! Series count at 3,000 streams × 2 groups on a real Redis, with the
//! defaults and with the cardinality knobs turned down: empty bucket lists,
//! no per-consumer series, and a group excluded by a glob (which must also
//! cost no per-group command). The per-group figures must be the ones the
//! "Series budget" table of docs/configuration.md states.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use redis_streams_exporter::backend::ROWS_KEPT;
use redis_streams_exporter::probe::ProbeKind;

const STREAMS: usize = 3000;

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
    /// Series of one group (stream `s:0`, group `g1`), consumers included.
    per_group: usize,
    /// Series of one stream without its groups.
    per_stream: usize,
    commands: BTreeMap<String, f64>,
    metrics: Metrics,
}

/// Measures with `target_keys` in the target's table and `tables` after.
async fn measure(server: &RedisServer, target_keys: &str, tables: &str) -> Measured {
    let h = Harness::new(config_for(
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
    let one_group: Vec<&str> = samples
        .iter()
        .filter(|l| l.contains("stream=\"s:0\",group=\"g1\""))
        .map(|l| l.split(['{', ' ']).next().unwrap_or_default())
        .collect();
    let per_group = one_group.len();
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
        per_group,
        per_stream,
        commands,
        metrics: m,
    }
}

/// The per-group figure the series-budget table of docs/configuration.md gives for `knob`.
fn documented_budget(knob: &str) -> usize {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/configuration.md"
    ))
    .unwrap();
    let row = readme
        .lines()
        .find(|l| l.starts_with(&format!("| {knob} |")))
        .unwrap_or_else(|| panic!("no series budget row for {knob} in docs/configuration.md"));
    // | knob | series per group (Redis 7.0, one consumer) | ...
    row.split('|')
        .nth(2)
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{row}: {e}"))
}

fn command(m: &Measured, name: &str) -> f64 {
    m.commands
        .iter()
        .filter(|(labels, _)| labels.contains(&format!("command=\"{name}\"")))
        .map(|(_, v)| *v)
        .sum()
}

#[tokio::test]
async fn series_at_3000_streams_by_2_groups() {
    let server = RedisServer::start(Server::Redis70);
    fill(&server);

    let no_buckets = "[metrics]\npending_idle_buckets = []\ndelivery_count_buckets = []\n";
    let turned_down = format!("{no_buckets}max_consumers_per_group = 0\n");
    let defaults = measure(&server, "", "").await;
    let buckets_off = measure(&server, "", no_buckets).await;
    let down = measure(&server, "", &turned_down).await;
    let one_group = measure(&server, "exclude_groups = [\"g2\"]\n", &turned_down).await;
    for (name, m) in [
        ("defaults", &defaults),
        ("empty bucket lists", &buckets_off),
        ("+ max_consumers_per_group = 0", &down),
        ("+ exclude_groups = [\"g2\"]", &one_group),
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
        defaults
            .metrics
            .value("redis_streams_exporter_streams", &[("target", "t")]),
        STREAMS as f64
    );
    assert_eq!(
        defaults.metrics.family("redis_streams_group_lag").len(),
        2 * STREAMS
    );
    // The documented budget is the measured one.
    assert_eq!(defaults.per_group, documented_budget("defaults"));
    assert_eq!(
        buckets_off.per_group,
        documented_budget("empty bucket lists")
    );
    assert_eq!(
        down.per_group,
        documented_budget("max_consumers_per_group = 0")
    );
    // Totals are streams × per-stream + groups × per-group + the exporter's
    // own series, which do not depend on the streams.
    let fixed = |m: &Measured, groups: usize| {
        m.total as i64 - (STREAMS * m.per_stream + groups * m.per_group) as i64
    };
    assert_eq!(fixed(&defaults, 2 * STREAMS), fixed(&down, 2 * STREAMS));
    assert!(
        fixed(&defaults, 2 * STREAMS) < 200,
        "{}",
        fixed(&defaults, 2 * STREAMS)
    );

    // Empty bucket lists: the families are not written at all.
    for family in [
        "redis_streams_group_pending_by_idle_bucket",
        "redis_streams_group_pending_by_delivery_count_bucket",
    ] {
        assert_eq!(defaults.metrics.family(family).len(), 2 * STREAMS * 7);
        assert!(!buckets_off.metrics.text.contains(family), "{family}");
    }
    // No consumer by name: only what they hold together.
    assert!(
        down.metrics
            .family("redis_streams_consumer_idle_seconds")
            .is_empty()
    );
    let pending = down.metrics.family("redis_streams_consumer_pending");
    assert_eq!(pending.len(), 2 * STREAMS);
    assert!(
        pending
            .iter()
            .all(|(k, _)| k.contains("consumer=\"__other__\""))
    );

    // An excluded group has no series and costs no per-group command.
    assert!(!one_group.metrics.text.contains("group=\"g2\""));
    assert_eq!(one_group.per_group, down.per_group);
    assert_eq!(
        one_group.total as i64 - fixed(&down, 2 * STREAMS),
        (STREAMS * down.per_stream + STREAMS * down.per_group) as i64
    );
    // Per group with entries pending: one summary, one look at its oldest
    // entries (xpending_range) and one scan page (xpending_range too).
    for (probe_command, per_group) in [
        ("xpending_summary", 1),
        ("xinfo_consumers", 1),
        ("xpending_range", 2),
    ] {
        assert_eq!(
            command(&defaults, probe_command),
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
