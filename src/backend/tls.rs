//! TLS to Redis: the rustls client configuration of one target (trusted
//! CAs, client certificate, the name the server's certificate must carry,
//! or no verification at all) and the handshake on a fresh TCP connection.
//!
//! The redis crate's own TLS takes neither a server name distinct from the
//! host it dials nor a ready-made rustls configuration, so the exporter
//! makes the TLS stream itself and hands it to the crate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use rustls::client::ResolvesClientCert;
use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::config::RedisTls;

/// What a target's TLS connections are made with.
#[derive(Clone)]
pub(crate) struct TlsSetup {
    connector: TlsConnector,
    /// `tls_server_name`, when set: verified (and sent as SNI) instead of
    /// the host dialled.
    server_name: Option<ServerName<'static>>,
    /// Without a client certificate: set when a server asked for one. A
    /// server that requires one closes the connection after the handshake,
    /// and what the exporter sees first is often only a broken pipe; this
    /// says why.
    asked_for_certificate: Arc<AtomicBool>,
}

impl std::fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSetup")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// The system's trust store, read once.
fn system_roots() -> &'static Result<Arc<RootCertStore>, String> {
    static ROOTS: OnceLock<Result<Arc<RootCertStore>, String>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        let mut store = RootCertStore::empty();
        let (added, _) = store.add_parsable_certificates(found.certs);
        if added == 0 {
            let why = found
                .errors
                .first()
                .map_or("none found".to_string(), |e| e.to_string());
            return Err(format!(
                "no system CA certificates ({why}); set tls_ca_file"
            ));
        }
        Ok(Arc::new(store))
    })
}

impl TlsSetup {
    /// The configuration for `tls`.
    ///
    /// # Errors
    /// When no CA is configured and the system has none, or rustls refuses
    /// the material (the configuration's checks make that unlikely).
    pub(crate) fn new(tls: &RedisTls) -> Result<TlsSetup, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = if tls.insecure_skip_verify {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { provider }))
        } else {
            let roots = match &tls.ca {
                Some(ca) => {
                    let mut store = RootCertStore::empty();
                    for cert in ca.value.iter() {
                        store
                            .add(cert.clone())
                            .map_err(|e| format!("tls_ca_file {}: {e}", ca.path.display()))?;
                    }
                    Arc::new(store)
                }
                None => system_roots().clone()?,
            };
            builder.with_root_certificates(roots)
        };
        let asked_for_certificate = Arc::new(AtomicBool::new(false));
        let config = match &tls.client {
            Some(id) => builder
                .with_client_auth_cert(id.chain.value.to_vec(), id.key.value.clone_key())
                .map_err(|e| format!("tls_key_file {}: {e}", id.key.path.display()))?,
            None => builder.with_client_cert_resolver(Arc::new(NoClientCertificate {
                asked: asked_for_certificate.clone(),
            })),
        };
        let server_name = match &tls.server_name {
            Some(name) => Some(
                ServerName::try_from(name.clone())
                    .map_err(|e| format!("tls_server_name {name:?}: {e}"))?,
            ),
            None => None,
        };
        Ok(TlsSetup {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
            asked_for_certificate,
        })
    }

    /// A connection failure explained for an operator: the TLS error with
    /// what to change, or, when the failure carries none, that the server
    /// asked for a client certificate the exporter does not have.
    pub(crate) fn explain(&self, error: &(dyn std::error::Error + 'static)) -> Option<String> {
        explain(error).or_else(|| {
            self.asked_for_certificate.load(Ordering::Relaxed).then(|| {
                format!(
                    "{error}: the server asked for a client certificate and none is configured; if it requires one (tls-auth-clients yes), set tls_cert_file and tls_key_file"
                )
            })
        })
    }

    /// Completes the TLS handshake over `tcp`, a connection to `host`.
    ///
    /// # Errors
    /// An I/O error; a refused handshake carries the rustls error.
    pub(crate) async fn handshake(
        &self,
        host: &str,
        tcp: TcpStream,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => ServerName::try_from(host.to_string()).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{host:?} cannot be verified as a TLS server name: {e}"),
                )
            })?,
        };
        self.connector.connect(name, tcp).await
    }
}

/// No client certificate, noting that a server asked for one.
#[derive(Debug)]
struct NoClientCertificate {
    asked: Arc<AtomicBool>,
}

impl ResolvesClientCert for NoClientCertificate {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.asked.store(true, Ordering::Relaxed);
        None
    }

    fn has_certs(&self) -> bool {
        false
    }
}

/// `tls_insecure_skip_verify`: any certificate for any name is accepted;
/// handshake signatures are still checked, so the session is at least
/// with the holder of the certificate shown.
#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    crate::tls_signatures::handshake_signatures!(provider.signature_verification_algorithms);
}

/// A TLS failure explained for an operator: the rustls error found in
/// `error`'s sources, with what to change, or `None` when it is not one.
fn explain(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        // The redis crate keeps I/O errors as `Arc<dyn Error>`.
        let e = match e.downcast_ref::<Arc<dyn std::error::Error + Send + Sync>>() {
            Some(shared) => &**shared as &(dyn std::error::Error + 'static),
            None => e,
        };
        let rustls = e.downcast_ref::<rustls::Error>().or_else(|| {
            e.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(r) = rustls {
            return Some(describe(r));
        }
        source = e.source();
    }
    None
}

fn describe(e: &rustls::Error) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    let hint = match e {
        E::AlertReceived(A::CertificateRequired) => {
            "the server requires a client certificate: set tls_cert_file and tls_key_file"
        }
        E::AlertReceived(A::BadCertificate | A::UnknownCA | A::CertificateUnknown) => {
            "the server refused the client certificate (tls_cert_file): is it signed by a CA the server trusts (tls-ca-cert-file)?"
        }
        E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            "the server's certificate does not name the host dialled: set tls_server_name to a name it carries"
        }
        E::InvalidCertificate(C::UnknownIssuer) => {
            "the server's certificate is not signed by a trusted CA: set tls_ca_file to the CA that signed it"
        }
        E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
            "the server's certificate has expired"
        }
        // What a server without TLS answers a handshake with (an error line,
        // `-ERR …`), read as a TLS record.
        E::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => {
            "the server answered the handshake in plain text: it has no TLS on this port; if so, use a redis:// URL"
        }
        _ => "",
    };
    if hint.is_empty() {
        format!("TLS: {e}")
    } else {
        format!("TLS: {e}: {hint}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server without TLS answers a handshake with a plain-text error
    /// line, which rustls reads as a record of no known type: the message
    /// says so, and what to use.
    #[test]
    fn a_plain_text_answer_to_the_handshake_says_the_server_has_no_tls() {
        let e = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
        let said = describe(&e);
        assert!(said.contains("plain text"), "{said}");
        assert!(said.contains("use a redis:// URL"), "{said}");
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        assert_eq!(explain(&io).as_deref(), Some(said.as_str()));
    }
}
