//! `redis-streams-simulator`: drives a real Redis through the failure modes of
//! Redis Streams used as message queues, so that the exporter, its dashboards
//! and its alert rules can be watched reacting to them. It is a test and demo
//! tool, not part of the exporter: unlike the exporter it **writes** to Redis.
//!
//! ```text
//! redis-streams-simulator --url redis://127.0.0.1:6379 --prefix demo: all
//! redis-streams-simulator --prefix e2e: healthy poison dead-letter trim
//! redis-streams-simulator --duration 10m --cleanup healthy poison
//! redis-streams-simulator --list
//! ```
//!
//! Every scenario works on its own streams, named `<prefix><scenario>`, which
//! it deletes and recreates when it starts; it never touches another key
//! (except `CONFIG SET maxmemory…` with `evictable --set-eviction-policy`).
//! Scenarios run concurrently until `--duration` elapses or SIGINT/SIGTERM.
//! With `--cleanup` the simulator then deletes every key it created, so that
//! a finished demo leaves no stopped groups behind for the exporter to see.
//! By default only loopback servers are accepted (`--allow-remote` lifts
//! that, for a container network).
//!
//! Consumer groups are created with `ENTRIESREAD 0` on a fresh stream (where
//! the server supports it) so that Redis's own lag counter is valid from the
//! start: the lag the exporter reports is then Redis's count, except where a
//! scenario breaks it on purpose (`recovered`, `outpace-xdel`).
//!
//! The scenarios and what an operator should see (alert names are those of
//! `alerts/redis-streams.rules.yml`; "7.0+" marks what Redis 6.2 cannot show,
//! because it reports no entries-added, entries-read or lag):
//!
//! | scenario | what happens | expected signal |
//! |---|---|---|
//! | `healthy` | producer 5/s, two consumers read and acknowledge at once | nothing |
//! | `crashed-consumer` | `worker-2` reads 20 entries and dies holding them; `worker-1` keeps up; 300 idle consumers with random names (`--idle-consumers`) hold nothing | orphaned pending, naming `worker-2` (oldest pending too old and stalled follow from it) |
//! | `poison` | one entry fails every time and is reclaimed (`XCLAIM`) forever | poison entries (stalled follows) |
//! | `dead-letter` | every 4th entry fails 3 deliveries, then goes to `<stream>:dlq` | dead letters arriving |
//! | `trim` | `XADD … MAXLEN 50` at 10/s on a stream that starts full: `workers` leaves 1 in 5 entries unacknowledged (ghosts once trimmed); the `archive` group has no consumer (entries trimmed before delivery) | ghost entries; trimmed undelivered (7.0+; group stopped on 6.2) |
//! | `xdel-ghosts` | the consumer deletes (`XDEL`) every 3rd entry it read instead of acknowledging it | ghost entries |
//! | `trim-window` | steady backlog at 90 % of a `MAXLEN 100` stream | retention margin low (a ticket with a `max_delay`; no page: the margin holds) |
//! | `recovered` | consumer outage (`--outage`, 30 s) while a burst of 600 entries trimmed to `MAXLEN 100` overtakes the group; the consumer comes back, drains the backlog to 10 entries and stays 10 behind; `XGROUP SETID` to its own position (no `ENTRIESREAD`) makes every 7.0+ server report a nil lag | trimmed undelivered (7.0+; group stopped on 6.2), then lag estimated |
//! | `outpace` | producer 6/s, consumer 3/s | production outpacing consumption (the `…Estimated` info variant on 6.2) |
//! | `outpace-xdel` | as `outpace`, and every 5 s the producer cancels (`XDEL`) its newest, still undelivered entry: with a deletion ahead of the group Redis 7.0+ reports `lag` and `entries-read` as nil until the group reads the last entry, which it never does | lag estimated, production outpacing consumption (`…Estimated`), deleted undelivered (7.0+; the first cancellation from the counters, every one after it with keyspace events, which vouch that the group was not set back) |
//! | `stopped` | consumers read for 5 s, then all stop; production goes on | group stopped (lag and outpacing follow from it) |
//! | `never-acks` | the consumer reads 3/s and never acknowledges what it read | stalled (pending growing follows) |
//! | `trim-catchup` | after 5 s, a burst of 60 entries is trimmed to `MAXLEN 20` before the group reads it: 40 unread entries are gone; the group catches up one poll later, so the loss shows in the gauges for about one poll | trimmed undelivered (7.0+) |
//! | `delete-unread` | the group reads every 2 s; after 5 s, 3 entries it has not read yet are deleted (`XDEL`) | deleted undelivered (7.0+) |
//! | `trim-overtake` | `MAXLEN 300` at 5/s (one minute retained, the group at its end); for 45 s the group reads a third of that, so trimming gains on its first undelivered entry; then it reads twice the production rate, drains and keeps up; nothing is lost | trim overtaking group (by the trim-overtake ETA), then the drain ETA |
//! | `rewind` | group `replay` is set back 50 entries (`XGROUP SETID`) after 5 s and reads them again; group `future` is set one hour ahead of the stream | group rewound, group ahead of stream (info) |
//! | `many-streams` | `--streams N` small streams, each with `--groups G` groups (default none) whose consumers keep up (`XREADGROUP … NOACK` every 10 s) | streams dropped, probe stale (with a tight exporter); with groups, a large healthy keyspace for `check` |
//! | `big-pel` | a prefetching consumer keeps `--pel-entries N` entries in flight | PEL scan stale (with a small scan budget) |
//! | `evictable` | a queue whose consumer always has 5 entries in flight; with `--set-eviction-policy` also `CONFIG SET maxmemory 256mb` and `maxmemory-policy allkeys-lru` | evictable pending entries |
//! | `batch` | producer 2/s; a healthy batch job reads and acknowledges everything every `--batch-every` (4 m), and is idle in between | nothing with `read_every` set above the period (a `check --watch` longer than the period says ok, a single look says warming_up, never stopped) |
//! | `idle` | 10 entries read and acknowledged, nothing produced since; the consumer keeps waiting (`BLOCK`) | nothing (`idle`) |
//! | `noack-reader` | producer 2/s, a consumer reading with `XREADGROUP … NOACK` every 200 ms: nothing is ever pending | nothing |
//!
//! `all` runs every scenario from `healthy` to `rewind`, and `batch`, `idle`
//! and `noack-reader`, which must raise nothing. The scenarios are
//! in `scenarios/`, a file per family; the Redis commands they share are in
//! `ops.rs`.

