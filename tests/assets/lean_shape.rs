//! The lean shape of a `promtool` rule test, derived from its full shape.
//!
//! The rule tests (`alerts/tests/`, and the ones `alerts_agree` generates) give their input series
//! in the shape the exporter serves with `series = "full"`: every sample, zeros included. Lean
//! series, the default, leave samples out by each family's [`Lean`] policy in the metric catalog,
//! and every alert must give the same results on both shapes. [`lean_document`] rewrites the
//! `input_series` of a test file into the lean shape, family by family:
//!
//! - [`Lean::Unless`]`(v)`: the samples whose value is `v` are left out;
//! - [`Lean::WhilePending`]: the samples at steps where the same group's
//!   `redis_streams_group_pending` series is 0 or missing are left out;
//! - [`Lean::Holders`]: the samples at steps where the same consumer's
//!   `redis_streams_consumer_pending` series is 0 or missing are left out (a consumer kept in
//!   lean for a rewritten name cannot be told from its series, and is taken as any other);
//! - [`Lean::Never`]: the series is removed;
//! - [`Lean::Always`], and every series that is not a `redis_streams_*` family of the catalog
//!   (Prometheus's `up`, the recording rules' series): unchanged.
//!
//! A sample left out right after a written one becomes `stale`, as Prometheus marks a series that
//! leaves a scrape; the steps after it are `_` (no sample) until one is written again. A `_` of
//! the full shape stays `_`, and a `stale` stays `stale` where the series was written just before.
//! A series left without any sample is removed. To decide step by step, the values are expanded
//! from promtool's notation (`a`, `a+bxn`, `a-bxn`, `axn`, `_`, `_xn`, `stale`, see [`expand`])
//! and written back in it ([`notation`]).

use std::collections::BTreeMap;

use redis_streams_exporter::metrics::catalog::{Lean, METRICS};
use serde_norway::Value as Yaml;

/// One evaluation step of a promtool input series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// A sample.
    Value(f64),
    /// No sample (`_`): the last sample stays visible within Prometheus's lookback.
    Missing,
    /// A staleness marker (`stale`): the series is gone from this step on.
    Stale,
}

/// A number of promtool's series notation: a float, or `Inf`/`NaN` with an optional sign.
fn number(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .map_err(|e| format!("`{text}` is not a number: {e}"))
}

/// The steps promtool reads from a series' `values`, as the Prometheus series parser expands
/// them: `a` one sample; `a+bxn` (or `a-bxn`) a and n more, each adding b to the one before;
/// `axn` a, n + 1 times; `_` no sample, `_xn` n steps without; `stale` a staleness marker.
pub fn expand(values: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for item in values.split_whitespace() {
        let (head, times) = match item.rsplit_once('x') {
            Some((head, n)) if !head.is_empty() && !n.is_empty() => {
                let n: usize = n
                    .parse()
                    .map_err(|e| format!("`{item}`: bad repetition `{n}`: {e}"))?;
                (head, Some(n))
            }
            _ => (item, None),
        };
        match (head, times) {
            ("_", times) => steps.extend(std::iter::repeat_n(Step::Missing, times.unwrap_or(1))),
            ("stale", None) => steps.push(Step::Stale),
            ("stale", Some(_)) => return Err(format!("`{item}`: a repeated `stale`")),
            (head, times) => {
                // The sign of the step is the first `+` or `-` after the start's first
                // character that is not an exponent's.
                let bytes = head.as_bytes();
                let split = (1..bytes.len()).find(|&i| {
                    matches!(bytes[i], b'+' | b'-') && !matches!(bytes[i - 1], b'e' | b'E')
                });
                let (start, step) = match split {
                    Some(i) => (number(&head[..i])?, Some(number(&head[i..])?)),
                    None => (number(head)?, None),
                };
                let Some(n) = times else {
                    if step.is_some() {
                        return Err(format!("`{item}`: a step without a repetition"));
                    }
                    steps.push(Step::Value(start));
                    continue;
                };
                let mut value = start;
                steps.push(Step::Value(value));
                for _ in 0..n {
                    // Added one step at a time, as promtool does, so the floats are the same.
                    value += step.unwrap_or(0.0);
                    steps.push(Step::Value(value));
                }
            }
        }
    }
    Ok(steps)
}

/// A value as promtool's notation writes it (the shortest text that reads back as the same float).
fn write_number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{value}")
    }
}

