//! The `redis-streams-exporter` binary: parse flags, load the configuration,
//! then run the daemon, `--check-config` or `check`. Exit codes: 0 ok, 1
//! runtime failure (for `check`: problems found), 2 usage error or invalid
//! configuration, 3 (`check` only) a target could not be reached.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, Parser};

// jemalloc returns freed memory to the system on its own and fragments far
// less than glibc's per-thread arenas under the exporter's pattern (large
// long-lived maps, renewed poll after poll): at 10 000 streams the resident
// set drops by about a third.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
use redis_streams_exporter::cli::{CheckArgs, Cli, Output, Subcommand};
use redis_streams_exporter::{app, check, config, telemetry};

/// The configuration's file for messages, `<flags>` without one.
fn config_file(config: &config::Config) -> String {
    config
        .source
        .as_ref()
        .map_or("<flags>".to_string(), |p| p.display().to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Some(Subcommand::Check(_))) {
        refuse_web_flags(&cli);
    }
    let overrides = cli.overrides();
    let config = match config::load(cli.config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("invalid configuration:\n{e}");
            return ExitCode::from(2);
        }
    };
    if cli.check_config {
        return check_config(&config);
    }
    match &cli.command {
        // The report is the output, failed probes included: logs stay on
        // stderr, and only errors unless asked.
        Some(Subcommand::Check(_)) => telemetry::init(
            config.log.format,
            cli.log_level.as_deref().unwrap_or("error"),
        ),
        None => telemetry::init(config.log.format, &config.log.level),
    }
    // rustls needs one process-wide crypto provider; ring is the one we build.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Some(Subcommand::Check(args)) => run_check(config, args).await,
            None => run_daemon(config, overrides).await,
        }
    })
}

/// `check` serves nothing, so the daemon's web flags are a usage error
/// there (clap prints it and exits 2) rather than silently ignored.
fn refuse_web_flags(cli: &Cli) {
    let web = cli.web_flags();
    if !web.is_empty() {
        Cli::command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "{} only apply to the daemon; `check` serves nothing",
                    web.join(", ")
                ),
            )
            .exit();
    }
}

/// `--check-config`: the web configuration and what the daemon builds
/// before its first connection, checked without connecting.
fn check_config(config: &config::Config) -> ExitCode {
    if let Some(web) = &config.web.config_file {
        if let Err(e) = redis_streams_exporter::http::web_config::load(web) {
            eprintln!("invalid web configuration:\n{e}");
            return ExitCode::from(2);
        }
    }
    // What the daemon builds before its first connection (TLS settings
    // against the system's trust store), without connecting.
    for target in &config.targets {
        if let Err(e) =
            redis_streams_exporter::backend::TargetClient::new(target.clone(), &config.limits)
        {
            eprintln!("invalid configuration:\n{}: {e}", config_file(config));
            return ExitCode::from(2);
        }
    }
    if config.multi_target.allowed_targets.is_empty() {
        println!(
            "configuration is valid: {}",
            plural(config.targets.len(), "target")
        );
    } else {
        println!(
            "configuration is valid: {}, /probe on ({} allowed glob(s), {} auth module(s), at most {} probed targets)",
            plural(config.targets.len(), "target"),
            config.multi_target.allowed_targets.len(),
            config.auth_modules.len(),
            config.multi_target.max_targets
        );
    }
    if !config.unset_secrets.is_empty() {
        println!(
            "the run needs these environment variables, not set now: {}",
            config.unset_secrets.join(", ")
        );
    }
    ExitCode::SUCCESS
}

/// "1 target", "2 targets".
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The `check` subcommand: its report on stdout, its exit code.
async fn run_check(config: config::Config, args: CheckArgs) -> ExitCode {
    if config.targets.is_empty() {
        eprintln!(
            "invalid configuration:\n{}: targets: check needs [[targets]] (targets that /probe polls are given by Prometheus, not by the file)",
            config_file(&config)
        );
        return ExitCode::from(check::EXIT_USAGE);
    }
    let options = check::Options {
        watch: args.watch,
        verbose: args.verbose,
    };
    let progress = check::Progress::stderr();
    let file = config_file(&config);
    match check::run(Arc::new(config), options, &progress).await {
        Ok(report) => {
            match args.output {
                Output::Table => print!("{}", report.table(args.all)),
                Output::Json => print!("{}", report.json()),
            }
            ExitCode::from(report.exit_code())
        }
        Err(e) => {
            eprintln!("invalid configuration:\n{file}: {e}");
            ExitCode::from(check::EXIT_USAGE)
        }
    }
}

/// The daemon: listens, then runs until a shutdown signal; a configuration
/// it could not fully vet before exits 2, like any invalid configuration.
async fn run_daemon(config: config::Config, overrides: config::CliOverrides) -> ExitCode {
    let address = config.web.listen_address.clone();
    let listener = match tokio::net::TcpListener::bind(&address).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "invalid configuration:\n{}: web.listen_address: cannot listen on {address}: {e}",
                config_file(&config)
            );
            return ExitCode::from(2);
        }
    };
    match app::run(config, overrides, listener, app::shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ app::AppError::Web(_)) => {
            eprintln!("invalid web configuration:\n{e}");
            ExitCode::from(2)
        }
        // A target's TLS settings, which the configuration checks could not
        // fully vet: the same exit status as any other configuration error,
        // so systemd's RestartPreventExitStatus=2 does not restart in a loop.
        Err(e @ app::AppError::Client(_)) => {
            eprintln!("invalid configuration:\n{e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
