//! Securing the HTTP side with a Prometheus exporter-toolkit web config file
//! (`--web.config.file`): TLS with an optional client-certificate check, and
//! basic auth against bcrypt hashes. Unknown keys are errors, as in the
//! toolkit. The file is read at startup; a change needs a restart.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # optional
//!   client_ca_file: clients.crt                    # with client auth
//!   min_version: TLS12                             # TLS12 (default) or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...                         # bcrypt hash
//! http_server_config:
//!   headers:
//!     X-Content-Type-Options: nosniff
//! ```

use std::collections::{BTreeMap, HashSet};
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebConfig {
    tls_server_config: Option<RawTls>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
    http_server_config: Option<RawHttp>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert_file: String,
    key_file: String,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    #[serde(default)]
    headers: BTreeMap<String, String>,
    http2: Option<bool>,
}

/// Why the web config file is unusable.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct WebConfigError {
    file: String,
    problem: String,
}

/// The validated web config.
#[derive(Clone)]
pub struct WebConfig {
    /// TLS, when configured.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Basic auth, when users are configured.
    pub auth: Option<Arc<BasicAuth>>,
    /// Extra response headers.
    pub headers: Vec<(axum::http::HeaderName, axum::http::HeaderValue)>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("auth_users", &self.auth.as_ref().map(|a| a.users.len()))
            .field("headers", &self.headers.len())
            .finish()
    }
}

fn resolve(base: &Path, file: &str) -> PathBuf {
    let p = PathBuf::from(file);
    if p.is_absolute() { p } else { base.join(p) }
}

/// Loads and validates a web config file. Relative paths inside it are
/// relative to the file's directory, as in the toolkit.
///
/// # Errors
/// When the file cannot be read or parsed, a certificate or key cannot be
/// loaded, a hash is not bcrypt, or a value is not supported.
pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
    let file = path.display().to_string();
    let fail = |problem: String| WebConfigError {
        file: file.clone(),
        problem,
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read the file: {e}")))?;
    let raw: RawWebConfig = if text.trim().is_empty() {
        RawWebConfig {
            tls_server_config: None,
            basic_auth_users: BTreeMap::new(),
            http_server_config: None,
        }
    } else {
        serde_yaml::from_str(&text).map_err(|e| fail(e.to_string()))?
    };
    let base = path.parent().unwrap_or(Path::new("."));
    let tls = raw
        .tls_server_config
        .map(|t| tls_config(base, t))
        .transpose()
        .map_err(fail)?;
    for (user, hash) in &raw.basic_auth_users {
        // Parsing the hash validates it without verifying anything.
        if bcrypt::HashParts::from_str(hash).is_err() {
            return Err(fail(format!("basic_auth_users.{user}: not a bcrypt hash")));
        }
    }
    let auth =
        (!raw.basic_auth_users.is_empty()).then(|| Arc::new(BasicAuth::new(raw.basic_auth_users)));
    let mut headers = Vec::new();
    if let Some(http) = raw.http_server_config {
        if http.http2 == Some(true) {
            return Err(fail(
                "http_server_config.http2: HTTP/2 is not supported".into(),
            ));
        }
        for (name, value) in http.headers {
            let n = axum::http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                fail(format!(
                    "http_server_config.headers: invalid header name {name:?}"
                ))
            })?;
            let v = axum::http::HeaderValue::from_str(&value)
                .map_err(|_| fail(format!("http_server_config.headers.{name}: invalid value")))?;
            headers.push((n, v));
        }
    }
    Ok(WebConfig { tls, auth, headers })
}

