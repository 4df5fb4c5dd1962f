//! How the exporter reaches a Redis server, as targets and auth modules
//! both say it: the URL, secrets from the environment or a file, the
//! `tls_*` keys, `host:port` lists and `keyspace_events`.

use super::validator::Validator;
use crate::config::tls::TlsKeys;
use crate::config::*;

impl Validator {
    /// The `tls_*` keys of a target or auth module, files read and checked.
    pub(super) fn tls(&mut self, key: &str, keys: TlsKeys) -> RedisTls {
        let mut found = Vec::new();
        let tls = crate::config::tls::load(keys, &mut |k, message| {
            found.push((format!("{key}.{k}"), message));
        });
        for (k, message) in found {
            self.problem(k, message);
        }
        tls
    }

    /// `<key>.keyspace_events`: `"auto"` (the default) or `"off"`.
    pub(super) fn keyspace_events(&mut self, key: &str, raw: Option<String>) -> KeyspaceEvents {
        match raw.as_deref() {
            None | Some("auto") => KeyspaceEvents::Auto,
            Some("off") => KeyspaceEvents::Off,
            Some(other) => {
                self.problem(
                    format!("{key}.keyspace_events"),
                    format!("must be \"auto\" or \"off\", not {other:?}"),
                );
                KeyspaceEvents::Auto
            }
        }
    }

    pub(super) fn host_port(&mut self, key: &str, value: &str) {
        let ok = value
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !ok {
            self.problem(key, format!("{value:?} is not host:port"));
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
                self.problem(
                    format!("{key}.{prefix}_env"),
                    format!("set either {prefix}_env or {prefix}_file, not both"),
                );
                None
            }
            (Some(var), None) => match std::env::var(&var) {
                Ok(v) => Some(Secret::new(v)),
                Err(_) => {
                    self.problem(
                        format!("{key}.{prefix}_env"),
                        format!("environment variable {var} is not set"),
                    );
                    None
                }
            },
            (None, Some(path)) => match std::fs::read_to_string(&path) {
                Ok(v) => Some(Secret::new(v.trim_end_matches(['\r', '\n']))),
                Err(e) => {
                    self.problem(
                        format!("{key}.{prefix}_file"),
                        format!("cannot read {path}: {e}"),
                    );
                    None
                }
            },
            (None, None) => None,
        }
    }
}

/// A target URL's endpoint, user and password.
pub(in crate::config) type ParsedUrl = (Endpoint, Option<String>, Option<Secret>);

/// Reads `redis[s]://[user[:password]@]host[:port][/db]` with the `url`
/// crate; a query or fragment is ignored. Messages never include the URL,
/// which may carry a password.
pub(in crate::config) fn parse_url(text: &str) -> Result<ParsedUrl, String> {
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
