//! What `check` found, and how it is written: a table for people (problems
//! first, then one line per target, names escaped and shortened) or JSON for
//! programs (full names; a name that is not UTF-8 also comes in hex), and
//! durations as the report and the warnings write them (`2m30s`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use crate::safe_names::{printable, shorten};
use crate::snapshot::Name;
use crate::status::GroupStatus;

/// Exit code when no problem was found.
pub const EXIT_OK: u8 = 0;
/// Exit code when a problem was found.
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit code of a usage or configuration error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code when a target could not be reached.
pub const EXIT_UNREACHABLE: u8 = 3;

/// Characters of a name shown in the table before it is cut.
const NAME_WIDTH: usize = 48;

/// One group as the check saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupReport {
    /// Stream name.
    pub stream: Name,
    /// Group name.
    pub group: Name,
    /// The status: `warming_up` when what it rests on was not seen.
    pub status: Option<GroupStatus>,
    /// `warming_up`: how much longer a watch would have to be to judge it,
    /// where known.
    pub judged_in: Option<Duration>,
    /// Undelivered entries, when known.
    pub lag: Option<u64>,
    /// The lag came from the estimator.
    pub lag_estimated: bool,
    /// Age of the oldest undelivered entry.
    pub lag_seconds: Option<f64>,
    /// PEL size.
    pub pending: u64,
    /// Consumers in the group.
    pub consumers: u64,
    /// Age of the oldest pending entry.
    pub oldest_pending_age_seconds: Option<f64>,
    /// Largest idle in the PEL (last complete scan).
    pub max_idle_seconds: Option<f64>,
    /// Poison entries (last complete scan).
    pub poison: Option<u64>,
    /// Ghost entries (last complete scan).
    pub ghosts: Option<u64>,
    /// Entries held by inactive consumers.
    pub orphaned: Option<u64>,
    /// The inactivity after which they count (set or learned).
    pub inactive_after: Option<std::time::Duration>,
    /// Length of the stream's dead-letter stream.
    pub dead_letters: Option<u64>,
    /// Entries trimmed before the group read them.
    pub trimmed_undelivered: Option<u64>,
    /// How long the group was watched.
    pub watched_seconds: f64,
    /// What is wrong (each one makes the exit code 1).
    pub problems: Vec<String>,
    /// What is worth knowing but not wrong.
    pub notes: Vec<String>,
}

/// One target as the check saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetReport {
    /// Target name.
    pub name: String,
    /// Reachable at the end.
    pub up: bool,
    /// Streams watched.
    pub streams: usize,
    /// What is wrong with the target itself.
    pub problems: Vec<String>,
    /// What is worth knowing.
    pub notes: Vec<String>,
    /// Its groups, in name order.
    pub groups: Vec<GroupReport>,
}

impl TargetReport {
    fn problem_count(&self) -> usize {
        self.problems.len()
            + self
                .groups
                .iter()
                .filter(|g| !g.problems.is_empty())
                .count()
    }

    /// Groups by status label, `warming_up` included, in status order.
    fn by_status(&self) -> Vec<(&'static str, usize)> {
        let mut counts: BTreeMap<u8, (&'static str, usize)> = BTreeMap::new();
        for g in &self.groups {
            let label = GroupStatus::word(g.status);
            counts
                .entry(GroupStatus::urgency(g.status))
                .or_insert((label, 0))
                .1 += 1;
        }
        counts.into_values().collect()
    }

    /// The group with the oldest undelivered entry.
    fn worst_lag(&self) -> Option<&GroupReport> {
        self.groups
            .iter()
            .filter(|g| g.lag_seconds.is_some())
            .max_by(|a, b| {
                a.lag_seconds
                    .partial_cmp(&b.lag_seconds)
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    }
}

/// Everything the check found.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Every target, in configuration order.
    pub targets: Vec<TargetReport>,
    /// How long the check watched (zero: one look).
    pub watched: Duration,
    /// The daemon's status window, which a status resting on it needs.
    pub required: Duration,
}

impl Report {
    /// A report of `targets` watched for `watched`.
    pub fn new(targets: Vec<TargetReport>, watched: Duration, required: Duration) -> Report {
        Report {
            targets,
            watched,
            required,
        }
    }

    /// 3 when a target was unreachable, else 1 when anything is wrong, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.targets.iter().any(|t| !t.up) {
            EXIT_UNREACHABLE
        } else if self.targets.iter().any(|t| t.problem_count() > 0) {
            EXIT_PROBLEMS
        } else {
            EXIT_OK
        }
    }

