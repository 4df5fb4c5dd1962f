//! Fixtures for the HTTP edge tests: certificates made with the openssl
//! command line, the exporter binary started with a chosen descriptor limit,
//! and rustls clients with chosen versions, suites, curves and identities.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test helpers: a panic is a failed test.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::common::{free_port, which};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new(which("openssl"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA `name.crt`/`name.key` (P-256).
pub fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
        ],
    );
}

/// `name.crt`/`name.key` (P-256) signed by `ca`, with subject alternative
/// names such as `IP:127.0.0.1` or `DNS:prometheus.test`.
pub fn make_cert(dir: &Path, ca: &str, name: &str, san: &str) {
    std::fs::write(
        dir.join(format!("{name}.ext")),
        format!("subjectAltName={san}\nbasicConstraints=CA:FALSE\n"),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={name}"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

pub fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

pub fn key(path: &Path) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_file(path).unwrap()
}

/// What a TLS client offers.
pub struct Client<'a> {
    pub trust: &'a [PathBuf],
    pub identity: Option<(PathBuf, PathBuf)>,
    pub versions: &'a [&'static rustls::SupportedProtocolVersion],
    /// IANA numbers of the suites offered; empty: all of ring's.
    pub suites: &'a [u16],
    /// Groups offered; empty: all of ring's.
    pub groups: &'a [rustls::NamedGroup],
}

impl Default for Client<'_> {
    fn default() -> Self {
        Client {
            trust: &[],
            identity: None,
            versions: rustls::ALL_VERSIONS,
            suites: &[],
            groups: &[],
        }
    }
}

impl Client<'_> {
    pub fn config(&self) -> Arc<rustls::ClientConfig> {
        let mut provider = rustls::crypto::ring::default_provider();
        if !self.suites.is_empty() {
            provider
                .cipher_suites
                .retain(|s| self.suites.contains(&u16::from(s.suite())));
        }
        if !self.groups.is_empty() {
            provider
                .kx_groups
                .retain(|g| self.groups.contains(&g.name()));
        }
        let mut roots = rustls::RootCertStore::empty();
        for file in self.trust {
            for cert in certs(file) {
                roots.add(cert).unwrap();
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(self.versions)
            .unwrap()
            .with_root_certificates(roots);
        let config = match &self.identity {
            Some((cert, k)) => builder.with_client_auth_cert(certs(cert), key(k)).unwrap(),
            None => builder.with_no_client_auth(),
        };
        Arc::new(config)
    }
}

/// A TLS connection to 127.0.0.1:`port` (handshake done).
pub async fn tls_connect(
    port: u16,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    let name = ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
}

/// One HTTP/1.1 request on a fresh TLS connection: (status, body). Errors
/// when the handshake or the exchange fails.
pub async fn tls_get(
    port: u16,
    config: Arc<rustls::ClientConfig>,
    path: &str,
    extra_headers: &str,
) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tls_connect(port, config).await?;
    s.write_all(
        format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{extra_headers}\r\n"
        )
        .as_bytes(),
    )
    .await?;
    let mut out = Vec::new();
    // rustls reports a peer that closes without close_notify as an error
    // once the response is in; what was read counts.
    let _ = s.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no HTTP response: {text:?}")))?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body))
}

/// The exporter binary, killed on drop.
pub struct Exporter {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Exporter {
    /// Starts the exporter with `config` (TOML), optionally under
    /// `prlimit --nofile=N:N`, and waits until it listens.
    pub fn start(dir: &Path, config: &str, nofile: Option<u64>, extra: &[&str]) -> Exporter {
        let port = free_port();
        let path = dir.join(format!("exporter-{port}.toml"));
        std::fs::write(&path, config).unwrap();
        let log = dir.join(format!("exporter-{port}.log"));
        let exe = env!("CARGO_BIN_EXE_redis-streams-exporter");
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new(which("prlimit"));
                c.arg(format!("--nofile={n}:{n}")).arg("--").arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args([
            "--config",
            path.to_str().unwrap(),
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--log.level",
            "info,redis_streams_exporter::server=debug",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "exporter exited ({status}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "exporter did not listen: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Exporter { child, port, log }
    }

    /// The log, without terminal colour codes.
    pub fn log(&self) -> String {
        strip_ansi(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }

    /// Open descriptors of the process.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count()
    }

    /// The soft descriptor limit the process runs with.
    pub fn nofile(&self) -> u64 {
        nofile_of(&format!("/proc/{}/limits", self.child.id()))
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI sequences end with a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn nofile_of(limits: &str) -> u64 {
    let text = std::fs::read_to_string(limits).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line["Max open files".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Makes sure this test process may open `wanted` descriptors, raising its
/// soft limit up to the hard one with `prlimit` when needed.
pub fn ensure_own_nofile(wanted: u64) {
    if nofile_of("/proc/self/limits") >= wanted {
        return;
    }
    let out = Command::new(which("prlimit"))
        .args([
            "--pid",
            &std::process::id().to_string(),
            &format!("--nofile={wanted}:"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success() && nofile_of("/proc/self/limits") >= wanted,
        "this test needs {wanted} descriptors (raise `ulimit -n`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
