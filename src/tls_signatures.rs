//! The part every rustls certificate verifier repeats: checking the
//! handshake signatures with a set of algorithms. The Redis client's
//! verifier (`tls_insecure_skip_verify`) and the web server's client
//! certificate verifiers decide whom to trust differently, but prove the
//! peer holds its certificate's key the same way.

/// Implements `verify_tls12_signature`, `verify_tls13_signature` and
/// `supported_verify_schemes` of a rustls verifier trait with the
/// `WebPkiSupportedAlgorithms` found at `self.<fields>`.
macro_rules! handshake_signatures {
    ($($field:ident).+) => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.$($field).+)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.$($field).+)
        }

        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.$($field).+.supported_schemes()
        }
    };
}

pub(crate) use handshake_signatures;
