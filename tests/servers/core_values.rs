//! Every value the core probes export equals the known truth of a
//! stream state built on a real server (Redis 6.2, 7.0 and 8.6, Valkey 9).

use crate::common;

use common::*;
use redis::Commands;

async fn core_values(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "orders", 10);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("orders")
        .arg("g1")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("orders")
        .arg("g2")
        .arg("$")
        .query(&mut c)
        .unwrap();
    let read1 = read_group(&mut c, "orders", "g1", "c1", 4);
    let _: i64 = redis::cmd("XACK")
        .arg("orders")
        .arg("g1")
        .arg(&read1[0])
        .query(&mut c)
        .unwrap();
    let read2 = read_group(&mut c, "orders", "g1", "c2", 2);
    assert_eq!(read2, ids[4..6].to_vec());
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("empty")
        .arg("g")
        .arg("$")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();
    for (id, v) in [("1-1", "a"), ("2-1", "b"), ("3-1", "c")] {
        let _: String = redis::cmd("XADD")
            .arg("ids:custom")
            .arg(id)
            .arg("v")
            .arg(v)
            .query(&mut c)
            .unwrap();
    }
    let _: () = c.set("plain", "not a stream").unwrap();

    let h = Harness::new(config_for(&server, ""));
    let before = server_ms(&mut c);
    h.collect().await;
    let after = server_ms(&mut c);
    let m = h.metrics();
    promtool_check(&m.text);

    let age_ok = |name: &str, labels: &[(&str, &str)], id: &str| {
        let v = m.value(name, labels);
        let lo = (before.saturating_sub(id_ms(id))) as f64 / 1000.0 - 0.001;
        let hi = (after - id_ms(id)) as f64 / 1000.0 + 0.001;
        assert!(
            v >= lo && v <= hi,
            "{name}{labels:?} = {v}, expected within [{lo}, {hi}]"
        );
    };

    // Streams.
    assert_eq!(m.value("redis_streams_stream_length", &ts("orders")), 10.0);
    assert_eq!(m.value("redis_streams_stream_length", &ts("empty")), 0.0);
    assert_eq!(
        m.value("redis_streams_stream_length", &ts("ids:custom")),
        3.0
    );
    assert_eq!(
        m.get("redis_streams_stream_length", &ts("plain")),
        None,
        "a string key is not a stream"
    );
    if kind.has_lag() {
        assert_eq!(
            m.value("redis_streams_stream_entries_added_total", &ts("orders")),
            10.0
        );
    } else {
        assert_eq!(
            m.get("redis_streams_stream_entries_added_total", &ts("orders")),
            None,
            "6.2 has no entries-added"
        );
    }
    assert_eq!(
        m.value(
            "redis_streams_stream_first_entry_timestamp_seconds",
            &ts("orders")
        ),
        id_ms(&ids[0]) as f64 / 1000.0
    );
    assert_eq!(
        m.value(
            "redis_streams_stream_last_entry_timestamp_seconds",
            &ts("orders")
        ),
        id_ms(&ids[9]) as f64 / 1000.0
    );
    assert_eq!(m.value("redis_streams_stream_groups", &ts("orders")), 2.0);
    assert_eq!(m.value("redis_streams_stream_groups", &ts("empty")), 1.0);
    assert_eq!(
        m.value("redis_streams_stream_time_based_ids", &ts("orders")),
        1.0
    );
    assert_eq!(
        m.value("redis_streams_stream_time_based_ids", &ts("ids:custom")),
        0.0
    );
    assert_eq!(
        m.get(
            "redis_streams_stream_first_entry_timestamp_seconds",
            &ts("ids:custom")
        ),
        None
    );
    assert_eq!(
        m.get(
            "redis_streams_stream_last_entry_timestamp_seconds",
            &ts("ids:custom")
        ),
        None
    );
    assert_eq!(
        m.get(
            "redis_streams_stream_first_entry_timestamp_seconds",
            &ts("empty")
        ),
        None,
        "empty stream has no first entry"
    );

    // Group g1: 10 entries, 6 delivered (4 to c1, one acked; 2 to c2).
    let g1 = tsg("orders", "g1");
    assert_eq!(m.value("redis_streams_group_lag", &g1), 4.0);
    // 6.2 has no lag field: the exporter counted it (exactly) itself.
    assert_eq!(
        m.value("redis_streams_group_lag_estimated", &g1),
        if kind.has_lag() { 0.0 } else { 1.0 }
    );
    age_ok("redis_streams_group_lag_seconds", &g1, &ids[6]);
    if kind.has_lag() {
        assert_eq!(m.value("redis_streams_group_entries_read", &g1), 6.0);
    } else {
        assert_eq!(m.get("redis_streams_group_entries_read", &g1), None);
    }
    assert_eq!(
        m.value("redis_streams_group_last_delivered_timestamp_seconds", &g1),
        id_ms(&ids[5]) as f64 / 1000.0
    );
    assert_eq!(m.value("redis_streams_group_consumers", &g1), 2.0);
    assert_eq!(m.value("redis_streams_group_pending", &g1), 5.0);
    age_ok(
        "redis_streams_group_oldest_pending_age_seconds",
        &g1,
        &ids[1],
    );
    let max_idle = m.value("redis_streams_group_pending_max_idle_seconds", &g1);
    assert!(
        max_idle >= 0.0 && max_idle <= (after - before) as f64 / 1000.0 + 5.0,
        "max idle {max_idle}"
    );
    let le = |le: &'static str| {
        [
            ("target", "t"),
            ("stream", "orders"),
            ("group", "g1"),
            ("le", le),
        ]
    };
    assert_eq!(
        m.value(
            "redis_streams_group_pending_by_delivery_count_bucket",
            &le("1")
        ),
        5.0
    );
    assert_eq!(
        m.value(
            "redis_streams_group_pending_by_delivery_count_bucket",
            &le("+Inf")
        ),
        5.0
    );
    assert_eq!(
        m.value("redis_streams_group_pending_by_idle_bucket", &le("+Inf")),
        5.0
    );
    assert_eq!(
        m.value("redis_streams_group_pending_by_idle_bucket", &le("21600")),
        5.0
    );
    assert_eq!(m.value("redis_streams_group_pending_poison", &g1), 0.0);
    assert_eq!(m.value("redis_streams_group_pending_ghost", &g1), 0.0);
    assert_eq!(m.value("redis_streams_group_pending_orphaned", &g1), 0.0);
    assert_eq!(m.value("redis_streams_group_trimmed_undelivered", &g1), 0.0);
    assert_eq!(
        m.value("redis_streams_group_pending_scan_progress_ratio", &g1),
        1.0
    );
    let scan_ts = m.value("redis_streams_group_pending_scan_timestamp_seconds", &g1);
    assert!(
        (scan_ts * 1000.0 - after as f64).abs() < 5_000.0,
        "scan timestamp {scan_ts} vs server {after}"
    );
    // Work waits and one collection is no window: not judged yet.
    assert_eq!(
        m.status("orders", "g1")
            .map(|(status, _)| status)
            .as_deref(),
        Some("warming_up")
    );

    // Consumers.
    let cons = |name: &'static str| {
        [
            ("target", "t"),
            ("stream", "orders"),
            ("group", "g1"),
            ("consumer", name),
        ]
    };
    assert_eq!(m.value("redis_streams_consumer_pending", &cons("c1")), 3.0);
    assert_eq!(m.value("redis_streams_consumer_pending", &cons("c2")), 2.0);
    assert!(m.value("redis_streams_consumer_idle_seconds", &cons("c1")) < 10.0);
    if kind.reports_inactive() {
        assert!(m.value("redis_streams_consumer_inactive_seconds", &cons("c1")) < 10.0);
    } else {
        assert_eq!(
            m.get("redis_streams_consumer_inactive_seconds", &cons("c1")),
            None,
            "inactive arrived in 7.2"
        );
    }

    // Group g2 (created at $): caught up, nothing pending.
    let g2 = tsg("orders", "g2");
    assert_eq!(m.value("redis_streams_group_lag", &g2), 0.0);
    assert_eq!(m.value("redis_streams_group_lag_seconds", &g2), 0.0);
    assert_eq!(m.value("redis_streams_group_pending", &g2), 0.0);
    assert_eq!(m.value("redis_streams_group_consumers", &g2), 0.0);
    assert_eq!(
        m.get("redis_streams_group_oldest_pending_age_seconds", &g2),
        None,
        "nothing pending: no age"
    );
    assert_eq!(
        m.value("redis_streams_group_pending_max_idle_seconds", &g2),
        0.0
    );
    assert_eq!(
        m.status("orders", "g2"),
        Some(("idle".to_string(), "no_work".to_string()))
    );

    // Streams with non-time IDs get no ages.
    assert_eq!(
        m.family("redis_streams_group_lag_seconds")
            .iter()
            .filter(|(k, _)| k.contains("ids:custom"))
            .count(),
        0
    );

    // Target and exporter.
    let server_label = kind.server_label();
    let version = kind.version();
    let info = m.family("redis_streams_target_info");
    assert_eq!(info.len(), 1, "{info:?}");
    assert!(info[0].0.contains(&format!("server=\"{server_label}\",version=\"{version}\",mode=\"standalone\",maxmemory_policy=\"noeviction\"")), "{info:?}");
    assert_eq!(
        m.value("redis_streams_target_maxmemory_bytes", &[("target", "t")]),
        0.0
    );
    assert!(m.value("redis_streams_target_used_memory_bytes", &[("target", "t")]) > 100_000.0);
    assert_eq!(
        m.value("redis_streams_exporter_target_up", &[("target", "t")]),
        1.0
    );
    assert_eq!(
        m.value("redis_streams_exporter_streams", &[("target", "t")]),
        3.0
    );
    assert_eq!(
        m.value("redis_streams_exporter_streams_dropped", &[("target", "t")]),
        0.0
    );
    m.assert_every_probe_succeeded();
    assert_eq!(
        m.value(
            "redis_streams_exporter_errors_total",
            &[("target", "t"), ("kind", "protocol")]
        ),
        0.0
    );
    // One SCAN (tiny keyspace), one XINFO STREAM and GROUPS per stream.
    assert_eq!(
        m.value(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "scan")]
        ),
        1.0
    );
    // Plus, for a stream whose lag is counted (always on 6.2, which has no
    // lag), both XINFO once more, to check that nothing changed between
    // XINFO and the count.
    assert_eq!(
        m.value(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "xinfo_stream")]
        ),
        if kind.has_lag() { 3.0 } else { 4.0 }
    );
    assert_eq!(
        m.value(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "xinfo_groups")]
        ),
        if kind.has_lag() { 3.0 } else { 4.0 }
    );
}

