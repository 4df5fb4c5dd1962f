//! The figures no other exporter has, compared with the known truth
//! of scenarios built on real servers (Redis 6.2, 7.0 and 8.6, Valkey 9).

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use redis_streams_exporter::probe::ProbeKind;

fn group_create(c: &mut redis::Connection, key: &str, group: &str, id: &str) {
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(group)
        .arg(id)
        .arg("MKSTREAM")
        .query(c)
        .unwrap();
}

fn status_of(m: &Metrics, stream: &str, group: &str) -> String {
    m.status(stream, group)
        .unwrap_or_else(|| panic!("no status for {stream}/{group}:\n{}", m.text))
        .0
}

const FAST: &str = "[schedule]\nstream = \"100ms\"\n[status]\nwindow = 3\n";

/// A consumer that crashed holding 4 entries: its entries are orphaned once
/// it has been inactive longer than consumer_inactive_after, and the group is
/// stopped because nobody else reads while work waits.
async fn crashed_consumer(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "jobs", 10);
    group_create(&mut c, "jobs", "workers", "0");
    read_group(&mut c, "jobs", "workers", "crashed", 4);
    let h = Harness::new(config_for(
        &server,
        &format!("[stream_defaults]\nconsumer_inactive_after = \"1s\"\n{FAST}"),
    ));
    h.collect().await;
    let m = h.metrics();
    let g = tsg("jobs", "workers");
    assert_eq!(
        m.value("redis_streams_group_pending_orphaned", &g),
        0.0,
        "inactive 0 s: not orphaned yet"
    );
    tokio::time::sleep(Duration::from_millis(1300)).await;
    h.probe(ProbeKind::Consumers).await;
    h.probe(ProbeKind::Stream).await;
    let m = h.metrics();
    assert_eq!(m.value("redis_streams_group_pending_orphaned", &g), 4.0);
    assert_eq!(m.value("redis_streams_group_pending", &g), 4.0);
    assert_eq!(status_of(&m, "jobs", "workers"), "stopped");
}

/// An entry claimed 25 times is poison at poison_delivery_count 20; the
/// delivery-count buckets place it above 20.
async fn poison_entry(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "pay", 3);
    group_create(&mut c, "pay", "g", "0");
    read_group(&mut c, "pay", "g", "c1", 3);
    for _ in 0..24 {
        let _: redis::Value = redis::cmd("XCLAIM")
            .arg("pay")
            .arg("g")
            .arg("c1")
            .arg(0)
            .arg(&ids[1])
            .query(&mut c)
            .unwrap();
    }
    let h = Harness::new(config_for(
        &server,
        "[[streams]]\nmatch = \"pay\"\npoison_delivery_count = 20\n",
    ));
    h.collect().await;
    let m = h.metrics();
    let g = tsg("pay", "g");
    assert_eq!(m.value("redis_streams_group_pending_poison", &g), 1.0);
    let le = |le: &'static str| {
        [
            ("target", "t"),
            ("stream", "pay"),
            ("group", "g"),
            ("le", le),
        ]
    };
    assert_eq!(
        m.value(
            "redis_streams_group_pending_by_delivery_count_bucket",
            &le("1")
        ),
        2.0
    );
    assert_eq!(
        m.value(
            "redis_streams_group_pending_by_delivery_count_bucket",
            &le("20")
        ),
        2.0
    );
    assert_eq!(
        m.value(
            "redis_streams_group_pending_by_delivery_count_bucket",
            &le("+Inf")
        ),
        3.0
    );
}

/// Ghosts: pending entries whose bodies were removed by XTRIM (below the
/// first entry) and by XDEL (checked one by one).
async fn ghosts(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "s", 10);
    group_create(&mut c, "s", "g", "0");
    read_group(&mut c, "s", "g", "c", 10);
    // Trim the first 3 away, delete 2 in the middle.
    let _: i64 = redis::cmd("XTRIM")
        .arg("s")
        .arg("MAXLEN")
        .arg(7)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("XDEL")
        .arg("s")
        .arg(&ids[5])
        .arg(&ids[7])
        .query(&mut c)
        .unwrap();
    let h = Harness::new(config_for(&server, ""));
    h.collect().await;
    let m = h.metrics();
    let g = tsg("s", "g");
    assert_eq!(m.value("redis_streams_group_pending", &g), 10.0);
    assert_eq!(m.value("redis_streams_group_pending_ghost", &g), 5.0);
    assert_eq!(
        m.value("redis_streams_group_pending_ghost_unchecked", &g),
        0.0
    );
    // The bodies of the other five are there: nothing undelivered is lost.
    assert_eq!(m.value("redis_streams_group_lag", &g), 0.0);
}

