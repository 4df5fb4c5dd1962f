//! Checks the monitoring assets shipped with the exporter: the Prometheus alert rules and their
//! `promtool` unit tests, the Alertmanager example, the runbook and the Grafana dashboards.
//!
//! `promtool` (Debian package `prometheus`) and `amtool` (Debian package `prometheus-alertmanager`)
//! must be installed: these tests fail, never skip, when they are missing. Set `PROMTOOL` or `AMTOOL`
//! to use binaries that are not on `PATH`.
//!
//! Every metric and label name used by a rule or a dashboard must exist in
//! [`redis_streams_exporter::metrics::catalog`], so renaming a metric cannot silently break them.
//! Every aggregation and join of the rules, the Alertmanager examples' grouping and inhibitions and
//! the dashboards' aggregations keep `job` and `instance` apart wherever they keep `target`, so two
//! exporters never merge or mask each other; every `runbook_url` is built from one base
//! (`scripts/gen-alerts.py`) and lands on a section of the runbook.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;

use redis_streams_exporter::metrics::catalog;
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

use crate::lean_shape::{Changes, lean_document};

type TestResult = Result<(), Box<dyn Error>>;

/// The shipped rule files: the alerts, and the delay-objective (SLO) recording rules and alerts.
const RULE_FILES: &[&str] = &[
    "alerts/redis-streams.rules.yml",
    "alerts/redis-streams-slo.rules.yml",
];
const RULE_TESTS_DIR: &str = "alerts/tests";
const ALERTMANAGER_EXAMPLE: &str = "alerts/alertmanager.example.yml";
const ALERTMANAGER_DEMO: &str = "deploy/alertmanager/alertmanager.yml";
const GEN_ALERTS: &str = "scripts/gen-alerts.py";
const RUNBOOK: &str = "alerts/runbook.md";
const DASHBOARDS_DIR: &str = "dashboards";
const SEVERITIES: &[&str] = &["critical", "warning", "info"];
/// Alerts on a gauge that needs no `for:`: what it counts took its own time to become true and
/// does not flap. A pending entry delivered `poison_delivery_count` times was retried that many
/// times already.
const ACCUMULATED_EVIDENCE: &[&str] = &["RedisStreamsPoisonEntries"];
/// Labels Prometheus adds at scrape time, on top of the labels of the catalog.
const SCRAPE_LABELS: &[&str] = &["job", "instance"];
/// Labels that say which target, stream, group or consumer a series is about: wherever a label list
/// keeps one of them, it must keep [`SCRAPE_LABELS`] too.
const IDENTITY_LABELS: &[&str] = &["target", "stream", "group", "consumer"];
/// Values of the `scope` label of the alerts, each with the labels that identify what it is about.
const SCOPES: &[(&str, &[&str])] = &[
    ("exporter", &["job", "instance"]),
    ("target", &["job", "instance", "target"]),
    ("stream", &["job", "instance", "target", "stream"]),
    ("group", &["job", "instance", "target", "stream", "group"]),
];
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

/// Runs `tool args...` in the crate root: its program (`env_var`, or `default` on `PATH`) and what
/// it answered. A tool that is not installed is a failure with instructions, never a skip.
fn tool_output(
    env_var: &str,
    default: &str,
    package: &str,
    args: &[&str],
) -> (String, std::process::Output) {
    let program = std::env::var(env_var).unwrap_or_else(|_| default.to_string());
    match Command::new(&program)
        .args(args)
        .current_dir(root())
        .output()
    {
        Ok(output) => (program, output),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!(
                "`{program}` was not found: install the Debian package `{package}` \
                 (apt-get install {package}) or set {env_var} to the binary. \
                 The monitoring assets cannot be checked without it."
            );
        }
        Err(e) => panic!("cannot run `{program}`: {e}"),
    }
}

