//! Configuration: the validated, read-only [`Config`] every other module
//! takes, and [`load`], the only way to build one from a file.
//!
//! Loading has two stages (the ripgrep/postgres_exporter pattern): serde reads
//! the TOML into [`raw`] structs that reject unknown keys, then [`validate`]
//! checks every value and resolves secrets, reporting each problem with the
//! file, the key path and what is wrong. Components accept only [`Config`], so
//! validation cannot be skipped. Defaults live here as constants and are
//! mirrored, key by key, in `config/example.toml`.

mod multitarget;
mod raw;
mod tls;
mod validate;
mod web;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::glob::Glob;
use crate::vocab::ProbeKind;

pub use multitarget::{
    AuthModule, AuthModules, DEFAULT_FIRST_COLLECTION_WAIT, DEFAULT_MAX_PROBED_TARGETS,
    DEFAULT_TARGET_TTL, MAX_PROBE_URL_LEN, MultiTargetRefusal, MultiTargetSettings,
};
pub use tls::{ClientIdentity, PemFile, RedisTls};
pub use validate::{CliOverrides, from_str};
pub use web::*;

/// Default Redis URL when no target is configured.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// Default cap on streams watched per target.
pub const DEFAULT_MAX_STREAMS: usize = 10_000;
/// Groups watched per target unless `max_groups` says otherwise.
pub const DEFAULT_MAX_GROUPS: usize = 100_000;
/// Default cap on a name's bytes in a label value: long enough for any
/// name a person chose, short enough that 200 names of 10 KB (each written
/// in some 36 series) cannot turn a scrape into hundreds of megabytes.
pub const DEFAULT_MAX_LABEL_VALUE_BYTES: usize = 1024;
/// Default SCAN COUNT hint. Measured by the exporter's own walks of a
/// million keys on Redis 7.0 (4 walks each, twice): COUNT 500 cost 0.45 ms
/// of Redis time per call and 0.89–0.94 s per walk, with 10–33 calls over
/// 1 ms; COUNT 200 cost 0.2 ms per call and 1.02 s per walk, with 3–9. A
/// little more work per walk buys calls that stay well under SLOWLOG's 1 ms.
pub const DEFAULT_SCAN_COUNT: u32 = 200;

/// A fully validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The file it came from, if any (for reload and messages).
    pub source: Option<PathBuf>,
    /// HTTP side.
    pub web: Web,
    /// Logging.
    pub log: Log,
    /// Redis targets, at least one, names unique.
    pub targets: Vec<Arc<Target>>,
    /// Probe intervals.
    pub schedule: Schedule,
    /// Per-target cost limits.
    pub limits: Limits,
    /// Output shaping.
    pub metrics: MetricsSettings,
    /// Polls in the group-status sliding window.
    pub status_window: usize,
    /// How long `data_loss` holds after the last loss was counted.
    pub data_loss_hold: Duration,
    /// Per-stream settings.
    pub streams: StreamRules,
    /// `/probe`: which targets it may poll, for how long, how many.
    pub multi_target: MultiTargetSettings,
    /// Credentials and TLS for probed targets, by name.
    pub auth_modules: AuthModules,
}

/// Log output format (the logger's own type: config only chooses it).
pub use crate::telemetry::LogFormat;

/// Logging settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    /// Text or JSON.
    pub format: LogFormat,
    /// A tracing filter directive such as `info` or `redis_streams_exporter=debug`.
    pub level: String,
}

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

/// Probe intervals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// SCAN for patterns.
    pub discovery: Duration,
    /// INFO server and memory.
    pub info: Duration,
    /// XINFO STREAM + XINFO GROUPS (length and lag).
    pub stream: Duration,
    /// XPENDING summary.
    pub pending_summary: Duration,
    /// XINFO CONSUMERS.
    pub consumers: Duration,
    /// Paged XPENDING over whole PELs.
    pub pending_scan: Duration,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            discovery: Duration::from_secs(300),
            info: Duration::from_secs(60),
            stream: Duration::from_secs(15),
            pending_summary: Duration::from_secs(30),
            consumers: Duration::from_secs(30),
            pending_scan: Duration::from_secs(300),
        }
    }
}

