//! Checks the monitoring assets shipped with the exporter: the Prometheus alert rules and their
//! `promtool` unit tests, the Alertmanager example, the runbook and the Grafana dashboards.
//!
//! `promtool` (Debian package `prometheus`) and `amtool` (Debian package `prometheus-alertmanager`)
//! must be installed: these tests fail, never skip, when they are missing. Set `PROMTOOL` or `AMTOOL`
//! to use binaries that are not on `PATH`.
//!
//! Every metric and label name used by a rule or a dashboard must exist in
//! [`redis_streams_exporter::metrics::catalog`], so renaming a metric cannot silently break them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test helpers: a panic is a failed test.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;

use redis_streams_exporter::metrics::catalog;
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

type TestResult = Result<(), Box<dyn Error>>;

const RULES: &str = "alerts/redis-streams.rules.yml";
const RULE_TESTS_DIR: &str = "alerts/tests";
const ALERTMANAGER_EXAMPLE: &str = "alerts/alertmanager.example.yml";
const RUNBOOK: &str = "alerts/runbook.md";
const DASHBOARDS_DIR: &str = "dashboards";
const RUNBOOK_BASE: &str =
    "https://github.com/redis-streams-exporter/redis-streams-exporter/blob/main/alerts/runbook.md#";
const SEVERITIES: &[&str] = &["critical", "warning", "info"];
/// Labels Prometheus adds at scrape time, on top of the labels of the catalog.
const SCRAPE_LABELS: &[&str] = &["job", "instance"];
/// Grafana variables that dashboards may use without defining them.
const GRAFANA_BUILTINS: &[&str] = &["__rate_interval", "__interval", "__range", "__range_s"];
/// Grafana unit ids the dashboards may use (a subset of Grafana's catalogue; extend as needed).
const GRAFANA_UNITS: &[&str] = &[
    "none",
    "short",
    "s",
    "ms",
    "percentunit",
    "dateTimeAsIso",
    "dateTimeFromNow",
    "bytes",
    "cps",
    "ops",
    "reqps",
    "dtdurations",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> Result<String, Box<dyn Error>> {
    let path = root().join(rel);
    std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()).into())
}

/// Files directly in `dir` (relative to the crate root) whose name ends in one of `exts`, sorted.
fn files_in(dir: &str, exts: &[&str]) -> Result<Vec<PathBuf>, Box<dyn Error>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root().join(dir))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_file() && exts.iter().any(|ext| name.ends_with(ext)) {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(format!("no {exts:?} file in {dir}").into());
    }
    Ok(files)
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

// ------------------------------------------------------------------------------------------------
// External tools

/// Runs `tool args...` in the crate root and fails with its output unless it succeeds. A tool that
/// is not installed is a failure with instructions, never a skip.
fn run_tool(env_var: &str, default: &str, package: &str, args: &[&str]) -> TestResult {
    let program = std::env::var(env_var).unwrap_or_else(|_| default.to_string());
    let output = match Command::new(&program)
        .args(args)
        .current_dir(root())
        .output()
    {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!(
                "`{program}` was not found: install the Debian package `{package}` \
                 (apt-get install {package}) or set {env_var} to the binary. \
                 The monitoring assets cannot be checked without it."
            );
        }
        Err(e) => panic!("cannot run `{program}`: {e}"),
    };
    assert!(
        output.status.success(),
        "`{program} {}` failed with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    Ok(())
}

fn promtool(args: &[&str]) -> TestResult {
    run_tool("PROMTOOL", "promtool", "prometheus", args)
}

fn amtool(args: &[&str]) -> TestResult {
    run_tool("AMTOOL", "amtool", "prometheus-alertmanager", args)
}

#[test]
fn promtool_checks_the_alert_rules() -> TestResult {
    promtool(&["check", "rules", RULES])
}

#[test]
fn promtool_unit_tests_of_the_alert_rules_pass() -> TestResult {
    let files: Vec<String> = files_in(RULE_TESTS_DIR, &[".yml", ".yaml"])?
        .iter()
        .map(|p| relative(p))
        .collect();
    let mut args = vec!["test", "rules"];
    args.extend(files.iter().map(String::as_str));
    promtool(&args)
}

