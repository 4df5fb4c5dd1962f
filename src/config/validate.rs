//! Turns [`RawConfig`] into [`Config`]: defaults, parsing of durations and
//! URLs, range checks and secret resolution, collecting every problem with
//! its key path instead of stopping at the first.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::raw::{RawAuthModule, RawConfig, RawProbe, RawStreamSettings, RawTarget};
use super::tls::TlsKeys;
use super::*;

/// Values given on the command line; they override the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CliOverrides {
    /// `--web.listen-address`.
    pub listen_address: Option<String>,
    /// `--web.telemetry-path`.
    pub telemetry_path: Option<String>,
    /// `--web.config.file`.
    pub web_config_file: Option<PathBuf>,
    /// `--log.format`.
    pub log_format: Option<String>,
    /// `--log.level`.
    pub log_level: Option<String>,
    /// `--redis.url`: the URL of the default target when the file names none.
    pub redis_url: Option<String>,
    /// `--web.enable-lifecycle`: serve `POST /-/reload`.
    pub enable_lifecycle: bool,
    /// `--web.max-connections`.
    pub max_connections: Option<i64>,
}

/// Parses and validates configuration text. `file` names the source in
/// messages.
///
/// # Errors
/// Every problem found, with its key path.
pub fn from_str(file: &str, text: &str, overrides: &CliOverrides) -> Result<Config, ConfigError> {
    let raw = parse(file, text)?;
    let mut v = Validator {
        problems: Vec::new(),
    };
    let config = v.config(raw, overrides);
    if v.problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError {
            file: file.to_string(),
            problems: v.problems,
        })
    }
}

fn parse(file: &str, text: &str) -> Result<RawConfig, ConfigError> {
    let fail = |key: String, message: String| ConfigError {
        file: file.to_string(),
        problems: vec![Problem { key, message }],
    };
    let de = toml::Deserializer::parse(text)
        .map_err(|e| fail(String::new(), describe_toml_error(text, &e)))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        let key = if key == "." { String::new() } else { key };
        fail(key, describe_toml_error(text, e.inner()))
    })
}

/// The toml error's message with the line it points at, on one line.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("{message} (line {line})")
        }
        None => message,
    }
}

struct Validator {
    problems: Vec<Problem>,
}

