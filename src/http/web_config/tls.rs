//! `tls_server_config` of the web config file turned into a rustls server
//! configuration: certificate and key (files or inline PEM), protocol
//! versions, cipher suites and curves by their Go names, the five
//! `client_auth_type` policies and the `client_allowed_sans` check. What the
//! exporter-toolkit accepts but rustls does not implement (TLS 1.0 and 1.1,
//! CBC and RSA key-exchange suites, P-521, e-mail SANs) is refused with the
//! key that asks for it.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::DistinguishedName;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use serde::Deserialize;

/// `tls_server_config` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    curve_preferences: Option<Vec<String>>,
}

fn set(value: &Option<String>) -> bool {
    value.as_deref().is_some_and(|v| !v.is_empty())
}

fn resolve(base: &Path, file: &str) -> PathBuf {
    let p = PathBuf::from(file);
    if p.is_absolute() { p } else { base.join(p) }
}

impl RawTls {
    /// As in the toolkit, TLS is on when any certificate, key or client
    /// authentication field is set; an empty section means plain HTTP.
    pub(super) fn enabled(&self) -> bool {
        set(&self.cert)
            || set(&self.key)
            || set(&self.cert_file)
            || set(&self.key_file)
            || set(&self.client_ca)
            || set(&self.client_ca_file)
            || set(&self.client_auth_type)
    }

    /// The files this section reads, so a change to any of them is noticed.
    pub(super) fn files(&self, base: &Path) -> Vec<PathBuf> {
        [&self.cert_file, &self.key_file, &self.client_ca_file]
            .into_iter()
            .filter_map(|f| f.as_deref().filter(|f| !f.is_empty()))
            .map(|f| resolve(base, f))
            .collect()
    }
}

/// Go's names of the suites its `tls.CipherSuites()` lists (the only ones the
/// toolkit accepts), with their IANA numbers.
const GO_CIPHER_SUITES: [(&str, u16); 17] = [
    ("TLS_RSA_WITH_AES_128_CBC_SHA", 0x002f),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", 0x0035),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", 0x009c),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", 0x009d),
    ("TLS_AES_128_GCM_SHA256", 0x1301),
    ("TLS_AES_256_GCM_SHA384", 0x1302),
    ("TLS_CHACHA20_POLY1305_SHA256", 0x1303),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 0xc009),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", 0xc00a),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 0xc013),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", 0xc014),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 0xc02b),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", 0xc02c),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 0xc02f),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", 0xc030),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", 0xcca8),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", 0xcca9),
];

/// Builds the rustls configuration. `base` is the web config file's
/// directory, against which relative file names resolve.
pub(super) fn server_config(base: &Path, t: &RawTls) -> Result<Arc<rustls::ServerConfig>, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    let certs = certificate_chain(base, t)?;
    let key = private_key(base, t)?;
    let versions = versions(t)?;
    if let Some(names) = &t.cipher_suites {
        provider.cipher_suites = cipher_suites(&provider, names)?;
    }
    if let Some(names) = &t.curve_preferences {
        provider.kx_groups = curves(&provider, names)?;
    }
    let provider = Arc::new(provider);
    let verifier = client_verifier(base, t, &provider)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let builder = match verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        format!("tls_server_config: the certificate and key do not work together: {e}")
    })?;
    // Go's default is the server's order, as written in cipher_suites.
    config.ignore_client_order = t.prefer_server_cipher_suites.unwrap_or(true);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Exactly one of an inline value and a file name.
fn pem_source(
    base: &Path,
    inline: &Option<String>,
    file: &Option<String>,
    inline_key: &str,
    file_key: &str,
) -> Result<(Vec<u8>, String), String> {
    match (
        inline.as_deref().filter(|v| !v.is_empty()),
        file.as_deref().filter(|v| !v.is_empty()),
    ) {
        (Some(_), Some(_)) => Err(format!(
            "tls_server_config: set {inline_key} or {file_key}, not both"
        )),
        (Some(pem), None) => Ok((
            pem.as_bytes().to_vec(),
            format!("tls_server_config.{inline_key}"),
        )),
        (None, Some(name)) => {
            let path = resolve(base, name);
            let pem = std::fs::read(&path).map_err(|e| {
                format!(
                    "tls_server_config.{file_key}: cannot read {}: {e}",
                    path.display()
                )
            })?;
            Ok((pem, format!("tls_server_config.{file_key}")))
        }
        (None, None) => Err(format!(
            "tls_server_config: missing one of {inline_key} or {file_key}"
        )),
    }
}