/// Ghosts among a group's oldest pending entries are counted by the pending
/// summary, before any PEL scan: entries trimmed while pending (below the
/// stream's first entry), and the oldest pending entry deleted by a worker
/// that deletes what it read instead of acknowledging it (checked by one
/// XRANGE where max-deleted-entry-id covers it, Redis 7.0+ and Valkey).
async fn ghosts_before_the_pel_scan(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "trimmed", 10);
    group_create(&mut c, "trimmed", "g", "0");
    read_group(&mut c, "trimmed", "g", "c", 10);
    let _: i64 = redis::cmd("XTRIM")
        .arg("trimmed")
        .arg("MAXLEN")
        .arg(7)
        .query(&mut c)
        .unwrap();
    let ids = xadd_n(&mut c, "deleted", 10);
    group_create(&mut c, "deleted", "g", "0");
    read_group(&mut c, "deleted", "g", "c", 10);
    let _: i64 = redis::cmd("XACK")
        .arg("deleted")
        .arg("g")
        .arg(&ids[0])
        .arg(&ids[1])
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("XDEL")
        .arg("deleted")
        .arg(&ids[2])
        .query(&mut c)
        .unwrap();
    let h = Harness::new(config_for(&server, "[schedule]\npending_scan = \"1h\"\n"));
    h.probe(ProbeKind::Discovery).await;
    h.probe(ProbeKind::Stream).await;
    let (trimmed, deleted) = (tsg("trimmed", "g"), tsg("deleted", "g"));
    let m = h.metrics();
    assert_eq!(m.get("redis_streams_group_pending_ghost", &trimmed), None);
    assert_eq!(m.get("redis_streams_group_pending_ghost", &deleted), None);
    // The look at the oldest entries is for a group whose oldest pending
    // entry stayed: the second summary.
    h.probe(ProbeKind::PendingSummary).await;
    h.probe(ProbeKind::PendingSummary).await;
    let m = h.metrics();
    assert_eq!(
        m.get("redis_streams_group_pending_ghost", &trimmed),
        Some(3.0),
        "{kind:?}: the 3 trimmed while pending\n{}",
        m.text
    );
    // Redis 6.2 has no max-deleted-entry-id: the deletion waits for the scan.
    let want = if kind.has_lag() { 1.0 } else { 0.0 };
    assert_eq!(
        m.get("redis_streams_group_pending_ghost", &deleted)
            .unwrap_or(0.0),
        want,
        "{kind:?}: the oldest pending entry, deleted\n{}",
        m.text
    );
}

/// A trim passes a slow group: 10 entries, the group read 2, MAXLEN 4 keeps
/// entries 7..10. Lag is 4 (every retained entry), 4 entries (3..6) were
/// lost, and the group's status is data_loss.
async fn trim_passes_slow_group(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "q", 10);
    group_create(&mut c, "q", "slow", "0");
    read_group(&mut c, "q", "slow", "c", 2);
    let _: i64 = redis::cmd("XTRIM")
        .arg("q")
        .arg("MAXLEN")
        .arg(4)
        .query(&mut c)
        .unwrap();
    let h = Harness::new(config_for(&server, ""));
    let before = server_ms(&mut c);
    h.collect().await;
    let m = h.metrics();
    let g = tsg("q", "slow");
    assert_eq!(m.value("redis_streams_group_lag", &g), 4.0);
    assert_eq!(
        m.value("redis_streams_group_lag_estimated", &g),
        0.0,
        "the length is exact"
    );
    let lag_s = m.value("redis_streams_group_lag_seconds", &g);
    let expected = (before - id_ms(&ids[6])) as f64 / 1000.0;
    assert!(
        lag_s >= expected - 0.001 && lag_s < expected + 2.0,
        "lag seconds {lag_s}, oldest retained {expected}"
    );
    if kind.has_lag() {
        assert_eq!(m.value("redis_streams_group_trimmed_undelivered", &g), 4.0);
        assert_eq!(status_of(&m, "q", "slow"), "data_loss");
    } else {
        // 6.2 keeps no entries-added / entries-read: the loss cannot be counted.
        assert_eq!(m.get("redis_streams_group_trimmed_undelivered", &g), None);
    }
}

