//! The status and the alerts agree: every alert of severity warning or critical about a consumer
//! group (label `scope: group`) in the shipped rules fires, in a scenario played on a real Redis
//! 7.0, while the group's `redis_streams_group_status` is neither `ok` nor `idle`.
//!
//! The alerts are read from `alerts/redis-streams.rules.yml`, so a new group alert without a
//! scenario here fails the test. Each scenario drives Redis (producers, consumers, faults), runs
//! the exporter's probes in-process after each step and captures its exposition text. The captured
//! polls become the input series of a generated `promtool test rules` file, one poll per 1m step
//! (with the `job` and `instance` labels Prometheus adds), the last poll repeated for as long as
//! the alert's `for:` needs; an `alert_rule_test` asserts that the alert fires at that step. The
//! rules promtool loads are the shipped ones with their annotations removed (templated text the
//! test cannot predict; they do not decide whether an alert fires). From the same captured
//! samples the test asserts the group's status at the poll the alert fires on.
//!
//! Short settings (a status window of 3 polls, `consumer_inactive_after` of 1 s, a poison
//! threshold of 3 deliveries) and entries with IDs in the past (an old backlog) stand in for the
//! minutes a production fault takes; the Redis behaviour is real. Rate and slope alerts capture
//! every step they need instead of repeating the last poll (a repeated poll has no rate).
//!
//! The reverse direction, for batch consumers (streams with `read_every`): in scenarios where a
//! consumer reads in runs, none of the lag, backlog and outpacing alerts may fire at a poll whose
//! status is `ok` or `idle`, and they must fire once the status says the run is overdue
//! (`stopped`) or the lag passed `max_delay` (`lagging`), each after its `for:`.

use crate::common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use crate::lean_shape::lean_document;
use common::{Harness, RedisServer, Server, read_group, which, xadd_n};
use redis_streams_exporter::config;
use serde_norway::Value as Yaml;

const RULES: &str = "alerts/redis-streams.rules.yml";
const GROUP: &str = "g";
const SCRAPE_LABELS: &str = r#"job="redis-streams-exporter",instance="exporter:9763""#;

/// One scenario's stream on the shared server, its exporter and what it captured.
struct Capture {
    stream: String,
    harness: Harness,
    conn: redis::Connection,
    polls: Vec<String>,
}

impl Capture {
    /// `settings` go into the stream's `[[streams]]` rule; `top` is more configuration.
    fn new(server: &RedisServer, stream: &str, settings: &str, top: &str) -> Capture {
        let text = format!(
            "[[targets]]\nname = \"t\"\nurl = \"{url}\"\nstreams = [\"{stream}\"]\n\n\
             [status]\nwindow = 3\n\n{top}\n\n[[streams]]\nmatch = \"{stream}\"\n{settings}\n",
            url = server.url(),
        );
        let config = config::from_str("agree.toml", &text, &Default::default())
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        Capture {
            stream: stream.to_string(),
            harness: Harness::new(config),
            conn: server.conn(),
            polls: Vec::new(),
        }
    }

    fn cmd(&mut self, args: &[&str]) -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut self.conn)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    fn create_group(&mut self) {
        let stream = self.stream.clone();
        self.cmd(&["XGROUP", "CREATE", &stream, GROUP, "0", "MKSTREAM"]);
    }

    fn add(&mut self, n: usize) -> Vec<String> {
        let stream = self.stream.clone();
        xadd_n(&mut self.conn, &stream, n)
    }

    /// One entry whose ID's time part is `ago_ms` before the server's clock (`<ms>-*`, Redis 7.0+:
    /// the sequence is Redis's, so two entries in the same millisecond are fine).
    fn add_aged(&mut self, ago_ms: u64) {
        let now = common::server_ms(&mut self.conn);
        let stream = self.stream.clone();
        let id = format!("{}-*", now - ago_ms);
        self.cmd(&["XADD", &stream, &id, "n", "1"]);
    }

    /// Entries with explicit IDs, `ms` apart, starting `ago_ms` before the server's clock.
    fn add_past(&mut self, n: u64, ago_ms: u64, every_ms: u64) -> Vec<String> {
        let now = common::server_ms(&mut self.conn);
        let stream = self.stream.clone();
        (0..n)
            .map(|i| {
                let id = format!("{}-1", now - ago_ms + i * every_ms);
                self.cmd(&["XADD", &stream, &id, "n", "1"]);
                id
            })
            .collect()
    }

    fn read(&mut self, consumer: &str, count: usize) -> Vec<String> {
        let stream = self.stream.clone();
        read_group(&mut self.conn, &stream, GROUP, consumer, count)
    }

    fn ack(&mut self, ids: &[String]) {
        let stream = self.stream.clone();
        for id in ids {
            self.cmd(&["XACK", &stream, GROUP, id]);
        }
    }

    /// Every probe once, then the exposition as Prometheus would scrape it.
    async fn poll(&mut self) {
        self.harness.collect().await;
        self.polls.push(self.harness.text());
    }

    /// The group's status at poll `i`.
    fn status(&self, i: usize) -> String {
        let prefix = "redis_streams_group_status{";
        let needle = format!("stream=\"{}\",group=\"{GROUP}\"", self.stream);
        for line in self.polls[i].lines() {
            if line.starts_with(prefix) && line.contains(&needle) && line.ends_with(" 1") {
                let (_, rest) = line.split_once("status=\"").unwrap();
                return rest.split('"').next().unwrap().to_string();
            }
        }
        panic!("no status for {needle} in poll {i}:\n{}", self.polls[i]);
    }
}

