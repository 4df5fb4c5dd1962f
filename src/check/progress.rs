//! Progress of `check` on stderr, so a large keyspace never looks like a
//! hang: a bar redrawn in place when stderr is a terminal, otherwise a
//! plain line every few seconds while a probe runs long (logs and CI output
//! stay readable). How far a probe got is read from the client's command
//! counters, so the probes need not know they are watched.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::poller::Poller;
use crate::probe::{ProbeContext, ProbeKind, group_lines};

/// Where each target is.
#[derive(Clone, Copy, Debug)]
enum Phase {
    Probe {
        kind: ProbeKind,
        started: Instant,
        /// The counter's value when the probe started.
        base: u64,
        /// What the counter will have grown by at the end, when known.
        total: Option<u64>,
    },
    Waiting {
        until: Instant,
        poll: u32,
    },
    Done,
}

#[derive(Debug)]
struct Slot {
    ctx: ProbeContext,
    phase: Phase,
}

#[derive(Debug)]
struct Inner {
    enabled: bool,
    tty: bool,
    polls: Mutex<u32>,
    slots: Mutex<Vec<Slot>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Reports progress on stderr (or nowhere).
#[derive(Clone, Debug)]
pub struct Progress(Arc<Inner>);

impl Progress {
    /// Progress on stderr: a bar on a terminal, lines otherwise.
    pub fn stderr() -> Progress {
        Progress::new(true, std::io::stderr().is_terminal())
    }

    /// No progress at all.
    pub fn silent() -> Progress {
        Progress::new(false, false)
    }