impl Validator {
    fn problem(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.into(),
            message: message.into(),
        });
    }

    fn config(&mut self, raw: RawConfig, cli: &CliOverrides) -> Config {
        let web = Web {
            listen_address: self
                .listen_address(cli.listen_address.clone().or(raw.web.listen_address)),
            telemetry_path: self
                .telemetry_path(cli.telemetry_path.clone().or(raw.web.telemetry_path)),
            config_file: cli
                .web_config_file
                .clone()
                .or(raw.web.config_file.map(PathBuf::from)),
            config_file_check_interval: self.interval(
                "web.config_file_check_interval",
                raw.web.config_file_check_interval,
                DEFAULT_WEB_CONFIG_CHECK_INTERVAL,
            ),
            enable_lifecycle: cli.enable_lifecycle,
            limits: HttpLimits {
                max_connections: self.positive(
                    "web.max_connections",
                    cli.max_connections.or(raw.web.max_connections),
                    DEFAULT_MAX_CONNECTIONS,
                    1_000_000,
                ) as usize,
                max_tls_handshakes: self.positive(
                    "web.max_tls_handshakes",
                    raw.web.max_tls_handshakes,
                    DEFAULT_MAX_TLS_HANDSHAKES,
                    1_000_000,
                ) as usize,
                tls_handshake_timeout: self.interval(
                    "web.tls_handshake_timeout",
                    raw.web.tls_handshake_timeout,
                    DEFAULT_TLS_HANDSHAKE_TIMEOUT,
                ),
                header_read_timeout: self.interval(
                    "web.header_read_timeout",
                    raw.web.header_read_timeout,
                    DEFAULT_HEADER_READ_TIMEOUT,
                ),
                idle_timeout: self.interval(
                    "web.idle_timeout",
                    raw.web.idle_timeout,
                    DEFAULT_IDLE_TIMEOUT,
                ),
                // Below 1 KiB even a browser's request line and Host header
                // may not fit.
                max_header_bytes: self.ranged(
                    "web.max_header_bytes",
                    raw.web.max_header_bytes,
                    DEFAULT_MAX_HEADER_BYTES,
                    1024,
                    // hyper's read buffer (about 400 KiB) caps it anyway.
                    256 * 1024,
                ) as usize,
                max_body_bytes: self.ranged(
                    "web.max_body_bytes",
                    raw.web.max_body_bytes,
                    DEFAULT_MAX_BODY_BYTES,
                    0,
                    16 * 1024 * 1024,
                ) as usize,
            },
        };
        let log = Log {
            format: match cli.log_format.clone().or(raw.log.format).as_deref() {
                None | Some("text") => LogFormat::Text,
                Some("json") => LogFormat::Json,
                Some(other) => {
                    self.problem(
                        "log.format",
                        format!("must be \"text\" or \"json\", not {other:?}"),
                    );
                    LogFormat::Text
                }
            },
            level: cli
                .log_level
                .clone()
                .or(raw.log.level)
                .unwrap_or_else(|| "info".into()),
        };
        if let Err(e) = crate::telemetry::check_filter(&log.level) {
            self.problem("log.level", e);
        }

        // A /probe-only exporter (allowed_targets set, no [[targets]]) polls
        // nothing of its own; --redis.url still adds its target.
        let probe_only = !raw.probe.allowed_targets.is_empty() && cli.redis_url.is_none();
        let targets = if raw.targets.is_empty() && probe_only {
            Vec::new()
        } else if raw.targets.is_empty() {
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
            raw.targets
                .into_iter()
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

        let defaults = Schedule::default();
        let s = raw.schedule;
        let schedule = Schedule {
            discovery: self.interval("schedule.discovery", s.discovery, defaults.discovery),
            info: self.interval("schedule.info", s.info, defaults.info),
            stream: self.interval("schedule.stream", s.stream, defaults.stream),
            pending_summary: self.interval(
                "schedule.pending_summary",
                s.pending_summary,
                defaults.pending_summary,
            ),
            consumers: self.interval("schedule.consumers", s.consumers, defaults.consumers),
            pending_scan: self.interval(
                "schedule.pending_scan",
                s.pending_scan,
                defaults.pending_scan,
            ),
        };

        let d = Limits::default();
        let l = raw.limits;
        let limits = Limits {
            commands_per_second: self.positive(
                "limits.commands_per_second",
                l.commands_per_second,
                d.commands_per_second.into(),
                1_000_000,
            ) as u32,
            pending_entries_per_second: self.positive(
                "limits.pending_entries_per_second",
                l.pending_entries_per_second,
                d.pending_entries_per_second.into(),
                100_000_000,
            ) as u32,
            pending_page: self.positive(
                "limits.pending_page",
                l.pending_page,
                d.pending_page.into(),
                100_000,
            ) as u32,
            command_timeout: self.interval(
                "limits.command_timeout",
                l.command_timeout,
                d.command_timeout,
            ),
            pipeline_size: self.positive(
                "limits.pipeline_size",
                l.pipeline_size,
                d.pipeline_size as u64,
                100_000,
            ) as usize,
            lag_exact_count: self.positive(
                "limits.lag_exact_count",
                l.lag_exact_count,
                d.lag_exact_count.into(),
                100_000,
            ) as u32,
            ghost_checks_per_scan: self.ranged(
                "limits.ghost_checks_per_scan",
                l.ghost_checks_per_scan,
                d.ghost_checks_per_scan.into(),
                0,
                10_000_000,
            ) as u32,
            priority: self.priority(l.priority, &d.priority),
            min_share: self.min_share(l.min_share, &d.min_share),
            page_target: self.interval("limits.page_target", l.page_target, d.page_target),
            min_page: self.positive("limits.min_page", l.min_page, d.min_page.into(), 100_000)
                as u32,
        };

        let dm = MetricsSettings::default();
        let m = raw.metrics;
        let metrics = MetricsSettings {
            max_consumers_per_group: self.ranged(
                "metrics.max_consumers_per_group",
                m.max_consumers_per_group,
                dm.max_consumers_per_group as u64,
                0,
                100_000,
            ) as usize,
            max_label_value_bytes: self.ranged(
                "metrics.max_label_value_bytes",
                m.max_label_value_bytes,
                dm.max_label_value_bytes as u64,
                64,
                1 << 20,
            ) as usize,
            pending_idle_buckets: match m.pending_idle_buckets {
                None => dm.pending_idle_buckets,
                Some(list) => {
                    let secs: Vec<f64> = list
                        .iter()
                        .enumerate()
                        .filter_map(|(i, b)| {
                            self.duration(&format!("metrics.pending_idle_buckets[{i}]"), b)
                        })
                        .map(|d| d.as_secs_f64())
                        .collect();
                    self.ascending("metrics.pending_idle_buckets", &secs);
                    secs
                }
            },
            delivery_count_buckets: match m.delivery_count_buckets {
                None => dm.delivery_count_buckets,
                Some(list) => {
                    let counts: Vec<u64> = list
                        .iter()
                        .enumerate()
                        .map(|(i, &c)| {
                            self.positive(
                                &format!("metrics.delivery_count_buckets[{i}]"),
                                Some(c),
                                1,
                                u64::MAX,
                            )
                        })
                        .collect();
                    let as_f: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
                    self.ascending("metrics.delivery_count_buckets", &as_f);
                    counts
                }
            },
        };

        let status_window = self.positive(
            "status.window",
            raw.status.window,
            DEFAULT_STATUS_WINDOW as u64,
            1000,
        ) as usize;
        if status_window < 2 {
            self.problem("status.window", "must be at least 2 polls");
        }
        let data_loss_hold = self.interval(
            "status.data_loss_hold",
            raw.status.data_loss_hold,
            DEFAULT_DATA_LOSS_HOLD,
        );

        let base = Arc::new(self.stream_settings(
            "stream_defaults",
            &StreamSettings::default(),
            raw.stream_defaults,
        ));
        let rules = raw
            .streams
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

        let probe = self.probe(raw.probe);
        let auth_modules = raw
            .auth_modules
            .into_iter()
            .map(|(name, m)| {
                let module = self.auth_module(&format!("auth_modules.{name}"), m);
                (name, Arc::new(module))
            })
            .collect();

        Config {
            source: None,
            web,
            log,
            targets,
            schedule,
            limits,
            metrics,
            status_window,
            data_loss_hold,
            streams: StreamRules {
                defaults: base,
                rules,
            },
            probe,
            auth_modules,
        }
    }

    fn probe(&mut self, raw: RawProbe) -> ProbeSettings {
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
        let d = ProbeSettings::default();
        ProbeSettings {
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

    fn auth_module(&mut self, key: &str, raw: RawAuthModule) -> AuthModule {
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
        }
    }

    /// The `tls_*` keys of a target or auth module, files read and checked.
    fn tls(&mut self, key: &str, keys: TlsKeys) -> RedisTls {
        let mut found = Vec::new();
        let tls = super::tls::load(keys, &mut |k, message| {
            found.push((format!("{key}.{k}"), message));
        });
        for (k, message) in found {
            self.problem(k, message);
        }
        tls
    }

    fn listen_address(&mut self, value: Option<String>) -> String {
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

    fn telemetry_path(&mut self, value: Option<String>) -> String {
        let value = value.unwrap_or_else(|| DEFAULT_TELEMETRY_PATH.to_string());
        if !value.starts_with('/') || value == "/" {
            self.problem(
                "web.telemetry_path",
                format!("{value:?} must start with / and not be the landing page /"),
            );
        }
        value
    }

    fn duration(&mut self, key: &str, text: &str) -> Option<Duration> {
        match humantime::parse_duration(text) {
            Ok(d) => Some(d),
            Err(e) => {
                self.problem(
                    key,
                    format!("{text:?} is not a duration such as \"15s\" or \"5m\": {e}"),
                );
                None
            }
        }
    }

    /// A duration that must be positive.
    fn interval(&mut self, key: &str, value: Option<String>, default: Duration) -> Duration {
        match value {
            None => default,
            Some(text) => match self.duration(key, &text) {
                Some(d) if d.is_zero() => {
                    self.problem(key, "must be greater than zero");
                    default
                }
                Some(d) => d,
                None => default,
            },
        }
    }

    /// `limits.priority`: every probe once, highest first.
    fn priority(&mut self, value: Option<Vec<String>>, default: &[String]) -> Vec<String> {
        let Some(list) = value else {
            return default.to_vec();
        };
        let mut seen = BTreeSet::new();
        for (i, name) in list.iter().enumerate() {
            if !PROBES.contains(&name.as_str()) {
                self.problem(
                    format!("limits.priority[{i}]"),
                    format!("{name:?} is not a probe ({})", PROBES.join(", ")),
                );
            } else if !seen.insert(name.clone()) {
                self.problem(
                    format!("limits.priority[{i}]"),
                    format!("{name:?} is listed twice"),
                );
            }
        }
        let missing: Vec<&str> = PROBES
            .iter()
            .copied()
            .filter(|p| !seen.contains(*p))
            .collect();
        if !missing.is_empty() {
            self.problem(
                "limits.priority",
                format!("must list every probe; missing {}", missing.join(", ")),
            );
            return default.to_vec();
        }
        list
    }

    /// `limits.min_share`: shares of probes, each at most 0.5, all at most 0.8
    /// (so that the first probe keeps at least a fifth).
    fn min_share(
        &mut self,
        value: Option<BTreeMap<String, f64>>,
        default: &BTreeMap<String, f64>,
    ) -> BTreeMap<String, f64> {
        let Some(map) = value else {
            return default.clone();
        };
        for (name, share) in &map {
            let key = format!("limits.min_share.{name}");
            if !PROBES.contains(&name.as_str()) {
                self.problem(
                    key,
                    format!("{name:?} is not a probe ({})", PROBES.join(", ")),
                );
            } else if !(0.0..=0.5).contains(share) {
                self.problem(key, format!("must be between 0 and 0.5, not {share}"));
            }
        }
        let total: f64 = map.values().sum();
        if total > 0.8 {
            self.problem(
                "limits.min_share",
                format!("the shares add up to {total}; at most 0.8"),
            );
        }
        map
    }

    /// An integer in `min..=max`, or the default when absent.
    fn ranged(&mut self, key: &str, value: Option<i64>, default: u64, min: u64, max: u64) -> u64 {
        match value {
            None => default,
            Some(v) if v >= 0 && (v as u64) >= min && (v as u64) <= max => v as u64,
            Some(v) => {
                self.problem(key, format!("must be between {min} and {max}, not {v}"));
                default
            }
        }
    }

    fn positive(&mut self, key: &str, value: Option<i64>, default: u64, max: u64) -> u64 {
        self.ranged(key, value, default, 1, max)
    }

    /// Bucket bounds: strictly ascending; an empty list turns the family off.
    fn ascending(&mut self, key: &str, values: &[f64]) {
        if values.windows(2).any(|w| w[0] >= w[1]) {
            self.problem(key, "buckets must be strictly ascending");
        }
    }

    fn stream_settings(
        &mut self,
        key: &str,
        base: &StreamSettings,
        raw: RawStreamSettings,
    ) -> StreamSettings {
        StreamSettings {
            max_delay: match raw.max_delay {
                None => base.max_delay,
                Some(text) => {
                    let k = format!("{key}.max_delay");
                    match self.duration(&k, &text) {
                        Some(d) if d.is_zero() => {
                            self.problem(k, "must be greater than zero");
                            None
                        }
                        d => d,
                    }
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

    /// Glob patterns, none of them empty.
    fn globs(&mut self, key: &str, list: Vec<String>) -> Vec<Glob> {
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

    fn host_port(&mut self, key: &str, value: &str) {
        let ok = value
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !ok {
            self.problem(key, format!("{value:?} is not host:port"));
        }
    }

    /// Reads a secret from `<prefix>_env` or `<prefix>_file`.
    fn secret(
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

type ParsedUrl = (Endpoint, Option<String>, Option<Secret>);

/// Splits `redis[s]://[user[:password]@]host[:port][/db]`. Messages never
/// include the URL, which may carry a password.
pub(super) fn parse_url(url: &str) -> Result<ParsedUrl, String> {
    let (tls, rest) = if let Some(r) = url.strip_prefix("redis://") {
        (false, r)
    } else if let Some(r) = url.strip_prefix("rediss://") {
        (true, r)
    } else {
        return Err("must start with redis:// or rediss://".into());
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = match rest.split_once('/') {
        Some((a, p)) => (a, p),
        None => (rest, ""),
    };
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (user, password) = match userinfo {
        None => (None, None),
        Some(u) => match u.split_once(':') {
            Some((user, pass)) => (
                (!user.is_empty()).then(|| percent_decode(user)),
                Some(Secret::new(percent_decode(pass))),
            ),
            None => ((!u.is_empty()).then(|| percent_decode(u)), None),
        },
    };
    let (host, port) = if let Some(stripped) = hostport.strip_prefix('[') {
        // [ipv6]:port
        let (h, after) = stripped
            .split_once(']')
            .ok_or("has an unterminated [ in the host")?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse::<u16>().map_err(|_| "has an invalid port")?,
            None => 6379,
        };
        (h.to_string(), port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse::<u16>().map_err(|_| "has an invalid port")?,
            ),
            None => (hostport.to_string(), 6379),
        }
    };
    if host.is_empty() {
        return Err("has no host".into());
    }
    let db = if path.is_empty() {
        0
    } else {
        path.parse::<i64>()
            .ok()
            .filter(|d| *d >= 0)
            .ok_or("has a database path that is not a number")?
    };
    Ok((
        Endpoint {
            host,
            port,
            tls,
            db,
        },
        user,
        password,
    ))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, ConfigError> {
        from_str("test.toml", text, &CliOverrides::default())
    }

    fn problems(text: &str) -> Vec<String> {
        load(text)
            .unwrap_err()
            .to_string()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn empty_file_watches_local_redis_and_every_stream() {
        let c = load("").unwrap();
        assert_eq!(c.targets.len(), 1);
        let t = &c.targets[0];
        assert_eq!(t.endpoint.to_string(), "redis://127.0.0.1:6379/0");
        assert_eq!(t.patterns, vec![Glob::new("*")]);
        assert_eq!(c.web.listen_address, "0.0.0.0:9763");
        assert_eq!(c.schedule, Schedule::default());
        assert_eq!(c.limits, Limits::default());
    }

    #[test]
    fn unknown_keys_name_the_path() {
        let p = problems("[schedule]\nstrem = \"5s\"\n");
        assert_eq!(p.len(), 1);
        assert!(
            p[0].starts_with("test.toml: schedule.strem: unknown field `strem`, expected one of"),
            "{}",
            p[0]
        );
        assert!(p[0].contains("line 2"), "{}", p[0]);
    }

    #[test]
    fn bad_values_are_all_reported() {
        let p = problems(
            "[schedule]\nstream = \"soon\"\n[limits]\ncommands_per_second = 0\n[[targets]]\nurl = \"http://x\"\n",
        );
        assert!(
            p.iter()
                .any(|l| l.starts_with("test.toml: schedule.stream: \"soon\" is not a duration")),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|l| l.starts_with("test.toml: limits.commands_per_second: must be between 1")),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|l| l == "test.toml: targets[0].url: must start with redis:// or rediss://"),
            "{p:?}"
        );
    }

    #[test]
    fn url_parts_and_credentials() {
        let (e, u, p) = parse_url("rediss://exporter:s%40cret@redis.example:6380/2").unwrap();
        assert_eq!(
            e,
            Endpoint {
                host: "redis.example".into(),
                port: 6380,
                tls: true,
                db: 2
            }
        );
        assert_eq!(u.as_deref(), Some("exporter"));
        assert_eq!(p.unwrap().expose(), "s@cret");
        let (e, _, _) = parse_url("redis://[::1]:7000").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 7000));
        let err = parse_url("redis://user:pw@host:notaport").unwrap_err();
        assert!(!err.contains("pw"));
    }

    #[test]
    fn missing_password_env_is_an_error() {
        let p =
            problems("[[targets]]\nname = \"a\"\npassword_env = \"RSE_TEST_SURELY_UNSET_VAR\"\n");
        assert_eq!(
            p,
            vec![
                "test.toml: targets[0].password_env: environment variable RSE_TEST_SURELY_UNSET_VAR is not set"
            ]
        );
    }

    #[test]
    fn stream_rules_first_match_wins_over_defaults() {
        let c = load(
            "[stream_defaults]\npoison_delivery_count = 7\n\
             [[streams]]\nmatch = \"orders:*\"\nmax_delay = \"5m\"\ndead_letter = \"orders:dead\"\n\
             [[streams]]\nmatch = \"*\"\nconsumer_inactive_after = \"1m\"\n",
        )
        .unwrap();
        let orders = c.streams.for_stream(b"orders:eu");
        assert_eq!(orders.max_delay, Some(Duration::from_secs(300)));
        assert_eq!(orders.poison_delivery_count, 7);
        assert_eq!(
            orders.dead_letter_for(b"orders:eu"),
            Some(b"orders:dead".to_vec())
        );
        let other = c.streams.for_stream(b"audit");
        assert_eq!(other.max_delay, None);
        assert_eq!(other.consumer_inactive_after, Duration::from_secs(60));
    }

    #[test]
    fn include_and_exclude_filters() {
        let c = load(
            "[[targets]]\nname = \"a\"\nexclude_streams = [\"tmp:*\"]\nexclude_groups = [\"debug-*\"]\n\
             [stream_defaults]\nexclude_streams = [\"*:dlq\"]\n\
             [[streams]]\nmatch = \"orders:*\"\ninclude_groups = [\"billing\", \"ship*\"]\nexclude_streams = [\"orders:test:*\"]\n\
             [[streams]]\nmatch = \"audit\"\nmax_delay = \"1m\"\n",
        )
        .unwrap();
        let t = &c.targets[0];
        let watched = |s: &str| t.watches_stream(&c.streams.for_stream(s.as_bytes()), s.as_bytes());
        assert!(watched("orders:eu"));
        assert!(!watched("orders:test:1"), "the rule's exclusion");
        assert!(!watched("tmp:1"), "the target's exclusion");
        assert!(!watched("jobs:dlq"), "the defaults' exclusion");
        // A rule that sets exclude_streams replaces the default's list.
        assert!(watched("orders:dlq"));
        assert!(!watched("audit:dlq") && watched("audit"));
        let group =
            |s: &str, g: &str| t.watches_group(&c.streams.for_stream(s.as_bytes()), g.as_bytes());
        assert!(group("orders:eu", "billing") && group("orders:eu", "shipping"));
        assert!(!group("orders:eu", "analytics"), "not included by the rule");
        assert!(!group("audit", "debug-1"), "excluded by the target");
        assert!(group("audit", "analytics"));
        // Empty bucket lists turn the families off; 0 consumers is allowed.
        let c = load(
            "[metrics]\npending_idle_buckets = []\ndelivery_count_buckets = []\nmax_consumers_per_group = 0\n",
        )
        .unwrap();
        assert!(c.metrics.pending_idle_buckets.is_empty());
        assert!(c.metrics.delivery_count_buckets.is_empty());
        assert_eq!(c.metrics.max_consumers_per_group, 0);
        let p = problems(
            "[[targets]]\nname = \"a\"\nexclude_groups = [\"\"]\n[[streams]]\nmatch = \"x\"\ninclude_groups = [\"\"]\n",
        );
        assert_eq!(
            p,
            vec![
                "test.toml: targets[0].exclude_groups[0]: must not be empty",
                "test.toml: streams[0].include_groups[0]: must not be empty"
            ]
        );
    }

    #[test]
    fn duplicate_target_names_rejected() {
        let p = problems("[[targets]]\nname = \"a\"\n[[targets]]\nname = \"a\"\n");
        assert_eq!(
            p,
            vec!["test.toml: targets[1].name: duplicate target name \"a\""]
        );
    }

    /// Without a name a target is named after its address (SPEC §12), never
    /// a constant every exporter would share.
    #[test]
    fn unnamed_targets_are_named_after_their_address() {
        let names = |text: &str| -> Vec<String> {
            from_str("test.toml", text, &CliOverrides::default())
                .unwrap()
                .targets
                .iter()
                .map(|t| t.name.clone())
                .collect()
        };
        assert_eq!(names(""), ["127.0.0.1:6379"]);
        assert_eq!(
            names("[[targets]]\nurl = \"redis://10.0.0.5:6380/3\"\n"),
            ["10.0.0.5:6380/3"]
        );
        assert_eq!(
            names("[[targets]]\nurl = \"redis://[::1]:7000\"\n"),
            ["[::1]:7000"]
        );
        let cli = CliOverrides {
            redis_url: Some("redis://cache.internal:6379/0".into()),
            ..CliOverrides::default()
        };
        let c = from_str("test.toml", "", &cli).unwrap();
        assert_eq!(c.targets[0].name, "cache.internal:6379");
    }

    #[test]
    fn cli_overrides_win() {
        let cli = CliOverrides {
            listen_address: Some("127.0.0.1:9999".into()),
            redis_url: Some("redis://127.0.0.1:7777/3".into()),
            ..CliOverrides::default()
        };
        let c = from_str("f", "[web]\nlisten_address = \":1\"\n", &cli).unwrap();
        assert_eq!(c.web.listen_address, "127.0.0.1:9999");
        assert_eq!(c.targets[0].endpoint.port, 7777);
        assert_eq!(c.targets[0].endpoint.db, 3);
    }
}
