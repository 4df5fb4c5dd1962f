//! The exporter is read-only, provably. It runs under an ACL user
//! allowed only the allowlist's commands (docs/design.md) without a single NOPERM, and MONITOR
//! records nothing outside that list while it collects everything.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use redis_streams_exporter::config;

/// The allowlist's commands for a standalone server (plus `info`).
fn acl_rule(kind: Server) -> String {
    let keys = if kind.has_acl_key_permissions() {
        "%R~*"
    } else {
        "~*"
    };
    format!(
        "on >exporter-pw resetchannels {keys} -@all +ping +info +time +scan +type +xinfo|stream +xinfo|groups \
         +xinfo|consumers +xpending +xrange +xrevrange +client|setname +client|id +client|tracking \
         +cluster|shards +cluster|slots +asking +multi +exec +subscribe +unsubscribe \
         &__keyevent@0__:x* &__keyevent@0__:del &__redis__:invalidate"
    )
}

/// Streams in every state the probes handle: pending entries, NULL lag, a
/// trimmed group with ghosts, a dead-letter stream, consumers.
fn build_scenarios(server: &RedisServer) {
    let mut c = server.conn();
    let ids = xadd_n(&mut c, "orders", 20);
    for (g, at) in [("fast", "$"), ("slow", "0"), ("nulled", "0")] {
        let _: () = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg("orders")
            .arg(g)
            .arg(at)
            .query(&mut c)
            .unwrap();
    }
    read_group(&mut c, "orders", "slow", "c1", 5);
    read_group(&mut c, "orders", "nulled", "c2", 3);
    let _: i64 = redis::cmd("XDEL")
        .arg("orders")
        .arg(&ids[10])
        .arg(&ids[1])
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("XTRIM")
        .arg("orders")
        .arg("MAXLEN")
        .arg(15)
        .query(&mut c)
        .unwrap();
    xadd_n(&mut c, "orders:dead", 2);
}

fn config_text(server: &RedisServer, user: Option<&str>) -> String {
    let credentials = user.map_or(String::new(), |u| format!("{u}:exporter-pw@"));
    format!(
        "[[targets]]\nname = \"t\"\nurl = \"redis://{credentials}127.0.0.1:{}\"\npatterns = [\"orders*\"]\n\
         [[streams]]\nmatch = \"orders\"\ndead_letter = \"orders:dead\"\n",
        server.port
    )
}

/// A server of `kind` holding the scenarios, its user `exporter` set to
/// `rule`, and a harness that connects as that user.
fn as_exporter_user(kind: Server, rule: String) -> (RedisServer, Harness) {
    let server = RedisServer::start(kind);
    build_scenarios(&server);
    let mut args: Vec<&str> = vec!["ACL", "SETUSER", "exporter"];
    args.extend(rule.split(' '));
    server.cmd(&args);
    let cfg = config::from_str(
        "acl.toml",
        &config_text(&server, Some("exporter")),
        &Default::default(),
    )
    .unwrap();
    (server, Harness::new(cfg))
}