    /// Groups not judged yet (`warming_up`).
    pub fn warming_up(&self) -> usize {
        self.targets
            .iter()
            .flat_map(|t| &t.groups)
            .filter(|g| matches!(g.status, None | Some(GroupStatus::WarmingUp)))
            .count()
    }

    /// What this run could not know, when groups are not judged yet: none
    /// when every group is judged (a target that cannot be reached is no
    /// question of watching longer).
    pub fn cannot_know(&self) -> Option<String> {
        let window = short(self.required);
        let n = self.warming_up();
        if n == 0 {
            return None;
        }
        let groups = format!(
            "{} with work waiting {} warming_up (not judged yet) rather than ok",
            plural(n, "group"),
            if n == 1 { "is" } else { "are" }
        );
        if !self.watched.is_zero() && self.watched >= self.required {
            return Some(format!(
                "{groups}: {} appeared during the watch and {} watched for less than the status window ({window}).",
                if n == 1 { "it" } else { "they" },
                if n == 1 { "was" } else { "were" }
            ));
        }
        let look = if self.watched.is_zero() {
            "One look".to_string()
        } else {
            format!(
                "Watched {}, less than the status window ({window})",
                short(self.watched)
            )
        };
        Some(format!(
            "{look}: {groups}. What needs a window cannot be known from it: a group that makes no \
             progress (stalled), a lag that keeps growing, consumers that stopped (a batch \
             consumer between two runs looks the same), pending entries piling up, dead letters \
             arriving. Run `check --watch {window}` (status.window × schedule.stream) or longer; \
             for a group read in batches, longer than the batch period."
        ))
    }

