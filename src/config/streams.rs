//! Per-stream settings ([`StreamSettings`]) and the `[[streams]]` rules that
//! pick them for a stream ([`StreamRules`]), first match wins; the filters
//! over stream and group names that rules and targets both have
//! ([`NameFilter`]).

use std::sync::Arc;
use std::time::Duration;

use crate::glob::Glob;

/// Inactivity after which a consumer's entries are orphaned while its
/// group's cadence is not learned and `consumer_inactive_after` is unset.
pub const DEFAULT_CONSUMER_INACTIVE_AFTER: Duration = Duration::from_secs(300);

/// Settings that apply to one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSettings {
    /// The delay the business tolerates.
    pub max_delay: Option<Duration>,
    /// How often the groups are read at least (batch consumers): work
    /// waiting less long than this plus the status window is neither
    /// `stalled` nor `stopped`.
    pub read_every: Option<Duration>,
    /// How the stream is trimmed: with `ACKED`, trimming removes only what
    /// every group read and acknowledged, so it never overtakes a group.
    pub trimming: Trimming,
    /// Dead-letter stream name; `{stream}` is replaced by the stream's name.
    pub dead_letter: Option<Vec<u8>>,
    /// Delivery count from which a pending entry is poison.
    pub poison_delivery_count: u64,
    /// Inactivity after which a consumer's pending entries count as
    /// orphaned; unset, the group's patience from its learned cadence (see
    /// [`crate::cadence`]), or [`DEFAULT_CONSUMER_INACTIVE_AFTER`] until it
    /// is learned.
    pub consumer_inactive_after: Option<Duration>,
    /// Streams this rule matches that are not watched at all.
    pub exclude_streams: Vec<Glob>,
    /// Groups watched on the streams this rule matches.
    pub groups: NameFilter,
    /// Which series the stream's groups and consumers cost.
    pub series: Series,
    /// Consumer names rewritten to stable ones before they become labels,
    /// first matching rule wins.
    pub consumer_names: Vec<ConsumerRename>,
}

impl Default for StreamSettings {
    fn default() -> Self {
        StreamSettings {
            max_delay: None,
            read_every: None,
            trimming: Trimming::Any,
            dead_letter: None,
            poison_delivery_count: 10,
            consumer_inactive_after: None,
            exclude_streams: Vec::new(),
            groups: NameFilter::default(),
            series: Series::Lean,
            consumer_names: Vec::new(),
        }
    }
}

impl StreamSettings {
    /// The name `name` is exported under: the first rewrite that matches
    /// it, else itself. `None` when no rule rewrote it.
    pub fn renamed_consumer(&self, name: &[u8]) -> Option<Vec<u8>> {
        self.consumer_names.iter().find_map(|r| r.rename(name))
    }

    /// The dead-letter stream of `stream`, with `{stream}` substituted.
    pub fn dead_letter_for(&self, stream: &[u8]) -> Option<Vec<u8>> {
        let template = self.dead_letter.as_ref()?;
        let marker = b"{stream}";
        let mut out = Vec::with_capacity(template.len() + stream.len());
        let mut rest = template.as_slice();
        while let Some(pos) = rest.windows(marker.len()).position(|w| w == marker) {
            out.extend_from_slice(&rest[..pos]);
            out.extend_from_slice(stream);
            rest = &rest[pos + marker.len()..];
        }
        out.extend_from_slice(rest);
        Some(out)
    }
}

/// Which series a stream's groups and consumers cost (`series`).
///
/// Lean, the default, leaves out what says nothing: zeros of problems that
/// never happened, the PEL scan's bookkeeping while nothing is pending, the
/// idle and delivery-count distributions, and consumers that hold nothing
/// (counted per group instead). Full writes every family the catalog has,
/// zeros included, and every consumer up to `max_consumers_per_group`: for
/// the streams someone is debugging. What each family does in lean is its
/// catalog entry's [`Lean`](crate::metrics::catalog::Lean).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Series {
    /// What an on-call reads, alerts and panels use.
    #[default]
    Lean,
    /// Every family, zeros included, and every consumer up to the cap.
    Full,
}

impl Series {
    /// True for [`Series::Full`].
    pub fn full(self) -> bool {
        self == Series::Full
    }
}

/// One rewrite of consumer names (`consumer_names`): a name the pattern
/// matches whole becomes the replacement, `$1` and `${name}` expanded from
/// its groups, as in Prometheus relabelling. Consumers rewritten to one
/// name are exported as one (their entries summed, their latest read kept):
/// workers that take a random name at every start keep one series per kind.
#[derive(Clone, Debug)]
pub struct ConsumerRename {
    /// The pattern, anchored at both ends.
    pub pattern: regex::bytes::Regex,
    /// What a matching name becomes.
    pub replacement: String,
}

impl ConsumerRename {
    /// The rewritten name of `name`, when the pattern matches it.
    pub fn rename(&self, name: &[u8]) -> Option<Vec<u8>> {
        let caps = self.pattern.captures(name)?;
        let mut out = Vec::new();
        caps.expand(self.replacement.as_bytes(), &mut out);
        Some(out)
    }
}

/// Rules are one when their pattern and replacement read the same.
impl PartialEq for ConsumerRename {
    fn eq(&self, other: &Self) -> bool {
        self.pattern.as_str() == other.pattern.as_str() && self.replacement == other.replacement
    }
}

impl Eq for ConsumerRename {}

/// How a stream is trimmed (`trimming`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Trimming {
    /// Any way: a trim may remove entries a group has not read.
    #[default]
    Any,
    /// Only with `ACKED` (Redis 8.2+): a trim removes only entries every
    /// group has read and acknowledged, so it never comes for a group's
    /// unread entries; the trim-overtake figures are not exported.
    Acked,
}

/// `[[streams]]` rules in file order, over `[stream_defaults]`. The first rule
/// whose pattern matches a stream supplies its settings.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StreamRules {
    /// Settings for streams no rule matches.
    pub defaults: Arc<StreamSettings>,
    /// Rules, first match wins.
    pub rules: Vec<(Glob, Arc<StreamSettings>)>,
}

impl StreamRules {
    /// The settings for `stream`.
    pub fn for_stream(&self, stream: &[u8]) -> Arc<StreamSettings> {
        self.rules
            .iter()
            .find(|(glob, _)| glob.matches(stream))
            .map(|(_, settings)| settings.clone())
            .unwrap_or_else(|| self.defaults.clone())
    }
}

/// Include and exclude globs over names: a name passes when it matches an
/// include glob (or none is given) and no exclude glob.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameFilter {
    /// Empty: every name.
    pub include: Vec<Glob>,
    /// Names never admitted, whatever `include` says.
    pub exclude: Vec<Glob>,
}

impl NameFilter {
    /// Whether `name` passes.
    pub fn admits(&self, name: &[u8]) -> bool {
        (self.include.is_empty() || self.include.iter().any(|g| g.matches(name)))
            && !self.exclude.iter().any(|g| g.matches(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_template() {
        let s = StreamSettings {
            dead_letter: Some(b"{stream}:dlq".to_vec()),
            ..StreamSettings::default()
        };
        assert_eq!(s.dead_letter_for(b"orders"), Some(b"orders:dlq".to_vec()));
        let fixed = StreamSettings {
            dead_letter: Some(b"orders:dead".to_vec()),
            ..StreamSettings::default()
        };
        assert_eq!(
            fixed.dead_letter_for(b"orders:eu"),
            Some(b"orders:dead".to_vec())
        );
    }
}
