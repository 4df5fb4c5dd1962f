//! A differential oracle: seeded random operations on a real server (Redis
//! 6.2, 7.0, 8.6 and Valkey 9), a model that computes the truth from them,
//! and the exporter's figures compared with that truth at every poll.
//!
//! How to run it, what it compares and what it cannot: `docs/oracle.md`.
//! `RSE_ORACLE_SEEDS=N` runs N seeds from `RSE_ORACLE_SEED_BASE` (default
//! 1000) instead of the fixed CI seeds; `RSE_ORACLE_POLLS` sets the polls
//! per seed; `RSE_ORACLE_SEED=s` replays one seed; `RSE_ORACLE_SHRINK_SECS`
//! bounds the shrinking of a failure (default 60); `RSE_ORACLE_HANG_SECS`
//! the time a poll may take (default 120); `RSE_ORACLE_TRACE=stream/group`
//! prints one group's figures at every poll.

mod check;
use crate::common;
mod model;
mod ops;
mod rng;

use std::time::{Duration, Instant, SystemTime};

use check::{Checker, Failure, Stats};
use common::{Harness, Server};
use ops::{Driver, Step};
use redis_streams_exporter::config::{self, CliOverrides};
use redis_streams_exporter::probe::ProbeKind;
use redis_streams_exporter::state_file::StateFile;

/// The seeds CI runs on every server, and their polls: 1–12, and those that
/// found a fixed discrepancy (docs/oracle.md, "Found and fixed").
const CI_SEEDS: [u64; 13] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2020];
const CI_POLLS: usize = 40;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
    })
}

fn exporter_config(port: u16) -> redis_streams_exporter::config::Config {
    let text = format!(
        "[[targets]]\nname = \"t\"\nurl = \"redis://127.0.0.1:{port}\"\npatterns = [\"*\"]\n\
         [schedule]\ndiscovery = \"100ms\"\nstream = \"100ms\"\npending_summary = \"100ms\"\n\
         consumers = \"100ms\"\npending_scan = \"100ms\"\ninfo = \"100ms\"\n\
         [limits]\ncommands_per_second = 1000000\ncommand_timeout = \"{}ms\"\n\
         [status]\nwindow = 3\n",
        ops::COMMAND_TIMEOUT.as_millis()
    );
    config::from_str("oracle.toml", &text, &CliOverrides::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The outcome of one run of steps.
struct Run {
    failure: Option<Failure>,
    stats: Stats,
    transcript: Vec<String>,
    applied: std::collections::BTreeMap<&'static str, u64>,
}

/// How long one poll may take before the oracle takes the exporter for
/// hung: far beyond a stopped server's retries (`RSE_ORACLE_HANG_SECS`).
fn hang_limit() -> Duration {
    Duration::from_secs(env_u64("RSE_ORACLE_HANG_SECS").unwrap_or(120))
}

/// Armed for one poll: unless dropped in time, prints `what` (the steps
/// and commands so far) and ends the process, since a probe that never
/// returns holds the test's only thread.
struct Watchdog(std::sync::mpsc::Sender<()>);

impl Watchdog {
    fn arm(what: impl FnOnce() -> String) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let what = what();
        let limit = hang_limit();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                eprintln!(
                    "ORACLE HANG: a poll did not return in {} s (an exporter defect: a probe that never yields holds the runtime).\n{what}",
                    limit.as_secs()
                );
                std::process::exit(101);
            }
        });
        Watchdog(tx)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

fn hang_report(kind: Server, steps: &[Step], upto: usize, transcript: &[String]) -> String {
    let replay: Vec<String> = steps[..upto].iter().map(ToString::to_string).collect();
    format!(
        "{kind:?}: the steps up to the poll that hung:\n    {}\n  commands:\n    {}",
        replay.join("\n    "),
        transcript.join("\n    ")
    )
}

/// One poll of the exporter: the probes a fast schedule would have run.
/// True when the stream poll succeeded.
async fn poll(h: &Harness, d: &mut Driver) -> bool {
    let cont = d.stop_during_poll.take().map(|pause| {
        let pid = d.pid();
        stop(pid, "-STOP");
        std::thread::spawn(move || {
            std::thread::sleep(pause);
            stop(pid, "-CONT");
        })
    });
    for kind in [
        ProbeKind::Discovery,
        ProbeKind::Info,
        ProbeKind::Stream,
        ProbeKind::PendingSummary,
        ProbeKind::Consumers,
    ] {
        h.probe(kind).await;
    }
    if let Some(t) = cont {
        t.join().unwrap();
    }
    let m = h.metrics();
    ["discovery", "stream", "consumers"].iter().all(|p| {
        m.get(
            "redis_streams_exporter_probe_success",
            &[("target", "t"), ("probe", p)],
        ) == Some(1.0)
    })
}

