//! Logs as operators consume them, from the real binary: JSON lines that
//! log processors can read (each key once, the Redis target under
//! `redis_target`), colour only on a terminal, and a log level that is
//! checked rather than silently turning logging off.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;

const EXE: &str = env!("CARGO_BIN_EXE_redis-streams-exporter");

/// Keys of a JSON object in order, duplicates included (a map would keep
/// only the last of two equal keys, which is the very bug looked for).
fn keys(line: &str) -> Vec<String> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some((k, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                        keys.push(k);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(V)
        }
    }
    serde_json::from_str::<Keys>(line)
        .unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}"))
        .0
}

/// A config with a reachable target `main` and an unreachable one `gone`.
fn two_targets(server: &RedisServer, format: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        format!(
            "[web]\nlisten_address = \"127.0.0.1:{}\"\n[log]\nformat = \"{format}\"\n\
             [[targets]]\nname = \"main\"\nurl = \"{}\"\n\
             [[targets]]\nname = \"gone\"\nurl = \"redis://127.0.0.1:{}\"\n\
             [limits]\ncommand_timeout = \"300ms\"\n",
            free_port(),
            server.url(),
            free_port()
        ),
    )
    .unwrap();
    (dir, path)
}

/// Runs the daemon until `done` holds for the stderr lines read so far (or
/// 20 s pass), then stops it; returns those lines.
fn daemon_lines(mut cmd: Command, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut lines = Vec::new();
    while !done(&lines) && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            lines.push(line);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn json_lines_never_repeat_a_key_and_name_the_redis_target() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 3);
    let (_dir, path) = two_targets(&server, "json");
    let mut cmd = Command::new(EXE);
    cmd.arg("--config").arg(&path);
    let about = |lines: &[String], target: &str, message: &str| {
        lines
            .iter()
            .any(|l| l.contains(&format!("\"redis_target\":\"{target}\"")) && l.contains(message))
    };
    let lines = daemon_lines(cmd, |lines| {
        about(lines, "main", "\"discovery\"") && about(lines, "gone", "target down")
    });
    assert!(about(&lines, "main", "\"discovery\""), "{lines:#?}");
    assert!(about(&lines, "gone", "target down"), "{lines:#?}");
    for line in &lines {
        let keys = keys(line);
        let mut unique = keys.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), keys.len(), "a key repeats: {line}");
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        // `target` is tracing's: the Rust module that logged.
        let module = v["target"].as_str().unwrap();
        assert!(
            module.starts_with("redis_streams_exporter"),
            "target {module:?} in {line}"
        );
        assert!(
            v["level"].is_string() && v["timestamp"].is_string(),
            "{line}"
        );
    }
    let down = lines.iter().find(|l| l.contains("target down")).unwrap();
    let v: serde_json::Value = serde_json::from_str(down).unwrap();
    assert_eq!(v["redis_target"], "gone");
    assert_eq!(v["level"], "WARN");
    assert!(
        v["reason"].as_str().unwrap().contains("gone"),
        "the reason says what failed: {down}"
    );
}

