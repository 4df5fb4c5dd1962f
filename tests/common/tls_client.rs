//! TLS clients for the HTTP edge and Redis TLS tests: rustls with chosen versions, suites,
//! groups and identities, and one HTTP/1.1 request over a fresh TLS connection.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::common::pki::{certs, key};

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
