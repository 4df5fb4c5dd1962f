//! A real Sentinel. The exporter finds the primary through
//! the sentinel, reports its streams, says `target_up 0` as soon as the
//! primary dies (serving only what it last read, for the grace, never a
//! stale value as fresh), and follows the sentinel's failover to the
//! promoted replica by itself.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::*;
use common::*;

// Discovery (which also re-reads the topology) is slow on purpose: the
// failover must be followed without it.
const FAST: &str = "[schedule]\ndiscovery = \"5m\"\ninfo = \"1s\"\nstream = \"200ms\"\n\
                    pending_summary = \"500ms\"\nconsumers = \"500ms\"\npending_scan = \"1s\"\n\
                    [limits]\ncommand_timeout = \"300ms\"\n";

/// Data series of target t (everything read from Redis).
fn data_series(m: &Metrics) -> Vec<&str> {
    m.samples
        .keys()
        .filter(|k| {
            (k.starts_with("redis_streams_stream_")
                || k.starts_with("redis_streams_group_")
                || k.starts_with("redis_streams_consumer_")
                || k.starts_with("redis_streams_target_"))
                && k.contains("target=\"t\"")
        })
        .map(String::as_str)
        .collect()
}

fn up(m: &Metrics) -> Option<f64> {
    m.get("redis_streams_exporter_target_up", &[("target", "t")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_failover_to_the_promoted_replica() {
    let mut setup = SentinelSetup::start();
    let old_port = setup.primary.port;
    let new_port = setup.replica.port;
    assert_eq!(setup.master_port(), old_port);
    {
        let mut c = setup.primary.conn();
        xadd_n(&mut c, "orders", 10);
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("orders")
            .arg("g1")
            .arg("0")
            .query(&mut c)
            .unwrap();
        let read = read_group(&mut c, "orders", "g1", "c1", 4);
        let _: i64 = redis::cmd("XACK")
            .arg("orders")
            .arg("g1")
            .arg(&read[0])
            .query(&mut c)
            .unwrap();
    }
    setup.wait_replicated();

    let toml = format!(
        "[[targets]]\nname = \"t\"\nurl = \"redis://127.0.0.1:{}\"\nmode = \"sentinel\"\n\
         master_name = \"{MASTER_NAME}\"\npatterns = [\"*\"]\n{FAST}",
        setup.sentinel.port
    );
    let d = Daemon::start(&toml).await;
    let m = wait_metrics(&d, Duration::from_secs(10), "data via the sentinel", |m| {
        m.get("redis_streams_group_pending", &tsg("orders", "g1")) == Some(3.0)
    })
    .await;
    assert_eq!(up(&m), Some(1.0));
    assert_eq!(m.value("redis_streams_stream_length", &ts("orders")), 10.0);
    assert_eq!(
        m.value("redis_streams_group_lag", &tsg("orders", "g1")),
        6.0
    );
    assert_eq!(
        m.value(
            "redis_streams_consumer_pending",
            &[
                ("target", "t"),
                ("stream", "orders"),
                ("group", "g1"),
                ("consumer", "c1")
            ]
        ),
        3.0
    );
    assert!(
        m.value(
            "redis_streams_exporter_redis_commands_total",
            &[("target", "t"), ("command", "sentinel_get_master_addr")]
        ) >= 1.0
    );
    // Client tracking runs on the sentinel's current primary.
    tracking_on(&d, &setup.primary).await;

    // The primary dies. Within one poll and one timeout the target is down
    // and only what was last read of it is served, for the grace; the
    // sentinel promotes the replica and the exporter follows.
    setup.primary.kill();
    let killed = Instant::now();
    // Times from the kill count while the machine runs (see `stall`).
    let since_kill = || stall::awake_since(killed);
    let mut down_at = None;
    let mut switched_at = None;
    let mut written = false;
    let mut samples = 0;
    let recovered_at = loop {
        let m = d.metrics().await;
        samples += 1;
        let sentinel_port = setup.master_port();
        match up(&m) {
            Some(0.0) => {
                down_at.get_or_insert(since_kill());
                // What the last polls of the dead primary read, held for the
                // grace (3 polls), never anything newer.
                let len = m.get("redis_streams_stream_length", &ts("orders"));
                assert!(
                    matches!(len, None | Some(10.0)),
                    "length {len:?} while down"
                );
                let data = data_series(&m);
                assert!(
                    len.is_some() || data.is_empty(),
                    "series served while down without the stream's: {data:?}"
                );
            }
            Some(1.0) if down_at.is_none() => {
                // Before the first failed poll the last snapshot stands, but
                // only for one poll plus the timeout.
                assert!(
                    since_kill() < Duration::from_millis(1500),
                    "still up {:?} after the primary died:\n{}",
                    since_kill(),
                    m.text
                );
            }
            Some(1.0) => {
                // Up again: only after the sentinel named the replica.
                assert_eq!(
                    sentinel_port, new_port,
                    "up again before the failover:\n{}",
                    m.text
                );
                // Up with the new primary: its streams come back with its
                // next stream poll (absent until then, never stale).
                let len = m.get("redis_streams_stream_length", &ts("orders"));
                assert!(
                    matches!(len, None | Some(10.0) | Some(13.0)),
                    "length {len:?} after the failover"
                );
                if len == Some(13.0) {
                    break since_kill();
                }
            }
            other => panic!("target_up {other:?}"),
        }
        if sentinel_port == new_port && !written {
            switched_at = Some(since_kill());
            // The promoted replica takes writes; the exporter must show them.
            let mut c = setup.replica.conn();
            xadd_n(&mut c, "orders", 3);
            written = true;
        }
        assert!(
            since_kill() < Duration::from_secs(30),
            "no recovery: down at {down_at:?}, sentinel switched at {switched_at:?}\n{}",
            m.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let down_at = down_at.expect("target_up never went to 0");
    let switched_at = switched_at.expect("recovered before the switch");
    eprintln!(
        "primary killed; target_up 0 after {down_at:?}; sentinel switched to the replica after \
         {switched_at:?}; exporter up with the new primary's data after {recovered_at:?} \
         ({samples} samples)"
    );
    assert!(
        down_at < Duration::from_millis(1500),
        "down detected late: {down_at:?}"
    );
    // The exporter re-asks the sentinel after every failed round trip, so it
    // follows within a few polls of the switch, not after a fixed refresh.
    assert!(
        recovered_at - switched_at < Duration::from_secs(3),
        "followed the failover {:?} after the switch",
        recovered_at - switched_at
    );

    let m = d.metrics().await;
    assert_eq!(up(&m), Some(1.0));
    assert_eq!(
        m.value("redis_streams_group_lag", &tsg("orders", "g1")),
        9.0
    );
    let m = wait_metrics(&d, Duration::from_secs(5), "PEL on the new primary", |m| {
        m.get("redis_streams_group_pending", &tsg("orders", "g1")) == Some(3.0)
            && m.get(
                "redis_streams_consumer_pending",
                &[
                    ("target", "t"),
                    ("stream", "orders"),
                    ("group", "g1"),
                    ("consumer", "c1"),
                ],
            ) == Some(3.0)
    })
    .await;
    assert!(
        m.value(
            "redis_streams_exporter_errors_total",
            &[("target", "t"), ("kind", "connection")]
        ) >= 1.0
    );
    // Tracking follows the failover: on again, on the promoted replica.
    tracking_on(&d, &setup.replica).await;
    assert_eq!(old_port, setup.primary.port);
    d.stop().await;
}

/// Waits for the exporter to say client tracking is on, and checks that
/// `primary` has the one tracking client.
async fn tracking_on(d: &Daemon, primary: &RedisServer) {
    wait_metrics(d, Duration::from_secs(10), "client tracking on", |m| {
        m.get(
            "redis_streams_exporter_client_tracking_active",
            &[("target", "t")],
        ) == Some(1.0)
    })
    .await;
    assert_eq!(tracking_clients(primary), 1);
}

/// The server's count of clients with tracking on (`INFO clients`).
fn tracking_clients(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query(&mut server.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("tracking_clients:"))
        .unwrap_or_else(|| panic!("no tracking_clients in INFO clients:\n{info}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeps_the_primary_while_the_sentinel_is_down() {
    let mut setup = SentinelSetup::start();
    {
        let mut c = setup.primary.conn();
        xadd_n(&mut c, "orders", 4);
    }
    // Discovery every second re-asks the sentinel every second.
    let toml = format!(
        "[[targets]]\nname = \"t\"\nurl = \"redis://127.0.0.1:{}\"\nmode = \"sentinel\"\n\
         master_name = \"{MASTER_NAME}\"\npatterns = [\"*\"]\n{}",
        setup.sentinel.port,
        FAST.replace("discovery = \"5m\"", "discovery = \"1s\"")
    );
    let d = Daemon::start(&toml).await;
    wait_metrics(&d, Duration::from_secs(10), "data via the sentinel", |m| {
        m.get("redis_streams_stream_length", &ts("orders")) == Some(4.0)
    })
    .await;
    let errors_before = d.metrics().await.value(
        "redis_streams_exporter_errors_total",
        &[("target", "t"), ("kind", "connection")],
    );

    setup.sentinel.kill();
    let killed = Instant::now();
    let mut written = false;
    while killed.elapsed() < Duration::from_millis(3500) {
        let m = d.metrics().await;
        assert_eq!(up(&m), Some(1.0), "a dead sentinel took the primary down");
        let len = m.get("redis_streams_stream_length", &ts("orders"));
        assert!(matches!(len, Some(4.0) | Some(6.0)), "length {len:?}");
        if !written && killed.elapsed() > Duration::from_millis(1500) {
            let mut c = setup.primary.conn();
            xadd_n(&mut c, "orders", 2);
            written = true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let m = wait_metrics(&d, Duration::from_secs(2), "new entries", |m| {
        m.get("redis_streams_stream_length", &ts("orders")) == Some(6.0)
    })
    .await;
    let errors_after = m.value(
        "redis_streams_exporter_errors_total",
        &[("target", "t"), ("kind", "connection")],
    );
    assert!(
        errors_after > errors_before,
        "the unreachable sentinel was not counted"
    );
    eprintln!(
        "sentinel down for {:?}: target stayed up; {} sentinel connection errors counted",
        killed.elapsed(),
        errors_after - errors_before
    );
    d.stop().await;
}
