//! `check` as an operator runs it: the real binary against a real server.
//! A single look never calls a group `ok` or `stopped` on evidence it did not
//! see (it is `warming_up`), yet uses every figure it reads (consumers idle
//! while holding entries); `--watch` judges the window with the daemon's
//! rules; problems come first, with who holds what cannot progress; JSON for
//! programs; exit codes 0, 1, 2, 3; progress on stderr; what the groups cost
//! only with `-v`.
//!
//! Time is scaled down: polls every second and a status window of 3 polls
//! (3 s), so a 5 s watch covers it.

use crate::common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use serde_json::Value;

const EXE: &str = env!("CARGO_BIN_EXE_redis-streams-exporter");

/// Polls every second, a window of 3 s, per-group probes every second.
const FAST: &str = "[schedule]\nstream = \"1s\"\npending_summary = \"1s\"\nconsumers = \"1s\"\npending_scan = \"2s\"\n\
                    [status]\nwindow = 3\n[limits]\ncommands_per_second = 100000\n";

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

fn check(config: &str, args: &[&str]) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(EXE)
        .args(["--config", path.to_str().unwrap(), "check"])
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn target(server: &RedisServer) -> String {
    format!(
        "[[targets]]\nname = \"main\"\nurl = \"{}\"\n{FAST}",
        server.url()
    )
}

fn group_create(c: &mut redis::Connection, stream: &str, group: &str, at: &str) {
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(group)
        .arg(at)
        .arg("MKSTREAM")
        .query(c)
        .unwrap();
}

fn ack(c: &mut redis::Connection, stream: &str, group: &str, ids: &[String]) {
    if ids.is_empty() {
        return;
    }
    let mut cmd = redis::cmd("XACK");
    cmd.arg(stream).arg(group);
    for id in ids {
        cmd.arg(id);
    }
    let _: i64 = cmd.query(c).unwrap();
}

/// The JSON report's group, by stream.
fn group<'a>(report: &'a Value, stream: &str) -> &'a Value {
    report["targets"][0]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["stream"] == stream)
        .unwrap_or_else(|| panic!("no group on {stream}: {report:#}"))
}

fn problems(g: &Value) -> Vec<String> {
    g["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

/// Background load on a server: producers and consumers that run until
/// the guard is dropped.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn new() -> Load {
        Load {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        }
    }

    /// Runs `step` every `period` on its own connection.
    fn every(
        &mut self,
        server: &RedisServer,
        period: Duration,
        mut step: impl FnMut(&mut redis::Connection) + Send + 'static,
    ) {
        let mut c = server.conn();
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                step(&mut c);
                std::thread::sleep(period);
            }
        }));
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A crashed consumer holding 20 entries, a poison entry, a consumer that
/// never acknowledges, 100 ghost entries, a batch consumer between runs,
/// and a quiet stream: one look.
fn faults(server: &RedisServer) {
    let mut c = server.conn();
    // worker-2 took 20 entries and died; worker-1 read the rest.
    group_create(&mut c, "crashed", "workers", "$");
    xadd_n(&mut c, "crashed", 30);
    read_group(&mut c, "crashed", "workers", "worker-2", 20);
    let rest = read_group(&mut c, "crashed", "workers", "worker-1", 10);
    ack(&mut c, "crashed", "workers", &rest);
    // One entry redelivered 12 times (poison_delivery_count is 10).
    group_create(&mut c, "poison", "workers", "$");
    xadd_n(&mut c, "poison", 1);
    let bad = read_group(&mut c, "poison", "workers", "worker-1", 1);
    for _ in 0..11 {
        let _: redis::Value = redis::cmd("XCLAIM")
            .arg("poison")
            .arg("workers")
            .arg("worker-2")
            .arg(0)
            .arg(&bad[0])
            .query(&mut c)
            .unwrap();
    }
    // Read, never acknowledged.
    group_create(&mut c, "never-acks", "workers", "$");
    xadd_n(&mut c, "never-acks", 30);
    read_group(&mut c, "never-acks", "workers", "worker-1", 30);
    // 100 pending entries whose bodies were deleted.
    group_create(&mut c, "ghosts", "workers", "$");
    let ids = xadd_n(&mut c, "ghosts", 110);
    read_group(&mut c, "ghosts", "workers", "worker-1", 110);
    ack(&mut c, "ghosts", "workers", &ids[100..]);
    let mut del = redis::cmd("XDEL");
    del.arg("ghosts");
    for id in &ids[..100] {
        del.arg(id);
    }
    let _: i64 = del.query(&mut c).unwrap();
    // A batch job drained the stream; 20 entries arrived since.
    group_create(&mut c, "batch", "reports", "$");
    xadd_n(&mut c, "batch", 10);
    let done = read_group(&mut c, "batch", "reports", "job", 10);
    ack(&mut c, "batch", "reports", &done);
    xadd_n(&mut c, "batch", 20);
    // Nothing to do.
    group_create(&mut c, "quiet", "workers", "$");
}

