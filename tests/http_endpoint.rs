//! The daemon in-process on a loopback port: endpoints, gzip, readiness,
//! a target going down and coming back, graceful shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test helpers: a panic is a failed test.

mod common;

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
    // Within one poll (200 ms) plus the timeout, the target is down and its
    // data series are gone; /metrics keeps answering quickly throughout.
    loop {
        let asked = Instant::now();
        let m = d.metrics().await;
        assert!(
            asked.elapsed() < Duration::from_millis(500),
            "/metrics was slow: {:?}",
            asked.elapsed()
        );
        if m.get("redis_streams_exporter_target_up", &[("target", "t")]) == Some(0.0) {
            assert_eq!(
                m.get("redis_streams_stream_length", &ts("orders")),
                None,
                "stale data served while down"
            );
            assert!(m.family("redis_streams_group_lag").is_empty());
            assert!(m.family("redis_streams_target_info").is_empty());
            assert!(
                m.value(
                    "redis_streams_exporter_errors_total",
                    &[("target", "t"), ("kind", "connection")]
                ) >= 1.0
            );
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(3),
            "target_up did not drop"
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
    let state = HttpState::new(store.clone(), config, reload);
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