#[test]
fn amtool_checks_the_alertmanager_example() -> TestResult {
    amtool(&["check-config", ALERTMANAGER_EXAMPLE])
}

/// Every dashboard query is valid PromQL: they are written into a temporary rule file, with
/// Grafana's variables replaced, and `promtool check rules` parses it.
#[test]
fn dashboard_queries_are_valid_promql() -> TestResult {
    let mut rules = String::from("groups:\n  - name: dashboard-queries\n    rules:\n");
    let mut count = 0;
    for (file, dashboard) in dashboards()? {
        for panel in panels(&dashboard) {
            for target in array(&panel["targets"]) {
                let expr = target["expr"].as_str().unwrap_or_default();
                let promql = expr
                    .replace("$__rate_interval", "5m")
                    .replace("$__interval", "1m")
                    .replace("$__range", "1h");
                if promql.contains('$') && !promql_strings_only_hold_variables(&promql) {
                    return Err(format!("{file}: a variable outside a string in `{expr}`").into());
                }
                count += 1;
                let quoted = serde_json::to_string(&promql)?;
                rules.push_str(&format!(
                    "      - record: dashboard_query_{count}\n        expr: {quoted}\n"
                ));
            }
        }
    }
    assert!(count > 0, "no dashboard query found");
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("dashboard-queries.rules.yml");
    std::fs::write(&path, rules)?;
    let path = path.to_str().ok_or("temporary path is not UTF-8")?;
    promtool(&["check", "rules", path])
}

/// True when every `$` of a PromQL expression is inside a string literal (label matcher values).
fn promql_strings_only_hold_variables(expr: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in expr.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q != '`' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '$' => return false,
                _ => {}
            },
        }
    }
    true
}

// ------------------------------------------------------------------------------------------------
// A small PromQL scanner: metric names and the label names used with them.

/// One metric selector found in an expression: the metric name and the label names it matches on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Selector {
    metric: String,
    labels: BTreeSet<String>,
}

/// Label-list clauses whose parenthesised contents are label names, not expressions.
const LABEL_LIST_KEYWORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Finds the metric selectors of a PromQL expression (also accepts Grafana's
/// `label_values(selector, label)`). String literals, durations in brackets, label matchers in braces
/// and label lists (`by (...)`, `on (...)`, ...) are never taken for metric names. Names containing
/// `:` (recording rules) are returned too; callers tell them apart.
fn selectors(expr: &str) -> Vec<Selector> {
    let chars: Vec<char> = expr.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i);
        } else if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '{' {
            // A selector without a metric name: `{__name__=...}`; skip it.
            let (_, end) = matcher_labels(&chars, i);
            i = end;
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let next = chars.get(j).copied();
            if LABEL_LIST_KEYWORDS.contains(&word.as_str()) && next == Some('(') {
                while j < chars.len() && chars[j] != ')' {
                    j += 1;
                }
                i = j + 1;
            } else if next == Some('(') {
                // A function call: its name is not a metric.
            } else if word.starts_with("redis_streams_") || word.contains(':') {
                let mut labels = BTreeSet::new();
                if next == Some('{') {
                    let (names, end) = matcher_labels(&chars, j);
                    labels = names;
                    i = end;
                }
                found.push(Selector {
                    metric: word,
                    labels,
                });
            }
        } else {
            i += 1;
        }
    }
    found
}

/// Index just past the string literal that starts at `start`.
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        if chars[i] == '\\' && quote != '`' {
            i += 2;
            continue;
        }
        if chars[i] == quote {
            return i + 1;
        }
        i += 1;
    }
    i
}

/// The label names matched in the braces that start at `open`, and the index past the braces.
fn matcher_labels(chars: &[char], open: usize) -> (BTreeSet<String>, usize) {
    let mut labels = BTreeSet::new();
    let mut i = open + 1;
    while i < chars.len() && chars[i] != '}' {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(chars, i);
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            labels.insert(chars[start..i].iter().collect());
        } else {
            i += 1;
        }
    }
    (labels, i + 1)
}