/// What a tool run that failed said, for the test's failure.
fn tool_failure(program: &str, args: &[&str], output: &std::process::Output) -> String {
    format!(
        "`{program} {}` failed with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    )
}

/// Runs `tool args...` in the crate root and fails with its output unless it succeeds.
fn run_tool(env_var: &str, default: &str, package: &str, args: &[&str]) -> TestResult {
    let (program, output) = tool_output(env_var, default, package, args);
    assert!(
        output.status.success(),
        "{}",
        tool_failure(&program, args, &output)
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
    let mut args = vec!["check", "rules"];
    args.extend(RULE_FILES);
    promtool(&args)
}

/// The test cases of a promtool test file.
fn test_cases(doc: &Yaml) -> usize {
    doc["tests"].as_sequence().map_or(0, Vec::len)
}

/// The unit tests, on the input series as they are written: the shape the exporter serves with
/// `series = "full"`.
#[test]
fn promtool_unit_tests_of_the_alert_rules_pass() -> TestResult {
    let files: Vec<String> = files_in(RULE_TESTS_DIR, &[".yml", ".yaml"])?
        .iter()
        .map(|p| relative(p))
        .collect();
    for file in &files {
        let doc: Yaml = serde_norway::from_str(&read(file)?)?;
        println!("{file}: {} test cases, full series", test_cases(&doc));
    }
    let mut args = vec!["test", "rules"];
    args.extend(files.iter().map(String::as_str));
    promtool(&args)
}

/// The same unit tests, with the same assertions, on the lean shape of their input series (the
/// exporter's default), derived from the full shape by each family's lean policy in the catalog
/// (`lean_shape`): every alert gives the same results in both. The derived files are written to a
/// temporary directory, their rule files made absolute; a failure keeps them and names them.
#[test]
fn promtool_unit_tests_of_the_alert_rules_pass_on_lean_series() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut files = Vec::new();
    let mut total = Changes::default();
    for path in files_in(RULE_TESTS_DIR, &[".yml", ".yaml"])? {
        let mut doc: Yaml = serde_norway::from_str(&std::fs::read_to_string(&path)?)?;
        let changes = lean_document(&mut doc).map_err(|e| format!("{}: {e}", relative(&path)))?;
        total.thinned += changes.thinned;
        total.removed += changes.removed;
        let folder = path.parent().ok_or("a test file without a folder")?;
        for rule_file in doc["rule_files"]
            .as_sequence_mut()
            .ok_or_else(|| format!("{}: no rule_files", relative(&path)))?
        {
            let name = rule_file.as_str().ok_or("a rule file that is not a path")?;
            let absolute = folder.join(name).canonicalize()?;
            *rule_file = Yaml::from(absolute.display().to_string());
        }
        let name = path.file_name().ok_or("a test file without a name")?;
        let lean = dir.path().join(name);
        std::fs::write(&lean, serde_norway::to_string(&doc)?)?;
        println!(
            "{}: {} test cases, lean series ({} series thinned, {} removed)",
            relative(&path),
            test_cases(&doc),
            changes.thinned,
            changes.removed
        );
        files.push(lean.display().to_string());
    }
    assert!(
        total.thinned > 0 && total.removed > 0,
        "the lean shape changed nothing: {total:?}"
    );
    let mut args = vec!["test", "rules"];
    args.extend(files.iter().map(String::as_str));
    let (program, output) = tool_output("PROMTOOL", "promtool", "prometheus", &args);
    if !output.status.success() {
        let kept = dir.keep();
        panic!(
            "on the lean shape of the series (files kept in {}): {}",
            kept.display(),
            tool_failure(&program, &args, &output)
        );
    }
    Ok(())
}

#[test]
fn amtool_checks_the_alertmanager_example() -> TestResult {
    amtool(&["check-config", ALERTMANAGER_EXAMPLE, ALERTMANAGER_DEMO])
}

/// Every `runbook_url` is the one base of `scripts/gen-alerts.py` plus the alert name: the script's
/// `--check` fails when a rule has none or another one.
#[test]
fn runbook_urls_are_built_from_one_base() -> TestResult {
    run_tool("PYTHON3", "python3", "python3", &[GEN_ALERTS, "--check"])
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
                    .replace("$__range_s", "3600")
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
                "{place}: `{}` is not in the metric catalog (src/metrics/catalog/)",
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
    let mut rules = Vec::new();
    for file in RULE_FILES {
        let doc: Yaml = serde_norway::from_str(&read(file)?)?;
        rules.extend(rules_of(&doc)?);
    }
    Ok(rules)
}

fn rules_of(doc: &Yaml) -> Result<Vec<Rule>, Box<dyn Error>> {
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

/// True for an event alert: the rise of one counter (`increase(x_total[w]) > 0`), which fires at the
/// first evaluation that sees it and needs no `for:` (a `for:` would let a short loss slip through).
fn is_event(rule: &Rule) -> bool {
    let compact: String = rule.expr.split_whitespace().collect();
    let metrics = selectors(&rule.expr);
    let counter = metrics.first().map(|m| m.metric.as_str());
    // The increase of one counter, alone or beside the time of the counter's last event (which
    // covers an event counted before Prometheus's first scrape of the series).
    let alone = compact.ends_with(")>0") && metrics.len() == 1;
    let with_time = compact.contains(")>0or(")
        && metrics.iter().all(|m| {
            Some(m.metric.as_str()) == counter || m.metric.ends_with("_timestamp_seconds")
        });
    compact.starts_with("increase(")
        && counter.is_some_and(|c| c.ends_with("_total"))
        && (alone || with_time)
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
    let mut bases = BTreeSet::new();
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
        if !for_duration.chars().any(|c| c.is_ascii_digit() && c != '0')
            && !is_event(&rule)
            && !ACCUMULATED_EVIDENCE.contains(&name.as_str())
        {
            errors.push(format!(
                "{place}: needs a non-zero `for:` (only the increase of a counter, or evidence that took its own time to accumulate, may go without)"
            ));
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
        match runbook_url.split_once('#') {
            None => errors.push(format!(
                "{place}: runbook_url `{runbook_url}` has no #anchor"
            )),
            Some((base, anchor)) => {
                bases.insert(base.to_string());
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
        match rule.raw["labels"]["scope"].as_str() {
            Some(scope) if SCOPES.iter().any(|(s, _)| *s == scope) => {}
            other => errors.push(format!(
                "{place}: scope label {other:?} is not one of {:?}",
                SCOPES.iter().map(|(s, _)| *s).collect::<Vec<_>>()
            )),
        }
    }
    if bases.len() != 1 || !bases.iter().all(|b| b.ends_with("/alerts/runbook.md")) {
        errors.push(format!(
            "every runbook_url must share one base ending in /alerts/runbook.md: {bases:?}"
        ));
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

/// A rule line that keeps only groups with a lag count, above 0: a backlog is counted, whoever
/// counted it (the size of the count, and so its precision, does not matter).
const LAG_COUNT_KNOWN: &str =
    "and on(job, instance, target, stream, group) (redis_streams_group_lag > 0)";
/// The rule line that keeps only groups whose lag count Redis counted, and the one that keeps only
/// estimated counts (whitespace removed). Lean series leave `lag_estimated` out where it is 0, so
/// both read its 1s: an `== 0` would never match there.
const LAG_COUNTED_BY_REDIS: &str =
    "unlesson(job,instance,target,stream,group)(redis_streams_group_lag_estimated==1)";
const LAG_ESTIMATED: &str =
    "andon(job,instance,target,stream,group)(redis_streams_group_lag_estimated==1)";

/// Alerts on the lag count page only when Redis counted it; an estimated count only ever gives info
/// alerts. Alerts on the lag in seconds use it whatever `lag_estimated` says: it comes from entry IDs
/// and the server clock, and is exact.
#[test]
fn lag_count_alerts_never_page_on_an_estimate_and_lag_seconds_alerts_ignore_it() -> TestResult {
    let mut errors = Vec::new();
    let mut count_alerts = 0;
    let mut seconds_alerts = 0;
    for rule in rules()? {
        let Some(name) = &rule.alert else { continue };
        // A line that only asks whether the lag count is known (its value, and so who counted
        // it, does not matter) does not read the count.
        let reads: String = rule
            .expr
            .lines()
            .filter(|l| l.trim() != LAG_COUNT_KNOWN)
            .collect::<Vec<_>>()
            .join("\n");
        let metrics: BTreeSet<String> = selectors(&reads).into_iter().map(|s| s.metric).collect();
        let compact: String = rule.expr.split_whitespace().collect();
        let redis_lag = compact.contains(LAG_COUNTED_BY_REDIS);
        let estimated = compact.contains(LAG_ESTIMATED);
        if compact.contains("redis_streams_group_lag_estimated==0") {
            errors.push(format!(
                "{name}: reads redis_streams_group_lag_estimated == 0, which lean series leave \
                 out: select the counts Redis counted with `unless on(...) (... == 1)`"
            ));
        }
        let severity = rule.raw["labels"]["severity"].as_str().unwrap_or_default();
        if metrics.contains("redis_streams_group_lag") {
            count_alerts += 1;
            match (redis_lag, estimated) {
                (true, false) => {}
                (false, true) if severity == "info" => {}
                (false, true) => errors.push(format!(
                    "{name}: on an estimated lag count it must be severity info"
                )),
                _ => errors.push(format!(
                    "{name}: reads the lag count, so it must leave out the estimated counts \
                     (`unless on(...) (redis_streams_group_lag_estimated == 1)`), or keep only \
                     them (`and on(...) (... == 1)`) with severity info"
                )),
            }
        } else if metrics.contains("redis_streams_group_lag_seconds") {
            seconds_alerts += 1;
            if metrics.contains("redis_streams_group_lag_estimated") {
                errors.push(format!(
                    "{name}: reads only the lag in seconds, which is exact: it must not depend on \
                     redis_streams_group_lag_estimated"
                ));
            }
        }
    }
    assert!(
        count_alerts >= 2 && seconds_alerts >= 3,
        "expected lag count and lag seconds alerts, found {count_alerts} and {seconds_alerts}"
    );
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}

/// Minutes of a promtool duration such as `7m` or `1h30m` (the test files use whole minutes).
fn minutes(duration: &str) -> Option<u64> {
    let mut total = 0;
    let mut number = String::new();
    for c in duration.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number.parse().ok()?;
        number.clear();
        total += match c {
            'm' => n,
            'h' => n * 60,
            _ => return None,
        };
    }
    number.is_empty().then_some(total)
}

/// Every alert has a promtool case where it fires and, in the same test, a case one evaluation step
/// (1m) earlier where it does not: the boundary of its `for:` (or, for an event alert, the first
/// evaluation that sees the counter rise).
#[test]
fn every_alert_has_promtool_cases_at_and_one_step_before_its_boundary() -> TestResult {
    // alertname -> set of (test name, minute) where it fires / is quiet.
    let mut firing: BTreeMap<String, BTreeSet<(String, u64)>> = BTreeMap::new();
    let mut quiet: BTreeMap<String, BTreeSet<(String, u64)>> = BTreeMap::new();
    for file in files_in(RULE_TESTS_DIR, &[".yml", ".yaml"])? {
        let text = std::fs::read_to_string(&file)?;
        let doc: Yaml = serde_norway::from_str(&text)?;
        assert_eq!(
            doc["evaluation_interval"].as_str(),
            Some("1m"),
            "{}: the step is 1m",
            relative(&file)
        );
        for test in doc["tests"].as_sequence().ok_or("rule tests: no tests")? {
            let test_name = test["name"].as_str().unwrap_or_default().to_string();
            for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
                let name = case["alertname"]
                    .as_str()
                    .ok_or("rule tests: case without alertname")?;
                let at = case["eval_time"]
                    .as_str()
                    .and_then(minutes)
                    .ok_or("rule tests: eval_time not in whole minutes")?;
                let fires = case["exp_alerts"]
                    .as_sequence()
                    .is_some_and(|a| !a.is_empty());
                let map = if fires { &mut firing } else { &mut quiet };
                map.entry(name.to_string())
                    .or_default()
                    .insert((test_name.clone(), at));
            }
        }
    }
    let mut errors = Vec::new();
    for rule in rules()? {
        let Some(name) = &rule.alert else { continue };
        let fired = firing.get(name).cloned().unwrap_or_default();
        let silent = quiet.get(name).cloned().unwrap_or_default();
        if fired.is_empty() {
            errors.push(format!("{name}: no promtool case where it fires"));
        }
        let boundary = fired
            .iter()
            .any(|(test, at)| *at > 0 && silent.contains(&(test.clone(), at - 1)));
        if !boundary {
            errors.push(format!(
                "{name}: no promtool test where it is quiet one step (1m) before a case where it fires"
            ));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}

/// The labels of a promtool series such as `metric{a="x",b="y"}` (values without escapes, as
/// the test files write them).
fn series_labels(series: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let Some(inner) = series
        .split_once('{')
        .and_then(|(_, rest)| rest.rsplit_once('}'))
        .map(|(inner, _)| inner)
    else {
        return labels;
    };
    let mut rest = inner;
    while let Some((name, after)) = rest.split_once("=\"") {
        let Some((value, tail)) = after.split_once('"') else {
            break;
        };
        labels.insert(
            name.trim().trim_start_matches(',').trim().to_string(),
            value.to_string(),
        );
        rest = tail;
    }
    labels
}

#[test]
fn series_labels_reads_promtool_series() {
    let labels = series_labels(
        r#"redis_streams_stream_max_delay_seconds{job="j",instance="a:9763",target="main",stream="orders"}"#,
    );
    assert_eq!(labels.len(), 4);
    assert_eq!(labels["instance"], "a:9763");
    assert_eq!(labels["stream"], "orders");
    assert!(series_labels("up").is_empty());
}

/// An alert whose threshold derives from `max_delay` (from the stream's max_delay where
/// one is configured, defaults otherwise) has promtool cases where it fires for a stream with a
/// configured max_delay and for one without: both branches of its threshold are exercised, the
/// configured one at the labels of that very exporter, target and stream. An alert without a default
/// branch (about configured streams only) never fires for a stream without one.
#[test]
fn max_delay_alerts_fire_in_promtool_cases_with_and_without_a_configured_max_delay() -> TestResult {
    const MAX_DELAY: &str = "redis_streams_stream_max_delay_seconds";
    const KEY: [&str; 4] = ["job", "instance", "target", "stream"];
    // alertname -> (fired for a stream with a max_delay, fired for one without).
    let mut seen: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for file in files_in(RULE_TESTS_DIR, &[".yml", ".yaml"])? {
        let doc: Yaml = serde_norway::from_str(&std::fs::read_to_string(&file)?)?;
        for test in doc["tests"].as_sequence().ok_or("rule tests: no tests")? {
            let configured: BTreeSet<Vec<String>> = test["input_series"]
                .as_sequence()
                .into_iter()
                .flatten()
                .filter_map(|s| s["series"].as_str())
                .filter(|s| s.starts_with(&format!("{MAX_DELAY}{{")))
                .map(|s| {
                    let labels = series_labels(s);
                    KEY.iter()
                        .map(|k| labels.get(*k).cloned().unwrap_or_default())
                        .collect()
                })
                .collect();
            for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
                let Some(name) = case["alertname"].as_str() else {
                    continue;
                };
                for alert in case["exp_alerts"].as_sequence().into_iter().flatten() {
                    let key: Vec<String> = KEY
                        .iter()
                        .map(|k| {
                            alert["exp_labels"][*k]
                                .as_str()
                                .unwrap_or_default()
                                .to_string()
                        })
                        .collect();
                    let entry = seen.entry(name.to_string()).or_default();
                    if configured.contains(&key) {
                        entry.0 = true;
                    } else {
                        entry.1 = true;
                    }
                }
            }
        }
    }
    let mut errors = Vec::new();
    let mut checked = 0;
    for rule in rules()? {
        let Some(name) = &rule.alert else { continue };
        if !selectors(&rule.expr).iter().any(|s| s.metric == MAX_DELAY) {
            continue;
        }
        checked += 1;
        let (with, without) = seen.get(name).copied().unwrap_or_default();
        if !with {
            errors.push(format!(
                "{name}: no promtool case where it fires for a stream with a configured max_delay"
            ));
        }
        // An alert with a default for streams without a max_delay says so with an `unless` on
        // max_delay; one without that branch (a retention margin under max_delay) is about
        // configured streams only and must not fire for the others.
        let has_default = rule.expr.contains(&format!(
            "unless on(job, instance, target, stream) {MAX_DELAY}"
        ));
        if has_default && !without {
            errors.push(format!(
                "{name}: no promtool case where it fires for a stream without max_delay (the default)"
            ));
        }
        if !has_default && without {
            errors.push(format!(
                "{name}: has no default for streams without max_delay, yet fires for one"
            ));
        }
    }
    assert!(checked >= 4, "only {checked} alerts derive from max_delay");
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
            &format!("{} {name}", rule.group),
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

// ------------------------------------------------------------------------------------------------
// Identity: job and instance kept apart

/// Every label list (`by`, `without`, `on`, `ignoring`, `group_left`, `group_right`) of an expression,
/// with its keyword.
fn label_lists(expr: &str) -> Vec<(String, Vec<String>)> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i);
        } else if c == '{' {
            let (_, end) = matcher_labels(&chars, i);
            i = end;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            if LABEL_LIST_KEYWORDS.contains(&word.as_str()) && chars.get(j) == Some(&'(') {
                let close = chars[j..]
                    .iter()
                    .position(|&c| c == ')')
                    .map_or(chars.len(), |p| j + p);
                let inner: String = chars[j + 1..close].iter().collect();
                let labels = inner
                    .split(',')
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect();
                out.push((word, labels));
                i = close + 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Problems of one expression: a label list that keeps a target, stream, group or consumer must keep
/// job and instance too (`by`, `on`, `group_left`/`group_right` copy labels: only `by` and `on`
/// matter), and `without`/`ignoring` must never drop job or instance.
fn identity_problems(place: &str, expr: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (keyword, labels) in label_lists(expr) {
        let has = |l: &str| labels.iter().any(|x| x == l);
        match keyword.as_str() {
            "by" | "on" => {
                let identifies = IDENTITY_LABELS.iter().any(|l| has(l));
                if identifies && !SCRAPE_LABELS.iter().all(|l| has(l)) {
                    problems.push(format!(
                        "{place}: `{keyword} ({})` keeps {IDENTITY_LABELS:?} labels but not job and instance",
                        labels.join(", ")
                    ));
                }
            }
            "without" | "ignoring" if SCRAPE_LABELS.iter().any(|l| has(l)) => {
                problems.push(format!(
                    "{place}: `{keyword} ({})` drops job or instance",
                    labels.join(", ")
                ));
            }
            _ => {}
        }
    }
    problems
}

/// Aggregation operators of PromQL.
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

/// Aggregations of an expression that have no `by`/`without` clause (they merge every exporter).
fn unlabelled_aggregations(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i);
        } else if c == '{' {
            let (_, end) = matcher_labels(&chars, i);
            i = end;
        } else if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            if AGGREGATIONS.contains(&word.as_str()) && chars.get(j) == Some(&'(') {
                // `agg (...) by (...)`: look past the argument for a trailing clause.
                let mut depth = 0;
                let mut k = j;
                while k < chars.len() {
                    match chars[k] {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    k += 1;
                }
                let rest: String = chars[(k + 1).min(chars.len())..].iter().collect();
                let rest = rest.trim_start();
                if !rest.starts_with("by") && !rest.starts_with("without") {
                    out.push(word);
                }
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn identity_scanner_finds_label_lists_and_bare_aggregations() {
    let expr = r#"max by (job, instance, target) (x{target="by (y)"}) > on(target) group_left() count(y) unless ignoring(instance) z"#;
    let lists = label_lists(expr);
    assert_eq!(
        lists,
        [
            (
                "by".to_string(),
                vec!["job".into(), "instance".into(), "target".into()]
            ),
            ("on".to_string(), vec!["target".into()]),
            ("group_left".to_string(), vec![]),
            ("ignoring".to_string(), vec!["instance".into()]),
        ]
    );
    assert_eq!(identity_problems("x", expr).len(), 2);
    assert_eq!(unlabelled_aggregations(expr), ["count"]);
    assert!(unlabelled_aggregations("sum(rate(x[5m])) by (job)").is_empty());
    assert!(unlabelled_aggregations("group by (job) (x)").is_empty());
}

/// In the rules, every aggregation names the labels it keeps, and every list that keeps a target,
/// stream or group keeps job and instance: an alert is always about one exporter's target.
#[test]
fn rules_keep_job_and_instance_in_every_aggregation_and_join() -> TestResult {
    let mut errors = Vec::new();
    let mut lists = 0;
    for rule in rules()? {
        let name = rule
            .alert
            .clone()
            .or(rule.record.clone())
            .unwrap_or_default();
        let place = format!("{} {name}", rule.group);
        errors.extend(identity_problems(&place, &rule.expr));
        lists += label_lists(&rule.expr).len();
        for agg in unlabelled_aggregations(&rule.expr) {
            errors.push(format!(
                "{place}: `{agg}(...)` without by/without merges every exporter and target"
            ));
        }
    }
    assert!(lists >= 40, "only {lists} label lists found in the rules");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}

// ------------------------------------------------------------------------------------------------
// Alertmanager

/// A label matcher of an Alertmanager config (`name="v"`, `name!="v"`, `name=~"re"`, `name!~"re"`).
#[derive(Debug)]
struct Matcher {
    label: String,
    negated: bool,
    pattern: Pattern,
}

/// The small regex subset the configs use, fully anchored: literals, groups with alternatives,
/// `?` after a group, and `.*`/`.+`.
#[derive(Clone, Debug)]
enum Piece {
    Literal(String),
    Any { at_least_one: bool },
    Alternatives(Vec<Vec<Piece>>, bool),
}

#[derive(Debug)]
struct Pattern(Vec<Vec<Piece>>);

fn parse_alternatives(chars: &[char], i: &mut usize) -> Vec<Vec<Piece>> {
    let mut alternatives = vec![Vec::new()];
    while *i < chars.len() {
        let c = chars[*i];
        match c {
            '|' => {
                alternatives.push(Vec::new());
                *i += 1;
            }
            ')' => return alternatives,
            '(' => {
                *i += 1;
                let inner = parse_alternatives(chars, i);
                *i += 1; // ')'
                let optional = chars.get(*i) == Some(&'?');
                if optional {
                    *i += 1;
                }
                alternatives
                    .last_mut()
                    .unwrap()
                    .push(Piece::Alternatives(inner, optional));
            }
            '.' if matches!(chars.get(*i + 1), Some('*') | Some('+')) => {
                let at_least_one = chars[*i + 1] == '+';
                alternatives
                    .last_mut()
                    .unwrap()
                    .push(Piece::Any { at_least_one });
                *i += 2;
            }
            _ => {
                assert!(
                    c.is_ascii_alphanumeric() || c == '_' || c == '-',
                    "unsupported regex character {c:?}"
                );
                alternatives
                    .last_mut()
                    .unwrap()
                    .push(Piece::Literal(c.to_string()));
                *i += 1;
            }
        }
    }
    alternatives
}

fn matches_pieces(pieces: &[Piece], text: &str) -> bool {
    let Some((first, rest)) = pieces.split_first() else {
        return text.is_empty();
    };
    match first {
        Piece::Literal(l) => text
            .strip_prefix(l.as_str())
            .is_some_and(|t| matches_pieces(rest, t)),
        Piece::Any { at_least_one } => {
            let from = usize::from(*at_least_one);
            (from..=text.len())
                .filter(|&k| text.is_char_boundary(k))
                .any(|k| matches_pieces(rest, &text[k..]))
        }
        Piece::Alternatives(alternatives, optional) => {
            (*optional && matches_pieces(rest, text))
                || alternatives.iter().any(|alt| {
                    let mut joined = alt.clone();
                    joined.extend_from_slice(rest);
                    matches_pieces(&joined, text)
                })
        }
    }
}

impl Pattern {
    fn parse(regex: &str) -> Pattern {
        let chars: Vec<char> = regex.chars().collect();
        let mut i = 0;
        Pattern(parse_alternatives(&chars, &mut i))
    }

    fn literal(value: &str) -> Pattern {
        Pattern(vec![vec![Piece::Literal(value.to_string())]])
    }

    fn matches(&self, text: &str) -> bool {
        self.0.iter().any(|alt| matches_pieces(alt, text))
    }
}

impl Matcher {
    fn parse(text: &str) -> Matcher {
        let (label, op, value) = ["!~", "=~", "!=", "="]
            .iter()
            .find_map(|op| text.split_once(op).map(|(l, v)| (l, *op, v)))
            .unwrap_or_else(|| panic!("bad matcher {text:?}"));
        let value = value.trim().trim_matches('"');
        Matcher {
            label: label.trim().to_string(),
            negated: op.starts_with('!'),
            pattern: if op.ends_with('~') {
                Pattern::parse(value)
            } else {
                Pattern::literal(value)
            },
        }
    }

    fn accepts(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.label).map_or("", String::as_str);
        self.pattern.matches(value) != self.negated
    }
}

#[test]
fn matcher_subset_behaves_like_alertmanager() {
    let labels = |name: &str, scope: &str| {
        BTreeMap::from([
            ("alertname".to_string(), name.to_string()),
            ("scope".to_string(), scope.to_string()),
        ])
    };
    let m = Matcher::parse(
        r#"alertname=~"RedisStreams(LagSecondsHigh|ProductionOutpacingConsumption(Estimated)?)""#,
    );
    assert!(m.accepts(&labels("RedisStreamsLagSecondsHigh", "group")));
    assert!(m.accepts(&labels(
        "RedisStreamsProductionOutpacingConsumptionEstimated",
        "group"
    )));
    assert!(!m.accepts(&labels("RedisStreamsLagSecondsHighX", "group")));
    assert!(!m.accepts(&labels("RedisStreamsLagSecondsCritical", "group")));
    assert!(Matcher::parse(r#"alertname=~"RedisStreams.+""#).accepts(&labels("RedisStreamsX", "")));
    assert!(!Matcher::parse(r#"alertname=~"RedisStreams.+""#).accepts(&labels("RedisStreams", "")));
    assert!(Matcher::parse(r#"scope=~"target|stream|group""#).accepts(&labels("", "stream")));
    assert!(!Matcher::parse(r#"scope=~"target|stream|group""#).accepts(&labels("", "exporter")));
    assert!(Matcher::parse(r#"alertname!="A""#).accepts(&labels("B", "")));
}

fn severity_rank(severity: &str) -> usize {
    SEVERITIES.len()
        - SEVERITIES
            .iter()
            .position(|s| *s == severity)
            .unwrap_or(SEVERITIES.len())
}

fn strings(value: &Yaml) -> Vec<String> {
    value
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(Yaml::as_str)
        .map(str::to_string)
        .collect()
}

/// The static labels of every alert (its name, severity and scope).
fn alert_labels() -> Result<Vec<BTreeMap<String, String>>, Box<dyn Error>> {
    let mut out = Vec::new();
    for rule in rules()? {
        let Some(name) = &rule.alert else { continue };
        let mut labels = BTreeMap::from([("alertname".to_string(), name.clone())]);
        for (k, v) in rule.raw["labels"].as_mapping().into_iter().flatten() {
            if let (Some(k), Some(v)) = (k.as_str(), v.as_str()) {
                labels.insert(k.to_string(), v.to_string());
            }
        }
        out.push(labels);
    }
    Ok(out)
}

fn identity_of(labels: &BTreeMap<String, String>) -> &'static [&'static str] {
    let scope = labels.get("scope").map_or("", String::as_str);
    SCOPES
        .iter()
        .find(|(s, _)| *s == scope)
        .map_or(&[], |(_, identity)| *identity)
}

#[test]
fn alertmanager_example_routes_by_severity_and_groups_per_exporter_and_group() -> TestResult {
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
    for (file, doc) in [
        (ALERTMANAGER_EXAMPLE, doc.clone()),
        (
            ALERTMANAGER_DEMO,
            serde_norway::from_str(&read(ALERTMANAGER_DEMO)?)?,
        ),
    ] {
        assert_eq!(
            strings(&doc["route"]["group_by"]),
            ["job", "instance", "target", "stream", "group"],
            "{file}: notifications are grouped per exporter, target, stream and group"
        );
        for route in routes {
            assert!(
                route["group_by"].is_null(),
                "{file}: a child route overrides group_by"
            );
        }
    }
    Ok(())
}

/// The inhibitions of the example: the infrastructure layers (an exporter down, a target down)
/// mute every alert above them per job and instance (and target); between the alerts of one stream
/// or group every rule runs to alerts of the same or a lower severity; compares only labels both sides carry (at least job and instance), matches alerts
/// that exist, and never mutes its own source. The demo stack's configuration has the same rules.
#[test]
fn alertmanager_inhibitions_keep_exporters_apart_and_never_mute_a_higher_severity() -> TestResult {
    let doc: Yaml = serde_norway::from_str(&read(ALERTMANAGER_EXAMPLE)?)?;
    let demo: Yaml = serde_norway::from_str(&read(ALERTMANAGER_DEMO)?)?;
    assert_eq!(
        doc["inhibit_rules"], demo["inhibit_rules"],
        "{ALERTMANAGER_DEMO} must inhibit exactly like {ALERTMANAGER_EXAMPLE}"
    );
    let alerts = alert_labels()?;
    let inhibits = doc["inhibit_rules"]
        .as_sequence()
        .ok_or("no inhibit_rules")?;
    let mut errors = Vec::new();
    let mut pairs = 0;
    let muted_by = |source: &str| -> Vec<String> {
        let mut names = Vec::new();
        for rule in inhibits {
            let sources: Vec<Matcher> = strings(&rule["source_matchers"])
                .iter()
                .map(|m| Matcher::parse(m))
                .collect();
            let targets: Vec<Matcher> = strings(&rule["target_matchers"])
                .iter()
                .map(|m| Matcher::parse(m))
                .collect();
            for s in alerts.iter().filter(|a| a["alertname"] == source) {
                if sources.iter().all(|m| m.accepts(s)) {
                    for t in alerts
                        .iter()
                        .filter(|t| targets.iter().all(|m| m.accepts(t)))
                    {
                        names.push(t["alertname"].clone());
                    }
                }
            }
        }
        names
    };
    let down = muted_by("RedisStreamsTargetDown");
    assert!(
        alerts
            .iter()
            .filter(|a| a["scope"] != "exporter" && a["alertname"] != "RedisStreamsTargetDown")
            .all(|a| down.contains(&a["alertname"])),
        "RedisStreamsTargetDown must mute every other alert of its target: {down:?}"
    );
    let exporter_down = muted_by("RedisStreamsExporterDown");
    assert!(
        alerts
            .iter()
            .filter(|a| a["scope"] != "exporter")
            .all(|a| exporter_down.contains(&a["alertname"])),
        "RedisStreamsExporterDown must mute every alert of its exporter's targets"
    );
    for (i, rule) in inhibits.iter().enumerate() {
        let place = format!("{ALERTMANAGER_EXAMPLE} inhibit_rules[{i}]");
        let sources: Vec<Matcher> = strings(&rule["source_matchers"])
            .iter()
            .map(|m| Matcher::parse(m))
            .collect();
        let targets: Vec<Matcher> = strings(&rule["target_matchers"])
            .iter()
            .map(|m| Matcher::parse(m))
            .collect();
        let equal = strings(&rule["equal"]);
        if !SCRAPE_LABELS.iter().all(|l| equal.iter().any(|e| e == l)) {
            errors.push(format!(
                "{place}: equal {equal:?} must hold job and instance"
            ));
        }
        let matched_sources: Vec<&BTreeMap<String, String>> = alerts
            .iter()
            .filter(|a| sources.iter().all(|m| m.accepts(a)))
            .collect();
        let matched_targets: Vec<&BTreeMap<String, String>> = alerts
            .iter()
            .filter(|a| targets.iter().all(|m| m.accepts(a)))
            .collect();
        if matched_sources.is_empty() || matched_targets.is_empty() {
            errors.push(format!("{place}: matches no source or no target alert"));
        }
        for s in &matched_sources {
            for t in &matched_targets {
                pairs += 1;
                let (sn, tn) = (&s["alertname"], &t["alertname"]);
                if sn == tn {
                    errors.push(format!("{place}: {sn} would mute itself"));
                }
                // An exporter or target that is down makes the alerts above it unknown, not less
                // important: those two may mute anything of theirs. Between the alerts of one
                // stream or group, a ticket never mutes a page.
                let infrastructure = matches!(s["scope"].as_str(), "exporter" | "target");
                if !infrastructure && severity_rank(&s["severity"]) < severity_rank(&t["severity"])
                {
                    errors.push(format!(
                        "{place}: {sn} ({}) mutes {tn} ({}), a higher severity",
                        s["severity"], t["severity"]
                    ));
                }
                for label in &equal {
                    let carried = identity_of(s).contains(&label.as_str())
                        && identity_of(t).contains(&label.as_str());
                    if !carried {
                        errors.push(format!(
                            "{place}: {sn} mutes {tn} on `{label}`, which one of them does not carry"
                        ));
                    }
                }
                // A group-level cause mutes only alerts of its own group.
                if identity_of(s).contains(&"group") && !equal.iter().any(|e| e == "group") {
                    errors.push(format!(
                        "{place}: {sn} is about one group: equal needs stream and group"
                    ));
                }
            }
        }
    }
    assert!(pairs >= 40, "only {pairs} inhibition pairs");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
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
        for name in ["job", "instance", "target"] {
            assert!(names.contains(name), "{file}: no `{name}` variable");
        }
    }
    Ok(())
}

/// Every query of every dashboard filters on the job and instance variables wherever it filters on
/// the target, every aggregation that keeps a target, stream, group or consumer keeps job and
/// instance (unless the query pins one exporter with exact matchers, as the stream drill-down does),
/// and on the dashboards that show many streams at once, every time series drawn per stream or group
/// is limited with topk/bottomk.
#[test]
fn dashboards_keep_exporters_apart_and_limit_their_lines() -> TestResult {
    let mut errors = Vec::new();
    let mut limited = 0;
    for (file, dashboard) in dashboards()? {
        let many_streams = variables(&dashboard)
            .iter()
            .all(|v| v["name"] != "stream" || v["multi"] == true);
        // (place, query, draws lines, must filter on $job and $instance)
        let mut texts: Vec<(String, String, bool, bool)> = Vec::new();
        for panel in panels(&dashboard) {
            let title = panel["title"].as_str().unwrap_or("<untitled>");
            let lines = panel["type"] == "timeseries";
            for target in array(&panel["targets"]) {
                let expr = target["expr"].as_str().unwrap_or_default().to_string();
                texts.push((format!("{file}: panel `{title}`"), expr, lines, true));
            }
        }
        for variable in variables(&dashboard) {
            let name = variable["name"].as_str().unwrap_or_default();
            // The job and instance variables are what the others filter on.
            let filtered = !matches!(name, "job" | "instance");
            texts.push((
                format!("{file}: variable `{name}`"),
                variable_query(variable).to_string(),
                false,
                filtered,
            ));
        }
        for (place, text, lines, filtered) in &texts {
            let pinned = text.contains("job=\"$job\"") && text.contains("instance=\"$instance\"");
            if text.contains("target=") && !(text.contains("job=") && text.contains("instance=")) {
                errors.push(format!(
                    "{place}: filters the target but not job and instance: {text}"
                ));
            }
            for selector in selectors(text) {
                if *filtered
                    && selector.metric.starts_with("redis_streams_")
                    && !(selector.labels.contains("job") && selector.labels.contains("instance"))
                {
                    errors.push(format!(
                        "{place}: `{}` is not filtered on $job and $instance",
                        selector.metric
                    ));
                }
            }
            if !pinned {
                errors.extend(identity_problems(place, text));
            }
            let per_stream = label_lists(text)
                .iter()
                .any(|(keyword, labels)| keyword == "by" && labels.iter().any(|l| l == "stream"));
            if many_streams && *lines && per_stream {
                if text.starts_with("topk(") || text.starts_with("bottomk(") {
                    limited += 1;
                } else {
                    errors.push(format!(
                        "{place}: draws one line per stream or group without topk/bottomk: {text}"
                    ));
                }
            }
        }
    }
    assert!(limited >= 10, "only {limited} limited time series queries");
    assert!(errors.is_empty(), "{}", errors.join("\n"));
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
                    // increase() over the whole time range is a total (a stat panel's "lost in
                    // the selected range"), and over an hour the groups table's loss within the
                    // data_loss hold; anything per point in time uses $__rate_interval.
                    let total = function == "increase"
                        && (args.contains("[$__range]") || args.contains("[1h]"));
                    if !args.contains("[$__rate_interval]") && !total {
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

/// The title of the collapsed row that holds the panels reading families lean series never write
/// (`Lean::Never`): they work for the streams configured `series = "full"` only.
const FULL_DETAIL_ROW: &str = "Detail (series = \"full\")";

/// Every panel that is not a row, with the title of the row it sits in: a collapsed row holds its
/// panels; an expanded one owns the panels after it, up to the next row (as Grafana lays them out).
fn panels_in_rows(dashboard: &Json) -> Vec<(Option<&str>, &Json)> {
    let mut out = Vec::new();
    let mut row = None;
    for panel in array(&dashboard["panels"]) {
        if panel["type"] == "row" {
            row = panel["title"].as_str();
            out.extend(array(&panel["panels"]).iter().map(|nested| (row, nested)));
        } else {
            out.push((row, panel));
        }
    }
    out
}

/// The dashboards work at the default lean series: every query outside the collapsed
/// [`FULL_DETAIL_ROW`] reads a family that lean series write (none that they never write), a stat
/// that reads only families lean series leave out for a healthy group (a 0 of `Lean::Unless`, a
/// group with nothing pending, consumers holding nothing) falls back with `or vector(` instead of
/// showing "No data", and every panel of that row reads a family only `series = "full"` writes and
/// says so in its description.
#[test]
fn dashboard_panels_read_what_lean_series_write_outside_the_full_detail_row() -> TestResult {
    let mut errors = Vec::new();
    let mut detail = 0;
    for (file, dashboard) in dashboards()? {
        for row in array(&dashboard["panels"]) {
            if row["type"] == "row" && row["title"] == FULL_DETAIL_ROW && row["collapsed"] != true {
                errors.push(format!(
                    "{file}: row `{FULL_DETAIL_ROW}` must be collapsed, so that its queries run only when opened"
                ));
            }
        }
        for (row, panel) in panels_in_rows(&dashboard) {
            let title = panel["title"].as_str().unwrap_or("<untitled>");
            let place = format!("{file}: panel `{title}`");
            let in_detail = row == Some(FULL_DETAIL_ROW);
            let mut reads_never = false;
            for target in array(&panel["targets"]) {
                let expr = target["expr"].as_str().unwrap_or_default();
                let families: Vec<(String, catalog::Lean)> = selectors(expr)
                    .into_iter()
                    .filter_map(|s| catalog::find(&s.metric).map(|def| (s.metric, def.lean)))
                    .collect();
                let never: Vec<&str> = families
                    .iter()
                    .filter(|(_, lean)| *lean == catalog::Lean::Never)
                    .map(|(name, _)| name.as_str())
                    .collect();
                reads_never |= !never.is_empty();
                if in_detail {
                    continue;
                }
                if !never.is_empty() {
                    errors.push(format!(
                        "{place}: reads {never:?}, which lean series never write: move the panel into the collapsed row `{FULL_DETAIL_ROW}`"
                    ));
                }
                if families.len() == never.len() {
                    errors.push(format!(
                        "{place}: a query reads no family that lean series write: {expr}"
                    ));
                }
                let healthy_group_has_one = families
                    .iter()
                    .any(|(_, lean)| *lean == catalog::Lean::Always);
                if panel["type"] == "stat" && !healthy_group_has_one && !expr.contains("or vector(")
                {
                    errors.push(format!(
                        "{place}: reads only families lean series leave out when nothing is wrong, so it shows \"No data\" for healthy groups: add `or vector(0)`: {expr}"
                    ));
                }
            }
            if in_detail {
                detail += 1;
                if !reads_never {
                    errors.push(format!(
                        "{place}: in row `{FULL_DETAIL_ROW}` but reads no family that only series = \"full\" writes: move it out"
                    ));
                }
                let description = panel["description"].as_str().unwrap_or_default();
                if !description.contains("series = \"full\"") {
                    errors.push(format!(
                        "{place}: its description must say that it needs series = \"full\""
                    ));
                }
            }
        }
    }
    assert!(
        detail >= 2,
        "only {detail} panels in a `{FULL_DETAIL_ROW}` row (the distributions)"
    );
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}