/// NULL lag after XDEL in the undelivered range, and after SETID without
/// ENTRIESREAD: counted exactly (small range), flagged as estimated.
async fn null_lag_small(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "d", 10);
    group_create(&mut c, "d", "g", "0");
    read_group(&mut c, "d", "g", "c", 3);
    let _: i64 = redis::cmd("XDEL")
        .arg("d")
        .arg(&ids[6])
        .query(&mut c)
        .unwrap();
    xadd_n(&mut c, "e", 10);
    let e_ids: Vec<String> = {
        let v: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
            .arg("e")
            .arg("-")
            .arg("+")
            .query(&mut c)
            .unwrap();
        v.into_iter().map(|(id, _)| id).collect()
    };
    group_create(&mut c, "e", "g", "0");
    let _: () = redis::cmd("XGROUP")
        .arg("SETID")
        .arg("e")
        .arg("g")
        .arg(&e_ids[3])
        .query(&mut c)
        .unwrap();
    let h = Harness::new(config_for(&server, ""));
    h.collect().await;
    let m = h.metrics();
    // Truth: d has 9 entries, 3 delivered → 6 undelivered; e: 6 after entry 4.
    for (stream, truth) in [("d", 6.0), ("e", 6.0)] {
        let g = tsg(stream, "g");
        assert_eq!(m.value("redis_streams_group_lag", &g), truth, "{stream}");
        // Every server with a lag field reports NULL in both cases
        // (measured on 7.0.15, 8.6.3 and Valkey 9.1.2); 6.2 reports
        // nothing: our count either way.
        assert_eq!(
            m.value("redis_streams_group_lag_estimated", &g),
            1.0,
            "{kind:?} {stream}"
        );
    }
}

/// NULL lag over a large undelivered range on a steady-rate stream: the
/// interpolation estimate stays within 1% of the truth (0.04% measured).
async fn null_lag_large(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    // 20 000 entries at ~100/s with ±50% jitter per gap, ending now, with
    // explicit time-based IDs (as auto IDs would be at that rate).
    let now = server_ms(&mut c);
    let mut state = 0x2545F4914F6CDD1Du64;
    let mut gaps = Vec::new();
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        gaps.push(5 + state % 11); // 5..15 ms, mean 10
    }
    let total: u64 = gaps.iter().sum();
    let mut ms = now - total;
    let mut pipe = redis::pipe();
    let mut ids = Vec::new();
    for g in &gaps {
        ms += g;
        let id = format!("{ms}-0");
        pipe.cmd("XADD")
            .arg("big")
            .arg(&id)
            .arg("n")
            .arg(1)
            .ignore();
        ids.push(id);
    }
    let _: () = pipe.query(&mut c).unwrap();
    group_create(&mut c, "big", "g", "0");
    // Delivered up to entry 6 000: 14 000 undelivered. SETID leaves lag NULL.
    let _: () = redis::cmd("XGROUP")
        .arg("SETID")
        .arg("big")
        .arg("g")
        .arg(&ids[5_999])
        .query(&mut c)
        .unwrap();
    let h = Harness::new(config_for(&server, ""));
    h.collect().await;
    let m = h.metrics();
    let g = tsg("big", "g");
    let lag = m.value("redis_streams_group_lag", &g);
    let truth = 14_000.0;
    let error = (lag - truth).abs() / truth;
    println!(
        "{kind:?}: estimated {lag}, truth {truth}, error {:.3}%",
        error * 100.0
    );
    // Every server with a lag field reports NULL after this SETID (measured
    // on 7.0.15, 8.6.3 and Valkey 9.1.2): always our estimate.
    assert_eq!(m.value("redis_streams_group_lag_estimated", &g), 1.0);
    assert!(
        error < 0.01,
        "estimate {lag} is {:.2}% off the truth {truth}",
        error * 100.0
    );
}