#[test]
fn one_look_is_never_ok_or_stopped_on_what_it_cannot_see() {
    let server = RedisServer::start(Server::Redis70);
    faults(&server);
    // The batch job's last read is now older than the 3 s window: the rule
    // "nobody read for the whole window" holds, yet it is a batch job.
    std::thread::sleep(Duration::from_secs(4));
    let ran = check(&target(&server), &["--output", "json"]);
    assert_eq!(ran.code, 1, "{}\n{}", ran.stdout, ran.stderr);
    let report: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(report["exit_code"], 1);
    assert_eq!(report["watched_seconds"], 0.0);
    assert_eq!(report["status_window_seconds"], 3.0);
    for stream in ["crashed", "never-acks", "batch"] {
        assert_eq!(
            group(&report, stream)["status"],
            "warming_up",
            "{stream}: {report:#}"
        );
    }
    // What one look reads of the consumers: worker-2 of `crashed` holds 20
    // entries and has not read for longer than the window, though its
    // entries are not orphaned yet (5 minutes until the cadence is learned).
    assert_eq!(
        problems(group(&report, "crashed")),
        [
            "worker-2 holds 20 entries and has not read for 4s (longer than the status window, 3s): crashed, or a handler that long; orphaned after 5m"
        ],
        "{report:#}"
    );
    assert!(problems(group(&report, "batch")).is_empty(), "{report:#}");
    let poison = group(&report, "poison");
    assert_eq!(poison["poison"], 1);
    assert!(
        problems(poison).iter().any(|p| p.starts_with(
            "1 poison entry (delivered at least 10 times); worker-2 holds poison, the oldest "
        ) && p
            .contains("(delivered 12 times): XCLAIM poison workers <dead-letter-handler> ")),
        "{poison:#}"
    );
    let ghosts = group(&report, "ghosts");
    assert_eq!(ghosts["ghosts"], 100);
    assert!(
        problems(ghosts)[0].starts_with("100 ghost entries"),
        "{ghosts:#}"
    );
    // Nothing to do: ok (whether anything was produced needs a window).
    assert_eq!(group(&report, "quiet")["status"], "ok");
    assert_eq!(group(&report, "crashed")["pending"], 20);
    assert!(
        report["cannot_know"].as_str().unwrap().starts_with(
            "One look: 5 groups with work waiting are warming_up (not judged yet) rather than ok. What needs a window cannot be known"
        ),
        "{report:#}"
    );
    assert_eq!(report["warming_up_groups"], 5);

    // The table: problems first, the others only counted; it says what a
    // single look cannot know.
    let ran = check(&target(&server), &[]);
    assert_eq!(ran.code, 1);
    let out = &ran.stdout;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "PROBLEMS: 4 groups", "{out}");
    assert!(
        lines[1]
            .split_whitespace()
            .take(3)
            .eq(["TARGET", "STREAM", "GROUP"]),
        "{out}"
    );
    assert!(
        out.contains("  ! 100 ghost entries: pending, but their bodies were trimmed or deleted")
    );
    let statuses: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("main "))
        .map(|l| l.split_whitespace().nth(3).unwrap())
        .collect();
    assert_eq!(statuses, ["warming_up"; 4], "{out}");
    assert!(
        !out.lines().any(|l| l.starts_with("main    batch")),
        "a group without a problem is only counted: {out}"
    );
    assert!(
        out.contains("main: 6 streams, 6 groups: 5 warming_up, 1 ok; worst lag "),
        "{out}"
    );
    // What the groups cost is for -v.
    assert!(!out.contains("per-group probes"), "{out}");
    assert!(out.contains("Run `check --watch 3s`"), "{out}");
    // Logs stay out of stdout, and at warn nothing is logged at all.
    assert!(!ran.stderr.contains("INFO"), "{}", ran.stderr);
    // --all lists every group.
    let all = check(&target(&server), &["--all"]).stdout;
    assert!(all.contains("batch") && all.contains("quiet"), "{all}");
}