/// Checks the selectors of `expr` against the catalog; problems are appended to `errors`.
fn check_selectors(place: &str, expr: &str, recorded: &BTreeSet<String>, errors: &mut Vec<String>) {
    for selector in selectors(expr) {
        if selector.metric.contains(':') {
            if !recorded.contains(&selector.metric) {
                errors.push(format!(
                    "{place}: recording rule `{}` is not defined",
                    selector.metric
                ));
            }
            continue;
        }
        match catalog::find(&selector.metric) {
            None => errors.push(format!(
                "{place}: `{}` is not in the metric catalog (src/metrics/catalog.rs)",
                selector.metric
            )),
            Some(def) => {
                for label in &selector.labels {
                    let known = def.labels.contains(&label.as_str())
                        || SCRAPE_LABELS.contains(&label.as_str())
                        || label == "__name__";
                    if !known {
                        errors.push(format!(
                            "{place}: `{}` has no label `{label}` (labels: {:?})",
                            selector.metric, def.labels
                        ));
                    }
                }
            }
        }
    }
}

#[test]
fn scanner_skips_strings_durations_labels_and_functions() {
    let found = selectors(
        r#"sum by (redis_streams_not_a_metric) (rate(redis_streams_a_total{target=~"redis_streams_b", stream!="x"}[$__rate_interval]))
           / on(target) group_left(redis_streams_label) max(redis_streams_c) > level:redis_streams_d:sum"#,
    );
    let names: Vec<&str> = found.iter().map(|s| s.metric.as_str()).collect();
    assert_eq!(
        names,
        [
            "redis_streams_a_total",
            "redis_streams_c",
            "level:redis_streams_d:sum"
        ]
    );
    let labels: Vec<&str> = found[0].labels.iter().map(String::as_str).collect();
    assert_eq!(labels, ["stream", "target"]);

    let found = selectors(r#"label_values(redis_streams_group_pending{target=~"$target"}, group)"#);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].metric, "redis_streams_group_pending");
}

// ------------------------------------------------------------------------------------------------
// Alert rules

struct Rule {
    group: String,
    alert: Option<String>,
    record: Option<String>,
    expr: String,
    raw: Yaml,
}

fn rules() -> Result<Vec<Rule>, Box<dyn Error>> {
    let doc: Yaml = serde_norway::from_str(&read(RULES)?)?;
    let mut rules = Vec::new();
    for group in doc["groups"].as_sequence().ok_or("rules: no groups")? {
        let name = group["name"]
            .as_str()
            .ok_or("rules: group without name")?
            .to_string();
        for rule in group["rules"]
            .as_sequence()
            .ok_or("rules: group without rules")?
        {
            rules.push(Rule {
                group: name.clone(),
                alert: rule["alert"].as_str().map(str::to_string),
                record: rule["record"].as_str().map(str::to_string),
                expr: rule["expr"]
                    .as_str()
                    .ok_or("rules: rule without expr")?
                    .to_string(),
                raw: rule.clone(),
            });
        }
    }
    Ok(rules)
}

/// GitHub's anchors for the headings of a Markdown file.
fn markdown_anchors(markdown: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || !line.starts_with('#') {
            continue;
        }
        let text = line.trim_start_matches('#').trim();
        let anchor: String = text
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        anchors.insert(anchor);
    }
    anchors
}

