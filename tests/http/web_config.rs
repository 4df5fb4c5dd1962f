//! The exporter-toolkit web config, honoured with real TLS
//! clients: versions, cipher suites and curves by Go's names, inline
//! certificates, the client-certificate policies and `client_allowed_sans`,
//! basic auth, the rate limit and headers; what rustls cannot do is refused
//! naming the key; and the file (with the certificates it names) is re-read
//! when it changes, a broken change keeping the previous settings.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::exporter::*;
use crate::common::pki::*;
use crate::common::tls_client::*;
use common::*;

fn start(dir: &Path, server: &RedisServer, web_yml: &str) -> Exporter {
    let file = dir.join(format!("web-{}.yml", free_port()));
    std::fs::write(&file, web_yml).unwrap();
    let config = format!(
        "[web]\nconfig_file = \"{}\"\nconfig_file_check_interval = \"100ms\"\n[[targets]]\nname = \"t\"\nurl = \"{}\"\n",
        file.display(),
        server.url()
    );
    Exporter::start(dir, &config, None, &[])
}

fn pki(dir: &Path) {
    make_ca(dir, "ca");
    make_cert(dir, "ca", "server", "IP:127.0.0.1");
}

const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn versions_cipher_suites_and_curves_are_honoured() {
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path());
    let trust = [dir.path().join("ca.crt")];

    // TLS 1.3 only: a TLS 1.2 client is refused.
    let e = start(dir.path(), &server, &format!("{TLS}  min_version: TLS13\n"));
    let tls12 = Client {
        trust: &trust,
        versions: &[&rustls::version::TLS12],
        ..Client::default()
    };
    assert!(tls_connect(e.port, tls12.config()).await.is_err());
    let s = tls_connect(
        e.port,
        Client {
            trust: &trust,
            ..Client::default()
        }
        .config(),
    )
    .await
    .unwrap();
    assert_eq!(
        s.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );

    // TLS 1.2 with one suite, by its Go name: that suite is used, and a
    // client without it is refused.
    let e = start(
        dir.path(),
        &server,
        &format!(
            "{TLS}  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256]\n  prefer_server_cipher_suites: true\n"
        ),
    );
    let s = tls_connect(
        e.port,
        Client {
            trust: &trust,
            ..Client::default()
        }
        .config(),
    )
    .await
    .unwrap();
    let conn = s.get_ref().1;
    assert_eq!(
        conn.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    assert_eq!(
        conn.negotiated_cipher_suite().map(|s| u16::from(s.suite())),
        Some(0xcca9)
    );
    let aes_only = Client {
        trust: &trust,
        suites: &[0xc02b, 0xc02c, 0x1301, 0x1302],
        ..Client::default()
    };
    assert!(tls_connect(e.port, aes_only.config()).await.is_err());

    // One curve: it is used, and a client offering only another is refused.
    let e = start(
        dir.path(),
        &server,
        &format!("{TLS}  curve_preferences: [CurveP384]\n"),
    );
    let s = tls_connect(
        e.port,
        Client {
            trust: &trust,
            ..Client::default()
        }
        .config(),
    )
    .await
    .unwrap();
    assert_eq!(
        s.get_ref()
            .1
            .negotiated_key_exchange_group()
            .map(|g| g.name()),
        Some(rustls::NamedGroup::secp384r1)
    );
    let x25519_only = Client {
        trust: &trust,
        groups: &[rustls::NamedGroup::X25519],
        ..Client::default()
    };
    assert!(tls_connect(e.port, x25519_only.config()).await.is_err());
}