/// A task queue whose workers take a random name at each start: 300 idle
/// consumers left by restarts, a live worker, and a crashed one holding 5
/// entries whose name sorts after all the others. One look names it, its
/// oldest entry and the claim at the group's orphan limit.
#[test]
fn one_look_names_the_crashed_worker_among_300_idle_consumers() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    group_create(&mut c, "tasks", "workers", "$");
    let mut pipe = redis::pipe();
    for i in 0..300u64 {
        pipe.cmd("XGROUP")
            .arg("CREATECONSUMER")
            .arg("tasks")
            .arg("workers")
            .arg(format!(
                "w-{:08x}",
                i.wrapping_mul(0x9E37_79B9) % 0xFFFF_FFFF
            ))
            .ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let held = xadd_n(&mut c, "tasks", 5);
    read_group(&mut c, "tasks", "workers", "w-zz7f3a91", 5);
    let mut load = Load::new();
    load.every(&server, Duration::from_millis(100), |c| {
        xadd_n(c, "tasks", 1);
        let got = read_group(c, "tasks", "workers", "w-live0001", 100);
        ack(c, "tasks", "workers", &got);
    });
    std::thread::sleep(Duration::from_secs(3));
    let config = format!(
        "{}[[streams]]\nmatch = \"tasks\"\nconsumer_inactive_after = \"2s\"\n",
        target(&server)
    );
    let ran = check(&config, &[]);
    drop(load);
    assert_eq!(ran.code, 1, "{}\n{}", ran.stdout, ran.stderr);
    let want = "  ! 5 pending entries held by consumers inactive for more than 2s; w-zz7f3a91 holds 5 entries, silent for ";
    let claim = format!(
        ", the oldest {first}: XAUTOCLAIM tasks workers <live-consumer> 2000 {first} COUNT 100",
        first = held[0]
    );
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with(want) && l.ends_with(&claim)),
        "{want}…{claim}\n{}",
        ran.stdout
    );
    // Stalled by what one look saw, not by a watch it did not make.
    assert!(
        ran.stdout.contains(
            "  ! stalled: its oldest pending entries cannot progress (poison, ghost or orphaned entries, below)"
        ) && !ran.stdout.contains(" watched"),
        "{}",
        ran.stdout
    );
}

