//! What is wrong with a configuration, each [`Problem`] under its key path,
//! and [`ConfigProblems`]: the problems found so far, and the reading of the
//! values that every section checks alike (durations, ranges, buckets,
//! globs, `host:port`, secrets, the `tls_*` keys, `keyspace_events`), each
//! giving its value, or its default, and recording what is wrong under its
//! key.

use std::time::Duration;

use super::target::{ClientTracking, KeyspaceEvents, Secret};
use super::tls::{RedisTls, TlsKeys};
use crate::glob::Glob;

/// One problem found while loading a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path, such as `targets[0].url`; empty for the whole file.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// The problems found so far, in the order a reader meets their keys, and
/// the values read alike wherever they appear.
#[derive(Debug, Default)]
pub(super) struct ConfigProblems {
    found: Vec<Problem>,
    /// `--check-config`: an unset environment variable of a secret is not a
    /// problem, it is listed in `unset_secrets`.
    pub(super) secrets_may_be_unset: bool,
    /// `<key>: <variable>` of each such secret.
    pub(super) unset_secrets: Vec<String>,
}

impl ConfigProblems {
    /// Records that the value at `key` is wrong, and why.
    pub(super) fn add(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.found.push(Problem {
            key: key.into(),
            message: message.into(),
        });
    }

    /// `value` when nothing was found wrong, else every problem.
    pub(super) fn finish<T>(self, value: T) -> Result<T, Vec<Problem>> {
        if self.found.is_empty() {
            Ok(value)
        } else {
            Err(self.found)
        }
    }

    /// A duration as humantime writes it (`15s`, `5m`, `1h 30m`).
    pub(super) fn duration(&mut self, key: &str, text: &str) -> Option<Duration> {
        match humantime::parse_duration(text) {
            Ok(d) => Some(d),
            Err(e) => {
                self.add(
                    key,
                    format!("{text:?} is not a duration such as \"15s\" or \"5m\": {e}"),
                );
                None
            }
        }
    }

    /// A duration that must be positive.
    pub(super) fn interval(
        &mut self,
        key: &str,
        value: Option<String>,
        default: Duration,
    ) -> Duration {
        match value {
            None => default,
            Some(text) => match self.duration(key, &text) {
                Some(d) if d.is_zero() => {
                    self.add(key, "must be greater than zero");
                    default
                }
                Some(d) => d,
                None => default,
            },
        }
    }