/// A dead-letter stream next to its stream; a missing one reads 0.
async fn dead_letters(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 5);
    xadd_n(&mut c, "orders:dead", 3);
    xadd_n(&mut c, "audit", 1);
    let h = Harness::new(config_for(
        &server,
        "[[streams]]\nmatch = \"orders\"\ndead_letter = \"{stream}:dead\"\nmax_delay = \"5m\"\n\
         [[streams]]\nmatch = \"audit\"\ndead_letter = \"audit:dlq\"\n",
    ));
    h.collect().await;
    let m = h.metrics();
    assert_eq!(
        m.value("redis_streams_stream_dead_letter_length", &ts("orders")),
        3.0
    );
    assert_eq!(
        m.value("redis_streams_stream_max_delay_seconds", &ts("orders")),
        300.0
    );
    assert_eq!(
        m.get("redis_streams_stream_max_delay_seconds", &ts("audit")),
        None
    );
    assert_eq!(
        m.value("redis_streams_stream_dead_letter_length", &ts("audit")),
        0.0
    );
    if kind.has_lag() {
        assert_eq!(
            m.value(
                "redis_streams_stream_dead_letter_entries_added_total",
                &ts("orders")
            ),
            3.0
        );
        assert_eq!(
            m.value(
                "redis_streams_stream_dead_letter_entries_added_total",
                &ts("audit")
            ),
            0.0
        );
    } else {
        assert_eq!(
            m.get(
                "redis_streams_stream_dead_letter_entries_added_total",
                &ts("orders")
            ),
            None
        );
    }
    // Streams without a dead letter configured have no such series.
    assert_eq!(
        m.get(
            "redis_streams_stream_dead_letter_length",
            &ts("orders:dead")
        ),
        None
    );
}

/// A quiet stream (caught up, nothing produced, consumers long gone) is
/// idle over a full window, never stopped or stalled.
async fn quiet_stream(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "quiet", 5);
    group_create(&mut c, "quiet", "g", "0");
    let read = read_group(&mut c, "quiet", "g", "c", 5);
    let mut ack = redis::cmd("XACK");
    ack.arg("quiet").arg("g");
    for id in &read {
        ack.arg(id);
    }
    let _: i64 = ack.query(&mut c).unwrap();
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    for _ in 0..4 {
        h.probe(ProbeKind::Consumers).await;
        h.probe(ProbeKind::Stream).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let m = h.metrics();
    assert_eq!(status_of(&m, "quiet", "g"), "idle");
    assert_eq!(m.value("redis_streams_group_lag", &tsg("quiet", "g")), 0.0);
}

/// A consumer that reads with NOACK and keeps up: Valkey and Redis 7.2+
/// never mark it active (inactive -1), but its group moves, and a group that
/// moves is read. Never stopped.
async fn noack_reader_keeps_up(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "feed", 5);
    group_create(&mut c, "feed", "g", "$");
    let h = Harness::new(config_for(&server, FAST));
    h.collect().await;
    let mut seen = Vec::new();
    for _ in 0..8 {
        xadd_n(&mut c, "feed", 20);
        let _: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("reader")
            .arg("COUNT")
            .arg(15)
            .arg("NOACK")
            .arg("STREAMS")
            .arg("feed")
            .arg(">")
            .query(&mut c)
            .unwrap();
        tokio::time::sleep(Duration::from_millis(120)).await;
        h.probe(ProbeKind::Consumers).await;
        h.probe(ProbeKind::Stream).await;
        seen.push(status_of(&h.metrics(), "feed", "g"));
    }
    assert!(
        seen.iter().all(|s| s != "stopped" && s != "stalled"),
        "{kind:?}: {seen:?}"
    );
}

/// A batch consumer with `read_every`: between two runs the work waits, the
/// group is ok; once a run is overdue by the window it is stopped.
async fn batch_consumer_between_runs(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "nightly", 10);
    group_create(&mut c, "nightly", "batch", "0");
    read_group(&mut c, "nightly", "batch", "job", 10);
    let ids = xadd_n(&mut c, "nightly", 5);
    for id in read_group(&mut c, "nightly", "batch", "job", 5) {
        let _: u64 = redis::cmd("XACK")
            .arg("nightly")
            .arg("batch")
            .arg(id)
            .query(&mut c)
            .unwrap();
    }
    assert_eq!(ids.len(), 5);
    let h = Harness::new(config_for(
        &server,
        &format!("[stream_defaults]\nread_every = \"2s\"\n{FAST}"),
    ));
    h.collect().await;
    // The run is over; new work arrives and waits for the next one.
    xadd_n(&mut c, "nightly", 5);
    let mut between = Vec::new();
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        h.probe(ProbeKind::Consumers).await;
        h.probe(ProbeKind::Stream).await;
        between.push(status_of(&h.metrics(), "nightly", "batch"));
    }
    assert!(
        between.iter().all(|s| s == "ok"),
        "{kind:?} between runs: {between:?}"
    );
    // No run for read_every (2 s) + the window (0.3 s): overdue.
    tokio::time::sleep(Duration::from_millis(2_400)).await;
    h.probe(ProbeKind::Consumers).await;
    h.probe(ProbeKind::Stream).await;
    assert_eq!(
        status_of(&h.metrics(), "nightly", "batch"),
        "stopped",
        "{kind:?} overdue"
    );
}

