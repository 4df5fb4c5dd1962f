//! Connections closed under the exporter, and a real outage, on each server:
//!
//! - a server `timeout` of 3 s with the default schedule (every connection idles between
//!   polls), and `CLIENT KILL TYPE normal` every second for a minute (from the test's own
//!   connection, which the server skips) with the default schedule and with a stream poll every
//!   250 ms (nearly every kill then closes a connection between two commands): `target_up`
//!   never drops, no data series disappears, the polls stay fresh (an entry written half-way
//!   shows), and the reconnects are counted in `redis_streams_exporter_reconnects_total`;
//! - the server killed: `target_up 0` within one stream interval, the data series served as last
//!   read during the grace (3 stream intervals), then removed; fresh values once it is back.
//!
//! Each scenario prints what it measured per server: scrapes, `target_up` samples at 0, series
//! gaps, reconnects by reason.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;

/// How long each fault lasts.
const MINUTE: Duration = Duration::from_secs(60);

/// How often the faults are scraped.
const SCRAPE_EVERY: Duration = Duration::from_millis(250);

/// Scheduling slack on a loaded two-core machine, added to the bounds of waits.
const SLACK: Duration = Duration::from_millis(1500);

fn up(m: &Metrics, target: &str) -> Option<f64> {
    m.get("redis_streams_exporter_target_up", &[("target", target)])
}

fn length(m: &Metrics, target: &str) -> Option<f64> {
    m.get(
        "redis_streams_stream_length",
        &[("target", target), ("stream", "orders")],
    )
}

fn reconnects(m: &Metrics, target: &str, reason: &str) -> f64 {
    m.value(
        "redis_streams_exporter_reconnects_total",
        &[("target", target), ("reason", reason)],
    )
}

fn connection_errors(m: &Metrics, target: &str) -> f64 {
    m.value(
        "redis_streams_exporter_errors_total",
        &[("target", target), ("kind", "connection")],
    )
}

/// Every data series of `target` (not the exporter's own), by name and labels, without the
/// labels whose value is the figure itself (a group's `status` and `reason` change with what
/// the group does; the series is the same group's).
fn data_series(m: &Metrics, target: &str) -> BTreeSet<String> {
    let label = format!("target=\"{target}\"");
    m.samples
        .keys()
        .filter(|k| !k.starts_with("redis_streams_exporter_") && k.contains(&label))
        .map(|k| {
            let Some((name, labels)) = k.split_once('{') else {
                return k.clone();
            };
            let kept: Vec<&str> = labels
                .trim_end_matches('}')
                .split(',')
                .filter(|l| !l.starts_with("status=") && !l.starts_with("reason="))
                .collect();
            format!("{name}{{{}}}", kept.join(","))
        })
        .collect()
}

/// A stream `orders` of 10 entries whose group `g` holds 4 pending with `c1`.
fn queue(server: &RedisServer) {
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 10);
    server.cmd(&["XGROUP", "CREATE", "orders", "g", "0"]);
    read_group(&mut c, "orders", "g", "c1", 4);
}

/// What one target showed over a fault.
#[derive(Debug, Default)]
struct Tally {
    scrapes: u32,
    /// Scrapes with `target_up` 0 (or absent).
    up_zero: u32,
    /// Series seen in an earlier scrape and missing from a later one, each time.
    gaps: u32,
    /// Every series seen so far.
    seen: BTreeSet<String>,
    first_gaps: Vec<String>,
}

impl Tally {
    fn see(&mut self, m: &Metrics, target: &str) {
        self.scrapes += 1;
        if up(m, target) != Some(1.0) {
            self.up_zero += 1;
        }
        let now = data_series(m, target);
        for missing in self.seen.difference(&now) {
            self.gaps += 1;
            if self.first_gaps.len() < 5 {
                self.first_gaps.push(missing.clone());
            }
        }
        self.seen.extend(now);
    }
}