#[test]
fn a_watch_judges_the_window_with_the_daemons_rules() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    // A group whose consumer last read long ago while entries keep coming.
    group_create(&mut c, "stopped", "workers", "$");
    xadd_n(&mut c, "stopped", 2);
    let got = read_group(&mut c, "stopped", "workers", "worker-1", 2);
    ack(&mut c, "stopped", "workers", &got);
    for stream in ["crashed", "never-acks", "healthy", "batch"] {
        group_create(&mut c, stream, "workers", "$");
    }
    // worker-2 of `crashed` dies holding 20 entries.
    xadd_n(&mut c, "crashed", 20);
    read_group(&mut c, "crashed", "workers", "worker-2", 20);
    // The consumer of `never-acks` has been forgetting to acknowledge for a while.
    xadd_n(&mut c, "never-acks", 5);
    read_group(&mut c, "never-acks", "workers", "worker-1", 5);
    std::thread::sleep(Duration::from_secs(3));
    let mut load = Load::new();
    // Producers.
    load.every(&server, Duration::from_millis(200), |c| {
        for stream in ["stopped", "crashed", "never-acks", "healthy", "batch"] {
            xadd_n(c, stream, 1);
        }
    });
    // Consumers that keep up (worker-1 of `crashed` too).
    load.every(&server, Duration::from_millis(100), |c| {
        for stream in ["crashed", "healthy"] {
            let got = read_group(c, stream, "workers", "worker-1", 100);
            ack(c, stream, "workers", &got);
        }
    });
    // Reads, never acknowledges.
    load.every(&server, Duration::from_millis(300), |c| {
        read_group(c, "never-acks", "workers", "worker-1", 100);
    });
    // A batch job every 2 s: idle in between, healthy.
    load.every(&server, Duration::from_secs(2), |c| {
        let got = read_group(c, "batch", "workers", "job", 1000);
        ack(c, "batch", "workers", &got);
    });
    let ran = check(&target(&server), &["--watch", "6s", "--output", "json"]);
    drop(load);
    let report: Value = serde_json::from_str(&ran.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", ran.stdout, ran.stderr));
    let status = |s: &str| group(&report, s)["status"].as_str().unwrap().to_string();
    assert_eq!(status("crashed"), "stalled", "{report:#}");
    assert!(
        problems(group(&report, "crashed"))[0].starts_with("stalled: the oldest pending entry")
    );
    assert_eq!(status("never-acks"), "stalled", "{report:#}");
    assert_eq!(status("stopped"), "stopped", "{report:#}");
    assert!(
        problems(group(&report, "stopped"))[0]
            .starts_with("stopped: no consumer read successfully in the")
    );
    assert_eq!(status("healthy"), "ok", "{report:#}");
    assert_eq!(
        status("batch"),
        "ok",
        "a batch consumer is not stopped: {report:#}"
    );
    assert!(problems(group(&report, "batch")).is_empty());
    assert!(report["watched_seconds"].as_f64().unwrap() >= 6.0);
    assert_eq!(report["cannot_know"], Value::Null);
    assert_eq!(report["warming_up_groups"], 0);
    assert_eq!(ran.code, 1);
    assert!(
        ran.stderr.contains("check: watching 1 target(s) for 6s"),
        "{}",
        ran.stderr
    );
}

#[test]
fn healthy_then_data_loss() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 4);
    xadd_n(&mut c, "orders:dead", 2);
    group_create(&mut c, "orders", "billing", "$");
    let config = format!(
        "[[targets]]\nname = \"main\"\nurl = \"{}\"\nstreams = [\"orders\"]\n\
         [[streams]]\nmatch = \"orders\"\ndead_letter = \"orders:dead\"\n",
        server.url()
    );
    let ran = check(&config, &[]);
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines[0], "No problems found.");
    assert!(
        ran.stdout
            .contains("main: 1 stream, 1 group: 1 ok; worst lag 0s; 0 problems"),
        "{}",
        ran.stdout
    );
    let all = check(&config, &["--all"]).stdout;
    let row: Vec<&str> = all
        .lines()
        .find(|l| l.starts_with("main "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        row,
        [
            "main", "orders", "billing", "ok", "0", "0s", "0", "-", "-", "0", "0", "2", "0"
        ],
        "{all}"
    );

    // A slow group overtaken by a trim: data loss, exit 1.
    group_create(&mut c, "orders", "slow", "0");
    read_group(&mut c, "orders", "slow", "c", 1);
    xadd_n(&mut c, "orders", 6);
    let _: i64 = redis::cmd("XTRIM")
        .arg("orders")
        .arg("MAXLEN")
        .arg(3)
        .query(&mut c)
        .unwrap();
    let ran = check(&config, &[]);
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    // billing never had a consumer, and now entries wait: stopped.
    assert_eq!(lines[0], "PROBLEMS: 2 groups");
    let at = lines
        .iter()
        .position(|l| l.starts_with("main    orders  slow"))
        .unwrap();
    let slow: Vec<&str> = lines[at].split_whitespace().collect();
    assert_eq!(
        &slow[..5],
        ["main", "orders", "slow", "data_loss", "3"],
        "{}",
        ran.stdout
    );
    // 10 added − 1 read − 3 retained = 6 lost.
    assert_eq!(slow[12], "6", "{}", ran.stdout);
    assert_eq!(
        lines[at + 1],
        "  ! data_loss: 6 entries were trimmed before this group read them"
    );
    assert!(
        ran.stdout
            .contains("  ! stopped: no consumer in the group, with 3 undelivered entries waiting"),
        "{}",
        ran.stdout
    );
}