fn parse_certs(pem: &[u8], key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{key}: not PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{key}: no certificate in it"));
    }
    Ok(certs)
}

fn certificate_chain(base: &Path, t: &RawTls) -> Result<Vec<CertificateDer<'static>>, String> {
    let (pem, key) = pem_source(base, &t.cert, &t.cert_file, "cert", "cert_file")?;
    parse_certs(&pem, &key)
}

fn private_key(base: &Path, t: &RawTls) -> Result<PrivateKeyDer<'static>, String> {
    let (pem, key) = pem_source(base, &t.key, &t.key_file, "key", "key_file")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        pem::Error::NoItemsFound => format!("{key}: no private key in it"),
        e => format!("{key}: not PEM: {e}"),
    })
}

fn version(
    value: &Option<String>,
    key: &str,
) -> Result<Option<&'static rustls::SupportedProtocolVersion>, String> {
    match value.as_deref() {
        None | Some("") => Ok(None),
        Some("TLS12") => Ok(Some(&rustls::version::TLS12)),
        Some("TLS13") => Ok(Some(&rustls::version::TLS13)),
        Some(v @ ("TLS10" | "TLS11")) => Err(format!(
            "tls_server_config.{key}: {v} is not supported: rustls implements TLS12 and TLS13 only"
        )),
        Some(other) => Err(format!(
            "tls_server_config.{key}: unknown TLS version {other:?} (TLS12 or TLS13)"
        )),
    }
}

fn versions(t: &RawTls) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let rank = |v: &rustls::SupportedProtocolVersion| u16::from(v.version);
    let min = version(&t.min_version, "min_version")?.unwrap_or(&rustls::version::TLS12);
    let max = version(&t.max_version, "max_version")?.unwrap_or(&rustls::version::TLS13);
    if rank(min) > rank(max) {
        return Err("tls_server_config: min_version is above max_version".into());
    }
    Ok([&rustls::version::TLS12, &rustls::version::TLS13]
        .into_iter()
        .filter(|v| rank(v) >= rank(min) && rank(v) <= rank(max))
        .collect())
}

/// The TLS 1.2 suites named, in the order given, plus every TLS 1.3 suite:
/// as in Go, `cipher_suites` governs TLS 1.2 only (TLS 1.3 names are
/// accepted and change nothing).
fn cipher_suites(
    provider: &CryptoProvider,
    names: &[String],
) -> Result<Vec<rustls::SupportedCipherSuite>, String> {
    let mut out: Vec<rustls::SupportedCipherSuite> = provider
        .cipher_suites
        .iter()
        .filter(|s| s.version() == &rustls::version::TLS13)
        .copied()
        .collect();
    for name in names {
        let Some((_, id)) = GO_CIPHER_SUITES.iter().find(|(n, _)| n == name) else {
            return Err(format!(
                "tls_server_config.cipher_suites: unknown cipher suite {name:?} (use Go's names, such as TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)"
            ));
        };
        if (0x1301..=0x1303).contains(id) {
            continue;
        }
        let Some(suite) = provider
            .cipher_suites
            .iter()
            .find(|s| u16::from(s.suite()) == *id)
        else {
            return Err(format!(
                "tls_server_config.cipher_suites: {name} is not implemented by rustls (it offers the ECDHE suites with AES-GCM or ChaCha20-Poly1305 only)"
            ));
        };
        if !out.iter().any(|s| s.suite() == suite.suite()) {
            out.push(*suite);
        }
    }
    Ok(out)
}

fn curves(
    provider: &CryptoProvider,
    names: &[String],
) -> Result<Vec<&'static dyn rustls::crypto::SupportedKxGroup>, String> {
    use rustls::NamedGroup;
    let mut out: Vec<&'static dyn rustls::crypto::SupportedKxGroup> = Vec::new();
    for name in names {
        let group = match name.as_str() {
            "CurveP256" => NamedGroup::secp256r1,
            "CurveP384" => NamedGroup::secp384r1,
            "X25519" => NamedGroup::X25519,
            "CurveP521" => {
                return Err(
                    "tls_server_config.curve_preferences: CurveP521 is not implemented by rustls (CurveP256, CurveP384 and X25519 are)".into(),
                );
            }
            other => {
                return Err(format!(
                    "tls_server_config.curve_preferences: unknown curve {other:?} (CurveP256, CurveP384 or X25519)"
                ));
            }
        };
        if let Some(kx) = provider.kx_groups.iter().find(|g| g.name() == group) {
            if !out.iter().any(|g| g.name() == group) {
                out.push(*kx);
            }
        }
    }
    if out.is_empty() {
        return Err("tls_server_config.curve_preferences: no usable curve".into());
    }
    Ok(out)
}