/// `steps` in promtool's notation, runs of one value as `axn` and of missing steps as `_xn`; the
/// missing steps at the end are left out (the series simply ends).
pub fn notation(steps: &[Step]) -> String {
    let end = steps
        .iter()
        .rposition(|s| *s != Step::Missing)
        .map_or(0, |i| i + 1);
    let mut items = Vec::new();
    let mut i = 0;
    while i < end {
        let run = steps[i..end]
            .iter()
            .take_while(|s| **s == steps[i] && **s != Step::Stale)
            .count()
            .max(1);
        items.push(match (steps[i], run) {
            (Step::Value(v), 1) => write_number(v),
            (Step::Value(v), n) => format!("{}x{}", write_number(v), n - 1),
            (Step::Missing, 1) => "_".to_string(),
            (Step::Missing, n) => format!("_x{n}"),
            (Step::Stale, _) => "stale".to_string(),
        });
        i += run;
    }
    items.join(" ")
}

/// `steps` with the samples `keep(step, value)` refuses left out: the first step left out after
/// a written sample becomes `stale`, the others `_`.
pub fn lean_steps(steps: &[Step], keep: impl Fn(usize, f64) -> bool) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len());
    // Whether the series is written at this point (its last step a sample, or a `_` after one).
    let mut written = false;
    for (i, step) in steps.iter().enumerate() {
        match *step {
            Step::Value(v) if keep(i, v) => {
                out.push(Step::Value(v));
                written = true;
            }
            Step::Missing => out.push(Step::Missing),
            _ => {
                out.push(if written { Step::Stale } else { Step::Missing });
                written = false;
            }
        }
    }
    out
}

/// The name and labels of a promtool series such as `metric{a="x",b="y"}`.
pub fn parse_series(series: &str) -> Result<(String, BTreeMap<String, String>), String> {
    let series = series.trim();
    let Some((name, rest)) = series.split_once('{') else {
        return Ok((series.to_string(), BTreeMap::new()));
    };
    let inner = rest
        .strip_suffix('}')
        .ok_or_else(|| format!("`{series}`: no closing brace"))?;
    let mut labels = BTreeMap::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let label: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if chars.next() != Some('"') {
            return Err(format!(
                "`{series}`: label `{label}` without a quoted value"
            ));
        }
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => value.extend(chars.next()),
                Some('"') => break,
                Some(c) => value.push(c),
                None => return Err(format!("`{series}`: unterminated value of `{label}`")),
            }
        }
        labels.insert(label.trim().to_string(), value);
    }
    Ok((name.trim().to_string(), labels))
}

/// The lean policy of the series named `name`: `None` for what is not a `redis_streams_*` family
/// of the catalog.
pub fn policy(name: &str) -> Option<Lean> {
    if !name.starts_with("redis_streams_") {
        return None;
    }
    METRICS.iter().find(|m| m.name == name).map(|m| m.lean)
}

/// The labels that tell a group apart, and a consumer of it.
const GROUP_KEY: &[&str] = &["job", "instance", "target", "stream", "group"];
const CONSUMER_KEY: &[&str] = &["job", "instance", "target", "stream", "group", "consumer"];

fn key(labels: &BTreeMap<String, String>, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| labels.get(*n).cloned().unwrap_or_default())
        .collect()
}

/// Whether a holder series (pending entries) holds entries at `step`.
fn holds(pending: Option<&Vec<Step>>, step: usize) -> bool {
    matches!(pending.and_then(|p| p.get(step)), Some(Step::Value(v)) if *v > 0.0)
}

/// What [`lean_input`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Series whose samples lean leaves out in part.
    pub thinned: usize,
    /// Series lean does not write at all.
    pub removed: usize,
}

/// The lean shape of one test's input series, `(series, values)` pairs in the full shape: the
/// series lean writes, in the same order, with their values.
pub fn lean_input(input: &[(String, String)]) -> Result<(Vec<(String, String)>, Changes), String> {
    let mut parsed = Vec::with_capacity(input.len());
    let mut group_pending: BTreeMap<Vec<String>, Vec<Step>> = BTreeMap::new();
    let mut consumer_pending: BTreeMap<Vec<String>, Vec<Step>> = BTreeMap::new();
    for (series, values) in input {
        let (name, labels) = parse_series(series)?;
        let steps = expand(values).map_err(|e| format!("{series}: {e}"))?;
        match name.as_str() {
            "redis_streams_group_pending" => {
                group_pending.insert(key(&labels, GROUP_KEY), steps.clone());
            }
            "redis_streams_consumer_pending" => {
                consumer_pending.insert(key(&labels, CONSUMER_KEY), steps.clone());
            }
            _ => {}
        }
        parsed.push((name, labels, steps));
    }
    let mut out = Vec::with_capacity(input.len());
    let mut changes = Changes::default();
    for ((series, values), (name, labels, steps)) in input.iter().zip(parsed) {
        let lean = match policy(&name) {
            None | Some(Lean::Always) => {
                out.push((series.clone(), values.clone()));
                continue;
            }
            Some(Lean::Never) => Vec::new(),
            Some(Lean::Unless(nothing)) => lean_steps(&steps, |_, v| v != nothing),
            Some(Lean::WhilePending) => {
                let pending = group_pending.get(&key(&labels, GROUP_KEY));
                lean_steps(&steps, |i, _| holds(pending, i))
            }
            Some(Lean::Holders) => {
                let pending = consumer_pending.get(&key(&labels, CONSUMER_KEY));
                lean_steps(&steps, |i, _| holds(pending, i))
            }
        };
        if !lean.iter().any(|s| matches!(s, Step::Value(_))) {
            changes.removed += 1;
        } else if lean == steps {
            out.push((series.clone(), values.clone()));
        } else {
            changes.thinned += 1;
            out.push((series.clone(), notation(&lean)));
        }
    }
    Ok((out, changes))
}

