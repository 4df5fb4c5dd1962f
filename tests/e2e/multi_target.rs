//! Multi-target end to end: a real Prometheus (Debian package `prometheus`)
//! finds two real Redis servers through `file_sd`, relabels them the standard multi-target way
//! (`__address__` → `__param_target`, `instance` from the target, `__address__` → an exporter),
//! and spreads them over two exporter replicas (the real binary, twice) with `hashmod` on the
//! target URL:
//!
//! ```text
//!   targets.json (file_sd) ─▶ Prometheus ── hashmod(target) = 0 ─▶ exporter replica 0 ─▶ Redis A
//!                                        └─ hashmod(target) = 1 ─▶ exporter replica 1 ─▶ Redis B
//! ```
//!
//! The servers require a password, which comes from the exporters' `[auth_modules.fleet]` (the
//! URLs carry none). The ports of the servers are chosen so that the two URLs fall in different
//! shards (Prometheus's `hashmod`: the last 8 bytes of the URL's MD5, big-endian, modulo 2,
//! computed here with `md5sum`). The test checks, through Prometheus's own API and the servers:
//!
//! 1. every stream of each server is in Prometheus exactly once (one series per `instance` and
//!    `stream`, across every job), under the `instance` of its server, and its groups too;
//! 2. each target was scraped from the replica of its shard (`/api/v1/targets`);
//! 3. each replica polls only its shard's server: one probed target each (its own
//!    `redis_streams_exporter_probed_targets`, scraped by Prometheus), its TCP connections go to
//!    that server only (`/proc/<pid>/fd` and `/proc/net/tcp`), and each server has exactly one
//!    exporter connection (`CLIENT LIST`).
//!
//! It prints the counts per replica and per server. Missing binaries fail the test.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::procs::{Proc, assert_alive};
use common::{RedisServer, Server, free_port, which};
use serde_json::Value as Json;

const PASSWORD: &str = "e2e-fleet-secret";
const PASSWORD_ENV: &str = "RSE_E2E_FLEET_PASSWORD";
const JOB: &str = "redis-streams";
const SELF_JOB: &str = "redis-streams-exporter";

