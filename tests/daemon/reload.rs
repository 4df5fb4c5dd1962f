//! Live reload through POST /-/reload and SIGHUP: a new file is
//! applied without dropping the HTTP server; an invalid one keeps the old
//! configuration and is logged and counted. POST /-/reload only
//! with --web.enable-lifecycle, and its error replies name no file path.
//! The daemon runs in-process (`common::Daemon`), except for SIGHUP, which
//! needs a process of its own.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::exporter::Exporter;
use common::*;
use redis_streams_exporter::config;

fn target(name: &str, server: &RedisServer) -> String {
    format!(
        "[[targets]]\nname = \"{name}\"\nurl = \"{}\"\n",
        server.url()
    )
}

const FAST: &str = "[schedule]\nstream = \"200ms\"\n";

async fn wait_for(base: &str, path: &str, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(r) = reqwest::get(format!("{base}{path}")).await {
            let text = r.text().await.unwrap();
            if text.contains(what) {
                return text;
            }
        }
        assert!(Instant::now() < deadline, "{what} never appeared at {path}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn reload_over_http() {
    let a = RedisServer::start(Server::Redis70);
    let b = RedisServer::start(Server::Redis70);
    xadd_n(&mut a.conn(), "sa", 1);
    xadd_n(&mut b.conn(), "sb", 2);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, format!("{}{FAST}", target("a", &a))).unwrap();
    let lifecycle = config::CliOverrides {
        enable_lifecycle: true,
        ..Default::default()
    };
    let cfg = config::load(Some(&path), &lifecycle).unwrap();
    let daemon = Daemon::start_with(cfg, lifecycle).await;
    let base = daemon.base.clone();
    wait_for(
        &base,
        "/metrics",
        "redis_streams_stream_length{target=\"a\",stream=\"sa\"} 1",
    )
    .await;

    // A second target, and a new metrics path.
    std::fs::write(
        &path,
        format!(
            "[web]\ntelemetry_path = \"/m2\"\n{}{}{FAST}",
            target("a", &a),
            target("b", &b)
        ),
    )
    .unwrap();
    let r = reqwest::Client::new()
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let text = wait_for(
        &base,
        "/m2",
        "redis_streams_stream_length{target=\"b\",stream=\"sb\"} 2",
    )
    .await;
    assert!(text.contains("redis_streams_stream_length{target=\"a\",stream=\"sa\"} 1"));
    assert!(text.contains("redis_streams_exporter_config_reloads_total 1"));
    assert!(text.contains("redis_streams_exporter_config_last_reload_successful 1\n"));
    assert_eq!(
        reqwest::get(format!("{base}/metrics"))
            .await
            .unwrap()
            .status(),
        404
    );

    // An invalid file: rejected with the key at fault (the log has the
    // message), the old config stays. The reply names no file path.
    std::fs::write(&path, "[schedule]\nstream = \"never\"\n").unwrap();
    let r = reqwest::Client::new()
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let reason = r.text().await.unwrap();
    assert!(
        reason.contains("invalid value at schedule.stream"),
        "{reason}"
    );
    let dir_name = dir.path().to_str().unwrap();
    assert!(
        !reason.contains("c.toml") && !reason.contains(dir_name),
        "the reply names the file: {reason}"
    );
    // A file that cannot be read: still no path in the reply.
    std::fs::rename(&path, dir.path().join("moved.toml")).unwrap();
    let r = reqwest::Client::new()
        .put(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let reason = r.text().await.unwrap();
    assert!(reason.contains("could not be read or parsed"), "{reason}");
    assert!(
        !reason.contains(dir_name),
        "the reply names the file: {reason}"
    );
    std::fs::rename(dir.path().join("moved.toml"), &path).unwrap();
    let text = wait_for(
        &base,
        "/m2",
        "redis_streams_exporter_config_reload_failures_total 2",
    )
    .await;
    assert!(text.contains("redis_streams_exporter_config_last_reload_successful 0\n"));
    assert!(text.contains("redis_streams_exporter_config_reloads_total 3"));
    assert!(
        text.contains("redis_streams_stream_length{target=\"b\",stream=\"sb\"} 2"),
        "old config must stay"
    );

    // Removing a target removes its series.
    std::fs::write(&path, format!("{}{FAST}", target("b", &b))).unwrap();
    let r = reqwest::Client::new()
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Counters are read before targets when rendering, so once the success
    // shows, the removal shows with it.
    let text = wait_for(
        &base,
        "/metrics",
        "redis_streams_exporter_config_last_reload_successful 1\n",
    )
    .await;
    assert!(
        text.contains("redis_streams_exporter_config_reloads_total 4\n"),
        "{text}"
    );
    assert!(
        !text.contains("target=\"a\""),
        "removed target still served:\n{text}"
    );
    let r = reqwest::get(format!("{base}/-/reload")).await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "POST, PUT");
    daemon.stop().await;
}

