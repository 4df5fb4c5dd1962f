//! The configuration file exactly as written: serde structs that reject
//! unknown keys and hold every value as given (durations as text, URLs as
//! text). Nothing outside `config` sees these types; [`super::validate`]
//! turns them into [`super::Config`].

// Field meanings are documented once, in config/example.toml, which a test
// loads; repeating them here would drift.
#![allow(missing_docs)]

use std::collections::BTreeMap;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub web: RawWeb,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub targets: Vec<RawTarget>,
    #[serde(default)]
    pub schedule: RawSchedule,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub metrics: RawMetrics,
    #[serde(default)]
    pub status: RawStatus,
    #[serde(default)]
    pub stream_defaults: RawStreamSettings,
    #[serde(default)]
    pub streams: Vec<RawStreamRule>,
    #[serde(default)]
    pub probe: RawMultiTarget,
    #[serde(default)]
    pub auth_modules: BTreeMap<String, RawAuthModule>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWeb {
    pub listen_address: Option<String>,
    pub telemetry_path: Option<String>,
    pub config_file: Option<String>,
    pub config_file_check_interval: Option<String>,
    pub max_connections: Option<i64>,
    pub max_tls_handshakes: Option<i64>,
    pub tls_handshake_timeout: Option<String>,
    pub header_read_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    pub max_header_bytes: Option<i64>,
    pub max_body_bytes: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    pub format: Option<String>,
    pub level: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub name: Option<String>,
    pub url: Option<String>,
    pub username: Option<String>,
    pub password_env: Option<String>,
    pub password_file: Option<String>,
    pub mode: Option<String>,
    pub cluster_nodes: Option<Vec<String>>,
    pub sentinels: Option<Vec<String>>,
    pub master_name: Option<String>,
    pub sentinel_username: Option<String>,
    pub sentinel_password_env: Option<String>,
    pub sentinel_password_file: Option<String>,
    pub tls_ca_file: Option<String>,
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
    pub tls_server_name: Option<String>,
    pub tls_insecure_skip_verify: Option<bool>,
    #[serde(default)]
    pub streams: Vec<String>,
    #[serde(default)]
    pub patterns: Vec<String>,
    #[serde(default)]
    pub exclude_streams: Vec<String>,
    #[serde(default)]
    pub include_groups: Vec<String>,
    #[serde(default)]
    pub exclude_groups: Vec<String>,
    pub max_streams: Option<i64>,
    pub max_groups: Option<i64>,
    pub scan_count: Option<i64>,
    pub keyspace_events: Option<String>,
    pub client_tracking: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSchedule {
    pub discovery: Option<String>,
    pub info: Option<String>,
    pub stream: Option<String>,
    pub pending_summary: Option<String>,
    pub consumers: Option<String>,
    pub pending_scan: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub commands_per_second: Option<i64>,
    pub pending_entries_per_second: Option<i64>,
    pub pending_page: Option<i64>,
    pub command_timeout: Option<String>,
    pub pipeline_size: Option<i64>,
    pub lag_exact_count: Option<i64>,
    pub ghost_checks_per_scan: Option<i64>,
    pub priority: Option<Vec<String>>,
    pub min_share: Option<BTreeMap<String, f64>>,
    pub page_target: Option<String>,
    pub min_page: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub max_consumers_per_group: Option<i64>,
    pub max_groups_per_stream: Option<i64>,
    pub max_label_value_bytes: Option<i64>,
    pub pending_idle_buckets: Option<Vec<String>>,
    pub delivery_count_buckets: Option<Vec<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStatus {
    pub window: Option<i64>,
    pub data_loss_hold: Option<String>,
    pub state_file: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStreamSettings {
    pub max_delay: Option<String>,
    pub read_every: Option<String>,
    pub trimming: Option<String>,
    pub dead_letter: Option<String>,
    pub poison_delivery_count: Option<i64>,
    pub consumer_inactive_after: Option<String>,
    pub exclude_streams: Option<Vec<String>>,
    pub include_groups: Option<Vec<String>>,
    pub exclude_groups: Option<Vec<String>>,
    pub series: Option<String>,
    pub consumer_names: Option<Vec<RawConsumerRename>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStreamRule {
    #[serde(rename = "match")]
    pub pattern: Option<String>,
    pub max_delay: Option<String>,
    pub read_every: Option<String>,
    pub trimming: Option<String>,
    pub dead_letter: Option<String>,
    pub poison_delivery_count: Option<i64>,
    pub consumer_inactive_after: Option<String>,
    pub exclude_streams: Option<Vec<String>>,
    pub include_groups: Option<Vec<String>>,
    pub exclude_groups: Option<Vec<String>>,
    pub series: Option<String>,
    pub consumer_names: Option<Vec<RawConsumerRename>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConsumerRename {
    pub regex: Option<String>,
    pub replacement: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMultiTarget {
    #[serde(default)]
    pub allowed_targets: Vec<String>,
    pub target_ttl: Option<String>,
    pub max_targets: Option<i64>,
    pub first_collection_wait: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuthModule {
    pub username: Option<String>,
    pub password_env: Option<String>,
    pub password_file: Option<String>,
    pub tls_ca_file: Option<String>,
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
    pub tls_server_name: Option<String>,
    pub tls_insecure_skip_verify: Option<bool>,
    pub keyspace_events: Option<String>,
    pub client_tracking: Option<String>,
}
