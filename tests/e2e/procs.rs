//! Processes of the end-to-end test (killed on drop, output in a log file) and the HTTP calls it
//! makes to them: readiness, an exporter's metrics, Prometheus queries.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

/// A child process with its output in a log file; killed on drop.
pub struct Proc {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn start(name: &str, program: &Path, args: &[String], logs: &Path) -> Proc {
        Proc::spawn(name, Command::new(program).args(args), logs)
    }

    /// Starts `cmd` (its program, arguments and environment set) with its output in
    /// `logs/NAME.log`.
    pub fn spawn(name: &str, cmd: &mut Command, logs: &Path) -> Proc {
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({:?}): {e}", cmd.get_program()));
        Proc {
            name: name.to_string(),
            child,
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Fails the test with the end of the process's log when it has exited.
pub fn assert_alive(procs: &mut [&mut Proc]) {
    for p in procs.iter_mut() {
        if !p.alive() {
            panic!(
                "{} exited unexpectedly; end of {}:\n{}",
                p.name,
                p.log.display(),
                p.tail(40)
            );
        }
    }
}

pub async fn wait_http_ok(http: &reqwest::Client, url: &str, proc: &mut Proc, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(r) = http.get(url).send().await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(
            proc.alive(),
            "{} exited before {url} answered:\n{}",
            proc.name,
            proc.tail(40)
        );
        assert!(
            Instant::now() < deadline,
            "{url} ({}) not ready after {limit:?}:\n{}",
            proc.name,
            proc.tail(40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until an exporter's /metrics has a line starting with `prefix`.
pub async fn wait_metric(http: &reqwest::Client, port: u16, prefix: &str, proc: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = http
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
        {
            if let Ok(text) = r.text().await {
                if text.lines().any(|l| l.starts_with(prefix)) {
                    return;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never reported `{prefix}`:\n{}",
            proc.name,
            proc.tail(40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs an instant query; `Err` with Prometheus's message when it is invalid.
pub async fn query(http: &reqwest::Client, prom: &str, expr: &str) -> Result<Vec<Json>, String> {
    let response = http
        .get(format!("{prom}/api/v1/query"))
        .query(&[("query", expr)])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let bytes = response.bytes().await.map_err(|e| e.to_string())?;
    let body: Json = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    if body["status"] != "success" {
        return Err(format!("{}: {}", body["errorType"], body["error"]));
    }
    Ok(body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

pub async fn has_data(http: &reqwest::Client, prom: &str, expr: &str) -> bool {
    query(http, prom, expr)
        .await
        .is_ok_and(|series| !series.is_empty())
}

/// The string labels of a Prometheus or Alertmanager JSON label object.
pub fn labels_of(value: &Json) -> std::collections::BTreeMap<String, String> {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.as_str() != "__name__")
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}
