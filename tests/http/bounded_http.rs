//! The HTTP edge stays bounded whatever clients do.
//! The exporter binary runs with its descriptor limit set to 1,024 while the
//! test holds 2,200 idle and half-sent connections (plain, then TLS):
//! `/metrics` still answers, the process never holds more descriptors than
//! its connection cap allows, and every held socket is closed by the server
//! (the test reads EOF on each). Below the cap, the header and idle timeouts
//! close what is held. Oversized requests get 431 and 413. On shutdown the
//! listener is released at once and stalled handshakes are not waited for.
//!
//! No assertion is about time beyond "answers at all"; the figures measured
//! (how long `/metrics` took, when sockets were closed) are printed.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::exporter::*;
use crate::common::pki::*;
use crate::common::tls_client::*;
use common::*;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The descriptor limit the exporter runs with, as a default systemd
/// service or shell would give it.
const NOFILE: u64 = 1_024;
/// Connections of each kind held at once: together well past `NOFILE`.
const HOLD: usize = 1_100;
/// The exporter's default connection cap (config/example.toml).
const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// The load tests are heavy: one at a time, so their figures mean something.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn exporter_config(server: &RedisServer, web: &str) -> String {
    format!(
        "[web]\n{web}[schedule]\nstream = \"200ms\"\n[[targets]]\nname = \"t\"\nurl = \"{}\"\n",
        server.url()
    )
}

type Held = Box<dyn AsyncRead + Unpin + Send>;

/// What became of a held socket.
#[derive(Debug)]
struct Closed {
    kind: &'static str,
    /// From the socket's opening to the server closing it; None when it
    /// was still open at the deadline.
    after: Option<Duration>,
    /// Bytes the server sent before closing.
    bytes: usize,
}

/// Reads until the server closes the socket (EOF or reset), or `limit`.
fn watch(kind: &'static str, mut s: Held, limit: Duration) -> tokio::task::JoinHandle<Closed> {
    let opened = Instant::now();
    tokio::spawn(async move {
        let mut bytes = 0;
        let mut buf = [0u8; 4096];
        let read_all = async {
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => bytes += n,
                }
            }
        };
        let after = tokio::time::timeout(limit, read_all)
            .await
            .ok()
            .map(|()| opened.elapsed());
        Closed { kind, after, bytes }
    })
}

const HALF_REQUEST: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Never-Finished: ";

async fn open_plain(port: u16, half: bool) -> Held {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    if half {
        s.write_all(HALF_REQUEST).await.unwrap();
    }
    Box::new(s)
}

/// A TLS connection whose handshake completed; with `half`, half a request
/// sent over it. Retried when the server closed it mid-handshake to make room.
async fn open_tls(port: u16, client: std::sync::Arc<rustls::ClientConfig>, half: bool) -> Held {
    for _ in 0..10 {
        let Ok(mut s) = tls_connect(port, client.clone()).await else {
            continue;
        };
        if half && s.write_all(HALF_REQUEST).await.is_err() {
            continue;
        }
        return Box::new(s);
    }
    panic!("no TLS connection in 10 tries");
}

fn percentiles(mut v: Vec<Duration>) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    format!(
        "{} sockets: min {:.2?}, median {:.2?}, p90 {:.2?}, max {:.2?}",
        v.len(),
        at(0.0),
        at(0.5),
        at(0.9),
        at(1.0)
    )
}

/// Counts log lines containing `what`.
fn lines(log: &str, what: &str) -> usize {
    log.lines().filter(|l| l.contains(what)).count()
}

/// Counts "connection timed out" lines naming `limit`.
fn timeouts(log: &str, limit: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("connection timed out") && l.contains(&format!("limit=\"{limit}\"")))
        .count()
}

struct Scenario {
    tls: bool,
}

