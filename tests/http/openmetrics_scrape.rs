//! OpenMetrics as a real Prometheus reads it: the Debian package `prometheus` (2.42, whose scrapes
//! ask for OpenMetrics 1.0.0 first: `Accept: application/openmetrics-text;version=1.0.0,...`; it
//! predates the `scrape_protocols` setting, which 2.49 added) scrapes the in-process daemon
//! watching a real redis-server 7.0, with the shipped rule files loaded.
//!
//! Checked through its HTTP API: the target is healthy, its metadata has the OpenMetrics types
//! (gaugehistogram, info, counter with its unit-less family name), which only an
//! OpenMetrics parse gives; the series are queryable under the names the text format gives them;
//! every shipped rule (the alerts reading the group status, the SLO recording rules) evaluates
//! without error; the dashboards' bucket quantile over the gauge histogram gives a value.
//! Also: the strict parser of the Python client library refuses what a naive conversion of the
//! text format would be, so passing it means something.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Daemon, RedisServer, Server, xadd_n};
use serde_json::Value as Json;

/// A GET on Prometheus's API: its `data`, once it answers with status success.
async fn api(port: u16, path_and_query: &str) -> Option<Json> {
    let body = reqwest::get(format!("http://127.0.0.1:{port}{path_and_query}"))
        .await
        .ok()?
        .json::<Json>()
        .await
        .ok()?;
    (body["status"] == "success").then(|| body["data"].clone())
}

