//! Issue 6: live reload through POST /-/reload and SIGHUP: a new file is
//! applied without dropping the HTTP server; an invalid one keeps the old
//! configuration and is logged and counted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test helpers: a panic is a failed test.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let cfg = config::load(Some(&path), &Default::default()).unwrap();
    let d = Daemon::start_config(cfg).await;
    let base = d.base.clone();
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
    let r = d.post("/-/reload").await;
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
    assert_eq!(d.get("/metrics").await.status(), 404);

    // An invalid file: rejected with the reason, the old config stays.
    std::fs::write(&path, "[schedule]\nstream = \"never\"\n").unwrap();
    let r = d.post("/-/reload").await;
    assert_eq!(r.status(), 400);
    let reason = r.text().await.unwrap();
    assert!(
        reason.contains("c.toml: schedule.stream: \"never\" is not a duration"),
        "{reason}"
    );
    let text = wait_for(
        &base,
        "/m2",
        "redis_streams_exporter_config_reload_failures_total 1",
    )
    .await;
    assert!(text.contains("redis_streams_exporter_config_last_reload_successful 0\n"));
    assert!(text.contains("redis_streams_exporter_config_reloads_total 2"));
    assert!(
        text.contains("redis_streams_stream_length{target=\"b\",stream=\"sb\"} 2"),
        "old config must stay"
    );

    // Removing a target removes its series.
    std::fs::write(&path, format!("{}{FAST}", target("b", &b))).unwrap();
    let r = d.post("/-/reload").await;
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
        text.contains("redis_streams_exporter_config_reloads_total 3\n"),
        "{text}"
    );
    assert!(
        !text.contains("target=\"a\""),
        "removed target still served:\n{text}"
    );
    assert_eq!(d.get("/-/reload").await.status(), 405);
    d.stop().await;
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
    let port = free_port();
    let log = dir.path().join("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_redis-streams-exporter"))
        .args([
            "--config",
            path.to_str().unwrap(),
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
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
    hup(child.id());
    wait_for(
        &base,
        "/metrics",
        "redis_streams_stream_length{target=\"a\",stream=\"s2\"} 1",
    )
    .await;
    std::fs::write(&path, "not toml at all [").unwrap();
    hup(child.id());
    wait_for(
        &base,
        "/metrics",
        "redis_streams_exporter_config_reload_failures_total 1",
    )
    .await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the daemon must survive an invalid reload"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("configuration reload rejected"), "{logged}");
    // SIGTERM: graceful exit 0.
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no graceful exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
}
