//! The demo without cargo, and the simulator's `--cleanup`.
//!
//! `scripts/demo.sh --bin-dir` runs the binaries it is given, with no cargo
//! on `PATH`, its exporter serves the simulator's streams, its Alertmanager
//! loads the example's routes with a receiver of the demo's own, and when it
//! stops it prints the notifications per scenario. `--cleanup`:
//! when the simulator stops, after `--duration` or on SIGINT, every key its
//! scenarios created is gone and nothing else is touched; without it the
//! streams stay. Against a real redis-server 7.0.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{RedisServer, Server};

const SIMULATOR: &str = env!("CARGO_BIN_EXE_redis-streams-simulator");

/// The scenarios run here and the keys they make with prefix `t:` and
/// `--streams 5`: a stream each, healthy's and dead-letter's `:dlq`
/// streams, many-streams' five.
const SCENARIOS: [&str; 3] = ["healthy", "dead-letter", "many-streams"];

fn keys(server: &RedisServer, pattern: &str) -> Vec<String> {
    let mut c = server.conn();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut c).unwrap();
    keys.sort();
    keys
}

fn simulator(server: &RedisServer, extra: &[&str]) -> Command {
    let mut cmd = Command::new(SIMULATOR);
    cmd.args(["--url", &server.url(), "--prefix", "t:", "--streams", "5"])
        .args(extra)
        .args(SCENARIOS)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[test]
fn cleanup_removes_what_the_scenarios_created() {
    let server = RedisServer::start(Server::Redis70);
    server.cmd(&["SET", "t:not-ours", "1"]);

    // Without --cleanup the streams stay behind.
    let out = simulator(&server, &["--duration", "3s"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let left = keys(&server, "t:*");
    for key in ["t:healthy", "t:deadletter", "t:0", "t:4", "t:not-ours"] {
        assert!(left.iter().any(|k| k == key), "{key} missing from {left:?}");
    }

    // With it, after --duration: only the key it did not create is left.
    let out = simulator(&server, &["--duration", "3s", "--cleanup"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("cleanup deleted"), "{stdout}");
    assert_eq!(keys(&server, "t:*"), ["t:not-ours"]);

    // On SIGINT, once the scenarios have written.
    let child = simulator(&server, &["--cleanup"]).spawn().unwrap();
    let start = Instant::now();
    while keys(&server, "t:deadletter:dlq").is_empty() || keys(&server, "t:4").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the scenarios wrote nothing: {:?}",
            keys(&server, "t:*")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("signal received"),
        "{out:?}"
    );
    assert_eq!(keys(&server, "t:*"), ["t:not-ours"]);
}

#[test]
fn help_says_what_cleanup_does() {
    let out = Command::new(SIMULATOR).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(
        help.contains("--cleanup") && help.contains("delete every stream and key"),
        "{help}"
    );
}

/// The demo started from the directory of the test's own binaries, with a
/// `PATH` that holds no cargo: it must not build, and its exporter must serve
/// the healthy scenario's stream.
#[test]
fn demo_runs_installed_binaries_without_cargo() {
    let bin_dir = Path::new(SIMULATOR).parent().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let path = path_without_cargo(tools.path());
    let root = env!("CARGO_MANIFEST_DIR");
    let mut demo = Command::new("bash")
        .arg(format!("{root}/scripts/demo.sh"))
        .args([
            "--bin-dir",
            bin_dir.to_str().unwrap(),
            "--scenarios",
            "healthy",
        ])
        .env("PATH", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = demo.id();
    let mut lines = BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    let metrics = loop {
        let Some(Ok(line)) = lines.next() else {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            let out = demo.wait_with_output().unwrap();
            panic!("the demo stopped before it ran: {printed:?} {out:?}");
        };
        printed.push(line.clone());
        if let Some(rest) = line.split("metrics: ").nth(1) {
            break rest.trim().to_string();
        }
    };
    assert!(
        !printed.iter().any(|l| l.contains("cargo build")),
        "{printed:?}"
    );
    let start = Instant::now();
    let want = "redis_streams_stream_length{target=\"demo\",stream=\"demo:healthy\"}";
    loop {
        let body = http_get(&metrics).unwrap_or_default();
        if body.contains(want) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{want} not served by {metrics}:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // SIGTERM stops everything it started, as Ctrl-C does (the test process
    // may run with SIGINT ignored, which the demo's shell then cannot trap),
    // within a bound: a demo that does not stop fails the test, never hangs it.
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = demo.try_wait().unwrap() {
            break status;
        }
        if asked.elapsed() > Duration::from_secs(30) {
            let _ = demo.kill();
            panic!("the demo did not stop within 30 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(http_get(&metrics).is_none(), "the exporter still answers");
    // What it printed as it stopped: the notifications per scenario, none
    // for a healthy group.
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let table = rest
        .iter()
        .position(|l| l.starts_with("Notifications per scenario ("))
        .unwrap_or_else(|| panic!("no notification table: {rest:#?}"));
    assert!(
        rest[table + 1].starts_with("scenario  announced  resolved"),
        "{rest:#?}"
    );
    let healthy: Vec<&str> = rest[table + 2].split_whitespace().collect();
    assert_eq!(healthy, ["healthy", "0", "0", "-"], "{rest:#?}");
}

/// `--fast` for a minute with a fault of each receiver, and the groups that
/// must stay silent: the webhook the demo runs receives exactly one
/// notification for each fault (the crashed worker's ticket, the stopped
/// group's page, the trim page of the group whose consumer was down, not a
/// stopped page beside it, and the ticket of the entries a producer cancels
/// ahead of a group whose lag the server reports as nil) and none for the
/// healthy group, the batch job between its runs (with `read_every`), the
/// idle queue and the NOACK reader, as the table printed at the end says.
#[test]
fn demo_fast_notifies_each_fault_once_and_the_quiet_groups_never() {
    let bin_dir = Path::new(SIMULATOR).parent().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let mut demo = Command::new("bash")
        .arg(format!("{root}/scripts/demo.sh"))
        .args(["--bin-dir", bin_dir.to_str().unwrap(), "--fast"])
        .args(["--duration", "60s", "--scenarios"])
        .arg("healthy crashed-consumer stopped recovered outpace-xdel batch idle noack-reader")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = demo.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = demo.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(150) {
            let _ = Command::new("kill").arg(demo.id().to_string()).status();
            panic!("the demo did not stop after its --duration of 60 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let printed = reader.join().unwrap();
    assert!(status.success(), "{status:?}: {printed:#?}");
    let table = printed
        .iter()
        .position(|l| l.starts_with("Notifications per scenario ("))
        .unwrap_or_else(|| panic!("no notification table: {printed:#?}"));
    // A row: scenario, announced, resolved, the alerts announced (then,
    // after `;`, alerts firing that the routes send nowhere, info).
    let row = |scenario: &str| -> String {
        let line = printed[table + 2..]
            .iter()
            .find(|l| l.split_whitespace().next() == Some(scenario))
            .unwrap_or_else(|| panic!("no row for {scenario}: {printed:#?}"));
        let announced = line.split(';').next().unwrap_or_default();
        announced
            .split_whitespace()
            .collect::<Vec<&str>>()
            .join(" ")
    };
    assert_eq!(
        row("crashed-consumer"),
        "crashed-consumer 1 0 OrphanedPending (ticket)",
        "{printed:#?}"
    );
    assert_eq!(
        row("stopped"),
        "stopped 1 0 GroupStopped (pager)",
        "{printed:#?}"
    );
    assert_eq!(
        row("recovered"),
        "recovered 1 0 TrimmedUndelivered (pager)",
        "{printed:#?}"
    );
    assert_eq!(
        row("outpace-xdel"),
        "outpace-xdel 1 0 DeletedUndelivered (ticket)",
        "{printed:#?}"
    );
    for quiet in ["healthy", "batch", "idle", "noack-reader"] {
        assert_eq!(row(quiet), format!("{quiet} 0 0 -"), "{printed:#?}");
    }
    assert!(
        printed[table].starts_with("Notifications per scenario (4 received"),
        "nothing else notified: {printed:#?}"
    );
}

/// The demo's Alertmanager configuration is the example's, its receivers
/// with an integration sent to the demo's webhook, and with `--fast` its
/// grouping delays divided by 20 like the rules' `for:` and range windows.
#[test]
fn the_demo_loads_the_example_alertmanager_scaled_alike() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("am.yml");
    let ran = Command::new("python3")
        .arg(format!("{root}/scripts/demo-chain.py"))
        .args([
            "alertmanager",
            &format!("{root}/alerts/alertmanager.example.yml"),
        ])
        .arg(&out)
        .args(["4321", "20"])
        .output()
        .unwrap();
    assert!(ran.status.success(), "{ran:?}");
    let am = std::fs::read_to_string(&out).unwrap();
    let example =
        std::fs::read_to_string(format!("{root}/alerts/alertmanager.example.yml")).unwrap();
    let inhibit =
        |t: &str| t[t.find("inhibit_rules:").unwrap()..t.find("\nreceivers:").unwrap()].to_string();
    assert_eq!(
        inhibit(&am),
        inhibit(&example),
        "the example's inhibitions, unchanged"
    );
    for want in [
        "  group_wait: 1500ms\n",
        "  group_interval: 15s\n",
        "      group_wait: 500ms\n",
        "      - url: http://127.0.0.1:4321/pager\n",
        "      - url: http://127.0.0.1:4321/ticket\n",
        "  - name: observe\n",
    ] {
        assert!(am.contains(want), "{want}: {am}");
    }
    assert!(!am.contains("pagerduty"), "{am}");
    let rules = dir.path().join("rules.yml");
    let ran = Command::new("python3")
        .arg(format!("{root}/scripts/demo-chain.py"))
        .args(["rules", &format!("{root}/alerts/redis-streams.rules.yml")])
        .arg(&rules)
        .arg("20")
        .output()
        .unwrap();
    assert!(ran.status.success(), "{ran:?}");
    let rules = std::fs::read_to_string(&rules).unwrap();
    assert!(
        rules.contains("for: 90s") && rules.contains("[45s]"),
        "30m and [15m] scaled"
    );
}

/// The body of `GET url` (`http://host:port/path`), or `None` when nothing
/// answers.
fn http_get(url: &str) -> Option<String> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (addr, path) = rest.split_once('/')?;
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

/// A `PATH` of one directory holding a link to every program of this
/// process's `PATH` but cargo, so that the demo finds everything else.
fn path_without_cargo(dir: &Path) -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap();
    for place in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&place) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let link = dir.join(&name);
            if name != "cargo" && !link.exists() {
                let _ = std::os::unix::fs::symlink(entry.path(), &link);
            }
        }
    }
    assert!(!dir.join("cargo").exists());
    dir.as_os_str().to_owned()
}
