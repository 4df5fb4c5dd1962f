//! One daemon, several targets polled independently. A
//! target on a closed port and one that accepts connections but never
//! answers do not delay a healthy target, which keeps fresh data on its own
//! schedule; rate limits are per target; series are bounded by
//! `max_streams` and the consumer cap whatever Redis holds.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use common::cluster::*;
use common::*;

fn label<'a>(series: &'a str, name: &str) -> Option<&'a str> {
    let start = series.find(&format!("{name}=\""))? + name.len() + 2;
    let end = start + series[start..].find('"')?;
    Some(&series[start..end])
}

/// Wall-clock seconds, the clock of the exporter's success timestamps.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn up(m: &Metrics, target: &str) -> Option<f64> {
    m.get("redis_streams_exporter_target_up", &[("target", target)])
}

fn last_stream_success(m: &Metrics, target: &str) -> Option<f64> {
    m.get(
        "redis_streams_exporter_probe_last_success_timestamp_seconds",
        &[("target", target), ("probe", "stream")],
    )
}

fn errors(m: &Metrics, target: &str, kind: &str) -> f64 {
    m.value(
        "redis_streams_exporter_errors_total",
        &[("target", target), ("kind", kind)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_and_hung_targets_do_not_delay_a_healthy_one() {
    let fresh = RedisServer::start(Server::Redis70);
    let busy = RedisServer::start(Server::Redis70);
    let closed_port = free_port();
    let hung = Blackhole::start();

    {
        let mut c = fresh.conn();
        xadd_n(&mut c, "orders", 5);
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("orders")
            .arg("g")
            .arg("0")
            .query(&mut c)
            .unwrap();
        read_group(&mut c, "orders", "g", "c1", 2);
    }
    // 30 streams for a cap of 20; the first holds a group of 80 consumers,
    // one pending entry each, for a cap of 5.
    {
        let mut c = busy.conn();
        for i in 0..30 {
            let key = format!("s:{i:02}");
            xadd_n(&mut c, &key, if i == 0 { 80 } else { 3 });
            let _: () = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(&key)
                .arg("g")
                .arg("0")
                .query(&mut c)
                .unwrap();
        }
        for i in 0..80 {
            let got = read_group(&mut c, "s:00", "g", &format!("c{i:02}"), 1);
            assert_eq!(got.len(), 1);
        }
    }

    let toml = format!(
        "[[targets]]\nname = \"fresh\"\nurl = \"{}\"\npatterns = [\"*\"]\n\
         [[targets]]\nname = \"busy\"\nurl = \"{}\"\npatterns = [\"*\"]\nmax_streams = 20\n\
         [[targets]]\nname = \"closed\"\nurl = \"redis://127.0.0.1:{closed_port}\"\n\
         [[targets]]\nname = \"hung\"\nurl = \"redis://127.0.0.1:{}\"\n\
         [schedule]\ndiscovery = \"1s\"\ninfo = \"1s\"\nstream = \"200ms\"\n\
         pending_summary = \"500ms\"\nconsumers = \"500ms\"\npending_scan = \"1s\"\n\
         [limits]\ncommands_per_second = 100\ncommand_timeout = \"4s\"\n\
         [metrics]\nmax_consumers_per_group = 5\n",
        fresh.url(),
        busy.url(),
        hung.port()
    );
    let d = Daemon::start(&toml).await;
    let started = Instant::now();
    wait_metrics(&d, Duration::from_secs(10), "both healthy targets", |m| {
        m.get(
            "redis_streams_group_lag",
            &[("target", "fresh"), ("stream", "orders"), ("group", "g")],
        ) == Some(3.0)
            && m.get(
                "redis_streams_consumer_pending",
                &[
                    ("target", "busy"),
                    ("stream", "s:00"),
                    ("group", "g"),
                    ("consumer", "__other__"),
                ],
            )
            .is_some()
    })
    .await;
    eprintln!(
        "both healthy targets collected {:?} after start",
        started.elapsed()
    );

    // Watch for 8 s (two hung timeouts): the healthy target's stream probe
    // keeps succeeding every 200 ms. A poll that waited on the hung target
    // would leave its success at least the 4 s timeout old while this
    // watcher, sampling every 50 ms, sees it age; half of it is the bound.
    // Its age counts the time the process ran (see `stall`): when the whole
    // machine stalls (CI's VMs do, for seconds), the watcher and the
    // exporter stop together, and the samples right after the stall can be
    // served before the poll that the stall held back.
    let mut successes: Vec<f64> = Vec::new();
    let mut samples = 0;
    let mut oldest = (0.0_f64, 0.0_f64); // (age while running, at) of the oldest success seen
    let mut writes = 0;
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(8) {
        let asked_at = Instant::now();
        let asked = unix_now();
        let m = d.metrics().await;
        assert_eq!(up(&m, "fresh"), Some(1.0));
        assert_eq!(up(&m, "busy"), Some(1.0));
        assert_eq!(up(&m, "closed"), Some(0.0));
        assert_eq!(up(&m, "hung"), Some(0.0));
        let t = last_stream_success(&m, "fresh").unwrap();
        if successes.last() != Some(&t) {
            successes.push(t);
        }
        samples += 1;
        let age = (asked - t).max(0.0);
        let succeeded_at = asked_at.checked_sub(Duration::from_secs_f64(age)).unwrap();
        let running_age = age - stall::stalled(succeeded_at, asked_at).as_secs_f64();
        if running_age > oldest.0 {
            oldest = (running_age, asked);
        }
        // New entries on the healthy target show up at its next polls.
        if watch.elapsed() > Duration::from_millis(500 * (writes + 1)) && writes < 6 {
            let mut c = fresh.conn();
            xadd_n(&mut c, "orders", 1);
            writes += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stalled = stall::stalled(watch, Instant::now());
    let m = d.metrics().await;
    let gaps: Vec<f64> = successes.windows(2).map(|w| w[1] - w[0]).collect();
    let max_gap = gaps.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "fresh: {} stream polls in 8 s, largest gap {max_gap:.3} s, oldest success seen {:.3} s old \
         ({samples} samples); the process stalled {stalled:?}; hung timeouts {}, \
         closed connection errors {}",
        successes.len(),
        oldest.0,
        errors(&m, "hung", "timeout"),
        errors(&m, "closed", "connection"),
    );
    assert!(
        successes.len() >= 10,
        "only {} polls: {successes:?}",
        successes.len()
    );
    assert!(
        samples >= 40,
        "only {samples} samples; the process stalled {stalled:?}"
    );
    assert!(
        oldest.0 < 2.0,
        "the healthy target's last stream poll was {:.3} s old (while the process ran) at {:.3} \
         (hung timeout is 4 s): \
         polls {successes:?}",
        oldest.0,
        oldest.1,
    );
    let m = wait_metrics(&d, Duration::from_secs(2), "the writes", |m| {
        m.get(
            "redis_streams_stream_length",
            &[("target", "fresh"), ("stream", "orders")],
        ) == Some(5.0 + writes as f64)
    })
    .await;

    // The dead targets are down for their own reasons, with no data series.
    assert!(errors(&m, "hung", "timeout") >= 1.0);
    assert!(errors(&m, "closed", "connection") >= 1.0);
    for target in ["closed", "hung"] {
        let data: Vec<&str> = m
            .samples
            .keys()
            .filter(|k| {
                !k.starts_with("redis_streams_exporter_") && label(k, "target") == Some(target)
            })
            .map(String::as_str)
            .collect();
        assert!(data.is_empty(), "{target}: {data:?}");
    }

    // Rate limits are per target: the busy one (20 streams, ~300 commands/s
    // wanted at 100/s) waits; the healthy one never does.
    let rate = |t: &str| {
        m.value(
            "redis_streams_exporter_rate_limited_seconds_total",
            &[("target", t)],
        )
    };
    eprintln!(
        "rate limited seconds: busy {:.2}, fresh {}",
        rate("busy"),
        rate("fresh")
    );
    assert!(rate("busy") > 0.5, "busy {}", rate("busy"));
    assert_eq!(rate("fresh"), 0.0);

    // Cardinality: 20 of 30 streams; 5 consumers plus `__other__`.
    assert_eq!(
        m.value("redis_streams_exporter_streams", &[("target", "busy")]),
        20.0
    );
    assert_eq!(
        m.value(
            "redis_streams_exporter_streams_dropped",
            &[("target", "busy")]
        ),
        10.0
    );
    let mut streams: BTreeSet<&str> = BTreeSet::new();
    let mut consumers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut busy_series = 0;
    for k in m.samples.keys() {
        if label(k, "target") != Some("busy") || k.starts_with("redis_streams_exporter_") {
            continue;
        }
        busy_series += 1;
        if let Some(s) = label(k, "stream") {
            streams.insert(s);
        }
        if let Some(c) = label(k, "consumer") {
            consumers
                .entry(k.split('{').next().unwrap())
                .or_default()
                .insert(c);
        }
    }
    let want: BTreeSet<String> = (0..20).map(|i| format!("s:{i:02}")).collect();
    assert_eq!(
        streams
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>(),
        want
    );
    let top: BTreeSet<&str> = ["c00", "c01", "c02", "c03", "c04", "__other__"].into();
    assert_eq!(consumers["redis_streams_consumer_pending"], top);
    for (family, names) in &consumers {
        assert!(names.is_subset(&top), "{family}: {names:?}");
    }
    let cp = |c: &str| {
        m.value(
            "redis_streams_consumer_pending",
            &[
                ("target", "busy"),
                ("stream", "s:00"),
                ("group", "g"),
                ("consumer", c),
            ],
        )
    };
    assert_eq!(cp("c00"), 1.0);
    assert_eq!(cp("__other__"), 75.0);
    assert_eq!(
        m.value(
            "redis_streams_group_consumers",
            &[("target", "busy"), ("stream", "s:00"), ("group", "g")]
        ),
        80.0
    );
    eprintln!(
        "busy: {busy_series} data series for 20 streams (30 in Redis) and {} consumer series for 80 consumers",
        consumers.values().map(BTreeSet::len).sum::<usize>()
    );
    d.stop().await;
}
