//! The `/` landing page: the targets, problems first; the groups with the
//! columns of `check`, worst first, a page at a time; a legend of the
//! statuses. It reloads itself every stream poll.

use std::sync::Arc;

use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::state::HttpState;
use crate::config::Config;
use crate::metrics::BuildInfo;
use crate::metrics::catalog::GROUP_LAG_ESTIMATED;
use crate::snapshot::TargetSnapshot;
use crate::status::GroupStatus;

fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Groups per page of the landing page's status table.
const LANDING_ROWS: usize = 500;

/// A group on the landing page: severity, target, stream, group, state,
/// and where its checks come from (the target's PEL scans and consumers,
/// the stream's dead letters).
type LandingRow<'a> = (
    u8,
    &'a str,
    &'a [u8],
    &'a [u8],
    &'a crate::snapshot::GroupState,
    &'a TargetSnapshot,
    &'a crate::snapshot::StreamState,
);

/// What each status means, in the order problems come on the page.
const STATUS_LEGEND: [(&str, &str); 7] = [
    (
        "data_loss",
        "entries were trimmed or deleted before the group read them; it holds for data_loss_hold after the last loss",
    ),
    (
        "stopped",
        "work waits and no consumer has read for a whole status window (with read_every, for read_every plus the window), or the group has no consumer",
    ),
    (
        "stalled",
        "consumers are there but the group makes no progress: its position or its oldest pending entry did not move while work waited, or poison, ghost or orphaned entries are pending",
    ),
    (
        "lagging",
        "falling behind: the oldest undelivered entry is older than half of max_delay (5 minutes without max_delay), trimming is closing in on unread entries, or, without lag seconds, the lag did not fall over the window",
    ),
    (
        "unknown",
        "not judged yet: too few polls, or the server clock could not be read",
    ),
    ("ok", "keeping up"),
    (
        "idle",
        "nothing was produced, pending or undelivered during the window",
    ),
];

/// A count of the page's check columns: `-` when it is not known yet.
fn known(value: Option<u64>) -> String {
    value.map_or("-".to_string(), |n| n.to_string())
}

/// A name from Redis (or a configured one) fit for the page: control
/// characters escaped, long names cut with a marker, then HTML-escaped.
fn name(bytes: &[u8]) -> String {
    html(&crate::safe_names::shorten(
        &crate::safe_names::printable(bytes),
        120,
    ))
}

/// The landing page's targets, problems first.
fn targets_table(page: &mut String, config: &Config, targets: &[Arc<TargetSnapshot>]) {
    let mut rows: Vec<(bool, String)> = config
        .targets
        .iter()
        .map(|t| {
            let snap = targets.iter().find(|s| *s.name == *t.name);
            let problem = match snap {
                Some(s) => crate::exposition::target_problem(s),
                None => Some("not started yet".to_string()),
            };
            let row = format!(
                "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if problem.is_some() { " class=\"bad\"" } else { "" },
                name(t.name.as_bytes()),
                html(&t.endpoint.to_string()),
                t.mode.as_str(),
                snap.map_or("no", |s| if s.up { "yes" } else { "no" }),
                snap.map_or("no", |s| if s.ready { "yes" } else { "no" }),
                snap.and_then(|s| s.streams_watched)
                    .map_or("?".to_string(), |n| n.to_string()),
                problem.as_deref().map_or(String::new(), html),
            );
            (problem.is_none(), row)
        })
        .collect();
    rows.sort_by_key(|(fine, _)| *fine);
    page.push_str("<h2>Targets</h2><table><tr><th>target</th><th>address</th><th>mode</th><th>up</th><th>ready</th><th>streams</th><th>problem</th></tr>");
    for (_, row) in &rows {
        page.push_str(row);
    }
    page.push_str("</table>");
}

