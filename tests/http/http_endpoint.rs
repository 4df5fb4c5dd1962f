//! The daemon in-process on a loopback port: endpoints, gzip, readiness (the
//! exporter's, not Redis's: a target down leaves `/readyz` at 200), a target
//! going down and coming back, graceful shutdown.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use redis_streams_exporter::config;

fn fast_config(url: &str) -> String {
    format!(
        "[[targets]]\nname = \"t\"\nurl = \"{url}\"\npatterns = [\"*\"]\n\
         [schedule]\ndiscovery = \"1s\"\ninfo = \"1s\"\nstream = \"200ms\"\npending_summary = \"500ms\"\nconsumers = \"500ms\"\npending_scan = \"1s\"\n\
         [limits]\ncommand_timeout = \"300ms\"\n"
    )
}

#[tokio::test]
async fn endpoints_gzip_and_readiness() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 3);
    let d = Daemon::start(&fast_config(&server.url())).await;
    let ready = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if d.get("/readyz").await.status() == 200 {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    assert!(ready, "never ready");
    // Healthy and collected: nothing to say of the target.
    assert_eq!(d.get("/readyz").await.text().await.unwrap(), "ready\n");
    assert_eq!(d.get("/healthz").await.status(), 200);

    let r = d.get("/metrics").await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = r.text().await.unwrap();
    promtool_check(&text);
    let m = Metrics::parse(&text);
    assert_eq!(m.value("redis_streams_stream_length", &ts("orders")), 3.0);
    assert!(text.contains("# HELP redis_streams_stream_length Entries in the stream (XINFO STREAM length). Cached by the poller."));

    // gzip when asked.
    let client = reqwest::Client::builder().no_gzip().build().unwrap();
    let r = client
        .get(format!("{}/metrics", d.base))
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let body = r.bytes().await.unwrap();
    let mut plain = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut plain)
        .unwrap();
    assert!(plain.contains("redis_streams_stream_length{target=\"t\",stream=\"orders\"} 3"));

    // Landing page.
    let page = d.get("/").await.text().await.unwrap();
    assert!(page.contains(env!("CARGO_PKG_VERSION")));
    assert!(page.contains("href=\"/metrics\""));
    assert!(page.contains("<td>t</td>"));
    assert!(page.contains(&format!("redis://127.0.0.1:{}/0", server.port)));
    assert_eq!(d.get("/nope").await.status(), 404);
    d.stop().await;
}

