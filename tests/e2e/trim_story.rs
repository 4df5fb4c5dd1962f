//! The `trim-overtake` scenario from the exporter's signals, on each server of the matrix: trimming
//! gains on a slow group until `RedisStreamsTrimOvertakingGroup` pages on the trim-overtake ETA
//! (not on the group sitting at the trimming edge: its retention margin is still above a fifth of
//! the retained window when it fires), then the group speeds up: a drain ETA appears, the overtake
//! ETA goes away and the alert resolves.
//!
//! The end-to-end test polls [`Story::observe`] once a second and waits for every server's story
//! to end; [`Story::problems`] says what did not happen.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::procs::query;

/// The scenario's stream and group (prefix `e2e:`).
pub const STREAM: &str = "e2e:trimovertake";
const GROUP: &str = "workers";
const ALERT: &str = "RedisStreamsTrimOvertakingGroup";

/// The moment the alert was first seen firing, with the signals then (seconds).
#[derive(Clone, Copy, Debug)]
pub struct Paged {
    pub at: Instant,
    pub eta: Option<f64>,
    pub margin: Option<f64>,
    pub window: Option<f64>,
}

/// What was seen of one server.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// When the alert was first seen firing.
    pub paged: Option<Paged>,
    /// When a positive drain ETA was first seen after the page, and its value.
    pub draining: Option<(Instant, f64)>,
    /// When the overtake ETA and the alert were first both gone after that.
    pub over: Option<Instant>,
}

/// Every server's story, keyed by target name.
pub struct Story {
    pub servers: BTreeMap<String, Seen>,
}

/// The value of the first series a query returns.
async fn value(http: &reqwest::Client, prom: &str, expr: &str) -> Option<f64> {
    let series = query(http, prom, expr).await.ok()?;
    series.first()?["value"][1].as_str()?.parse().ok()
}

impl Story {
    /// The story of each of `targets` (names no other exporter of the run
    /// uses, so they are selected by name alone, whichever exporter watches
    /// them).
    pub fn new(targets: &[&str]) -> Story {
        Story {
            servers: targets
                .iter()
                .map(|t| (t.to_string(), Seen::default()))
                .collect(),
        }
    }

    fn selector(&self, target: &str) -> String {
        format!("target=\"{target}\",stream=\"{STREAM}\",group=\"{GROUP}\"")
    }

    /// One look at every server whose story is not over.
    pub async fn observe(&mut self, http: &reqwest::Client, prom: &str) {
        let targets: Vec<String> = self.servers.keys().cloned().collect();
        for target in targets {
            let sel = self.selector(&target);
            let seen = self.servers.get(&target).cloned().unwrap_or_default();
            let firing = value(
                http,
                prom,
                &format!("ALERTS{{alertname=\"{ALERT}\",alertstate=\"firing\",{sel}}}"),
            )
            .await
            .is_some();
            let eta = value(
                http,
                prom,
                &format!("redis_streams_group_trim_overtake_eta_seconds{{{sel}}}"),
            )
            .await;
            let mut next = seen.clone();
            if seen.paged.is_none() && firing {
                let margin = value(
                    http,
                    prom,
                    &format!("redis_streams_group_retention_margin_seconds{{{sel}}}"),
                )
                .await;
                let stream_sel = format!("target=\"{target}\",stream=\"{STREAM}\"");
                let window = value(
                    http,
                    prom,
                    &format!(
                        "redis_streams_stream_last_entry_timestamp_seconds{{{stream_sel}}} - redis_streams_stream_first_entry_timestamp_seconds{{{stream_sel}}}"
                    ),
                )
                .await;
                next.paged = Some(Paged {
                    at: Instant::now(),
                    eta,
                    margin,
                    window,
                });
            }
            if next.paged.is_some() && seen.draining.is_none() {
                let drain = value(
                    http,
                    prom,
                    &format!("redis_streams_group_drain_eta_seconds{{{sel}}} > 0"),
                )
                .await;
                if let Some(d) = drain {
                    next.draining = Some((Instant::now(), d));
                }
            }
            if seen.draining.is_some() && seen.over.is_none() && !firing && eta.is_none() {
                next.over = Some(Instant::now());
            }
            self.servers.insert(target, next);
        }
    }

    /// True when every server's story is over.
    pub fn done(&self) -> bool {
        self.servers.values().all(|s| s.over.is_some())
    }

    /// What did not happen, per server.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (target, seen) in &self.servers {
            let place = format!("trim-overtake on {target}");
            match seen.paged {
                None => out.push(format!("{place}: {ALERT} never fired")),
                Some(Paged {
                    eta,
                    margin,
                    window,
                    ..
                }) => {
                    if eta.is_none() {
                        out.push(format!(
                            "{place}: {ALERT} fired without a trim-overtake ETA"
                        ));
                    }
                    match (margin, window) {
                        (Some(m), Some(w)) if m >= 0.2 * w => {}
                        _ => out.push(format!(
                            "{place}: {ALERT} fired at the trimming edge (margin {margin:?} of a \
                             {window:?} window), not on the ETA"
                        )),
                    }
                }
            }
            if seen.paged.is_some() && seen.draining.is_none() {
                out.push(format!("{place}: no drain ETA after the group sped up"));
            }
            if seen.draining.is_some() && seen.over.is_none() {
                out.push(format!(
                    "{place}: the overtake ETA or the alert did not go away after the group sped up"
                ));
            }
        }
        out
    }

    /// A Markdown table of the stories, times in seconds after `since`.
    pub fn table(&self, since: Instant) -> String {
        let secs =
            |t: Instant| format!("{:.0} s", t.saturating_duration_since(since).as_secs_f64());
        let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0} s"));
        let mut out = String::from(
            "| server | paged at | ETA when paged | retention margin / retained window when paged | drain ETA first seen | overtake ETA and alert gone at |\n|---|---|---|---|---|---|\n",
        );
        for (target, seen) in &self.servers {
            let (paged, eta, mw) = match seen.paged {
                Some(p) => (
                    secs(p.at),
                    num(p.eta),
                    format!("{} / {}", num(p.margin), num(p.window)),
                ),
                None => ("-".to_string(), "-".to_string(), "-".to_string()),
            };
            let draining = seen.draining.map_or("-".to_string(), |(at, d)| {
                format!("{} ({d:.0} s)", secs(at))
            });
            let over = seen.over.map_or("-".to_string(), secs);
            out.push_str(&format!(
                "| {target} | {paged} | {eta} | {mw} | {draining} | {over} |\n"
            ));
        }
        out
    }
}
