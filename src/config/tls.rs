//! TLS to Redis as configured per target and per auth module: the files the
//! `tls_*` keys name, read and checked when the configuration is loaded, so
//! `--check-config` and a reload see a missing file, a file that is not PEM
//! or a key that does not belong to its certificate, each with its key path.
//! What is kept is the parsed material: the client connects with exactly
//! what was checked, and a rotated file takes effect on reload.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// How a `rediss://` connection verifies the server and identifies itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedisTls {
    /// CA certificates to trust (`tls_ca_file`); `None`: the system's.
    pub ca: Option<PemFile<Arc<[CertificateDer<'static>]>>>,
    /// Client certificate chain and key (`tls_cert_file`, `tls_key_file`),
    /// for servers started with `tls-auth-clients yes`.
    pub client: Option<ClientIdentity>,
    /// The name the server's certificate must carry (`tls_server_name`);
    /// `None`: the host of the URL.
    pub server_name: Option<String>,
    /// Accept any server certificate (`tls_insecure_skip_verify`).
    pub insecure_skip_verify: bool,
}

impl RedisTls {
    /// True when any key was set, so a `redis://` URL would ignore it.
    pub fn is_configured(&self) -> bool {
        self.ca.is_some()
            || self.client.is_some()
            || self.server_name.is_some()
            || self.insecure_skip_verify
    }
}

/// Something read from a file, with the file it came from (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PemFile<T> {
    /// The file as configured.
    pub path: PathBuf,
    /// What it holds.
    pub value: T,
}

/// A client certificate chain and its private key.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The chain, end-entity certificate first.
    pub chain: PemFile<Arc<[CertificateDer<'static>]>>,
    /// The private key (never printed).
    pub key: PemFile<Arc<PrivateKeyDer<'static>>>,
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_file", &self.chain.path)
            .field("key_file", &self.key.path)
            .finish()
    }
}

/// The `tls_*` keys as written.
#[derive(Debug, Default)]
pub(super) struct TlsKeys {
    pub ca_file: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub server_name: Option<String>,
    pub insecure_skip_verify: Option<bool>,
}

/// The `tls_*` keys of a raw section that has them (a target, an auth
/// module: the same five keys), moved out of it. A macro rather than a
/// `From`: the section's other keys are moved out one by one too, and a
/// partly moved struct cannot be borrowed whole.
macro_rules! tls_keys {
    ($raw:expr) => {
        $crate::config::tls::TlsKeys {
            ca_file: $raw.tls_ca_file,
            cert_file: $raw.tls_cert_file,
            key_file: $raw.tls_key_file,
            server_name: $raw.tls_server_name,
            insecure_skip_verify: $raw.tls_insecure_skip_verify,
        }
    };
}
pub(super) use tls_keys;

/// Reads and checks the files; every problem goes to `problem(key, message)`
/// with the key relative to the section (`tls_ca_file`, ...).
pub(super) fn load(keys: TlsKeys, problem: &mut dyn FnMut(&str, String)) -> RedisTls {
    let ca = keys.ca_file.and_then(|path| {
        let path = PathBuf::from(path);
        match certificates(&path) {
            Ok(certs) => {
                // Each must be usable as a trust anchor, or it fails later
                // as an unknown issuer with no hint of which file is wrong.
                for (i, cert) in certs.iter().enumerate() {
                    if let Err(e) = webpki::anchor_from_trusted_cert(cert) {
                        problem(
                            "tls_ca_file",
                            format!(
                                "{}: certificate {} is not a valid X.509 certificate: {e}",
                                path.display(),
                                i + 1
                            ),
                        );
                        return None;
                    }
                }
                Some(PemFile {
                    path,
                    value: certs.into(),
                })
            }
            Err(e) => {
                problem("tls_ca_file", e);
                None
            }
        }
    });
    let client = match (keys.cert_file, keys.key_file) {
        (None, None) => None,
        (Some(_), None) => {
            problem(
                "tls_key_file",
                "is required with tls_cert_file (the client certificate's private key)".into(),
            );
            None
        }
        (None, Some(_)) => {
            problem(
                "tls_cert_file",
                "is required with tls_key_file (the client certificate)".into(),
            );
            None
        }
        (Some(cert), Some(key)) => {
            let (cert, key) = (PathBuf::from(cert), PathBuf::from(key));
            let chain = certificates(&cert).map_err(|e| problem("tls_cert_file", e));
            let key_der = private_key(&key).map_err(|e| problem("tls_key_file", e));
            match (chain, key_der) {
                (Ok(chain), Ok(key_der)) => match matching(&chain, &key_der) {
                    Ok(()) => Some(ClientIdentity {
                        chain: PemFile {
                            path: cert,
                            value: chain.into(),
                        },
                        key: PemFile {
                            path: key,
                            value: Arc::new(key_der),
                        },
                    }),
                    Err(e) => {
                        problem(
                            "tls_key_file",
                            format!(
                                "{}: {e} (the certificate of tls_cert_file {})",
                                key.display(),
                                cert.display()
                            ),
                        );
                        None
                    }
                },
                _ => None,
            }
        }
    };
    let server_name = match keys.server_name {
        Some(name) if ServerName::try_from(name.as_str()).is_err() => {
            problem(
                "tls_server_name",
                format!("{name:?} is not a DNS name or an IP address"),
            );
            None
        }
        name => name,
    };
    RedisTls {
        ca,
        client,
        server_name,
        insecure_skip_verify: keys.insecure_skip_verify.unwrap_or(false),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The certificates of a PEM file; an error when it holds none.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not valid PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)",
            path.display()
        ));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        format!(
            "{}: holds no PEM private key (expected -----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or EC PRIVATE KEY): {e}",
            path.display()
        )
    })
}

/// Checks that rustls can use the key and that it belongs to the first
/// certificate of the chain.
fn matching(chain: &[CertificateDer<'static>], key: &PrivateKeyDer<'static>) -> Result<(), String> {
    let provider = rustls::crypto::ring::default_provider();
    rustls::sign::CertifiedKey::from_der(chain.to_vec(), key.clone_key(), &provider)
        .map(|_| ())
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => {
                "the private key does not belong to the client certificate".to_string()
            }
            other => format!("unusable private key: {other}"),
        })
}