/// What a scenario hands to promtool: its captured polls, how many 1m steps the last one is
/// repeated, and the labels of the alert beyond the group's identity and the rule's own.
struct Played {
    capture: Capture,
    hold: usize,
    extra_labels: Vec<(&'static str, &'static str)>,
    /// Series (by metric name) whose captured values are replaced by a synthetic constant, for
    /// what a test cannot produce on a real server (each use says why).
    synthetic: Option<(&'static str, &'static str)>,
}

fn played(capture: Capture, hold: usize) -> Played {
    Played {
        capture,
        hold,
        extra_labels: Vec::new(),
        synthetic: None,
    }
}

// ------------------------------------------------------------------------------------------------
// Scenarios

/// An old backlog (entries produced 700 s to 600 s ago) read one entry a poll while one new entry
/// arrives per poll: the group advances, its lag count does not shrink, and its oldest undelivered
/// entry is older than max_delay (10 minutes).
async fn old_backlog(server: &RedisServer, stream: &str, hold: usize) -> Played {
    let mut c = Capture::new(server, stream, "max_delay = \"10m\"", "");
    c.create_group();
    c.add_past(100, 700_000, 1_000);
    for _ in 0..5 {
        let read = c.read("c1", 1);
        c.ack(&read);
        c.add(1);
        c.poll().await;
    }
    played(c, hold)
}

/// A consumer reads entries that were produced 400 s ago and never acknowledges them.
async fn old_pending(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "", "");
    c.create_group();
    c.add_past(5, 400_000, 1_000);
    c.read("c1", 5);
    for _ in 0..4 {
        c.poll().await;
    }
    played(c, 6)
}

/// A consumer reads two new entries a poll and acknowledges none: the PEL grows and its oldest
/// entry ages. Every step is captured (slopes over 15 minutes, 30 minutes of `for:`).
async fn pending_growing(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "", "");
    c.create_group();
    for _ in 0..36 {
        c.add(2);
        c.read("c1", 2);
        tokio::time::sleep(Duration::from_millis(20)).await;
        c.poll().await;
    }
    played(c, 0)
}

/// Production of 10 entries a poll, consumption of 5: the lag grows by 5 a poll. Every step is
/// captured (rates over 15 minutes, 30 minutes of `for:`).
async fn outpacing(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "", "");
    c.create_group();
    // The alert compares rate() of entries-added with deriv() of the entries-read gauge over
    // 15 minutes, for 30: it first fires at 38 minutes of steady outpacing.
    for _ in 0..45 {
        c.add(10);
        let read = c.read("c1", 5);
        c.ack(&read);
        c.poll().await;
    }
    played(c, 0)
}

/// A consumer reads entries, acknowledges none and reads nothing more while entries wait.
async fn stalled(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "", "");
    c.create_group();
    c.add(5);
    c.read("c1", 2);
    for _ in 0..4 {
        c.poll().await;
    }
    let mut p = played(c, 11);
    p.extra_labels.push(("status", "stalled"));
    p
}

/// Entries wait and the group has no consumer.
async fn stopped(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "", "");
    c.create_group();
    c.add(5);
    for _ in 0..4 {
        c.poll().await;
    }
    let mut p = played(c, 3);
    p.extra_labels.push(("status", "stopped"));
    p
}

/// A consumer reads three entries and goes away (consumer_inactive_after 1 s) while another
/// keeps reading and acknowledging.
async fn orphaned(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "consumer_inactive_after = \"1s\"", "");
    c.create_group();
    c.add(3);
    c.read("dead", 3);
    c.poll().await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for _ in 0..3 {
        c.add(2);
        let read = c.read("alive", 2);
        c.ack(&read);
        c.poll().await;
    }
    played(c, 3)
}

/// One entry is claimed back and retried until its delivery count reaches the poison threshold
/// (3); the consumer acknowledges everything else.
async fn poison(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "poison_delivery_count = 3", "");
    c.create_group();
    c.add(1);
    let bad = c.read("c1", 1);
    c.poll().await;
    let s = c.stream.clone();
    for _ in 0..2 {
        c.cmd(&["XCLAIM", &s, GROUP, "c1", "0", &bad[0]]);
    }
    for _ in 0..3 {
        c.add(2);
        let read = c.read("c1", 2);
        c.ack(&read);
        c.poll().await;
    }
    played(c, 3)
}