per_server!(core_values);

/// `max_streams` caps discovery and the dropped count is exported; streams
/// that vanish leave the output.
#[tokio::test]
async fn max_streams_and_vanishing_streams() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    for name in ["s:a", "s:b", "s:c", "s:d", "other"] {
        xadd_n(&mut c, name, 1);
    }
    let text = format!(
        "[[targets]]\nname = \"t\"\nurl = \"{}\"\npatterns = [\"s:*\"]\nmax_streams = 3\n",
        server.url()
    );
    let config =
        redis_streams_exporter::config::from_str("t.toml", &text, &Default::default()).unwrap();
    let h = Harness::new(config);
    h.collect().await;
    let m = h.metrics();
    assert_eq!(
        m.value("redis_streams_exporter_streams", &[("target", "t")]),
        3.0
    );
    assert_eq!(
        m.value("redis_streams_exporter_streams_dropped", &[("target", "t")]),
        1.0
    );
    let names: Vec<&str> = m
        .family("redis_streams_stream_length")
        .iter()
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(names.len(), 3);
    assert!(names.iter().all(|n| n.contains("stream=\"s:")), "{names:?}");
    // Delete one: the next stream poll drops it, before any rediscovery.
    let _: i64 = c.del("s:a").unwrap();
    h.probe(redis_streams_exporter::probe::ProbeKind::Stream)
        .await;
    let m = h.metrics();
    assert_eq!(m.get("redis_streams_stream_length", &ts("s:a")), None);
    assert_eq!(m.value("redis_streams_stream_length", &ts("s:b")), 1.0);
    // A vanished stream is an event, not an error (keys come and go): nothing is
    // counted, and it leaves the watch list at once.
    assert_eq!(
        m.value(
            "redis_streams_exporter_errors_total",
            &[("target", "t"), ("kind", "nosuchkey")]
        ),
        0.0
    );
    assert_eq!(
        m.value("redis_streams_exporter_streams", &[("target", "t")]),
        2.0
    );
    h.probe(redis_streams_exporter::probe::ProbeKind::Stream)
        .await;
    assert_eq!(
        h.metrics().value(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "xinfo_stream")]
        ),
        3.0 + 3.0 + 2.0,
        "the next poll no longer asks for it"
    );
    // Rediscovery picks up s:d now that there is room.
    h.probe(redis_streams_exporter::probe::ProbeKind::Discovery)
        .await;
    h.probe(redis_streams_exporter::probe::ProbeKind::Stream)
        .await;
    let m = h.metrics();
    assert_eq!(m.value("redis_streams_stream_length", &ts("s:d")), 1.0);
    assert_eq!(
        m.value("redis_streams_exporter_streams_dropped", &[("target", "t")]),
        0.0
    );
}

