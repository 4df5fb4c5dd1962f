//! `GET /probe?target=<redis URL>&auth_module=<name>` (docs/configuration.md), with the daemon
//! in-process against real redis-server 7.0 instances on loopback:
//!
//! - off (403) without `[probe] allowed_targets`; a target outside them, a URL with credentials,
//!   an unknown auth module, a missing or repeated parameter: 400, and nothing is dialled (the
//!   servers' `CLIENT LIST` shows no exporter connection, a listener accepts nothing);
//! - a probe answers with that target's series only (no configured target's, no exporter-wide
//!   family), `/metrics` never shows probed targets, and the target is polled in the background
//!   between probes (the server's command counters grow with no probe);
//! - after `target_ttl` without a probe the target is dropped: counted, its connection closed;
//! - `max_targets` caps the probed targets (503, nothing dialled);
//! - the first probe waits for the first collection up to a bound (the configured one, and
//!   Prometheus's scrape timeout) and says so when it could not; an unreachable target answers
//!   at once with `target_up 0`;
//! - a reload that no longer allows a target drops it;
//! - one server probed with two auth modules is two targets, each with its own poller and loss
//!   ledger.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Daemon, Metrics, RedisServer, Server, xadd_n};
use redis_streams_exporter::config;

/// Polls every probe every 200 ms, so background polling shows within a second.
const FAST: &str = "[schedule]\nstream = \"200ms\"\ndiscovery = \"1s\"\ninfo = \"1s\"\npending_summary = \"1s\"\nconsumers = \"1s\"\npending_scan = \"1s\"\n";

/// Connections named by the exporter on `server`.
fn exporter_connections(server: &RedisServer) -> usize {
    let list = match server.cmd(&["CLIENT", "LIST"]) {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("{other:?}"),
    };
    list.lines()
        .filter(|l| {
            l.contains(&format!(
                "name={}",
                redis_streams_exporter::backend::CLIENT_NAME
            ))
        })
        .count()
}

/// Calls of `XINFO STREAM` the server has answered (from `INFO commandstats`).
fn xinfo_calls(server: &RedisServer) -> u64 {
    let info = match server.cmd(&["INFO", "commandstats"]) {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("{other:?}"),
    };
    info.lines()
        .find(|l| l.starts_with("cmdstat_xinfo|stream:"))
        .and_then(|l| l.split("calls=").nth(1))
        .and_then(|v| v.split(',').next())
        .map_or(0, |v| v.parse().unwrap())
}

fn url(server: &RedisServer) -> String {
    format!("redis://127.0.0.1:{}", server.port)
}

fn name(server: &RedisServer) -> String {
    format!("127.0.0.1:{}", server.port)
}

