//! The stream rules: `[stream_defaults]` and `[[streams]]`, each rule's
//! settings falling back to the defaults.

use std::sync::Arc;
use std::time::Duration;

use super::validator::Validator;
use crate::config::raw::{RawStreamRule, RawStreamSettings};
use crate::config::*;
use crate::glob::Glob;

impl Validator {
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
}