/// A delivered, unacknowledged entry is deleted (XDEL): its PEL entry has no body any more.
async fn ghost(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "", "");
    c.create_group();
    c.add(3);
    let read = c.read("c1", 3);
    c.poll().await;
    let s = c.stream.clone();
    c.cmd(&["XDEL", &s, &read[1]]);
    for _ in 0..3 {
        c.add(2);
        let more = c.read("c1", 2);
        c.ack(&more);
        c.poll().await;
    }
    played(c, 3)
}

/// Entries the group has not read are removed (trimmed, or deleted with XDEL) and the consumer
/// reads past the gap before the next poll.
async fn lost(server: &RedisServer, stream: &str, trim: bool) -> Played {
    let mut c = Capture::new(server, stream, "", "");
    c.create_group();
    c.add(5);
    let read = c.read("c1", 5);
    c.ack(&read);
    c.poll().await;
    c.poll().await;
    let ids = c.add(20);
    let s = c.stream.clone();
    if trim {
        c.cmd(&["XTRIM", &s, "MAXLEN", "5"]);
    } else {
        c.cmd(&["XDEL", &s, &ids[3], &ids[4], &ids[5]]);
        // A poll sees the gap before the group reads past it. (Deleted and read past between
        // two polls, on Redis 7.0, the loss is not counted: reported, not covered here.)
        c.poll().await;
    }
    let read = c.read("c1", 100);
    c.ack(&read);
    c.poll().await;
    let mut p = played(c, 0);
    p.extra_labels
        .push(("cause", if trim { "trimmed" } else { "deleted" }));
    p
}

/// A stream holding an hour of ID time, trimmed from the front by 2 minutes of ID time a poll,
/// while the group, 45 minutes behind, reads 1 minute of it a poll: trimming closes in.
async fn trim_closing_in(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "", "");
    c.create_group();
    let ids = c.add_past(360, 3_600_000, 10_000);
    let s = c.stream.clone();
    let first_ms = common::id_ms(&ids[0]);
    let read = c.read("c1", 90);
    c.ack(&read);
    for i in 1..=8u64 {
        let read = c.read("c1", 6);
        c.ack(&read);
        let min = format!("{}-0", first_ms + i * 120_000);
        c.cmd(&["XTRIM", &s, "MINID", &min]);
        c.poll().await;
    }
    played(c, 6)
}

/// A stream holding an hour of ID time (max_delay 1 hour) is trimmed, and the group holds 10
/// minutes from the trimming edge: trimming and reading move at the same pace for a few polls,
/// then both pause. The margin stays under max_delay and does not shrink.
async fn margin_low(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "max_delay = \"1h\"", "");
    c.create_group();
    let ids = c.add_past(360, 3_600_000, 10_000);
    let s = c.stream.clone();
    let first_ms = common::id_ms(&ids[0]);
    let read = c.read("c1", 60);
    c.ack(&read);
    c.poll().await;
    for i in 1..=4u64 {
        let read = c.read("c1", 6);
        c.ack(&read);
        let min = format!("{}-0", first_ms + i * 60_000);
        c.cmd(&["XTRIM", &s, "MINID", &min]);
        c.poll().await;
    }
    for _ in 0..4 {
        c.poll().await;
    }
    played(c, 16)
}

/// A group with pending entries whose PEL scan last completed long ago. SYNTHETIC for the scan's
/// timestamp only: the alert compares it with the time Prometheus scraped it (`timestamp()`),
/// which in promtool is the test's own clock starting at 0, not the wall clock the exporter
/// writes; and the in-process harness runs each scan to its end, so a pass that never completes
/// (its other branch) would take the whole scan's time at the rate limit. The scan timestamp is
/// therefore set to 0 (a scan at the start of the test's clock that never completes again); every
/// other series, the status among them, is captured from the real scenario: a consumer holds
/// entries it never acknowledges.
async fn scan_stale(server: &RedisServer, stream: &str) -> Played {
    let mut c = Capture::new(server, stream, "", "");
    c.create_group();
    c.add(5);
    c.read("c1", 5);
    for _ in 0..4 {
        c.poll().await;
    }
    let mut p = played(c, 32);
    p.synthetic = Some(("redis_streams_group_pending_scan_timestamp_seconds", "0"));
    p
}