async fn hold_past_the_descriptor_limit(scenario: Scenario) {
    let _one_at_a_time = HEAVY.lock().await;
    ensure_own_nofile(3 * HOLD as u64 + 1_000);
    let server = RedisServer::start(Server::Redis70);
    xadd_n(&mut server.conn(), "orders", 2);
    let dir = tempfile::tempdir().unwrap();
    // Timeouts long enough that the sockets are held past the cap together
    // even when a loaded machine opens them at 80 a second (TLS in CI).
    let mut web =
        "header_read_timeout = \"12s\"\nidle_timeout = \"13s\"\ntls_handshake_timeout = \"12s\"\n"
            .to_string();
    let mut client = None;
    let mut trust: Vec<PathBuf> = Vec::new();
    if scenario.tls {
        make_ca(dir.path(), "ca");
        make_cert(dir.path(), "ca", "server", "IP:127.0.0.1");
        std::fs::write(
            dir.path().join("web.yml"),
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
        )
        .unwrap();
        web.push_str(&format!(
            "config_file = \"{}\"\n",
            dir.path().join("web.yml").display()
        ));
        trust.push(dir.path().join("ca.crt"));
        client = Some(
            Client {
                trust: &trust,
                ..Client::default()
            }
            .config(),
        );
    }
    let exporter = Exporter::start(
        dir.path(),
        &exporter_config(&server, &web),
        Some(NOFILE),
        &[],
    );
    assert_eq!(exporter.nofile(), NOFILE, "prlimit did not apply");
    let port = exporter.port;
    let scrape = |client: Option<std::sync::Arc<rustls::ClientConfig>>| async move {
        match client {
            Some(c) => tls_get(port, c, "/metrics", "").await,
            None => {
                let r = reqwest::Client::builder()
                    .timeout(Duration::from_secs(60))
                    .build()
                    .unwrap()
                    .get(format!("http://127.0.0.1:{port}/metrics"))
                    .send()
                    .await
                    .map_err(std::io::Error::other)?;
                let status = r.status().as_u16();
                Ok((status, r.text().await.map_err(std::io::Error::other)?))
            }
        }
    };
    // Collected before the load, so the later answer is not a first render.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok((200, body)) = scrape(client.clone()).await {
            if body.contains("redis_streams_stream_length{target=\"t\",stream=\"orders\"} 2") {
                break;
            }
        }
        assert!(Instant::now() < deadline, "no data before the load");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let baseline_fds = exporter.open_fds();

    // Hold HOLD idle and HOLD half-sent connections, alternating.
    let opening = Instant::now();
    let mut watchers = Vec::with_capacity(2 * HOLD);
    for _ in 0..HOLD {
        for half in [false, true] {
            let kind = if half { "half-sent" } else { "idle" };
            let s = match &client {
                Some(c) => open_tls(port, c.clone(), half).await,
                None => open_plain(port, half).await,
            };
            watchers.push(watch(kind, s, Duration::from_secs(120)));
        }
    }
    let opened_in = opening.elapsed();
    let fds_while_held = exporter.open_fds();
    // A new entry while the sockets are held: Redis is still polled.
    xadd_n(&mut server.conn(), "orders", 1);
    let asked = Instant::now();
    let (status, body) = scrape(client.clone())
        .await
        .expect("/metrics must answer while the sockets are held");
    let answered_in = asked.elapsed();
    assert_eq!(status, 200);
    assert!(body.contains("redis_streams_stream_length{target=\"t\",stream=\"orders\"}"));
    let fresh = Instant::now();
    let deadline = fresh + Duration::from_secs(20);
    loop {
        let (_, body) = scrape(client.clone()).await.unwrap();
        if body.contains("redis_streams_stream_length{target=\"t\",stream=\"orders\"} 3") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new entry never showed:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let new_entry_in = fresh.elapsed();

    // Every held socket is closed by the server.
    let mut closed = Vec::new();
    for w in watchers {
        closed.push(w.await.unwrap());
    }
    let still_open = closed.iter().filter(|c| c.after.is_none()).count();
    assert_eq!(still_open, 0, "sockets the server never closed");
    assert!(
        closed.iter().all(|c| c.bytes == 0),
        "held sockets got no answer, only a close"
    );
    let settle = Instant::now() + Duration::from_secs(10);
    let mut fds_after = exporter.open_fds();
    while fds_after > baseline_fds + 4 && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(100)).await;
        fds_after = exporter.open_fds();
    }
    let log = exporter.log();
    let evicted = lines(&log, "connection closed to make room");
    let timed_out = lines(&log, "connection timed out");
    let cap_warnings = lines(&log, "connection limit reached");
    let elapsed = opening.elapsed();
    eprintln!(
        "{} scenario, exporter limited to {NOFILE} descriptors, cap {DEFAULT_MAX_CONNECTIONS}:\n\
         opened {HOLD} idle + {HOLD} half-sent in {opened_in:.2?}; exporter descriptors: {baseline_fds} before, {fds_while_held} while held, {fds_after} after\n\
         /metrics answered in {answered_in:.2?} while held; an entry added then showed within {new_entry_in:.2?}\n\
         closed by the server: idle {}; half-sent {}\n\
         log: {evicted} closed to make room, {timed_out} timed out, {cap_warnings} cap warnings in {elapsed:.1?}",
        if scenario.tls { "TLS" } else { "plain" },
        percentiles(
            closed
                .iter()
                .filter(|c| c.kind == "idle")
                .filter_map(|c| c.after)
                .collect()
        ),
        percentiles(
            closed
                .iter()
                .filter(|c| c.kind == "half-sent")
                .filter_map(|c| c.after)
                .collect()
        ),
    );
    // The cap bounds the process's descriptors: connections plus the
    // listener, Redis, the log and the runtime's own.
    assert!(
        fds_while_held <= DEFAULT_MAX_CONNECTIONS + 64,
        "{fds_while_held} descriptors open while held"
    );
    assert!(
        fds_after <= baseline_fds + 4,
        "descriptors not released: {fds_after} after, {baseline_fds} before"
    );
    assert!(cap_warnings >= 1, "the cap was reached silently:\n{log}");
    // Logged at most once per 10 s, however many connections made room.
    assert!(
        cap_warnings <= elapsed.as_secs() as usize / 10 + 1,
        "{cap_warnings} cap warnings for {evicted} evictions"
    );
    assert!(evicted + timed_out >= 2 * HOLD, "{evicted} + {timed_out}");
    assert!(timed_out >= 1, "no connection reached its timeout");
    assert!(
        exporter
            .log()
            .lines()
            .all(|l| !l.contains("accepting a connection failed")),
        "the exporter ran out of descriptors"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_connections_held_past_the_descriptor_limit() {
    hold_past_the_descriptor_limit(Scenario { tls: false }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_held_past_the_descriptor_limit() {
    hold_past_the_descriptor_limit(Scenario { tls: true }).await;
}

/// Below the cap, nothing is closed to make room: the header timeout closes
/// idle and half-sent connections, the idle timeout closes kept-alive ones
/// after their response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_close_what_is_held_below_the_cap() {
    let _one_at_a_time = HEAVY.lock().await;
    const N: usize = 100;
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    let exporter = Exporter::start(
        dir.path(),
        &exporter_config(
            &server,
            "header_read_timeout = \"2s\"\nidle_timeout = \"3s\"\n",
        ),
        Some(NOFILE),
        &[],
    );
    let port = exporter.port;
    let mut watchers = Vec::new();
    for _ in 0..N {
        watchers.push(watch(
            "idle",
            open_plain(port, false).await,
            Duration::from_secs(60),
        ));
        watchers.push(watch(
            "half-sent",
            open_plain(port, true).await,
            Duration::from_secs(60),
        ));
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        watchers.push(watch("kept-alive", Box::new(s), Duration::from_secs(60)));
    }
    let mut closed = Vec::new();
    for w in watchers {
        closed.push(w.await.unwrap());
    }
    let times = |kind: &str| -> Vec<Duration> {
        closed
            .iter()
            .filter(|c| c.kind == kind)
            .filter_map(|c| c.after)
            .collect()
    };
    eprintln!(
        "header_read_timeout 2s, idle_timeout 3s; closed by the server:\n idle {}\n half-sent {}\n kept-alive after a response {}",
        percentiles(times("idle")),
        percentiles(times("half-sent")),
        percentiles(times("kept-alive")),
    );
    assert!(
        closed.iter().all(|c| c.after.is_some()),
        "a socket was never closed"
    );
    for c in &closed {
        if c.kind == "kept-alive" {
            assert!(c.bytes > 0, "kept-alive connection got no response");
        } else {
            assert_eq!(c.bytes, 0, "{} socket got an answer", c.kind);
        }
    }
    let log = exporter.log();
    assert_eq!(lines(&log, "connection limit reached"), 0, "{log}");
    assert_eq!(lines(&log, "connection closed to make room"), 0);
    assert_eq!(timeouts(&log, "header_read_timeout"), 2 * N, "{log}");
    assert_eq!(timeouts(&log, "idle_timeout"), N, "{log}");
}

/// A request head over `max_header_bytes` gets 431, a declared body over
/// `max_body_bytes` gets 413; the server keeps answering.
#[tokio::test]
async fn oversized_requests_are_refused() {
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    let exporter = Exporter::start(
        dir.path(),
        &exporter_config(&server, "max_header_bytes = 4096\nmax_body_bytes = 100\n"),
        None,
        &["--web.enable-lifecycle"],
    );
    let base = format!("http://127.0.0.1:{}", exporter.port);
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{base}/healthz"))
        .header("x-padding", "a".repeat(5000))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 431);
    let r = http
        .post(format!("{base}/-/reload"))
        .body(vec![b'x'; 101])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let r = http
        .post(format!("{base}/-/reload"))
        .body(vec![b'x'; 100])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let r = http
        .get(format!("{base}/healthz"))
        .header("x-padding", "a".repeat(3000))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// TLS handshakes that stall (connections that never send a ClientHello)
/// hold at most `max_tls_handshakes` slots, and a scraper's handshake gets
/// in by closing the oldest stalled one, long before their timeout.
#[tokio::test]
async fn stalled_handshakes_do_not_keep_a_scraper_out() {
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    make_ca(dir.path(), "ca");
    make_cert(dir.path(), "ca", "server", "IP:127.0.0.1");
    std::fs::write(
        dir.path().join("web.yml"),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    )
    .unwrap();
    let web = format!(
        "config_file = \"{}\"\nmax_tls_handshakes = 4\ntls_handshake_timeout = \"10m\"\n",
        dir.path().join("web.yml").display()
    );
    let exporter = Exporter::start(dir.path(), &exporter_config(&server, &web), None, &[]);
    let mut stalled = Vec::new();
    for _ in 0..20 {
        stalled.push(
            TcpStream::connect(("127.0.0.1", exporter.port))
                .await
                .unwrap(),
        );
    }
    // The scraper comes after the stalled connections have been accepted
    // and filled the handshake slots (newest first is the rule).
    let deadline = Instant::now() + Duration::from_secs(10);
    while lines(&exporter.log(), "TLS handshake closed to make room") < 16 {
        assert!(
            Instant::now() < deadline,
            "20 stalled handshakes for 4 slots:\n{}",
            exporter.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let trust = [dir.path().join("ca.crt")];
    let client = Client {
        trust: &trust,
        ..Client::default()
    }
    .config();
    let asked = Instant::now();
    let (status, _) = tls_get(exporter.port, client, "/healthz", "")
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the scraper's handshake must get through: {e}\n{}",
                exporter.log()
            )
        });
    eprintln!(
        "handshake and /healthz with 20 stalled handshakes held: {:.2?}",
        asked.elapsed()
    );
    assert_eq!(status, 200);
    // The evicted handshake's task logs its end when it next runs, which
    // may be just after the scraper's answer.
    let deadline = Instant::now() + Duration::from_secs(5);
    while lines(&exporter.log(), "TLS handshake closed to make room") < 17 {
        assert!(
            Instant::now() < deadline,
            "the scraper's handshake takes the oldest stalled one's slot:\n{}",
            exporter.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let log = exporter.log();
    assert!(log.contains("TLS handshake limit reached"));
}

/// Shutdown releases the port at once, without waiting for a
/// next connection or for held connections' timeouts (set to 10 minutes
/// here), and closes held connections.
#[tokio::test]
async fn shutdown_releases_the_port_at_once() {
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    make_ca(dir.path(), "ca");
    make_cert(dir.path(), "ca", "server", "IP:127.0.0.1");
    std::fs::write(
        dir.path().join("web.yml"),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    )
    .unwrap();
    let text = exporter_config(
        &server,
        &format!(
            "config_file = \"{}\"\nheader_read_timeout = \"10m\"\nidle_timeout = \"10m\"\ntls_handshake_timeout = \"10m\"\n",
            dir.path().join("web.yml").display()
        ),
    );
    let path = dir.path().join("c.toml");
    std::fs::write(&path, text).unwrap();
    let cfg = redis_streams_exporter::config::load(Some(&path), &Default::default()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(redis_streams_exporter::app::run(
        cfg,
        Default::default(),
        listener,
        async move {
            let _ = stopped.await;
        },
    ));
    let trust = [dir.path().join("ca.crt")];
    let client = Client {
        trust: &trust,
        ..Client::default()
    }
    .config();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tls_get(addr.port(), client.clone(), "/healthz", "")
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Held: handshakes never started, TLS connections idle and half-sent.
    let mut watchers = Vec::new();
    for _ in 0..20 {
        let s = TcpStream::connect(addr).await.unwrap();
        watchers.push(watch("no handshake", Box::new(s), Duration::from_secs(60)));
        watchers.push(watch(
            "TLS idle",
            open_tls(addr.port(), client.clone(), false).await,
            Duration::from_secs(60),
        ));
        watchers.push(watch(
            "TLS half-sent",
            open_tls(addr.port(), client.clone(), true).await,
            Duration::from_secs(60),
        ));
    }
    let asked = Instant::now();
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(60), daemon)
        .await
        .expect("shutdown waited for held connections")
        .unwrap()
        .unwrap();
    let stopped_in = asked.elapsed();
    // The port is free: another process could listen right away.
    let rebound = std::net::TcpListener::bind(addr);
    assert!(
        rebound.is_ok(),
        "port still held after shutdown: {rebound:?}"
    );
    drop(rebound);
    let mut closed = Vec::new();
    for w in watchers {
        closed.push(w.await.unwrap());
    }
    eprintln!(
        "shutdown with 60 connections held returned in {stopped_in:.2?}; they were closed {}",
        percentiles(closed.iter().filter_map(|c| c.after).collect())
    );
    assert!(closed.iter().all(|c| c.after.is_some()), "{closed:?}");
}