#[tokio::test]
async fn target_down_withdraws_data_and_recovers() {
    let mut server = RedisServer::start(Server::Redis70);
    let port = server.port;
    {
        let mut c = server.conn();
        xadd_n(&mut c, "orders", 5);
    }
    let d = Daemon::start(&fast_config(&server.url())).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while d
        .metrics()
        .await
        .get("redis_streams_stream_length", &ts("orders"))
        != Some(5.0)
    {
        assert!(Instant::now() < deadline, "no data");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    server.kill();
    let killed = Instant::now();
    // Within one poll (200 ms) plus the timeout, the target is down; its data
    // series stay as last read for the grace (3 polls), then are gone;
    // /metrics keeps answering quickly throughout.
    let mut down_at = None;
    loop {
        let (m, took) = d.scrape().await;
        assert!(
            took < Duration::from_millis(500),
            "/metrics was slow: {took:?}"
        );
        if m.get("redis_streams_exporter_target_up", &[("target", "t")]) == Some(0.0) {
            let length = m.get("redis_streams_stream_length", &ts("orders"));
            if down_at.is_none() {
                down_at = Some(Instant::now());
                // The exporter still serves: ready, saying the target is down.
                let r = d.get("/readyz").await;
                assert_eq!(r.status(), 200);
                let body = r.text().await.unwrap();
                assert!(body.starts_with("ready\nt: down: "), "{body}");
                assert!(
                    m.value(
                        "redis_streams_exporter_errors_total",
                        &[("target", "t"), ("kind", "connection")]
                    ) >= 1.0
                );
            }
            if length.is_none() {
                assert!(m.family("redis_streams_group_lag").is_empty());
                assert!(m.family("redis_streams_target_info").is_empty());
                break;
            }
            assert_eq!(length, Some(5.0), "only what was last read is held");
            assert!(
                down_at.is_some_and(|at| stall::awake_since(at) < Duration::from_secs(3)),
                "data still served 3 s after target_up 0 (grace 600 ms)"
            );
        } else {
            assert!(down_at.is_none(), "up again while killed");
        }
        assert!(
            stall::awake_since(killed) < Duration::from_secs(6),
            "target_up did not drop, or its data were not withdrawn"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Same port again: collection recovers by itself.
    let restarted = RedisServer::start_on(Server::Redis70, port);
    {
        let mut c = restarted.conn();
        xadd_n(&mut c, "orders", 2);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = d.metrics().await;
        if m.get("redis_streams_exporter_target_up", &[("target", "t")]) == Some(1.0)
            && m.get("redis_streams_stream_length", &ts("orders")) == Some(2.0)
        {
            break;
        }
        assert!(Instant::now() < deadline, "did not recover:\n{}", m.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    d.stop().await;
}

/// Redis unreachable from the start: `/readyz` is 200 once the first collection has failed,
/// and says why, while `/metrics` says `target_up 0`; a rollout or `helm --wait` is not held back
/// by Redis's health.
#[tokio::test]
async fn readyz_is_ready_while_redis_is_unreachable() {
    // A loopback port nobody listens on: every connection is refused.
    let port = free_port();
    let d = Daemon::start(&fast_config(&format!("redis://127.0.0.1:{port}"))).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let r = d.get("/readyz").await;
        let status = r.status();
        let body = r.text().await.unwrap();
        if status == 200 {
            break body;
        }
        assert_eq!(status, 503, "{body}");
        assert!(body.starts_with("not ready: "), "{body}");
        assert!(
            body.contains("t: first collection in progress: ")
                || body.contains("t: first collection not started")
                || body.contains("the first exposition is being rendered"),
            "{body}"
        );
        assert!(Instant::now() < deadline, "never ready: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(body.starts_with("ready\nt: down: "), "{body}");
    assert!(body.contains("failed: "), "{body}");
    let m = d.metrics().await;
    assert_eq!(
        m.get("redis_streams_exporter_target_up", &[("target", "t")]),
        Some(0.0),
        "{}",
        m.text
    );
    // And it stays ready, poll after poll.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(d.get("/readyz").await.status(), 200);
    }
    d.stop().await;
}

/// `/readyz` from the snapshots alone: 503 while a target's first collection runs, 200 once it
/// has an outcome (a failure counts), and 200 from then on, even when a reload adds a target
/// whose first collection is still running.
#[tokio::test]
async fn readyz_waits_for_first_outcomes_then_stays_ready() {
    use redis_streams_exporter::http::{HttpState, router};
    use redis_streams_exporter::snapshot::{ProbeStatus, SnapshotStore, TargetSnapshot};
    use redis_streams_exporter::vocab::ProbeKind;
    use std::sync::{Arc, RwLock};
    use tower::ServiceExt;

    let store = Arc::new(SnapshotStore::default());
    let owner = store.register("t");
    store.publish(
        owner,
        Arc::new(TargetSnapshot {
            name: "t".into(),
            ..TargetSnapshot::default()
        }),
    );
    let one_target = "[[targets]]\nname = \"t\"\nurl = \"redis://127.0.0.1:1\"\n";
    let config = Arc::new(RwLock::new(Arc::new(
        config::from_str("t.toml", one_target, &Default::default()).unwrap(),
    )));
    let (reload, _rx) = tokio::sync::mpsc::channel(1);
    let exposition = redis_streams_exporter::exposition::Exposition::start(
        store.clone(),
        &tokio_util::task::TaskTracker::new(),
        tokio_util::sync::CancellationToken::new(),
    );
    let state = HttpState::new(store.clone(), config.clone(), reload, exposition);
    let app = router(state.clone(), None);
    let readyz = |app: axum::Router| async move {
        let request = axum::http::Request::get("/readyz")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    };
    let wait_for = |app: axum::Router, status: u16, needle: &'static str| async move {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let (s, body) = readyz(app.clone()).await;
            if s == status && body.contains(needle) {
                return body;
            }
            assert!(Instant::now() < deadline, "{s}: {body}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    // Nothing ran yet.
    let body = wait_for(app.clone(), 503, "t: first collection in progress").await;
    assert!(body.starts_with("not ready: "), "{body}");
    assert!(body.contains("discovery has not run yet"), "{body}");

    // Discovery failed: an outcome, the target is down, the exporter ready.
    let failed = ProbeStatus {
        success: false,
        last_error: Some("connection refused".into()),
        ..ProbeStatus::default()
    };
    store.publish(
        owner,
        Arc::new(TargetSnapshot {
            name: "t".into(),
            probes: [(ProbeKind::Discovery, failed)].into_iter().collect(),
            ..TargetSnapshot::default()
        }),
    );
    let body = wait_for(
        app.clone(),
        200,
        "t: down: discovery failed: connection refused",
    )
    .await;
    assert!(body.starts_with("ready\n"), "{body}");

    // A reload adds a target whose first collection has not begun: still ready.
    let two_targets =
        format!("{one_target}[[targets]]\nname = \"u\"\nurl = \"redis://127.0.0.1:2\"\n");
    *config.write().unwrap() =
        Arc::new(config::from_str("t.toml", &two_targets, &Default::default()).unwrap());
    let added = store.register("u");
    store.publish(
        added,
        Arc::new(TargetSnapshot {
            name: "u".into(),
            ..TargetSnapshot::default()
        }),
    );
    let body = wait_for(app.clone(), 200, "u: first collection in progress").await;
    assert!(body.contains("t: down: "), "{body}");
}

/// Concurrent scrapes of one snapshot share one render; a new snapshot is
/// rendered once more, in the background, and never per request.
#[tokio::test]
async fn concurrent_scrapes_share_one_render() {
    use redis_streams_exporter::http::{HttpState, router};
    use redis_streams_exporter::snapshot::{SnapshotStore, TargetSnapshot};
    use std::sync::{Arc, RwLock};
    use tower::ServiceExt;

    let store = Arc::new(SnapshotStore::default());
    let owner = store.register("t");
    store.publish(
        owner,
        Arc::new(TargetSnapshot {
            name: "t".into(),
            up: true,
            ..TargetSnapshot::default()
        }),
    );
    let config = Arc::new(RwLock::new(Arc::new(
        config::from_str("t.toml", "", &Default::default()).unwrap(),
    )));
    let (reload, _rx) = tokio::sync::mpsc::channel(1);
    let exposition = redis_streams_exporter::exposition::Exposition::start(
        store.clone(),
        &tokio_util::task::TaskTracker::new(),
        tokio_util::sync::CancellationToken::new(),
    );
    let state = HttpState::new(store.clone(), config, reload, exposition);
    let app = router(state.clone(), None);
    let scrape = |app: axum::Router| async move {
        let request = axum::http::Request::get("/metrics")
            .header("accept-encoding", "gzip")
            .body(axum::body::Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap()
            .len()
    };
    let mut tasks = Vec::new();
    for _ in 0..50 {
        tasks.push(tokio::spawn(scrape(app.clone())));
    }
    let sizes: Vec<usize> = futures_join(tasks).await;
    assert!(sizes.iter().all(|s| *s == sizes[0] && *s > 0));
    assert_eq!(state.renders(), 1, "50 concurrent scrapes of one snapshot");
    scrape(app.clone()).await;
    assert_eq!(state.renders(), 1, "a later scrape of the same snapshot");
    store.publish(
        owner,
        Arc::new(TargetSnapshot {
            name: "t".into(),
            up: false,
            ..TargetSnapshot::default()
        }),
    );
    // Rendered in the background, once, without waiting for a scrape.
    assert!(
        eventually(Duration::from_secs(5), || state.renders() == 2).await,
        "the new snapshot was not rendered"
    );
    for _ in 0..10 {
        scrape(app.clone()).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(state.renders(), 2, "scrapes never render");
}

async fn futures_join(tasks: Vec<tokio::task::JoinHandle<usize>>) -> Vec<usize> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

/// The process metrics every client library exports, with the same names and
/// HELP texts as client_golang, read from /proc with each render.
#[tokio::test]
async fn process_metrics() {
    let server = RedisServer::start(Server::Redis70);
    let d = Daemon::start(&fast_config(&server.url())).await;
    let first = d.get("/metrics").await.text().await.unwrap();
    promtool_check(&first);
    let m = Metrics::parse(&first);
    for (name, help) in [
        (
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
        ),
        ("process_open_fds", "Number of open file descriptors."),
        (
            "process_max_fds",
            "Maximum number of open file descriptors.",
        ),
        (
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
        ),
        (
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
        ),
        (
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
        ),
    ] {
        assert!(first.contains(&format!("# HELP {name} {help}\n")), "{name}");
        assert!(m.get(name, &[]).is_some(), "{name} missing");
    }
    assert!(first.contains("# TYPE process_cpu_seconds_total counter\n"));
    assert!(first.contains("# TYPE process_resident_memory_bytes gauge\n"));
    // This test process is the exporter: compare with what /proc says of it.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let rss_kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    let rss = m.value("process_resident_memory_bytes", &[]);
    assert!(
        rss > 0.0 && rss < rss_kb * 1024.0 * 4.0,
        "rss {rss} vs {rss_kb} kB"
    );
    assert!(m.value("process_virtual_memory_bytes", &[]) >= rss);
    let fds = m.value("process_open_fds", &[]);
    assert!(fds >= 3.0 && fds <= m.value("process_max_fds", &[]));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let start = m.value("process_start_time_seconds", &[]);
    assert!(
        start <= now && start > now - 86_400.0,
        "start {start}, now {now}"
    );
    // Renders follow the probes (every 200 ms here): the CPU counter is read
    // again, and never goes back.
    let cpu = m.value("process_cpu_seconds_total", &[]);
    let mut later = cpu;
    for _ in 0..100 {
        std::hint::black_box((0..200_000u64).map(|i| i * i).sum::<u64>());
        tokio::time::sleep(Duration::from_millis(50)).await;
        later = d.metrics().await.value("process_cpu_seconds_total", &[]);
        if later > cpu {
            break;
        }
    }
    assert!(later > cpu, "cpu seconds never moved from {cpu}");
    d.stop().await;
}

/// The landing page lists problems first, says why a target is down or not
/// ready, pages through many groups with a count instead of cutting them
/// off, and escapes names from Redis.
#[tokio::test]
async fn landing_page_problems_first_paged_and_escaped() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    // 600 quiet groups on one stream.
    xadd_n(&mut c, "many", 1);
    let mut pipe = redis::pipe();
    for i in 0..600 {
        pipe.cmd("XGROUP")
            .arg("CREATE")
            .arg("many")
            .arg(format!("g{i:03}"))
            .arg("$")
            .ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    // A group overtaken by a trim (data_loss), named to break HTML and terminals.
    let evil = "<b>x</b>\u{1b}[31m\nz";
    xadd_n(&mut c, "lossy", 1);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("lossy")
        .arg(evil)
        .arg("0")
        .query(&mut c)
        .unwrap();
    xadd_n(&mut c, "lossy", 9);
    let _: i64 = redis::cmd("XTRIM")
        .arg("lossy")
        .arg("MAXLEN")
        .arg(3)
        .query(&mut c)
        .unwrap();
    let gone = free_port();
    // Every one of the 601 groups watched (the default keeps 200 a stream).
    let config = format!(
        "{}[[targets]]\nname = \"gone\"\nurl = \"redis://127.0.0.1:{gone}\"\n\
         [metrics]\nmax_groups_per_stream = 1000\n",
        fast_config(&server.url())
    );
    let d = Daemon::start(&config).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let page = loop {
        let page = d.get("/").await.text().await.unwrap();
        if page.contains("601 groups") && page.contains("data_loss") {
            break page;
        }
        assert!(Instant::now() < deadline, "never complete:\n{page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Targets: the down one first, with why.
    let targets =
        &page[page.find("<h2>Targets</h2>").unwrap()..page.find("<h2>Groups</h2>").unwrap()];
    let gone_row = targets.find("<td>gone</td>").unwrap();
    assert!(gone_row < targets.find("<td>t</td>").unwrap(), "{targets}");
    assert!(
        targets.contains("down: ") && targets.contains("failed: "),
        "no reason: {targets}"
    );
    // Groups: a count, the problem first, a page of 500, a link to the next.
    assert!(page.contains("601 groups: 1 data_loss, 600 idle"), "{page}");
    assert!(page.contains("Showing 1–500 (page 1 of 2)"), "{page}");
    assert!(page.contains("<a href=\"/?page=2\">next »</a>"));
    let groups = &page[page.find("<h2>Groups</h2>").unwrap()..];
    let group_rows: Vec<&str> = groups
        .split("<tr")
        .skip(1)
        .filter(|r| r.contains("<td>t</td><td>"))
        .collect();
    assert_eq!(group_rows.len(), 500);
    assert!(group_rows[0].contains("data_loss"), "{}", group_rows[0]);
    // The name is escaped for HTML and for the terminal it may be pasted into.
    assert!(
        group_rows[0].contains("&lt;b&gt;x&lt;/b&gt;\\u{1b}[31m\\nz"),
        "{}",
        group_rows[0]
    );
    assert!(!page.contains("<b>x</b>") && !page.contains('\u{1b}'));
    let second = d.get("/?page=2").await.text().await.unwrap();
    assert!(second.contains("Showing 501–601 (page 2 of 2)"), "{second}");
    assert!(second.contains("<a href=\"/?page=1\">« previous</a>"));
    assert_eq!(second.matches("<td>idle (no work)</td>").count(), 101);
    // Out of range: the last page.
    let last = d.get("/?page=99").await.text().await.unwrap();
    assert!(last.contains("(page 2 of 2)"));
    d.stop().await;
}

/// The landing page has the columns `check` has (poison, ghosts, orphaned,
/// lost, dead letters) and the stream's `read_every`, explains the statuses
/// and the `~` marker, and reloads itself every stream poll.
async fn landing_page_shows_the_checks_a_legend_and_refreshes(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    // jobs/workers: 3 pending entries held by c1: one delivered 6 times
    // (poison), one deleted (a ghost), all orphaned once c1 is inactive for
    // a second; 2 dead letters.
    let ids = xadd_n(&mut c, "jobs", 3);
    xadd_n(&mut c, "jobs:dlq", 2);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("jobs")
        .arg("workers")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("workers")
        .arg("c1")
        .arg("STREAMS")
        .arg("jobs")
        .arg(">")
        .query(&mut c)
        .unwrap();
    let _: redis::Value = redis::cmd("XCLAIM")
        .arg("jobs")
        .arg("workers")
        .arg("c1")
        .arg(0)
        .arg(&ids[0])
        .arg("RETRYCOUNT")
        .arg(6)
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("XDEL")
        .arg("jobs")
        .arg(&ids[1])
        .query(&mut c)
        .unwrap();
    // lossy/late: 5 undelivered entries, 3 trimmed away while watched.
    xadd_n(&mut c, "lossy", 5);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("lossy")
        .arg("late")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let config = format!(
        "{}[[streams]]\nmatch = \"jobs\"\ndead_letter = \"jobs:dlq\"\npoison_delivery_count = 5\nconsumer_inactive_after = \"1s\"\nread_every = \"4m\"\n",
        fast_config(&server.url())
    );
    let d = Daemon::start(&config).await;
    let row = |page: &str, group: &str| -> Option<String> {
        page.split("<tr")
            .find(|r| r.contains(&format!("<td>{group}</td>")))
            .map(str::to_string)
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let page = d.get("/").await.text().await.unwrap();
        if row(&page, "late").is_some_and(|r| r.contains("<td>5</td>")) {
            break;
        }
        assert!(Instant::now() < deadline, "lossy/late never seen:\n{page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _: i64 = redis::cmd("XTRIM")
        .arg("lossy")
        .arg("MAXLEN")
        .arg(2)
        .query(&mut c)
        .unwrap();
    // pending, poison, ghosts, orphaned, lost, dead letters, read every.
    // Losses are counted from Redis 7.0 on (entries-read): unknown before.
    let (workers_want, late_want) = if kind.has_lag() {
        (
            "<td>3</td><td>1</td><td>1</td><td>3</td><td>0</td><td>2</td><td>4m</td></tr>",
            "<td>0</td><td>0</td><td>0</td><td>0</td><td>3</td><td>-</td><td></td></tr>",
        )
    } else {
        (
            "<td>3</td><td>1</td><td>1</td><td>3</td><td>-</td><td>2</td><td>4m</td></tr>",
            "<td>0</td><td>0</td><td>0</td><td>0</td><td>-</td><td>-</td><td></td></tr>",
        )
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let page = loop {
        let page = d.get("/").await.text().await.unwrap();
        let workers = row(&page, "workers").unwrap_or_default();
        let late = row(&page, "late").unwrap_or_default();
        if workers.contains(workers_want) && late.contains(late_want) {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "want workers …{workers_want} and late …{late_want}:\n{page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let header = "<th>pending</th><th>poison</th><th>ghosts</th><th>orphaned</th><th>lost</th><th>dead letters</th><th>read every</th></tr>";
    assert!(page.contains(header), "{page}");
    // Under the stalled group: who holds its orphaned and poison entries,
    // the oldest of them, and the lines that claim them (the orphan limit
    // is 1 s).
    let first = &ids[0];
    for said in [
        "orphaned: c1 holds 3 entries, silent for ".to_string(),
        format!(
            ", the oldest {first}. Claim: <code>XAUTOCLAIM jobs workers &lt;live-consumer&gt; 1000 {first} COUNT 100</code>"
        ),
        format!(
            "poison: c1 holds poison, the oldest {first} (delivered 6 times). Claim: <code>XCLAIM jobs workers &lt;dead-letter-handler&gt; "
        ),
    ] {
        assert!(page.contains(&said), "{said}: {page}");
    }
    // Coloured by severity: the stalled group, the group that lost entries.
    assert!(
        page.contains("<tr class=\"stalled\"><td>t</td><td>jobs</td>"),
        "{page}"
    );
    if kind.has_lag() {
        assert!(
            page.contains("<tr class=\"data_loss\"><td>t</td><td>lossy</td>"),
            "{page}"
        );
        assert!(
            page.contains(" ago, holds 59m"),
            "a loss's time as durations: {page}"
        );
    }
    // Reloads itself every stream poll (200ms here: at least a second).
    assert!(
        page.contains("<meta http-equiv=\"refresh\" content=\"1\">"),
        "{page}"
    );
    // Every status is explained, and the ~ marker too.
    let legend = &page[page.find("<h2>Legend</h2>").expect("no legend")..];
    for status in [
        "ok",
        "idle",
        "lagging",
        "stalled",
        "stopped",
        "data_loss",
        "warming_up",
    ] {
        assert!(
            legend.contains(&format!("\">{status}</dt><dd>")),
            "{status}: {legend}"
        );
    }
    assert!(
        !page.contains("unknown</dt>"),
        "one word for not judged yet"
    );
    assert!(legend.contains("<b>~</b> before it"), "{legend}");
    d.stop().await;
}

per_server!(landing_page_shows_the_checks_a_legend_and_refreshes);

/// A task queue whose workers take a random name at each start: 300 idle
/// consumers left by restarts, a live worker, and a worker that crashed
/// holding 5 entries, its name sorting after all the others. The landing
/// page and the culprit series name the crashed worker and its oldest
/// entry, with the claim line at the group's orphan limit.
async fn the_crashed_worker_among_300_idle_consumers_is_named(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("tasks")
        .arg("workers")
        .arg("$")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();
    let mut pipe = redis::pipe();
    for i in 0..300u64 {
        let name = format!("w-{:08x}", i.wrapping_mul(0x9E37_79B9) % 0xFFFF_FFFF);
        pipe.cmd("XGROUP")
            .arg("CREATECONSUMER")
            .arg("tasks")
            .arg("workers")
            .arg(name)
            .ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let held = xadd_n(&mut c, "tasks", 5);
    let crashed = "w-zz7f3a91";
    read_group(&mut c, "tasks", "workers", crashed, 5);
    let config = format!(
        "{}[[streams]]\nmatch = \"tasks\"\nconsumer_inactive_after = \"2s\"\n",
        fast_config(&server.url())
    );
    let d = Daemon::start(&config).await;
    let want = format!("orphaned: {crashed} holds 5 entries, silent for ");
    let claim = format!(
        "<code>XAUTOCLAIM tasks workers &lt;live-consumer&gt; 2000 {} COUNT 100</code>",
        held[0]
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        // The live worker keeps up with a producer.
        xadd_n(&mut c, "tasks", 1);
        let got = read_group(&mut c, "tasks", "workers", "w-live0001", 10);
        if !got.is_empty() {
            let mut ack = redis::cmd("XACK");
            ack.arg("tasks").arg("workers").arg(&got);
            let _: i64 = ack.query(&mut c).unwrap();
        }
        let page = d.get("/").await.text().await.unwrap();
        if page.contains(&want) && page.contains(&claim) {
            break page;
        }
        assert!(Instant::now() < deadline, "{want} {claim}:\n{page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        page.contains(&format!(", the oldest {}", held[0])),
        "{page}"
    );
    let series = format!(
        "redis_streams_group_pending_culprit_min_idle_seconds{{target=\"t\",stream=\"tasks\",group=\"workers\",kind=\"orphaned\",id=\"{}\",consumer=\"{crashed}\"}} 2",
        held[0]
    );
    // The page reads the snapshot; /metrics serves the last render, which
    // may be one render behind it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = d.get("/metrics").await.text().await.unwrap();
        if text.contains(&series) {
            break text;
        }
        assert!(Instant::now() < deadline, "{series}:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        text.matches("redis_streams_group_pending_culprit_min_idle_seconds{")
            .count(),
        1,
        "only the crashed worker: {text}"
    );
    d.stop().await;
}

per_server!(the_crashed_worker_among_300_idle_consumers_is_named);

/// `Accept: application/openmetrics-text` gets OpenMetrics 1.0 (judged by a strict parser), with
/// the same series as the text format; `name[]` keeps only the families named, in either format.
#[tokio::test]
async fn openmetrics_on_request_and_name_filters() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 3);
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", "orders", "billing", "0"])
        .query(&mut c)
        .unwrap();
    let d = Daemon::start(&fast_config(&server.url())).await;
    wait_metrics(&d, Duration::from_secs(10), "group status", |m| {
        !m.family("redis_streams_group_status").is_empty()
    })
    .await;
    let client = reqwest::Client::builder().no_gzip().build().unwrap();
    let get = |path: &str, accept: Option<&str>, gzip: bool| {
        let mut request = client.get(format!("{}{path}", d.base));
        if let Some(accept) = accept {
            request = request.header("Accept", accept);
        }
        if gzip {
            request = request.header("Accept-Encoding", "gzip");
        }
        request.send()
    };
    // Prometheus 2.42's Accept header.
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let r = get("/metrics", Some(prometheus), false).await.unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let om = r.text().await.unwrap();
    assert!(om.ends_with("# EOF\n"), "{om}");
    let parsed = openmetrics_check(&om);
    for family in [
        "gauge redis_streams_group_status ",
        "counter redis_streams_stream_entries_added ",
        "info redis_streams_target ",
        "info redis_streams_exporter_build ",
        "gauge redis_streams_group_lag_seconds ",
    ] {
        assert!(parsed.contains(family), "{family}:\n{parsed}");
    }
    assert!(om.contains("# UNIT redis_streams_group_lag_seconds seconds\n"));
    assert!(om.contains("# UNIT process_resident_memory_bytes bytes\n"));
    // gzip-compressed OpenMetrics is the same text.
    let r = get("/metrics", Some(prometheus), true).await.unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let mut unzipped = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&r.bytes().await.unwrap()[..]),
        &mut unzipped,
    )
    .unwrap();
    assert!(unzipped.ends_with("# EOF\n"));
    assert!(unzipped.contains("# TYPE redis_streams_group_status gauge\n"));

    // The text format stays the default, with the same series.
    for accept in [None, Some("*/*"), Some("text/plain;version=0.0.4")] {
        let r = get("/metrics", accept, false).await.unwrap();
        assert_eq!(
            r.headers()["content-type"],
            "text/plain; version=0.0.4; charset=utf-8",
            "{accept:?}"
        );
        let text = r.text().await.unwrap();
        assert!(!text.contains("# EOF"), "{accept:?}");
        let m = Metrics::parse(&text);
        let labels = [("target", "t"), ("stream", "orders"), ("group", "billing")];
        assert_eq!(m.value("redis_streams_group_lag", &labels), 3.0);
        assert!(
            om.contains(
                "redis_streams_group_lag{target=\"t\",stream=\"orders\",group=\"billing\"} 3\n"
            ),
            "{om}"
        );
        assert!(m.get("redis_streams_stream_entries_added_total", &labels[..2]) == Some(3.0));
        assert!(om.contains(
            "redis_streams_stream_entries_added_total{target=\"t\",stream=\"orders\"} 3\n"
        ));
    }

    // name[]: only those families, in either format; a name of no family selects nothing.
    let query =
        "/metrics?name[]=redis_streams_group_lag&name%5B%5D=redis_streams_group_status&name[]=nope";
    for (accept, gzip) in [(None, false), (Some(prometheus), true)] {
        let r = get(query, accept, gzip).await.unwrap();
        let text = r.text().await.unwrap();
        let families: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        assert_eq!(
            families,
            ["redis_streams_group_lag", "redis_streams_group_status"]
                .into_iter()
                .collect(),
            "{text}"
        );
        // One status series a group.
        assert_eq!(
            text.matches("redis_streams_group_status{").count(),
            1,
            "{text}"
        );
        if accept.is_some() {
            assert!(text.ends_with("# EOF\n"), "{text}");
            openmetrics_check(&text);
        } else {
            promtool_check(&text);
        }
    }
    // The name of a family in either format selects it.
    for name in [
        "redis_streams_stream_entries_added_total",
        "redis_streams_stream_entries_added",
    ] {
        let text = get(&format!("/metrics?name[]={name}"), None, false)
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(
            text.lines().filter(|l| !l.starts_with('#')).count(),
            1,
            "{name}: {text}"
        );
    }
    let text = get("/metrics?name[]=nope", None, false)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(text, "");
    d.stop().await;
}
