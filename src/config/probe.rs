//! Multi-target settings: `[probe]` (which Redis URLs `/probe` may poll, for
//! how long, how many) and `[auth_modules.<name>]` (the credentials and TLS
//! a probe names), and [`Config::probe_target`], which turns a probe's
//! `target` and `auth_module` parameters into a [`Target`] or says why not,
//! before anything is dialled.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{
    Config, DEFAULT_MAX_STREAMS, DEFAULT_SCAN_COUNT, Endpoint, KeyspaceEvents, Mode, RedisTls,
    Secret, Target,
};
use crate::glob::Glob;

/// Default time a probed target is kept polling without a probe.
pub const DEFAULT_TARGET_TTL: Duration = Duration::from_secs(300);
/// Default cap on targets polled for `/probe` at once.
pub const DEFAULT_MAX_PROBED_TARGETS: usize = 100;
/// Default time the first probe of a target waits for its first collection.
/// Below Prometheus's default scrape timeout (10 s), so the answer arrives.
pub const DEFAULT_FIRST_COLLECTION_WAIT: Duration = Duration::from_secs(5);
/// Longest `target` parameter accepted.
pub const MAX_PROBE_URL_LEN: usize = 1024;

/// `[probe]`: the multi-target endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSettings {
    /// Globs over the canonical URL (`redis://host:port`, `/db` when not 0);
    /// empty: `/probe` is off.
    pub allowed_targets: Vec<Glob>,
    /// A probed target not probed for this long is dropped.
    pub target_ttl: Duration,
    /// Targets polled for `/probe` at once; a probe of one more is refused.
    pub max_targets: usize,
    /// How long the first probe of a target waits for its first collection.
    pub first_collection_wait: Duration,
}

impl Default for ProbeSettings {
    fn default() -> Self {
        ProbeSettings {
            allowed_targets: Vec::new(),
            target_ttl: DEFAULT_TARGET_TTL,
            max_targets: DEFAULT_MAX_PROBED_TARGETS,
            first_collection_wait: DEFAULT_FIRST_COLLECTION_WAIT,
        }
    }
}

/// `[auth_modules.<name>]`: how to log in to a probed target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthModule {
    /// ACL user.
    pub username: Option<String>,
    /// Password.
    pub password: Option<Secret>,
    /// TLS for `rediss://` targets.
    pub tls: RedisTls,
    /// Whether probed targets subscribe to keyspace events.
    pub keyspace_events: KeyspaceEvents,
}

/// Auth modules by name.
pub type AuthModules = BTreeMap<String, Arc<AuthModule>>;

/// Why a probe is refused. Nothing has been dialled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeRefusal {
    /// `[probe] allowed_targets` is empty.
    Disabled,
    /// No `target` parameter.
    MissingTarget,
    /// The URL cannot be parsed, or has parts a probe does not take.
    BadUrl(String),
    /// The URL carries a user or password.
    Credentials,
    /// No glob of `allowed_targets` matches.
    NotAllowed(String),
    /// No such auth module.
    UnknownAuthModule(String),
    /// The auth module has TLS settings and the URL is `redis://`.
    TlsNeedsRediss(String),
}

impl ProbeRefusal {
    /// A short label for the refusal counter.
    pub fn label(&self) -> &'static str {
        match self {
            ProbeRefusal::Disabled => "disabled",
            ProbeRefusal::MissingTarget | ProbeRefusal::BadUrl(_) => "bad_target",
            ProbeRefusal::Credentials => "credentials_in_url",
            ProbeRefusal::NotAllowed(_) => "not_allowed",
            ProbeRefusal::UnknownAuthModule(_) | ProbeRefusal::TlsNeedsRediss(_) => "auth_module",
        }
    }
}

impl fmt::Display for ProbeRefusal {
    /// Never repeats the URL as given (it may hold a password).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeRefusal::Disabled => f.write_str(
                "/probe is off: [probe] allowed_targets is empty in the exporter's configuration",
            ),
            ProbeRefusal::MissingTarget => {
                f.write_str("the target parameter is required (a redis:// or rediss:// URL)")
            }
            ProbeRefusal::BadUrl(why) => write!(f, "target: {why}"),
            ProbeRefusal::Credentials => f.write_str(
                "target: a URL with a user or password is refused; credentials come only from [auth_modules.<name>], named by the auth_module parameter",
            ),
            ProbeRefusal::NotAllowed(url) => write!(
                f,
                "target {url} matches no glob of [probe] allowed_targets; it was not dialled"
            ),
            ProbeRefusal::UnknownAuthModule(name) => {
                write!(f, "auth_module {name:?} is not configured")
            }
            ProbeRefusal::TlsNeedsRediss(name) => write!(
                f,
                "auth_module {name:?} has TLS settings; probe a rediss:// URL with it"
            ),
        }
    }
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

