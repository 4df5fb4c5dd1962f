//! `[web]` (the listener's address and path, the HTTP connections' caps and
//! timeouts), `[probe]` and `[auth_modules]`, and the `tls_*` keys they share
//! with targets.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::CliOverrides;
use super::validator::Validator;
use crate::config::raw::{RawAuthModule, RawMultiTarget, RawWeb};
use crate::config::tls::{TlsKeys, tls_keys};
use crate::config::*;
use crate::glob::Glob;

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

    pub(super) fn multi_target(&mut self, raw: RawMultiTarget) -> MultiTargetSettings {
        let mut allowed_targets = Vec::new();
        for (i, g) in raw.allowed_targets.into_iter().enumerate() {
            let key = format!("probe.allowed_targets[{i}]");
            if !(g.starts_with("redis") || g.starts_with('*') || g.starts_with('[')) {
                self.problem(
                    key,
                    format!(
                        "{g:?} never matches: globs are matched against URLs such as \"redis://10.0.0.1:6379\""
                    ),
                );
            } else if g.contains('@') {
                self.problem(
                    key,
                    "must not hold credentials: they come from [auth_modules.<name>]",
                );
            } else {
                allowed_targets.push(Glob::new(g));
            }
        }
        let d = MultiTargetSettings::default();
        MultiTargetSettings {
            allowed_targets,
            target_ttl: self.interval("probe.target_ttl", raw.target_ttl, d.target_ttl),
            max_targets: self.positive(
                "probe.max_targets",
                raw.max_targets,
                d.max_targets as u64,
                100_000,
            ) as usize,
            first_collection_wait: match raw.first_collection_wait {
                None => d.first_collection_wait,
                Some(text) => self
                    .duration("probe.first_collection_wait", &text)
                    .unwrap_or(d.first_collection_wait),
            },
        }
    }

    /// `[auth_modules.<name>]`, each checked under its own key.
    pub(super) fn auth_modules(&mut self, raw: BTreeMap<String, RawAuthModule>) -> AuthModules {
        raw.into_iter()
            .map(|(name, m)| {
                let module = self.auth_module(&format!("auth_modules.{name}"), m);
                (name, Arc::new(module))
            })
            .collect()
    }

    fn auth_module(&mut self, key: &str, raw: RawAuthModule) -> AuthModule {
        if key.len() == "auth_modules.".len() {
            self.problem(key, "an auth module needs a name");
        }
        AuthModule {
            username: raw.username,
            password: self.secret(key, "password", raw.password_env, raw.password_file),
            tls: self.tls(key, tls_keys!(raw)),
            keyspace_events: self.keyspace_events(key, raw.keyspace_events),
        }
    }

    /// The `tls_*` keys of a target or auth module, files read and checked.
    pub(super) fn tls(&mut self, key: &str, keys: TlsKeys) -> RedisTls {
        let mut found = Vec::new();
        let tls = crate::config::tls::load(keys, &mut |k, message| {
            found.push((format!("{key}.{k}"), message));
        });
        for (k, message) in found {
            self.problem(k, message);
        }
        tls
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
