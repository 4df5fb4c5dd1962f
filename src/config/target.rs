//! One Redis deployment to watch: where its servers are ([`Endpoint`],
//! [`Mode`]), how to log in ([`Secret`]) and which of its streams and groups
//! are watched ([`NameFilter`]).

use std::fmt;

use super::{RedisTls, StreamSettings};
use crate::glob::Glob;

/// How the exporter finds the servers of a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One server.
    Standalone,
    /// A Redis Cluster; `seeds` are extra nodes to ask for the topology.
    Cluster {
        /// Extra seed nodes (`host:port`) besides the URL's.
        seeds: Vec<String>,
    },
    /// A primary found through Sentinel.
    Sentinel {
        /// Sentinel addresses (`host:port`), the URL's first.
        sentinels: Vec<String>,
        /// The monitored master's name.
        master_name: String,
        /// ACL user on the sentinels.
        username: Option<String>,
        /// Password on the sentinels.
        password: Option<Secret>,
    },
}

impl Mode {
    /// The mode's name as written in the config and the `mode` label.
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Standalone => "standalone",
            Mode::Cluster { .. } => "cluster",
            Mode::Sentinel { .. } => "sentinel",
        }
    }
}

/// A secret value (password). Its `Debug` and `Display` never show it, so it
/// cannot reach a log line or an error message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where a target's server is and how to log in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or IP.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// `rediss://`.
    pub tls: bool,
    /// Database index from the URL path.
    pub db: i64,
}

impl fmt::Display for Endpoint {
    /// Scheme, host and port only: never credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "rediss" } else { "redis" };
        write!(f, "{scheme}://{}:{}/{}", self.host, self.port, self.db)
    }
}

/// One Redis deployment to watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The `target` label.
    pub name: String,
    /// Address from the URL (for sentinel mode, the first sentinel).
    pub endpoint: Endpoint,
    /// ACL user.
    pub username: Option<String>,
    /// Password.
    pub password: Option<Secret>,
    /// Topology.
    pub mode: Mode,
    /// TLS settings for `rediss://` (and its sentinels or cluster nodes).
    pub tls: RedisTls,
    /// Exact stream names, watched without SCAN.
    pub streams: Vec<Vec<u8>>,
    /// Glob patterns found with `SCAN MATCH ... TYPE stream`.
    pub patterns: Vec<Glob>,
    /// Streams never watched, whether named or found (before `max_streams`).
    pub exclude_streams: Vec<Glob>,
    /// Groups watched on every stream of the target.
    pub groups: NameFilter,
    /// Discovery cap.
    pub max_streams: usize,
    /// Groups watched over all the target's streams: a stream keeps its
    /// groups up to a share that leaves the small streams whole (see
    /// `probe::stream`); the rest are counted as dropped.
    pub max_groups: usize,
    /// SCAN COUNT hint.
    pub scan_count: u32,
    /// Whether to subscribe to the server's keyspace events.
    pub keyspace_events: KeyspaceEvents,
}

/// Whether the exporter subscribes to the keyevent channels of stream
/// commands, which the server publishes only when its
/// `notify-keyspace-events` allows (see `docs/keyspace-events.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyspaceEvents {
    /// Subscribe; without notifications on the server nothing arrives and
    /// nothing changes.
    #[default]
    Auto,
    /// No subscription.
    Off,
}

impl Target {
    /// Whether `stream`, whose settings are `settings`, is watched: neither
    /// the target's nor its rule's `exclude_streams` matches it.
    pub fn watches_stream(&self, settings: &StreamSettings, stream: &[u8]) -> bool {
        !self
            .exclude_streams
            .iter()
            .chain(&settings.exclude_streams)
            .any(|g| g.matches(stream))
    }

    /// Whether `group` of a stream whose settings are `settings` is
    /// watched: both the target's and the rule's group filters admit it.
    /// Unwatched groups cost no command beyond their line in XINFO GROUPS.
    pub fn watches_group(&self, settings: &StreamSettings, group: &[u8]) -> bool {
        self.groups.admits(group) && settings.groups.admits(group)
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
    fn secrets_do_not_print() {
        let s = Secret::new("hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