/// Per-target cost limits.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Token bucket over every command sent.
    pub commands_per_second: u32,
    /// PEL entries the scan may read per second.
    pub pending_entries_per_second: u32,
    /// Entries per XPENDING page.
    pub pending_page: u32,
    /// Deadline for one pipeline round trip.
    pub command_timeout: Duration,
    /// Commands per pipeline.
    pub pipeline_size: usize,
    /// Largest undelivered range counted exactly with XRANGE when lag is unknown.
    pub lag_exact_count: u32,
    /// `XRANGE id id` checks per PEL scan pass for possible ghosts.
    pub ghost_checks_per_scan: u32,
    /// Probe names, highest priority first, for the command budget.
    pub priority: Vec<String>,
    /// The least share of the command budget each probe keeps when others
    /// want it too, by probe name (those not listed: none).
    pub min_share: BTreeMap<String, f64>,
    /// The time one SCAN or XPENDING page should take at most: page sizes
    /// shrink when calls take longer and grow back when they are quick.
    pub page_target: Duration,
    /// The smallest page the tuning goes down to.
    pub min_page: u32,
}

/// The probes' names, as `[limits] priority` and `min_share` spell them.
pub fn probe_names() -> [&'static str; 6] {
    ProbeKind::ALL.map(ProbeKind::label)
}

impl Limits {
    /// The rank of probe `name` (0 is the highest).
    pub fn rank(&self, name: &str) -> usize {
        self.priority
            .iter()
            .position(|p| p == name)
            .unwrap_or(self.priority.len().saturating_sub(1))
    }

    /// The minimum shares by rank.
    pub fn shares_by_rank(&self) -> Vec<f64> {
        self.priority
            .iter()
            .map(|p| self.min_share.get(p).copied().unwrap_or(0.0))
            .collect()
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            commands_per_second: 500,
            pending_entries_per_second: 50_000,
            pending_page: 500,
            command_timeout: Duration::from_secs(2),
            pipeline_size: 100,
            lag_exact_count: 100,
            ghost_checks_per_scan: 1000,
            // The stream poll first: every SLO alert reads length and lag.
            // Then the cheap INFO, discovery (new streams), the pending
            // summary, consumers, and the PEL scan, which can wait longest.
            priority: [
                ProbeKind::Stream,
                ProbeKind::Info,
                ProbeKind::Discovery,
                ProbeKind::PendingSummary,
                ProbeKind::Consumers,
                ProbeKind::PendingScan,
            ]
            .map(|k| k.label().to_string())
            .to_vec(),
            min_share: BTreeMap::from(
                [
                    // 12 % in all: the stream poll of 3,000 streams × 2
                    // groups (6,000 commands) fits its 15 s at 500/s.
                    (ProbeKind::Info, 0.01),
                    (ProbeKind::Discovery, 0.03),
                    (ProbeKind::PendingSummary, 0.03),
                    (ProbeKind::Consumers, 0.03),
                    (ProbeKind::PendingScan, 0.02),
                ]
                .map(|(k, v)| (k.label().to_string(), v)),
            ),
            page_target: Duration::from_millis(1),
            min_page: 10,
        }
    }
}

/// Output shaping.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsSettings {
    /// Consumers exported per group; the rest are summed under `__other__`
    /// (0: only `__other__`). A real consumer named `__other__` is exported
    /// as `\x5f_other__`, so it never collides with the sum.
    pub max_consumers_per_group: usize,
    /// Groups watched per stream, the first by name; the rest are not
    /// watched and are counted (`redis_streams_exporter_groups_dropped`).
    /// At most the rows a reply keeps (`XINFO GROUPS` is cut there).
    pub max_groups_per_stream: usize,
    /// `le` bounds of `pending_by_idle`, in seconds, ascending; empty: the
    /// family is not exported.
    pub pending_idle_buckets: Vec<f64>,
    /// `le` bounds of `pending_by_delivery_count`, ascending; empty: the
    /// family is not exported.
    pub delivery_count_buckets: Vec<u64>,
    /// Bytes of a name from Redis written in a label value; longer names
    /// are shortened and marked (see `metrics::text`).
    pub max_label_value_bytes: usize,
}