/// A server whose `timeout` closes idle connections, and one whose normal clients are killed
/// every second, watched by one exporter on the default schedule for a minute.
async fn idle_timeouts_and_kills_are_no_outage(kind: Server) {
    let idle = RedisServer::start_with(kind, &["--timeout", "3"]);
    let killed = RedisServer::start(kind);
    queue(&idle);
    queue(&killed);
    let d = Daemon::start(&format!(
        "[[targets]]\nname = \"idle\"\nurl = \"{}\"\nstreams = [\"orders\"]\n\
         [[targets]]\nname = \"killed\"\nurl = \"{}\"\nstreams = [\"orders\"]\n",
        idle.url(),
        killed.url()
    ))
    .await;
    // A second exporter polls the killed server on a fast schedule: its connection is in use
    // four times a second, so nearly every kill closes it between two commands, and the next
    // command finds it closed (the default schedule's connection is mostly found closed by the
    // keepalive, and opened afresh by the next poll).
    let fast = Daemon::start(&format!(
        "[[targets]]\nname = \"fast\"\nurl = \"{}\"\nstreams = [\"orders\"]\n\
         [schedule]\ndiscovery = \"1s\"\ninfo = \"1s\"\nstream = \"250ms\"\n\
         pending_summary = \"1s\"\nconsumers = \"1s\"\npending_scan = \"1s\"\n",
        killed.url()
    ))
    .await;
    let first = wait_metrics(
        &d,
        Duration::from_secs(20),
        "both targets' first collection",
        |m| {
            ["idle", "killed"]
                .iter()
                .all(|t| up(m, t) == Some(1.0) && length(m, t) == Some(10.0))
        },
    )
    .await;
    let first_fast = wait_metrics(&fast, Duration::from_secs(20), "the fast one's", |m| {
        up(m, "fast") == Some(1.0) && length(m, "fast") == Some(10.0)
    })
    .await;
    let before = |t| reconnects(&first, t, "closed");
    let (idle_before, killed_before) = (before("idle"), before("killed"));
    let fast_before = reconnects(&first_fast, "fast", "closed");
    let errors_before = [
        connection_errors(&first, "idle"),
        connection_errors(&first, "killed"),
        connection_errors(&first_fast, "fast"),
    ];

    // The killer: its own connection (CLIENT KILL skips the caller), every second; half-way
    // it adds an entry, which only polls that still work can show.
    let stop = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicU64::new(0));
    let killer = std::thread::spawn({
        let (stop, kills) = (stop.clone(), kills.clone());
        let mut c = killed.conn();
        move || {
            let started = Instant::now();
            let mut added = false;
            while !stop.load(Ordering::Relaxed) {
                let n: u64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("normal")
                    .query(&mut c)
                    .unwrap();
                kills.fetch_add(n, Ordering::Relaxed);
                if !added && started.elapsed() >= MINUTE / 2 {
                    xadd_n(&mut c, "orders", 1);
                    added = true;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    });
    let started = Instant::now();
    let (mut idle_tally, mut killed_tally) = (Tally::default(), Tally::default());
    let mut fast_tally = Tally::default();
    let mut added = false;
    while started.elapsed() < MINUTE {
        let m = d.metrics().await;
        idle_tally.see(&m, "idle");
        killed_tally.see(&m, "killed");
        fast_tally.see(&fast.metrics().await, "fast");
        if !added && started.elapsed() >= MINUTE / 2 {
            xadd_n(&mut idle.conn(), "orders", 1);
            added = true;
        }
        tokio::time::sleep(SCRAPE_EVERY).await;
    }
    stop.store(true, Ordering::Relaxed);
    killer.join().unwrap();

    // The polls went on: the entries written half-way show (a stream poll every 15 s).
    let last = wait_metrics(
        &d,
        Duration::from_secs(20),
        "the entries written half-way",
        |m| length(m, "idle") == Some(11.0) && length(m, "killed") == Some(11.0),
    )
    .await;
    let last_fast = wait_metrics(&fast, Duration::from_secs(5), "the fast one's", |m| {
        length(m, "fast") == Some(11.0)
    })
    .await;
    let row = |last: &Metrics, t: &str, tally: &Tally, fault: &str| {
        eprintln!(
            "{kind:?} | {fault} | scrapes {} | up samples at 0: {} | series gaps: {} | \
             reconnects closed {} timeout {} protocol {} | connection errors {} | pings {}",
            tally.scrapes,
            tally.up_zero,
            tally.gaps,
            reconnects(last, t, "closed"),
            reconnects(last, t, "timeout"),
            reconnects(last, t, "protocol"),
            connection_errors(last, t),
            last.get(
                "redis_streams_exporter_redis_commands_total",
                &[("target", t), ("command", "ping")]
            )
            .unwrap_or(0.0),
        );
    };
    let kills = kills.load(Ordering::Relaxed);
    row(
        &last,
        "idle",
        &idle_tally,
        "timeout 3, default schedule, 60 s",
    );
    row(
        &last,
        "killed",
        &killed_tally,
        &format!(
            "CLIENT KILL TYPE normal every 1 s for 60 s, default schedule ({kills} clients killed in all)"
        ),
    );
    row(
        &last_fast,
        "fast",
        &fast_tally,
        "the same kills, stream poll every 250 ms",
    );
    for (t, tally) in [
        ("idle", &idle_tally),
        ("killed", &killed_tally),
        ("fast", &fast_tally),
    ] {
        assert_eq!(
            tally.up_zero, 0,
            "{kind:?} {t}: target_up dropped: {tally:?}"
        );
        assert_eq!(
            tally.gaps, 0,
            "{kind:?} {t}: series disappeared: {:?}",
            tally.first_gaps
        );
        assert!(tally.scrapes >= 100, "{kind:?} {t}: {tally:?}");
    }
    // A command sent again on a fresh connection is no error: none was counted.
    let errors_after = [
        connection_errors(&last, "idle"),
        connection_errors(&last, "killed"),
        connection_errors(&last_fast, "fast"),
    ];
    assert_eq!(
        errors_after, errors_before,
        "{kind:?}: connection errors counted (idle, killed, fast)"
    );
    // The kills landed, and the connections killed were opened again: under the fast schedule
    // nearly once per kill, each time by a command that found its connection closed and was
    // sent again.
    assert!(kills >= 30, "{kind:?}: {kills} kills");
    assert!(
        reconnects(&last, "killed", "closed") > killed_before,
        "{kind:?}: no reconnect counted under CLIENT KILL"
    );
    assert!(
        reconnects(&last_fast, "fast", "closed") - fast_before >= 30.0,
        "{kind:?}: {} reconnects under the fast schedule",
        reconnects(&last_fast, "fast", "closed") - fast_before
    );
    // The keepalive keeps the idle server's connection open: without it every poll (a
    // discovery every 10 s, a stream poll every 15 s) would open a new one.
    assert!(
        reconnects(&last, "idle", "closed") - idle_before <= 2.0,
        "{kind:?}: the idle server's timeout closed connections the keepalive should have kept: \
         {} reconnects",
        reconnects(&last, "idle", "closed") - idle_before
    );
    promtool_check(&last.text);
    fast.stop().await;
    d.stop().await;
}

/// A real outage: the server killed, then started again on its port with other data.
async fn an_outage_is_down_within_a_poll_and_loses_its_series_after_the_grace(kind: Server) {
    let mut server = RedisServer::start(kind);
    queue(&server);
    let port = server.port;
    let interval = Duration::from_secs(1);
    let grace = interval * 3;
    let d = Daemon::start(&format!(
        "[[targets]]\nname = \"t\"\nurl = \"{}\"\nstreams = [\"orders\"]\n\
         [schedule]\nstream = \"1s\"\n",
        server.url()
    ))
    .await;
    let up_again = wait_metrics(&d, Duration::from_secs(15), "first collection", |m| {
        up(m, "t") == Some(1.0) && length(m, "t") == Some(10.0)
    })
    .await;
    let served = data_series(&up_again, "t");

    server.kill();
    let killed = Instant::now();
    let down = wait_metrics(&d, interval + SLACK, "target_up 0 after the kill", |m| {
        up(m, "t") == Some(0.0)
    })
    .await;
    let down_after = killed.elapsed();
    let down_at = Instant::now();
    // Held: the series as last read, target_up 0.
    assert_eq!(length(&down, "t"), Some(10.0), "{kind:?}: not held");
    let held = data_series(&down, "t");
    assert!(
        held.is_subset(&served) && held.len() * 10 >= served.len() * 9,
        "{kind:?}: held {} of {} series",
        held.len(),
        served.len()
    );
    // ...then gone, after the grace: the first run after it drops them.
    let mut last_held = down_at;
    let gone = wait_metrics(
        &d,
        grace + interval + SLACK,
        "the series withdrawn after the grace",
        |m| {
            assert_eq!(up(m, "t"), Some(0.0), "{kind:?}: up while killed");
            let now = data_series(m, "t");
            if now.is_empty() {
                return true;
            }
            assert!(now.is_subset(&served), "{kind:?}: fresh series while down");
            last_held = Instant::now();
            false
        },
    )
    .await;
    assert_eq!(length(&gone, "t"), None);
    let held_for = last_held - down_at;
    assert!(
        held_for >= grace / 3,
        "{kind:?}: the series went {held_for:?} after target_up 0 (grace {grace:?})"
    );
    let gone_after = down_at.elapsed();

    // Back with other data: fresh values only.
    let restarted = tokio::task::spawn_blocking(move || {
        let s = RedisServer::start_on(kind, port);
        let mut c = s.conn();
        xadd_n(&mut c, "orders", 3);
        s
    })
    .await
    .unwrap();
    let back = wait_metrics(&d, Duration::from_secs(10), "back with fresh data", |m| {
        if up(m, "t") == Some(1.0) {
            assert_ne!(length(m, "t"), Some(10.0), "{kind:?}: up with the old data");
        }
        up(m, "t") == Some(1.0) && length(m, "t") == Some(3.0)
    })
    .await;
    eprintln!(
        "{kind:?} | server killed, stream every 1 s, grace {grace:?} | target_up 0 {down_after:?} \
         after the kill | {} of {} series held, last seen {held_for:?} after target_up 0, gone \
         {gone_after:?} after it | reconnects closed {}",
        held.len(),
        served.len(),
        reconnects(&back, "t", "closed")
    );
    drop(restarted);
    d.stop().await;
}

per_server!(
    idle_timeouts_and_kills_are_no_outage,
    an_outage_is_down_within_a_poll_and_loses_its_series_after_the_grace
);