/// The value of an instant query's single sample, if there is one.
async fn query_one(port: u16, promql: &str) -> Option<f64> {
    let q: String = url::form_urlencoded::byte_serialize(promql.as_bytes()).collect();
    let data = api(port, &format!("/api/v1/query?query={q}")).await?;
    let result = data["result"].as_array()?;
    if result.len() != 1 {
        return None;
    }
    result[0]["value"][1].as_str()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_openmetrics_and_the_shipped_rules_use_it() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 5);
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", "orders", "billing", "0"])
        .query(&mut c)
        .unwrap();
    // Three entries delivered and not acknowledged: the PEL distributions have buckets.
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg(&[
            "GROUP", "billing", "worker", "COUNT", "3", "STREAMS", "orders", ">",
        ])
        .query(&mut c)
        .unwrap();
    let d = Daemon::start(&format!(
        "[[targets]]\nname = \"t\"\nurl = \"{}\"\npatterns = [\"*\"]\n\
         [stream_defaults]\nmax_delay = \"1h\"\n\
         [metrics]\npending_idle_buckets = [\"10s\", \"1m\"]\n\
         [schedule]\ndiscovery = \"1s\"\ninfo = \"1s\"\nstream = \"200ms\"\npending_summary = \"500ms\"\nconsumers = \"500ms\"\npending_scan = \"500ms\"\n",
        server.url()
    ))
    .await;
    let exporter = d.base.trim_start_matches("http://").to_string();
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\n  - {}\n\
             scrape_configs:\n  - job_name: redis-streams-exporter\n    static_configs:\n      - targets: ['{exporter}']\n",
            root.join("alerts/redis-streams.rules.yml").display(),
            root.join("alerts/redis-streams-slo.rules.yml").display(),
        ),
    )
    .unwrap();
    let port = common::free_port();
    let log = dir.path().join("prometheus.log");
    let mut prometheus = Command::new(common::which("prometheus"))
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();

    // What Prometheus knows, once it has scraped the group's buckets and evaluated the rules.
    let lag = "redis_streams_group_lag{job=\"redis-streams-exporter\",target=\"t\",stream=\"orders\",group=\"billing\"}";
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = String::new();
    let outcome = loop {
        if Instant::now() > deadline {
            break Err(seen);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let Some(targets) = api(port, "/api/v1/targets").await else {
            continue;
        };
        let health = targets["activeTargets"][0]["health"].clone();
        let buckets = query_one(
            port,
            "count(redis_streams_group_pending_by_idle_bucket{group=\"billing\"})",
        )
        .await;
        let ratio = query_one(port, "redis_streams_group:within_objective:ratio_5m").await;
        seen = format!("health {health}, buckets {buckets:?}, ratio {ratio:?}");
        if health == "up" && buckets == Some(3.0) && ratio.is_some() {
            break Ok(targets);
        }
    };
    let result = async {
        let targets = outcome.map_err(|s| format!("never scraped whole: {s}"))?;
        let target = &targets["activeTargets"][0];
        if target["lastError"] != "" {
            return Err(format!("scrape error: {}", target["lastError"]));
        }
        // The OpenMetrics types, as Prometheus's scrape recorded them.
        let metadata = api(port, "/api/v1/targets/metadata")
            .await
            .ok_or("no metadata")?;
        let type_of = |metric: &str| {
            metadata
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["metric"] == metric)
                .map(|m| m["type"].as_str().unwrap_or_default().to_string())
        };
        let types = [
            ("redis_streams_group_pending_by_idle", "gaugehistogram"),
            ("redis_streams_target", "info"),
            ("redis_streams_exporter_build", "info"),
            ("redis_streams_stream_entries_added", "counter"),
            ("redis_streams_group_lag_seconds", "gauge"),
        ];
        for (metric, want) in types {
            let got = type_of(metric);
            println!("metadata {metric}: {got:?}");
            if got.as_deref() != Some(want) {
                return Err(format!("{metric}: type {got:?}, want {want}"));
            }
        }
        let units = metadata
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["metric"] == "redis_streams_group_lag_seconds")
            .map(|m| m["unit"].clone());
        println!("unit of redis_streams_group_lag_seconds: {units:?}");
        // Series under the text format's names.
        for (promql, want) in [
            (lag.to_string(), 2.0),
            (
                "redis_streams_stream_entries_added_total{target=\"t\",stream=\"orders\"}".into(),
                5.0,
            ),
            (
                // Any status: the exporter's to decide; one series of value 1.
                "count(redis_streams_group_status{group=\"billing\"} == 1)".into(),
                1.0,
            ),
            (
                "redis_streams_group_pending_by_idle_bucket{group=\"billing\",le=\"+Inf\"}".into(),
                3.0,
            ),
            ("count(redis_streams_target_info{server=\"redis\"})".into(), 1.0),
            (
                "redis_streams_group_within_objective{group=\"billing\"}".into(),
                1.0,
            ),
        ] {
            let got = query_one(port, &promql).await;
            println!("{promql} = {got:?}");
            match got {
                Some(v) if v == want => {}
                other => return Err(format!("{promql}: {other:?}, want {want}")),
            }
        }
        // The status is a gauge, one series a group.
        let status = type_of("redis_streams_group_status");
        if status.as_deref() != Some("gauge") {
            return Err(format!("redis_streams_group_status: type {status:?}, want gauge"));
        }
        // The dashboard's quantile over the gauge histogram.
        let quantile = query_one(
            port,
            "histogram_quantile(0.5, sum by (le) (redis_streams_group_pending_by_idle_bucket{group=\"billing\"}))",
        )
        .await;
        println!("median idle of the pending entries: {quantile:?}");
        if !quantile.is_some_and(f64::is_finite) {
            return Err(format!("histogram_quantile: {quantile:?}"));
        }
        // Every shipped rule evaluates without error, the status alerts among them.
        let rules = api(port, "/api/v1/rules").await.ok_or("no rules")?;
        let mut evaluated = 0;
        let mut reading_status = 0;
        for group in rules["groups"].as_array().into_iter().flatten() {
            for rule in group["rules"].as_array().into_iter().flatten() {
                let query = rule["query"].as_str().unwrap_or_default();
                if rule["health"] != "ok" {
                    return Err(format!(
                        "rule {} is {}: {}",
                        rule["name"], rule["health"], rule["lastError"]
                    ));
                }
                evaluated += 1;
                reading_status += usize::from(query.contains("redis_streams_group_status"));
            }
        }
        println!("{evaluated} rules evaluated, {reading_status} read the group status");
        if evaluated < 30 || reading_status < 3 {
            return Err(format!("{evaluated} rules, {reading_status} on the status"));
        }
        Ok(())
    }
    .await;
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    d.stop().await;
    if let Err(e) = result {
        panic!(
            "{e}\nprometheus log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

/// The strict parser refuses a naive conversion: a counter family keeping its `_total`, and a
/// state set without its family's label (the parser's strictness, shown on a family the exporter
/// does not write so).
#[test]
fn the_strict_parser_refuses_a_naive_conversion() {
    for (naive, complaint) in [
        (
            "# TYPE redis_streams_stream_entries_added_total counter\nredis_streams_stream_entries_added_total 3\n# EOF\n",
            "Clashing name",
        ),
        (
            "# TYPE redis_streams_group_status stateset\nredis_streams_group_status{status=\"ok\"} 1\n# EOF\n",
            "Stateset missing label",
        ),
        ("# TYPE x gauge\nx 1\n", "Missing # EOF"),
    ] {
        let result = std::panic::catch_unwind(|| common::openmetrics_check(naive));
        let message = match result {
            Ok(said) => panic!("accepted:\n{naive}\n{said}"),
            Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
        };
        assert!(message.contains(complaint), "{message}");
    }
}