#[tokio::test]
async fn client_certificate_policies_and_allowed_sans() {
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    pki(d);
    make_cert(d, "ca", "prom", "DNS:prometheus.test");
    make_cert(d, "ca", "other", "DNS:other.test");
    make_cert(d, "ca", "spiffe", "URI:spiffe://example/prometheus");
    make_cert(d, "ca", "byip", "IP:10.1.2.3");
    make_ca(d, "stranger"); // self-signed: no CA vouches for it
    let trust = [d.join("ca.crt")];
    let with = |name: &str| {
        Client {
            trust: &trust,
            identity: Some((d.join(format!("{name}.crt")), d.join(format!("{name}.key")))),
            ..Client::default()
        }
        .config()
    };
    let without = Client {
        trust: &trust,
        ..Client::default()
    }
    .config();
    let ok = |r: std::io::Result<(u16, String)>| matches!(r, Ok((200, _)));

    let e = start(
        d,
        &server,
        &format!(
            "{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  client_allowed_sans: [prometheus.test, \"spiffe://example/prometheus\", 10.1.2.3]\n"
        ),
    );
    for name in ["prom", "spiffe", "byip"] {
        assert!(
            ok(tls_get(e.port, with(name), "/healthz", "").await),
            "{name} has an allowed SAN"
        );
    }
    assert!(
        !ok(tls_get(e.port, with("other"), "/healthz", "").await),
        "SAN not allowed"
    );
    assert!(
        !ok(tls_get(e.port, with("stranger"), "/healthz", "").await),
        "not from the CA"
    );
    assert!(
        !ok(tls_get(e.port, without.clone(), "/healthz", "").await),
        "no certificate"
    );

    let e = start(
        d,
        &server,
        &format!("{TLS}  client_auth_type: RequireAnyClientCert\n"),
    );
    assert!(ok(tls_get(e.port, with("stranger"), "/healthz", "").await));
    assert!(!ok(tls_get(e.port, without.clone(), "/healthz", "").await));

    let e = start(
        d,
        &server,
        &format!("{TLS}  client_auth_type: RequestClientCert\n"),
    );
    assert!(ok(tls_get(e.port, with("stranger"), "/healthz", "").await));
    assert!(ok(tls_get(e.port, without.clone(), "/healthz", "").await));

    let e = start(
        d,
        &server,
        &format!("{TLS}  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n"),
    );
    assert!(ok(tls_get(e.port, with("other"), "/healthz", "").await));
    assert!(ok(tls_get(e.port, without.clone(), "/healthz", "").await));
    assert!(!ok(tls_get(e.port, with("stranger"), "/healthz", "").await));
}

fn pem_block(text: &str) -> String {
    text.lines().map(|l| format!("    {l}\n")).collect()
}

fn peer_cert(s: &tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> Vec<u8> {
    s.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// Certificates rotate without a restart; a broken change keeps the
/// previous settings and is logged; auth, headers and inline PEM follow the
/// file too.
#[tokio::test]
async fn the_file_and_its_certificates_are_reloaded_when_they_change() {
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    pki(d);
    make_ca(d, "ca2");
    make_cert(d, "ca2", "rotated", "IP:127.0.0.1");
    let trust: [PathBuf; 2] = [d.join("ca.crt"), d.join("ca2.crt")];
    let client = Client {
        trust: &trust,
        ..Client::default()
    }
    .config();
    let web = d.join("web.yml");
    std::fs::write(&web, TLS).unwrap();
    let config = format!(
        "[web]\nconfig_file = \"{}\"\nconfig_file_check_interval = \"100ms\"\n[[targets]]\nname = \"t\"\nurl = \"{}\"\n",
        web.display(),
        server.url()
    );
    let mut e = Exporter::start(d, &config, None, &[]);
    let pid = e.child.id();
    let first = peer_cert(&tls_connect(e.port, client.clone()).await.unwrap());
    let original = certs(&d.join("server.crt"))[0].to_vec();
    assert_eq!(first, original);

    // Rotation: new certificate and key files under the same names.
    let rotated = certs(&d.join("rotated.crt"))[0].to_vec();
    let rotating = Instant::now();
    std::fs::copy(d.join("rotated.key"), d.join("server.key")).unwrap();
    std::fs::copy(d.join("rotated.crt"), d.join("server.crt")).unwrap();
    let port = e.port;
    wait_until("the rotated certificate", || {
        let (client, rotated) = (client.clone(), rotated.clone());
        async move {
            tls_connect(port, client)
                .await
                .is_ok_and(|s| peer_cert(&s) == rotated)
        }
    })
    .await;
    eprintln!(
        "rotated certificate served {:.2?} after the files changed (check interval 100 ms)",
        rotating.elapsed()
    );
    assert!(
        e.child.try_wait().unwrap().is_none() && e.child.id() == pid,
        "no restart"
    );
    assert!(e.log().contains("web config reloaded"));

    // A broken file: logged, the rotated certificate stays in use.
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
    )
    .unwrap();
    wait_until("the rejection in the log", || {
        let log = e.log();
        async move { log.contains("web config change rejected") }
    })
    .await;
    assert!(e.log().contains("missing.crt"), "the log says why");
    let s = tls_connect(port, client.clone()).await.unwrap();
    assert_eq!(peer_cert(&s), rotated, "previous settings kept");

    // Inline PEM, basic auth, a header and a rate limit, all from the file.
    let hash = bcrypt::hash("scrape-pw", 4).unwrap();
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert: |\n{}  key: |\n{}basic_auth_users:\n  prometheus: {hash}\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\n",
            pem_block(&std::fs::read_to_string(d.join("rotated.crt")).unwrap()),
            pem_block(&std::fs::read_to_string(d.join("rotated.key")).unwrap()),
        ),
    )
    .unwrap();
    wait_until("basic auth", || {
        let client = client.clone();
        async move { matches!(tls_get(port, client, "/healthz", "").await, Ok((401, _))) }
    })
    .await;
    let auth = format!(
        "Authorization: Basic {}\r\n",
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            "prometheus:scrape-pw"
        )
    );
    let mut s = tls_connect(port, client.clone()).await.unwrap();
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(
            format!("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        let text = String::from_utf8_lossy(&out).to_lowercase();
        assert!(text.starts_with("http/1.1 200"), "{text}");
        assert!(text.contains("x-frame-options: deny"), "{text}");
    }
    assert!(!e.log().contains("scrape-pw"));
}

