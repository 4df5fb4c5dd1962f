//! Multi-target settings: `[probe]` (which Redis URLs `/probe` may poll, for
//! how long, how many) and `[auth_modules.<name>]` (the credentials and TLS
//! a probe names), and [`MultiTargetSettings::probe_target`], which turns a
//! probe's `target` and `auth_module` parameters into a [`Target`] or says
//! why not, before anything is dialled.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::target::{
    ClientTracking, DEFAULT_MAX_GROUPS, DEFAULT_MAX_STREAMS, DEFAULT_SCAN_COUNT, KeyspaceEvents,
    Mode, Secret, Target, parse_url,
};
use super::tls::RedisTls;
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
pub struct MultiTargetSettings {
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

impl Default for MultiTargetSettings {
    fn default() -> Self {
        MultiTargetSettings {
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
    /// Whether probed targets' poll connections track what they read.
    pub client_tracking: ClientTracking,
}

/// Auth modules by name.
pub type AuthModules = BTreeMap<String, Arc<AuthModule>>;

/// Why a probe is refused. Nothing has been dialled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultiTargetRefusal {
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

impl MultiTargetRefusal {
    /// A short label for the refusal counter.
    pub fn label(&self) -> &'static str {
        match self {
            MultiTargetRefusal::Disabled => "disabled",
            MultiTargetRefusal::MissingTarget | MultiTargetRefusal::BadUrl(_) => "bad_target",
            MultiTargetRefusal::Credentials => "credentials_in_url",
            MultiTargetRefusal::NotAllowed(_) => "not_allowed",
            MultiTargetRefusal::UnknownAuthModule(_) | MultiTargetRefusal::TlsNeedsRediss(_) => {
                "auth_module"
            }
        }
    }
}

impl fmt::Display for MultiTargetRefusal {
    /// Never repeats the URL as given (it may hold a password).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MultiTargetRefusal::Disabled => f.write_str(
                "/probe is off: [probe] allowed_targets is empty in the exporter's configuration",
            ),
            MultiTargetRefusal::MissingTarget => {
                f.write_str("the target parameter is required (a redis:// or rediss:// URL)")
            }
            MultiTargetRefusal::BadUrl(why) => write!(f, "target: {why}"),
            MultiTargetRefusal::Credentials => f.write_str(
                "target: a URL with a user or password is refused; credentials come only from [auth_modules.<name>], named by the auth_module parameter",
            ),
            MultiTargetRefusal::NotAllowed(url) => write!(
                f,
                "target {url} matches no glob of [probe] allowed_targets; it was not dialled"
            ),
            MultiTargetRefusal::UnknownAuthModule(name) => {
                write!(f, "auth_module {name:?} is not configured")
            }
            MultiTargetRefusal::TlsNeedsRediss(name) => write!(
                f,
                "auth_module {name:?} has TLS settings; probe a rediss:// URL with it"
            ),
        }
    }
}

/// One spelling of a probed host, so that the ways of writing one server
/// match `allowed_targets` globs alike and share one name (and one
/// `max_targets` slot): the resolver the exporter dials through takes
/// `127.1`, `127.0.1`, `2130706433`, `0x7f.0.0.1` and `0177.0.0.1` for
/// 127.0.0.1 (the forms of `inet_aton`), and a name with or without its
/// final dot, in any case.
///
/// - An IPv4 address in any of those forms: the dotted quad.
/// - A host whose last label is a number but that is no IPv4 address
///   (`10.0.0.256`): refused, as URL parsers of browsers refuse it.
/// - An IPv6 address: its RFC 5952 form; one mapping an IPv4 address
///   (`::ffff:127.0.0.1`): that IPv4 address.
/// - A DNS name: lower case, without a final dot. Names are not resolved
///   (`localhost` stays `localhost`): a glob over addresses matches
///   addresses written as such.
fn canonical_host(host: &str) -> Result<String, String> {
    if host.contains(':') {
        let ip: std::net::Ipv6Addr = host
            .parse()
            .map_err(|_| "the host is not a valid IPv6 address".to_string())?;
        return Ok(match ip.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => ip.to_string(),
        });
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.is_empty() || name.contains("..") || name.starts_with('.') || name.ends_with('.') {
        return Err("the host has an empty label".into());
    }
    // As browsers decide it: a last label of digits (or 0x and hex digits)
    // makes an IPv4 address or nothing.
    let last = name.rsplit('.').next().unwrap_or(name);
    let hex = last
        .strip_prefix("0x")
        .or_else(|| last.strip_prefix("0X"))
        .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
    if hex || last.chars().all(|c| c.is_ascii_digit()) {
        return inet_aton(name)
            .map(|ip| ip.to_string())
            .ok_or_else(|| "the host ends in a number but is no IPv4 address".into());
    }
    Ok(name.to_ascii_lowercase())
}

