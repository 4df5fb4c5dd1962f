//! The dashboards against the live Prometheus of the end-to-end test: every query of every panel
//! of every dashboard in `dashboards/`, and every template variable query, must return data, with
//! the variables set to values that exist.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value as Json;

use crate::procs::{has_data, query};

const DASHBOARDS: &str = "dashboards";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

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

/// Assignments of exact variables to try, most interesting first: every (job, instance, target,
/// stream, group) that exists, then every (job, instance, target, stream), then every (job,
/// instance, target).
async fn candidates(http: &reqwest::Client, prom: &str) -> Vec<BTreeMap<String, String>> {
    const KEYS: [&str; 5] = ["job", "instance", "target", "stream", "group"];
    let rank = |values: &BTreeMap<String, String>| {
        let t = values.get("target").map_or("", String::as_str);
        usize::from(!(t.starts_with("redis") || t.starts_with("valkey")))
    };
    let mut out: Vec<BTreeMap<String, String>> = Vec::new();
    for (keys, expr) in [
        (
            &KEYS[..],
            "group by (job, instance, target, stream, group) (redis_streams_group_pending)",
        ),
        (
            &KEYS[..4],
            "group by (job, instance, target, stream) (redis_streams_stream_length)",
        ),
        (
            &KEYS[..3],
            "group by (job, instance, target) (redis_streams_exporter_target_up)",
        ),
    ] {
        let mut found: Vec<BTreeMap<String, String>> = query(http, prom, expr)
            .await
            .unwrap()
            .iter()
            .map(|s| {
                keys.iter()
                    .map(|k| {
                        (
                            k.to_string(),
                            s["metric"][*k].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .collect();
        found.sort_by_key(|v| (rank(v), v.clone()));
        out.extend(found);
    }
    out
}

/// Queries every dashboard panel target and template variable; returns the number checked and
/// the ones without data.
pub async fn check_dashboards(http: &reqwest::Client, prom: &str) -> (usize, Vec<String>) {
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