#[tokio::test]
async fn rate_limit_and_headers_without_tls() {
    let server = RedisServer::start(Server::Redis70);
    let dir = tempfile::tempdir().unwrap();
    let e = start(
        dir.path(),
        &server,
        "rate_limit:\n  interval: 1h\n  burst: 3\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n    Strict-Transport-Security: max-age=60\n",
    );
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{}/healthz", e.port);
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let r = http.get(&url).send().await.unwrap();
        assert_eq!(r.headers()["x-content-type-options"], "nosniff");
        assert_eq!(r.headers()["strict-transport-security"], "max-age=60");
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
}

/// What rustls (or the exporter) cannot do is refused at start, naming the
/// key: exit 2 from --check-config.
#[test]
fn unsupported_settings_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    pki(d);
    for (setting, expected) in [
        (
            "  cipher_suites: [TLS_RSA_WITH_AES_128_GCM_SHA256]\n",
            "tls_server_config.cipher_suites: TLS_RSA_WITH_AES_128_GCM_SHA256 is not implemented by rustls",
        ),
        (
            "  cipher_suites: [TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA]\n",
            "tls_server_config.cipher_suites: unknown cipher suite",
        ),
        (
            "  curve_preferences: [CurveP521]\n",
            "tls_server_config.curve_preferences: CurveP521 is not implemented by rustls",
        ),
        (
            "  min_version: TLS11\n",
            "tls_server_config.min_version: TLS11 is not supported",
        ),
        (
            "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  client_allowed_sans: [ops@example.com]\n",
            "tls_server_config.client_allowed_sans: \"ops@example.com\" is an e-mail address",
        ),
        (
            "  client_ca_file: ca.crt\n",
            "client_auth_type asks for no client certificate",
        ),
        (
            "  client_auth_type: RequireAndVerifyClientCert\n",
            "tls_server_config.client_ca_file: required",
        ),
    ] {
        std::fs::write(d.join("web.yml"), format!("{TLS}{setting}")).unwrap();
        std::fs::write(
            d.join("c.toml"),
            format!("[web]\nconfig_file = \"{}\"\n", d.join("web.yml").display()),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_redis-streams-exporter"))
            .args([
                "--config",
                d.join("c.toml").to_str().unwrap(),
                "--check-config",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{setting}: {stderr}");
        assert!(stderr.contains(expected), "{setting}: {stderr}");
    }
}