mod ops;
mod scenario;
mod scenarios;

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Parser, ValueEnum};
use tokio::task::JoinSet;
use tokio::time::sleep;

use ops::Ctx;
use scenario::{Scenario, say};

/// Command-line flags.
#[derive(Debug, Parser)]
#[command(
    name = "redis-streams-simulator",
    version,
    about = "Drives a Redis through Redis Streams failure modes (writes to Redis: test and demo tool)."
)]
struct Cli {
    /// Redis to drive. Only loopback hosts unless --allow-remote.
    #[arg(
        long,
        env = "SIMULATOR_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    url: String,
    /// Prefix of every key the simulator creates.
    #[arg(long, env = "SIMULATOR_PREFIX", default_value = "sim:")]
    prefix: String,
    /// Stop after this long ("90s", "10m"); default: until SIGINT/SIGTERM.
    #[arg(long)]
    duration: Option<humantime::Duration>,
    /// When it stops (after --duration, on SIGINT/SIGTERM or a failure),
    /// delete every stream and key the chosen scenarios created. Without it
    /// they stay, and their groups then show as stopped.
    #[arg(long, env = "SIMULATOR_CLEANUP")]
    cleanup: bool,
    /// Accept a Redis that is not on a loopback address (container networks).
    #[arg(long, env = "SIMULATOR_ALLOW_REMOTE")]
    allow_remote: bool,
    /// `many-streams`: how many streams to create.
    #[arg(long, default_value_t = 30)]
    streams: usize,
    /// `many-streams`: consumer groups per stream, each read by a consumer
    /// that keeps up.
    #[arg(long, default_value_t = 0)]
    groups: usize,
    /// `batch`: how often the batch job runs.
    #[arg(long, default_value = "4m")]
    batch_every: humantime::Duration,
    /// `crashed-consumer`: idle consumers with random names beside the two
    /// workers (XGROUP CREATECONSUMER), holding nothing.
    #[arg(long, env = "SIMULATOR_IDLE_CONSUMERS", default_value_t = 300)]
    idle_consumers: usize,
    /// `recovered`: how long the consumer is down while the burst of 600
    /// entries is trimmed to `MAXLEN 100` (the demo's `--fast` divides it
    /// by 20 like every window, so the outage stays shorter than the
    /// status window and the loss is the one fault).
    #[arg(long, default_value = "30s")]
    outage: humantime::Duration,
    /// `big-pel`: entries kept pending.
    #[arg(long, default_value_t = 3000)]
    pel_entries: usize,
    /// `evictable`: also set maxmemory 256mb and maxmemory-policy allkeys-lru.
    #[arg(long)]
    set_eviction_policy: bool,
    /// Print the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Scenarios to run, concurrently.
    #[arg(value_enum)]
    scenarios: Vec<Scenario>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.list {
        for s in Scenario::value_variants() {
            let help = s
                .to_possible_value()
                .and_then(|v| v.get_help().map(ToString::to_string))
                .unwrap_or_default();
            let _ = writeln!(std::io::stdout().lock(), "{:<18} {help}", s.name());
        }
        return ExitCode::SUCCESS;
    }
    if cli.scenarios.is_empty() {
        eprintln!("no scenario given (try --list, or `all`)");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("redis-streams-simulator: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Refuses anything but a loopback server unless allowed.
fn check_url(url: &str, allow_remote: bool) -> Result<redis::Client> {
    let client = redis::Client::open(url).with_context(|| format!("invalid Redis URL {url:?}"))?;
    if allow_remote {
        return Ok(client);
    }
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, _) | redis::ConnectionAddr::TcpTls { host, .. } => {
            let loopback = host == "localhost"
                || host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if !loopback {
                bail!(
                    "{host} is not a loopback address: the simulator writes to Redis and only \
                     drives local test servers unless --allow-remote is given"
                );
            }
        }
        _ => {}
    }
    Ok(client)
}

async fn run(cli: Cli) -> Result<()> {
    let client = check_url(&cli.url, cli.allow_remote)?;
    let ctx = Ctx {
        client,
        prefix: cli.prefix.clone(),
        streams: cli.streams,
        groups: cli.groups,
        batch_every: cli.batch_every.into(),
        outage: cli.outage.into(),
        idle_consumers: cli.idle_consumers,
        pel_entries: cli.pel_entries,
        set_eviction_policy: cli.set_eviction_policy,
    };
    // Fail fast when the server is not there.
    let mut probe = ctx.conn().await?;
    let _: String = redis::cmd("PING").query_async(&mut probe).await?;

    let mut chosen: Vec<Scenario> = Vec::new();
    for s in &cli.scenarios {
        if *s == Scenario::All {
            chosen.extend(Scenario::ALL_SINGLE_REDIS);
        } else {
            chosen.push(*s);
        }
    }
    chosen.sort();
    chosen.dedup();

    let mut tasks = JoinSet::new();
    for scenario in chosen.iter().copied() {
        let ctx = ctx.clone();
        say(
            scenario,
            format_args!("starting on {}", scenario.stream(&ctx.prefix)),
        );
        tasks.spawn(async move { (scenario, scenarios::run(scenario, &ctx).await) });
    }

    let deadline = async {
        match cli.duration {
            Some(d) => sleep(d.into()).await,
            None => std::future::pending::<()>().await,
        }
    };
    let outcome = tokio::select! {
        _ = deadline => {
            let _ = writeln!(std::io::stdout().lock(), "simulator: duration elapsed, stopping");
            Ok(())
        }
        _ = shutdown_signal() => {
            let _ = writeln!(std::io::stdout().lock(), "simulator: signal received, stopping");
            Ok(())
        }
        failed = first_failure(&mut tasks) => failed,
    };
    if cli.cleanup {
        // No scenario may write after its keys are gone.
        tasks.shutdown().await;
        let keys: Vec<String> = chosen
            .iter()
            .flat_map(|s| s.keys(&ctx.prefix, ctx.streams))
            .collect();
        let deleted = delete_keys(&ctx, &keys).await.context("--cleanup")?;
        let _ = writeln!(
            std::io::stdout().lock(),
            "simulator: cleanup deleted {deleted} of the {} keys the scenarios use",
            keys.len()
        );
    }
    outcome
}

/// Deletes `keys`, a pipeline of 100 `DEL`s at a time; returns how many
/// existed.
async fn delete_keys(ctx: &Ctx, keys: &[String]) -> Result<u64> {
    let mut con = ctx.conn().await?;
    let mut deleted = 0;
    for chunk in keys.chunks(100) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("DEL").arg(key);
        }
        let counts: Vec<u64> = pipe.query_async(&mut con).await?;
        deleted += counts.iter().sum::<u64>();
    }
    Ok(deleted)
}

/// Resolves with the first scenario that fails (scenarios never end on
/// their own otherwise).
async fn first_failure(tasks: &mut JoinSet<(Scenario, Result<()>)>) -> Result<()> {
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((_, Ok(()))) => {}
            Ok((scenario, Err(e))) => {
                return Err(e.context(format!("scenario {}", scenario.name())));
            }
            Err(e) => return Err(anyhow!("a scenario panicked: {e}")),
        }
    }
    // Every scenario finished: wait for the deadline or a signal.
    std::future::pending::<()>().await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
