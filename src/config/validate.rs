//! The second stage of loading: [`validate`] turns the file as written
//! ([`RawConfig`]) and the flags ([`CliOverrides`]) into a [`Config`], every
//! absent key given its default and every value checked: parsed, in range,
//! its files and secrets read. The [`Validator`] walks the file section by
//! section in the file's order, so that problems are listed in the order a
//! reader meets their keys; what every section reads alike, and the problems
//! found, are [`ConfigProblems`]'s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::multitarget::{AuthModule, AuthModules, MultiTargetSettings};
use super::polling::{Limits, Schedule, probe_names};
use super::problems::{ConfigProblems, Problem};
use super::raw::{
    RawAuthModule, RawConfig, RawConsumerRename, RawLimits, RawLog, RawMetrics, RawMultiTarget,
    RawSchedule, RawStatus, RawStreamRule, RawStreamSettings, RawTarget, RawWeb,
};
use super::streams::{ConsumerRename, NameFilter, Series, StreamRules, StreamSettings, Trimming};
use super::target::{
    DEFAULT_MAX_GROUPS, DEFAULT_MAX_STREAMS, DEFAULT_REDIS_URL, DEFAULT_SCAN_COUNT, Endpoint, Mode,
    Target, parse_url,
};
use super::tls::tls_keys;
use super::web::{
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_LISTEN_ADDRESS,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_TLS_HANDSHAKES, DEFAULT_TELEMETRY_PATH, DEFAULT_TLS_HANDSHAKE_TIMEOUT,
    DEFAULT_WEB_CONFIG_CHECK_INTERVAL, HttpLimits, Web,
};
use super::whole::{Config, DEFAULT_DATA_LOSS_HOLD, DEFAULT_STATUS_WINDOW, Log, MetricsSettings};
use crate::glob::Glob;
use crate::telemetry::LogFormat;

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
    /// `--state.file`: where what the exporter learned is kept across its
    /// restarts (`status.state_file`).
    pub state_file: Option<PathBuf>,
}

/// Checks `raw` with the flags applied first: the configuration, or every
/// problem found, in the order a reader meets their keys.
pub(super) fn validate(raw: RawConfig, cli: &CliOverrides) -> Result<Config, Vec<Problem>> {
    let mut v = Validator::default();
    let config = v.config(raw, cli);
    v.problems.finish(config)
}

/// The walk of the whole file, one method per section (and per part of a
/// section), in the file's order.
#[derive(Debug, Default)]
struct Validator {
    problems: ConfigProblems,
}