    /// An optional duration above zero (`base` when not given).
    pub(super) fn optional_positive_duration(
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
                self.add(k, "must be greater than zero");
                None
            }
            d => d,
        }
    }

    /// An integer in `min..=max`, or the default when absent.
    pub(super) fn ranged(
        &mut self,
        key: &str,
        value: Option<i64>,
        default: u64,
        min: u64,
        max: u64,
    ) -> u64 {
        match value {
            None => default,
            Some(v) if v >= 0 && (v as u64) >= min && (v as u64) <= max => v as u64,
            Some(v) => {
                self.add(key, format!("must be between {min} and {max}, not {v}"));
                default
            }
        }
    }

    /// An integer in `1..=max`, or the default when absent.
    pub(super) fn positive(
        &mut self,
        key: &str,
        value: Option<i64>,
        default: u64,
        max: u64,
    ) -> u64 {
        self.ranged(key, value, default, 1, max)
    }

    /// Bucket bounds: strictly ascending; an empty list turns the family off.
    pub(super) fn ascending(&mut self, key: &str, values: &[f64]) {
        if values.windows(2).any(|w| w[0] >= w[1]) {
            self.add(key, "buckets must be strictly ascending");
        }
    }

    /// Buckets written as durations, in seconds: each one a duration, all
    /// of them ascending.
    pub(super) fn duration_buckets(&mut self, key: &str, list: &[String]) -> Vec<f64> {
        let secs: Vec<f64> = list
            .iter()
            .enumerate()
            .filter_map(|(i, b)| self.duration(&format!("{key}[{i}]"), b))
            .map(|d| d.as_secs_f64())
            .collect();
        self.ascending(key, &secs);
        secs
    }

    /// Buckets that count: each one positive, all of them ascending.
    pub(super) fn count_buckets(&mut self, key: &str, list: &[i64]) -> Vec<u64> {
        let counts: Vec<u64> = list
            .iter()
            .enumerate()
            .map(|(i, &c)| self.positive(&format!("{key}[{i}]"), Some(c), 1, u64::MAX))
            .collect();
        let as_f: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
        self.ascending(key, &as_f);
        counts
    }

    /// Glob patterns, none of them empty.
    pub(super) fn globs(&mut self, key: &str, list: Vec<String>) -> Vec<Glob> {
        let mut globs = Vec::with_capacity(list.len());
        for (i, p) in list.into_iter().enumerate() {
            if p.is_empty() {
                self.add(format!("{key}[{i}]"), "must not be empty");
            } else {
                globs.push(Glob::new(p));
            }
        }
        globs
    }

    /// A `host:port` address, its port a number.
    pub(super) fn host_port(&mut self, key: &str, value: &str) {
        let ok = value
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !ok {
            self.add(key, format!("{value:?} is not host:port"));
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
                self.add(
                    format!("{key}.{prefix}_env"),
                    format!("set either {prefix}_env or {prefix}_file, not both"),
                );
                None
            }
            (Some(var), None) => match std::env::var(&var) {
                Ok(v) => Some(Secret::new(v)),
                Err(_) if self.secrets_may_be_unset => {
                    self.unset_secrets
                        .push(format!("{key}.{prefix}_env: {var}"));
                    None
                }
                Err(_) => {
                    self.add(
                        format!("{key}.{prefix}_env"),
                        format!("environment variable {var} is not set"),
                    );
                    None
                }
            },
            (None, Some(path)) => match std::fs::read_to_string(&path) {
                Ok(v) => Some(Secret::new(v.trim_end_matches(['\r', '\n']))),
                Err(e) => {
                    self.add(
                        format!("{key}.{prefix}_file"),
                        format!("cannot read {path}: {e}"),
                    );
                    None
                }
            },
            (None, None) => None,
        }
    }

    /// The `tls_*` keys of a target or auth module, files read and checked.
    pub(super) fn tls(&mut self, key: &str, keys: TlsKeys) -> RedisTls {
        let mut found = Vec::new();
        let tls = super::tls::load(keys, &mut |k, message| {
            found.push((format!("{key}.{k}"), message));
        });
        for (k, message) in found {
            self.add(k, message);
        }
        tls
    }

    /// `<key>.keyspace_events`: `"auto"` (the default) or `"off"`.
    pub(super) fn keyspace_events(&mut self, key: &str, raw: Option<String>) -> KeyspaceEvents {
        if self.auto_or_off(key, "keyspace_events", raw) {
            KeyspaceEvents::Auto
        } else {
            KeyspaceEvents::Off
        }
    }

    /// `<key>.client_tracking`: `"auto"` (the default) or `"off"`.
    pub(super) fn client_tracking(&mut self, key: &str, raw: Option<String>) -> ClientTracking {
        if self.auto_or_off(key, "client_tracking", raw) {
            ClientTracking::Auto
        } else {
            ClientTracking::Off
        }
    }

    /// `<key>.<field>`: true for `"auto"` (the default), false for `"off"`.
    fn auto_or_off(&mut self, key: &str, field: &str, raw: Option<String>) -> bool {
        match raw.as_deref() {
            None | Some("auto") => true,
            Some("off") => false,
            Some(other) => {
                self.add(
                    format!("{key}.{field}"),
                    format!("must be \"auto\" or \"off\", not {other:?}"),
                );
                true
            }
        }
    }
}
