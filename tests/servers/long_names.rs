//! Names longer than the exporter keeps (64 KiB), on every server: a group,
//! a consumer and a stream key of 70 KiB are left out of their replies and
//! counted (`redis_streams_exporter_items_skipped_total`), and never blind
//! the rest (the stream's other group, the group's other consumer, the
//! other streams, the pending entries the long-named consumer holds); and a
//! key name of 10 MiB, with keyspace notifications on, costs its events and
//! nothing else.

use crate::common;

use std::time::Duration;

use common::*;
use tokio_util::sync::CancellationToken;

fn skipped(m: &Metrics, kind: &str) -> f64 {
    m.value(
        "redis_streams_exporter_items_skipped_total",
        &[("target", "t"), ("kind", kind)],
    )
}

async fn names_longer_than_kept(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let long = |ch: &str| ch.repeat(70 * 1024);
    let (group, consumer, key) = (long("g"), long("c"), long("k"));
    xadd_n(&mut c, "s", 5);
    cmd(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    cmd(&mut c, &["XGROUP", "CREATE", "s", &group, "0"]);
    assert_eq!(read_group(&mut c, "s", "g", &consumer, 2).len(), 2);
    assert_eq!(read_group(&mut c, "s", "g", "short", 1).len(), 1);
    xadd_n(&mut c, &key, 1);
    let h = Harness::new(config_for(&server, ""));
    h.collect().await;
    let m = h.metrics();
    for probe in [
        "discovery",
        "stream",
        "consumers",
        "pending_summary",
        "pending_scan",
    ] {
        assert_eq!(
            m.get(
                "redis_streams_exporter_probe_success",
                &[("target", "t"), ("probe", probe)]
            ),
            Some(1.0),
            "{kind:?} {probe}"
        );
    }
    assert_eq!(
        m.get("redis_streams_exporter_streams", &[("target", "t")]),
        Some(1.0),
        "{kind:?}: the long key is not watched"
    );
    let g = tsg("s", "g");
    assert_eq!(m.get("redis_streams_group_pending", &g), Some(3.0));
    if kind.has_lag() {
        assert_eq!(m.get("redis_streams_group_lag", &g), Some(2.0), "{kind:?}");
    }
    assert_eq!(
        m.get(
            "redis_streams_consumer_pending",
            &[
                ("target", "t"),
                ("stream", "s"),
                ("group", "g"),
                ("consumer", "short")
            ]
        ),
        Some(1.0),
        "{kind:?}"
    );
    // The PEL scan read every entry, those of the long-named consumer too.
    assert!(
        m.value(
            "redis_streams_exporter_pending_scan_entries_total",
            &[("target", "t")]
        ) >= 3.0
    );
    assert_eq!(
        m.get("redis_streams_stream_groups", &ts("s")),
        Some(2.0),
        "{kind:?}: XINFO STREAM counts both groups"
    );
    for what in ["group", "consumer", "key"] {
        assert!(skipped(&m, what) >= 1.0, "{kind:?} {what}: {}", m.text);
    }
    assert_eq!(skipped(&m, "event"), 0.0);
    assert_eq!(
        m.value(
            "redis_streams_exporter_errors_total",
            &[("target", "t"), ("kind", "protocol")]
        ),
        0.0,
        "{kind:?}"
    );
}

per_server!(names_longer_than_kept);

/// Keyspace notifications on, a stream whose key is 10 MiB long given three
/// groups: each `xgroup-create` event arrives without its key (left out and
/// counted), the subscription stays up, and the event of an ordinary new
/// queue still has it watched at once (discovery waits an hour here).
async fn a_key_name_of_10_mib_with_events(kind: Server) {
    let server = RedisServer::start_with(kind, &["--notify-keyspace-events", "KEA"]);
    let mut c = server.conn();
    let h = Harness::new(config_for(
        &server,
        "[schedule]\ndiscovery = \"1h\"\nstream = \"3s\"\n",
    ));
    let stop = CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let active = |m: &Metrics| {
        m.get(
            "redis_streams_exporter_keyspace_events_active",
            &[("target", "t")],
        ) == Some(1.0)
    };
    assert!(
        eventually(Duration::from_secs(10), || active(&h.metrics())).await,
        "{kind:?}: not subscribed"
    );
    let key = "k".repeat(10 << 20);
    for g in ["g1", "g2", "g3"] {
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&key)
            .arg(g)
            .arg("$")
            .arg("MKSTREAM")
            .query(&mut c)
            .unwrap();
    }
    xadd_n(&mut c, "fresh", 1);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("fresh")
        .arg("g")
        .arg("$")
        .query(&mut c)
        .unwrap();
    let watched = eventually(Duration::from_secs(10), || {
        let m = h.metrics();
        skipped(&m, "event") >= 3.0
            && m.get("redis_streams_stream_length", &ts("fresh")) == Some(1.0)
    })
    .await;
    let m = h.metrics();
    stop.cancel();
    running.await.unwrap();
    assert!(watched, "{kind:?}: {}", m.text);
    assert!(active(&m), "{kind:?}: the subscription stayed up");
    assert_eq!(
        m.get("redis_streams_exporter_streams", &[("target", "t")]),
        Some(1.0)
    );
}

per_server!(a_key_name_of_10_mib_with_events);
