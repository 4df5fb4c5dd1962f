//! Turns [`RawConfig`] into [`Config`]: defaults, parsing of durations and
//! URLs, range checks and secret resolution, collecting every problem with
//! its key path instead of stopping at the first.
//!
//! This file walks the whole file; the checks live by subject: `targets`
//! (targets, their URLs and secrets, stream rules), `web` (listener,
//! `[probe]` and auth modules) and `values` (durations, ranges, priorities).

mod suggest;
mod targets;
mod values;
mod web;

use std::collections::BTreeSet;

use super::raw::{RawConfig, RawStreamSettings, RawTarget};
use super::*;

pub(super) use targets::parse_url;

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

/// The toml error's message with the line it points at on its first line,
/// an unknown key or value with the nearest valid one.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = suggest::unknown_name(e.message().trim());
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            match message.split_once('\n') {
                Some((first, rest)) => format!("{first} (line {line})\n{rest}"),
                None => format!("{message} (line {line})"),
            }
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
                        read_every: r.read_every,
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
}

#[cfg(test)]
mod tests;