impl Config {
    /// The target a probe asks for: `url` must be a `redis://` or
    /// `rediss://` URL without credentials, query or fragment whose
    /// canonical form matches an `allowed_targets` glob; its credentials and
    /// TLS come from `auth_module` (none without one). Returns the canonical
    /// URL and the target, named after its address and watching every
    /// stream, polled with the daemon's schedule and limits.
    ///
    /// # Errors
    /// Why the probe is refused; nothing was dialled.
    pub fn probe_target(
        &self,
        url: Option<&str>,
        auth_module: Option<&str>,
    ) -> Result<(String, Target), ProbeRefusal> {
        if self.probe.allowed_targets.is_empty() {
            return Err(ProbeRefusal::Disabled);
        }
        let url = url
            .filter(|u| !u.is_empty())
            .ok_or(ProbeRefusal::MissingTarget)?;
        if url.len() > MAX_PROBE_URL_LEN {
            return Err(ProbeRefusal::BadUrl(format!(
                "longer than {MAX_PROBE_URL_LEN} bytes"
            )));
        }
        if url.contains('@') {
            return Err(ProbeRefusal::Credentials);
        }
        if url.contains(['?', '#']) {
            return Err(ProbeRefusal::BadUrl(
                "a query or fragment is not accepted".into(),
            ));
        }
        let (endpoint, _, _) = super::validate::parse_url(url).map_err(ProbeRefusal::BadUrl)?;
        // Only what a DNS name or an IP address is made of: the URL ends up
        // in log lines and answers, and comes from whoever can probe.
        let host_ok = endpoint
            .host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
        if !host_ok {
            return Err(ProbeRefusal::BadUrl(
                "the host has characters no host name or IP address has".into(),
            ));
        }
        let canonical = endpoint.canonical_url();
        if !self
            .probe
            .allowed_targets
            .iter()
            .any(|g| g.matches(canonical.as_bytes()))
        {
            return Err(ProbeRefusal::NotAllowed(canonical));
        }
        let module = match auth_module.filter(|m| !m.is_empty()) {
            None => Arc::new(AuthModule::default()),
            Some(name) => self
                .auth_modules
                .get(name)
                .cloned()
                .ok_or_else(|| ProbeRefusal::UnknownAuthModule(name.to_string()))?,
        };
        if module.tls.is_configured() && !endpoint.tls {
            return Err(ProbeRefusal::TlsNeedsRediss(
                auth_module.unwrap_or_default().to_string(),
            ));
        }
        let target = Target {
            name: endpoint.address(),
            username: module.username.clone(),
            password: module.password.clone(),
            mode: Mode::Standalone,
            tls: module.tls.clone(),
            streams: Vec::new(),
            patterns: vec![Glob::new("*")],
            // Only the [stream_defaults] and [[streams]] filters apply.
            exclude_streams: Vec::new(),
            groups: Default::default(),
            max_streams: DEFAULT_MAX_STREAMS,
            scan_count: DEFAULT_SCAN_COUNT,
            keyspace_events: module.keyspace_events,
            endpoint,
        };
        Ok((canonical, target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CliOverrides, from_str};

    fn config(text: &str) -> Config {
        from_str("test.toml", text, &CliOverrides::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn off_without_allowed_targets() {
        let c = config("");
        assert_eq!(
            c.probe_target(Some("redis://10.0.0.1:6379"), None),
            Err(ProbeRefusal::Disabled)
        );
    }

    #[test]
    fn globs_match_the_canonical_url() {
        let c = config("[probe]\nallowed_targets = [\"redis://10.0.*:6379\"]\n");
        for ok in [
            "redis://10.0.0.1:6379",
            "redis://10.0.0.1",
            "redis://10.0.0.1:6379/0",
            "redis://10.0.0.1:6379/",
        ] {
            let (canonical, t) = c.probe_target(Some(ok), None).unwrap();
            assert_eq!(canonical, "redis://10.0.0.1:6379", "{ok}");
            assert_eq!(t.name, "10.0.0.1:6379");
            assert_eq!(t.patterns, vec![Glob::new("*")]);
        }
        for refused in [
            "redis://10.1.0.1:6379",
            "redis://10.0.0.1:6380",
            "redis://10.0.0.1:6379/1",
            "rediss://10.0.0.1:6379",
        ] {
            assert!(
                matches!(
                    c.probe_target(Some(refused), None),
                    Err(ProbeRefusal::NotAllowed(_))
                ),
                "{refused}"
            );
        }
    }

    #[test]
    fn ipv6_addresses_match_with_escaped_brackets() {
        let c = config("[probe]\nallowed_targets = [\"redis://\\\\[::1\\\\]:6379\"]\n");
        let (canonical, t) = c.probe_target(Some("redis://[::1]"), None).unwrap();
        assert_eq!(canonical, "redis://[::1]:6379");
        assert_eq!(t.name, "[::1]:6379");
        assert!(c.probe_target(Some("redis://[::2]:6379"), None).is_err());
    }

    #[test]
    fn credentials_query_and_junk_are_refused() {
        let c = config("[probe]\nallowed_targets = [\"*\"]\n");
        for url in [
            "redis://:secret@10.0.0.1:6379",
            "redis://user:secret@10.0.0.1:6379",
            "redis://user@10.0.0.1:6379",
        ] {
            let refusal = c.probe_target(Some(url), None).unwrap_err();
            assert_eq!(refusal, ProbeRefusal::Credentials);
            assert!(!refusal.to_string().contains("secret"));
        }
        assert!(matches!(
            c.probe_target(Some("redis://10.0.0.1:6379?protocol=resp3"), None),
            Err(ProbeRefusal::BadUrl(_))
        ));
        assert!(matches!(
            c.probe_target(Some("http://10.0.0.1:6379"), None),
            Err(ProbeRefusal::BadUrl(_))
        ));
        for forged in [
            "redis://host\nINFO forged line:6379",
            "redis://ho%0ast:6379",
            "redis://host\u{1b}[31m:6379",
        ] {
            assert!(
                matches!(
                    c.probe_target(Some(forged), None),
                    Err(ProbeRefusal::BadUrl(_))
                ),
                "{forged:?}"
            );
        }
        assert_eq!(c.probe_target(None, None), Err(ProbeRefusal::MissingTarget));
        assert_eq!(
            c.probe_target(Some(""), None),
            Err(ProbeRefusal::MissingTarget)
        );
    }

    #[test]
    fn credentials_and_tls_come_from_the_auth_module() {
        let c = from_str(
            "test.toml",
            "[probe]\nallowed_targets = [\"redis*://*\"]\n\
             [auth_modules.tls]\nusername = \"exporter\"\ntls_server_name = \"redis.internal\"\n\
             [auth_modules.plain]\nusername = \"reader\"\nkeyspace_events = \"off\"\n",
            &CliOverrides::default(),
        )
        .unwrap();
        let (_, t) = c
            .probe_target(Some("rediss://10.0.0.1:6380"), Some("tls"))
            .unwrap();
        assert_eq!(t.username.as_deref(), Some("exporter"));
        assert_eq!(t.tls.server_name.as_deref(), Some("redis.internal"));
        assert!(t.endpoint.tls);
        assert_eq!(t.keyspace_events, KeyspaceEvents::Auto);
        assert_eq!(
            c.probe_target(Some("redis://10.0.0.1:6380"), Some("tls")),
            Err(ProbeRefusal::TlsNeedsRediss("tls".into()))
        );
        let (_, t) = c
            .probe_target(Some("redis://10.0.0.1:6380"), Some("plain"))
            .unwrap();
        assert_eq!(t.username.as_deref(), Some("reader"));
        assert_eq!(t.keyspace_events, KeyspaceEvents::Off);
        assert_eq!(
            c.probe_target(Some("redis://10.0.0.1:6380"), Some("nope")),
            Err(ProbeRefusal::UnknownAuthModule("nope".into()))
        );
    }
}