/// Stops the exporter as the daemon stops at shutdown (its state written to
/// the state file `path`) and starts a new one that reads the file before
/// its first poll, as the daemon does at start.
async fn restart_exporter(h: Harness, port: u16, path: &std::path::Path) -> Harness {
    let ctx = h.poller.context();
    let file = std::sync::Arc::new(StateFile::open(
        path.to_path_buf(),
        &ctx.config.targets,
        SystemTime::now(),
    ));
    file.track(vec![(ctx.target.clone(), ctx.state.clone())]);
    file.save_at_shutdown(Duration::from_secs(10)).await;
    drop(h);
    let h = Harness::new(exporter_config(port));
    let ctx = h.poller.context();
    let file = StateFile::open(path.to_path_buf(), &ctx.config.targets, SystemTime::now());
    file.restore(&ctx.target, &ctx.state);
    h
}

fn stop(pid: u32, signal: &str) {
    let ok = std::process::Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {signal} {pid}");
}

/// Applies `steps` on a new server, checking every poll; stops at the first
/// failure.
async fn run(kind: Server, steps: &[Step]) -> Run {
    let mut d = Driver::new(kind);
    let mut h = Harness::new(exporter_config(d.port));
    let state = tempfile::tempdir().unwrap();
    let state_file = state.path().join("state.json");
    let mut checker = Checker::new(kind, false);
    let mut failure = None;
    let mut polls = 0;
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Op(op) => d.apply(op),
            Step::Poll => {
                if std::mem::take(&mut d.restart_exporter) {
                    h = restart_exporter(h, d.port, &state_file).await;
                }
                polls += 1;
                d.transcript.push(format!("-- poll {polls}"));
                let _watch = Watchdog::arm(|| hang_report(kind, steps, i + 1, &d.transcript));
                let mut ok = poll(&h, &mut d).await;
                // A failed poll (the server stopped, restarting) is no poll:
                // the next successful one closes the interval.
                let mut tries = 0;
                while !ok && tries < 20 {
                    checker.stats.failed_polls += 1;
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    ok = poll(&h, &mut d).await;
                }
                if !ok {
                    failure = Some(Failure {
                        poll: polls,
                        check: "poll".into(),
                        detail: "the exporter did not poll successfully in 20 tries".into(),
                    });
                    break;
                }
                let raw = match check::verify_model(&mut d, polls) {
                    Ok(raw) => raw,
                    Err(f) => {
                        failure = Some(f);
                        break;
                    }
                };
                let events = std::mem::take(&mut d.events);
                if let Err(f) = checker.check(polls, &d.model, &h.metrics(), &raw, &events) {
                    failure = Some(f);
                    break;
                }
            }
        }
    }
    Run {
        failure,
        stats: checker.stats,
        transcript: d.transcript,
        applied: d.applied,
    }
}

/// Applies `steps` while the exporter polls: each batch of operations runs
/// on a thread of its own during the poll that ends the previous interval,
/// so the exporter reads figures that change under it. Such polls are
/// checked for the bounds (never more lost than the truth, nor more of a
/// cause; a possible loss said with its reason; the removals made before
/// the poll began covered), and a stream no operation touched during a
/// poll is compared with its last such poll for what their figures prove;
/// two quiet polls at the end check the truth in full.
async fn run_concurrent(kind: Server, steps: &[Step]) -> Run {
    let mut d = Driver::new(kind);
    let h = Harness::new(exporter_config(d.port));
    let mut checker = Checker::new(kind, true);
    let mut failure = None;
    let mut batches: Vec<Vec<ops::Op>> = vec![Vec::new()];
    for step in steps {
        match step {
            Step::Op(op) => batches.last_mut().unwrap().push(op.clone()),
            Step::Poll => batches.push(Vec::new()),
        }
    }
    // The setup, then a quiet baseline poll (its figures and the model's
    // must be of the same moment), the workload during the polls after it,
    // and two quiet polls at the end.
    for op in std::mem::take(&mut batches[0]) {
        d.apply(&op);
    }
    batches.extend([Vec::new(), Vec::new()]);
    let total = batches.len();
    for (polls, batch) in batches.into_iter().enumerate() {
        let polls = polls + 1;
        d.transcript.push(format!(
            "-- poll {polls} (with {} operations during it)",
            batch.len()
        ));
        checker.busy = batch
            .iter()
            .filter_map(ops::Op::stream)
            .map(|s| ops::STREAMS[s].to_string())
            .collect();
        checker.before_poll = d
            .model
            .streams
            .iter()
            .flat_map(|(s, st)| {
                st.groups.iter().map(move |(g, gm)| {
                    (
                        (s.clone(), g.clone()),
                        gm.removed_unread.keys().copied().collect(),
                    )
                })
            })
            .collect();
        let workload = tokio::task::spawn_blocking(move || {
            for op in &batch {
                d.apply(op);
            }
            d
        });
        let ok = poll_quietly(&h).await;
        d = workload.await.unwrap();
        if !ok {
            checker.stats.failed_polls += 1;
            continue;
        }
        // The last poll sees a quiet server: the truth in full is due.
        checker.concurrent = polls < total;
        let raw = match check::verify_model(&mut d, polls) {
            Ok(raw) => raw,
            Err(f) => {
                failure = Some(f);
                break;
            }
        };
        let events = std::mem::take(&mut d.events);
        if let Err(f) = checker.check(polls, &d.model, &h.metrics(), &raw, &events) {
            failure = Some(f);
            break;
        }
    }
    Run {
        failure,
        stats: checker.stats,
        transcript: d.transcript,
        applied: d.applied,
    }
}