async fn play(alert: &str, server: &RedisServer) -> Option<Played> {
    let stream = format!("agree:{alert}");
    let stream = stream.as_str();
    Some(match alert {
        "RedisStreamsLagSecondsHigh" => old_backlog(server, stream, 6).await,
        "RedisStreamsLagSecondsCritical" => old_backlog(server, stream, 6).await,
        "RedisStreamsBacklogNotDraining" => old_backlog(server, stream, 16).await,
        "RedisStreamsProductionOutpacingConsumption" => outpacing(server, stream).await,
        "RedisStreamsGroupStalled" => stalled(server, stream).await,
        "RedisStreamsGroupStopped" => stopped(server, stream).await,
        "RedisStreamsOldestPendingTooOld" => old_pending(server, stream).await,
        "RedisStreamsPendingGrowing" => pending_growing(server, stream).await,
        "RedisStreamsOrphanedPending" => orphaned(server, stream).await,
        "RedisStreamsPoisonEntries" => poison(server, stream).await,
        "RedisStreamsGhostEntries" => ghost(server, stream).await,
        "RedisStreamsTrimmedUndelivered" => lost(server, stream, true).await,
        "RedisStreamsDeletedUndelivered" => lost(server, stream, false).await,
        "RedisStreamsTrimOvertakingGroup" => trim_closing_in(server, stream).await,
        "RedisStreamsRetentionMarginLow" => margin_low(server, stream).await,
        "RedisStreamsPendingScanStale" => scan_stale(server, stream).await,
        _ => return None,
    })
}

// ------------------------------------------------------------------------------------------------
// promtool

/// The shipped rules' group alerts of severity warning or critical: (name, labels).
fn group_alerts(rules: &Yaml) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let Some(name) = rule["alert"].as_str() else {
                continue;
            };
            let labels: BTreeMap<String, String> = rule["labels"]
                .as_mapping()
                .unwrap()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().unwrap().to_string(),
                        v.as_str().unwrap().to_string(),
                    )
                })
                .collect();
            let paging = matches!(labels["severity"].as_str(), "warning" | "critical");
            if labels.get("scope").map(String::as_str) == Some("group") && paging {
                out.push((name.to_string(), labels));
            }
        }
    }
    out
}

/// The rules without their annotations.
fn without_annotations(rules: &Yaml) -> String {
    let mut doc = rules.clone();
    for group in doc["groups"].as_sequence_mut().unwrap() {
        for rule in group["rules"].as_sequence_mut().unwrap() {
            rule.as_mapping_mut().unwrap().remove("annotations");
        }
    }
    serde_norway::to_string(&doc).unwrap()
}

/// An exposition line's series with the scrape labels added.
fn scraped_series(series: &str) -> String {
    match series.split_once('{') {
        Some((name, rest)) => format!("{name}{{{SCRAPE_LABELS},{rest}"),
        None => format!("{series}{{{SCRAPE_LABELS}}}"),
    }
}

/// The head of a promtool test: its name and every captured series, one poll a minute, the last
/// poll repeated `hold` more steps; `synthetic` replaces one metric's captured values. A series
/// missing from a poll after one that had it is `stale` there, as Prometheus marks a series that
/// leaves a scrape (the group status, whose labels change with it, among them), then `_`.
fn promtool_input(
    name: &str,
    polls: &[String],
    hold: usize,
    synthetic: Option<(&str, &str)>,
) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut values: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
    for (i, text) in polls.iter().enumerate() {
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let (series, mut value) = line.rsplit_once(' ').unwrap();
            if let Some((metric, constant)) = synthetic {
                if series.starts_with(&format!("{metric}{{")) {
                    value = constant;
                }
            }
            let entry = values.entry(series.to_string()).or_insert_with(|| {
                order.push(series.to_string());
                vec![None; polls.len()]
            });
            entry[i] = Some(value.to_string());
        }
    }
    let mut out = String::new();
    let kind = match synthetic {
        Some((metric, _)) => format!(" (synthetic {metric})"),
        None => String::new(),
    };
    writeln!(
        out,
        "  - name: {name}{kind}\n    interval: 1m\n    input_series:"
    )
    .unwrap();
    for series in &order {
        let steps = &values[series];
        let mut all: Vec<&str> = steps
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Some(v) => v.as_str(),
                None if i > 0 && steps[i - 1].is_some() => "stale",
                None => "_",
            })
            .collect();
        let last = steps.last().unwrap().as_deref().unwrap_or("_");
        all.extend(std::iter::repeat_n(last, hold));
        writeln!(
            out,
            "      - series: '{}'\n        values: '{}'",
            scraped_series(series),
            all.join(" ")
        )
        .unwrap();
    }
    out
}

/// The labels an alert about the scenario's group fires with, as a promtool `exp_labels` map.
fn exp_labels(
    rule_labels: &BTreeMap<String, String>,
    stream: &str,
    extra: &[(&str, &str)],
) -> String {
    let mut labels: BTreeMap<String, String> = rule_labels.clone();
    for (k, v) in [
        ("job", "redis-streams-exporter"),
        ("instance", "exporter:9763"),
        ("target", "t"),
        ("stream", stream),
        ("group", GROUP),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    {
        labels.insert(k.to_string(), v.to_string());
    }
    let labels: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}: \"{v}\""))
        .collect();
    format!("{{{}}}", labels.join(", "))
}

