//! The values given on the command line, which override the file: kept
//! apart from the file's keys so that the validator applies them first.

use std::path::PathBuf;

/// Values given on the command line; they override the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CliOverrides {
    /// `--web.listen-address`.
    pub listen_address: Option<String>,
    /// `--web.telemetry-path`.
    pub telemetry_path: Option<String>,
    /// `--web.config.file`.
    pub web_config_file: Option<PathBuf>,
    /// `--log.format`.
    pub log_format: Option<String>,
    /// `--log.level`.
    pub log_level: Option<String>,
    /// `--redis.url`: the URL of the default target when the file names none.
    pub redis_url: Option<String>,
    /// `--web.enable-lifecycle`: serve `POST /-/reload`.
    pub enable_lifecycle: bool,
    /// `--web.max-connections`.
    pub max_connections: Option<i64>,
}