/// Text logs carry colour only on a terminal (a pty made by `script`), and
/// not even there with `NO_COLOR`; into a pipe (a file, the journal) never.
#[test]
fn colour_only_on_a_terminal_without_no_color() {
    let server = RedisServer::start(Server::Redis70);
    let (_dir, path) = two_targets(&server, "text");
    let seen_down = |lines: &[String]| lines.iter().any(|l| l.contains("target down"));

    let mut piped = Command::new(EXE);
    piped.arg("--config").arg(&path).env_remove("NO_COLOR");
    let lines = daemon_lines(piped, seen_down);
    assert!(seen_down(&lines), "{lines:#?}");
    assert!(
        lines.iter().all(|l| !l.contains('\x1b')),
        "escape codes in piped logs: {lines:#?}"
    );

    // `script` runs the exporter on a pseudo-terminal and copies what it
    // writes there to its own stdout; `timeout` stops it with SIGINT.
    let on_tty = |no_color: Option<&str>| -> String {
        let inner = format!(
            "timeout -s INT 4 {EXE} --config {} 2>&1",
            path.to_str().unwrap()
        );
        let mut cmd = Command::new(which("script"));
        cmd.args(["-qefc", &inner, "/dev/null"]);
        match no_color {
            Some(v) => cmd.env("NO_COLOR", v),
            None => cmd.env_remove("NO_COLOR"),
        };
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let coloured = on_tty(None);
    assert!(coloured.contains("target down"), "{coloured}");
    assert!(
        coloured.contains("\x1b["),
        "no colour on a terminal: {coloured:?}"
    );
    let plain = on_tty(Some("1"));
    assert!(plain.contains("target down"), "{plain}");
    assert!(
        !plain.contains('\x1b'),
        "colour despite NO_COLOR: {plain:?}"
    );
    // An empty NO_COLOR does not count (no-color.org).
    assert!(on_tty(Some("")).contains("\x1b["));
}

/// An unknown level is a usage error (exit 2) wherever it comes from, and
/// `--check-config` says so too: tracing would read `wran` as a module name
/// and turn every other log line off.
#[test]
fn unknown_log_level_is_a_usage_error() {
    let run = |args: &[&str]| {
        let out = Command::new(EXE)
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for args in [
        &["--log.level", "wran", "--check-config"][..],
        &["--log.level", "wran", "--web.listen-address", "127.0.0.1:1"],
        &["--log.level", "wran", "check"],
        &[
            "--log.level",
            "redis_streams_exporter=loud",
            "--check-config",
        ],
    ] {
        let (code, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("log.level"), "{args:?}: {err}");
        assert!(err.contains("is not a log level"), "{args:?}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[log]\nlevel = \"wran\"\n").unwrap();
    let (code, err) = run(&["--config", path.to_str().unwrap(), "--check-config"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("c.toml: log.level: \"wran\" is not a log level"),
        "{err}"
    );
    for good in ["warn", "redis_streams_exporter=debug,warn", "OFF"] {
        let (code, err) = run(&["--log.level", good, "--check-config"]);
        assert_eq!(code, Some(0), "{good}: {err}");
    }
}

/// No log call names a field `target`: in JSON lines it would sit next to
/// tracing's own `target` (the module). The Redis target is `redis_target`.
#[test]
fn no_log_field_is_called_target() {
    fn visit(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs")
                // The formatter's own test logs a colliding field on purpose.
                && !path.ends_with("telemetry.rs")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                for (i, line) in text.lines().enumerate() {
                    let t = line.trim_start();
                    // `target = %x` / `target = ?x` is a field; `target: "x"`
                    // sets tracing's target and is not looked for.
                    let field = ["target = %", "target = ?", "target = \""].iter().any(|f| {
                        t.starts_with(f)
                            || t.contains(&format!("!({f}"))
                            || t.contains(&format!(", {f}"))
                    });
                    if field {
                        found.push(format!("{}:{}: {t}", path.display(), i + 1));
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    visit(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut found,
    );
    assert!(
        found.is_empty(),
        "log fields called `target` (use redis_target):\n{}",
        found.join("\n")
    );
}

/// The body of `GET path` from the exporter at `port` (HTTP/1.0, no client
/// library: the log tests run the real binary from plain threads).
fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// A group's status change is one info line with target, stream, group,
/// from and to; a discovery that found nothing new logs at debug only.
fn status_changes_at_info_and_idle_discovery_at_debug(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 3);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("orders")
        .arg("billing")
        .arg("$")
        .query(&mut c)
        .unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        format!(
            "[web]\nlisten_address = \"127.0.0.1:{port}\"\n[log]\nformat = \"json\"\n\
             [[targets]]\nname = \"main\"\nurl = \"{}\"\n\
             [schedule]\ndiscovery = \"300ms\"\nstream = \"200ms\"\n",
            server.url()
        ),
    )
    .unwrap();
    // Once the group is judged idle, entries arrive and nobody reads them:
    // it is idle no more.
    let url = server.url();
    std::thread::spawn(move || {
        let judged = "redis_streams_group_status{target=\"main\",stream=\"orders\",group=\"billing\",status=\"idle\",reason=\"no_work\"} 1";
        let deadline = Instant::now() + Duration::from_secs(15);
        while !http_get(port, "/metrics").is_some_and(|m| m.contains(judged)) {
            if Instant::now() > deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        xadd_n(&mut c, "orders", 5);
    });
    let mut cmd = Command::new(EXE);
    cmd.arg("--config")
        .arg(&path)
        .args(["--log.level", "redis_streams_exporter=debug"]);
    let json = |l: &String| serde_json::from_str::<serde_json::Value>(l).ok();
    let message = |l: &String, m: &str| json(l).is_some_and(|v| v["message"] == m);
    let changed = |l: &String| message(l, "group status changed");
    let lines = daemon_lines(cmd, |lines| {
        lines.iter().any(changed)
            && lines
                .iter()
                .filter(|l| message(l, "discovery changed nothing"))
                .count()
                >= 2
    });
    // From idle on: a line per change, each from where the last one left.
    let changes: Vec<serde_json::Value> = lines
        .iter()
        .filter(|l| message(l, "group status changed"))
        .filter_map(json)
        .collect();
    assert!(!changes.is_empty(), "{lines:#?}");
    let mut from = serde_json::json!("idle");
    for change in &changes {
        assert_eq!(change["level"], "INFO", "{change}");
        assert_eq!(
            (&change["redis_target"], &change["stream"], &change["group"]),
            (
                &serde_json::json!("main"),
                &serde_json::json!("orders"),
                &serde_json::json!("billing")
            ),
            "{change}"
        );
        assert_eq!(change["from"], from, "{change}");
        assert_ne!(change["to"], change["from"], "{change}");
        from = change["to"].clone();
    }
    assert_ne!(from, "idle", "{changes:#?}");
    // The first discovery found the stream (info); the later ones found
    // nothing new (debug).
    let discoveries: Vec<serde_json::Value> = lines
        .iter()
        .filter(|l| message(l, "discovery") || message(l, "discovery changed nothing"))
        .filter_map(json)
        .collect();
    assert!(discoveries.len() >= 3, "{lines:#?}");
    assert_eq!(discoveries[0]["level"], "INFO", "{}", discoveries[0]);
    assert_eq!(discoveries[0]["added"], 1, "{}", discoveries[0]);
    for d in &discoveries[1..] {
        assert_eq!(d["level"], "DEBUG", "{d}");
        assert_eq!(d["message"], "discovery changed nothing", "{d}");
    }
}

per_server!(sync: status_changes_at_info_and_idle_discovery_at_debug);

/// A keyspace-event subscription that a server at its `maxclients` refuses is logged with its
/// own hint (raise maxclients, or turn keyspace events off), not the ACL's. The exporter first
/// subscribes and reads its streams; then the server's `maxclients` is set to the clients it
/// has (the exporter's data connection and the test's) and the subscription is killed, so the
/// one that replaces it is refused.
fn a_subscription_refused_at_maxclients_gets_its_own_hint(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 3);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        format!(
            "[web]\nlisten_address = \"127.0.0.1:{}\"\n\
             [[targets]]\nname = \"main\"\nurl = \"{}\"\n",
            free_port(),
            server.url(),
        ),
    )
    .unwrap();
    let mut cmd = Command::new(EXE);
    cmd.arg("--config").arg(&path);
    let full = std::cell::Cell::new(false);
    let c = std::cell::RefCell::new(c);
    let lines = daemon_lines(cmd, |lines| {
        let said = |text: &str| lines.iter().any(|l| l.contains(text));
        if !full.get() && said("subscribed (keyevents") && said("discovery") {
            full.set(true);
            let mut c = c.borrow_mut();
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxclients")
                .arg(2)
                .query(&mut *c)
                .unwrap();
            let killed: u64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("pubsub")
                .query(&mut *c)
                .unwrap();
            assert_eq!(killed, 1, "{kind:?}: the subscription");
        }
        said("at its maxclients")
    });
    let hint = lines
        .iter()
        .find(|l| l.contains("at its maxclients"))
        .unwrap_or_else(|| panic!("{kind:?}: no maxclients hint:\n{lines:#?}"));
    assert!(
        hint.contains("max number of clients reached")
            && hint.contains("raise maxclients")
            && hint.contains("keyspace_events"),
        "{hint}"
    );
    assert!(!hint.contains("ACL"), "{hint}");
    assert!(
        !lines.iter().any(|l| l.contains("target down")),
        "the data connection kept its slot:\n{lines:#?}"
    );
    eprintln!("{kind:?}: {hint}");
}

per_server!(sync: a_subscription_refused_at_maxclients_gets_its_own_hint);
