//! HTTP settings: where the exporter listens and the bounds on its
//! connections, with their defaults.

use std::path::PathBuf;
use std::time::Duration;

/// Default HTTP listen address (`:9763` binds every interface).
pub const DEFAULT_LISTEN_ADDRESS: &str = ":9763";
/// Default metrics path.
pub const DEFAULT_TELEMETRY_PATH: &str = "/metrics";
/// Default cap on HTTP connections open at once (`web.max_connections`).
/// Scrapers need a handful; the cap keeps descriptors for Redis whatever
/// clients do. At the cap, the connection that has waited longest without a
/// request in progress is closed to make room.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 512;
/// Default cap on TLS handshakes in progress at once.
pub const DEFAULT_MAX_TLS_HANDSHAKES: u64 = 64;
/// Default time a TLS handshake may take, from accept.
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a client has to send a request's headers: from accept for a
/// new connection, from the first byte on a kept-alive one.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a kept-alive connection may wait for its next request, and a
/// response may go without the client reading any of it. Longer than the
/// usual scrape intervals, so scrapers reuse their connection.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default largest request head (request line and headers), in bytes.
pub const DEFAULT_MAX_HEADER_BYTES: u64 = 32 * 1024;
/// Default largest request body, in bytes (no endpoint reads one).
pub const DEFAULT_MAX_BODY_BYTES: u64 = 16 * 1024;
/// Default interval between checks of the web config file and the files it
/// names (certificates are picked up without a restart).
pub const DEFAULT_WEB_CONFIG_CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// HTTP settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Web {
    /// `host:port` to bind; `:port` means every interface.
    pub listen_address: String,
    /// Path of the metrics endpoint, starting with `/`.
    pub telemetry_path: String,
    /// exporter-toolkit web config file (TLS, basic auth).
    pub config_file: Option<PathBuf>,
    /// How often the web config file and the files it names are checked
    /// for changes.
    pub config_file_check_interval: Duration,
    /// `POST /-/reload` is served (`--web.enable-lifecycle`); SIGHUP always
    /// reloads.
    pub enable_lifecycle: bool,
    /// Bounds on HTTP connections.
    pub limits: HttpLimits,
}

/// Bounds on HTTP connections: how many, how long, how large.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// TLS handshakes in progress at once.
    pub max_tls_handshakes: usize,
    /// Time a TLS handshake may take.
    pub tls_handshake_timeout: Duration,
    /// Time to receive a request's headers.
    pub header_read_timeout: Duration,
    /// Time a kept-alive connection may wait for its next request, or a
    /// response may stall.
    pub idle_timeout: Duration,
    /// Largest request head, in bytes.
    pub max_header_bytes: usize,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS as usize,
            max_tls_handshakes: DEFAULT_MAX_TLS_HANDSHAKES as usize,
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES as usize,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES as usize,
        }
    }
}