    fn new(enabled: bool, tty: bool) -> Progress {
        Progress(Arc::new(Inner {
            enabled,
            tty,
            polls: Mutex::new(0),
            slots: Mutex::new(Vec::new()),
            task: Mutex::new(None),
        }))
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.0.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says `text` on stderr now, before any probe runs.
    pub fn warn(&self, text: &str) {
        if self.0.enabled {
            let _ = writeln!(std::io::stderr(), "check: warning: {text}");
        }
    }

    /// Starts reporting on `pollers` (one slot each, in order).
    pub fn start(&self, pollers: &[Poller], watch: Duration, polls: u32) {
        if !self.0.enabled {
            return;
        }
        *self.0.polls.lock().unwrap_or_else(|p| p.into_inner()) = polls;
        *self.slots() = pollers
            .iter()
            .map(|p| Slot {
                ctx: p.context().clone(),
                phase: Phase::Done,
            })
            .collect();
        if !watch.is_zero() {
            let _ = writeln!(
                std::io::stderr(),
                "check: watching {} target(s) for {} ({polls} polls after the first)",
                pollers.len(),
                super::report::short(watch)
            );
        }
        let this = self.clone();
        let tick = if self.0.tty {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
        };
        let task = tokio::spawn(async move {
            let mut interval = tokio::time::interval(tick);
            interval.tick().await;
            loop {
                interval.tick().await;
                this.draw();
            }
        });
        *self.0.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    }

    /// Target `slot` starts `kind` (`None`: it is done).
    pub fn phase(&self, slot: usize, kind: Option<ProbeKind>) {
        if !self.0.enabled {
            return;
        }
        let mut slots = self.slots();
        let Some(s) = slots.get_mut(slot) else {
            return;
        };
        s.phase = match kind {
            None => Phase::Done,
            Some(kind) => Phase::Probe {
                kind,
                started: Instant::now(),
                base: counter(&s.ctx, kind),
                total: total(&s.ctx, kind),
            },
        };
    }

    /// Target `slot` waits until `until` for poll `poll`.
    pub fn waiting(&self, slot: usize, until: Instant, poll: u32) {
        if let Some(s) = self.slots().get_mut(slot) {
            s.phase = Phase::Waiting { until, poll };
        }
    }

    /// Stops reporting and clears the bar.
    pub fn finish(&self) {
        if let Some(task) = self.0.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
        if self.0.enabled && self.0.tty {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }

    fn draw(&self) {
        let now = Instant::now();
        let polls = *self.0.polls.lock().unwrap_or_else(|p| p.into_inner());
        let slots = self.slots();
        let many = slots.len() > 1;
        let mut parts = Vec::new();
        let mut bar = None;
        let mut long_running = false;
        for s in slots.iter() {
            let name = crate::safe_names::shorten(
                &crate::safe_names::printable(s.ctx.target.name.as_bytes()),
                24,
            )
            .into_owned();
            let who = if many {
                format!("{name}: ")
            } else {
                String::new()
            };
            match s.phase {
                Phase::Probe {
                    kind,
                    started,
                    base,
                    total,
                } => {
                    let done = counter(&s.ctx, kind).saturating_sub(base);
                    let elapsed = now.duration_since(started);
                    long_running |= elapsed >= Duration::from_secs(2);
                    let what = describe(kind, done, total, s.ctx.target.scan_count);
                    if let (Some(t), None) = (total.filter(|t| *t > 0), bar) {
                        bar = Some(done.min(t) as f64 / t as f64);
                    }
                    parts.push(format!("{who}{what} ({}s)", elapsed.as_secs()));
                }
                Phase::Waiting { until, poll } => {
                    let left = until.saturating_duration_since(now);
                    parts.push(format!(
                        "{who}next poll ({poll} of {polls}) in {}s",
                        left.as_secs()
                    ));
                }
                Phase::Done => parts.push(format!("{who}done")),
            }
        }
        drop(slots);
        let mut err = std::io::stderr().lock();
        if self.0.tty {
            let width: usize = std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.parse().ok())
                .unwrap_or(100);
            let bar = bar.map_or(String::new(), |f| {
                let filled = (f * 20.0).round() as usize;
                format!("[{}{}] ", "#".repeat(filled), "-".repeat(20 - filled))
            });
            let line: String = format!("check {bar}{}", parts.join(" | "))
                .chars()
                .take(width.saturating_sub(1))
                .collect();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        } else if long_running {
            let _ = writeln!(err, "check: {}", parts.join(" | "));
        }
    }
}

/// The client counter that grows as `kind` does its work. The PEL scan
/// counts entries read.
fn counter(ctx: &ProbeContext, kind: ProbeKind) -> u64 {
    let stats = ctx.client.stats_snapshot();
    let label = match kind {
        ProbeKind::Discovery => "scan",
        ProbeKind::Info => "info",
        ProbeKind::Stream => "xinfo_groups",
        ProbeKind::PendingSummary => "xpending_summary",
        ProbeKind::Consumers => "xinfo_consumers",
        ProbeKind::PendingScan => return stats.pending_scanned,
    };
    stats.commands.get(label).copied().unwrap_or(0)
}

/// What the counter will have grown by when `kind` is done, when known.
fn total(ctx: &ProbeContext, kind: ProbeKind) -> Option<u64> {
    let state = ctx.state();
    match kind {
        ProbeKind::Discovery | ProbeKind::Info => None,
        ProbeKind::Stream => Some(state.watched().len() as u64),
        // Only groups whose line shows something to learn are asked (see
        // probe::GroupLine); a first run reads every group with consumers.
        ProbeKind::PendingSummary => {
            let asked = group_lines(&state)
                .iter()
                .filter(|(_, l)| l.pending > 0)
                .count();
            Some(asked as u64)
        }
        ProbeKind::Consumers => {
            let asked = group_lines(&state)
                .iter()
                .filter(|(_, l)| l.consumers > 0)
                .count();
            Some(asked as u64)
        }
        ProbeKind::PendingScan => Some(group_lines(&state).iter().map(|(_, l)| l.pending).sum()),
    }
}

fn describe(kind: ProbeKind, done: u64, total: Option<u64>, scan_count: u32) -> String {
    let of = |unit: &str| match total {
        Some(t) => format!("{done}/{t} {unit}"),
        None => format!("{done} {unit}"),
    };
    match kind {
        ProbeKind::Discovery => format!("discovery: ~{} keys walked", done * u64::from(scan_count)),
        ProbeKind::Info => "info".to_string(),
        ProbeKind::Stream => format!("stream poll: {}", of("streams")),
        ProbeKind::PendingSummary => format!("pending summary: {}", of("groups")),
        ProbeKind::Consumers => format!("consumers: {}", of("groups")),
        ProbeKind::PendingScan => format!("PEL scan: {}", of("entries")),
    }
}
