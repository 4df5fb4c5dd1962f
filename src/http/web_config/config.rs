//! The web config file: as written (the toolkit's keys, unknown ones refused
//! as the toolkit refuses them), the validated settings it becomes (hashes,
//! headers and the rate limit checked, certificates loaded, paths taken from
//! the file's directory as the toolkit takes them), and its fingerprint,
//! which tells that it or a file it names changed.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::str::FromStr as _;
use std::sync::Arc;

use serde::Deserialize;

use super::auth::{BasicAuth, RateLimit};
use super::tls;

/// The headers the toolkit lets a web config add, with the only values it
/// accepts where it restricts them.
const ALLOWED_HEADERS: [(&str, &[&str]); 5] = [
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// Why the web config file is unusable.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct WebConfigError {
    file: String,
    problem: String,
}

/// The validated web config.
#[derive(Clone, Default)]
pub struct WebConfig {
    /// TLS, when configured.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Basic auth, when users are configured.
    pub auth: Option<Arc<BasicAuth>>,
    /// The request rate limit, when configured.
    pub rate_limit: Option<Arc<RateLimit>>,
    /// Extra response headers.
    pub headers: Vec<(axum::http::HeaderName, axum::http::HeaderValue)>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("auth_users", &self.auth.as_ref().map(|a| a.users()))
            .field("rate_limit", &self.rate_limit.is_some())
            .field("headers", &self.headers.len())
            .finish()
    }
}

/// Loads and validates a web config file. Relative paths inside it are
/// relative to the file's directory, as in the toolkit.
///
/// # Errors
/// When the file cannot be read or parsed, a certificate or key cannot be
/// loaded, a hash is not bcrypt, or a value is not supported.
pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
    let fail = |problem: String| WebConfigError {
        file: path.display().to_string(),
        problem,
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read the file: {e}")))?;
    let raw = parse(&text).map_err(fail)?;
    let base = path.parent().unwrap_or(Path::new("."));
    build(base, raw).map_err(fail)
}

fn build(base: &Path, raw: RawWebConfig) -> Result<WebConfig, String> {
    let tls = match &raw.tls_server_config {
        Some(t) if t.enabled() => Some(tls::server_config(base, t)?),
        _ => None,
    };
    for (user, hash) in &raw.basic_auth_users {
        // Parsing the hash validates it without verifying anything.
        if bcrypt::HashParts::from_str(hash).is_err() {
            return Err(format!("basic_auth_users.{user}: not a bcrypt hash"));
        }
    }
    let auth =
        (!raw.basic_auth_users.is_empty()).then(|| Arc::new(BasicAuth::new(raw.basic_auth_users)));
    let rate_limit = match raw.rate_limit {
        None => None,
        Some(r) => rate_limit(r)?,
    };
    let mut headers = Vec::new();
    if let Some(http) = raw.http_server_config {
        if http.http2 == Some(true) {
            return Err(
                "http_server_config.http2: HTTP/2 is not supported (set false or leave it out)"
                    .into(),
            );
        }
        for (name, value) in http.headers {
            let Some((_, allowed)) = ALLOWED_HEADERS.iter().find(|(n, _)| *n == name) else {
                return Err(format!(
                    "http_server_config.headers: {name:?} cannot be configured (only {})",
                    ALLOWED_HEADERS.map(|(n, _)| n).join(", ")
                ));
            };
            // Blank means unset, as in the toolkit.
            if value.is_empty() {
                continue;
            }
            if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
                return Err(format!(
                    "http_server_config.headers.{name}: {value:?} is not one of {allowed:?}"
                ));
            }
            let n = axum::http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("http_server_config.headers: invalid header name {name:?}"))?;
            let v = axum::http::HeaderValue::from_str(&value)
                .map_err(|_| format!("http_server_config.headers.{name}: invalid value"))?;
            headers.push((n, v));
        }
    }
    Ok(WebConfig {
        tls,
        auth,
        rate_limit,
        headers,
    })
}

fn rate_limit(r: RawRateLimit) -> Result<Option<Arc<RateLimit>>, String> {
    let interval = match r.interval.as_deref() {
        None | Some("") | Some("0") => return Ok(None),
        Some(text) => humantime::parse_duration(text).map_err(|e| {
            format!("rate_limit.interval: {text:?} is not a duration such as \"100ms\": {e}")
        })?,
    };
    if interval.is_zero() {
        return Ok(None);
    }
    match r.burst {
        Some(b) if b >= 1 && b <= i64::from(u32::MAX) => {
            Ok(Some(RateLimit::new(interval, b as u32)))
        }
        Some(b) => Err(format!("rate_limit.burst: must be at least 1, not {b}")),
        None => Err("rate_limit.burst: required with an interval".into()),
    }
}

/// The web config file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebConfig {
    tls_server_config: Option<tls::RawTls>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
    http_server_config: Option<RawHttp>,
    rate_limit: Option<RawRateLimit>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    #[serde(default)]
    headers: BTreeMap<String, String>,
    http2: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    interval: Option<String>,
    burst: Option<i64>,
}

fn parse(text: &str) -> Result<RawWebConfig, String> {
    if text.trim().is_empty() {
        return Ok(RawWebConfig::default());
    }
    serde_norway::from_str(text).map_err(|e| e.to_string())
}

/// A fingerprint of the web config file and every file it names: when it
/// changes, the config is loaded again. Unreadable files count by their
/// error, so a file that appears or vanishes is a change too.
pub(super) fn fingerprint(path: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    let mut add = |p: &Path| match std::fs::read(p) {
        Ok(bytes) => bytes.hash(&mut h),
        Err(e) => e.kind().hash(&mut h),
    };
    add(path);
    if let Ok(text) = std::fs::read_to_string(path) {
        if let Ok(RawWebConfig {
            tls_server_config: Some(t),
            ..
        }) = parse(&text)
        {
            let base = path.parent().unwrap_or(Path::new("."));
            for file in t.files(base) {
                add(&file);
            }
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_unknown_keys_bad_hashes_and_headers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("web.yml");
        let err = |text: &str| {
            std::fs::write(&p, text).unwrap();
            load(&p).unwrap_err().to_string()
        };
        assert!(
            err("basic_auth_users:\n  u: plaintext\n")
                .contains("basic_auth_users.u: not a bcrypt hash")
        );
        assert!(err("tls_config:\n  cert_file: x\n").contains("unknown field `tls_config`"));
        assert!(
            err("http_server_config:\n  headers:\n    Server: x\n")
                .contains("http_server_config.headers: \"Server\" cannot be configured")
        );
        assert!(
            err("http_server_config:\n  headers:\n    X-Frame-Options: allow\n")
                .contains("http_server_config.headers.X-Frame-Options: \"allow\" is not one of")
        );
        assert!(err("rate_limit:\n  interval: 1s\n").contains("rate_limit.burst: required"));
        assert!(err("rate_limit:\n  interval: soon\n  burst: 1\n").contains("rate_limit.interval"));
    }

    #[test]
    fn accepts_an_empty_file_and_an_empty_tls_section() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("web.yml");
        std::fs::write(&p, "").unwrap();
        assert!(load(&p).unwrap().tls.is_none());
        std::fs::write(
            &p,
            "tls_server_config: {}\nrate_limit:\n  interval: 0s\n  burst: 0\nhttp_server_config:\n  http2: false\n  headers:\n    X-XSS-Protection: \"\"\n",
        )
        .unwrap();
        let c = load(&p).unwrap();
        assert!(c.tls.is_none() && c.rate_limit.is_none() && c.headers.is_empty());
    }
}
