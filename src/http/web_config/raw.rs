//! The web config file as written: the toolkit's keys, unknown ones refused
//! as the toolkit refuses them, before anything is checked or loaded.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::tls;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWebConfig {
    pub(super) tls_server_config: Option<tls::RawTls>,
    #[serde(default)]
    pub(super) basic_auth_users: BTreeMap<String, String>,
    pub(super) http_server_config: Option<RawHttp>,
    pub(super) rate_limit: Option<RawRateLimit>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttp {
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) http2: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRateLimit {
    pub(super) interval: Option<String>,
    pub(super) burst: Option<i64>,
}

pub(super) fn parse(text: &str) -> Result<RawWebConfig, String> {
    if text.trim().is_empty() {
        return Ok(RawWebConfig::default());
    }
    serde_norway::from_str(text).map_err(|e| e.to_string())
}