/// Rewrites the `input_series` of every test of a promtool test file (parsed) into the lean
/// shape; everything else (rule files, assertions) stays as it is.
pub fn lean_document(doc: &mut Yaml) -> Result<Changes, String> {
    let tests = doc
        .get_mut("tests")
        .and_then(Yaml::as_sequence_mut)
        .ok_or("a rule test file without tests")?;
    let mut total = Changes::default();
    for test in tests {
        let Some(series) = test.get_mut("input_series").and_then(Yaml::as_sequence_mut) else {
            continue;
        };
        let input: Vec<(String, String)> = series
            .iter()
            .map(|s| {
                let text = |field: &str| {
                    s.get(field)
                        .and_then(Yaml::as_str)
                        .map(str::to_string)
                        .ok_or_else(|| format!("an input series without `{field}`"))
                };
                Ok((text("series")?, text("values")?))
            })
            .collect::<Result<_, String>>()?;
        let (lean, changes) = lean_input(&input)?;
        total.thinned += changes.thinned;
        total.removed += changes.removed;
        *series = lean
            .into_iter()
            .map(|(s, v)| {
                let mut entry = serde_norway::Mapping::new();
                entry.insert("series".into(), s.into());
                entry.insert("values".into(), v.into());
                Yaml::Mapping(entry)
            })
            .collect();
    }
    Ok(total)
}

#[test]
fn expand_reads_promtools_notation() {
    use Step::{Missing, Stale, Value};
    assert_eq!(
        expand("1 -2+4x3 1-2x2 5x2").unwrap(),
        [1.0, -2.0, 2.0, 6.0, 10.0, 1.0, -1.0, -3.0, 5.0, 5.0, 5.0].map(Value)
    );
    assert_eq!(
        expand("_ 1 _x3 stale 0.5").unwrap(),
        [
            Missing,
            Value(1.0),
            Missing,
            Missing,
            Missing,
            Stale,
            Value(0.5)
        ]
    );
    assert_eq!(
        expand("1e3+1e-1x1 +Inf NaN").unwrap()[..3],
        [Value(1000.0), Value(1000.0 + 0.1), Value(f64::INFINITY)]
    );
    assert!(matches!(expand("NaN").unwrap()[..], [Value(v)] if v.is_nan()));
    assert!(expand("1+2").is_err(), "a step needs a repetition");
    assert!(expand("stalex3").is_err());
    assert!(expand("one").is_err());
}

#[test]
fn notation_writes_runs_and_reads_back() {
    use Step::{Missing, Stale, Value};
    let steps = [
        Missing,
        Missing,
        Value(40.0),
        Value(40.0),
        Stale,
        Missing,
        Value(0.25),
        Missing,
        Missing,
    ];
    assert_eq!(notation(&steps), "_x2 40x1 stale _ 0.25");
    assert_eq!(expand(&notation(&steps)).unwrap(), steps[..7]);
    let ramp = expand("0.1+0.01x30").unwrap();
    assert_eq!(
        expand(&notation(&ramp)).unwrap(),
        ramp,
        "every float reads back"
    );
    assert_eq!(notation(&[Stale, Stale]), "stale stale");
    assert_eq!(notation(&[Missing]), "");
}

#[test]
fn lean_steps_mark_a_series_stale_where_it_stops() {
    use Step::{Missing, Stale, Value};
    let full = expand("0 0 4 4 0 _ 0 4 _ 0").unwrap();
    assert_eq!(
        lean_steps(&full, |_, v| v != 0.0),
        [
            Missing,
            Missing,
            Value(4.0),
            Value(4.0),
            Stale,
            Missing,
            Missing,
            Value(4.0),
            Missing,
            Stale
        ]
    );
    // A full series' own end stays an end.
    let ends = expand("1 stale _ 1 stale").unwrap();
    assert_eq!(lean_steps(&ends, |_, _| true), ends);
    assert_eq!(
        lean_steps(&ends, |i, _| i > 0),
        [Missing, Missing, Missing, Value(1.0), Stale]
    );
}

