//! The stream rules: `[stream_defaults]` and `[[streams]]`, each rule's
//! settings falling back to the defaults.

use std::sync::Arc;
use std::time::Duration;

use super::validator::Validator;
use crate::config::raw::{RawConsumerRename, RawStreamRule, RawStreamSettings};
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
            series: match raw.series.as_deref() {
                None => base.series,
                Some("lean") => Series::Lean,
                Some("full") => Series::Full,
                Some(other) => {
                    self.problem(
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
                self.problem(format!("{k}.regex"), "is required (a regular expression)");
                continue;
            };
            let Some(replacement) = raw.replacement.filter(|r| !r.is_empty()) else {
                self.problem(
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
                    self.problem(
                        format!("{k}.regex"),
                        format!("is not a regular expression: {why}"),
                    );
                    continue;
                }
            };
            if let Some(missing) = unknown_references(&pattern, &replacement) {
                self.problem(
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