/// One poll with no fault: true when it succeeded.
async fn poll_quietly(h: &Harness) -> bool {
    for kind in [
        ProbeKind::Discovery,
        ProbeKind::Info,
        ProbeKind::Stream,
        ProbeKind::PendingSummary,
        ProbeKind::Consumers,
    ] {
        h.probe(kind).await;
    }
    let m = h.metrics();
    ["discovery", "stream", "consumers"].iter().all(|p| {
        m.get(
            "redis_streams_exporter_probe_success",
            &[("target", "t"), ("probe", p)],
        ) == Some(1.0)
    })
}

/// Delta debugging over the operations (polls stay): drops chunks of
/// operations while the same check still fails, until no single operation
/// can go or the time is up.
async fn shrink(kind: Server, steps: Vec<Step>, check: &str, limit: Duration) -> (Vec<Step>, Run) {
    let started = Instant::now();
    let mut best = steps;
    // Nothing after the failing poll matters.
    let mut best_run = run(kind, &best).await;
    if let Some(f) = &best_run.failure {
        let mut polls = 0;
        let cut = best
            .iter()
            .position(|s| {
                if *s == Step::Poll {
                    polls += 1;
                }
                polls == f.poll
            })
            .map_or(best.len(), |i| i + 1);
        best.truncate(cut);
    }
    let mut chunk = best.len() / 2;
    while chunk >= 1 && started.elapsed() < limit {
        let mut i = 0;
        let mut progressed = false;
        while i < best.len() && started.elapsed() < limit {
            let end = (i + chunk).min(best.len());
            if best[i..end].iter().all(|s| *s == Step::Poll) {
                i = end;
                continue;
            }
            let candidate: Vec<Step> = best[..i]
                .iter()
                .chain(best[end..].iter())
                .cloned()
                .collect();
            let r = run(kind, &candidate).await;
            if r.failure.as_ref().is_some_and(|f| f.check == check) {
                best = candidate;
                best_run = r;
                progressed = true;
            } else {
                i = end;
            }
        }
        if !progressed {
            chunk /= 2;
        }
    }
    // Polls with no operation before them are dropped last.
    let mut i = 1;
    while i < best.len() && started.elapsed() < limit {
        if best[i] == Step::Poll && best[i - 1] == Step::Poll {
            let mut candidate = best.clone();
            candidate.remove(i);
            let r = run(kind, &candidate).await;
            if r.failure.as_ref().is_some_and(|f| f.check == check) {
                best = candidate;
                best_run = r;
                continue;
            }
        }
        i += 1;
    }
    (best, best_run)
}

fn seeds() -> (Vec<u64>, usize) {
    let polls = env_u64("RSE_ORACLE_POLLS").map_or(CI_POLLS, |p| p as usize);
    if let Some(seed) = env_u64("RSE_ORACLE_SEED") {
        return (vec![seed], polls);
    }
    match env_u64("RSE_ORACLE_SEEDS") {
        Some(n) => {
            let base = env_u64("RSE_ORACLE_SEED_BASE").unwrap_or(1000);
            ((base..base + n).collect(), polls)
        }
        None => (CI_SEEDS.to_vec(), polls),
    }
}