/// A watch shorter than the status window (3 s here) is told at the start,
/// before the watch and its progress, not only in the report at its end.
#[test]
fn a_watch_shorter_than_the_window_warns_at_the_start() {
    let server = RedisServer::start(Server::Redis70);
    xadd_n(&mut server.conn(), "orders", 3);
    let ran = check(&target(&server), &["--watch", "2s"]);
    let first = ran.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("check: warning: a watch of 2s is shorter than the status window (3s"),
        "{}",
        ran.stderr
    );
    assert!(first.contains("check --watch 3s"), "{first}");
    assert!(
        ran.stderr.contains("check: watching 1 target(s) for 2s"),
        "{}",
        ran.stderr
    );
    // A watch as long as the window is not warned about.
    let ran = check(&target(&server), &["--watch", "3s"]);
    assert!(!ran.stderr.contains("warning"), "{}", ran.stderr);
}

#[test]
fn unreachable_target_exits_3() {
    let server = RedisServer::start(Server::Redis70);
    let port = free_port();
    let config = format!(
        "[[targets]]\nname = \"main\"\nurl = \"{}\"\n[[targets]]\nname = \"gone\"\nurl = \"redis://127.0.0.1:{port}\"\n[limits]\ncommand_timeout = \"300ms\"\n",
        server.url()
    );
    let ran = check(&config, &[]);
    assert_eq!(ran.code, 3, "{}", ran.stdout);
    // One line for the unreachable target, with the reason; no watch
    // advice (watching longer would not reach it), no warnings on stderr.
    let prefix = format!(
        "PROBLEMS: 1 target\ntarget gone: unreachable: discovery failed: 127.0.0.1:{port}: "
    );
    assert!(ran.stdout.starts_with(&prefix), "{}", ran.stdout);
    assert_eq!(ran.stdout.matches("gone").count(), 1, "{}", ran.stdout);
    assert!(!ran.stdout.contains("--watch"), "{}", ran.stdout);
    assert!(ran.stderr.is_empty(), "{}", ran.stderr);
    let json: Value = serde_json::from_str(&check(&config, &["--output", "json"]).stdout).unwrap();
    assert_eq!(json["exit_code"], 3);
    assert_eq!(json["targets"][1]["up"], false);
    assert_eq!(json["targets"][0]["up"], true);
}