/// Prometheus's `hashmod` of `value` by 2: MD5, last 8 bytes big-endian, modulo 2.
fn shard(value: &str) -> u64 {
    let mut child = Command::new(which("md5sum"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(value.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let hex = String::from_utf8(out.stdout).unwrap();
    let last8 = u64::from_str_radix(&hex[16..32], 16).unwrap();
    last8 % 2
}

fn authed(server: &RedisServer) -> redis::Connection {
    redis::Client::open(format!("redis://:{PASSWORD}@127.0.0.1:{}", server.port))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Exporter connections on `server` (its `CLIENT LIST`).
fn exporter_connections(server: &RedisServer) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut authed(server))
        .unwrap();
    list.lines()
        .filter(|l| {
            l.contains(&format!(
                "name={}",
                redis_streams_exporter::backend::CLIENT_NAME
            ))
        })
        .count()
}

/// Remote ports of the established TCP connections of process `pid`.
fn remote_ports(pid: u32) -> BTreeSet<u16> {
    let mut inodes = BTreeSet::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        if let Ok(link) = std::fs::read_link(fd.path()) {
            let link = link.display().to_string();
            if let Some(inode) = link
                .strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
            {
                inodes.insert(inode.to_string());
            }
        }
    }
    let mut ports = BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            if cols.len() > 9 && cols[3] == "01" && inodes.contains(cols[9]) {
                let port = cols[2].rsplit(':').next().unwrap();
                ports.insert(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

async fn query(http: &reqwest::Client, prom: &str, expr: &str) -> Vec<Json> {
    let body: Json = http
        .get(format!("{prom}/api/v1/query"))
        .query(&[("query", expr)])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["status"], "success", "{expr}: {body}");
    body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn label<'a>(series: &'a Json, name: &str) -> &'a str {
    series["metric"][name].as_str().unwrap_or_default()
}

fn value(series: &Json) -> f64 {
    series["value"][1].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_shards_two_servers_over_two_replicas_and_sees_each_stream_once() {
    let _turn = crate::ONE_STACK_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path();
    let auth = ["--requirepass", PASSWORD];

    // Two servers whose URLs fall in different shards.
    let a = RedisServer::start_with(Server::Redis70, &auth);
    let url_a = format!("redis://127.0.0.1:{}", a.port);
    let b = (0..40)
        .map(|_| RedisServer::start_with(Server::Redis70, &auth))
        .find(|b| shard(&format!("redis://127.0.0.1:{}", b.port)) != shard(&url_a))
        .expect("no port in 40 tries hashed to the other shard");
    let url_b = format!("redis://127.0.0.1:{}", b.port);
    let streams: BTreeMap<&str, Vec<&str>> = BTreeMap::from([
        (url_a.as_str(), vec!["a:orders", "a:payments"]),
        (url_b.as_str(), vec!["b:audit", "b:events", "b:mail"]),
    ]);
    for (server, url) in [(&a, &url_a), (&b, &url_b)] {
        let mut c = authed(server);
        for (i, stream) in streams[url.as_str()].iter().enumerate() {
            common::xadd_n(&mut c, stream, i + 1);
            let _: () = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(stream)
                .arg("workers")
                .arg("0")
                .query(&mut c)
                .unwrap();
        }
    }

    // Two exporter replicas, identical: /probe only, the password from the auth module.
    let exe = env!("CARGO_BIN_EXE_redis-streams-exporter");
    let exporter_config = format!(
        "[probe]\nallowed_targets = [\"redis://127.0.0.1:*\"]\ntarget_ttl = \"1m\"\n\
         [auth_modules.fleet]\npassword_env = \"{PASSWORD_ENV}\"\n\
         [schedule]\nstream = \"1s\"\ndiscovery = \"2s\"\n"
    );
    let config_file = dir.path().join("exporter.toml");
    std::fs::write(&config_file, &exporter_config).unwrap();
    let replica_ports = [free_port(), free_port()];
    let mut replicas: Vec<Proc> = replica_ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            Proc::spawn(
                &format!("exporter-{i}"),
                Command::new(exe)
                    .arg("--config")
                    .arg(&config_file)
                    .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                    .env(PASSWORD_ENV, PASSWORD),
                logs,
            )
        })
        .collect();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for (i, port) in replica_ports.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(30);
        while http
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await
            .is_err()
        {
            assert_alive(&mut [&mut replicas[i]]);
            assert!(Instant::now() < deadline, "{}", replicas[i].tail(30));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // Prometheus: file_sd, the multi-target relabelling, hashmod over the replicas; and the
    // replicas' own /metrics.
    let sd_file = dir.path().join("redis-targets.json");
    std::fs::write(
        &sd_file,
        serde_json::to_string(&serde_json::json!([
            {"targets": [url_a, url_b], "labels": {"env": "e2e"}}
        ]))
        .unwrap(),
    )
    .unwrap();
    let prom_config = format!(
        r#"global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: {JOB}
    metrics_path: /probe
    params:
      auth_module: [fleet]
    file_sd_configs:
      - files: ["{sd}"]
        refresh_interval: 1s
    relabel_configs:
      - source_labels: [__address__]
        target_label: __param_target
      - source_labels: [__param_target]
        target_label: instance
      - source_labels: [__param_target]
        modulus: 2
        action: hashmod
        target_label: __tmp_shard
      - source_labels: [__tmp_shard]
        regex: "0"
        target_label: __address__
        replacement: 127.0.0.1:{p0}
      - source_labels: [__tmp_shard]
        regex: "1"
        target_label: __address__
        replacement: 127.0.0.1:{p1}
  - job_name: {SELF_JOB}
    static_configs:
      - targets: ["127.0.0.1:{p0}", "127.0.0.1:{p1}"]
"#,
        sd = sd_file.display(),
        p0 = replica_ports[0],
        p1 = replica_ports[1],
    );
    let prom_file = dir.path().join("prometheus.yml");
    std::fs::write(&prom_file, &prom_config).unwrap();
    let check = Command::new(which("promtool"))
        .args(["check", "config"])
        .arg(&prom_file)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let prom_port = free_port();
    let mut prometheus = Proc::spawn(
        "prometheus",
        Command::new(which("prometheus"))
            .arg(format!("--config.file={}", prom_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}")),
        logs,
    );
    let prom = format!("http://127.0.0.1:{prom_port}");

    // Wait until every stream and both replicas' self-metrics are in.
    let total: usize = streams.values().map(Vec::len).sum();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert_alive(&mut [&mut prometheus]);
        for r in &mut replicas {
            assert_alive(&mut [r]);
        }
        let ready = http
            .get(format!("{prom}/-/ready"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            let lengths = query(&http, &prom, "redis_streams_stream_length").await;
            let selves = query(&http, &prom, "redis_streams_exporter_probed_targets").await;
            let lags = query(&http, &prom, "redis_streams_group_lag").await;
            let both_probing = selves.len() == 2 && selves.iter().all(|s| value(s) >= 1.0);
            if lengths.len() >= total && both_probing && lags.len() >= total {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not get every stream in time\nprometheus:\n{}\nexporter-0:\n{}\nexporter-1:\n{}",
            prometheus.tail(30),
            replicas[0].tail(30),
            replicas[1].tail(30)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // 1. Each stream exactly once, under its server's instance, whatever the job.
    let lengths = query(&http, &prom, "redis_streams_stream_length").await;
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for s in &lengths {
        assert_eq!(label(s, "job"), JOB, "a stream series from /metrics: {s}");
        let instance = label(s, "instance").to_string();
        // The target label is the server's address; the instance is the probed URL.
        assert_eq!(format!("redis://{}", label(s, "target")), instance, "{s}");
        assert_eq!(label(s, "env"), "e2e", "{s}");
        *seen
            .entry((instance, label(s, "stream").to_string()))
            .or_default() += 1;
    }
    let expected: BTreeMap<(String, String), usize> = streams
        .iter()
        .flat_map(|(url, names)| names.iter().map(|n| ((url.to_string(), n.to_string()), 1)))
        .collect();
    assert_eq!(seen, expected, "stream series per (instance, stream)");
    for (instance, stream) in expected.keys() {
        // The i-th stream of a server got i + 1 entries.
        let n = streams[instance.as_str()]
            .iter()
            .position(|s| s == stream)
            .unwrap()
            + 1;
        let length = lengths
            .iter()
            .find(|s| label(s, "instance") == instance && label(s, "stream") == stream)
            .map(value)
            .unwrap();
        assert_eq!(length, n as f64, "{instance} {stream}");
    }
    let per_group = query(
        &http,
        &prom,
        "count by (instance, stream, group) (redis_streams_group_lag)",
    )
    .await;
    assert_eq!(per_group.len(), total);
    assert!(per_group.iter().all(|s| value(s) == 1.0), "{per_group:?}");

    // 2. Each target scraped from its shard's replica.
    let targets: Json = http
        .get(format!("{prom}/api/v1/targets"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut scraped_by: BTreeMap<String, u16> = BTreeMap::new();
    for t in targets["data"]["activeTargets"].as_array().unwrap() {
        if t["labels"]["job"] != JOB {
            continue;
        }
        assert_eq!(t["health"], "up", "{t}");
        let instance = t["labels"]["instance"].as_str().unwrap().to_string();
        let scrape_url = t["scrapeUrl"].as_str().unwrap();
        let port: u16 = scrape_url
            .split("://127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(scrape_url.contains("/probe?"), "{scrape_url}");
        assert!(scrape_url.contains("auth_module=fleet"), "{scrape_url}");
        scraped_by.insert(instance, port);
    }
    let replica_of = |url: &str| replica_ports[shard(url) as usize];
    assert_eq!(
        scraped_by,
        BTreeMap::from([
            (url_a.clone(), replica_of(&url_a)),
            (url_b.clone(), replica_of(&url_b))
        ])
    );

    // 3. Each replica polls only its shard's server.
    let probed = query(&http, &prom, "redis_streams_exporter_probed_targets").await;
    let probed: BTreeMap<String, f64> = probed
        .iter()
        .map(|s| (label(s, "instance").to_string(), value(s)))
        .collect();
    let mut table = Vec::new();
    for (i, port) in replica_ports.iter().enumerate() {
        let mine = if replica_of(&url_a) == *port { &a } else { &b };
        let other = if replica_of(&url_a) == *port { &b } else { &a };
        assert_eq!(
            probed.get(&format!("127.0.0.1:{port}")),
            Some(&1.0),
            "replica {i}: {probed:?}"
        );
        let ports = remote_ports(replicas[i].pid());
        assert!(
            ports.contains(&mine.port) && !ports.contains(&other.port),
            "replica {i} (port {port}) talks to {ports:?}; its shard's server is {}, the other {}",
            mine.port,
            other.port
        );
        table.push(format!(
            "replica {i} (127.0.0.1:{port}): probed_targets {} | connections to Redis {} | not to {}",
            probed[&format!("127.0.0.1:{port}")],
            mine.port,
            other.port
        ));
    }
    for (server, url) in [(&a, &url_a), (&b, &url_b)] {
        assert_eq!(exporter_connections(server), 1, "{url}");
        let n = seen.keys().filter(|(i, _)| i == url).count();
        table.push(format!(
            "server {url}: shard {} -> replica 127.0.0.1:{} | stream series in Prometheus {n} (of {} streams) | exporter connections 1",
            shard(url),
            replica_of(url),
            streams[url.as_str()].len()
        ));
    }
    println!("{}", table.join("\n"));
}