/// A discovery walk of many SCAN pages, sent a rate-limit burst at a time
/// (several bursts here), finds every stream once and sends exactly the
/// calls it counts: the walk neither stops at a burst boundary nor repeats
/// a page.
#[tokio::test]
async fn discovery_walk_over_many_bursts() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        pipe.set(format!("k:{i}"), i).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let streams: Vec<String> = (0..7).map(|i| format!("s:{i}")).collect();
    for s in &streams {
        xadd_n(&mut c, s, 1);
    }
    let text = format!(
        "[[targets]]\nname = \"t\"\nurl = \"{}\"\npatterns = [\"s:*\"]\nscan_count = 10\n\
         [limits]\npipeline_size = 20\ncommands_per_second = 2000\n",
        server.url()
    );
    let config =
        redis_streams_exporter::config::from_str("t.toml", &text, &Default::default()).unwrap();
    let h = Harness::new(config);
    let before = common::cluster::command_calls(&server)
        .get("scan")
        .copied()
        .unwrap_or(0);
    h.probe(redis_streams_exporter::probe::ProbeKind::Discovery)
        .await;
    let sent = common::cluster::command_calls(&server)["scan"] - before;
    // 3,007 keys at COUNT 10: hundreds of pages, many bursts of 20.
    assert!(sent > 100, "only {sent} SCAN calls");
    let m = h.metrics();
    assert_eq!(
        m.value(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "scan")]
        ),
        sent as f64
    );
    assert_eq!(
        m.value("redis_streams_exporter_streams", &[("target", "t")]),
        7.0
    );
    assert_eq!(
        m.value(
            "redis_streams_exporter_probe_success",
            &[("target", "t"), ("probe", "discovery")]
        ),
        1.0
    );
}