fn tls_config(base: &Path, t: RawTls) -> Result<Arc<rustls::ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = read_certs(&resolve(base, &t.cert_file))
        .map_err(|e| format!("tls_server_config.cert_file: {e}"))?;
    let key_path = resolve(base, &t.key_file);
    let key = std::fs::read(&key_path)
        .map_err(|e| {
            format!(
                "tls_server_config.key_file: cannot read {}: {e}",
                key_path.display()
            )
        })
        .and_then(|pem| {
            rustls_pemfile::private_key(&mut pem.as_slice())
                .map_err(|e| format!("tls_server_config.key_file: {e}"))?
                .ok_or_else(|| {
                    format!(
                        "tls_server_config.key_file: no private key in {}",
                        key_path.display()
                    )
                })
        })?;
    let version = |v: &Option<String>,
                   key: &str|
     -> Result<Option<&'static rustls::SupportedProtocolVersion>, String> {
        match v.as_deref() {
            None => Ok(None),
            Some("TLS12") => Ok(Some(&rustls::version::TLS12)),
            Some("TLS13") => Ok(Some(&rustls::version::TLS13)),
            Some(other) => Err(format!(
                "tls_server_config.{key}: {other:?} is not supported (TLS12 or TLS13)"
            )),
        }
    };
    let min = version(&t.min_version, "min_version")?.unwrap_or(&rustls::version::TLS12);
    let max = version(&t.max_version, "max_version")?.unwrap_or(&rustls::version::TLS13);
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [&rustls::version::TLS12, &rustls::version::TLS13]
            .into_iter()
            .filter(|v| {
                let rank = |x: &rustls::SupportedProtocolVersion| {
                    if x.version == rustls::ProtocolVersion::TLSv1_2 {
                        0
                    } else {
                        1
                    }
                };
                rank(v) >= rank(min) && rank(v) <= rank(max)
            })
            .collect();
    if versions.is_empty() {
        return Err("tls_server_config: min_version is above max_version".into());
    }
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let client_auth = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    let builder = match client_auth {
        "NoClientCert" => builder.with_no_client_auth(),
        "RequireAndVerifyClientCert" | "VerifyClientCertIfGiven" => {
            let ca = t.client_ca_file.as_ref().ok_or_else(|| {
                format!(
                    "tls_server_config.client_ca_file: required with client_auth_type {client_auth}"
                )
            })?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs(&resolve(base, ca))
                .map_err(|e| format!("tls_server_config.client_ca_file: {e}"))?
            {
                roots
                    .add(cert)
                    .map_err(|e| format!("tls_server_config.client_ca_file: {e}"))?;
            }
            let mut verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            );
            if client_auth == "VerifyClientCertIfGiven" {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier
                .build()
                .map_err(|e| format!("tls_server_config.client_ca_file: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
        other => {
            return Err(format!(
                "tls_server_config.client_auth_type: {other:?} is not supported (NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert)"
            ));
        }
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    Ok(Arc::new(config))
}

fn read_certs(path: &Path) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {}", path.display()));
    }
    Ok(certs)
}

/// Checks `Authorization: Basic` headers against bcrypt hashes. bcrypt is
/// deliberately slow, so a successful check is remembered (as a keyed hash of
/// user and password, never the password) and repeated scrapes are cheap.
#[derive(Debug)]
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    verified: Mutex<HashSet<u64>>,
    hasher: std::collections::hash_map::RandomState,
}

/// Successful logins remembered at most.
const VERIFIED_CACHE: usize = 1024;

impl BasicAuth {
    fn new(users: BTreeMap<String, String>) -> Self {
        BasicAuth {
            users,
            verified: Mutex::new(HashSet::new()),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    fn key(&self, user: &str, password: &str) -> u64 {
        let mut h = self.hasher.build_hasher();
        user.hash(&mut h);
        password.hash(&mut h);
        h.finish()
    }

    /// True when the header value carries a configured user and its password.
    pub async fn check(self: &Arc<Self>, header: Option<&str>) -> bool {
        let Some((user, password)) = header.and_then(decode_basic) else {
            return false;
        };
        let Some(hash) = self.users.get(&user).cloned() else {
            return false;
        };
        let key = self.key(&user, &password);
        if self
            .verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return true;
        }
        let ok =
            tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
                .await
                .unwrap_or(false);
        if ok {
            let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            if verified.len() >= VERIFIED_CACHE {
                verified.clear();
            }
            verified.insert(key);
        }
        ok
    }
}

fn decode_basic(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// How long a TLS handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A listener that hands axum finished TLS connections. Handshakes run in
/// their own tasks, so a slow or hostile client cannot stall others, and a
/// failed handshake (plain HTTP, an untrusted client) only closes that
/// connection.
#[derive(Debug)]
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `tcp` with `config`.
    ///
    /// # Errors
    /// When the listener's address cannot be read.
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The acceptor task only ends when this receiver is gone, so
            // this cannot happen while we hold it; wait forever to be safe.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_basic_headers() {
        let h = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:s3cret:with:colons")
        );
        assert_eq!(
            decode_basic(&h),
            Some(("alice".into(), "s3cret:with:colons".into()))
        );
        assert_eq!(decode_basic("Bearer abc"), None);
        assert_eq!(decode_basic("Basic !!!"), None);
    }

    #[tokio::test]
    async fn bcrypt_users_and_cache() {
        let hash = bcrypt::hash("pw", 4).unwrap();
        let auth = Arc::new(BasicAuth::new(BTreeMap::from([("u".to_string(), hash)])));
        let good = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("u:pw")
        );
        let bad = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("u:nope")
        );
        assert!(auth.check(Some(&good)).await);
        assert!(auth.check(Some(&good)).await);
        assert!(!auth.check(Some(&bad)).await);
        assert!(!auth.check(None).await);
        assert_eq!(auth.verified.lock().unwrap().len(), 1);
    }

    #[test]
    fn rejects_unknown_keys_and_bad_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("web.yml");
        std::fs::write(&p, "basic_auth_users:\n  u: plaintext\n").unwrap();
        assert!(
            load(&p)
                .unwrap_err()
                .to_string()
                .contains("basic_auth_users.u: not a bcrypt hash")
        );
        std::fs::write(&p, "tls_config:\n  cert_file: x\n").unwrap();
        assert!(
            load(&p)
                .unwrap_err()
                .to_string()
                .contains("unknown field `tls_config`")
        );
    }
}
