//! Targets (`[[targets]]`, or the default one): their URL, mode and
//! credentials, and the streams they watch.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::CliOverrides;
use super::connection::parse_url;
use super::validator::Validator;
use crate::config::raw::RawTarget;
use crate::config::tls::tls_keys;
use crate::config::*;
use crate::glob::Glob;

impl Validator {
    /// `[[targets]]`, or the one default target (`--redis.url`, else
    /// localhost) when the file names none and the exporter is not
    /// `/probe`-only; target names must be unique.
    pub(super) fn targets(
        &mut self,
        raw: Vec<RawTarget>,
        probe_only: bool,
        cli: &CliOverrides,
    ) -> Vec<Arc<Target>> {
        let targets = if raw.is_empty() && probe_only {
            Vec::new()
        } else if raw.is_empty() {
            let url = cli
                .redis_url
                .clone()
                .unwrap_or_else(|| DEFAULT_REDIS_URL.to_string());
            // Unnamed: named after its address, so that two exporters of two
            // servers never share a target name.
            let default = RawTarget {
                name: None,
                url: Some(url),
                password_env: std::env::var_os("REDIS_PASSWORD").map(|_| "REDIS_PASSWORD".into()),
                patterns: vec!["*".into()],
                ..RawTarget::default()
            };
            vec![Arc::new(self.target("targets[0]", default))]
        } else {
            if cli.redis_url.is_some() {
                self.problem(
                    "targets",
                    "--redis.url only applies when the file configures no targets",
                );
            }
            raw.into_iter()
                .enumerate()
                .map(|(i, t)| Arc::new(self.target(&format!("targets[{i}]"), t)))
                .collect()
        };
        let mut names = BTreeSet::new();
        for (i, t) in targets.iter().enumerate() {
            if !names.insert(t.name.clone()) {
                self.problem(
                    format!("targets[{i}].name"),
                    format!("duplicate target name {:?}", t.name),
                );
            }
        }
        targets
    }

    /// One target: where it is (its URL), how to reach it (mode,
    /// credentials, TLS) and what it watches.
    fn target(&mut self, key: &str, raw: RawTarget) -> Target {
        let url_text = raw.url.unwrap_or_else(|| DEFAULT_REDIS_URL.to_string());
        let (endpoint, url_user, url_password) = match parse_url(&url_text) {
            Ok(parsed) => parsed,
            Err(message) => {
                // Never echo the URL: it may hold a password.
                self.problem(format!("{key}.url"), message);
                (
                    Endpoint {
                        host: "127.0.0.1".into(),
                        port: 6379,
                        tls: false,
                        db: 0,
                    },
                    None,
                    None,
                )
            }
        };
        let name = match raw.name {
            Some(n) if !n.trim().is_empty() => n,
            Some(_) => {
                self.problem(format!("{key}.name"), "must not be empty");
                String::new()
            }
            None => endpoint.address(),
        };
        let password = self
            .secret(key, "password", raw.password_env, raw.password_file)
            .or(url_password);
        let username = raw.username.or(url_user);
        let mode = self.mode(
            key,
            &endpoint,
            ModeKeys {
                mode: raw.mode,
                cluster_nodes: raw.cluster_nodes,
                sentinels: raw.sentinels,
                master_name: raw.master_name,
                sentinel_username: raw.sentinel_username,
                sentinel_password_env: raw.sentinel_password_env,
                sentinel_password_file: raw.sentinel_password_file,
            },
        );
        let tls = self.tls(key, tls_keys!(raw));
        if tls.is_configured() && !endpoint.tls {
            self.problem(format!("{key}.url"), "the tls_* keys need a rediss:// URL");
        }
        let (streams, patterns) = self.watched_streams(key, raw.streams, raw.patterns);
        let exclude_streams = self.globs(&format!("{key}.exclude_streams"), raw.exclude_streams);
        let groups = NameFilter {
            include: self.globs(&format!("{key}.include_groups"), raw.include_groups),
            exclude: self.globs(&format!("{key}.exclude_groups"), raw.exclude_groups),
        };
        Target {
            name,
            endpoint,
            username,
            password,
            mode,
            tls,
            streams,
            patterns,
            exclude_streams,
            groups,
            max_streams: self.positive(
                &format!("{key}.max_streams"),
                raw.max_streams,
                DEFAULT_MAX_STREAMS as u64,
                10_000_000,
            ) as usize,
            max_groups: self.positive(
                &format!("{key}.max_groups"),
                raw.max_groups,
                DEFAULT_MAX_GROUPS as u64,
                10_000_000,
            ) as usize,
            scan_count: self.positive(
                &format!("{key}.scan_count"),
                raw.scan_count,
                DEFAULT_SCAN_COUNT.into(),
                1_000_000,
            ) as u32,
            keyspace_events: self.keyspace_events(key, raw.keyspace_events),
        }
    }

