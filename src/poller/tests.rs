//! A probe run that panics is logged, counted and run again, while the
//! other probes keep running; against a real `redis-server` (the one on
//! PATH, Redis 7.0, which scripts/test.sh installs).

#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic is a failed test.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Poller, test_hook};
use crate::metrics::catalog::EXPORTER_PROBE_PANICS;
use crate::probe::ProbeKind;
use crate::snapshot::{ProbeStatus, SnapshotStore};

/// A `redis-server` on a free loopback port, killed (by its PID) on drop.
struct Redis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start() -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on PATH (scripts/test.sh installs it)");
        let mut redis = Redis {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..500 {
            if redis.child.try_wait().unwrap().is_some() {
                panic!("redis-server exited at start (port {port} taken?)");
            }
            if let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) {
                let mut pong = [0; 7];
                if c.write_all(b"PING\r\n").is_ok()
                    && c.read_exact(&mut pong).is_ok()
                    && &pong == b"+PONG\r\n"
                {
                    return redis;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not answer PING on port {port}");
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (up to 20 s) until `check` holds for the poller's state.
async fn wait_until(poller: &Poller, what: &str, check: impl Fn(&Poller) -> bool) {
    for _ in 0..1000 {
        if check(poller) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what} did not happen within 20 s");
}

fn status(poller: &Poller, kind: ProbeKind) -> ProbeStatus {
    let state = poller.ctx.state();
    state
        .snapshot
        .probes
        .get(&kind)
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_probe_is_logged_counted_and_restarted() {
    let redis = Redis::start();
    let name = "panicking-probe";
    let toml = format!(
        "[[targets]]\nname = \"{name}\"\nurl = \"redis://127.0.0.1:{}\"\n\
         [schedule]\ninfo = \"200ms\"\nstream = \"100ms\"\n",
        redis.port
    );
    let config = Arc::new(crate::config::from_str("t.toml", &toml, &Default::default()).unwrap());
    let target = config.targets[0].clone();
    let store = Arc::new(SnapshotStore::default());
    let poller = Poller::new(config, target, store.clone()).unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(poller.clone().run(stop.clone()));
    wait_until(&poller, "the first info run", |p| {
        status(p, ProbeKind::Info).success
    })
    .await;

    test_hook::panic_once(name, ProbeKind::Info);
    wait_until(&poller, "the panic counted", |p| {
        status(p, ProbeKind::Info).panics == 1
    })
    .await;
    let info_at_panic = status(&poller, ProbeKind::Info).started_at;
    let stream_at_panic = status(&poller, ProbeKind::Stream).started_at;
    // The loop restarts: info runs, and succeeds, again.
    wait_until(&poller, "info running again", |p| {
        let info = status(p, ProbeKind::Info);
        info.started_at > info_at_panic && info.success
    })
    .await;
    let stream = status(&poller, ProbeKind::Stream);
    assert!(
        stream.started_at > stream_at_panic && stream.success,
        "the stream poll kept running: {stream:?}"
    );
    assert!(!task.is_finished(), "the poller ended with the panic");

    // The counter, as served.
    let (text, _) = crate::metrics::render(
        &store.targets(),
        &store.exporter.copy(),
        crate::metrics::BuildInfo::CURRENT,
        Vec::new(),
    )
    .unwrap();
    let text = String::from_utf8(text).unwrap();
    let panics = EXPORTER_PROBE_PANICS.name;
    let line = format!("{panics}{{target=\"{name}\",probe=\"info\"}} 1\n");
    assert!(text.contains(&line), "{line} not in:\n{text}");
    let other = format!("{panics}{{target=\"{name}\",probe=\"stream\"}} 0\n");
    assert!(text.contains(&other), "{other} not in:\n{text}");

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the poller stops when cancelled")
        .unwrap();
}
