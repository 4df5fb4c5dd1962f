//! One Redis deployment to watch ([`Target`]): where its servers are
//! ([`Endpoint`], read from its URL by [`parse_url`], and [`Mode`]), how to
//! log in ([`Secret`]) and which of its streams and groups are watched, with
//! the defaults of a target's settings.

use std::fmt;

use super::streams::{NameFilter, StreamSettings};
use super::tls::RedisTls;
use crate::glob::Glob;

/// Default Redis URL when no target is configured.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// Default cap on streams watched per target.
pub const DEFAULT_MAX_STREAMS: usize = 10_000;
/// Groups watched per target unless `max_groups` says otherwise: at about
/// 10 series a healthy group (lean series), some 250,000 series, what one
/// Prometheus holds comfortably for one target beside others (docs/cost.md).
pub const DEFAULT_MAX_GROUPS: usize = 25_000;
/// Default SCAN COUNT hint. Measured by the exporter's own walks of a
/// million keys on Redis 7.0 (4 walks each, twice): COUNT 500 cost 0.45 ms
/// of Redis time per call and 0.89–0.94 s per walk, with 10–33 calls over
/// 1 ms; COUNT 200 cost 0.2 ms per call and 1.02 s per walk, with 3–9. A
/// little more work per walk buys calls that stay well under SLOWLOG's 1 ms.
pub const DEFAULT_SCAN_COUNT: u32 = 200;

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

impl Endpoint {
    /// `host:port`, plus `/db` when not 0, IPv6 hosts in brackets: the name
    /// of a target that has none, and the address part of a probe URL.
    pub fn address(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.db {
            0 => format!("{host}:{}", self.port),
            db => format!("{host}:{}/{db}", self.port),
        }
    }

    /// `redis://` or `rediss://` and [`Self::address`]: one spelling for
    /// every way of writing the same server, which `allowed_targets` globs
    /// are matched against and probed targets are known by.
    pub fn canonical_url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://{}", self.address())
    }
}

impl fmt::Display for Endpoint {
    /// Scheme, host and port only: never credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "rediss" } else { "redis" };
        write!(f, "{scheme}://{}:{}/{}", self.host, self.port, self.db)
    }
}

/// A target URL's endpoint, user and password.
pub(super) type ParsedUrl = (Endpoint, Option<String>, Option<Secret>);

/// Reads `redis[s]://[user[:password]@]host[:port][/db]` with the `url`
/// crate; a query or fragment is ignored. Messages never include the URL,
/// which may carry a password.
pub(super) fn parse_url(text: &str) -> Result<ParsedUrl, String> {
    // The scheme as written: `url` would also take `REDIS://`.
    let tls = match text.split_once("://") {
        Some(("redis", _)) => false,
        Some(("rediss", _)) => true,
        _ => return Err("must start with redis:// or rediss://".into()),
    };
    // `url` drops tabs and newlines silently: refuse them (and spaces and
    // other controls) rather than dial a different address than written.
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("has a space or a control character".into());
    }
    let url = url::Url::parse(text).map_err(|e| match e {
        url::ParseError::EmptyHost => "has no host",
        url::ParseError::InvalidPort => "has an invalid port",
        url::ParseError::InvalidIpv6Address => "has an invalid [IPv6] host",
        _ => "is not a valid URL",
    })?;
    let host = match url.host() {
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Domain(name)) if !name.is_empty() => name.to_string(),
        _ => return Err("has no host".into()),
    };
    let path = url.path().strip_prefix('/').unwrap_or(url.path());
    let db = if path.is_empty() {
        0
    } else {
        path.parse::<i64>()
            .ok()
            .filter(|d| *d >= 0)
            .ok_or("has a database path that is not a number")?
    };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let user = (!url.username().is_empty()).then(|| decode(url.username()));
    let password = url.password().map(|p| Secret::new(decode(p)));
    Ok((
        Endpoint {
            host,
            port: url.port().unwrap_or(6379),
            tls,
            db,
        },
        user,
        password,
    ))
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
    /// Whether the poll connections ask the server to announce changes to
    /// what they read.
    pub client_tracking: ClientTracking,
}

/// Whether each node's poll connection turns on `CLIENT TRACKING`, so that
/// a quiet stream is read again only once it changed (see
/// `docs/keyspace-events.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientTracking {
    /// Track; a server or ACL that refuses it leaves polling as it was.
    #[default]
    Auto,
    /// Poll every stream every time.
    Off,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
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
    fn urls_accepted_and_refused() {
        let endpoint = |url: &str| parse_url(url).map(|(e, _, _)| e);
        let ok = |host: &str, port, tls, db| {
            Ok(Endpoint {
                host: host.into(),
                port,
                tls,
                db,
            })
        };
        assert_eq!(endpoint("redis://10.0.0.1"), ok("10.0.0.1", 6379, false, 0));
        assert_eq!(endpoint("redis://h:6380/"), ok("h", 6380, false, 0));
        assert_eq!(endpoint("rediss://h/15"), ok("h", 6379, true, 15));
        assert_eq!(
            endpoint("redis://Redis-1.Example:7000/2?protocol=resp3#x"),
            ok("Redis-1.Example", 7000, false, 2)
        );
        assert_eq!(endpoint("redis://[::1]"), ok("::1", 6379, false, 0));
        let (_, user, password) = parse_url("redis://:p%3Aw@h").unwrap();
        assert_eq!(
            (user, password.map(|p| p.expose().to_string())),
            (None, Some("p:w".into()))
        );
        let (_, user, password) = parse_url("redis://reader@h").unwrap();
        assert_eq!((user.as_deref(), password), (Some("reader"), None));
        for (url, message) in [
            ("http://h", "must start with redis:// or rediss://"),
            ("REDIS://h", "must start with redis:// or rediss://"),
            ("redis:h", "must start with redis:// or rediss://"),
            (
                "unix:///tmp/redis.sock",
                "must start with redis:// or rediss://",
            ),
            (
                "redis+sentinel://h",
                "must start with redis:// or rediss://",
            ),
            ("redis://", "has no host"),
            ("redis://u:p@/0", "has no host"),
            ("redis://h:99999", "has an invalid port"),
            ("redis://h:port", "has an invalid port"),
            ("redis://h/x", "has a database path that is not a number"),
            ("redis://h/-1", "has a database path that is not a number"),
            ("redis://h/1/2", "has a database path that is not a number"),
            ("redis://h\nINFO:6379", "has a space or a control character"),
            ("redis://h st:6379", "has a space or a control character"),
        ] {
            assert_eq!(endpoint(url), Err(message.to_string()), "{url:?}");
        }
    }
}
