//! The listener's address and path, `[probe]` and `[auth_modules]`, and the
//! `tls_*` keys they share with targets.

use super::Validator;
use crate::config::raw::{RawAuthModule, RawMultiTarget};
use crate::config::tls::TlsKeys;
use crate::config::*;

impl Validator {
    pub(super) fn probe(&mut self, raw: RawMultiTarget) -> MultiTargetSettings {
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

    pub(super) fn auth_module(&mut self, key: &str, raw: RawAuthModule) -> AuthModule {
        if key.len() == "auth_modules.".len() {
            self.problem(key, "an auth module needs a name");
        }
        AuthModule {
            username: raw.username,
            password: self.secret(key, "password", raw.password_env, raw.password_file),
            tls: self.tls(
                key,
                TlsKeys {
                    ca_file: raw.tls_ca_file,
                    cert_file: raw.tls_cert_file,
                    key_file: raw.tls_key_file,
                    server_name: raw.tls_server_name,
                    insecure_skip_verify: raw.tls_insecure_skip_verify,
                },
            ),
            keyspace_events: self.keyspace_events(key, raw.keyspace_events),
        }
    }

    /// The `tls_*` keys of a target or auth module, files read and checked.
    pub(super) fn tls(&mut self, key: &str, keys: TlsKeys) -> RedisTls {
        let mut found = Vec::new();
        let tls = super::tls::load(keys, &mut |k, message| {
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