pub(super) fn landing(state: &HttpState, config: &Config, query: Option<&str>) -> Response {
    use std::fmt::Write as _;
    let build = BuildInfo::CURRENT;
    let targets = state.store.targets();
    let mut page = String::new();
    page.push_str("<!doctype html><html><head><meta charset=\"utf-8\">");
    // The page follows the stream poll, which judges the statuses.
    let _ = write!(
        page,
        "<meta http-equiv=\"refresh\" content=\"{}\"><title>redis-streams-exporter</title>",
        config.schedule.stream.as_secs_f64().ceil().max(1.0)
    );
    page.push_str("<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}.bad{background:#fdd}</style></head><body>");
    let _ = write!(
        page,
        "<h1>redis-streams-exporter</h1><p>Version {} (revision {}, built {}). <a href=\"{}\">Metrics</a> · <a href=\"/healthz\">healthz</a> · <a href=\"/readyz\">readyz</a></p>",
        html(build.version),
        html(build.revision),
        html(build.build_date),
        html(&config.web.telemetry_path)
    );
    targets_table(&mut page, config, &targets);

    // Groups of the targets whose data is served (up, or down and still
    // held), problems first, a page at a time.
    let mut groups: Vec<LandingRow<'_>> = targets
        .iter()
        .filter(|t| t.serves_data())
        .flat_map(|t| {
            t.streams.iter().flat_map(move |(s, st)| {
                st.groups.iter().map(move |(g, gs)| {
                    (
                        GroupStatus::urgency(gs.status),
                        &*t.name,
                        &**s,
                        &**g,
                        gs,
                        &**t,
                        &**st,
                    )
                })
            })
        })
        .collect();
    // The most urgent status first, then the oldest undelivered entry.
    groups.sort_by(|a, b| {
        let key = |r: &LandingRow<'_>| (r.0, GroupStatus::lag_key(r.4.lag_seconds));
        (key(a), a.1, a.2, a.3).cmp(&(key(b), b.1, b.2, b.3))
    });
    let total = groups.len();
    let pages = total.div_ceil(LANDING_ROWS).max(1);
    let wanted = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("page="))
        .and_then(|p| p.parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, pages);
    let first = (wanted - 1) * LANDING_ROWS;
    let shown = &groups[first.min(total)..(first + LANDING_ROWS).min(total)];
    let mut by_status: std::collections::BTreeMap<u8, (&str, usize)> = Default::default();
    for g in &groups {
        by_status
            .entry(g.0)
            .or_insert((g.4.status.map_or("unknown", |s| s.label()), 0))
            .1 += 1;
    }
    let counts: Vec<String> = by_status
        .values()
        .map(|(label, n)| format!("{n} {label}"))
        .collect();
    let _ = write!(
        page,
        "<h2>Groups</h2><p>{total} groups{}{}. Problems first.",
        if counts.is_empty() { "" } else { ": " },
        counts.join(", ")
    );
    if total > 0 {
        let _ = write!(
            page,
            " Showing {}–{} (page {wanted} of {pages}).",
            first + 1,
            first + shown.len()
        );
    }
    if wanted > 1 {
        let _ = write!(page, " <a href=\"/?page={}\">« previous</a>", wanted - 1);
    }
    if wanted < pages {
        let _ = write!(page, " <a href=\"/?page={}\">next »</a>", wanted + 1);
    }
    page.push_str("</p><table><tr><th>target</th><th>stream</th><th>group</th><th>status</th><th>lag</th><th>lag seconds</th><th>pending</th><th>poison</th><th>ghosts</th><th>orphaned</th><th>lost</th><th>dead letters</th><th>read every</th></tr>");
    for (sev, target, stream, group, gs, t, st) in shown {
        let key = (
            crate::snapshot::Name::from(*stream),
            crate::snapshot::Name::from(*group),
        );
        let scan = t.scans.get(&key).and_then(|sc| sc.last.as_ref());
        let lag = match (gs.lag, gs.lag_estimated) {
            (Some(l), true) => format!("~{l}"),
            (Some(l), false) => l.to_string(),
            (None, _) => "unknown".into(),
        };
        let _ = write!(
            page,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if *sev < 4 { " class=\"bad\"" } else { "" },
            name(target.as_bytes()),
            name(stream),
            name(group),
            status_cell(gs, config),
            lag,
            gs.lag_seconds
                .map_or("unknown".to_string(), |s| format!("{s:.1}")),
            gs.pending,
            known(scan.map(|sc| sc.poison)),
            known(scan.map(|sc| sc.ghost)),
            known(t.consumers.get(&key).map(|c| c.orphaned)),
            known(gs.lost.map(|l| l.total())),
            known(st.dead_letter.map(|d| d.length)),
            st.settings.read_every.map_or(String::new(), |d| html(
                &humantime::format_duration(d).to_string()
            )),
        );
    }
    page.push_str("</table>");
    legend(&mut page, config);
    page.push_str("</body></html>\n");
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// The status and why (the rule that decided it), and for `data_loss`
/// until when it holds: since the last counted loss (server time) for
/// `data_loss_hold`, or for as long as entries after the group's position
/// are gone.
fn status_cell(gs: &crate::snapshot::GroupState, config: &Config) -> String {
    let Some(status) = gs.status else {
        return "unknown".to_string();
    };
    if status != GroupStatus::DataLoss {
        return match gs.status_reason {
            Some(reason) => format!("{} ({})", status.label(), reason.label().replace('_', " ")),
            None => status.label().to_string(),
        };
    }
    let last = gs.lost_at.latest();
    let at = |ms: u64| {
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms),
        )
        .to_string()
    };
    match last {
        Some(ms) => format!(
            "data_loss ({}: last loss {}, held until {})",
            gs.status_reason
                .map_or("loss", |r| r.label())
                .replace('_', " "),
            at(ms),
            at(ms.saturating_add(config.data_loss_hold.as_millis() as u64))
        ),
        None => {
            "data_loss (entries after its position are gone; until it is set past them)".to_string()
        }
    }
}

/// What the statuses and the group table's columns mean.
fn legend(page: &mut String, config: &Config) {
    use std::fmt::Write as _;
    let window = config.schedule.stream * config.status_window as u32;
    let _ = write!(
        page,
        "<h2>Legend</h2><p>Statuses, judged at every stream poll over a window of the last {} polls ({}):</p><dl>",
        config.status_window,
        html(&humantime::format_duration(window).to_string())
    );
    for (status, meaning) in STATUS_LEGEND {
        let _ = write!(page, "<dt>{status}</dt><dd>{}.</dd>", html(meaning));
    }
    let _ = write!(
        page,
        "</dl><p>Columns: <b>lag</b> entries not yet delivered to the group; <b>~</b> before it: \
         Redis gave no usable lag and the figure is the exporter's own (counted, or estimated \
         within the bounds Redis's counters prove; {} is 1). \
         <b>lag seconds</b> the age of the oldest undelivered entry. <b>pending</b> entries \
         delivered and not acknowledged. <b>poison</b> pending entries delivered at least \
         poison_delivery_count times and <b>ghosts</b> pending entries whose bodies are gone, \
         both from the last complete PEL scan. <b>orphaned</b> pending entries held by consumers \
         inactive past consumer_inactive_after. <b>lost</b> entries trimmed or deleted before the \
         group read them, since the exporter started. <b>dead letters</b> entries in the \
         stream's dead-letter stream. <b>-</b>: not known yet (or no dead-letter stream \
         configured). <b>read every</b> the stream's read_every, when set: a batch consumer \
         reads at least this often, and work waiting between two runs is not stalled or \
         stopped until read_every plus the window passes without a read. The page reloads \
         itself every stream poll.</p>",
        GROUP_LAG_ESTIMATED.name
    );
}