async fn probe(d: &Daemon, query: &str) -> (u16, String) {
    let r = d.get(&format!("/probe?{query}")).await;
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The `target` label of every sample.
fn target_labels(m: &Metrics) -> BTreeSet<String> {
    m.samples
        .keys()
        .filter_map(|series| {
            let rest = series.split("target=\"").nth(1)?;
            Some(rest.split('"').next()?.to_string())
        })
        .collect()
}

async fn eventually_async<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match check().await {
            Ok(()) => return,
            Err(last) => assert!(
                Instant::now() < deadline,
                "{what} not seen within {limit:?}: {last}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn probe_is_off_without_allowed_targets() {
    let redis = RedisServer::start(Server::Redis70);
    let d = Daemon::start(&format!("[[targets]]\nurl = \"{}\"\n{FAST}", url(&redis))).await;
    let (status, body) = probe(&d, &format!("target={}", url(&redis))).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("allowed_targets is empty"), "{body}");
    let m = d.metrics().await;
    assert!(
        m.family("redis_streams_exporter_probed_targets").is_empty(),
        "no /probe families while /probe is off:\n{}",
        m.text
    );
    d.stop().await;
}

#[tokio::test]
async fn refused_probes_dial_nothing() {
    let allowed_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    allowed_listener.set_nonblocking(true).unwrap();
    let listener_url = format!("redis://{}", allowed_listener.local_addr().unwrap());
    let outside = RedisServer::start(Server::Redis70);
    let d = Daemon::start(&format!(
        "[probe]\nallowed_targets = [\"{listener_url}\"]\n[auth_modules.known]\nusername = \"x\"\n{FAST}"
    ))
    .await;
    let port = allowed_listener.local_addr().unwrap().port();
    let cases = [
        // Outside the globs.
        (format!("target={}", url(&outside)), "matches no glob"),
        (format!("target={}/0", url(&outside)), "matches no glob"),
        // Credentials in the URL, of an allowed address.
        (
            format!("target=redis://:s3cret@127.0.0.1:{port}"),
            "credentials come only from",
        ),
        (
            format!("target=redis://user:s3cret@127.0.0.1:{port}"),
            "credentials come only from",
        ),
        (
            format!("target=redis://user@127.0.0.1:{port}"),
            "credentials come only from",
        ),
        (
            format!("target={listener_url}&auth_module=unknown"),
            "auth_module \"unknown\" is not configured",
        ),
        (
            format!("target={listener_url}%3Fprotocol%3Dresp3"),
            "query or fragment",
        ),
        (
            "auth_module=known".to_string(),
            "target parameter is required",
        ),
        (
            format!("target={listener_url}&target={listener_url}"),
            "more than once",
        ),
        (format!("target=http://127.0.0.1:{port}"), "redis://"),
    ];
    for (query, expected) in &cases {
        let (status, body) = probe(&d, query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains(expected), "{query}: {body}");
        assert!(!body.contains("s3cret"), "{query}: {body}");
    }
    // Nothing reached either server.
    assert_eq!(exporter_connections(&outside), 0);
    let accepted = allowed_listener.accept();
    assert!(accepted.is_err(), "the listener was dialled: {accepted:?}");
    // /metrics is rendered in the background: wait for the last request to be counted.
    let m = common::wait_metrics(&d, Duration::from_secs(10), "the refusals", |m| {
        m.get(
            "redis_streams_exporter_probe_requests_total",
            &[("result", "bad_target")],
        ) == Some(3.0)
    })
    .await;
    let count = |result: &str| {
        m.get(
            "redis_streams_exporter_probe_requests_total",
            &[("result", result)],
        )
        .unwrap_or(0.0)
    };
    assert_eq!(count("not_allowed"), 2.0, "{}", m.text);
    assert_eq!(count("credentials_in_url"), 3.0);
    assert_eq!(count("auth_module"), 1.0);
    assert_eq!(count("bad_target"), 3.0);
    assert_eq!(count("ok"), 0.0);
    assert_eq!(m.value("redis_streams_exporter_probed_targets", &[]), 0.0);
    d.stop().await;
}

#[tokio::test]
async fn a_probe_answers_with_its_target_only_and_polling_goes_on_between_probes() {
    let configured = RedisServer::start(Server::Redis70);
    let probed = RedisServer::start(Server::Redis70);
    xadd_n(&mut configured.conn(), "configured:stream", 2);
    xadd_n(&mut probed.conn(), "probed:stream", 3);
    let d = Daemon::start(&format!(
        "[[targets]]\nname = \"configured\"\nurl = \"{}\"\n\
         [probe]\nallowed_targets = [\"redis://127.0.0.1:*\"]\n{FAST}",
        url(&configured)
    ))
    .await;
    let (status, body) = probe(&d, &format!("target={}", url(&probed))).await;
    assert_eq!(status, 200, "{body}");
    let m = Metrics::parse(&body);
    let probed_name = name(&probed);
    assert_eq!(
        target_labels(&m),
        BTreeSet::from([probed_name.clone()]),
        "{body}"
    );
    assert_eq!(
        m.value(
            "redis_streams_stream_length",
            &[("target", &probed_name), ("stream", "probed:stream")]
        ),
        3.0
    );
    assert_eq!(
        m.value(
            "redis_streams_exporter_target_up",
            &[("target", &probed_name)]
        ),
        1.0
    );
    assert_eq!(
        m.value(
            "redis_streams_exporter_target_ready",
            &[("target", &probed_name)]
        ),
        1.0
    );
    assert!(!body.contains("# redis-streams-exporter:"), "{body}");
    for exporter_wide in [
        "redis_streams_exporter_build_info",
        "redis_streams_exporter_config_reloads_total",
        "redis_streams_exporter_probed_targets",
    ] {
        assert!(!body.contains(exporter_wide), "{exporter_wide} in\n{body}");
    }
    common::promtool_check(&body);

    // /metrics: the configured target, never the probed one.
    let metrics = common::wait_metrics(&d, Duration::from_secs(10), "probed_targets 1", |m| {
        m.get("redis_streams_exporter_probed_targets", &[]) == Some(1.0)
    })
    .await;
    assert!(
        !target_labels(&metrics).contains(&probed_name),
        "{}",
        metrics.text
    );
    assert!(target_labels(&metrics).contains("configured"));

    // Polled in the background: a write between probes is read with no probe (client
    // tracking leaves the quiet stream unread until then, so XINFO STREAM calls rise only
    // after it), and shows in the next probe's answer.
    assert_eq!(exporter_connections(&probed), 1);
    let before = xinfo_calls(&probed);
    xadd_n(&mut probed.conn(), "probed:stream", 1);
    assert!(
        common::eventually(Duration::from_secs(10), || xinfo_calls(&probed) > before).await,
        "no polling between probes: {before} XINFO STREAM calls, then {}",
        xinfo_calls(&probed)
    );
    eventually_async(Duration::from_secs(10), "the new entry", || async {
        let (_, body) = probe(&d, &format!("target={}", url(&probed))).await;
        let m = Metrics::parse(&body);
        match m.get(
            "redis_streams_stream_length",
            &[("target", &probed_name), ("stream", "probed:stream")],
        ) {
            Some(4.0) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // One poller, one connection, however many probes.
    assert_eq!(exporter_connections(&probed), 1);
    d.stop().await;
}

#[tokio::test]
async fn a_target_not_probed_for_target_ttl_is_dropped() {
    let probed = RedisServer::start(Server::Redis70);
    xadd_n(&mut probed.conn(), "s", 1);
    let d = Daemon::start(&format!(
        "[probe]\nallowed_targets = [\"{}\"]\ntarget_ttl = \"1s\"\n{FAST}",
        url(&probed)
    ))
    .await;
    let (status, _) = probe(&d, &format!("target={}", url(&probed))).await;
    assert_eq!(status, 200);
    assert_eq!(exporter_connections(&probed), 1);
    eventually_async(Duration::from_secs(10), "the target expiring", || async {
        let m = d.metrics().await;
        let expired = m.get("redis_streams_exporter_probed_targets_expired_total", &[]);
        let now = m.get("redis_streams_exporter_probed_targets", &[]);
        if expired == Some(1.0) && now == Some(0.0) {
            Ok(())
        } else {
            Err(format!("expired {expired:?}, probed {now:?}"))
        }
    })
    .await;
    // Counted once the poller was joined: its connection is gone, and no command follows.
    assert!(
        common::eventually(Duration::from_secs(5), || exporter_connections(&probed)
            == 0)
        .await,
        "the dropped target's connection is still open"
    );
    let calls = xinfo_calls(&probed);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(xinfo_calls(&probed), calls, "polled after it was dropped");
    // A later probe starts it afresh.
    let (status, body) = probe(&d, &format!("target={}", url(&probed))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        Metrics::parse(&body).value(
            "redis_streams_stream_length",
            &[("target", &name(&probed)), ("stream", "s")]
        ),
        1.0
    );
    d.stop().await;
}

#[tokio::test]
async fn max_targets_caps_the_probed_targets() {
    let first = RedisServer::start(Server::Redis70);
    let second = RedisServer::start(Server::Redis70);
    let d = Daemon::start(&format!(
        "[probe]\nallowed_targets = [\"redis://127.0.0.1:*\"]\nmax_targets = 1\n{FAST}"
    ))
    .await;
    assert_eq!(probe(&d, &format!("target={}", url(&first))).await.0, 200);
    let (status, body) = probe(&d, &format!("target={}", url(&second))).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("max_targets"), "{body}");
    assert!(body.contains("was not dialled"), "{body}");
    assert_eq!(exporter_connections(&second), 0);
    // The target already probed is still answered.
    assert_eq!(probe(&d, &format!("target={}", url(&first))).await.0, 200);
    let m = common::wait_metrics(&d, Duration::from_secs(10), "over_cap", |m| {
        m.get(
            "redis_streams_exporter_probe_requests_total",
            &[("result", "over_cap")],
        ) == Some(1.0)
    })
    .await;
    assert_eq!(
        m.value("redis_streams_exporter_probed_targets_max", &[]),
        1.0
    );
    d.stop().await;
}

#[tokio::test]
async fn the_first_probe_says_when_the_first_collection_is_not_done() {
    let probed = RedisServer::start(Server::Redis70);
    xadd_n(&mut probed.conn(), "s", 2);
    let closed_port = common::free_port();
    let d = Daemon::start(&format!(
        "[probe]\nallowed_targets = [\"redis://127.0.0.1:*\"]\nfirst_collection_wait = \"0s\"\n{FAST}"
    ))
    .await;
    let target = format!("target={}", url(&probed));
    let (status, body) = probe(&d, &target).await;
    assert_eq!(status, 200, "{body}");
    let comment = body
        .lines()
        .find(|l| l.starts_with("# redis-streams-exporter: the first collection"))
        .unwrap_or_else(|| panic!("no comment:\n{body}"));
    assert!(comment.contains("later scrape"), "{comment}");
    let m = Metrics::parse(&body);
    assert_eq!(
        m.value(
            "redis_streams_exporter_target_ready",
            &[("target", &name(&probed))]
        ),
        0.0
    );
    assert!(m.family("redis_streams_stream_length").is_empty(), "{body}");
    common::promtool_check(&body);
    // A later scrape has the data.
    eventually_async(Duration::from_secs(10), "the data", || async {
        let (_, body) = probe(&d, &target).await;
        let m = Metrics::parse(&body);
        match m.get(
            "redis_streams_stream_length",
            &[("target", &name(&probed)), ("stream", "s")],
        ) {
            Some(2.0) if !body.contains("# redis-streams-exporter:") => Ok(()),
            other => Err(format!("{other:?}\n{body}")),
        }
    })
    .await;
    d.stop().await;

    // Prometheus's scrape timeout bounds the wait too (0.4 s less the 0.5 s margin: none).
    let d = Daemon::start(&format!(
        "[probe]\nallowed_targets = [\"redis://127.0.0.1:*\"]\nfirst_collection_wait = \"30s\"\n{FAST}"
    ))
    .await;
    let r = reqwest::Client::new()
        .get(format!("{}/probe?{target}", d.base))
        .header("X-Prometheus-Scrape-Timeout-Seconds", "0.4")
        .send()
        .await
        .unwrap();
    let body = r.text().await.unwrap();
    assert!(
        body.contains("# redis-streams-exporter: the first collection"),
        "{body}"
    );
    // An unreachable target answers at once, down, without the comment: its first collection
    // is over (it failed), and waiting on every scrape would help nobody.
    let (status, body) = probe(&d, &format!("target=redis://127.0.0.1:{closed_port}")).await;
    assert_eq!(status, 200, "{body}");
    let m = Metrics::parse(&body);
    let closed = format!("127.0.0.1:{closed_port}");
    assert_eq!(
        m.value("redis_streams_exporter_target_up", &[("target", &closed)]),
        0.0,
        "{body}"
    );
    assert_eq!(
        m.value(
            "redis_streams_exporter_target_ready",
            &[("target", &closed)]
        ),
        0.0
    );
    assert!(!body.contains("# redis-streams-exporter:"), "{body}");
    d.stop().await;
}

#[tokio::test]
async fn a_reload_that_no_longer_allows_a_target_drops_it() {
    let probed = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        format!("[probe]\nallowed_targets = [\"{}\"]\n{FAST}", url(&probed)),
    )
    .unwrap();
    let lifecycle = config::CliOverrides {
        enable_lifecycle: true,
        ..Default::default()
    };
    let cfg = config::load(Some(&path), &lifecycle).unwrap();
    let daemon = Daemon::start_with(cfg, lifecycle).await;
    let base = daemon.base.clone();
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{base}/probe?target={}", url(&probed)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(exporter_connections(&probed), 1);
    std::fs::write(
        &path,
        format!("[probe]\nallowed_targets = [\"redis://10.0.0.1:6379\"]\n{FAST}"),
    )
    .unwrap();
    let r = http.post(format!("{base}/-/reload")).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // Dropped by the reload itself: its connection closes.
    assert!(
        common::eventually(Duration::from_secs(5), || exporter_connections(&probed)
            == 0)
        .await,
        "the target is still polled after the reload"
    );
    eventually_async(Duration::from_secs(10), "probed_targets 0", || async {
        let text = http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if text.contains("redis_streams_exporter_probed_targets 0\n") {
            Ok(())
        } else {
            Err(text)
        }
    })
    .await;
    let r = http
        .get(format!("{base}/probe?target={}", url(&probed)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    daemon.stop().await;
}

/// One server probed with two auth modules (two Prometheus jobs, say) is two targets: however
/// the probes alternate, each module keeps its own poller (its counters only grow, one connection
/// each) and its own loss ledger (a trim of 40 unread entries is counted 40 by both), and each
/// takes a `max_targets` slot (a third module is over the cap, nothing dialled).
#[tokio::test]
async fn two_auth_modules_for_one_address_keep_two_pollers_and_their_ledgers() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "s", 50);
    server.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    assert_eq!(common::read_group(&mut c, "s", "g", "c", 10).len(), 10);
    let d = Daemon::start(&format!(
        "[probe]\nallowed_targets = [\"{}\"]\nmax_targets = 2\n\
         [auth_modules.a]\nkeyspace_events = \"off\"\n\
         [auth_modules.b]\nkeyspace_events = \"off\"\n\
         [auth_modules.c]\nkeyspace_events = \"off\"\n{FAST}",
        url(&server)
    ))
    .await;
    let target = name(&server);
    let xinfo = |m: &Metrics| {
        m.value(
            "redis_streams_exporter_redis_commands_total",
            &[("target", &*target), ("command", "xinfo_stream")],
        )
    };
    let lost = |m: &Metrics| {
        m.get(
            "redis_streams_group_lost_entries_total",
            &[
                ("target", &*target),
                ("stream", "s"),
                ("group", "g"),
                ("cause", "trimmed"),
            ],
        )
    };
    let answer = |module: &'static str| {
        let query = format!("target={}&auth_module={module}", url(&server));
        let d = &d;
        async move {
            let (status, body) = probe(d, &query).await;
            assert_eq!(status, 200, "{module}: {body}");
            Metrics::parse(&body)
        }
    };
    // Alternating probes: each module's poller keeps counting (a restart would start at 0).
    let mut last = [0.0, 0.0];
    for round in 0..6 {
        for (i, module) in ["a", "b"].into_iter().enumerate() {
            let m = answer(module).await;
            assert_eq!(
                m.value("redis_streams_exporter_target_up", &[("target", &target)]),
                1.0,
                "{module}"
            );
            let calls = xinfo(&m);
            assert!(
                calls >= last[i],
                "round {round}: {module}'s poller restarted ({calls} calls after {})",
                last[i]
            );
            last[i] = calls;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(last.iter().all(|&n| n >= 3.0), "{last:?}");
    assert_eq!(exporter_connections(&server), 2, "one poller per module");
    let metrics = d.metrics().await;
    assert_eq!(
        metrics.get("redis_streams_exporter_probed_targets", &[]),
        Some(2.0)
    );
    // A third module is a third target: over max_targets, refused, nothing dialled.
    let (status, body) = probe(&d, &format!("target={}&auth_module=c", url(&server))).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(exporter_connections(&server), 2);

    // Both ledgers count the trim of the 40 entries g had not read.
    for module in ["a", "b"] {
        assert_eq!(lost(&answer(module).await), Some(0.0), "{module}");
    }
    server.cmd(&["XTRIM", "s", "MAXLEN", "0"]);
    eventually_async(
        Duration::from_secs(10),
        "40 lost, counted by both",
        || async {
            let (a, b) = (lost(&answer("a").await), lost(&answer("b").await));
            if a == Some(40.0) && b == Some(40.0) {
                Ok(())
            } else {
                Err(format!("a {a:?}, b {b:?}"))
            }
        },
    )
    .await;
    assert_eq!(exporter_connections(&server), 2);
    d.stop().await;
}

/// A reload that changes only intervals keeps a probed target's
/// memory, as it does a configured one's: its PEL scan in progress (a 6000-
/// entry PEL read at 200 entries/s) goes on from where it was.
#[tokio::test]
async fn an_interval_only_reload_keeps_a_probed_targets_scan() {
    let probed = RedisServer::start(Server::Redis70);
    let mut c = probed.conn();
    xadd_n(&mut c, "s", 6000);
    probed.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    assert_eq!(common::read_group(&mut c, "s", "g", "c", 6000).len(), 6000);
    let file = |stream: &str| {
        format!(
            "[probe]\nallowed_targets = [\"{}\"]\n[schedule]\nstream = \"{stream}\"\n\
             pending_scan = \"500ms\"\n[limits]\npending_entries_per_second = 200\n\
             pending_page = 100\n",
            url(&probed)
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, file("200ms")).unwrap();
    let lifecycle = config::CliOverrides {
        enable_lifecycle: true,
        ..Default::default()
    };
    let d = Daemon::start_with(config::load(Some(&path), &lifecycle).unwrap(), lifecycle).await;
    let target = name(&probed);
    let query = format!("target={}", url(&probed));
    let labels = [("target", &*target), ("stream", "s"), ("group", "g")];
    let scrape = || async {
        let (status, body) = probe(&d, &query).await;
        assert_eq!(status, 200, "{body}");
        let m = Metrics::parse(&body);
        let progress = m.get("redis_streams_group_pending_scan_progress_ratio", &labels);
        let interval = m.get(
            "redis_streams_exporter_probe_interval_seconds",
            &[("target", &*target), ("probe", "stream")],
        );
        (progress, interval, body)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let before = loop {
        let (progress, _, body) = scrape().await;
        if let Some(p) = progress.filter(|p| (0.1..0.5).contains(p)) {
            break p;
        }
        assert!(Instant::now() < deadline, "no scan progress:\n{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    std::fs::write(&path, file("300ms")).unwrap();
    let r = d.post("/-/reload").await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (progress, interval, body) = scrape().await;
        // The successor shows the new interval once it has polled.
        if interval == Some(0.3) {
            let p = progress.unwrap_or_else(|| panic!("the scan state was lost:\n{body}"));
            assert!(p >= before, "the scan started over: {p} < {before}");
            if p > before {
                assert!(p < 1.0, "the pass finished before the check");
                break;
            }
        }
        assert!(Instant::now() < deadline, "the scan did not go on:\n{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    d.stop().await;
}

/// Every spelling of one server (`127.0.1`, `127.1`, a final dot, `::ffff:` mapping, a decimal
/// address) is one target: one name and one `max_targets` slot; another server is over the cap.
/// And a probe answers `name[]` and OpenMetrics as `/metrics` does.
#[tokio::test]
async fn spellings_of_one_server_are_one_target_and_answers_take_name_and_openmetrics() {
    let server = RedisServer::start(Server::Redis70);
    xadd_n(&mut server.conn(), "s", 2);
    let other = RedisServer::start(Server::Redis70);
    let d = Daemon::start(&format!(
        "[probe]\nallowed_targets = [\"redis://127.0.*:*\"]\nmax_targets = 1\n{FAST}"
    ))
    .await;
    let port = server.port;
    for spelling in [
        format!("redis://127.0.0.1:{port}"),
        format!("redis://127.0.1:{port}"),
        format!("redis://127.1:{port}"),
        format!("redis://127.0.0.1.:{port}"),
        format!("redis://2130706433:{port}"),
        format!("redis://[::ffff:127.0.0.1]:{port}"),
    ] {
        let (status, body) = probe(&d, &format!("target={spelling}")).await;
        assert_eq!(status, 200, "{spelling}: {body}");
        assert_eq!(
            target_labels(&Metrics::parse(&body)),
            BTreeSet::from([name(&server)]),
            "{spelling}"
        );
    }
    let (status, body) = probe(&d, &format!("target=redis://127.0.1:{}", other.port)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(exporter_connections(&other), 0);
    // The exposition is rendered in the background: wait for one that saw the refusal.
    let m = common::wait_metrics(&d, Duration::from_secs(10), "the refusal counted", |m| {
        m.get(
            "redis_streams_exporter_probe_requests_total",
            &[("result", "over_cap")],
        )
        .is_some_and(|n| n >= 1.0)
    })
    .await;
    assert_eq!(
        m.get("redis_streams_exporter_probed_targets", &[]),
        Some(1.0)
    );
    assert_eq!(
        m.value(
            "redis_streams_exporter_probe_requests_total",
            &[("result", "over_cap")]
        ),
        1.0
    );

    // name[] and OpenMetrics.
    let target = format!("target=redis://127.0.0.1:{port}");
    eventually_async(Duration::from_secs(10), "the data", || async {
        let (_, body) = probe(
            &d,
            &format!("{target}&name[]=redis_streams_stream_length&name[]=redis_streams_exporter_target_up"),
        )
        .await;
        let families: BTreeSet<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let m = Metrics::parse(&body);
        let length = m.get(
            "redis_streams_stream_length",
            &[("target", &name(&server)), ("stream", "s")],
        );
        if length == Some(2.0)
            && families
                == BTreeSet::from(["redis_streams_stream_length", "redis_streams_exporter_target_up"])
        {
            common::promtool_check(&body);
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
    let r = reqwest::Client::new()
        .get(format!("{}/probe?{target}", d.base))
        .header("Accept", "application/openmetrics-text; version=1.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let om = r.text().await.unwrap();
    assert!(om.ends_with("# EOF\n"), "{om}");
    let parsed = common::openmetrics_check(&om);
    assert!(
        parsed.contains("gauge redis_streams_exporter_target_ready 1\n"),
        "{parsed}"
    );
    assert!(parsed.contains("info redis_streams_target 1\n"), "{parsed}");
    d.stop().await;
}