    /// The report for people.
    pub fn table(&self, all: bool) -> String {
        let mut out = String::new();
        let header = [
            "TARGET",
            "STREAM",
            "GROUP",
            "STATUS",
            "LAG",
            "LAG AGE",
            "PENDING",
            "OLDEST PENDING",
            "MAX IDLE",
            "POISON",
            "GHOSTS",
            "DEAD LETTERS",
            "TRIMMED",
        ];
        let mut rows: Vec<(&TargetReport, &GroupReport)> = self
            .targets
            .iter()
            .flat_map(|t| t.groups.iter().map(move |g| (t, g)))
            .collect();
        rows.sort_by_key(|(t, g)| {
            (
                g.problems.is_empty(),
                GroupStatus::urgency(g.status),
                GroupStatus::lag_key(g.lag_seconds),
                &t.name,
                g.stream.clone(),
                g.group.clone(),
            )
        });
        let (bad, fine): (Vec<_>, Vec<_>) =
            rows.into_iter().partition(|(_, g)| !g.problems.is_empty());
        let target_problems: Vec<(&TargetReport, &String)> = self
            .targets
            .iter()
            .flat_map(|t| t.problems.iter().map(move |p| (t, p)))
            .collect();
        if target_problems.is_empty() && bad.is_empty() {
            out.push_str("No problems found.\n");
        } else {
            let targets = self
                .targets
                .iter()
                .filter(|t| !t.problems.is_empty())
                .count();
            let mut counted = Vec::new();
            if targets > 0 {
                counted.push(plural(targets, "target"));
            }
            if !bad.is_empty() {
                counted.push(plural(bad.len(), "group"));
            }
            let _ = writeln!(out, "PROBLEMS: {}", counted.join(", "));
            for (t, p) in &target_problems {
                let _ = writeln!(out, "target {}: {p}", cell(t.name.as_bytes()));
            }
        }
        let shown: Vec<&(&TargetReport, &GroupReport)> = bad
            .iter()
            .chain(if all { fine.iter() } else { [].iter() })
            .collect();
        if !shown.is_empty() {
            let cells: Vec<Vec<String>> = shown.iter().map(|(t, g)| row(t, g)).collect();
            let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
            for r in &cells {
                for (w, c) in widths.iter_mut().zip(r) {
                    *w = (*w).max(c.chars().count());
                }
            }
            let line = |out: &mut String, cells: &[String]| {
                let mut l = String::new();
                for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                    if i > 0 {
                        l.push_str("  ");
                    }
                    let _ = write!(l, "{c:<w$}");
                }
                out.push_str(l.trim_end());
                out.push('\n');
            };
            line(&mut out, &header.map(String::from));
            for ((_, g), r) in shown.iter().zip(&cells) {
                line(&mut out, r);
                for p in &g.problems {
                    let _ = writeln!(out, "  ! {p}");
                }
                for n in &g.notes {
                    let _ = writeln!(out, "  · {n}");
                }
            }
        }
        // An unreachable target's one line is its problem above.
        if self.targets.iter().any(|t| t.up) {
            out.push_str("\nSUMMARY\n");
        }
        for t in self.targets.iter().filter(|t| t.up) {
            let name = cell(t.name.as_bytes());
            let counts: Vec<String> = t
                .by_status()
                .iter()
                .map(|(label, n)| format!("{n} {label}"))
                .collect();
            let worst = match t.worst_lag() {
                Some(g) if g.lag_seconds == Some(0.0) => "worst lag 0s".to_string(),
                Some(g) => format!(
                    "worst lag {} ({} / {})",
                    short_secs(g.lag_seconds.unwrap_or_default()),
                    cell(&g.stream),
                    cell(&g.group)
                ),
                None => "worst lag unknown".to_string(),
            };
            let _ = writeln!(
                out,
                "{name}: {}, {}{}{}; {worst}; {}",
                plural(t.streams, "stream"),
                plural(t.groups.len(), "group"),
                if counts.is_empty() { "" } else { ": " },
                counts.join(", "),
                plural(t.problem_count(), "problem")
            );
            for n in &t.notes {
                let _ = writeln!(out, "  · {n}");
            }
        }
        if let Some(note) = self.cannot_know() {
            let _ = writeln!(out, "\n{note}");
        } else if !self.watched.is_zero() {
            let _ = writeln!(
                out,
                "\nWatched {}: every status judged over the whole watch.",
                short(self.watched)
            );
        }
        out
    }

    /// The report for programs: one JSON document.
    pub fn json(&self) -> String {
        let targets: Vec<Value> = self
            .targets
            .iter()
            .map(|t| {
                let groups: Vec<Value> = t.groups.iter().map(group_json).collect();
                let by_status: serde_json::Map<String, Value> = t
                    .by_status()
                    .into_iter()
                    .map(|(label, n)| (label.to_string(), n.into()))
                    .collect();
                json!({
                    "name": t.name,
                    "up": t.up,
                    "streams": t.streams,
                    "problems": t.problems,
                    "notes": t.notes,
                    "groups_by_status": by_status,
                    "worst_lag": t.worst_lag().map(|g| {
                        let mut v = names(g);
                        v.insert("lag_seconds".into(), json!(g.lag_seconds));
                        Value::Object(v)
                    }),
                    "groups": groups,
                })
            })
            .collect();
        let doc = json!({
            "exit_code": self.exit_code(),
            "watched_seconds": self.watched.as_secs_f64(),
            "status_window_seconds": self.required.as_secs_f64(),
            "warming_up_groups": self.warming_up(),
            "cannot_know": self.cannot_know(),
            "targets": targets,
        });
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// A duration as the report and the warnings write it: `2m30s`, to the
/// second (`300ms` under one).
pub(super) fn short(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    humantime::format_duration(Duration::from_secs(secs))
        .to_string()
        .replace(' ', "")
}

/// Seconds as `2m30s`.
pub(super) fn short_secs(seconds: f64) -> String {
    if seconds < 1.0 {
        return "0s".to_string();
    }
    short(Duration::from_secs(seconds as u64))
}

/// "1 group", "2 groups".
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// A name for the table: control characters escaped, long names cut.
fn cell(name: &[u8]) -> String {
    shorten(&printable(name), NAME_WIDTH).into_owned()
}

fn count(v: Option<u64>) -> String {
    v.map_or("-".into(), |n| n.to_string())
}

fn age(v: Option<f64>) -> String {
    v.map_or("-".into(), short_secs)
}

fn row(t: &TargetReport, g: &GroupReport) -> Vec<String> {
    vec![
        cell(t.name.as_bytes()),
        cell(&g.stream),
        cell(&g.group),
        GroupStatus::word(g.status).to_string(),
        match (g.lag, g.lag_estimated) {
            (Some(l), true) => format!("~{l}"),
            (Some(l), false) => l.to_string(),
            (None, _) => "unknown".into(),
        },
        age(g.lag_seconds),
        g.pending.to_string(),
        age(g.oldest_pending_age_seconds),
        age(g.max_idle_seconds),
        count(g.poison),
        count(g.ghosts),
        count(g.dead_letters),
        count(g.trimmed_undelivered),
    ]
}

/// `stream` and `group` in full; a name that is not UTF-8 also in hex.
fn names(g: &GroupReport) -> serde_json::Map<String, Value> {
    let mut v = serde_json::Map::new();
    for (key, name) in [("stream", &g.stream), ("group", &g.group)] {
        v.insert(
            key.into(),
            String::from_utf8_lossy(name).into_owned().into(),
        );
        if std::str::from_utf8(name).is_err() {
            let hex: String = name.iter().map(|b| format!("{b:02x}")).collect();
            v.insert(format!("{key}_hex"), hex.into());
        }
    }
    v
}

fn group_json(g: &GroupReport) -> Value {
    let mut v = names(g);
    let fields = json!({
        "status": GroupStatus::word(g.status),
        "judged_in_seconds": g.judged_in.map(|d| d.as_secs_f64()),
        "lag": g.lag,
        "lag_estimated": g.lag_estimated,
        "lag_seconds": g.lag_seconds,
        "pending": g.pending,
        "consumers": g.consumers,
        "oldest_pending_age_seconds": g.oldest_pending_age_seconds,
        "max_idle_seconds": g.max_idle_seconds,
        "poison": g.poison,
        "ghosts": g.ghosts,
        "orphaned": g.orphaned,
        "dead_letters": g.dead_letters,
        "trimmed_undelivered": g.trimmed_undelivered,
        "watched_seconds": g.watched_seconds,
        "problems": g.problems,
        "notes": g.notes,
    });
    if let Value::Object(fields) = fields {
        v.extend(fields);
    }
    Value::Object(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn group(stream: &[u8], name: &str, status: Option<GroupStatus>) -> GroupReport {
        GroupReport {
            stream: Arc::from(stream),
            group: Arc::from(name.as_bytes()),
            status,
            judged_in: None,
            lag: Some(3),
            lag_estimated: false,
            lag_seconds: Some(12.0),
            pending: 1,
            consumers: 1,
            oldest_pending_age_seconds: None,
            max_idle_seconds: None,
            poison: Some(0),
            ghosts: Some(0),
            orphaned: Some(0),
            inactive_after: None,
            dead_letters: None,
            trimmed_undelivered: Some(0),
            watched_seconds: 0.0,
            problems: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn report() -> Report {
        let mut stuck = group(b"orders", "billing", Some(GroupStatus::Stalled));
        stuck.problems.push("stalled: it did not move".into());
        let mut evil = group(b"x\n\x1b[2J\xff", "g", Some(GroupStatus::WarmingUp));
        evil.lag_seconds = Some(99.0);
        let long = "l".repeat(500);
        Report::new(
            vec![
                TargetReport {
                    name: "main".into(),
                    up: true,
                    streams: 3,
                    problems: Vec::new(),
                    notes: Vec::new(),
                    groups: vec![
                        group(b"a", "ok1", Some(GroupStatus::Ok)),
                        stuck,
                        evil,
                        group(long.as_bytes(), "idle", Some(GroupStatus::Idle)),
                    ],
                },
                TargetReport {
                    name: "gone".into(),
                    up: false,
                    streams: 0,
                    problems: vec!["unreachable: stream failed: refused".into()],
                    notes: Vec::new(),
                    groups: Vec::new(),
                },
            ],
            Duration::ZERO,
            Duration::from_secs(150),
        )
    }

    #[test]
    fn problems_first_then_a_line_per_target() {
        let r = report();
        assert_eq!(r.exit_code(), EXIT_UNREACHABLE);
        let text = r.table(false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "PROBLEMS: 1 target, 1 group");
        assert_eq!(lines[1], "target gone: unreachable: stream failed: refused");
        assert!(
            lines[2].starts_with("TARGET  STREAM  GROUP    STATUS"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("main    orders  billing  stalled  3"),
            "{text}"
        );
        assert_eq!(lines[4], "  ! stalled: it did not move");
        // Without --all only problems are listed.
        assert!(!text.contains("ok1"), "{text}");
        let summary = &text[text.find("SUMMARY").unwrap()..];
        assert!(
            summary.contains(
                "main: 3 streams, 4 groups: 1 stalled, 1 warming_up, 1 ok, 1 idle; worst lag 1m39s (x\\n\\u{1b}[2J\\xff / g); 1 problem"
            ),
            "{summary}"
        );
        // The unreachable target's one line is its problem.
        assert!(!summary.contains("gone"), "{summary}");
        assert!(text.contains(
            "One look: 1 group with work waiting is warming_up (not judged yet) rather than ok. What needs a window cannot be known"
        ));
        assert!(text.contains("check --watch 2m30s"));
        // --all: every group; names escaped and cut.
        let all = r.table(true);
        assert!(all.contains("ok1"));
        assert!(!all.contains('\x1b') && !all.contains("x\n"));
        assert!(all.contains(&format!("{}…(+452 chars)", "l".repeat(48))));
    }

    #[test]
    fn json_has_full_names_and_every_group() {
        let r = report();
        let v: Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(v["exit_code"], 3);
        assert_eq!(v["warming_up_groups"], 1);
        let groups = v["targets"][0]["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 4);
        assert_eq!(groups[3]["stream"].as_str().unwrap().len(), 500);
        assert_eq!(groups[2]["stream"], "x\n\u{1b}[2J\u{fffd}");
        assert_eq!(groups[2]["stream_hex"], "780a1b5b324aff");
        assert_eq!(groups[2]["status"], "warming_up");
        assert!(groups[0].get("stream_hex").is_none());
        assert_eq!(v["targets"][0]["groups_by_status"]["stalled"], 1);
        assert_eq!(v["targets"][0]["worst_lag"]["lag_seconds"], 99.0);
        assert_eq!(
            v["targets"][1]["problems"][0],
            "unreachable: stream failed: refused"
        );
    }

    #[test]
    fn exit_codes() {
        let mut r = report();
        r.targets.pop();
        assert_eq!(r.exit_code(), EXIT_PROBLEMS);
        r.targets[0].groups.retain(|g| g.problems.is_empty());
        assert_eq!(r.exit_code(), EXIT_OK);
        assert!(r.table(false).starts_with("No problems found.\n"));
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(short(Duration::from_secs(150)), "2m30s");
        assert_eq!(short(Duration::from_millis(300)), "300ms");
        assert_eq!(short_secs(0.4), "0s");
        assert_eq!(short_secs(3725.9), "1h2m5s");
    }
}