/// The concurrent mode: seeds of operations that keep to what a live
/// workload does (no repositioning, no faults, no `XSETID`), applied while
/// the exporter polls.
async fn oracle_concurrent(kind: Server) {
    let (seeds, polls) = seeds();
    let mut failures = Vec::new();
    for seed in seeds {
        let steps = ops::generate_live(seed, kind, polls);
        let r = run_concurrent(kind, &steps).await;
        let s = &r.stats;
        println!(
            "ORACLE CONCURRENT | {kind:?} | seed {seed} | {} polls ({} failed) | {:?} | intervals with losses {} ({} entries; trimmed {}, deleted {}): counted lost {} (trimmed {}, deleted {}, trimmed_or_deleted {}), possibly lost {} | causes checked {} | spans between quiet polls checked counted {} | {}",
            s.polls,
            s.failed_polls,
            r.applied,
            s.intervals_with_loss,
            s.true_losses,
            s.truth_by_cause[0],
            s.truth_by_cause[1],
            s.counted_lost,
            s.counted_by_cause[0],
            s.counted_by_cause[1],
            s.counted_by_cause[2],
            s.counted_possible,
            s.causes_checked,
            s.proven_spans,
            r.failure
                .as_ref()
                .map_or("ok".to_string(), |f| format!("FAIL {}", f.check))
        );
        if let Some(f) = r.failure {
            failures.push(format!(
                "{kind:?} seed {seed} (concurrent): poll {} check {}: {}\n  commands:\n    {}",
                f.poll,
                f.check,
                f.detail,
                r.transcript.join("\n    ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "oracle failures:\n{}",
        failures.join("\n\n")
    );
}

async fn oracle(kind: Server) {
    let (seeds, polls) = seeds();
    let shrink_limit = Duration::from_secs(env_u64("RSE_ORACLE_SHRINK_SECS").unwrap_or(60));
    let mut failures = Vec::new();
    for seed in seeds {
        let steps = generate_steps(seed, kind, polls);
        let ops = steps.iter().filter(|s| matches!(s, Step::Op(_))).count();
        let r = run(kind, &steps).await;
        let s = &r.stats;
        println!(
            "ORACLE | {kind:?} | seed {seed} | {} polls ({} failed) | {ops} operations {:?} | intervals with losses {} ({} entries; trimmed {}, deleted {}): counted lost {} (trimmed {}, deleted {}, trimmed_or_deleted {}), possibly lost {} | causes checked {} | proven intervals checked {} ({} across restarts) | XSETID beside removals {} (past the group {}, counted beyond the truth {}) | across server restarts {} ({} with losses), DEBUG RELOAD {} ({}), exporter restarts {} ({}) | lag exact {} estimated {} (abs error {}) | {}",
            s.polls,
            s.failed_polls,
            r.applied,
            s.intervals_with_loss,
            s.true_losses,
            s.truth_by_cause[0],
            s.truth_by_cause[1],
            s.counted_lost,
            s.counted_by_cause[0],
            s.counted_by_cause[1],
            s.counted_by_cause[2],
            s.counted_possible,
            s.causes_checked,
            s.proven_intervals,
            s.proven_across_restarts,
            s.setid_mixed,
            s.setid_past_group,
            s.setid_counted_beyond,
            s.restarts[0],
            s.restarts_with_loss[0],
            s.restarts[1],
            s.restarts_with_loss[1],
            s.restarts[2],
            s.restarts_with_loss[2],
            s.lag_exact,
            s.lag_estimated,
            s.lag_estimate_abs_error,
            r.failure
                .as_ref()
                .map_or("ok".to_string(), |f| format!("FAIL {}", f.check))
        );
        if let Some(f) = r.failure {
            // Said at once: a shrinking run that hangs the exporter ends
            // the process.
            eprintln!(
                "ORACLE FAIL | {kind:?} | seed {seed} | poll {} | {} | {}",
                f.poll, f.check, f.detail
            );
            let (small, small_run) = shrink(kind, steps, &f.check, shrink_limit).await;
            let f2 = small_run.failure.clone().unwrap_or(f.clone());
            let replay: Vec<String> = small.iter().map(ToString::to_string).collect();
            failures.push(format!(
                "{kind:?} seed {seed}: poll {} check {}: {}\n  shrunk to {} steps (poll {}: {}):\n    {}\n  commands of the shrunk replay:\n    {}",
                f.poll,
                f.check,
                f.detail,
                small.len(),
                f2.poll,
                f2.detail,
                replay.join("\n    "),
                small_run.transcript.join("\n    ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "oracle failures:\n{}",
        failures.join("\n\n")
    );
}

fn generate_steps(seed: u64, kind: Server, polls: usize) -> Vec<Step> {
    ops::generate(seed, kind, polls)
}

per_server!(oracle, oracle_concurrent);
