//! The monitoring mixin (`mixin/mixin.libsonnet`), rendered by Debian's `jsonnet` (scripts/test.sh
//! installs it): with the default `_config`, its `prometheusAlerts` are the alerts of the shipped rule
//! files, its `prometheusRules` their recording rules and its `grafanaDashboards` the shipped
//! dashboards, all equal after parsing; `promtool check rules` accepts what it renders; the `_config`
//! selectors reach the dashboards' job and instance variables; `slo: false` leaves the SLO rules out.
//! The JSON copies of the rule files it imports (`mixin/rules/`) equal their YAML sources
//! (`scripts/regen.sh` rewrites them).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value as Json;

const RULE_FILES: [&str; 2] = ["redis-streams", "redis-streams-slo"];
const DASHBOARDS: [&str; 3] = [
    "redis-streams-overview.json",
    "redis-streams-stream.json",
    "redis-streams-exporter.json",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml_file(rel: &str) -> Json {
    let text = std::fs::read_to_string(root().join(rel)).unwrap();
    serde_norway::from_str::<Json>(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `jsonnet` on an expression over the mixin (`mixin` bound to it, with `config` mixed into its
/// `_config`).
fn render(config: &str, expression: &str) -> Json {
    let code = format!(
        "local mixin = (import 'mixin.libsonnet') + {{ _config+:: {config} }}; {expression}"
    );
    let out = Command::new("jsonnet")
        .arg("-J")
        .arg(root().join("mixin"))
        .arg("-e")
        .arg(&code)
        .output()
        .unwrap_or_else(|e| {
            panic!("jsonnet (Debian package jsonnet; scripts/test.sh installs it): {e}")
        });
    assert!(
        out.status.success(),
        "jsonnet -e {code}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The groups of the shipped rule files with only the alerts (`alerts`) or only the recording
/// rules, groups left empty dropped.
fn shipped(files: &[&str], alerts: bool) -> Json {
    let mut groups = Vec::new();
    for name in files {
        let doc = yaml_file(&format!("alerts/{name}.rules.yml"));
        for group in doc["groups"].as_array().unwrap() {
            let rules: Vec<Json> = group["rules"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r.get("alert").is_some() == alerts)
                .cloned()
                .collect();
            if !rules.is_empty() {
                let mut g = group.clone();
                // A group holding both kinds hands out its recording part under its name with
                // "-recording", so the two parts never share a name.
                let mixed = rules.len() < group["rules"].as_array().unwrap().len();
                if mixed && !alerts {
                    g["name"] =
                        Json::String(format!("{}-recording", group["name"].as_str().unwrap()));
                }
                g["rules"] = Json::Array(rules);
                groups.push(g);
            }
        }
    }
    serde_json::json!({ "groups": groups })
}

#[test]
fn the_imported_rule_copies_equal_their_yaml_sources() {
    for name in RULE_FILES {
        let source = yaml_file(&format!("alerts/{name}.rules.yml"));
        let copy = root().join(format!("mixin/rules/{name}.rules.json"));
        let mut text = serde_json::to_string_pretty(&source).unwrap();
        text.push('\n');
        let from = format!("alerts/{name}.rules.yml");
        if let Err(e) = redis_streams_exporter::derived::compare_or_rewrite(&copy, &text, &from) {
            panic!("{e}");
        }
    }
}

#[test]
fn the_mixin_hands_out_the_shipped_rules_and_dashboards() {
    let alerts = render("{}", "mixin.prometheusAlerts");
    assert_eq!(alerts, shipped(&RULE_FILES, true), "prometheusAlerts");
    let rules = render("{}", "mixin.prometheusRules");
    assert_eq!(rules, shipped(&RULE_FILES, false), "prometheusRules");
    let alert_count = alerts["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_array().unwrap().len())
        .sum::<usize>();
    let record_count = rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_array().unwrap().len())
        .sum::<usize>();
    println!("mixin: {alert_count} alerts, {record_count} recording rules");
    assert!(alert_count >= 20 && record_count >= 7);

    let dashboards = render("{}", "mixin.grafanaDashboards");
    let names: Vec<&String> = dashboards.as_object().unwrap().keys().collect();
    assert_eq!(names.len(), DASHBOARDS.len(), "{names:?}");
    let on_disk = std::fs::read_dir(root().join("dashboards"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count();
    assert_eq!(
        on_disk,
        DASHBOARDS.len(),
        "a dashboard is missing from the mixin"
    );
    for file in DASHBOARDS {
        let source: Json = serde_json::from_str(
            &std::fs::read_to_string(root().join("dashboards").join(file)).unwrap(),
        )
        .unwrap();
        assert_eq!(dashboards[file], source, "{file}");
    }

    // promtool accepts what the mixin renders (JSON is YAML).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mixin.rules.json");
    let both = render(
        "{}",
        "{ groups: mixin.prometheusRules.groups + mixin.prometheusAlerts.groups }",
    );
    std::fs::write(&file, serde_json::to_string(&both).unwrap()).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("promtool (Debian package prometheus)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_config_reaches_the_dashboards_and_the_slo_rules() {
    let config = r#"{ jobSelector: 'job="redis-streams"', instanceSelector: 'instance=~"eu-.*"', slo: false }"#;
    let dashboards = render(config, "mixin.grafanaDashboards");
    for file in DASHBOARDS {
        let list = dashboards[file]["templating"]["list"].as_array().unwrap();
        let query = |name: &str| {
            list.iter()
                .find(|v| v["name"] == name)
                .and_then(|v| v["query"].as_str())
                .unwrap_or_else(|| panic!("{file}: no {name} variable"))
                .to_string()
        };
        assert_eq!(
            query("job"),
            "label_values(redis_streams_exporter_build_info{job=\"redis-streams\"}, job)",
            "{file}"
        );
        let instance = query("instance");
        assert!(
            instance.starts_with(
                "label_values(redis_streams_exporter_build_info{instance=~\"eu-.*\",job"
            ),
            "{file}: {instance}"
        );
    }
    assert_eq!(
        render(config, "mixin.prometheusAlerts"),
        shipped(&["redis-streams"], true)
    );
    assert_eq!(
        render(config, "mixin.prometheusRules"),
        serde_json::json!({ "groups": [] })
    );
}