impl Default for MetricsSettings {
    fn default() -> Self {
        MetricsSettings {
            max_consumers_per_group: 50,
            max_groups_per_stream: 1_000,
            pending_idle_buckets: vec![10.0, 60.0, 300.0, 900.0, 3600.0, 21600.0],
            delivery_count_buckets: vec![1, 2, 3, 5, 10, 20],
            max_label_value_bytes: DEFAULT_MAX_LABEL_VALUE_BYTES,
        }
    }
}

/// Default number of polls in the status window.
pub const DEFAULT_STATUS_WINDOW: usize = 10;
/// Default time `data_loss` holds after the last counted loss: long enough
/// for whoever is paged to see it, even when the group caught up at once.
pub const DEFAULT_DATA_LOSS_HOLD: Duration = Duration::from_secs(3600);

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
        }
    }
}

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

impl StreamSettings {
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

/// One problem found while loading a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path, such as `targets[0].url`; empty for the whole file.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// Why a configuration could not be loaded: every problem found, with the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file, or `<flags>` when there was none.
    pub file: String,
    /// Every problem, in file order.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            if p.key.is_empty() {
                write!(f, "{}: {}", self.file, p.message)?;
            } else {
                write!(f, "{}: {}: {}", self.file, p.key, p.message)?;
            }
        }
        Ok(())
    }
}

/// Loads and validates the file at `path` (or only the defaults and the flags
/// when `path` is `None`).
///
/// # Errors
/// A [`ConfigError`] listing every problem: unreadable file, TOML syntax,
/// unknown keys, bad values, missing secrets.
pub fn load(path: Option<&Path>, overrides: &CliOverrides) -> Result<Config, ConfigError> {
    let (file, text) = match path {
        Some(p) => {
            let file = p.display().to_string();
            match std::fs::read_to_string(p) {
                Ok(text) => (file, text),
                Err(e) => {
                    return Err(ConfigError {
                        file,
                        problems: vec![Problem {
                            key: String::new(),
                            message: format!("cannot read the file: {e}"),
                        }],
                    });
                }
            }
        }
        None => ("<flags>".to_string(), String::new()),
    };
    let mut config = from_str(&file, &text, overrides)?;
    config.source = path.map(Path::to_path_buf);
    Ok(config)
}

impl Config {
    /// Whether anything that decides how a target is polled, besides the
    /// target itself, differs: a change restarts the pollers.
    pub fn polling_changed(&self, other: &Config) -> bool {
        // Every field is named, so a new setting is sorted here or the build
        // fails (a reload once ignored a changed `data_loss_hold`).
        let Config {
            source: _,
            web: _,
            log: _,
            targets: _,
            multi_target: _,
            auth_modules: _,
            schedule,
            limits,
            metrics,
            status_window,
            data_loss_hold,
            streams,
        } = self;
        *schedule != other.schedule
            || *limits != other.limits
            || *metrics != other.metrics
            || *status_window != other.status_window
            || *data_loss_hold != other.data_loss_hold
            || *streams != other.streams
    }
}

/// Targets by name, for the landing page and reloads.
pub fn targets_by_name(config: &Config) -> BTreeMap<&str, &Arc<Target>> {
    config
        .targets
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect()
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

    #[test]
    fn a_changed_data_loss_hold_is_a_polling_change() {
        let before = validate::from_str("t.toml", "", &Default::default()).unwrap();
        let after = validate::from_str(
            "t.toml",
            "[status]\ndata_loss_hold = \"2h\"\n",
            &Default::default(),
        )
        .unwrap();
        assert_ne!(before.data_loss_hold, after.data_loss_hold);
        assert!(
            before.polling_changed(&after),
            "a reload must hand the pollers the new hold"
        );
        assert!(
            crate::poller::memory_survives(&before, &after),
            "the hold changes no memory: the pollers keep their windows and ledgers"
        );
        assert!(!before.polling_changed(&before.clone()));
    }

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
