//! `[web]`: the listener's address and path, the web config file and the
//! HTTP connections' caps and timeouts.

use std::path::PathBuf;

use super::CliOverrides;
use super::validator::Validator;
use crate::config::raw::RawWeb;
use crate::config::*;

impl Validator {
    /// `[web]`, the flags first: the listener, the web config file and the
    /// HTTP connections' caps and timeouts.
    pub(super) fn web(&mut self, raw: RawWeb, cli: &CliOverrides) -> Web {
        Web {
            listen_address: self.listen_address(cli.listen_address.clone().or(raw.listen_address)),
            telemetry_path: self.telemetry_path(cli.telemetry_path.clone().or(raw.telemetry_path)),
            config_file: cli
                .web_config_file
                .clone()
                .or(raw.config_file.map(PathBuf::from)),
            config_file_check_interval: self.interval(
                "web.config_file_check_interval",
                raw.config_file_check_interval,
                DEFAULT_WEB_CONFIG_CHECK_INTERVAL,
            ),
            enable_lifecycle: cli.enable_lifecycle,
            limits: HttpLimits {
                max_connections: self.positive(
                    "web.max_connections",
                    cli.max_connections.or(raw.max_connections),
                    DEFAULT_MAX_CONNECTIONS,
                    1_000_000,
                ) as usize,
                max_tls_handshakes: self.positive(
                    "web.max_tls_handshakes",
                    raw.max_tls_handshakes,
                    DEFAULT_MAX_TLS_HANDSHAKES,
                    1_000_000,
                ) as usize,
                tls_handshake_timeout: self.interval(
                    "web.tls_handshake_timeout",
                    raw.tls_handshake_timeout,
                    DEFAULT_TLS_HANDSHAKE_TIMEOUT,
                ),
                header_read_timeout: self.interval(
                    "web.header_read_timeout",
                    raw.header_read_timeout,
                    DEFAULT_HEADER_READ_TIMEOUT,
                ),
                idle_timeout: self.interval(
                    "web.idle_timeout",
                    raw.idle_timeout,
                    DEFAULT_IDLE_TIMEOUT,
                ),
                // Below 1 KiB even a browser's request line and Host header
                // may not fit.
                max_header_bytes: self.ranged(
                    "web.max_header_bytes",
                    raw.max_header_bytes,
                    DEFAULT_MAX_HEADER_BYTES,
                    1024,
                    // hyper's read buffer (about 400 KiB) caps it anyway.
                    256 * 1024,
                ) as usize,
                max_body_bytes: self.ranged(
                    "web.max_body_bytes",
                    raw.max_body_bytes,
                    DEFAULT_MAX_BODY_BYTES,
                    0,
                    16 * 1024 * 1024,
                ) as usize,
            },
        }
    }

    pub(super) fn listen_address(&mut self, value: Option<String>) -> String {
        let value = value.unwrap_or_else(|| DEFAULT_LISTEN_ADDRESS.to_string());
        let normalized = if let Some(port) = value.strip_prefix(':') {
            format!("0.0.0.0:{port}")
        } else {
            value.clone()
        };
        match normalized.rsplit_once(':').map(|(_, p)| p.parse::<u16>()) {
            Some(Ok(_)) => normalized,
            _ => {
                self.problem(
                    "web.listen_address",
                    format!("{value:?} is not host:port or :port"),
                );
                normalized
            }
        }
    }

    pub(super) fn telemetry_path(&mut self, value: Option<String>) -> String {
        let value = value.unwrap_or_else(|| DEFAULT_TELEMETRY_PATH.to_string());
        if !value.starts_with('/') || value == "/" {
            self.problem(
                "web.telemetry_path",
                format!("{value:?} must start with / and not be the landing page /"),
            );
        }
        value
    }
}
