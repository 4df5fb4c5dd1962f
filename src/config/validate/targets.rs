//! Targets: their URL (parsed with the `url` crate), mode, credentials and
//! secrets, and what they watch; and the stream rules.

use super::Validator;
use crate::config::raw::{RawStreamSettings, RawTarget};
use crate::config::tls::TlsKeys;
use crate::config::*;

impl Validator {
    pub(super) fn stream_settings(
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
            consumer_inactive_after: self.interval(
                &format!("{key}.consumer_inactive_after"),
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

    pub(super) fn target(&mut self, key: &str, raw: RawTarget) -> Target {
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
        let mode = match raw.mode.as_deref().unwrap_or("standalone") {
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
        };
        let tls = self.tls(
            key,
            TlsKeys {
                ca_file: raw.tls_ca_file,
                cert_file: raw.tls_cert_file,
                key_file: raw.tls_key_file,
                server_name: raw.tls_server_name,
                insecure_skip_verify: raw.tls_insecure_skip_verify,
            },
        );
        if tls.is_configured() && !endpoint.tls {
            self.problem(format!("{key}.url"), "the tls_* keys need a rediss:// URL");
        }
        let mut streams = Vec::new();
        for (i, s) in raw.streams.into_iter().enumerate() {
            if s.is_empty() {
                self.problem(format!("{key}.streams[{i}]"), "must not be empty");
            } else {
                streams.push(s.into_bytes());
            }
        }
        let mut patterns = Vec::new();
        // A target that names nothing to watch discovers every stream.
        let raw_patterns = if raw.patterns.is_empty() && streams.is_empty() {
            vec!["*".to_string()]
        } else {
            raw.patterns
        };
        for (i, p) in raw_patterns.into_iter().enumerate() {
            if p.is_empty() {
                self.problem(format!("{key}.patterns[{i}]"), "must not be empty");
            } else {
                patterns.push(Glob::new(p));
            }
        }
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
            scan_count: self.positive(
                &format!("{key}.scan_count"),
                raw.scan_count,
                DEFAULT_SCAN_COUNT.into(),
                1_000_000,
            ) as u32,
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
