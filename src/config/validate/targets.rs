//! Targets (`[[targets]]`, or the default one): their URL (parsed with the
//! `url` crate), mode, credentials and secrets, and what they watch; and the
//! stream rules (`[stream_defaults]`, `[[streams]]`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::CliOverrides;
use super::validator::Validator;
use crate::config::raw::{RawStreamRule, RawStreamSettings, RawTarget};
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

    /// `[stream_defaults]` and the `[[streams]]` rules, each rule's settings
    /// falling back to the defaults.
    pub(super) fn stream_rules(
        &mut self,
        defaults: RawStreamSettings,
        raw: Vec<RawStreamRule>,
    ) -> StreamRules {
        let base =
            Arc::new(self.stream_settings("stream_defaults", &StreamSettings::default(), defaults));
        let rules = raw
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let key = format!("streams[{i}]");
                let pattern = match r.pattern {
                    Some(p) if !p.is_empty() => Glob::new(p),
                    _ => {
                        self.problem(
                            format!("{key}.match"),
                            "is required (a stream name or glob pattern)",
                        );
                        Glob::new("")
                    }
                };
                let settings = self.stream_settings(
                    &key,
                    &base,
                    RawStreamSettings {
                        max_delay: r.max_delay,
                        read_every: r.read_every,
                        trimming: r.trimming,
                        dead_letter: r.dead_letter,
                        poison_delivery_count: r.poison_delivery_count,
                        consumer_inactive_after: r.consumer_inactive_after,
                        exclude_streams: r.exclude_streams,
                        include_groups: r.include_groups,
                        exclude_groups: r.exclude_groups,
                    },
                );
                (pattern, Arc::new(settings))
            })
            .collect();
        StreamRules {
            defaults: base,
            rules,
        }
    }

    fn stream_settings(
        &mut self,
        key: &str,
        base: &StreamSettings,
        raw: RawStreamSettings,
    ) -> StreamSettings {
        StreamSettings {
            max_delay: self.optional_positive_duration(
                key,
                "max_delay",
                raw.max_delay,
                base.max_delay,
            ),
            read_every: self.optional_positive_duration(
                key,
                "read_every",
                raw.read_every,
                base.read_every,
            ),
            trimming: match raw.trimming.as_deref() {
                None => base.trimming,
                Some("any") => Trimming::Any,
                Some("acked") => Trimming::Acked,
                Some(other) => {
                    self.problem(
                        format!("{key}.trimming"),
                        format!("must be \"any\" or \"acked\", not {other:?}"),
                    );
                    base.trimming
                }
            },
            dead_letter: match raw.dead_letter {
                None => base.dead_letter.clone(),
                Some(name) if name.is_empty() => {
                    self.problem(format!("{key}.dead_letter"), "must not be empty");
                    None
                }
                Some(name) => Some(name.into_bytes()),
            },
            poison_delivery_count: self.positive(
                &format!("{key}.poison_delivery_count"),
                raw.poison_delivery_count,
                base.poison_delivery_count,
                u64::MAX,
            ),
            consumer_inactive_after: self.optional_positive_duration(
                key,
                "consumer_inactive_after",
                raw.consumer_inactive_after,
                base.consumer_inactive_after,
            ),
            exclude_streams: match raw.exclude_streams {
                None => base.exclude_streams.clone(),
                Some(list) => self.globs(&format!("{key}.exclude_streams"), list),
            },
            groups: NameFilter {
                include: match raw.include_groups {
                    None => base.groups.include.clone(),
                    Some(list) => self.globs(&format!("{key}.include_groups"), list),
                },
                exclude: match raw.exclude_groups {
                    None => base.groups.exclude.clone(),
                    Some(list) => self.globs(&format!("{key}.exclude_groups"), list),
                },
            },
        }
    }

    /// An optional duration above zero (`base` when not given).
    fn optional_positive_duration(
        &mut self,
        key: &str,
        name: &str,
        raw: Option<String>,
        base: Option<Duration>,
    ) -> Option<Duration> {
        let Some(text) = raw else {
            return base;
        };
        let k = format!("{key}.{name}");
        match self.duration(&k, &text) {
            Some(d) if d.is_zero() => {
                self.problem(k, "must be greater than zero");
                None
            }
            d => d,
        }
    }

    /// Glob patterns, none of them empty.
    pub(super) fn globs(&mut self, key: &str, list: Vec<String>) -> Vec<Glob> {
        let mut globs = Vec::with_capacity(list.len());
        for (i, p) in list.into_iter().enumerate() {
            if p.is_empty() {
                self.problem(format!("{key}[{i}]"), "must not be empty");
            } else {
                globs.push(Glob::new(p));
            }
        }
        globs
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

    /// `<key>.keyspace_events`: `"auto"` (the default) or `"off"`.
    pub(super) fn keyspace_events(&mut self, key: &str, raw: Option<String>) -> KeyspaceEvents {
        match raw.as_deref() {
            None | Some("auto") => KeyspaceEvents::Auto,
            Some("off") => KeyspaceEvents::Off,
            Some(other) => {
                self.problem(
                    format!("{key}.keyspace_events"),
                    format!("must be \"auto\" or \"off\", not {other:?}"),
                );
                KeyspaceEvents::Auto
            }
        }
    }

    pub(super) fn host_port(&mut self, key: &str, value: &str) {
        let ok = value
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !ok {
            self.problem(key, format!("{value:?} is not host:port"));
        }
    }

    /// Reads a secret from `<prefix>_env` or `<prefix>_file`.
    pub(super) fn secret(
        &mut self,
        key: &str,
        prefix: &str,
        env: Option<String>,
        file: Option<String>,
    ) -> Option<Secret> {
        match (env, file) {
            (Some(_), Some(_)) => {
                self.problem(
                    format!("{key}.{prefix}_env"),
                    format!("set either {prefix}_env or {prefix}_file, not both"),
                );
                None
            }
            (Some(var), None) => match std::env::var(&var) {
                Ok(v) => Some(Secret::new(v)),
                Err(_) => {
                    self.problem(
                        format!("{key}.{prefix}_env"),
                        format!("environment variable {var} is not set"),
                    );
                    None
                }
            },
            (None, Some(path)) => match std::fs::read_to_string(&path) {
                Ok(v) => Some(Secret::new(v.trim_end_matches(['\r', '\n']))),
                Err(e) => {
                    self.problem(
                        format!("{key}.{prefix}_file"),
                        format!("cannot read {path}: {e}"),
                    );
                    None
                }
            },
            (None, None) => None,
        }
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

/// A target URL's endpoint, user and password.
pub(in crate::config) type ParsedUrl = (Endpoint, Option<String>, Option<Secret>);

/// Reads `redis[s]://[user[:password]@]host[:port][/db]` with the `url`
/// crate; a query or fragment is ignored. Messages never include the URL,
/// which may carry a password.
pub(in crate::config) fn parse_url(text: &str) -> Result<ParsedUrl, String> {
    // The scheme as written: `url` would also take `REDIS://`.
    let tls = match text.split_once("://") {
        Some(("redis", _)) => false,
        Some(("rediss", _)) => true,
        _ => return Err("must start with redis:// or rediss://".into()),
    };
    // `url` drops tabs and newlines silently: refuse them (and spaces and
    // other controls) rather than dial a different address than written.
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("has a space or a control character".into());
    }
    let url = url::Url::parse(text).map_err(|e| match e {
        url::ParseError::EmptyHost => "has no host",
        url::ParseError::InvalidPort => "has an invalid port",
        url::ParseError::InvalidIpv6Address => "has an invalid [IPv6] host",
        _ => "is not a valid URL",
    })?;
    let host = match url.host() {
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Domain(name)) if !name.is_empty() => name.to_string(),
        _ => return Err("has no host".into()),
    };
    let path = url.path().strip_prefix('/').unwrap_or(url.path());
    let db = if path.is_empty() {
        0
    } else {
        path.parse::<i64>()
            .ok()
            .filter(|d| *d >= 0)
            .ok_or("has a database path that is not a number")?
    };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let user = (!url.username().is_empty()).then(|| decode(url.username()));
    let password = url.password().map(|p| Secret::new(decode(p)));
    Ok((
        Endpoint {
            host,
            port: url.port().unwrap_or(6379),
            tls,
            db,
        },
        user,
        password,
    ))
}