/// Counters never go backwards, so `rate()` never reads a rewind as a
/// counter reset (a spike of every entry the group ever read): a group set
/// back to an earlier position (XGROUP SETID, with ENTRIESREAD where the
/// server has it) between two polls leaves every counter family at least
/// where it was, while the group's entries-read, a gauge, goes back.
async fn counters_never_go_backwards(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "orders", 10);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("orders")
        .arg("g")
        .arg("0")
        .query(&mut c)
        .unwrap();
    assert_eq!(read_group(&mut c, "orders", "g", "c", 8).len(), 8);
    let h = Harness::new(config_for(&server, ""));
    h.collect().await;
    let before = h.metrics();
    let mut setid = redis::cmd("XGROUP");
    setid.arg("SETID").arg("orders").arg("g").arg(&ids[1]);
    if kind.has_lag() {
        setid.arg("ENTRIESREAD").arg(2);
    }
    let _: () = setid.query(&mut c).unwrap();
    h.probe(redis_streams_exporter::probe::ProbeKind::Stream)
        .await;
    let after = h.metrics();
    let counters: Vec<&str> = after
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    assert!(
        counters.contains(&"redis_streams_group_rewinds_total"),
        "{counters:?}"
    );
    for (series, was) in &before.samples {
        let family = series.split('{').next().unwrap();
        if !counters.contains(&family) {
            continue;
        }
        if let Some(now) = after.samples.get(series) {
            assert!(now >= was, "{series} went from {was} to {now}");
        }
    }
    let g = tsg("orders", "g");
    assert_eq!(after.value("redis_streams_group_rewinds_total", &g), 1.0);
    if kind.has_lag() {
        assert_eq!(before.value("redis_streams_group_entries_read", &g), 8.0);
        assert_eq!(after.value("redis_streams_group_entries_read", &g), 2.0);
    }
}

per_server!(counters_never_go_backwards);

/// `redis_streams_group_last_read_timestamp_seconds` is the server time of
/// the group's latest read, follows a later read, and is absent for a group
/// nobody has read.
async fn last_read_timestamp_follows_the_reads(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "jobs", 6);
    for (group, from) in [("read", "0"), ("unread", "$")] {
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("jobs")
            .arg(group)
            .arg(from)
            .query(&mut c)
            .unwrap();
    }
    let first_read = server_ms(&mut c);
    assert_eq!(read_group(&mut c, "jobs", "read", "c1", 2).len(), 2);
    let h = Harness::new(config_for(&server, ""));
    let last_read = |h: &Harness, group: &str| {
        h.metrics().get(
            "redis_streams_group_last_read_timestamp_seconds",
            &tsg("jobs", group),
        )
    };
    h.collect().await;
    h.probe(redis_streams_exporter::probe::ProbeKind::Stream)
        .await;
    let seen = last_read(&h, "read").expect("a read was seen") * 1000.0;
    let now = server_ms(&mut c) as f64;
    assert!(
        seen >= first_read as f64 - 1.0 && seen <= now,
        "last read at {seen} ms, read at {first_read} ms, now {now} ms"
    );
    assert_eq!(last_read(&h, "unread"), None, "never read: unknown, not 0");
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let second_read = server_ms(&mut c);
    assert_eq!(read_group(&mut c, "jobs", "read", "c2", 2).len(), 2);
    h.collect().await;
    h.probe(redis_streams_exporter::probe::ProbeKind::Stream)
        .await;
    let later = last_read(&h, "read").expect("still seen") * 1000.0;
    assert!(
        later >= second_read as f64 - 1.0 && later > seen,
        "the second read at {second_read} ms shows as {later} ms (first {seen} ms)"
    );
}

per_server!(last_read_timestamp_follows_the_reads);