#[test]
fn parse_series_reads_names_and_labels() {
    let (name, labels) =
        parse_series(r#"redis_streams_group_pending{job="j", instance="a:9763",group="g,\"h\""}"#)
            .unwrap();
    assert_eq!(name, "redis_streams_group_pending");
    assert_eq!(labels.len(), 3);
    assert_eq!(labels["instance"], "a:9763");
    assert_eq!(labels["group"], r#"g,"h""#);
    assert_eq!(
        parse_series("up").unwrap(),
        ("up".to_string(), BTreeMap::new())
    );
    assert!(parse_series(r#"up{job="j""#).is_err());
}

#[test]
fn lean_input_applies_each_familys_policy() {
    let group = r#"job="j",instance="i",target="t",stream="s",group="g""#;
    let other = r#"job="j",instance="i",target="t",stream="s",group="other""#;
    let pair = |name: &str, labels: &str, values: &str| {
        (format!("{name}{{{labels}}}"), values.to_string())
    };
    let input = vec![
        pair("up", r#"job="j",instance="i""#, "0x3"),
        pair("redis_streams_group_pending", group, "0 3 3 0"),
        // Always: as it is, zeros included.
        pair("redis_streams_group_lag", group, "0x3"),
        // Unless(0) and Unless(1).
        pair("redis_streams_group_pending_poison", group, "0 2 2 0"),
        pair(
            "redis_streams_group_pending_scan_progress_ratio",
            group,
            "0.5 1x2 0.5",
        ),
        pair("redis_streams_group_rewinds_total", other, "0x3"),
        // WhilePending: by the same group's pending entries, none for a group without the series.
        pair(
            "redis_streams_group_pending_max_idle_seconds",
            group,
            "0+10x3",
        ),
        pair("redis_streams_group_pending_max_idle_seconds", other, "5x3"),
        // Never.
        pair(
            "redis_streams_group_pending_by_idle_bucket",
            &format!(r#"{group},le="+Inf""#),
            "3x3",
        ),
        // Holders: by the consumer's own pending entries.
        pair(
            "redis_streams_consumer_pending",
            &format!(r#"{group},consumer="c""#),
            "1 0 0 1",
        ),
        pair(
            "redis_streams_consumer_idle_seconds",
            &format!(r#"{group},consumer="c""#),
            "1+1x3",
        ),
    ];
    let (lean, changes) = lean_input(&input).unwrap();
    let values: BTreeMap<&str, Vec<&str>> =
        lean.iter().fold(BTreeMap::new(), |mut by_name, (s, v)| {
            by_name
                .entry(s.split('{').next().unwrap())
                .or_default()
                .push(v.as_str());
            by_name
        });
    assert_eq!(values["up"], ["0x3"]);
    assert_eq!(values["redis_streams_group_pending"], ["0 3 3 0"]);
    assert_eq!(values["redis_streams_group_lag"], ["0x3"]);
    assert_eq!(
        values["redis_streams_group_pending_poison"],
        ["_ 2x1 stale"]
    );
    assert_eq!(
        values["redis_streams_group_pending_scan_progress_ratio"],
        ["0.5 stale _x2 0.5"]
    );
    assert!(!values.contains_key("redis_streams_group_rewinds_total"));
    assert_eq!(
        values["redis_streams_group_pending_max_idle_seconds"],
        ["_ 10 20 stale"]
    );
    assert!(!values.contains_key("redis_streams_group_pending_by_idle_bucket"));
    assert_eq!(values["redis_streams_consumer_pending"], ["1 stale _ 1"]);
    assert_eq!(
        values["redis_streams_consumer_idle_seconds"],
        ["1 stale _ 4"]
    );
    assert_eq!(
        changes,
        Changes {
            thinned: 5,
            removed: 3
        }
    );
}

#[test]
fn lean_document_rewrites_only_the_input_series() {
    let text = r#"
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - name: a case
    interval: 1m
    input_series:
      - series: 'redis_streams_group_lag_estimated{job="j",instance="i",target="t",stream="s",group="g"}'
        values: '0 1 0'
      - series: 'redis_streams_group_ahead_of_stream{job="j",instance="i",target="t",stream="s",group="g"}'
        values: '0x2'
    alert_rule_test:
      - eval_time: 1m
        alertname: A
        exp_alerts: []
"#;
    let mut doc: Yaml = serde_norway::from_str(text).unwrap();
    let before = doc.clone();
    let changes = lean_document(&mut doc).unwrap();
    assert_eq!(
        changes,
        Changes {
            thinned: 1,
            removed: 1
        }
    );
    let series = doc["tests"][0]["input_series"].as_sequence().unwrap();
    assert_eq!(series.len(), 1);
    assert_eq!(series[0]["values"].as_str(), Some("_ 1 stale"));
    assert_eq!(
        doc["tests"][0]["alert_rule_test"],
        before["tests"][0]["alert_rule_test"]
    );
    assert_eq!(doc["rule_files"], before["rule_files"]);
}