fn client_verifier(
    base: &Path,
    t: &RawTls,
    provider: &Arc<CryptoProvider>,
) -> Result<Option<Arc<dyn ClientCertVerifier>>, String> {
    let ca = match (set(&t.client_ca), set(&t.client_ca_file)) {
        (false, false) => None,
        _ => {
            let (pem, key) = pem_source(
                base,
                &t.client_ca,
                &t.client_ca_file,
                "client_ca",
                "client_ca_file",
            )?;
            Some((parse_certs(&pem, &key)?, key))
        }
    };
    let policy = t.client_auth_type.as_deref().unwrap_or("");
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Option<Arc<dyn ClientCertVerifier>> = match policy {
        "" | "NoClientCert" => {
            if ca.is_some() {
                return Err("tls_server_config: client_ca_file (or client_ca) is set but client_auth_type asks for no client certificate".into());
            }
            None
        }
        "RequestClientCert" => Some(Arc::new(AnyClientCert {
            mandatory: false,
            algorithms,
        })),
        "RequireAnyClientCert" | "RequireClientCert" => Some(Arc::new(AnyClientCert {
            mandatory: true,
            algorithms,
        })),
        "VerifyClientCertIfGiven" | "RequireAndVerifyClientCert" => {
            let Some((certs, key)) = ca else {
                return Err(format!(
                    "tls_server_config.client_ca_file: required with client_auth_type {policy}"
                ));
            };
            let mut roots = rustls::RootCertStore::empty();
            for cert in certs {
                roots.add(cert).map_err(|e| format!("{key}: {e}"))?;
            }
            let mut builder = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            );
            if policy == "VerifyClientCertIfGiven" {
                builder = builder.allow_unauthenticated();
            }
            Some(builder.build().map_err(|e| format!("{key}: {e}"))?)
        }
        other => {
            return Err(format!(
                "tls_server_config.client_auth_type: unknown policy {other:?} (NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert)"
            ));
        }
    };
    let sans = t.client_allowed_sans.as_deref().unwrap_or_default();
    if sans.is_empty() {
        return Ok(verifier);
    }
    let Some(inner) = verifier else {
        return Err("tls_server_config.client_allowed_sans: needs a client_auth_type that asks for client certificates".into());
    };
    Ok(Some(Arc::new(AllowedSans::new(
        inner,
        sans,
        provider.signature_verification_algorithms,
    )?)))
}

/// `RequestClientCert` and `RequireAnyClientCert`: any certificate is taken
/// without checking who issued it (the toolkit calls these insecure), but
/// the client must still prove it holds the certificate's key.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    crate::tls_signatures::handshake_signatures!(algorithms);
}

/// `client_allowed_sans`: after the policy's own check, the certificate must
/// carry one of the listed DNS names, IP addresses or URIs, compared exactly
/// (no wildcard expansion), as the toolkit does. A client without a
/// certificate is then refused, whatever the policy.
#[derive(Debug)]
struct AllowedSans {
    inner: Arc<dyn ClientCertVerifier>,
    /// The provider's, as the inner verifier's: the handshake is checked the same way.
    algorithms: WebPkiSupportedAlgorithms,
    names: BTreeSet<String>,
    ips: Vec<IpAddr>,
}

impl AllowedSans {
    fn new(
        inner: Arc<dyn ClientCertVerifier>,
        sans: &[String],
        algorithms: WebPkiSupportedAlgorithms,
    ) -> Result<Self, String> {
        let mut names = BTreeSet::new();
        let mut ips = Vec::new();
        for san in sans {
            if let Ok(ip) = san.parse::<IpAddr>() {
                ips.push(ip);
            } else if !san.contains(':') && san.contains('@') {
                return Err(format!(
                    "tls_server_config.client_allowed_sans: {san:?} is an e-mail address, which the exporter cannot read from certificates (use DNS, IP or URI SANs)"
                ));
            } else {
                names.insert(san.clone());
            }
        }
        Ok(AllowedSans {
            inner,
            algorithms,
            names,
            ips,
        })
    }

