//! Command-line flags. They override the configuration file for the common
//! keys; everything else lives in the file (see `config/example.toml`).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::CliOverrides;

/// What `--version` prints after the name: version, git revision and build date, the values of
/// `redis_streams_exporter_build_info` (both set by build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("RSE_GIT_REVISION"),
    ", built ",
    env!("RSE_BUILD_DATE"),
    ")"
);

/// Prometheus exporter for Redis Streams used as message queues.
#[derive(Debug, Parser)]
#[command(name = "redis-streams-exporter", version = VERSION, about, long_about = None)]
pub struct Cli {
    /// Configuration file (TOML). Without it, redis://127.0.0.1:6379 is
    /// watched and every stream is discovered.
    #[arg(long, env = "RSE_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Address to listen on, `host:port` or `:port`.
    #[arg(long = "web.listen-address", global = true)]
    pub listen_address: Option<String>,
    /// Path of the metrics endpoint.
    #[arg(long = "web.telemetry-path", global = true)]
    pub telemetry_path: Option<String>,
    /// TLS and basic-auth settings, in the Prometheus exporter-toolkit format.
    #[arg(long = "web.config.file", global = true)]
    pub web_config_file: Option<PathBuf>,
    /// Serve `POST /-/reload` (refused with 403 otherwise; SIGHUP always
    /// reloads), as Prometheus's flag of the same name.
    #[arg(long = "web.enable-lifecycle", global = true)]
    pub enable_lifecycle: bool,
    /// HTTP connections open at once (default 512); at the cap the
    /// longest-waiting idle connection is closed to make room.
    #[arg(long = "web.max-connections", global = true)]
    pub max_connections: Option<i64>,
    /// Log format: text or json.
    #[arg(long = "log.format", global = true)]
    pub log_format: Option<String>,
    /// Log filter, such as info or redis_streams_exporter=debug.
    #[arg(long = "log.level", global = true)]
    pub log_level: Option<String>,
    /// Redis URL of the single target used when the file configures none.
    /// The password may come from the REDIS_PASSWORD environment variable.
    #[arg(long = "redis.url", global = true)]
    pub redis_url: Option<String>,
    /// Validate the configuration and exit (0 when valid, 2 when not).
    #[arg(long = "check-config")]
    pub check_config: bool,
    /// What to do (default: run the daemon).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Poll every target once, print a table of every stream and group, and
    /// exit 1 when any group is not ok or idle, or a target is down.
    Check,
}

impl Cli {
    /// The flags that override the file.
    pub fn overrides(&self) -> CliOverrides {
        CliOverrides {
            listen_address: self.listen_address.clone(),
            telemetry_path: self.telemetry_path.clone(),
            web_config_file: self.web_config_file.clone(),
            log_format: self.log_format.clone(),
            log_level: self.log_level.clone(),
            redis_url: self.redis_url.clone(),
            enable_lifecycle: self.enable_lifecycle,
            max_connections: self.max_connections,
        }
    }
}