    /// `<key>.mode` and the keys only one mode takes: a cluster's seeds, a
    /// sentinel deployment's sentinels, master and credentials.
    fn mode(&mut self, key: &str, endpoint: &Endpoint, raw: ModeKeys) -> Mode {
        match raw.mode.as_deref().unwrap_or("standalone") {
            "standalone" => {
                for (field, present) in [
                    ("cluster_nodes", raw.cluster_nodes.is_some()),
                    ("sentinels", raw.sentinels.is_some()),
                    ("master_name", raw.master_name.is_some()),
                ] {
                    if present {
                        self.problem(
                            format!("{key}.{field}"),
                            "only applies to mode \"cluster\" or \"sentinel\"",
                        );
                    }
                }
                Mode::Standalone
            }
            "cluster" => {
                if endpoint.db != 0 {
                    self.problem(format!("{key}.url"), "a Redis Cluster has only database 0");
                }
                let seeds = raw.cluster_nodes.unwrap_or_default();
                for (i, s) in seeds.iter().enumerate() {
                    self.host_port(&format!("{key}.cluster_nodes[{i}]"), s);
                }
                Mode::Cluster { seeds }
            }
            "sentinel" => {
                let mut sentinels = vec![format!("{}:{}", endpoint.host, endpoint.port)];
                for (i, s) in raw.sentinels.unwrap_or_default().into_iter().enumerate() {
                    self.host_port(&format!("{key}.sentinels[{i}]"), &s);
                    sentinels.push(s);
                }
                let master_name = raw.master_name.unwrap_or_else(|| {
                    self.problem(format!("{key}.master_name"), "is required in sentinel mode");
                    String::new()
                });
                Mode::Sentinel {
                    sentinels,
                    master_name,
                    username: raw.sentinel_username,
                    password: self.secret(
                        key,
                        "sentinel_password",
                        raw.sentinel_password_env,
                        raw.sentinel_password_file,
                    ),
                }
            }
            other => {
                self.problem(
                    format!("{key}.mode"),
                    format!("must be \"standalone\", \"cluster\" or \"sentinel\", not {other:?}"),
                );
                Mode::Standalone
            }
        }
    }

    /// The exact stream names and the patterns a target watches, none of
    /// them empty; a target that names neither discovers every stream.
    fn watched_streams(
        &mut self,
        key: &str,
        raw_streams: Vec<String>,
        raw_patterns: Vec<String>,
    ) -> (Vec<Vec<u8>>, Vec<Glob>) {
        let mut streams = Vec::new();
        for (i, s) in raw_streams.into_iter().enumerate() {
            if s.is_empty() {
                self.problem(format!("{key}.streams[{i}]"), "must not be empty");
            } else {
                streams.push(s.into_bytes());
            }
        }
        let mut patterns = Vec::new();
        // A target that names nothing to watch discovers every stream.
        let raw_patterns = if raw_patterns.is_empty() && streams.is_empty() {
            vec!["*".to_string()]
        } else {
            raw_patterns
        };
        for (i, p) in raw_patterns.into_iter().enumerate() {
            if p.is_empty() {
                self.problem(format!("{key}.patterns[{i}]"), "must not be empty");
            } else {
                patterns.push(Glob::new(p));
            }
        }
        (streams, patterns)
    }
}

/// A target's `mode` and the keys that only one mode takes, as written.
struct ModeKeys {
    mode: Option<String>,
    cluster_nodes: Option<Vec<String>>,
    sentinels: Option<Vec<String>>,
    master_name: Option<String>,
    sentinel_username: Option<String>,
    sentinel_password_env: Option<String>,
    sentinel_password_file: Option<String>,
}