/// Without --web.enable-lifecycle, POST /-/reload is refused and changes
/// nothing; wrong methods get 405 with Allow on every endpoint.
#[tokio::test]
async fn reload_endpoint_needs_the_lifecycle_flag() {
    let a = RedisServer::start(Server::Redis70);
    xadd_n(&mut a.conn(), "sa", 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, format!("{}{FAST}", target("a", &a))).unwrap();
    let cfg = config::load(Some(&path), &Default::default()).unwrap();
    let daemon = Daemon::start_config(cfg).await;
    let base = daemon.base.clone();
    wait_for(&base, "/metrics", "stream=\"sa\"} 1").await;
    std::fs::write(&path, "[web]\ntelemetry_path = \"/m2\"\n").unwrap();
    let http = reqwest::Client::new();
    for r in [
        http.post(format!("{base}/-/reload")).send().await.unwrap(),
        http.put(format!("{base}/-/reload")).send().await.unwrap(),
    ] {
        assert_eq!(r.status(), 403);
        let body = r.text().await.unwrap();
        assert!(body.contains("--web.enable-lifecycle"), "{body}");
    }
    let text = wait_for(
        &base,
        "/metrics",
        "redis_streams_exporter_config_reloads_total 0",
    )
    .await;
    assert!(
        text.contains("stream=\"sa\"} 1"),
        "the old configuration stays"
    );
    for (method, path, allow) in [
        (reqwest::Method::POST, "/metrics", "GET, HEAD"),
        (reqwest::Method::DELETE, "/", "GET, HEAD"),
        (reqwest::Method::PUT, "/healthz", "GET, HEAD"),
        (reqwest::Method::POST, "/readyz", "GET, HEAD"),
        (reqwest::Method::GET, "/-/reload", "POST, PUT"),
    ] {
        let r = http
            .request(method.clone(), format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405, "{method} {path}");
        assert_eq!(r.headers()["allow"], allow, "{method} {path}");
    }
    assert_eq!(
        http.post(format!("{base}/nowhere"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    daemon.stop().await;
}

#[tokio::test]
async fn reload_on_sighup() {
    let a = RedisServer::start(Server::Redis70);
    xadd_n(&mut a.conn(), "s1", 1);
    xadd_n(&mut a.conn(), "s2", 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        format!("{}streams = [\"s1\"]\n{FAST}", target("a", &a)),
    )
    .unwrap();
    let mut exporter = Exporter::with_config_file(dir.path(), &path).start();
    let base = exporter.base();
    let text = wait_for(&base, "/metrics", "stream=\"s1\"} 1").await;
    assert!(!text.contains("stream=\"s2\""));
    let hup = |pid: u32| {
        let ok = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    std::fs::write(
        &path,
        format!("{}streams = [\"s1\", \"s2\"]\n{FAST}", target("a", &a)),
    )
    .unwrap();
    hup(exporter.child.id());
    wait_for(
        &base,
        "/metrics",
        "redis_streams_stream_length{target=\"a\",stream=\"s2\"} 1",
    )
    .await;
    std::fs::write(&path, "not toml at all [").unwrap();
    hup(exporter.child.id());
    wait_for(
        &base,
        "/metrics",
        "redis_streams_exporter_config_reload_failures_total 1",
    )
    .await;
    assert!(
        exporter.child.try_wait().unwrap().is_none(),
        "the daemon must survive an invalid reload"
    );
    let logged = exporter.log();
    assert!(logged.contains("configuration reload rejected"), "{logged}");
    // SIGTERM: graceful exit 0.
    Command::new("kill")
        .args(["-TERM", &exporter.child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = exporter.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no graceful exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
}

/// A reload that changes only intervals restarts each poller with
/// its memory, so a PEL scan in progress goes on from where it was; a new
/// URL for the target starts afresh. Two servers hold one group each, with
/// different PEL sizes so a scrape shows which one it was read from; the
/// scan budget makes a pass last about 30 s.
#[tokio::test]
async fn an_interval_only_reload_keeps_the_scan_in_progress() {
    let a = RedisServer::start(Server::Redis70);
    let b = RedisServer::start(Server::Redis70);
    for (server, n) in [(&a, 6000), (&b, 5000)] {
        let mut c = server.conn();
        xadd_n(&mut c, "s", n);
        server.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
        assert_eq!(read_group(&mut c, "s", "g", "c", n).len(), n);
    }
    let file = |server: &RedisServer, stream: &str| {
        format!(
            "{}[schedule]\nstream = \"{stream}\"\npending_scan = \"500ms\"\n\
             [limits]\npending_entries_per_second = 200\npending_page = 100\n",
            target("a", server)
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, file(&a, "200ms")).unwrap();
    let lifecycle = config::CliOverrides {
        enable_lifecycle: true,
        ..Default::default()
    };
    let cfg = config::load(Some(&path), &lifecycle).unwrap();
    let daemon = Daemon::start_with(cfg, lifecycle).await;
    let base = daemon.base.clone();
    let scrape = || async {
        Metrics::parse(
            &reqwest::get(format!("{base}/metrics"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
        )
    };
    let labels = [("target", "a"), ("stream", "s"), ("group", "g")];
    let progress = |m: &Metrics| m.get("redis_streams_group_pending_scan_progress_ratio", &labels);
    let pending = |m: &Metrics| m.get("redis_streams_group_pending", &labels);
    let stream_interval = |m: &Metrics| {
        m.get(
            "redis_streams_exporter_probe_interval_seconds",
            &[("target", "a"), ("probe", "stream")],
        )
    };
    let reload = || async {
        let r = reqwest::Client::new()
            .post(format!("{base}/-/reload"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let before = loop {
        let m = scrape().await;
        if let Some(p) = progress(&m).filter(|p| (0.1..0.5).contains(p)) {
            break p;
        }
        assert!(Instant::now() < deadline, "no scan progress:\n{}", m.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // Only the stream interval changes: the new poller (its stream interval
    // shows it) carries the pass on, never below where it was.
    std::fs::write(&path, file(&a, "300ms")).unwrap();
    reload().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let resumed = loop {
        let m = scrape().await;
        if stream_interval(&m) == Some(0.3) {
            let p = progress(&m).unwrap_or_else(|| panic!("the scan state was lost:\n{}", m.text));
            assert!(p >= before, "the scan started over: {p} < {before}");
            if p > before {
                break p;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the scan did not go on:\n{}",
            m.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(resumed < 1.0, "the pass finished before the check");

    // A new URL (server b, PEL 5000): a fresh poller, whose pass starts at 0.
    std::fs::write(&path, file(&b, "300ms")).unwrap();
    reload().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let fresh = loop {
        let m = scrape().await;
        if pending(&m) == Some(5000.0) {
            if let Some(p) = progress(&m) {
                break p;
            }
        }
        assert!(
            Instant::now() < deadline,
            "server b never shown:\n{}",
            m.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        fresh < resumed,
        "server b's scan continued a's pass: {fresh} >= {resumed}"
    );
    daemon.stop().await;
}

/// A reload that changes a stream's settings starts the target's poller
/// afresh (status windows and trends follow the new settings), but the loss
/// ledgers go on: a loss counted before it stays counted, and the next one
/// adds to it rather than being taken for a baseline.
#[tokio::test]
async fn a_reload_keeps_the_loss_ledgers() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "q", 100);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("q")
        .arg("g")
        .arg("0")
        .arg("ENTRIESREAD")
        .arg(0)
        .query(&mut c)
        .unwrap();
    read_group(&mut c, "q", "g", "c", 10);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    let file = |max_delay: &str| {
        format!(
            // Full series: the baseline is a loss counter at 0.
            "{}{FAST}[[streams]]\nmatch = \"q\"\nmax_delay = \"{max_delay}\"\nseries = \"full\"\n",
            target("a", &server)
        )
    };
    std::fs::write(&path, file("5m")).unwrap();
    let lifecycle = config::CliOverrides {
        enable_lifecycle: true,
        ..Default::default()
    };
    let cfg = config::load(Some(&path), &lifecycle).unwrap();
    let daemon = Daemon::start_with(cfg, lifecycle).await;
    let lost = |m: &Metrics| {
        m.get(
            "redis_streams_group_lost_entries_total",
            &[
                ("target", "a"),
                ("stream", "q"),
                ("group", "g"),
                ("cause", "trimmed"),
            ],
        )
    };
    wait_metrics(&daemon, Duration::from_secs(10), "a baseline", |m| {
        lost(m) == Some(0.0)
    })
    .await;
    // 90 unread; keep the newest 50: 40 lost, seen with the group behind.
    let _: i64 = redis::cmd("XTRIM")
        .arg("q")
        .arg("MAXLEN")
        .arg(50)
        .query(&mut c)
        .unwrap();
    wait_metrics(&daemon, Duration::from_secs(10), "40 lost", |m| {
        lost(m) == Some(40.0)
    })
    .await;
    std::fs::write(&path, file("10m")).unwrap();
    let r = daemon.post("/-/reload").await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    wait_metrics(
        &daemon,
        Duration::from_secs(10),
        "the reload applied",
        |m| {
            m.get("redis_streams_exporter_config_reloads_total", &[]) == Some(1.0)
                && lost(m) == Some(40.0)
        },
    )
    .await;
    let _: i64 = redis::cmd("XTRIM")
        .arg("q")
        .arg("MAXLEN")
        .arg(40)
        .query(&mut c)
        .unwrap();
    let m = wait_metrics(&daemon, Duration::from_secs(10), "50 lost", |m| {
        lost(m).is_some_and(|l| l >= 50.0)
    })
    .await;
    assert_eq!(lost(&m), Some(50.0), "{}", m.text);
    daemon.stop().await;
}