impl Validator {
    /// The whole file, section by section in the file's order.
    fn config(&mut self, raw: RawConfig, cli: &CliOverrides) -> Config {
        let web = self.web(raw.web, cli);
        let log = self.log(raw.log, cli);
        // A /probe-only exporter (allowed_targets set, no [[targets]]) polls
        // nothing of its own; --redis.url still adds its target.
        let probe_only = !raw.probe.allowed_targets.is_empty() && cli.redis_url.is_none();
        let targets = self.targets(raw.targets, probe_only, cli);
        let schedule = self.schedule(raw.schedule);
        let limits = self.limits(raw.limits);
        let metrics = self.metrics(raw.metrics);
        let (status_window, data_loss_hold, state_file) = self.status(raw.status, cli);
        let streams = self.stream_rules(raw.stream_defaults, raw.streams);
        let multi_target = self.multi_target(raw.probe);
        let auth_modules = self.auth_modules(raw.auth_modules);
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
            state_file,
            streams,
            multi_target,
            auth_modules,
        }
    }

    /// `[web]`, the flags first: the listener, the web config file and the
    /// HTTP connections' caps and timeouts.
    fn web(&mut self, raw: RawWeb, cli: &CliOverrides) -> Web {
        Web {
            listen_address: self.listen_address(cli.listen_address.clone().or(raw.listen_address)),
            telemetry_path: self.telemetry_path(cli.telemetry_path.clone().or(raw.telemetry_path)),
            config_file: cli
                .web_config_file
                .clone()
                .or(raw.config_file.map(PathBuf::from)),
            config_file_check_interval: self.problems.interval(
                "web.config_file_check_interval",
                raw.config_file_check_interval,
                DEFAULT_WEB_CONFIG_CHECK_INTERVAL,
            ),
            enable_lifecycle: cli.enable_lifecycle,
            limits: HttpLimits {
                max_connections: self.problems.positive(
                    "web.max_connections",
                    cli.max_connections.or(raw.max_connections),
                    DEFAULT_MAX_CONNECTIONS,
                    1_000_000,
                ) as usize,
                max_tls_handshakes: self.problems.positive(
                    "web.max_tls_handshakes",
                    raw.max_tls_handshakes,
                    DEFAULT_MAX_TLS_HANDSHAKES,
                    1_000_000,
                ) as usize,
                tls_handshake_timeout: self.problems.interval(
                    "web.tls_handshake_timeout",
                    raw.tls_handshake_timeout,
                    DEFAULT_TLS_HANDSHAKE_TIMEOUT,
                ),
                header_read_timeout: self.problems.interval(
                    "web.header_read_timeout",
                    raw.header_read_timeout,
                    DEFAULT_HEADER_READ_TIMEOUT,
                ),
                idle_timeout: self.problems.interval(
                    "web.idle_timeout",
                    raw.idle_timeout,
                    DEFAULT_IDLE_TIMEOUT,
                ),
                // Below 1 KiB even a browser's request line and Host header
                // may not fit.
                max_header_bytes: self.problems.ranged(
                    "web.max_header_bytes",
                    raw.max_header_bytes,
                    DEFAULT_MAX_HEADER_BYTES,
                    1024,
                    // hyper's read buffer (about 400 KiB) caps it anyway.
                    256 * 1024,
                ) as usize,
                max_body_bytes: self.problems.ranged(
                    "web.max_body_bytes",
                    raw.max_body_bytes,
                    DEFAULT_MAX_BODY_BYTES,
                    0,
                    16 * 1024 * 1024,
                ) as usize,
            },
        }
    }

    /// `web.listen_address`: `host:port`, or `:port` for every interface.
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
                self.problems.add(
                    "web.listen_address",
                    format!("{value:?} is not host:port or :port"),
                );
                normalized
            }
        }
    }

    /// `web.telemetry_path`: a path of its own, not the landing page's.
    fn telemetry_path(&mut self, value: Option<String>) -> String {
        let value = value.unwrap_or_else(|| DEFAULT_TELEMETRY_PATH.to_string());
        if !value.starts_with('/') || value == "/" {
            self.problems.add(
                "web.telemetry_path",
                format!("{value:?} must start with / and not be the landing page /"),
            );
        }
        value
    }

    /// `[log]`, the flags first: its format and its level filter, which
    /// must parse now rather than when logging starts.
    fn log(&mut self, raw: RawLog, cli: &CliOverrides) -> Log {
        let log = Log {
            format: match cli.log_format.clone().or(raw.format).as_deref() {
                None | Some("text") => LogFormat::Text,
                Some("json") => LogFormat::Json,
                Some(other) => {
                    self.problems.add(
                        "log.format",
                        format!("must be \"text\" or \"json\", not {other:?}"),
                    );
                    LogFormat::Text
                }
            },
            level: cli
                .log_level
                .clone()
                .or(raw.level)
                .unwrap_or_else(|| "info".into()),
        };
        if let Err(e) = crate::telemetry::check_filter(&log.level) {
            self.problems.add("log.level", e);
        }
        log
    }

    /// `[[targets]]`, or the one default target (`--redis.url`, else
    /// localhost) when the file names none and the exporter is not
    /// `/probe`-only; target names must be unique.
    fn targets(
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
                self.problems.add(
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
                self.problems.add(
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
                self.problems.add(format!("{key}.url"), message);
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
                self.problems
                    .add(format!("{key}.name"), "must not be empty");
                String::new()
            }
            None => endpoint.address(),
        };
        let password = self
            .problems
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
        let tls = self.problems.tls(key, tls_keys!(raw));
        if tls.is_configured() && !endpoint.tls {
            self.problems
                .add(format!("{key}.url"), "the tls_* keys need a rediss:// URL");
        }
        let (streams, patterns) = self.watched_streams(key, raw.streams, raw.patterns);
        let exclude_streams = self
            .problems
            .globs(&format!("{key}.exclude_streams"), raw.exclude_streams);
        let groups = NameFilter {
            include: self
                .problems
                .globs(&format!("{key}.include_groups"), raw.include_groups),
            exclude: self
                .problems
                .globs(&format!("{key}.exclude_groups"), raw.exclude_groups),
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
            max_streams: self.problems.positive(
                &format!("{key}.max_streams"),
                raw.max_streams,
                DEFAULT_MAX_STREAMS as u64,
                10_000_000,
            ) as usize,
            max_groups: self.problems.positive(
                &format!("{key}.max_groups"),
                raw.max_groups,
                DEFAULT_MAX_GROUPS as u64,
                10_000_000,
            ) as usize,
            scan_count: self.problems.positive(
                &format!("{key}.scan_count"),
                raw.scan_count,
                DEFAULT_SCAN_COUNT.into(),
                1_000_000,
            ) as u32,
            keyspace_events: self.problems.keyspace_events(key, raw.keyspace_events),
            client_tracking: self.problems.client_tracking(key, raw.client_tracking),
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
                        self.problems.add(
                            format!("{key}.{field}"),
                            "only applies to mode \"cluster\" or \"sentinel\"",
                        );
                    }
                }
                Mode::Standalone
            }
            "cluster" => {
                if endpoint.db != 0 {
                    self.problems
                        .add(format!("{key}.url"), "a Redis Cluster has only database 0");
                }
                let seeds = raw.cluster_nodes.unwrap_or_default();
                for (i, s) in seeds.iter().enumerate() {
                    self.problems
                        .host_port(&format!("{key}.cluster_nodes[{i}]"), s);
                }
                Mode::Cluster { seeds }
            }
            "sentinel" => {
                let mut sentinels = vec![format!("{}:{}", endpoint.host, endpoint.port)];
                for (i, s) in raw.sentinels.unwrap_or_default().into_iter().enumerate() {
                    self.problems
                        .host_port(&format!("{key}.sentinels[{i}]"), &s);
                    sentinels.push(s);
                }
                let master_name = raw.master_name.unwrap_or_else(|| {
                    self.problems
                        .add(format!("{key}.master_name"), "is required in sentinel mode");
                    String::new()
                });
                Mode::Sentinel {
                    sentinels,
                    master_name,
                    username: raw.sentinel_username,
                    password: self.problems.secret(
                        key,
                        "sentinel_password",
                        raw.sentinel_password_env,
                        raw.sentinel_password_file,
                    ),
                }
            }
            other => {
                self.problems.add(
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
                self.problems
                    .add(format!("{key}.streams[{i}]"), "must not be empty");
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
                self.problems
                    .add(format!("{key}.patterns[{i}]"), "must not be empty");
            } else {
                patterns.push(Glob::new(p));
            }
        }
        (streams, patterns)
    }

    /// `[schedule]`: every probe's interval, each positive.
    fn schedule(&mut self, s: RawSchedule) -> Schedule {
        let defaults = Schedule::default();
        Schedule {
            discovery: self.problems.interval(
                "schedule.discovery",
                s.discovery,
                defaults.discovery,
            ),
            info: self
                .problems
                .interval("schedule.info", s.info, defaults.info),
            stream: self
                .problems
                .interval("schedule.stream", s.stream, defaults.stream),
            pending_summary: self.problems.interval(
                "schedule.pending_summary",
                s.pending_summary,
                defaults.pending_summary,
            ),
            consumers: self.problems.interval(
                "schedule.consumers",
                s.consumers,
                defaults.consumers,
            ),
            pending_scan: self.problems.interval(
                "schedule.pending_scan",
                s.pending_scan,
                defaults.pending_scan,
            ),
        }
    }

    /// `[limits]`: the command budget, page sizes and the probes' shares
    /// of the budget, each within the range the client can honour.
    fn limits(&mut self, l: RawLimits) -> Limits {
        let d = Limits::default();
        Limits {
            commands_per_second: self.problems.positive(
                "limits.commands_per_second",
                l.commands_per_second,
                d.commands_per_second.into(),
                1_000_000,
            ) as u32,
            pending_entries_per_second: self.problems.positive(
                "limits.pending_entries_per_second",
                l.pending_entries_per_second,
                d.pending_entries_per_second.into(),
                100_000_000,
            ) as u32,
            pending_page: self.problems.positive(
                "limits.pending_page",
                l.pending_page,
                d.pending_page.into(),
                100_000,
            ) as u32,
            command_timeout: self.problems.interval(
                "limits.command_timeout",
                l.command_timeout,
                d.command_timeout,
            ),
            pipeline_size: self.problems.positive(
                "limits.pipeline_size",
                l.pipeline_size,
                d.pipeline_size as u64,
                100_000,
            ) as usize,
            lag_exact_count: self.problems.positive(
                "limits.lag_exact_count",
                l.lag_exact_count,
                d.lag_exact_count.into(),
                100_000,
            ) as u32,
            ghost_checks_per_scan: self.problems.ranged(
                "limits.ghost_checks_per_scan",
                l.ghost_checks_per_scan,
                d.ghost_checks_per_scan.into(),
                0,
                10_000_000,
            ) as u32,
            priority: self.priority(l.priority, &d.priority),
            min_share: self.min_share(l.min_share, &d.min_share),
            page_target: self
                .problems
                .interval("limits.page_target", l.page_target, d.page_target),
            min_page: self.problems.positive(
                "limits.min_page",
                l.min_page,
                d.min_page.into(),
                100_000,
            ) as u32,
        }
    }

    /// `limits.priority`: every probe once, highest first.
    fn priority(&mut self, value: Option<Vec<String>>, default: &[String]) -> Vec<String> {
        let Some(list) = value else {
            return default.to_vec();
        };
        let probes = probe_names();
        let mut seen = BTreeSet::new();
        for (i, name) in list.iter().enumerate() {
            if !probes.contains(&name.as_str()) {
                self.problems.add(
                    format!("limits.priority[{i}]"),
                    format!("{name:?} is not a probe ({})", probes.join(", ")),
                );
            } else if !seen.insert(name.clone()) {
                self.problems.add(
                    format!("limits.priority[{i}]"),
                    format!("{name:?} is listed twice"),
                );
            }
        }
        let missing: Vec<&str> = probes
            .iter()
            .copied()
            .filter(|p| !seen.contains(*p))
            .collect();
        if !missing.is_empty() {
            self.problems.add(
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
        let probes = probe_names();
        for (name, share) in &map {
            let key = format!("limits.min_share.{name}");
            if !probes.contains(&name.as_str()) {
                self.problems.add(
                    key,
                    format!("{name:?} is not a probe ({})", probes.join(", ")),
                );
            } else if !(0.0..=0.5).contains(share) {
                self.problems
                    .add(key, format!("must be between 0 and 0.5, not {share}"));
            }
        }
        let total: f64 = map.values().sum();
        if total > 0.8 {
            self.problems.add(
                "limits.min_share",
                format!("the shares add up to {total}; at most 0.8"),
            );
        }
        map
    }

    /// `[metrics]`: caps on series and label sizes, and the histograms'
    /// buckets.
    fn metrics(&mut self, m: RawMetrics) -> MetricsSettings {
        let dm = MetricsSettings::default();
        MetricsSettings {
            max_consumers_per_group: self.problems.ranged(
                "metrics.max_consumers_per_group",
                m.max_consumers_per_group,
                dm.max_consumers_per_group as u64,
                0,
                100_000,
            ) as usize,
            max_groups_per_stream: self.problems.ranged(
                "metrics.max_groups_per_stream",
                m.max_groups_per_stream,
                dm.max_groups_per_stream as u64,
                1,
                crate::vocab::ROWS_KEPT,
            ) as usize,
            max_label_value_bytes: self.problems.ranged(
                "metrics.max_label_value_bytes",
                m.max_label_value_bytes,
                dm.max_label_value_bytes as u64,
                64,
                1 << 20,
            ) as usize,
            pending_idle_buckets: match m.pending_idle_buckets {
                None => dm.pending_idle_buckets,
                Some(list) => self
                    .problems
                    .duration_buckets("metrics.pending_idle_buckets", &list),
            },
            delivery_count_buckets: match m.delivery_count_buckets {
                None => dm.delivery_count_buckets,
                Some(list) => self
                    .problems
                    .count_buckets("metrics.delivery_count_buckets", &list),
            },
        }
    }

    /// `[status]`: the window of polls a status rests on (at least two, to
    /// see a change), how long `data_loss` holds after a loss, and the
    /// state file (`--state.file` first).
    fn status(&mut self, raw: RawStatus, cli: &CliOverrides) -> (usize, Duration, Option<PathBuf>) {
        let status_window = self.problems.positive(
            "status.window",
            raw.window,
            DEFAULT_STATUS_WINDOW as u64,
            1000,
        ) as usize;
        if status_window < 2 {
            self.problems
                .add("status.window", "must be at least 2 polls");
        }
        let data_loss_hold = self.problems.interval(
            "status.data_loss_hold",
            raw.data_loss_hold,
            DEFAULT_DATA_LOSS_HOLD,
        );
        let state_file = cli.state_file.clone().or(raw.state_file.map(PathBuf::from));
        if let Some(path) = &state_file {
            if path.as_os_str().is_empty() {
                self.problems.add("status.state_file", "must not be empty");
            } else if path.is_dir() {
                self.problems.add(
                    "status.state_file",
                    "is a directory: name a file in it, such as state.json",
                );
            }
        }
        (status_window, data_loss_hold, state_file)
    }

    /// `[stream_defaults]` and the `[[streams]]` rules, each rule's settings
    /// falling back to the defaults.
    fn stream_rules(
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
                        self.problems.add(
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
                        series: r.series,
                        consumer_names: r.consumer_names,
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

    /// One section of stream settings under `key`, each key absent taken
    /// from `base`.
    fn stream_settings(
        &mut self,
        key: &str,
        base: &StreamSettings,
        raw: RawStreamSettings,
    ) -> StreamSettings {
        StreamSettings {
            max_delay: self.problems.optional_positive_duration(
                key,
                "max_delay",
                raw.max_delay,
                base.max_delay,
            ),
            read_every: self.problems.optional_positive_duration(
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
                    self.problems.add(
                        format!("{key}.trimming"),
                        format!("must be \"any\" or \"acked\", not {other:?}"),
                    );
                    base.trimming
                }
            },
            dead_letter: match raw.dead_letter {
                None => base.dead_letter.clone(),
                Some(name) if name.is_empty() => {
                    self.problems
                        .add(format!("{key}.dead_letter"), "must not be empty");
                    None
                }
                Some(name) => Some(name.into_bytes()),
            },
            poison_delivery_count: self.problems.positive(
                &format!("{key}.poison_delivery_count"),
                raw.poison_delivery_count,
                base.poison_delivery_count,
                u64::MAX,
            ),
            consumer_inactive_after: self.problems.optional_positive_duration(
                key,
                "consumer_inactive_after",
                raw.consumer_inactive_after,
                base.consumer_inactive_after,
            ),
            exclude_streams: match raw.exclude_streams {
                None => base.exclude_streams.clone(),
                Some(list) => self.problems.globs(&format!("{key}.exclude_streams"), list),
            },
            groups: NameFilter {
                include: match raw.include_groups {
                    None => base.groups.include.clone(),
                    Some(list) => self.problems.globs(&format!("{key}.include_groups"), list),
                },
                exclude: match raw.exclude_groups {
                    None => base.groups.exclude.clone(),
                    Some(list) => self.problems.globs(&format!("{key}.exclude_groups"), list),
                },
            },
            series: match raw.series.as_deref() {
                None => base.series,
                Some("lean") => Series::Lean,
                Some("full") => Series::Full,
                Some(other) => {
                    self.problems.add(
                        format!("{key}.series"),
                        format!("must be \"lean\" or \"full\", not {other:?}"),
                    );
                    base.series
                }
            },
            consumer_names: match raw.consumer_names {
                None => base.consumer_names.clone(),
                Some(list) => self.consumer_renames(&format!("{key}.consumer_names"), list),
            },
        }
    }

    /// Consumer-name rewrites: a pattern that compiles (anchored at both
    /// ends) and a replacement whose `$` references name its groups.
    fn consumer_renames(&mut self, key: &str, list: Vec<RawConsumerRename>) -> Vec<ConsumerRename> {
        let mut renames = Vec::with_capacity(list.len());
        for (i, raw) in list.into_iter().enumerate() {
            let k = format!("{key}[{i}]");
            let Some(regex) = raw.regex.filter(|r| !r.is_empty()) else {
                self.problems
                    .add(format!("{k}.regex"), "is required (a regular expression)");
                continue;
            };
            let Some(replacement) = raw.replacement.filter(|r| !r.is_empty()) else {
                self.problems.add(
                    format!("{k}.replacement"),
                    "is required (the name, with $1 or ${name} for the pattern's groups)",
                );
                continue;
            };
            // Checked as written (its errors quote the user's text), then
            // anchored: the whole name must match.
            let built = regex::bytes::RegexBuilder::new(&regex)
                .size_limit(1 << 20)
                .build()
                .and_then(|_| {
                    regex::bytes::RegexBuilder::new(&format!("^(?:{regex})$"))
                        .size_limit(1 << 20)
                        .build()
                });
            let pattern = match built {
                Ok(p) => p,
                Err(e) => {
                    let why = e.to_string().replace('\n', " ");
                    self.problems.add(
                        format!("{k}.regex"),
                        format!("is not a regular expression: {why}"),
                    );
                    continue;
                }
            };
            if let Some(missing) = unknown_references(&pattern, &replacement) {
                self.problems.add(
                    format!("{k}.replacement"),
                    format!("refers to ${missing}, which the regex does not capture"),
                );
                continue;
            }
            renames.push(ConsumerRename {
                pattern,
                replacement,
            });
        }
        renames
    }

    /// `[probe]`: the globs of the URLs `/probe` may poll, none holding
    /// credentials, and how long and how many it polls.
    fn multi_target(&mut self, raw: RawMultiTarget) -> MultiTargetSettings {
        let mut allowed_targets = Vec::new();
        for (i, g) in raw.allowed_targets.into_iter().enumerate() {
            let key = format!("probe.allowed_targets[{i}]");
            if !(g.starts_with("redis") || g.starts_with('*') || g.starts_with('[')) {
                self.problems.add(
                    key,
                    format!(
                        "{g:?} never matches: globs are matched against URLs such as \"redis://10.0.0.1:6379\""
                    ),
                );
            } else if g.contains('@') {
                self.problems.add(
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
            target_ttl: self
                .problems
                .interval("probe.target_ttl", raw.target_ttl, d.target_ttl),
            max_targets: self.problems.positive(
                "probe.max_targets",
                raw.max_targets,
                d.max_targets as u64,
                100_000,
            ) as usize,
            first_collection_wait: match raw.first_collection_wait {
                None => d.first_collection_wait,
                Some(text) => self
                    .problems
                    .duration("probe.first_collection_wait", &text)
                    .unwrap_or(d.first_collection_wait),
            },
        }
    }

    /// `[auth_modules.<name>]`, each checked under its own key.
    fn auth_modules(&mut self, raw: BTreeMap<String, RawAuthModule>) -> AuthModules {
        raw.into_iter()
            .map(|(name, m)| {
                let module = self.auth_module(&format!("auth_modules.{name}"), m);
                (name, Arc::new(module))
            })
            .collect()
    }

    /// One auth module: its credentials, TLS and keyspace events.
    fn auth_module(&mut self, key: &str, raw: RawAuthModule) -> AuthModule {
        if key.len() == "auth_modules.".len() {
            self.problems.add(key, "an auth module needs a name");
        }
        AuthModule {
            username: raw.username,
            password: self
                .problems
                .secret(key, "password", raw.password_env, raw.password_file),
            tls: self.problems.tls(key, tls_keys!(raw)),
            keyspace_events: self.problems.keyspace_events(key, raw.keyspace_events),
            client_tracking: self.problems.client_tracking(key, raw.client_tracking),
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

/// The first `$` reference of `replacement` (`$1`, `${1}`, `$name`,
/// `${name}`) that names no group of `pattern`: such a reference would
/// expand to nothing, silently merging consumers.
fn unknown_references(pattern: &regex::bytes::Regex, replacement: &str) -> Option<String> {
    let names: Vec<&str> = pattern.capture_names().flatten().collect();
    let groups = pattern.captures_len();
    let mut rest = replacement;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let (reference, after) = if let Some(braced) = rest.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], &braced[end + 1..]),
                None => (braced, ""),
            }
        } else if let Some(escaped) = rest.strip_prefix('$') {
            ("", escaped)
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        rest = after;
        if reference.is_empty() {
            continue;
        }
        let known = match reference.parse::<usize>() {
            Ok(n) => n < groups,
            Err(_) => names.contains(&reference),
        };
        if !known {
            return Some(reference.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests;
