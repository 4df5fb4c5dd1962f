//! TLS to Redis, against a real `redis-server` (Debian's 7.0, built with TLS) listening only on a
//! TLS port (`--port 0 --tls-port P --tls-auth-clients yes`) with certificates this test makes
//! with the openssl command line. The server's certificate names `redis.test` only, so dialling
//! 127.0.0.1 needs `tls_server_name`. The exporter binary runs as an operator runs it; what it
//! says is read from `/metrics`, `/readyz` and its log.
//!
//! - a client certificate signed by the server's CA is accepted and the streams are read;
//! - without one, the target is down and the log and `/readyz` (ready all the same) say a client
//!   certificate is required and which keys to set;
//! - a certificate for another name fails, naming `tls_server_name`, which fixes it;
//! - `tls_insecure_skip_verify` connects without a CA and is logged as a warning;
//! - `/probe` takes the same settings from an auth module (and another module for the same server
//!   is another target);
//! - a `rediss://` URL to a server without TLS says so, not only that connecting timed out.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::exporter::Exporter;
use crate::common::pki::{make_ca, make_cert};
use common::{Metrics, free_port, which};

/// redis-server on a TLS-only loopback port, killed on drop.
struct TlsRedis {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl TlsRedis {
    /// Certificates in `dir`: `ca` (the CA), `server` (DNS:redis.test), `client` (signed by
    /// `ca`). The server requires client certificates.
    fn start(dir: &Path) -> TlsRedis {
        make_ca(dir, "ca");
        make_cert(dir, "ca", "server", "DNS:redis.test");
        make_cert(dir, "ca", "client", "DNS:exporter.test");
        for _ in 0..5 {
            let port = free_port();
            let data = dir.join(format!("data-{port}"));
            std::fs::create_dir_all(&data).unwrap();
            let child = Command::new(common::Server::Redis70.binary())
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&data)
                .arg("--tls-cert-file")
                .arg(dir.join("server.crt"))
                .arg("--tls-key-file")
                .arg(dir.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(dir.join("ca.crt"))
                .args(["--tls-auth-clients", "yes"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut server = TlsRedis {
                child,
                port,
                dir: dir.to_path_buf(),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = server.child.try_wait() {
                    break;
                }
                if server.try_cli(&["PING"]).is_some_and(|r| r == "PONG") {
                    return server;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = server.child.kill();
            let _ = server.child.wait();
        }
        panic!("redis-server with TLS did not start");
    }

    /// `redis-cli` over TLS with the client certificate; the reply, if the command ran.
    fn try_cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new(which("redis-cli"))
            .args(["--tls", "--sni", "redis.test"])
            .arg("--cacert")
            .arg(self.dir.join("ca.crt"))
            .arg("--cert")
            .arg(self.dir.join("client.crt"))
            .arg("--key")
            .arg(self.dir.join("client.key"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !text.starts_with("ERR") && !text.is_empty()).then_some(text)
    }

    fn cli(&self, args: &[&str]) -> String {
        self.try_cli(args)
            .unwrap_or_else(|| panic!("redis-cli {args:?} failed"))
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// A `[[targets]]` table for this server with `tls` lines.
    fn target(&self, tls: &str) -> String {
        format!(
            "[[targets]]\nname = \"tls\"\nurl = \"rediss://127.0.0.1:{}\"\n{tls}\n[schedule]\nstream = \"1s\"\ndiscovery = \"1s\"\n",
            self.port
        )
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn get(port: u16, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://127.0.0.1:{port}{path}"))
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Polls `/metrics` until `check` holds (20 s at most).
async fn wait_metrics(e: &Exporter, what: &str, check: impl Fn(&Metrics) -> bool) -> Metrics {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = Metrics::parse(&get(e.port, "/metrics").await.1);
        if check(&m) {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen; exposition:\n{}\nlog:\n{}",
            m.text,
            e.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the exporter's log until it contains every one of `needles` (20 s at most).
async fn wait_log(e: &Exporter, needles: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = e.log();
        if needles.iter().all(|n| log.contains(n)) {
            return log;
        }
        assert!(Instant::now() < deadline, "log lacks {needles:?}:\n{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `/readyz` until its body says the target is down with `needle` in the reason (20 s at
/// most). The exporter is ready all the same: a target it cannot reach is Redis's health, told by
/// `target_up`, not the exporter's readiness.
async fn wait_readyz(e: &Exporter, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = get(e.port, "/readyz").await;
        if body.contains("tls: down: ") && body.contains(needle) {
            assert_eq!(status, 200, "{body}");
            assert!(body.starts_with("ready\n"), "{body}");
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz {status}:\n{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn up(m: &Metrics) -> Option<f64> {
    m.get("redis_streams_exporter_target_up", &[("target", "tls")])
}

#[tokio::test]
async fn a_client_certificate_is_accepted_and_streams_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let redis = TlsRedis::start(dir.path());
    for _ in 0..3 {
        redis.cli(&["XADD", "orders", "*", "n", "1"]);
    }
    let config = redis.target(&format!(
        "tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\ntls_server_name = \"redis.test\"",
        redis.file("ca.crt"),
        redis.file("client.crt"),
        redis.file("client.key"),
    ));
    let e = Exporter::start(dir.path(), &config, None, &[]);
    let m = wait_metrics(&e, "orders read over TLS", |m| {
        m.get(
            "redis_streams_stream_length",
            &[("target", "tls"), ("stream", "orders")],
        )
        .is_some()
    })
    .await;
    assert_eq!(up(&m), Some(1.0));
    assert_eq!(
        m.value(
            "redis_streams_stream_length",
            &[("target", "tls"), ("stream", "orders")]
        ),
        3.0
    );
    let log = e.log();
    assert!(!log.contains("WARN"), "{log}");
    assert_eq!(get(e.port, "/readyz").await.0, 200);
}

#[tokio::test]
async fn without_a_client_certificate_the_error_says_one_is_required() {
    let dir = tempfile::tempdir().unwrap();
    let redis = TlsRedis::start(dir.path());
    redis.cli(&["XADD", "orders", "*", "n", "1"]);
    let config = redis.target(&format!(
        "tls_ca_file = \"{}\"\ntls_server_name = \"redis.test\"",
        redis.file("ca.crt"),
    ));
    let e = Exporter::start(dir.path(), &config, None, &[]);
    let log = wait_log(
        &e,
        &["client certificate", "set tls_cert_file and tls_key_file"],
    )
    .await;
    let body = wait_readyz(&e, "client certificate").await;
    let m = wait_metrics(&e, "target_up 0", |m| up(m) == Some(0.0)).await;
    assert!(
        m.family("redis_streams_stream_length").is_empty(),
        "{}",
        m.text
    );
    let line = log
        .lines()
        .find(|l| l.contains("client certificate"))
        .unwrap();
    println!("missing client certificate, as logged:\n{line}\n/readyz:\n{body}");
}

#[tokio::test]
async fn a_certificate_for_another_name_fails_unless_tls_server_name_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let redis = TlsRedis::start(dir.path());
    redis.cli(&["XADD", "orders", "*", "n", "1"]);
    let identity = format!(
        "tls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"",
        redis.file("ca.crt"),
        redis.file("client.crt"),
        redis.file("client.key"),
    );
    let wrong = Exporter::start(dir.path(), &redis.target(&identity), None, &[]);
    let log = wait_log(&wrong, &["not valid for name", "set tls_server_name"]).await;
    wait_readyz(&wrong, "set tls_server_name").await;
    let m = wait_metrics(&wrong, "target_up 0", |m| up(m) == Some(0.0)).await;
    assert!(m.family("redis_streams_stream_length").is_empty());
    println!(
        "dialled by IP, certificate for redis.test, as logged:\n{}",
        log.lines()
            .find(|l| l.contains("not valid for name"))
            .unwrap()
    );
    drop(wrong);

    let right = Exporter::start(
        dir.path(),
        &redis.target(&format!("{identity}\ntls_server_name = \"redis.test\"")),
        None,
        &[],
    );
    let m = wait_metrics(&right, "orders with tls_server_name", |m| {
        m.get(
            "redis_streams_stream_length",
            &[("target", "tls"), ("stream", "orders")],
        ) == Some(1.0)
    })
    .await;
    assert_eq!(up(&m), Some(1.0));
}

#[tokio::test]
async fn insecure_skip_verify_connects_without_a_ca_and_warns() {
    let dir = tempfile::tempdir().unwrap();
    let redis = TlsRedis::start(dir.path());
    redis.cli(&["XADD", "orders", "*", "n", "1"]);
    let config = redis.target(&format!(
        "tls_cert_file = \"{}\"\ntls_key_file = \"{}\"\ntls_insecure_skip_verify = true",
        redis.file("client.crt"),
        redis.file("client.key"),
    ));
    let e = Exporter::start(dir.path(), &config, None, &[]);
    wait_metrics(&e, "orders without verification", |m| {
        m.get(
            "redis_streams_stream_length",
            &[("target", "tls"), ("stream", "orders")],
        ) == Some(1.0)
    })
    .await;
    let log = e.log();
    let warning = log
        .lines()
        .find(|l| l.contains("tls_insecure_skip_verify"))
        .unwrap_or_else(|| panic!("no warning:\n{log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("target=tls"), "{warning}");
}

#[tokio::test]
async fn probe_takes_tls_from_the_auth_module() {
    let dir = tempfile::tempdir().unwrap();
    let redis = TlsRedis::start(dir.path());
    redis.cli(&["XADD", "orders", "*", "n", "1"]);
    redis.cli(&["XADD", "orders", "*", "n", "2"]);
    let config = format!(
        "[probe]\nallowed_targets = [\"rediss://127.0.0.1:{port}\"]\n\
         [auth_modules.mtls]\ntls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\ntls_server_name = \"redis.test\"\n\
         [auth_modules.nocert]\ntls_ca_file = \"{}\"\ntls_server_name = \"redis.test\"\n",
        redis.file("ca.crt"),
        redis.file("client.crt"),
        redis.file("client.key"),
        redis.file("ca.crt"),
        port = redis.port,
    );
    let e = Exporter::start(dir.path(), &config, None, &[]);
    let target = format!("rediss://127.0.0.1:{}", redis.port);
    let name = format!("127.0.0.1:{}", redis.port);
    let (status, body) = get(e.port, &format!("/probe?target={target}&auth_module=mtls")).await;
    assert_eq!(status, 200, "{body}");
    let m = Metrics::parse(&body);
    assert_eq!(
        m.value(
            "redis_streams_stream_length",
            &[("target", &name), ("stream", "orders")]
        ),
        2.0
    );
    assert_eq!(
        m.value("redis_streams_exporter_target_ready", &[("target", &name)]),
        1.0
    );
    // The same server through a module without a client certificate: another target (the
    // first keeps polling), and its answer says it is down.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = get(
            e.port,
            &format!("/probe?target={target}&auth_module=nocert"),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let m = Metrics::parse(&body);
        if m.get("redis_streams_exporter_target_up", &[("target", &name)]) == Some(0.0) {
            assert!(m.family("redis_streams_stream_length").is_empty(), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_log(&e, &["client certificate"]).await;
    let (status, body) = get(e.port, &format!("/probe?target={target}&auth_module=mtls")).await;
    assert_eq!(status, 200, "{body}");
    let m = Metrics::parse(&body);
    assert_eq!(
        m.get("redis_streams_exporter_target_up", &[("target", &name)]),
        Some(1.0),
        "the mtls target was not restarted by the other module: {body}"
    );
}

/// A `rediss://` URL to a server without TLS: the server reads the handshake as the start of a
/// command line and waits for its end (or answers an error line in plain text when the hello
/// happens to hold a newline). Either way the error says the server may have no TLS and to use
/// a `redis://` URL, not only that connecting timed out.
#[tokio::test]
async fn tls_to_a_plain_server_says_the_server_has_no_tls() {
    let dir = tempfile::tempdir().unwrap();
    let plain = common::RedisServer::start(common::Server::Redis70);
    plain.cmd(&["XADD", "orders", "*", "n", "1"]);
    let config = format!(
        "[[targets]]\nname = \"tls\"\nurl = \"rediss://127.0.0.1:{}\"\n\
         tls_insecure_skip_verify = true\n\
         [schedule]\nstream = \"1s\"\ndiscovery = \"1s\"\n[limits]\ncommand_timeout = \"1s\"\n",
        plain.port
    );
    let e = Exporter::start(dir.path(), &config, None, &[]);
    let body = wait_readyz(&e, "use a redis:// URL").await;
    let m = wait_metrics(&e, "target_up 0", |m| up(m) == Some(0.0)).await;
    assert!(m.family("redis_streams_stream_length").is_empty());
    let log = wait_log(&e, &["use a redis:// URL"]).await;
    println!(
        "rediss:// to a plain server, as logged:\n{}\n/readyz:\n{body}",
        log.lines()
            .find(|l| l.contains("use a redis:// URL"))
            .unwrap()
    );
}