#[test]
fn alerts_follow_the_mixin_conventions() -> TestResult {
    let runbook = read(RUNBOOK)?;
    let anchors = markdown_anchors(&runbook);
    let mut errors = Vec::new();
    let mut names = BTreeSet::new();
    for rule in rules()? {
        let Some(name) = &rule.alert else { continue };
        let place = format!("alert {name} (group {})", rule.group);
        if !names.insert(name.clone()) {
            errors.push(format!("{place}: duplicate alert name"));
        }
        let camel = name.starts_with("RedisStreams")
            && name.chars().all(|c| c.is_ascii_alphanumeric())
            && name.len() > "RedisStreams".len();
        if !camel {
            errors.push(format!(
                "{place}: name must be CamelCase and start with RedisStreams"
            ));
        }
        let severity = rule.raw["labels"]["severity"].as_str().unwrap_or_default();
        if !SEVERITIES.contains(&severity) {
            errors.push(format!(
                "{place}: severity `{severity}` is not one of {SEVERITIES:?}"
            ));
        }
        let for_duration = rule.raw["for"].as_str().unwrap_or_default();
        if !for_duration.chars().any(|c| c.is_ascii_digit() && c != '0') {
            errors.push(format!("{place}: needs a non-zero `for:`"));
        }
        let annotations = &rule.raw["annotations"];
        let summary = annotations["summary"].as_str().unwrap_or_default();
        if summary.is_empty() || !summary.ends_with('.') || summary.contains("{{") {
            errors.push(format!(
                "{place}: summary must be a static sentence ending with a period"
            ));
        }
        if !summary.chars().next().is_some_and(char::is_uppercase) {
            errors.push(format!("{place}: summary must start with a capital letter"));
        }
        let description = annotations["description"].as_str().unwrap_or_default();
        if !description.contains("{{") {
            errors.push(format!("{place}: description must be a non-empty template"));
        }
        let runbook_url = annotations["runbook_url"].as_str().unwrap_or_default();
        match runbook_url.strip_prefix(RUNBOOK_BASE) {
            None => errors.push(format!(
                "{place}: runbook_url must start with {RUNBOOK_BASE}"
            )),
            Some(anchor) => {
                if anchor != name.to_lowercase() {
                    errors.push(format!(
                        "{place}: runbook anchor `{anchor}` is not the lowercase name"
                    ));
                }
                if !anchors.contains(anchor) {
                    errors.push(format!("{place}: {RUNBOOK} has no heading for #{anchor}"));
                }
            }
        }
    }
    // No runbook section without its alert.
    for line in runbook.lines() {
        if let Some(heading) = line.strip_prefix("## RedisStreams") {
            let name = format!("RedisStreams{}", heading.trim());
            if !names.contains(&name) {
                errors.push(format!("{RUNBOOK}: section {name} has no alert"));
            }
        }
    }
    assert!(
        names.len() >= 20,
        "expected the full alert set, found {names:?}"
    );
    assert!(
        errors.is_empty(),
        "alert convention problems:\n{}",
        errors.join("\n")
    );
    Ok(())
}