    fn allows(&self, end_entity: &CertificateDer<'_>) -> bool {
        let Ok(cert) = webpki::EndEntityCert::try_from(end_entity) else {
            return false;
        };
        cert.valid_dns_names().any(|n| self.names.contains(n))
            || cert.valid_uri_names().any(|n| self.names.contains(n))
            || self.ips.iter().any(|ip| {
                cert.verify_is_valid_for_subject_name(&ServerName::IpAddress((*ip).into()))
                    .is_ok()
            })
    }
}

impl ClientCertVerifier for AllowedSans {
    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        if self.allows(end_entity) {
            Ok(verified)
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    crate::tls_signatures::handshake_signatures!(algorithms);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(yaml: &str) -> RawTls {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn refuses_what_rustls_cannot_do_naming_the_key() {
        let base = Path::new("/nonexistent");
        let provider = rustls::crypto::ring::default_provider();
        let err =
            cipher_suites(&provider, &["TLS_RSA_WITH_AES_128_GCM_SHA256".into()]).unwrap_err();
        assert!(err.starts_with("tls_server_config.cipher_suites: TLS_RSA_WITH_AES_128_GCM_SHA256 is not implemented by rustls"), "{err}");
        let err = cipher_suites(&provider, &["TLS_MADE_UP".into()]).unwrap_err();
        assert!(
            err.contains("unknown cipher suite \"TLS_MADE_UP\""),
            "{err}"
        );
        let err = curves(&provider, &["CurveP521".into()]).unwrap_err();
        assert!(
            err.starts_with("tls_server_config.curve_preferences: CurveP521"),
            "{err}"
        );
        let err = versions(&raw("min_version: TLS10\n")).unwrap_err();
        assert!(
            err.starts_with("tls_server_config.min_version: TLS10 is not supported"),
            "{err}"
        );
        let err = versions(&raw("min_version: TLS13\nmax_version: TLS12\n")).unwrap_err();
        assert!(err.contains("min_version is above max_version"), "{err}");
        let err = server_config(base, &raw("cert: x\ncert_file: y\nkey: z\n")).unwrap_err();
        assert_eq!(err, "tls_server_config: set cert or cert_file, not both");
        let err = server_config(base, &raw("key_file: k\n")).unwrap_err();
        assert_eq!(err, "tls_server_config: missing one of cert or cert_file");
    }

    #[test]
    fn suites_and_curves_follow_the_given_order() {
        let provider = rustls::crypto::ring::default_provider();
        let suites = cipher_suites(
            &provider,
            &[
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256".into(),
                "TLS_AES_128_GCM_SHA256".into(),
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".into(),
            ],
        )
        .unwrap();
        let tls12: Vec<u16> = suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS12)
            .map(|s| u16::from(s.suite()))
            .collect();
        assert_eq!(tls12, [0xcca8, 0xc02b]);
        // TLS 1.3 suites are not governed by the list, as in Go.
        assert_eq!(
            suites
                .iter()
                .filter(|s| s.version() == &rustls::version::TLS13)
                .count(),
            provider
                .cipher_suites
                .iter()
                .filter(|s| s.version() == &rustls::version::TLS13)
                .count()
        );
        let groups = curves(&provider, &["CurveP384".into(), "X25519".into()]).unwrap();
        let names: Vec<_> = groups.iter().map(|g| g.name()).collect();
        assert_eq!(
            names,
            [rustls::NamedGroup::secp384r1, rustls::NamedGroup::X25519]
        );
    }

    #[test]
    fn sans_sort_ips_from_names_and_refuse_emails() {
        let algorithms = rustls::crypto::ring::default_provider().signature_verification_algorithms;
        let inner: Arc<dyn ClientCertVerifier> = Arc::new(AnyClientCert {
            mandatory: true,
            algorithms,
        });
        let s = AllowedSans::new(
            inner.clone(),
            &[
                "10.0.0.1".into(),
                "prometheus.example".into(),
                "spiffe://x/y".into(),
            ],
            algorithms,
        )
        .unwrap();
        assert_eq!(s.ips, ["10.0.0.1".parse::<IpAddr>().unwrap()]);
        assert!(s.names.contains("spiffe://x/y") && s.names.contains("prometheus.example"));
        let err = AllowedSans::new(inner, &["ops@example.com".into()], algorithms).unwrap_err();
        assert!(
            err.starts_with("tls_server_config.client_allowed_sans: \"ops@example.com\""),
            "{err}"
        );
    }
}
