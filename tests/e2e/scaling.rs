//! The shipped rules and Alertmanager example, scaled in time for the end-to-end test.
//!
//! Production `for:` durations (2 to 30 minutes) would make the test last an hour, so Prometheus
//! loads a copy of the rules with every `for:`, every `keep_firing_for:` and every range window
//! (`[15m]`, `[1h]`) divided by [`TIME_SCALE`] (20: 5m → 15s, 30m → 90s, [15m] → [45s]).
//! Staleness thresholds need no change: they derive from the probe intervals the exporters
//! report. Alertmanager loads the example configuration with its receivers replaced by the test's
//! webhook and `group_wait`/`group_interval` divided the same way (30s → 1.5s, 5m → 15s);
//! `repeat_interval` (an hour and more) is kept, so that a notification counted is never a reminder.
//! An exporter that would run on its default schedule gets that schedule divided the same way.

use std::collections::BTreeMap;

use serde_norway::Value as Yaml;

/// `for:`, `keep_firing_for:`, range windows and Alertmanager's grouping delays are divided by this.
pub const TIME_SCALE: u64 = 20;

/// Milliseconds of a Prometheus duration made of one or more `<n><unit>` parts (`5m`, `1h30m`).
pub fn millis(duration: &str) -> u64 {
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
    total
}

/// A duration divided by [`TIME_SCALE`], in whole seconds (at least one).
pub fn scaled(duration: &str) -> String {
    format!("{}s", (millis(duration) / 1000 / TIME_SCALE).max(1))
}

/// A duration divided by [`TIME_SCALE`], in milliseconds (for Alertmanager's short delays).
fn scaled_ms(duration: &str) -> String {
    format!("{}ms", (millis(duration) / TIME_SCALE).max(100))
}

/// Every `[range]` (and `[range:step]`) of an expression, scaled.
pub fn scale_ranges(expr: &str) -> String {
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

/// The exporter's default schedule (`[schedule]` of `config/example.toml`, which shows exactly
/// the defaults) divided by [`TIME_SCALE`], as a configuration file section: an exporter left on
/// its defaults keeps, against the scaled rules, the timing it has against the shipped ones (its
/// status window of stream polls passes before the scaled `for:` of the alerts it must precede).
pub fn scaled_default_schedule(example: &str) -> String {
    let config: toml::Table = example.parse().unwrap();
    let schedule = config["schedule"].as_table().expect("[schedule]");
    let mut out = String::from("[schedule]\n");
    for (key, value) in schedule {
        let d = value.as_str().expect("a duration");
        out.push_str(&format!("{key} = \"{}ms\"\n", millis(d) / TIME_SCALE));
    }
    out
}

/// The test copy of the rules.
pub fn test_rules(original: &str) -> String {
    let mut doc: Yaml = serde_norway::from_str(original).unwrap();
    for group in doc["groups"].as_sequence_mut().unwrap() {
        for rule in group["rules"].as_sequence_mut().unwrap() {
            let map = rule.as_mapping_mut().unwrap();
            for key in ["for", "keep_firing_for"] {
                if let Some(d) = map.get(key).and_then(Yaml::as_str) {
                    let d = scaled(d);
                    map.insert(key.into(), d.into());
                }
            }
            let expr = scale_ranges(map.get("expr").and_then(Yaml::as_str).unwrap());
            map.insert("expr".into(), expr.into());
        }
    }
    serde_norway::to_string(&doc).unwrap()
}

/// The Alertmanager configuration of the test: the example's routes, grouping and inhibitions,
/// with every receiver that has an integration sent to the webhook (`/<receiver name>`) and the
/// grouping delays scaled.
pub fn test_alertmanager(example: &str, webhook: u16) -> String {
    let mut doc: Yaml = serde_norway::from_str(example).unwrap();
    fn scale_route(route: &mut Yaml) {
        let map = route.as_mapping_mut().unwrap();
        for key in ["group_wait", "group_interval"] {
            if let Some(d) = map.get(key).and_then(Yaml::as_str) {
                let d = scaled_ms(d);
                map.insert(key.into(), d.into());
            }
        }
        if let Some(children) = map.get_mut("routes").and_then(Yaml::as_sequence_mut) {
            for child in children {
                scale_route(child);
            }
        }
    }
    scale_route(&mut doc["route"]);
    for receiver in doc["receivers"].as_sequence_mut().unwrap() {
        let map = receiver.as_mapping_mut().unwrap();
        let name = map.get("name").and_then(Yaml::as_str).unwrap().to_string();
        let integrations = map.len() > 1;
        map.retain(|k, _| k.as_str() == Some("name"));
        if integrations {
            let hook: Yaml = serde_norway::from_str(&format!(
                "- url: http://127.0.0.1:{webhook}/{name}\n  send_resolved: true\n"
            ))
            .unwrap();
            map.insert("webhook_configs".into(), hook);
        }
    }
    serde_norway::to_string(&doc).unwrap()
}

/// alertname → (severity, original `for:`; "0s" for the event alerts without one). An alert
/// defined twice (one rule per severity) keeps the first.
pub fn rule_facts(original: &str) -> BTreeMap<String, (String, String)> {
    let doc: Yaml = serde_norway::from_str(original).unwrap();
    let mut facts = BTreeMap::new();
    for group in doc["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            if let Some(name) = rule["alert"].as_str() {
                facts.entry(name.to_string()).or_insert((
                    rule["labels"]["severity"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    rule["for"].as_str().unwrap_or("0s").to_string(),
                ));
            }
        }
    }
    facts
}

#[test]
fn the_rules_and_the_alertmanager_example_are_scaled_in_time() {
    assert_eq!(millis("15m"), 900_000);
    assert_eq!(millis("1h30m"), 5_400_000);
    assert_eq!(scaled("5m"), "15s");
    assert_eq!(scaled("2m"), "6s");
    assert_eq!(scaled_ms("30s"), "1500ms");
    assert_eq!(
        scale_ranges("rate(x[15m]) - delta(y[1h]) + max_over_time(z[10m:1m])"),
        "rate(x[45s]) - delta(y[180s]) + max_over_time(z[30s:3s])"
    );
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let original = std::fs::read_to_string(root.join("alerts/redis-streams.rules.yml")).unwrap();
    let text = test_rules(&original);
    assert!(!text.contains("[15m]") && !text.contains("for: 30m"));
    assert_eq!(rule_facts(&text).len(), rule_facts(&original).len());
    let schedule = scaled_default_schedule(
        &std::fs::read_to_string(root.join("config/example.toml")).unwrap(),
    );
    assert!(schedule.contains("stream = \"750ms\"\n"), "{schedule}");
    let example = std::fs::read_to_string(root.join("alerts/alertmanager.example.yml")).unwrap();
    let am: Yaml = serde_norway::from_str(&test_alertmanager(&example, 9999)).unwrap();
    assert_eq!(am["route"]["group_wait"].as_str(), Some("1500ms"));
    assert_eq!(am["route"]["group_interval"].as_str(), Some("15000ms"));
    let original_am: Yaml = serde_norway::from_str(&example).unwrap();
    assert_eq!(am["inhibit_rules"], original_am["inhibit_rules"]);
    let hooks: Vec<&str> = am["receivers"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|r| r["webhook_configs"][0]["url"].as_str())
        .collect();
    assert_eq!(
        hooks,
        [
            "http://127.0.0.1:9999/pager",
            "http://127.0.0.1:9999/ticket"
        ]
    );
}
