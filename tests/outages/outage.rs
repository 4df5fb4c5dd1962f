//! A short outage does not erase evidence. Poison, ghost and
//! orphaned entries are found by the slow probes (the PEL scan every 5
//! minutes, consumers every minute), so losing them at every blip makes their
//! alerts resolve and fire again after each restart or failover.
//!
//! - The same server back (same run id, here a 40 s network outage through a
//!   proxy): the last PEL-scan results, consumers and target info come back
//!   with the first polls after the outage, with their original timestamps.
//! - Another server (a restart: new run id, same data from its AOF): the old
//!   results are dropped, and the PEL scan, woken at once, reads the groups
//!   that had findings first (its poison and ghost figures are back within
//!   seconds, not a scan interval later).

use crate::common;

use std::time::{Duration, Instant};

use common::proxy::{Mode, Proxy};
use common::*;

fn g() -> [(&'static str, &'static str); 3] {
    tsg("ev", "g")
}

/// A group with one poison entry (6 deliveries), ghosts (pending entries
/// deleted) and a crashed consumer holding entries.
fn evidence(server: &RedisServer) {
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "ev", 20);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("ev")
        .arg("g")
        .arg("0")
        .query(&mut c)
        .unwrap();
    read_group(&mut c, "ev", "g", "crashed", 10);
    for _ in 0..5 {
        let _: redis::Value = redis::cmd("XCLAIM")
            .arg("ev")
            .arg("g")
            .arg("crashed")
            .arg(0)
            .arg(&ids[0])
            .query(&mut c)
            .unwrap();
    }
    let _: u64 = redis::cmd("XDEL")
        .arg("ev")
        .arg(&ids[3])
        .arg(&ids[4])
        .query(&mut c)
        .unwrap();
}

/// `entries_per_second` paces the PEL scan: at 2 a scan of the 10 pending
/// entries takes 5 s, so what is shown right after an outage is what was
/// kept, not a new scan.
fn config(url: &str, entries_per_second: u32) -> String {
    format!(
        "[[targets]]\nname = \"t\"\nurl = \"{url}\"\nstreams = [\"ev\"]\n\
         [schedule]\nstream = \"500ms\"\ninfo = \"10m\"\npending_summary = \"10m\"\n\
         consumers = \"10m\"\npending_scan = \"10m\"\n\
         [limits]\ncommand_timeout = \"300ms\"\npending_entries_per_second = {entries_per_second}\n\
         pending_page = 5\n\
         [stream_defaults]\npoison_delivery_count = 5\nconsumer_inactive_after = \"1s\"\n"
    )
}

/// After a restart from the AOF the crashed consumer looks fresh: Redis
/// replays its reads at start-up, so its idle time starts again (and its
/// entries are orphaned again only `consumer_inactive_after` later).
fn scan_evidence_shown(m: &Metrics) -> bool {
    m.get("redis_streams_group_pending_poison", &g()) == Some(1.0)
        && m.get("redis_streams_group_pending_ghost", &g()) == Some(2.0)
}

fn evidence_shown(m: &Metrics) -> bool {
    m.get("redis_streams_group_pending_poison", &g()) == Some(1.0)
        && m.get("redis_streams_group_pending_ghost", &g()) == Some(2.0)
        && m.get("redis_streams_group_pending_orphaned", &g()) == Some(10.0)
        && !m.family("redis_streams_target_info").is_empty()
}

fn scan_time(m: &Metrics) -> Option<f64> {
    m.get("redis_streams_group_pending_scan_timestamp_seconds", &g())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_server_back_after_40_s_keeps_its_evidence() {
    let server = RedisServer::start(Server::Redis70);
    evidence(&server);
    let proxy = Proxy::start(server.port);
    // Every slow probe runs once, at the start, then only every 10 minutes.
    std::thread::sleep(Duration::from_millis(1200));
    let d = Daemon::start(&config(&proxy.url(), 2)).await;
    let before = wait_metrics(&d, Duration::from_secs(20), "the evidence", evidence_shown).await;
    let scanned_at = scan_time(&before).unwrap();

    proxy.set_mode(Mode::Reset);
    wait_metrics(&d, Duration::from_secs(10), "target down", |m| {
        m.get("redis_streams_exporter_target_up", &[("target", "t")]) == Some(0.0)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(40)).await;
    proxy.set_mode(Mode::Pass);
    let healed = Instant::now();
    // Watch every exposition from the heal on: how long the target is up
    // without its evidence.
    let mut up_at: Option<Instant> = None;
    let first_scan_time;
    let back_at = loop {
        let m = d.metrics().await;
        let up = m.get("redis_streams_exporter_target_up", &[("target", "t")]) == Some(1.0);
        if up && up_at.is_none() {
            up_at = Some(Instant::now());
        }
        if up && evidence_shown(&m) {
            first_scan_time = scan_time(&m);
            break Instant::now();
        }
        assert!(
            healed.elapsed() < Duration::from_secs(10),
            "the evidence did not come back:\n{}",
            m.text
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Less any stall of the whole machine (see `stall`).
    let gap = (back_at - up_at.unwrap()).saturating_sub(stall::stalled(up_at.unwrap(), back_at));
    println!(
        "OUTAGE | same server, 40 s network outage | up again {:?} after the heal; poison, ghost, orphaned and target_info shown {gap:?} after that; first scan timestamp shown {} (the one from before the outage: {scanned_at})",
        up_at.unwrap() - healed,
        first_scan_time.unwrap()
    );
    assert!(
        gap <= Duration::from_millis(1000),
        "no gap beyond a poll (500 ms here): {gap:?}"
    );
    assert_eq!(
        first_scan_time,
        Some(scanned_at),
        "what was kept, with its original timestamp (the new scan is paced to take 5 s)"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_server_drops_the_old_evidence_and_rescans_findings_first() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let aof = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        dir.path().to_str().unwrap(),
    ];
    let mut server = RedisServer::start_fixed(Server::Redis70, port, &aof);
    evidence(&server);
    std::thread::sleep(Duration::from_millis(1200));
    let d = Daemon::start(&config(&server.url(), 50_000)).await;
    let before = wait_metrics(&d, Duration::from_secs(20), "the evidence", evidence_shown).await;
    let scanned_at = scan_time(&before).unwrap();

    server.kill();
    wait_metrics(&d, Duration::from_secs(10), "target down", |m| {
        m.get("redis_streams_exporter_target_up", &[("target", "t")]) == Some(0.0)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let restarted = RedisServer::start_fixed(Server::Redis70, port, &aof);
    let back = Instant::now();
    let after = wait_metrics(&d, Duration::from_secs(15), "the evidence rescanned", |m| {
        scan_evidence_shown(m) && scan_time(m).is_some_and(|t| t > scanned_at)
    })
    .await;
    println!(
        "OUTAGE | restart (new run id), 5 s down | evidence rescanned and shown {:?} after the restart (scan timestamp {} > {scanned_at})",
        back.elapsed(),
        scan_time(&after).unwrap()
    );
    drop(restarted);
    d.stop().await;
}
