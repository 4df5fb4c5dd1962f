//! Command-line flags. They override the configuration file for the common
//! keys; everything else lives in the file (see `config/example.toml`).

use std::path::PathBuf;

use std::time::Duration;

use clap::{Args, Parser, ValueEnum};

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
    /// Address to listen on, `host:port` or `:port` (daemon only).
    #[arg(long = "web.listen-address")]
    pub listen_address: Option<String>,
    /// Path of the metrics endpoint (daemon only).
    #[arg(long = "web.telemetry-path")]
    pub telemetry_path: Option<String>,
    /// TLS and basic-auth settings, in the Prometheus exporter-toolkit
    /// format (daemon only).
    #[arg(long = "web.config.file")]
    pub web_config_file: Option<PathBuf>,
    /// Serve `POST /-/reload` (refused with 403 otherwise; SIGHUP always
    /// reloads), as Prometheus's flag of the same name (daemon only).
    #[arg(long = "web.enable-lifecycle")]
    pub enable_lifecycle: bool,
    /// HTTP connections open at once (default 512); at the cap the
    /// longest-waiting idle connection is closed to make room (daemon only).
    #[arg(long = "web.max-connections")]
    pub max_connections: Option<i64>,
    /// Log format: text or json.
    #[arg(long = "log.format", global = true)]
    pub log_format: Option<String>,
    /// Log filter, such as info or redis_streams_exporter=debug (`check`
    /// logs at warn unless this is given).
    #[arg(long = "log.level", global = true)]
    pub log_level: Option<String>,
    /// Where to keep what the exporter learned (read cadences, hold times,
    /// loss ledgers, status windows) across its restarts: written every
    /// minute and at shutdown, read at start (daemon only; overrides
    /// status.state_file).
    #[arg(long = "state.file")]
    pub state_file: Option<PathBuf>,
    /// Redis URL of the single target used when the file configures none.
    /// The password may come from the REDIS_PASSWORD environment variable.
    #[arg(long = "redis.url", global = true)]
    pub redis_url: Option<String>,
    /// Validate the configuration and exit (0 when valid, 2 when not).
    #[arg(long = "check-config")]
    pub check_config: bool,
    /// What to do (default: run the daemon).
    #[command(subcommand)]
    pub command: Option<Subcommand>,
}

/// What the binary does besides running the daemon: its subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Subcommand {
    /// Run the daemon's probes and status rules once (or over a window with
    /// --watch) and report problems first, then one line per target.
    ///
    /// A single look cannot see what needs a window (a stalled group, a lag
    /// that keeps growing, consumers that stopped, pending entries piling
    /// up); such groups are reported `unknown` and the report says how long
    /// to watch. Exit codes: 0 no problem found, 1 problems, 2 usage or
    /// configuration error, 3 a target could not be reached. Logs go to
    /// stderr at warn (unless --log.level says otherwise), as does progress.
    #[command(after_help = CHECK_HELP)]
    Check(CheckArgs),
}

const CHECK_HELP: &str = "Exit codes: 0 no problem found, 1 problems found, 2 usage or configuration error, 3 a target could not be reached.";

/// How `check` writes its report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Problems first, then one line per target; names escaped and shortened.
    #[default]
    Table,
    /// One JSON document with every group, names in full.
    Json,
}

/// Flags of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Poll for this long ("2m30s", "5m") and judge every group over it, as
    /// the daemon judges its window (status.window × schedule.stream, 2m30s
    /// by default, is the shortest watch that can tell stalled or stopped
    /// groups apart from healthy ones).
    #[arg(long, value_parser = parse_duration)]
    pub watch: Option<Duration>,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// List every group in the table, not only those with problems.
    #[arg(long)]
    pub all: bool,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration such as \"2m30s\": {e}"))
}

impl Cli {
    /// The `--web.*` flags given, by name (they mean nothing to `check`).
    pub fn web_flags(&self) -> Vec<&'static str> {
        [
            ("--web.listen-address", self.listen_address.is_some()),
            ("--web.telemetry-path", self.telemetry_path.is_some()),
            ("--web.config.file", self.web_config_file.is_some()),
            ("--web.enable-lifecycle", self.enable_lifecycle),
            ("--web.max-connections", self.max_connections.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }

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
            state_file: self.state_file.clone(),
        }
    }
}