/// A batch job that died before the exporter started, its per-run consumer
/// deleted after its last run: no read is known. The group is ok while the
/// work waiting is younger than read_every (2 s) plus the window, and
/// stopped once it is older, a few polls after the exporter started.
async fn batch_job_dead_before_the_exporter(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "nightly", 10);
    group_create(&mut c, "nightly", "batch", "0");
    read_group(&mut c, "nightly", "batch", "run-1", 10);
    let _: u64 = redis::cmd("XGROUP")
        .arg("DELCONSUMER")
        .arg("nightly")
        .arg("batch")
        .arg("run-1")
        .query(&mut c)
        .unwrap();
    xadd_n(&mut c, "nightly", 5);
    let born = Instant::now();
    let h = Harness::new(config_for(
        &server,
        &format!("[stream_defaults]\nread_every = \"2s\"\n{FAST}"),
    ));
    h.collect().await;
    let mut seen = Vec::new();
    let stopped_after = loop {
        h.probe(ProbeKind::Consumers).await;
        h.probe(ProbeKind::Stream).await;
        let status = status_of(&h.metrics(), "nightly", "batch");
        if status == "stopped" {
            break born.elapsed();
        }
        seen.push(status);
        assert!(
            born.elapsed() < Duration::from_secs(10),
            "{kind:?}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(seen.iter().all(|s| s == "ok"), "{kind:?} before: {seen:?}");
    // Not before the oldest waiting entry was older than the grace.
    assert!(
        stopped_after >= Duration::from_millis(2_300),
        "{kind:?}: {stopped_after:?}"
    );
}

per_server!(
    noack_reader_keeps_up,
    batch_consumer_between_runs,
    batch_job_dead_before_the_exporter,
    crashed_consumer,
    poison_entry,
    ghosts,
    ghosts_before_the_pel_scan,
    trim_passes_slow_group,
    null_lag_small,
    null_lag_large,
    dead_letters,
    quiet_stream
);

/// A PEL too large for one scan interval: the run reports how far it got
/// (progress below 1, no results pretending to be complete), resumes where it
/// stopped, and publishes results once a pass completes.
#[tokio::test]
async fn pel_scan_larger_than_one_interval() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    for _ in 0..5 {
        xadd_n(&mut c, "big", 1000);
    }
    group_create(&mut c, "big", "g", "0");
    read_group(&mut c, "big", "g", "c", 5000);
    // 1000 entries/s over a 1.5 s interval: about a third of the PEL per run.
    let h = Harness::new(config_for(
        &server,
        "[schedule]\npending_scan = \"1500ms\"\n[limits]\npending_entries_per_second = 1000\npending_page = 250\n",
    ));
    h.probe(ProbeKind::Discovery).await;
    h.probe(ProbeKind::Stream).await;
    let g = tsg("big", "g");
    let mut progress = Vec::new();
    for _ in 0..6 {
        h.probe(ProbeKind::PendingScan).await;
        let m = h.metrics();
        let p = m.value("redis_streams_group_pending_scan_progress_ratio", &g);
        progress.push(p);
        if p < 1.0 {
            assert_eq!(
                m.get("redis_streams_group_pending_max_idle_seconds", &g),
                None,
                "no results before a pass completes"
            );
            assert_eq!(
                m.get("redis_streams_group_pending_scan_timestamp_seconds", &g),
                None
            );
        } else {
            let le_inf = [
                ("target", "t"),
                ("stream", "big"),
                ("group", "g"),
                ("le", "+Inf"),
            ];
            assert_eq!(
                m.value("redis_streams_group_pending_by_idle_bucket", &le_inf),
                5000.0,
                "every entry counted once"
            );
            break;
        }
    }
    assert!(
        progress.len() >= 3,
        "the scan should need several runs: {progress:?}"
    );
    assert!(
        progress.windows(2).all(|w| w[1] > w[0]),
        "progress must grow: {progress:?}"
    );
    assert_eq!(*progress.last().unwrap(), 1.0, "{progress:?}");
    eprintln!("PEL scan progress after each run: {progress:?}");
    let m = h.metrics();
    assert_eq!(
        m.value(
            "redis_streams_exporter_pending_scan_entries_total",
            &[("target", "t")]
        ),
        5000.0
    );
}