/// One part of an IPv4 address as `inet_aton` reads it: decimal, octal
/// (leading 0) or hexadecimal (`0x`).
fn inet_aton_part(part: &str) -> Option<u64> {
    let (digits, radix) = match part.as_bytes() {
        [b'0', b'x' | b'X', ..] => (&part[2..], 16),
        [b'0', _, ..] => (&part[1..], 8),
        _ => (part, 10),
    };
    if part.len() > 2 && radix == 16 && digits.is_empty() {
        return None;
    }
    if digits.is_empty() {
        // "0" and "0x" are both 0 to inet_aton.
        return (part == "0" || part.eq_ignore_ascii_case("0x")).then_some(0);
    }
    if digits.len() > 16 || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// An IPv4 address in one of the forms `inet_aton` takes: `a.b.c.d`,
/// `a.b.c` (c fills 16 bits), `a.b` (b fills 24) or `a` (32 bits).
fn inet_aton(text: &str) -> Option<std::net::Ipv4Addr> {
    let parts = text
        .split('.')
        .map(inet_aton_part)
        .collect::<Option<Vec<u64>>>()?;
    let (last, leading) = parts.split_last()?;
    if leading.len() > 3 || leading.iter().any(|&p| p > 255) {
        return None;
    }
    let bits = 8 * (4 - leading.len() as u32);
    if *last >= 1u64 << bits {
        return None;
    }
    let value = leading
        .iter()
        .fold(0u64, |acc, &p| (acc << 8) | p)
        .checked_shl(bits)?
        | last;
    Some(std::net::Ipv4Addr::from(u32::try_from(value).ok()?))
}

impl MultiTargetSettings {
    /// The target a probe asks for: `url` must be a `redis://` or
    /// `rediss://` URL without credentials, query or fragment whose
    /// canonical form matches an `allowed_targets` glob; its credentials and
    /// TLS come from `auth_module`, one of `auth_modules` (none without
    /// one). Returns the canonical URL and the target, named after its
    /// address and watching every stream, polled with the daemon's schedule
    /// and limits.
    ///
    /// # Errors
    /// Why the probe is refused; nothing was dialled.
    pub fn probe_target(
        &self,
        auth_modules: &AuthModules,
        url: Option<&str>,
        auth_module: Option<&str>,
    ) -> Result<(String, Target), MultiTargetRefusal> {
        if self.allowed_targets.is_empty() {
            return Err(MultiTargetRefusal::Disabled);
        }
        let url = url
            .filter(|u| !u.is_empty())
            .ok_or(MultiTargetRefusal::MissingTarget)?;
        if url.len() > MAX_PROBE_URL_LEN {
            return Err(MultiTargetRefusal::BadUrl(format!(
                "longer than {MAX_PROBE_URL_LEN} bytes"
            )));
        }
        if url.contains('@') {
            return Err(MultiTargetRefusal::Credentials);
        }
        if url.contains(['?', '#']) {
            return Err(MultiTargetRefusal::BadUrl(
                "a query or fragment is not accepted".into(),
            ));
        }
        let (mut endpoint, _, _) = parse_url(url).map_err(MultiTargetRefusal::BadUrl)?;
        // Only what a DNS name or an IP address is made of: the URL ends up
        // in log lines and answers, and comes from whoever can probe.
        let host_ok = endpoint
            .host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
        if !host_ok {
            return Err(MultiTargetRefusal::BadUrl(
                "the host has characters no host name or IP address has".into(),
            ));
        }
        endpoint.host = canonical_host(&endpoint.host).map_err(MultiTargetRefusal::BadUrl)?;
        let canonical = endpoint.canonical_url();
        if !self
            .allowed_targets
            .iter()
            .any(|g| g.matches(canonical.as_bytes()))
        {
            return Err(MultiTargetRefusal::NotAllowed(canonical));
        }
        let module = match auth_module.filter(|m| !m.is_empty()) {
            None => Arc::new(AuthModule::default()),
            Some(name) => auth_modules
                .get(name)
                .cloned()
                .ok_or_else(|| MultiTargetRefusal::UnknownAuthModule(name.to_string()))?,
        };
        if module.tls.is_configured() && !endpoint.tls {
            return Err(MultiTargetRefusal::TlsNeedsRediss(
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
            max_groups: DEFAULT_MAX_GROUPS,
            scan_count: DEFAULT_SCAN_COUNT,
            keyspace_events: module.keyspace_events,
            client_tracking: module.client_tracking,
            endpoint,
        };
        Ok((canonical, target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::loading::from_str;
    use crate::config::validate::CliOverrides;
    use crate::config::whole::Config;

    fn config(text: &str) -> Config {
        from_str("test.toml", text, &CliOverrides::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn off_without_allowed_targets() {
        let c = config("");
        assert_eq!(
            c.probe_target(Some("redis://10.0.0.1:6379"), None),
            Err(MultiTargetRefusal::Disabled)
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
                    Err(MultiTargetRefusal::NotAllowed(_))
                ),
                "{refused}"
            );
        }
    }

    /// Every spelling of one server is one canonical URL: one glob match,
    /// one name, one `max_targets` slot.
    #[test]
    fn spellings_of_one_address_are_one_target() {
        let c = config(
            "[probe]\nallowed_targets = [\"redis://127.0.*:6379\", \"redis://localhost:6379\"]\n",
        );
        for spelling in [
            "redis://127.0.0.1:6379",
            "redis://127.0.1:6379",
            "redis://127.1",
            "redis://127.0.0.1.:6379",
            "redis://2130706433",
            "redis://0x7f.0.0.1",
            "redis://0177.0.0.01",
            "redis://0x7F000001:6379",
            "redis://[::ffff:127.0.0.1]:6379",
        ] {
            let (canonical, t) = c
                .probe_target(Some(spelling), None)
                .unwrap_or_else(|e| panic!("{spelling}: {e}"));
            assert_eq!(canonical, "redis://127.0.0.1:6379", "{spelling}");
            assert_eq!(t.name, "127.0.0.1:6379", "{spelling}");
            assert_eq!(t.endpoint.host, "127.0.0.1", "{spelling}");
        }
        for spelling in [
            "redis://localhost",
            "redis://LOCALHOST.:6379",
            "redis://LocalHost",
        ] {
            let (canonical, t) = c.probe_target(Some(spelling), None).unwrap();
            assert_eq!(canonical, "redis://localhost:6379", "{spelling}");
            assert_eq!(t.name, "localhost:6379");
        }
        // Written in the glob's range, but another address: refused.
        for outside in [
            "redis://127.0.0.256",
            "redis://127.0.65536",
            "redis://127.0.0.1.2",
            "redis://127.0.0.1..",
            "redis://0x7f.0.0.1.5",
            "redis://127.0.0.09",
        ] {
            assert!(
                matches!(
                    c.probe_target(Some(outside), None),
                    Err(MultiTargetRefusal::BadUrl(_) | MultiTargetRefusal::NotAllowed(_))
                ),
                "{outside}: {:?}",
                c.probe_target(Some(outside), None)
            );
        }
        // 127.0.65535 is 127.0.255.255: inside the glob, named so.
        let (canonical, _) = c.probe_target(Some("redis://127.0.65535"), None).unwrap();
        assert_eq!(canonical, "redis://127.0.255.255:6379");
        // Another address in a short form does not pass the glob.
        assert!(matches!(
            c.probe_target(Some("redis://127.65536"), None),
            Err(MultiTargetRefusal::NotAllowed(u)) if u == "redis://127.1.0.0:6379"
        ));
        assert_eq!(
            canonical_host("[::1]".trim_matches(['[', ']'])).unwrap(),
            "::1"
        );
        assert_eq!(canonical_host("0:0:0:0:0:0:0:1").unwrap(), "::1");
        assert_eq!(
            canonical_host("Redis.Example.COM.").unwrap(),
            "redis.example.com"
        );
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
            assert_eq!(refusal, MultiTargetRefusal::Credentials);
            assert!(!refusal.to_string().contains("secret"));
        }
        assert!(matches!(
            c.probe_target(Some("redis://10.0.0.1:6379?protocol=resp3"), None),
            Err(MultiTargetRefusal::BadUrl(_))
        ));
        assert!(matches!(
            c.probe_target(Some("http://10.0.0.1:6379"), None),
            Err(MultiTargetRefusal::BadUrl(_))
        ));
        for forged in [
            "redis://host\nINFO forged line:6379",
            "redis://ho%0ast:6379",
            "redis://host\u{1b}[31m:6379",
        ] {
            assert!(
                matches!(
                    c.probe_target(Some(forged), None),
                    Err(MultiTargetRefusal::BadUrl(_))
                ),
                "{forged:?}"
            );
        }
        assert_eq!(
            c.probe_target(None, None),
            Err(MultiTargetRefusal::MissingTarget)
        );
        assert_eq!(
            c.probe_target(Some(""), None),
            Err(MultiTargetRefusal::MissingTarget)
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
            Err(MultiTargetRefusal::TlsNeedsRediss("tls".into()))
        );
        let (_, t) = c
            .probe_target(Some("redis://10.0.0.1:6380"), Some("plain"))
            .unwrap();
        assert_eq!(t.username.as_deref(), Some("reader"));
        assert_eq!(t.keyspace_events, KeyspaceEvents::Off);
        assert_eq!(
            c.probe_target(Some("redis://10.0.0.1:6380"), Some("nope")),
            Err(MultiTargetRefusal::UnknownAuthModule("nope".into()))
        );
    }
}
