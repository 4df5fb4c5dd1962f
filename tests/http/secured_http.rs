//! TLS and basic auth from an exporter-toolkit web config, with
//! real clients; and secrets that never leak into logs, metrics, the landing
//! page or error messages.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::exporter::Exporter;
use common::pki::{make_ca, make_cert};
use common::*;

/// A CA, and a server and a client certificate for 127.0.0.1.
fn make_pki(dir: &Path) {
    make_ca(dir, "ca");
    make_cert(dir, "ca", "server", "IP:127.0.0.1");
    make_cert(dir, "ca", "client", "IP:127.0.0.1");
}

fn start_exporter(dir: &Path, config: &str, env: &[(&str, &str)]) -> Exporter {
    let mut exporter = Exporter::with_config(dir, config).args(&["--log.level", "debug"]);
    for (key, value) in env {
        exporter = exporter.env(key, value);
    }
    exporter.start()
}

fn client(dir: &Path, identity: bool) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(dir.join("ca.crt")).unwrap()).unwrap();
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca);
    if identity {
        let mut pem = std::fs::read(dir.join("client.crt")).unwrap();
        pem.extend(std::fs::read(dir.join("client.key")).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b.timeout(Duration::from_secs(5)).build().unwrap()
}

#[tokio::test]
async fn tls_and_basic_auth_with_real_clients() {
    let server = RedisServer::start(Server::Redis70);
    xadd_n(&mut server.conn(), "orders", 2);
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    let hash = bcrypt::hash("scrape-secret-42", 6).unwrap();
    std::fs::write(
        dir.path().join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  prometheus: {hash}\n\
             http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
        ),
    )
    .unwrap();
    let config = format!(
        "[web]\nconfig_file = \"{}\"\n[[targets]]\nname = \"t\"\nurl = \"{}\"\n",
        dir.path().join("web.yml").display(),
        server.url()
    );
    let exporter = start_exporter(dir.path(), &config, &[]);
    let url = format!("https://127.0.0.1:{}/metrics", exporter.port);
    let https = client(dir.path(), false);

    // The right user and password: metrics, over TLS.
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let r = https
            .get(&url)
            .basic_auth("prometheus", Some("scrape-secret-42"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-content-type-options"], "nosniff");
        let body = r.text().await.unwrap();
        if body.contains("redis_streams_stream_length{target=\"t\",stream=\"orders\"} 2") {
            break body;
        }
        assert!(Instant::now() < deadline, "no data: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!body.contains("scrape-secret-42"));

    // No credentials, a wrong password, an unknown user: 401 on every path.
    for path in ["/metrics", "/", "/healthz", "/-/reload"] {
        let r = https
            .get(format!("https://127.0.0.1:{}{path}", exporter.port))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path}");
        assert_eq!(
            r.headers()["www-authenticate"],
            "Basic realm=\"redis-streams-exporter\""
        );
    }
    let r = https
        .get(&url)
        .basic_auth("prometheus", Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = https
        .get(&url)
        .basic_auth("mallory", Some("scrape-secret-42"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // Plain HTTP to the TLS port gets no HTTP answer.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    assert!(
        plain
            .get(format!("http://127.0.0.1:{}/metrics", exporter.port))
            .send()
            .await
            .is_err()
    );
    // A client that does not trust the server's CA refuses the connection.
    let untrusting = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let err = untrusting
        .get(&url)
        .basic_auth("prometheus", Some("scrape-secret-42"))
        .send()
        .await
        .unwrap_err();
    assert!(
        format!("{err:?}").to_lowercase().contains("certificate"),
        "{err:?}"
    );
    // The server survived the bad handshakes.
    let r = https
        .get(&url)
        .basic_auth("prometheus", Some("scrape-secret-42"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let log = std::fs::read_to_string(&exporter.log).unwrap();
    assert!(!log.contains("scrape-secret-42"), "password in the log");
}

#[tokio::test]
async fn client_certificates_when_required() {
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    make_pki(dir.path());
    std::fs::write(
        dir.path().join("web.yml"),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\n",
    )
    .unwrap();
    let config = format!(
        "[web]\nconfig_file = \"{}\"\n[[targets]]\nurl = \"{}\"\n",
        dir.path().join("web.yml").display(),
        server.url()
    );
    let exporter = start_exporter(dir.path(), &config, &[]);
    let url = format!("https://127.0.0.1:{}/healthz", exporter.port);
    assert!(
        client(dir.path(), false).get(&url).send().await.is_err(),
        "no client certificate must be refused"
    );
    let r = client(dir.path(), true).get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[test]
fn invalid_web_config_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("web.yml"),
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n",
    )
    .unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[web]\nconfig_file = \"{}\"\n",
            dir.path().join("web.yml").display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_redis-streams-exporter"))
        .args(["--config", config.to_str().unwrap(), "--check-config"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("web.yml: tls_server_config.cert_file: cannot read"),
        "{stderr}"
    );
}

/// The Redis password reaches Redis and nowhere else: not the logs (even at
/// debug, even when authentication fails), not /metrics, not the landing
/// page, not error responses.
#[tokio::test]
async fn redis_passwords_never_leak() {
    let secret = "redis-pw-Zq81";
    let server = RedisServer::start_with(Server::Redis70, &["--requirepass", secret]);
    {
        let mut c = redis::Client::open(format!("redis://:{secret}@127.0.0.1:{}", server.port))
            .unwrap()
            .get_connection()
            .unwrap();
        xadd_n(&mut c, "orders", 1);
    }
    let dir = tempfile::tempdir().unwrap();
    let good = format!(
        "[[targets]]\nname = \"good\"\nurl = \"redis://127.0.0.1:{}\"\npassword_env = \"RSE_TEST_PW\"\n\
         [[targets]]\nname = \"inline\"\nurl = \"redis://:{secret}@127.0.0.1:{}/0\"\n\
         [[targets]]\nname = \"wrong\"\nurl = \"redis://127.0.0.1:{}\"\npassword_env = \"RSE_TEST_WRONG\"\n",
        server.port, server.port, server.port
    );
    let wrong = "not-the-pw-Yx22";
    let exporter = start_exporter(
        dir.path(),
        &good,
        &[("RSE_TEST_PW", secret), ("RSE_TEST_WRONG", wrong)],
    );
    let base = format!("http://127.0.0.1:{}", exporter.port);
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let m = http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if m.contains("redis_streams_stream_length{target=\"good\",stream=\"orders\"} 1")
            && m.contains("redis_streams_stream_length{target=\"inline\",stream=\"orders\"} 1")
            && m.contains("redis_streams_exporter_errors_total{target=\"wrong\",kind=\"auth\"} ")
            && !m.contains("redis_streams_exporter_errors_total{target=\"wrong\",kind=\"auth\"} 0")
        {
            break m;
        }
        assert!(Instant::now() < deadline, "exporter never collected:\n{m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let landing = http
        .get(format!("{base}/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let reload = http
        .post(format!("{base}/-/reload"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let log = std::fs::read_to_string(&exporter.log).unwrap();
    assert!(
        log.contains("probe failed"),
        "the wrong password must be logged as a failure:\n{log}"
    );
    for (what, text) in [
        ("metrics", &metrics),
        ("landing page", &landing),
        ("reload response", &reload),
        ("log", &log),
    ] {
        assert!(
            !text.contains(secret),
            "the Redis password appears in the {what}"
        );
        assert!(
            !text.contains(wrong),
            "the wrong password appears in the {what}"
        );
    }
}
