//! The one-shot `check` subcommand: every probe once, then the stream probe
//! again so the status sees consumer activity and pending entries, then a
//! table a human (or a CI job) can read. Exits non-zero when a group is not
//! `ok` or `idle`, or a target cannot be reached.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::config::Config;
use crate::poller::Poller;
use crate::probe::ProbeKind;
use crate::snapshot::{SnapshotStore, TargetSnapshot};
use crate::status::GroupStatus;

/// Polls every target once and returns the report and whether all is well.
///
/// # Errors
/// When a target's client cannot be built.
pub async fn run(config: Arc<Config>) -> Result<(String, bool), crate::redis::ClientSetupError> {
    let store = Arc::new(SnapshotStore::default());
    let mut pollers = Vec::new();
    for target in &config.targets {
        pollers.push(Poller::new(config.clone(), target.clone(), store.clone())?);
    }
    // Targets are polled concurrently, as the daemon would.
    let mut runs = tokio::task::JoinSet::new();
    for poller in pollers {
        runs.spawn(async move {
            poller.first_collection().await;
            poller.run_probe(ProbeKind::Stream).await;
        });
    }
    while runs.join_next().await.is_some() {}
    let targets = store.targets();
    Ok(report(&targets))
}

fn age(seconds: Option<f64>) -> String {
    match seconds {
        None => "-".into(),
        Some(s) if s < 1.0 => "0s".into(),
        Some(s) => humantime::format_duration(std::time::Duration::from_secs(s as u64))
            .to_string()
            .replace(' ', ""),
    }
}

fn count(v: Option<u64>) -> String {
    v.map_or("-".into(), |n| n.to_string())
}

/// Formats the table; the flag is true when every group is ok or idle and
/// every target is up.
pub fn report(targets: &[Arc<TargetSnapshot>]) -> (String, bool) {
    let mut healthy = true;
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
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut notes = String::new();
    for t in targets {
        if !t.up {
            healthy = false;
            let _ = writeln!(notes, "target {}: DOWN (no data)", t.name);
            continue;
        }
        for (s, st) in t.streams.iter() {
            let stream = String::from_utf8_lossy(s).into_owned();
            let dead = st.dead_letter.map(|d| d.length);
            if st.groups.is_empty() {
                rows.push(vec![
                    t.name.to_string(),
                    stream.clone(),
                    "(no groups)".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    count(dead),
                    "-".into(),
                ]);
            }
            for (g, gs) in st.groups.iter() {
                let status = gs.status.unwrap_or(GroupStatus::Ok);
                if !matches!(status, GroupStatus::Ok | GroupStatus::Idle) {
                    healthy = false;
                }
                let lag = match (gs.lag, gs.lag_estimated) {
                    (Some(l), true) => format!("~{l}"),
                    (Some(l), false) => l.to_string(),
                    (None, _) => "unknown".into(),
                };
                let key = (s.clone(), g.clone());
                let scan = t.scans.get(&key).and_then(|sc| sc.last.as_deref());
                rows.push(vec![
                    t.name.to_string(),
                    stream.clone(),
                    String::from_utf8_lossy(g).into_owned(),
                    status.label().to_string(),
                    lag,
                    age(gs.lag_seconds),
                    gs.info.pending.to_string(),
                    age(t.oldest_pending_age.get(&key).copied()),
                    age(scan
                        .and_then(|s| s.max_idle_ms)
                        .map(|ms| ms as f64 / 1000.0)),
                    count(scan.map(|s| s.poison)),
                    count(scan.map(|s| s.ghost)),
                    count(dead),
                    count(gs.trimmed_undelivered),
                ]);
            }
        }
        if t.streams.is_empty() {
            let _ = writeln!(notes, "target {}: no streams found", t.name);
        }
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let _ = write!(l, "{cell:<w$}");
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(
        &mut out,
        &header.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
    );
    for row in &rows {
        line(&mut out, row);
    }
    out.push_str(&notes);
    (out, healthy)
}