async fn under_minimal_acl(kind: Server) {
    let (server, h) = as_exporter_user(kind, acl_rule(kind));
    h.collect().await;
    h.collect().await;
    // The keyspace-event subscription and client tracking work with
    // exactly their permissions.
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let active = |family: &str| h.metrics().get(family, &[("target", "t")]);
    let (events, tracking) = (
        "redis_streams_exporter_keyspace_events_active",
        "redis_streams_exporter_client_tracking_active",
    );
    for _ in 0..100 {
        if active(events) == Some(1.0) && active(tracking) == Some(1.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(active(events), Some(1.0), "{}", h.text());
    assert_eq!(active(tracking), Some(1.0), "{}", h.text());
    stop.cancel();
    running.await.unwrap();
    let m = h.metrics();
    for (series, v) in m.family("redis_streams_exporter_errors_total") {
        assert_eq!(v, 0.0, "{series} under the minimal ACL user:\n{}", m.text);
    }
    m.assert_every_probe_succeeded();
    // 20 added, 2 deleted, trimmed to 15.
    assert_eq!(m.value("redis_streams_stream_length", &ts("orders")), 15.0);
    assert_eq!(
        m.value("redis_streams_stream_dead_letter_length", &ts("orders")),
        2.0
    );
    assert!(
        m.get("redis_streams_group_pending_ghost", &tsg("orders", "slow"))
            .is_some()
    );
    assert_eq!(m.family("redis_streams_target_info").len(), 1);
    // And a write is refused to that user, so the rule really restricts.
    let mut c = redis::Client::open(format!(
        "redis://exporter:exporter-pw@127.0.0.1:{}",
        server.port
    ))
    .unwrap()
    .get_connection()
    .unwrap();
    let err = redis::cmd("XADD")
        .arg("orders")
        .arg("*")
        .arg("a")
        .arg("b")
        .query::<String>(&mut c)
        .unwrap_err();
    assert_eq!(err.code(), Some("NOPERM"), "{err}");
}

per_server!(under_minimal_acl);

/// Commands (first word, or first two for container commands) the exporter
/// may send.
const ALLOWED: &[&str] = &[
    "ping",
    "info",
    "time",
    "scan",
    "type",
    "xinfo stream",
    "xinfo groups",
    "xinfo consumers",
    "xpending",
    "xrange",
    "xrevrange",
    "client setname",
    // Client tracking: the subscriber's ID, and tracking on the poll
    // connection towards it.
    "client id",
    "client tracking",
    "cluster shards",
    "cluster slots",
    "asking",
    // A transaction around each stream's two XINFO (reads only).
    "multi",
    "exec",
    "auth",
    "hello",
    "select",
    // The keyspace-event subscription, on a connection of its own.
    "subscribe",
    "unsubscribe",
];

/// An ACL user without `+multi` and `+exec`: each stream's XINFO are read
/// without a transaction (logged once), and every figure is still there.
async fn without_transactions(kind: Server) {
    let (_server, h) = as_exporter_user(kind, acl_rule(kind).replace(" +multi +exec", ""));
    h.collect().await;
    h.collect().await;
    let m = h.metrics();
    assert_eq!(
        m.value(
            "redis_streams_exporter_probe_success",
            &[("target", "t"), ("probe", "stream")]
        ),
        1.0,
        "{}",
        m.text
    );
    assert_eq!(m.value("redis_streams_stream_length", &ts("orders")), 15.0);
    assert!(
        m.get("redis_streams_group_lag", &tsg("orders", "slow"))
            .is_some()
    );
}

per_server!(without_transactions);

/// The variant of the minimal ACL without the subscribe permissions: with
/// `keyspace_events = "auto"` and `client_tracking = "auto"` (the defaults)
/// the refused subscription turns the events and tracking off for the node,
/// `keyspace_events_active` and `client_tracking_active` say 0, and nothing
/// counts as a collection error while the probes succeed.
async fn without_subscribe(kind: Server) {
    let rule = acl_rule(kind)
        .replace(" +subscribe +unsubscribe", "")
        .replace(
            " &__keyevent@0__:x* &__keyevent@0__:del &__redis__:invalidate",
            "",
        );
    assert!(!rule.contains("subscribe"), "{rule}");
    let (_server, h) = as_exporter_user(kind, rule);
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(h.poller.clone().run(stop.clone()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let m = h.metrics();
        let streamed = m.get(
            "redis_streams_exporter_probe_success",
            &[("target", "t"), ("probe", "stream")],
        ) == Some(1.0);
        if streamed && m.get("redis_streams_stream_length", &ts("orders")) == Some(15.0) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", m.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Past the first retry of a subscription that failed otherwise (1 s).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.cancel();
    running.await.unwrap();
    let m = h.metrics();
    assert_eq!(
        m.get(
            "redis_streams_exporter_keyspace_events_active",
            &[("target", "t")]
        ),
        Some(0.0),
        "{}",
        m.text
    );
    assert_eq!(
        m.get(
            "redis_streams_exporter_client_tracking_active",
            &[("target", "t")]
        ),
        Some(0.0),
        "{}",
        m.text
    );
    for (series, v) in m.family("redis_streams_exporter_errors_total") {
        assert_eq!(
            v, 0.0,
            "{series} without the subscribe permissions:\n{}",
            m.text
        );
    }
}

per_server!(without_subscribe);

fn monitored(kind: Server) -> Vec<Vec<String>> {
    let server = RedisServer::start(kind);
    build_scenarios(&server);
    let log: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let mut monitor = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    monitor.write_all(b"MONITOR\r\n").unwrap();
    monitor
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let reader = {
        let log = log.clone();
        let stream = monitor.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stream);
            let mut line = String::new();
            let mut idle = 0;
            loop {
                line.clear();
                match lines.read_line(&mut line) {
                    Ok(0) => return,
                    Ok(_) => {
                        idle = 0;
                        if let Some(words) = parse_monitor_line(line.trim_end()) {
                            log.lock().unwrap().push(words);
                        }
                    }
                    Err(_) => {
                        idle += 1;
                        if idle > 50 {
                            return;
                        }
                    }
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let cfg =
            config::from_str("m.toml", &config_text(&server, None), &Default::default()).unwrap();
        let h = Harness::new(cfg);
        h.collect().await;
        h.collect().await;
        // The daemon's loops too, with their keyspace-event subscription
        // (subscribed, then unsubscribed on stop).
        let stop = tokio_util::sync::CancellationToken::new();
        let running = tokio::spawn(h.poller.clone().run(stop.clone()));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        stop.cancel();
        running.await.unwrap();
    });
    std::thread::sleep(Duration::from_millis(300));
    let _ = monitor.shutdown(std::net::Shutdown::Both);
    let _ = reader.join();
    log.lock().unwrap().clone()
}

/// `1700000000.123 [0 127.0.0.1:5555] "XINFO" "STREAM" "orders"` → words.
fn parse_monitor_line(line: &str) -> Option<Vec<String>> {
    let start = line.find("] ")? + 2;
    let mut words = Vec::new();
    let mut rest = &line[start..];
    while let Some(open) = rest.find('"') {
        let mut end = open + 1;
        let bytes = rest.as_bytes();
        while end < bytes.len() && bytes[end] != b'"' {
            if bytes[end] == b'\\' {
                end += 1;
            }
            end += 1;
        }
        words.push(rest[open + 1..end.min(rest.len())].to_string());
        rest = &rest[(end + 1).min(rest.len())..];
    }
    Some(words)
}

fn monitor_shows_only_allowed_commands(kind: Server) {
    let seen = monitored(kind);
    assert!(seen.len() > 20, "MONITOR saw only {} commands", seen.len());
    let mut names = std::collections::BTreeSet::new();
    for words in &seen {
        let first = words[0].to_lowercase();
        let two = format!(
            "{first} {}",
            words.get(1).map(|w| w.to_lowercase()).unwrap_or_default()
        );
        let name = if ["xinfo", "client", "cluster"].contains(&first.as_str()) {
            two
        } else {
            first
        };
        assert!(
            ALLOWED.contains(&name.as_str()),
            "{kind:?}: command outside the allowlist: {words:?}"
        );
        let upper: Vec<String> = words.iter().map(|w| w.to_uppercase()).collect();
        assert!(
            !(name == "xinfo stream" && upper.contains(&"FULL".to_string())),
            "XINFO STREAM FULL is sent only to servers with XNACK (Redis 8.8+), none of these: {words:?}"
        );
        assert!(
            !(name == "xpending" && upper.contains(&"IDLE".to_string())),
            "XPENDING IDLE sent: {words:?}"
        );
        if name == "xrange" || name == "xrevrange" {
            assert_eq!(
                upper.get(upper.len() - 2).map(String::as_str),
                Some("COUNT"),
                "unbounded XRANGE: {words:?}"
            );
        }
        if name == "scan" {
            assert!(
                upper.windows(2).any(|w| w[0] == "TYPE" && w[1] == "STREAM"),
                "SCAN without TYPE stream: {words:?}"
            );
        }
        names.insert(name);
    }
    // The collection really exercised the probes.
    for must in [
        "subscribe",
        "unsubscribe",
        "scan",
        "xinfo stream",
        "xinfo groups",
        "xinfo consumers",
        "xpending",
        "xrange",
        "time",
        "info",
    ] {
        assert!(
            names.contains(must),
            "{kind:?}: expected to see {must}; saw {names:?}"
        );
    }
}

per_server!(sync: monitor_shows_only_allowed_commands);
