//! `[probe]` (what `/probe` may poll, for how long, how many) and
//! `[auth_modules]` (the credentials and TLS it polls them with).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::validator::Validator;
use crate::config::raw::{RawAuthModule, RawMultiTarget};
use crate::config::tls::tls_keys;
use crate::config::*;
use crate::glob::Glob;

impl Validator {
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
}
