//! Values checked alike wherever they appear: durations, intervals,
//! ranges, the probes' priority and minimum shares, histogram buckets.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;

use super::validator::Validator;
use crate::config::*;

impl Validator {
    pub(super) fn duration(&mut self, key: &str, text: &str) -> Option<Duration> {
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
                    self.problem(key, "must be greater than zero");
                    default
                }
                Some(d) => d,
                None => default,
            },
        }
    }

    /// `limits.priority`: every probe once, highest first.
    pub(super) fn priority(
        &mut self,
        value: Option<Vec<String>>,
        default: &[String],
    ) -> Vec<String> {
        let Some(list) = value else {
            return default.to_vec();
        };
        let probes = probe_names();
        let mut seen = BTreeSet::new();
        for (i, name) in list.iter().enumerate() {
            if !probes.contains(&name.as_str()) {
                self.problem(
                    format!("limits.priority[{i}]"),
                    format!("{name:?} is not a probe ({})", probes.join(", ")),
                );
            } else if !seen.insert(name.clone()) {
                self.problem(
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
    pub(super) fn min_share(
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
                self.problem(
                    key,
                    format!("{name:?} is not a probe ({})", probes.join(", ")),
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
                self.problem(key, format!("must be between {min} and {max}, not {v}"));
                default
            }
        }
    }

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
            self.problem(key, "buckets must be strictly ascending");
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
}