/// The promtool test of one alert: every captured series, one poll a minute, the last poll held.
fn promtool_test(alert: &str, rule_labels: &BTreeMap<String, String>, p: &Played) -> String {
    let polls = &p.capture.polls;
    let mut out = promtool_input(alert, polls, p.hold, p.synthetic);
    let eval = polls.len() - 1 + p.hold;
    writeln!(
        out,
        "    alert_rule_test:\n      - eval_time: {eval}m\n        alertname: {alert}\n        \
         exp_alerts:\n          - exp_labels: {}",
        exp_labels(rule_labels, &p.capture.stream, &p.extra_labels)
    )
    .unwrap();
    out
}

/// Runs `promtool test rules` on `tests` (with the rules beside it as `rules.yml`), captured in
/// full series, then on their lean shape (`lean_shape`, the exporter's default): the alerts must
/// agree in both. On failure the file is kept in the temporary directory under `keep` (with
/// `lean.` before it for the lean shape) and the test fails with promtool's output.
fn run_promtool(dir: &std::path::Path, tests: &str, keep: &str, report: &str) {
    let mut doc: Yaml = serde_norway::from_str(tests).unwrap();
    lean_document(&mut doc).unwrap();
    let lean = serde_norway::to_string(&doc).unwrap();
    for (shape, text, keep) in [
        ("full", tests, keep.to_string()),
        ("lean", lean.as_str(), format!("lean.{keep}")),
    ] {
        let file = dir.join("agree.test.yml");
        std::fs::write(&file, text).unwrap();
        let out = Command::new(which("promtool"))
            .args(["test", "rules"])
            .arg(&file)
            .output()
            .unwrap();
        if !out.status.success() {
            let kept = std::env::temp_dir().join(keep);
            std::fs::write(&kept, text).unwrap();
            panic!(
                "promtool test rules failed on {shape} series (file kept at {}):\n{}{}\n{report}",
                kept.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Every warning or critical alert about a group fires in a real scenario while the group's
/// status is neither `ok` nor `idle`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_group_alert_fires_with_a_status_that_is_not_ok() {
    let rules: Yaml = serde_norway::from_str(&std::fs::read_to_string(RULES).unwrap()).unwrap();
    let alerts = group_alerts(&rules);
    assert!(alerts.len() >= 15, "only {} group alerts", alerts.len());
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yml"), without_annotations(&rules)).unwrap();
    let mut tests = String::from("rule_files:\n  - rules.yml\nevaluation_interval: 1m\ntests:\n");
    let mut missing = Vec::new();
    let mut agreement = Vec::new();
    for (alert, labels) in &alerts {
        let Some(p) = play(alert, &server).await else {
            missing.push(alert.clone());
            continue;
        };
        let status = p.capture.status(p.capture.polls.len() - 1);
        agreement.push((alert.clone(), status));
        tests.push_str(&promtool_test(alert, labels, &p));
    }
    assert!(
        missing.is_empty(),
        "group alerts without a scenario: {missing:?}"
    );
    let report: Vec<String> = agreement
        .iter()
        .map(|(a, s)| format!("{a}: status {s}"))
        .collect();
    println!("{}", report.join("\n"));
    run_promtool(dir.path(), &tests, "alerts_agree.test.yml", "");
    let disagree: Vec<&String> = agreement
        .iter()
        .filter(|(_, s)| s == "ok" || s == "idle")
        .map(|(a, _)| a)
        .collect();
    assert!(
        disagree.is_empty(),
        "alerts firing while the group's status is ok or idle: {disagree:?}\n{}",
        report.join("\n")
    );
}

// ------------------------------------------------------------------------------------------------
// Batch consumers: the reverse direction

/// The alerts about how far behind a group is (lag, backlog, outpacing). For a group of a stream
/// with `read_every` none may fire at a poll whose status is `ok` or `idle`, and each fires once
/// the status says the run is late.
const LAG_ALERTS: [&str; 5] = [
    "RedisStreamsLagSecondsHigh",
    "RedisStreamsLagSecondsCritical",
    "RedisStreamsBacklogNotDraining",
    "RedisStreamsProductionOutpacingConsumption",
    "RedisStreamsProductionOutpacingConsumptionEstimated",
];

/// The series that say how far behind a group is or how fast it reads: an alert reading one of
/// them is in `LAG_ALERTS`, or below with the reason it is not.
const LAG_METRICS: [&str; 4] = [
    "redis_streams_group_lag_seconds",
    "redis_streams_group_lag",
    "redis_streams_group_entries_read",
    "redis_streams_group_drain_eta_seconds",
];

/// Alerts that read the lag and are not about the group's delay, and why.
const LAG_READERS_ELSEWHERE: [(&str, &str); 1] = [(
    "RedisStreamsTrimOvertakingGroup",
    "trimming about to take entries a group has not read loses them whatever the group's rhythm; \
     its lag only tells a group that keeps up from one about to be overtaken",
)];

/// Whether `expr` reads `metric` (the name, not a longer name it begins).
fn reads_metric(expr: &str, metric: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    expr.match_indices(metric).any(|(i, _)| {
        !ident(expr[..i].chars().next_back()) && !ident(expr[i + metric.len()..].chars().next())
    })
}

/// Minutes of a rule's `for:` (whole minutes or hours, as the rules write it); 0 without one.
fn for_minutes(rule: &Yaml) -> usize {
    let Some(text) = rule["for"].as_str() else {
        return 0;
    };
    let (number, unit) = text.split_at(text.len() - 1);
    let n: usize = number.parse().unwrap_or_else(|_| panic!("for: {text}"));
    match unit {
        "m" => n,
        "h" => 60 * n,
        _ => panic!("for: {text} is not in whole minutes"),
    }
}

/// The shipped rule of `alert`.
fn rule_of<'a>(rules: &'a Yaml, alert: &str) -> &'a Yaml {
    rules["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .find(|r| r["alert"].as_str() == Some(alert))
        .unwrap_or_else(|| panic!("{alert} is not in {RULES}"))
}

fn rule_labels(rule: &Yaml) -> BTreeMap<String, String> {
    rule["labels"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().unwrap().to_string(),
                v.as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A batch scenario: what it captured, and the alerts that must fire once its status says the run
/// is late (each at the first such poll plus its `for:`).
struct Batch {
    capture: Capture,
    fires: Vec<&'static str>,
}

impl Batch {
    fn statuses(&self) -> Vec<String> {
        (0..self.capture.polls.len())
            .map(|i| self.capture.status(i))
            .collect()
    }
}

fn quiet(status: &str) -> bool {
    status == "ok" || status == "idle"
}

/// A batch scenario that fires nothing: ok (or idle) at every captured poll.
fn quiet_batch(capture: Capture, what: &str) -> Batch {
    let b = Batch {
        capture,
        fires: Vec::new(),
    };
    let statuses = b.statuses();
    assert!(
        statuses.iter().all(|s| quiet(s)),
        "{what}: {}",
        runs(&statuses)
    );
    b
}

/// Statuses in runs: `ok×7 lagging×3`.
fn runs(statuses: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < statuses.len() {
        let n = statuses[i..]
            .iter()
            .take_while(|s| **s == statuses[i])
            .count();
        out.push(format!("{}×{n}", statuses[i]));
        i += n;
    }
    out.join(" ")
}

const MINUTE: u64 = 60_000;

/// A batch consumer (read_every 30m, no max_delay) run after run: each run takes everything
/// waiting, and between two runs the oldest entry waits 27 minutes (entries produced since the
/// last run, their IDs 27 minutes in the past, stand in for the half hour). Ok at every poll, and
/// no lag alert may fire: the default 600 s would page at every cycle.
async fn batch_in_rhythm(server: &RedisServer, stream: &str) -> Batch {
    let mut c = Capture::new(server, stream, "read_every = \"30m\"", "");
    c.create_group();
    c.add_aged(40 * MINUTE);
    let read = c.read("batch", 100);
    c.ack(&read);
    for _ in 0..3 {
        for _ in 0..7 {
            c.add_aged(27 * MINUTE);
            c.poll().await;
        }
        let read = c.read("batch", 1_000);
        c.ack(&read);
        c.poll().await;
    }
    quiet_batch(c, "a batch consumer between runs")
}

/// A batch consumer without read_every: the exporter learns its rhythm over four runs (not
/// captured), then judges it as with read_every at twice its cadence. Its runs, every ~1 s of
/// real time here (each entry's ID 27 minutes in the past stands in for the wait), keep it ok at
/// every captured poll, and no lag alert may fire (the default 600 s would page every cycle).
async fn batch_learned_in_rhythm(server: &RedisServer, stream: &str) -> Batch {
    let mut c = Capture::new(server, stream, "", "[schedule]\nstream = \"100ms\"");
    c.create_group();
    c.add_aged(40 * MINUTE);
    let read = c.read("batch", 100);
    c.ack(&read);
    let cycle = async |c: &mut Capture| {
        for _ in 0..6 {
            c.add_aged(27 * MINUTE);
            c.poll().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let read = c.read("batch", 1_000);
        c.ack(&read);
        c.poll().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for _ in 0..4 {
        cycle(&mut c).await;
    }
    c.polls.clear();
    for _ in 0..3 {
        cycle(&mut c).await;
    }
    let learned = format!(
        "redis_streams_group_read_every_seconds{{target=\"t\",stream=\"{stream}\",group=\"{GROUP}\"}}"
    );
    assert!(
        c.polls.iter().all(|p| p.contains(&learned)),
        "the learned read_every is exported at every captured poll:\n{}",
        c.polls[0]
    );
    quiet_batch(c, "a learned batch consumer between runs")
}

/// A batch consumer (read_every 30m, no max_delay) whose runs come on time but take two entries
/// each: the oldest entry left is 54 minutes old, beyond read_every + 600 s. The status, which
/// sees the runs, says ok (only a max_delay would make it lagging), so no lag alert may fire.
async fn batch_leaves_backlog(server: &RedisServer, stream: &str) -> Batch {
    let mut c = Capture::new(server, stream, "read_every = \"30m\"", "");
    c.create_group();
    c.add_past(20, 55 * MINUTE, 15_000);
    for _ in 0..2 {
        let read = c.read("batch", 2);
        c.ack(&read);
        for _ in 0..7 {
            c.add(1);
            c.poll().await;
        }
    }
    let b = Batch {
        capture: c,
        fires: Vec::new(),
    };
    let statuses = b.statuses();
    assert!(
        statuses.iter().all(|s| s == "ok"),
        "runs on time that leave a backlog, no max_delay: {}",
        runs(&statuses)
    );
    b
}

/// A batch consumer (read_every 2s; the status window is 3 polls of 100 ms) whose next run does
/// not come. What waits since its last run is 12 minutes old (an ID in the past), more than
/// read_every + 600 s, and production goes on (an entry a poll, every step captured: the
/// outpacing alert needs rates). Ok while the run is not due; stopped once read_every and the
/// window have passed without a read; then every lag alert fires after its `for:`.
async fn batch_overdue(server: &RedisServer, stream: &str) -> Batch {
    let mut c = Capture::new(
        server,
        stream,
        "read_every = \"2s\"",
        "[schedule]\nstream = \"100ms\"",
    );
    c.create_group();
    c.add_past(5, 60 * MINUTE, 1_000);
    let read = c.read("batch", 100);
    c.ack(&read);
    c.add_aged(12 * MINUTE);
    for _ in 0..2 {
        c.add(1);
        c.poll().await;
    }
    // read_every (2 s) + the window (0.3 s) without a read: overdue.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    for _ in 0..36 {
        c.add(1);
        c.poll().await;
    }
    let b = Batch {
        capture: c,
        fires: vec![
            "RedisStreamsLagSecondsHigh",
            "RedisStreamsLagSecondsCritical",
            "RedisStreamsBacklogNotDraining",
            "RedisStreamsProductionOutpacingConsumption",
        ],
    };
    let statuses = b.statuses();
    assert_eq!(
        statuses[0],
        "ok",
        "before the run is due: {}",
        runs(&statuses)
    );
    assert!(
        statuses[2..].iter().all(|s| s == "stopped"),
        "once the run is overdue: {}",
        runs(&statuses)
    );
    b
}

/// A batch consumer (read_every 30m, max_delay 10m). A first backlog waits 15 minutes for its run
/// (IDs in the past): beyond max_delay the status says lagging between runs too, and the lag
/// warning, the page and the backlog ticket fire after their `for:` (its count only grows until
/// the run). The run takes everything; the next backlog waits 7 minutes, beyond half of
/// max_delay (the warning of a stream read all the time) but not max_delay: ok, nothing fires.
async fn batch_past_max_delay(server: &RedisServer, stream: &str) -> Batch {
    let mut c = Capture::new(
        server,
        stream,
        "read_every = \"30m\"\nmax_delay = \"10m\"",
        "",
    );
    c.create_group();
    c.add_aged(40 * MINUTE);
    let read = c.read("batch", 100);
    c.ack(&read);
    for _ in 0..17 {
        c.add_aged(15 * MINUTE);
        c.poll().await;
    }
    let read = c.read("batch", 1_000);
    c.ack(&read);
    c.poll().await;
    for _ in 0..7 {
        c.add_aged(7 * MINUTE);
        c.poll().await;
    }
    let b = Batch {
        capture: c,
        fires: vec![
            "RedisStreamsLagSecondsHigh",
            "RedisStreamsLagSecondsCritical",
            "RedisStreamsBacklogNotDraining",
        ],
    };
    let statuses = b.statuses();
    assert!(
        statuses[..17].iter().all(|s| s == "lagging") && statuses[17..].iter().all(|s| quiet(s)),
        "past max_delay, then under it: {}",
        runs(&statuses)
    );
    b
}

/// The promtool test of a batch scenario: no lag alert at a poll whose status is ok or idle; each
/// alert of `fires` quiet one step before, and firing at, the first late poll plus its `for:`.
/// Returns the test and a line per fact checked.
fn batch_test(name: &str, rules: &Yaml, b: &Batch) -> (String, Vec<String>) {
    let statuses = b.statuses();
    let mut out = promtool_input(name, &b.capture.polls, 0, None);
    let mut report = vec![format!("{name}: {}", runs(&statuses))];
    // (step, alert) -> fires.
    let mut cases: BTreeMap<(usize, &str), bool> = BTreeMap::new();
    for (step, status) in statuses.iter().enumerate() {
        if quiet(status) {
            for alert in LAG_ALERTS {
                cases.insert((step, alert), false);
            }
        }
    }
    if !b.fires.is_empty() {
        let late = statuses
            .iter()
            .position(|s| !quiet(s))
            .unwrap_or_else(|| panic!("{name}: no late poll: {}", runs(&statuses)));
        for &alert in &b.fires {
            let at = late + for_minutes(rule_of(rules, alert));
            assert!(
                at < statuses.len(),
                "{name}: {alert} would fire at {at}m, after the last poll"
            );
            assert!(
                !quiet(&statuses[at]),
                "{name}: {alert} fires at {at}m while the status is {}",
                statuses[at]
            );
            if at > 0 {
                let before = cases.entry((at - 1, alert)).or_insert(false);
                assert!(
                    !*before,
                    "{name}: {alert} expected both ways at {}m",
                    at - 1
                );
            }
            cases.insert((at, alert), true);
            report.push(format!(
                "{name}: {alert} quiet at {}m, fires at {at}m (status {})",
                at.saturating_sub(1),
                statuses[at]
            ));
        }
    }
    let silent: Vec<&str> = LAG_ALERTS
        .iter()
        .copied()
        .filter(|a| !b.fires.contains(a))
        .collect();
    let ok_steps = statuses.iter().filter(|s| quiet(s)).count();
    report.push(format!(
        "{name}: no lag alert at the {ok_steps} polls whose status is ok or idle; not expected at the late polls either: {silent:?}"
    ));
    writeln!(out, "    alert_rule_test:").unwrap();
    for ((step, alert), fires) in &cases {
        let expected = if *fires {
            let labels = rule_labels(rule_of(rules, alert));
            format!(
                "\n          - exp_labels: {}",
                exp_labels(&labels, &b.capture.stream, &[])
            )
        } else {
            " []".to_string()
        };
        writeln!(
            out,
            "      - eval_time: {step}m\n        alertname: {alert}\n        exp_alerts:{expected}"
        )
        .unwrap();
    }
    (out, report)
}

/// Batch consumers (`read_every`): the lag, backlog and outpacing alerts are silent at every poll
/// whose status is ok (between two runs, however old the waiting entries), and fire once the
/// status says the run is late: overdue (`stopped`) or past `max_delay` (`lagging`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_lag_alerts_fire_only_when_the_status_says_the_run_is_late() {
    let rules: Yaml = serde_norway::from_str(&std::fs::read_to_string(RULES).unwrap()).unwrap();
    // Every alert on a group's lag is covered here, and each knows about read_every.
    let mut uncovered = Vec::new();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let Some(name) = rule["alert"].as_str() else {
                continue;
            };
            let expr = rule["expr"].as_str().unwrap();
            let listed = LAG_ALERTS.contains(&name);
            if listed && !reads_metric(expr, "redis_streams_group_read_every_seconds") {
                uncovered.push(format!("{name}: ignores read_every"));
            }
            let reads_lag = LAG_METRICS.iter().any(|m| reads_metric(expr, m));
            let elsewhere = LAG_READERS_ELSEWHERE.iter().any(|(a, _)| *a == name);
            if reads_lag && !listed && !elsewhere {
                uncovered.push(format!(
                    "{name}: reads a group's lag but is not in LAG_ALERTS (nor explained in LAG_READERS_ELSEWHERE)"
                ));
            }
        }
    }
    assert!(uncovered.is_empty(), "{}", uncovered.join("\n"));
    for alert in LAG_ALERTS {
        rule_of(&rules, alert);
    }

    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yml"), without_annotations(&rules)).unwrap();
    let scenarios = [
        (
            "batch in rhythm",
            batch_in_rhythm(&server, "batch:rhythm").await,
        ),
        (
            "batch learned, in rhythm",
            batch_learned_in_rhythm(&server, "batch:learned").await,
        ),
        (
            "batch runs that leave a backlog",
            batch_leaves_backlog(&server, "batch:leftover").await,
        ),
        (
            "batch run overdue",
            batch_overdue(&server, "batch:overdue").await,
        ),
        (
            "batch past max_delay",
            batch_past_max_delay(&server, "batch:max_delay").await,
        ),
    ];
    let mut tests = String::from("rule_files:\n  - rules.yml\nevaluation_interval: 1m\ntests:\n");
    let mut report = Vec::new();
    for (name, b) in &scenarios {
        let (test, lines) = batch_test(name, &rules, b);
        tests.push_str(&test);
        report.extend(lines);
    }
    let report = report.join("\n");
    println!("{report}");
    run_promtool(dir.path(), &tests, "alerts_agree_batch.test.yml", &report);
}
