//! The daemon (`app::run`) in-process on a loopback port, for the tests that
//! exercise it whole over HTTP: one fixture for every test file.
//!
//! It runs on the test's own runtime, so a test that measures the runtime's
//! tasks or the process's memory measures the exporter. Dropped without
//! [`Daemon::stop`], its task is aborted.

use std::time::{Duration, Instant};

use redis_streams_exporter::{app, config};
use tokio::sync::oneshot;

use super::Metrics;

/// The daemon on `127.0.0.1:<free port>`.
pub struct Daemon {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), app::AppError>>>,
}

impl Daemon {
    /// Starts it with this TOML configuration (a bad one fails the test),
    /// every stream read in full series, as `Harness::new` reads them: the
    /// tests tell a 0 from an unknown value. Configurations loaded from a
    /// file ([`Daemon::start_config`]) run as they are.
    pub async fn start(toml: &str) -> Daemon {
        let config = config::from_str("test.toml", toml, &Default::default())
            .unwrap_or_else(|e| panic!("{e}\n{toml}"));
        Daemon::start_config(super::full_series(config)).await
    }

    /// Starts it with a loaded configuration (for one read from a file,
    /// which a reload reads again).
    pub async fn start_config(config: config::Config) -> Daemon {
        Daemon::start_with(config, Default::default()).await
    }

    /// Starts it with a loaded configuration and the command-line settings
    /// that every reload applies again (`--web.enable-lifecycle`, ...).
    pub async fn start_with(config: config::Config, overrides: config::CliOverrides) -> Daemon {
        super::stall::watch();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(app::run(config, overrides, listener, async move {
            let _ = rx.await;
        }));
        // No transparent gzip: tests that want it ask for it and decode.
        let http = reqwest::Client::builder()
            .no_gzip()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        Daemon {
            base,
            http,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// `GET <path>`, whatever the status.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    /// `POST <path>`, whatever the status.
    pub async fn post(&self, path: &str) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    /// `GET /metrics`, parsed.
    pub async fn metrics(&self) -> Metrics {
        Metrics::parse(&self.get("/metrics").await.text().await.unwrap())
    }

    /// One scrape (which must answer 200) and how long it took while the
    /// process was running (a stall of the machine is not the exporter's:
    /// see `stall`).
    pub async fn scrape(&self) -> (Metrics, Duration) {
        let asked = Instant::now();
        let r = self.get("/metrics").await;
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        (Metrics::parse(&text), super::stall::awake_since(asked))
    }

    /// Graceful shutdown: it must exit cleanly within 10 s.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let task = self.task.take().unwrap();
        let result = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("shutdown hung");
        result.unwrap().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Polls `/metrics` until `check` accepts a sample or `limit` passes;
/// returns the accepted sample.
pub async fn wait_metrics(
    d: &Daemon,
    limit: Duration,
    what: &str,
    mut check: impl FnMut(&Metrics) -> bool,
) -> Metrics {
    let deadline = Instant::now() + limit;
    loop {
        let m = d.metrics().await;
        if check(&m) {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen within {limit:?}; last exposition:\n{}",
            m.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