#[test]
fn usage_errors_exit_2() {
    let run = |args: &[&str]| {
        let out = Command::new(EXE).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for args in [
        &["check", "--web.listen-address", ":1"][..],
        &["--web.listen-address", ":1", "check"],
        &["--web.enable-lifecycle", "check"],
        &["check", "--web.config.file", "/x"],
    ] {
        let (code, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains("only apply to the daemon") || err.contains("unexpected argument '--web."),
            "{args:?}: {err}"
        );
    }
    // Only /probe targets: nothing for check to look at.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "[probe]\nallowed_targets = [\"redis://127.0.0.1:*\"]\n",
    )
    .unwrap();
    let (code, err) = run(&["--config", path.to_str().unwrap(), "check"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("targets: check needs [[targets]]"), "{err}");
    let (code, err) = run(&["check", "--watch", "soon"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is not a duration"), "{err}");
    let (code, err) = run(&["check", "--output", "yaml"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, out) = {
        let out = Command::new(EXE)
            .args(["check", "--help"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(code, Some(0));
    assert!(out.contains("Exit codes: 0 no problem found, 1 problems found, 2 usage or configuration error, 3 a target could not be reached."), "{out}");
    assert!(!out.contains("--web."), "{out}");
}

/// 3,000 streams × 2 groups: progress on stderr while they are read (lines
/// when stderr is not a terminal, a bar when it is), then a summary.
#[test]
fn progress_and_summary_on_a_large_keyspace() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        let key = format!("s:{i}");
        pipe.cmd("XADD").arg(&key).arg("*").arg("n").arg(1).ignore();
        for g in ["g1", "g2"] {
            pipe.cmd("XGROUP")
                .arg("CREATE")
                .arg(&key)
                .arg(g)
                .arg("$")
                .ignore();
        }
    }
    let _: () = pipe.query(&mut c).unwrap();
    // A rate limit that makes the stream poll take a few seconds (the idle
    // groups cost the per-group probes no command).
    let config = format!(
        "[[targets]]\nname = \"main\"\nurl = \"{}\"\n[limits]\ncommands_per_second = 1000\n",
        server.url()
    );
    let ran = check(&config, &[]);
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.starts_with("No problems found.\n"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("main: 3000 streams, 6000 groups: 6000 ok; worst lag 0s"),
        "{}",
        ran.stdout
    );
    let progress: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.starts_with("check: "))
        .collect();
    assert!(!progress.is_empty(), "no progress: {}", ran.stderr);
    assert!(
        progress.iter().any(|l| {
            l.contains("/3000 streams") || l.contains("/6000 groups") || l.contains(" entries")
        }),
        "{progress:#?}"
    );
    assert!(!ran.stderr.contains('\x1b'), "no bar into a pipe");

    // On a terminal: a bar redrawn in place.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, &config).unwrap();
    let inner = format!("{EXE} --config {} check >/dev/null", path.to_str().unwrap());
    let out = Command::new(which("script"))
        .args(["-qefc", &inner, "/dev/null"])
        .env("COLUMNS", "160")
        .output()
        .unwrap();
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(tty.contains("\r\x1b[2Kcheck ["), "{tty:?}");
    assert!(tty.contains("#") && tty.contains("streams"), "{tty:?}");
}

/// The target's line says what its groups cost the per-group probes: a
/// target whose groups are idle needs (next to) none.
#[test]
fn the_target_line_says_what_its_groups_cost() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    for s in ["a", "b", "c"] {
        group_create(&mut c, s, "g", "$");
    }
    let ran = check(&target(&server), &[]);
    assert!(!ran.stdout.contains("per-group probes"), "{}", ran.stdout);
    let ran = check(&target(&server), &["-v"]);
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains(
            "per-group probes: about 0.0 commands/s at the configured intervals (9.5/s if every \
             group were asked every run): 0 groups asked every run, 0 idle with consumers (read \
             one run in 5), 3 with nothing to ask"
        ),
        "{}",
        ran.stdout
    );
    // Work for one group: it is asked every run.
    xadd_n(&mut c, "a", 2);
    read_group(&mut c, "a", "g", "worker", 2);
    let ran = check(&target(&server), &["--verbose"]);
    assert!(
        ran.stdout
            .contains("1 group asked every run, 0 idle with consumers (read one run in 5), 2 with nothing to ask"),
        "{}",
        ran.stdout
    );
}

/// The cleanup users run while a watch polls: a retention job trimming to
/// the slowest group's position, a worker deleting what it processed, a
/// producer trimming with `ACKED`, and (8.6) `XACKDEL … ACKED`. The watch
/// judges them with the daemon's ledger: nothing lost, no problem. A real
/// loss in the same watch (entries deleted before the group read them) is
/// its one problem.
fn cleanup_is_never_a_loss(server: Server) {
    let server = RedisServer::start(server);
    let caps = Capabilities::of(&server);
    let acked = caps.xackdel && caps.trim_refs;
    let mut c = server.conn();
    for stream in ["retained", "worked", "capped", "acked", "lossy"] {
        group_create(&mut c, stream, "workers", "$");
    }
    let mut load = Load::new();
    load.every(&server, Duration::from_millis(100), move |c| {
        for stream in ["retained", "worked"] {
            xadd_n(c, stream, 1);
        }
        if acked {
            xadd_n(c, "acked", 1);
            let _: String = redis::cmd("XADD")
                .arg("capped")
                .arg("ACKED")
                .arg("MAXLEN")
                .arg(5)
                .arg("*")
                .arg("f")
                .arg("v")
                .query(c)
                .unwrap();
        }
    });
    // Consumers that keep up; `worked` deletes what it processed.
    load.every(&server, Duration::from_millis(150), move |c| {
        for stream in ["retained", "capped"] {
            let got = read_group(c, stream, "workers", "w", 100);
            ack(c, stream, "workers", &got);
        }
        let got = read_group(c, "worked", "workers", "w", 100);
        ack(c, "worked", "workers", &got);
        if !got.is_empty() {
            let mut del = redis::cmd("XDEL");
            del.arg("worked").arg(&got);
            let _: i64 = del.query(c).unwrap();
        }
        if acked {
            let got = read_group(c, "acked", "workers", "w", 100);
            if !got.is_empty() {
                let _: redis::Value = redis::cmd("XACKDEL")
                    .arg("acked")
                    .arg("workers")
                    .arg("ACKED")
                    .arg("IDS")
                    .arg(got.len())
                    .arg(&got)
                    .query(c)
                    .unwrap();
            }
        }
    });
    // The retention job: everything up to the group's position goes.
    load.every(&server, Duration::from_millis(700), |c| {
        let groups: Vec<std::collections::HashMap<String, redis::Value>> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg("retained")
            .query(c)
            .unwrap();
        let Some(redis::Value::BulkString(at)) = groups[0].get("last-delivered-id") else {
            panic!("no last-delivered-id: {groups:?}");
        };
        let _: i64 = redis::cmd("XTRIM")
            .arg("retained")
            .arg("MINID")
            .arg(at.as_slice())
            .query(c)
            .unwrap();
    });
    // The real loss, in the middle of the watch: 4 entries for a group
    // whose consumer is down, the first 3 deleted before it read them.
    let loss = std::thread::spawn({
        let mut c = server.conn();
        move || {
            std::thread::sleep(Duration::from_secs(3));
            let ids = xadd_n(&mut c, "lossy", 4);
            let mut del = redis::cmd("XDEL");
            del.arg("lossy").arg(&ids[..3]);
            let _: i64 = del.query(&mut c).unwrap();
        }
    });
    // The producer's own trimming waits for every group.
    let config = format!(
        "{}[[streams]]\nmatch = \"capped\"\ntrimming = \"acked\"\n",
        target(&server)
    );
    let ran = check(&config, &["--watch", "8s", "--output", "json"]);
    loss.join().unwrap();
    drop(load);
    let report: Value = serde_json::from_str(&ran.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", ran.stdout, ran.stderr));
    let mut clean = vec!["retained", "worked"];
    if acked {
        clean.extend(["capped", "acked"]);
    }
    for stream in clean {
        let g = group(&report, stream);
        assert_eq!(g["status"], "ok", "{stream}: {report:#}");
        assert!(problems(g).is_empty(), "{stream}: {report:#}");
    }
    let lossy = group(&report, "lossy");
    assert_eq!(lossy["status"], "data_loss", "{report:#}");
    assert!(
        problems(lossy)[0].starts_with("data_loss: entries were removed before this group read them (lost 3 since the check started"),
        "{report:#}"
    );
    assert_eq!(ran.code, 1, "{report:#}");
}

#[test]
fn cleanup_is_never_a_loss_redis70() {
    cleanup_is_never_a_loss(Server::Redis70);
}

#[test]
fn cleanup_is_never_a_loss_redis8() {
    cleanup_is_never_a_loss(Server::Redis8);
}

#[test]
fn cleanup_is_never_a_loss_valkey9() {
    cleanup_is_never_a_loss(Server::Valkey9);
}