/// Alerts on a lag page only when Redis counted it; an estimated lag only ever gives info alerts.
#[test]
fn alerts_on_lag_never_page_on_an_estimate() -> TestResult {
    let mut errors = Vec::new();
    for rule in rules()? {
        let Some(name) = &rule.alert else { continue };
        let metrics: BTreeSet<String> = selectors(&rule.expr)
            .into_iter()
            .map(|s| s.metric)
            .collect();
        let uses_lag = metrics.contains("redis_streams_group_lag")
            || metrics.contains("redis_streams_group_lag_seconds");
        if !uses_lag {
            continue;
        }
        let compact: String = rule.expr.split_whitespace().collect();
        let redis_lag = compact.contains("redis_streams_group_lag_estimated==0");
        let estimated = compact.contains("redis_streams_group_lag_estimated==1");
        let severity = rule.raw["labels"]["severity"].as_str().unwrap_or_default();
        match (redis_lag, estimated) {
            (true, false) => {}
            (false, true) if severity == "info" => {}
            (false, true) => errors.push(format!(
                "{name}: on an estimated lag it must be severity info"
            )),
            _ => errors.push(format!(
                "{name}: reads a lag, so it must select redis_streams_group_lag_estimated == 0 \
                 (or == 1 with severity info)"
            )),
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}

#[test]
fn every_alert_has_firing_and_quiet_promtool_cases() -> TestResult {
    let mut firing: BTreeMap<String, usize> = BTreeMap::new();
    let mut quiet: BTreeMap<String, usize> = BTreeMap::new();
    for file in files_in(RULE_TESTS_DIR, &[".yml", ".yaml"])? {
        let text = std::fs::read_to_string(&file)?;
        let doc: Yaml = serde_norway::from_str(&text)?;
        for test in doc["tests"].as_sequence().ok_or("rule tests: no tests")? {
            for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
                let name = case["alertname"]
                    .as_str()
                    .ok_or("rule tests: case without alertname")?;
                let fires = case["exp_alerts"]
                    .as_sequence()
                    .is_some_and(|a| !a.is_empty());
                let counter = if fires { &mut firing } else { &mut quiet };
                *counter.entry(name.to_string()).or_default() += 1;
            }
        }
    }
    let mut errors = Vec::new();
    for rule in rules()? {
        let Some(name) = &rule.alert else { continue };
        if !firing.contains_key(name) {
            errors.push(format!("{name}: no promtool case where it fires"));
        }
        if !quiet.contains_key(name) {
            errors.push(format!("{name}: no promtool case where it does not fire"));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}

#[test]
fn rule_metrics_and_labels_exist_in_the_catalog() -> TestResult {
    let rules = rules()?;
    let recorded: BTreeSet<String> = rules.iter().filter_map(|r| r.record.clone()).collect();
    let mut errors = Vec::new();
    let mut used = 0;
    for rule in &rules {
        let name = rule
            .alert
            .as_deref()
            .or(rule.record.as_deref())
            .unwrap_or("?");
        check_selectors(
            &format!("{RULES} {name}"),
            &rule.expr,
            &recorded,
            &mut errors,
        );
        used += selectors(&rule.expr).len();
    }
    assert!(used > 0, "no metric found in the rules");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}

#[test]
fn alertmanager_example_routes_by_severity_and_inhibits_on_target_down() -> TestResult {
    let doc: Yaml = serde_norway::from_str(&read(ALERTMANAGER_EXAMPLE)?)?;
    let routes = doc["route"]["routes"]
        .as_sequence()
        .ok_or("no child routes")?;
    for severity in SEVERITIES {
        let matcher = format!("severity=\"{severity}\"");
        let routed = routes.iter().any(|r| {
            r["matchers"]
                .as_sequence()
                .is_some_and(|m| m.iter().any(|x| x.as_str() == Some(matcher.as_str())))
        });
        assert!(routed, "no route for {matcher}");
    }
    let inhibits = doc["inhibit_rules"]
        .as_sequence()
        .ok_or("no inhibit_rules")?;
    let target_down = inhibits.iter().any(|rule| {
        let source = rule["source_matchers"].as_sequence().into_iter().flatten();
        let names_target_down = source
            .filter_map(Yaml::as_str)
            .any(|m| m == "alertname=\"RedisStreamsTargetDown\"");
        let equal: Vec<&str> = rule["equal"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(Yaml::as_str)
            .collect();
        names_target_down && equal == ["target"]
    });
    assert!(
        target_down,
        "no inhibit rule from RedisStreamsTargetDown with equal: [target]"
    );
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Dashboards

fn dashboards() -> Result<Vec<(String, Json)>, Box<dyn Error>> {
    let mut out = Vec::new();
    for path in files_in(DASHBOARDS_DIR, &[".json"])? {
        let text = std::fs::read_to_string(&path)?;
        let json: Json =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", relative(&path)))?;
        out.push((relative(&path), json));
    }
    Ok(out)
}

fn array(value: &Json) -> &[Json] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Every panel, rows included, with the panels nested in collapsed rows.
fn panels(dashboard: &Json) -> Vec<&Json> {
    fn walk<'a>(list: &'a [Json], out: &mut Vec<&'a Json>) {
        for panel in list {
            out.push(panel);
            walk(array(&panel["panels"]), out);
        }
    }
    let mut out = Vec::new();
    walk(array(&dashboard["panels"]), &mut out);
    out
}

fn variables(dashboard: &Json) -> &[Json] {
    array(&dashboard["templating"]["list"])
}

/// The query text of a template variable (Grafana stores a string or an object).
fn variable_query(variable: &Json) -> &str {
    variable["query"]
        .as_str()
        .or_else(|| variable["query"]["query"].as_str())
        .unwrap_or_default()
}

/// Names of the Grafana variables referenced as `$name`, `${name}` or `${name:format}`.
fn referenced_variables(text: &str) -> BTreeSet<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '$' {
            let braced = chars.get(i + 1) == Some(&'{');
            let mut j = if braced { i + 2 } else { i + 1 };
            let start = j;
            while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            if j > start {
                names.insert(chars[start..j].iter().collect());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    names
}

fn uses_datasource_variable(value: &Json) -> bool {
    value["uid"].as_str() == Some("${datasource}")
}

#[test]
fn dashboards_have_unique_uids_and_a_datasource_variable() -> TestResult {
    let mut uids = BTreeMap::new();
    for (file, dashboard) in dashboards()? {
        let uid = dashboard["uid"].as_str().unwrap_or_default();
        assert!(!uid.is_empty(), "{file}: no uid");
        assert!(uid.len() <= 40, "{file}: uid longer than 40 characters");
        if let Some(other) = uids.insert(uid.to_string(), file.clone()) {
            panic!("{file}: uid {uid} is also used by {other}");
        }
        assert!(
            dashboard["title"].as_str().is_some_and(|t| !t.is_empty()),
            "{file}: no title"
        );
        assert!(
            dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 38),
            "{file}: schemaVersion"
        );
        let datasource = variables(&dashboard)
            .iter()
            .find(|v| v["name"] == "datasource")
            .ok_or(format!("{file}: no `datasource` variable"))?;
        assert_eq!(
            datasource["type"], "datasource",
            "{file}: `datasource` must be of type datasource"
        );
        assert_eq!(
            datasource["query"], "prometheus",
            "{file}: `datasource` must list Prometheus"
        );
        let names: BTreeSet<&str> = variables(&dashboard)
            .iter()
            .filter_map(|v| v["name"].as_str())
            .collect();
        assert!(names.contains("target"), "{file}: no `target` variable");
    }
    Ok(())
}

#[test]
fn dashboard_panels_have_a_unit_a_description_and_the_datasource_variable() -> TestResult {
    let mut errors = Vec::new();
    for (file, dashboard) in dashboards()? {
        let mut ids = BTreeSet::new();
        for panel in panels(&dashboard) {
            let title = panel["title"].as_str().unwrap_or("<untitled>");
            let place = format!("{file}: panel `{title}`");
            if !panel["id"].as_u64().is_some_and(|id| ids.insert(id)) {
                errors.push(format!("{place}: missing or duplicate id"));
            }
            if panel["type"] == "row" {
                continue;
            }
            let description = panel["description"].as_str().unwrap_or_default();
            if description.len() < 40 {
                errors.push(format!(
                    "{place}: needs a description telling the operator what to do"
                ));
            }
            let unit = panel["fieldConfig"]["defaults"]["unit"]
                .as_str()
                .unwrap_or_default();
            if !GRAFANA_UNITS.contains(&unit) {
                errors.push(format!(
                    "{place}: unit `{unit}` is missing or not in {GRAFANA_UNITS:?}"
                ));
            }
            for rule in array(&panel["fieldConfig"]["overrides"]) {
                for property in array(&rule["properties"]) {
                    if property["id"] == "unit" {
                        let unit = property["value"].as_str().unwrap_or_default();
                        if !GRAFANA_UNITS.contains(&unit) {
                            errors.push(format!("{place}: override unit `{unit}` is unknown"));
                        }
                    }
                }
            }
            if !uses_datasource_variable(&panel["datasource"]) {
                errors.push(format!("{place}: datasource must be ${{datasource}}"));
            }
            let targets = array(&panel["targets"]);
            if targets.is_empty() {
                errors.push(format!("{place}: no query"));
            }
            for target in targets {
                if !uses_datasource_variable(&target["datasource"]) {
                    errors.push(format!("{place}: a query does not use ${{datasource}}"));
                }
                if target["expr"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .is_empty()
                {
                    errors.push(format!("{place}: a query has no expr"));
                }
            }
        }
        for variable in variables(&dashboard) {
            if variable["type"] == "query" && !uses_datasource_variable(&variable["datasource"]) {
                errors.push(format!(
                    "{file}: variable {} must use ${{datasource}}",
                    variable["name"]
                ));
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}

/// Finds each call of `function` (as a whole identifier) and returns its argument text.
fn call_arguments<'a>(expr: &'a str, function: &str) -> Vec<&'a str> {
    let bytes = expr.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = expr[from..].find(function) {
        let start = from + pos;
        let end = start + function.len();
        from = end;
        let before_ok =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let rest = expr[end..].trim_start();
        if !before_ok || !rest.starts_with('(') {
            continue;
        }
        let open = expr.len() - rest.len();
        let mut depth = 0;
        for (k, b) in expr[open..].bytes().enumerate() {
            match b {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(&expr[open + 1..open + k]);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn dashboard_rates_use_rate_interval_and_variables_exist() -> TestResult {
    let mut errors = Vec::new();
    let mut rates = 0;
    for (file, dashboard) in dashboards()? {
        let defined: BTreeSet<String> = variables(&dashboard)
            .iter()
            .filter_map(|v| v["name"].as_str().map(str::to_string))
            .collect();
        let mut texts: Vec<(String, String)> = Vec::new();
        for panel in panels(&dashboard) {
            let title = panel["title"].as_str().unwrap_or("<untitled>");
            for target in array(&panel["targets"]) {
                let expr = target["expr"].as_str().unwrap_or_default().to_string();
                texts.push((format!("{file}: panel `{title}`"), expr));
            }
        }
        for variable in variables(&dashboard) {
            let name = variable["name"].as_str().unwrap_or_default();
            texts.push((
                format!("{file}: variable `{name}`"),
                variable_query(variable).to_string(),
            ));
        }
        for (place, text) in &texts {
            for function in ["rate", "irate", "increase"] {
                for args in call_arguments(text, function) {
                    rates += 1;
                    if !args.contains("[$__rate_interval]") {
                        errors.push(format!(
                            "{place}: {function}() without [$__rate_interval]: {text}"
                        ));
                    }
                }
            }
            for name in referenced_variables(text) {
                if !defined.contains(&name) && !GRAFANA_BUILTINS.contains(&name.as_str()) {
                    errors.push(format!("{place}: variable ${name} is not defined"));
                }
            }
        }
    }
    assert!(rates > 0, "no rate() found in the dashboards");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}

#[test]
fn dashboard_metrics_and_labels_exist_in_the_catalog() -> TestResult {
    let recorded: BTreeSet<String> = rules()?.into_iter().filter_map(|r| r.record).collect();
    let mut errors = Vec::new();
    let mut used = BTreeSet::new();
    for (file, dashboard) in dashboards()? {
        for panel in panels(&dashboard) {
            let title = panel["title"].as_str().unwrap_or("<untitled>");
            for target in array(&panel["targets"]) {
                let expr = target["expr"].as_str().unwrap_or_default();
                check_selectors(
                    &format!("{file}: panel `{title}`"),
                    expr,
                    &recorded,
                    &mut errors,
                );
                used.extend(selectors(expr).into_iter().map(|s| s.metric));
            }
        }
        for variable in variables(&dashboard) {
            let name = variable["name"].as_str().unwrap_or_default();
            for text in [
                variable_query(variable),
                variable["definition"].as_str().unwrap_or_default(),
            ] {
                check_selectors(
                    &format!("{file}: variable `{name}`"),
                    text,
                    &recorded,
                    &mut errors,
                );
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(
        used.len() >= 20,
        "the dashboards use only {} metrics: {used:?}",
        used.len()
    );
    Ok(())
}
