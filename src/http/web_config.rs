//! The Prometheus exporter-toolkit web config file (`--web.config.file`,
//! format: the toolkit's docs/web-configuration.md): TLS with client
//! certificates, basic auth against bcrypt hashes, a request rate limit and
//! extra response headers. Unknown keys are errors, as in the toolkit.
//!
//! [`Live`] keeps the file in force: it checks the file, and the certificate
//! and key files it names, every `web.config_file_check_interval`; a changed
//! set is loaded and used by every new request and TLS handshake (rotated
//! certificates need no restart); a change that does not load keeps the
//! previous settings and is logged once.
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt            # or cert: inline PEM
//!   key_file: server.key             # or key: inline PEM
//!   client_auth_type: RequireAndVerifyClientCert   # optional
//!   client_ca_file: clients.crt      # or client_ca: inline PEM
//!   client_allowed_sans: [prometheus.example]
//!   min_version: TLS12               # TLS12 (default) or TLS13
//!   max_version: TLS13
//!   cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]   # TLS 1.2 only, Go's names
//!   curve_preferences: [X25519, CurveP256]
//! basic_auth_users:
//!   prometheus: $2y$10$...           # bcrypt hash
//! rate_limit:
//!   interval: 100ms
//!   burst: 10
//! http_server_config:
//!   headers:
//!     X-Content-Type-Options: nosniff
//! ```
//!
//! The rooms: `config` (the file as written, the validated settings it
//! becomes, and what tells a change), `live` (the settings in force),
//! `auth` (basic auth and the rate limit) and `tls` (the TLS server
//! configuration).

mod auth;
mod config;
mod live;
mod tls;

pub use auth::{Admission, BasicAuth, RateLimit};
pub use config::{WebConfig, WebConfigError, load};
pub use live::Live;
