//! `redis-streams-simulator`: drives a real Redis through the failure modes of
//! Redis Streams used as message queues, so that the exporter, its dashboards
//! and its alert rules can be watched reacting to them. It is a test and demo
//! tool, not part of the exporter: unlike the exporter it **writes** to Redis.
//!
//! ```text
//! redis-streams-simulator --url redis://127.0.0.1:6379 --prefix demo: all
//! redis-streams-simulator --prefix e2e: healthy poison dead-letter trim
//! redis-streams-simulator --list
//! ```
//!
//! Every scenario works on its own streams, named `<prefix><scenario>`, which
//! it deletes and recreates when it starts; it never touches another key
//! (except `CONFIG SET maxmemory…` with `evictable --set-eviction-policy`).
//! Scenarios run concurrently until `--duration` elapses or SIGINT/SIGTERM.
//! By default only loopback servers are accepted (`--allow-remote` lifts
//! that, for a container network).
//!
//! Consumer groups are created with `ENTRIESREAD 0` on a fresh stream (where
//! the server supports it) so that Redis's own lag counter is valid from the
//! start: the lag the exporter reports is then Redis's count, except where a
//! scenario breaks it on purpose (`recovered`, `outpace-xdel`).
//!
//! The scenarios and what an operator should see (alert names are those of
//! `alerts/redis-streams.rules.yml`):
//!
//! | scenario | what happens | expected signal |
//! |---|---|---|
//! | `healthy` | producer 5/s, two consumers read and acknowledge at once | nothing |
//! | `crashed-consumer` | `worker-2` reads 20 entries and dies holding them; `worker-1` keeps up | orphaned pending, oldest pending too old, stalled |
//! | `poison` | one entry fails every time and is reclaimed (`XCLAIM`) forever | poison entries, stalled |
//! | `dead-letter` | every 4th entry fails 3 deliveries, then goes to `<stream>:dlq` | dead letters arriving |
//! | `trim` | `XADD … MAXLEN 50` at 10/s: `workers` leaves 1 in 5 entries unacknowledged (ghosts once trimmed); the `archive` consumer is down (entries trimmed before delivery) | ghost entries, trimmed undelivered |
//! | `xdel-ghosts` | the consumer deletes (`XDEL`) every 3rd entry instead of acknowledging it | ghost entries, pending growing |
//! | `trim-window` | steady backlog at 90 % of a `MAXLEN 100` stream | trim overtaking group |
//! | `recovered` | consumer outage while `MAXLEN 100` trimming overtakes the group, then a slow restart: Redis 7.0.x, 7.2.0–7.2.6 and 7.4.0–7.4.1 keep counting the trimmed entries in the lag (lag > XLEN), so the exporter estimates it | trimmed undelivered, then the `…Estimated` lag, trim and outpacing alerts |
//! | `outpace` | producer 6/s, consumer 3/s | production outpacing consumption |
//! | `outpace-xdel` | as `outpace`, and every 5 s the producer cancels (`XDEL`) its newest, still undelivered entry: with a deletion ahead of the group Redis 7.0+ reports `lag` and `entries-read` as nil until the group reads the last entry, which it never does, so the exporter estimates the lag | lag estimated, production outpacing consumption (`…Estimated`) |
//! | `stopped` | consumers read for 5 s, then all stop; production goes on | group stopped, lag seconds high/critical |
//! | `noack` | the consumer reads 3/s and never acknowledges | pending growing, stalled |
//! | `many-streams` | `--streams N` small streams, each with `--groups G` groups (default none) whose consumers keep up (`XREADGROUP … NOACK` every 10 s) | streams dropped, probe stale (with a tight exporter); with groups, a large healthy keyspace for `check` |
//! | `batch` | producer 2/s; a healthy batch job reads and acknowledges everything every `--batch-every` (4 m), and is idle in between | nothing (a `check --watch` longer than the period says ok, a single look says unknown, never stopped) |
//! | `big-pel` | a prefetching consumer keeps `--pel-entries N` entries in flight | PEL scan stale (with a small scan budget) |
//! | `evictable` | a queue whose consumer always has 5 entries in flight; with `--set-eviction-policy` also `CONFIG SET maxmemory 256mb` and `maxmemory-policy allkeys-lru` | evictable pending entries |
//!
//! `all` runs every scenario from `healthy` to `noack`.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Parser, ValueEnum};
use redis::Value;
use redis::aio::MultiplexedConnection;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, MissedTickBehavior, interval, sleep};

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

/// A failure mode to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
enum Scenario {
    /// Producer 5/s, two consumers that keep up: nothing should alert.
    Healthy,
    /// A consumer dies holding 20 entries; another keeps consuming.
    CrashedConsumer,
    /// One entry fails on every delivery and is reclaimed forever.
    Poison,
    /// Failing entries go to a dead-letter stream after 3 deliveries.
    DeadLetter,
    /// MAXLEN 50 at 10/s: unacknowledged entries become ghosts, a down consumer loses entries.
    Trim,
    /// The consumer XDELs entries instead of acknowledging them.
    XdelGhosts,
    /// A steady backlog at 90% of the retained window of a MAXLEN 100 stream.
    TrimWindow,
    /// Outage overtaken by trimming, then a slow restart (Redis 7.0.x, 7.2.0-7.2.6, 7.4.0-7.4.1 over-count its lag).
    Recovered,
    /// Production at 6/s, consumption at 3/s.
    Outpace,
    /// As outpace, with an undelivered entry deleted (XDEL) every 5 s: Redis reports no lag.
    OutpaceXdel,
    /// Consumers stop after 5 s while production goes on.
    Stopped,
    /// The consumer never acknowledges.
    Noack,
    /// --streams N streams without groups.
    ManyStreams,
    /// A consumer that keeps --pel-entries entries in flight.
    BigPel,
    /// A queue with pending entries (and, with --set-eviction-policy, an allkeys-lru maxmemory).
    Evictable,
    /// A healthy batch consumer that drains the stream every --batch-every.
    Batch,
    /// Every scenario from healthy to noack.
    All,
}

impl Scenario {
    /// The scenarios `all` stands for.
    const ALL_SINGLE_REDIS: [Scenario; 12] = [
        Scenario::Healthy,
        Scenario::CrashedConsumer,
        Scenario::Poison,
        Scenario::DeadLetter,
        Scenario::Trim,
        Scenario::XdelGhosts,
        Scenario::TrimWindow,
        Scenario::Recovered,
        Scenario::Outpace,
        Scenario::OutpaceXdel,
        Scenario::Stopped,
        Scenario::Noack,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Healthy => "healthy",
            Scenario::CrashedConsumer => "crashed-consumer",
            Scenario::Poison => "poison",
            Scenario::DeadLetter => "dead-letter",
            Scenario::Trim => "trim",
            Scenario::XdelGhosts => "xdel-ghosts",
            Scenario::TrimWindow => "trim-window",
            Scenario::Recovered => "recovered",
            Scenario::Outpace => "outpace",
            Scenario::OutpaceXdel => "outpace-xdel",
            Scenario::Stopped => "stopped",
            Scenario::Noack => "noack",
            Scenario::ManyStreams => "many-streams",
            Scenario::BigPel => "big-pel",
            Scenario::Evictable => "evictable",
            Scenario::Batch => "batch",
            Scenario::All => "all",
        }
    }

    /// The stream the scenario works on (or the key prefix of many-streams).
    fn stream(self, prefix: &str) -> String {
        let suffix = match self {
            Scenario::CrashedConsumer => "crashed",
            Scenario::DeadLetter => "deadletter",
            Scenario::XdelGhosts => "xdel",
            Scenario::TrimWindow => "trimwindow",
            Scenario::OutpaceXdel => "outpacexdel",
            Scenario::ManyStreams => "",
            Scenario::BigPel => "big",
            Scenario::Evictable => "orders",
            other => other.name(),
        };
        format!("{prefix}{suffix}")
    }
}

/// What every scenario gets.
#[derive(Clone, Debug)]
struct Ctx {
    client: redis::Client,
    prefix: String,
    streams: usize,
    groups: usize,
    batch_every: Duration,
    pel_entries: usize,
    set_eviction_policy: bool,
}

impl Ctx {
    /// A connection of its own (consumers never share one with producers).
    async fn conn(&self) -> Result<MultiplexedConnection> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(30)));
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .context("cannot connect to Redis")
    }
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
    for scenario in chosen {
        let ctx = ctx.clone();
        say(
            scenario,
            format_args!("starting on {}", scenario.stream(&ctx.prefix)),
        );
        tasks.spawn(async move {
            let result = match scenario {
                Scenario::Healthy => healthy(&ctx).await,
                Scenario::CrashedConsumer => crashed_consumer(&ctx).await,
                Scenario::Poison => poison(&ctx).await,
                Scenario::DeadLetter => dead_letter(&ctx).await,
                Scenario::Trim => trim(&ctx).await,
                Scenario::XdelGhosts => xdel_ghosts(&ctx).await,
                Scenario::TrimWindow => trim_window(&ctx).await,
                Scenario::Recovered => recovered(&ctx).await,
                Scenario::Outpace => outpace(&ctx).await,
                Scenario::OutpaceXdel => outpace_xdel(&ctx).await,
                Scenario::Stopped => stopped(&ctx).await,
                Scenario::Noack => noack(&ctx).await,
                Scenario::ManyStreams => many_streams(&ctx).await,
                Scenario::BigPel => big_pel(&ctx).await,
                Scenario::Evictable => evictable(&ctx).await,
                Scenario::Batch => batch(&ctx).await,
                Scenario::All => Ok(()),
            };
            (scenario, result)
        });
    }

    let deadline = async {
        match cli.duration {
            Some(d) => sleep(d.into()).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = deadline => {
            let _ = writeln!(std::io::stdout().lock(), "simulator: duration elapsed, stopping");
            Ok(())
        }
        _ = shutdown_signal() => {
            let _ = writeln!(std::io::stdout().lock(), "simulator: signal received, stopping");
            Ok(())
        }
        failed = first_failure(&mut tasks) => failed,
    }
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

/// Prints a progress line; a closed stdout (`| head`) is not an error worth dying for.
fn say(scenario: Scenario, message: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stdout().lock(), "[{}] {message}", scenario.name());
}

// ------------------------------------------------------------------------------------------------
// Redis helpers (plain commands: the crate is built without its stream helpers).

/// One stream entry.
#[derive(Clone, Debug)]
struct Entry {
    id: String,
    fields: BTreeMap<String, String>,
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// `[id, [field, value, ...]]` (nil bodies, from XCLAIM of deleted entries, are skipped).
fn entries(v: &Value) -> Vec<Entry> {
    let Value::Array(rows) = v else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|row| {
            let Value::Array(parts) = row else {
                return None;
            };
            let id = text(parts.first()?)?;
            let mut fields = BTreeMap::new();
            if let Some(Value::Array(kv)) = parts.get(1) {
                for pair in kv.chunks(2) {
                    if let [k, v] = pair {
                        if let (Some(k), Some(v)) = (text(k), text(v)) {
                            fields.insert(k, v);
                        }
                    }
                }
            }
            Some(Entry { id, fields })
        })
        .collect()
}

/// Deletes `keys` and creates `stream` with `groups`, each at the end of the
/// (empty) stream with a valid entries-read counter.
async fn fresh_stream(
    con: &mut MultiplexedConnection,
    stream: &str,
    groups: &[&str],
    also_delete: &[String],
) -> Result<()> {
    let mut del = redis::cmd("DEL");
    del.arg(stream);
    for k in also_delete {
        del.arg(k);
    }
    let _: i64 = del.query_async(con).await?;
    for group in groups {
        let with_counter: redis::RedisResult<String> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(stream)
            .arg(group)
            .arg("$")
            .arg("MKSTREAM")
            .arg("ENTRIESREAD")
            .arg(0)
            .query_async(con)
            .await;
        if with_counter.is_err() {
            // Before 7.0 there is no ENTRIESREAD (and no lag either).
            let _: String = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(stream)
                .arg(group)
                .arg("$")
                .arg("MKSTREAM")
                .query_async(con)
                .await
                .with_context(|| format!("XGROUP CREATE {stream} {group}"))?;
        }
    }
    Ok(())
}

/// XADD with an auto ID (or `id`), optionally trimming to exactly `maxlen`.
async fn xadd(
    con: &mut MultiplexedConnection,
    stream: &str,
    maxlen: Option<usize>,
    id: Option<&str>,
    fields: &[(&str, String)],
) -> Result<String> {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(stream);
    if let Some(n) = maxlen {
        cmd.arg("MAXLEN").arg(n);
    }
    cmd.arg(id.unwrap_or("*"));
    for (k, v) in fields {
        cmd.arg(*k).arg(v);
    }
    Ok(cmd.query_async(con).await?)
}

/// A capped XADD for streams that grow in the scenario (keeps memory bounded
/// in long demos; far beyond what a test run reaches).
const GROWTH_CAP: usize = 100_000;

async fn xadd_capped(
    con: &mut MultiplexedConnection,
    stream: &str,
    fields: &[(&str, String)],
) -> Result<String> {
    let mut cmd = redis::cmd("XADD");
    cmd.arg(stream)
        .arg("MAXLEN")
        .arg("~")
        .arg(GROWTH_CAP)
        .arg("*");
    for (k, v) in fields {
        cmd.arg(*k).arg(v);
    }
    Ok(cmd.query_async(con).await?)
}

/// XREADGROUP of new entries (`>`), without blocking.
async fn read_new(
    con: &mut MultiplexedConnection,
    stream: &str,
    group: &str,
    consumer: &str,
    count: usize,
) -> Result<Vec<Entry>> {
    let v: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg(group)
        .arg(consumer)
        .arg("COUNT")
        .arg(count)
        .arg("STREAMS")
        .arg(stream)
        .arg(">")
        .query_async(con)
        .await?;
    let Value::Array(streams) = v else {
        return Ok(Vec::new());
    };
    Ok(streams
        .iter()
        .filter_map(|s| match s {
            Value::Array(parts) => parts.get(1).map(entries),
            _ => None,
        })
        .flatten()
        .collect())
}

async fn ack(
    con: &mut MultiplexedConnection,
    stream: &str,
    group: &str,
    ids: &[String],
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut cmd = redis::cmd("XACK");
    cmd.arg(stream).arg(group);
    for id in ids {
        cmd.arg(id);
    }
    let _: i64 = cmd.query_async(con).await?;
    Ok(())
}

/// XCLAIM (a redelivery: the delivery count goes up by one).
async fn claim(
    con: &mut MultiplexedConnection,
    stream: &str,
    group: &str,
    consumer: &str,
    ids: &[String],
) -> Result<Vec<Entry>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut cmd = redis::cmd("XCLAIM");
    cmd.arg(stream).arg(group).arg(consumer).arg(0);
    for id in ids {
        cmd.arg(id);
    }
    let v: Value = cmd.query_async(con).await?;
    Ok(entries(&v))
}

/// A ticker that never bursts to catch up.
fn ticker(period: Duration) -> tokio::time::Interval {
    let mut t = interval(period);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

fn body(n: u64) -> Vec<(&'static str, String)> {
    vec![("n", n.to_string()), ("payload", format!("order-{n}"))]
}

// ------------------------------------------------------------------------------------------------
// Scenarios. Each runs until the process stops.

/// Starts a producer at `per_second` that adds capped entries forever.
fn spawn_producer(ctx: &Ctx, stream: &str, per_second: f64) -> JoinHandle<Result<()>> {
    tokio::spawn(produce(ctx.clone(), stream.to_owned(), per_second))
}

async fn produce(ctx: Ctx, stream: String, per_second: f64) -> Result<()> {
    let mut con = ctx.conn().await?;
    let mut tick = ticker(Duration::from_secs_f64(1.0 / per_second));
    let mut n = 0u64;
    loop {
        tick.tick().await;
        n += 1;
        xadd_capped(&mut con, &stream, &body(n)).await?;
    }
}

/// Starts a consumer that reads every `period` and acknowledges at once.
fn spawn_consumer(
    ctx: &Ctx,
    stream: &str,
    group: &'static str,
    consumer: &'static str,
    period: Duration,
    count: usize,
) -> JoinHandle<Result<()>> {
    tokio::spawn(consume(
        ctx.clone(),
        stream.to_owned(),
        group,
        consumer,
        period,
        count,
    ))
}

async fn consume(
    ctx: Ctx,
    stream: String,
    group: &'static str,
    consumer: &'static str,
    period: Duration,
    count: usize,
) -> Result<()> {
    let mut con = ctx.conn().await?;
    let mut tick = ticker(period);
    loop {
        tick.tick().await;
        let got = read_new(&mut con, &stream, group, consumer, count).await?;
        let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
        ack(&mut con, &stream, group, &ids).await?;
    }
}

async fn all_of(tasks: Vec<JoinHandle<Result<()>>>) -> Result<()> {
    for t in tasks {
        t.await.map_err(|e| anyhow!("task panicked: {e}"))??;
    }
    Ok(())
}

async fn healthy(ctx: &Ctx) -> Result<()> {
    let stream = Scenario::Healthy.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[format!("{stream}:dlq")]).await?;
    let tasks = vec![
        spawn_producer(ctx, &stream, 5.0),
        spawn_consumer(
            ctx,
            &stream,
            "workers",
            "worker-1",
            Duration::from_millis(100),
            10,
        ),
        spawn_consumer(
            ctx,
            &stream,
            "workers",
            "worker-2",
            Duration::from_millis(100),
            10,
        ),
    ];
    all_of(tasks).await
}

async fn crashed_consumer(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::CrashedConsumer;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    for n in 1..=20 {
        xadd_capped(&mut con, &stream, &body(n)).await?;
    }
    // worker-2 takes a batch of 20 and dies before acknowledging any of it.
    let held = read_new(&mut con, &stream, "workers", "worker-2", 20).await?;
    say(
        scenario,
        format_args!(
            "worker-2 crashed holding {} entries (first {})",
            held.len(),
            held.first().map_or("-", |e| e.id.as_str())
        ),
    );
    let tasks = vec![
        spawn_producer(ctx, &stream, 5.0),
        spawn_consumer(
            ctx,
            &stream,
            "workers",
            "worker-1",
            Duration::from_millis(100),
            10,
        ),
    ];
    all_of(tasks).await
}

/// Shared by `poison` and `dead-letter`: a consumer loop in which entries
/// marked bad fail on every delivery and are reclaimed once a second, until
/// `give_up_after` deliveries (then dead-lettered) or forever.
async fn failing_consumer(
    ctx: &Ctx,
    scenario: Scenario,
    stream: String,
    dead_letter: Option<(String, u64)>,
) -> Result<()> {
    let mut con = ctx.conn().await?;
    let mut tick = ticker(Duration::from_millis(250));
    // id → deliveries so far.
    let mut failing: BTreeMap<String, u64> = BTreeMap::new();
    let mut since_retry = Duration::ZERO;
    let consumers = ["worker-1", "worker-2"];
    let mut turn = 0usize;
    let mut dead_lettered = 0u64;
    loop {
        tick.tick().await;
        since_retry += Duration::from_millis(250);
        let got = read_new(&mut con, &stream, "workers", consumers[turn % 2], 10).await?;
        let mut done = Vec::new();
        for e in got {
            if e.fields.get("kind").is_some_and(|k| k == "bad") {
                failing.insert(e.id, 1);
            } else {
                done.push(e.id);
            }
        }
        ack(&mut con, &stream, "workers", &done).await?;
        if since_retry < Duration::from_secs(1) || failing.is_empty() {
            continue;
        }
        since_retry = Duration::ZERO;
        turn += 1;
        // Retry: the other consumer claims the failed entries (a redelivery).
        let ids: Vec<String> = failing.keys().cloned().collect();
        let claimed = claim(&mut con, &stream, "workers", consumers[turn % 2], &ids).await?;
        for e in claimed {
            let deliveries = failing.entry(e.id.clone()).or_insert(1);
            *deliveries += 1;
            match &dead_letter {
                Some((dlq, limit)) if *deliveries >= *limit => {
                    let mut fields: Vec<(&str, String)> = vec![
                        ("original-stream", stream.clone()),
                        ("original-id", e.id.clone()),
                        ("deliveries", deliveries.to_string()),
                        ("reason", "handler failed".to_string()),
                    ];
                    if let Some(n) = e.fields.get("n") {
                        fields.push(("n", n.clone()));
                    }
                    xadd(&mut con, dlq, None, None, &fields).await?;
                    ack(&mut con, &stream, "workers", std::slice::from_ref(&e.id)).await?;
                    failing.remove(&e.id);
                    dead_lettered += 1;
                    if dead_lettered % 10 == 1 {
                        say(
                            scenario,
                            format_args!(
                                "{} dead-lettered after {limit} deliveries ({dead_lettered} so far)",
                                e.id
                            ),
                        );
                    }
                }
                Some(_) => {}
                None => {
                    if *deliveries % 10 == 0 {
                        say(
                            scenario,
                            format_args!(
                                "{} delivered {} times and still failing",
                                e.id, deliveries
                            ),
                        );
                    }
                }
            }
        }
    }
}

async fn poison(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Poison;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let producer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(500));
            let mut n = 0u64;
            loop {
                tick.tick().await;
                n += 1;
                let mut fields = body(n);
                // One malformed message early on; every other one is fine.
                fields.push(("kind", if n == 3 { "bad" } else { "good" }.to_string()));
                xadd_capped(&mut con, &s, &fields).await?;
            }
        }
    });
    let consumer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move { failing_consumer(&c, scenario, s, None).await }
    });
    all_of(vec![producer, consumer]).await
}

async fn dead_letter(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::DeadLetter;
    let stream = scenario.stream(&ctx.prefix);
    let dlq = format!("{stream}:dlq");
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], std::slice::from_ref(&dlq)).await?;
    let producer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(250));
            let mut n = 0u64;
            loop {
                tick.tick().await;
                n += 1;
                let mut fields = body(n);
                fields.push(("kind", if n % 4 == 0 { "bad" } else { "good" }.to_string()));
                xadd_capped(&mut con, &s, &fields).await?;
            }
        }
    });
    let consumer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move { failing_consumer(&c, scenario, s, Some((dlq, 3))).await }
    });
    all_of(vec![producer, consumer]).await
}

async fn trim(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Trim;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers", "archive"], &[]).await?;
    say(
        scenario,
        format_args!("MAXLEN 50 at 10/s; the archive consumer is down"),
    );
    let producer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(100));
            let mut n = 0u64;
            loop {
                tick.tick().await;
                n += 1;
                xadd(&mut con, &s, Some(50), None, &body(n)).await?;
            }
        }
    });
    let workers = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(200));
            let mut seen = 0u64;
            loop {
                tick.tick().await;
                let got = read_new(&mut con, &s, "workers", "worker-1", 50).await?;
                let mut done = Vec::new();
                for e in got {
                    seen += 1;
                    // One in five crashes the handler mid-way: never acknowledged, never retried.
                    if seen % 5 != 0 {
                        done.push(e.id);
                    }
                }
                ack(&mut con, &s, "workers", &done).await?;
            }
        }
    });
    all_of(vec![producer, workers]).await
}

async fn xdel_ghosts(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::XdelGhosts;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let producer = spawn_producer(ctx, &stream, 4.0);
    let consumer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(250));
            let mut seen = 0u64;
            loop {
                tick.tick().await;
                let got = read_new(&mut con, &s, "workers", "worker-1", 20).await?;
                let mut done = Vec::new();
                let mut deleted = Vec::new();
                for e in got {
                    seen += 1;
                    if seen % 3 == 0 {
                        deleted.push(e.id);
                    } else {
                        done.push(e.id);
                    }
                }
                ack(&mut con, &s, "workers", &done).await?;
                if !deleted.is_empty() {
                    // The bug: XDEL removes the body but leaves the PEL entry.
                    let mut cmd = redis::cmd("XDEL");
                    cmd.arg(&s);
                    for id in &deleted {
                        cmd.arg(id);
                    }
                    let _: i64 = cmd.query_async(&mut con).await?;
                }
            }
        }
    });
    all_of(vec![producer, consumer]).await
}

async fn trim_window(ctx: &Ctx) -> Result<()> {
    const MAXLEN: usize = 100;
    const BACKLOG: u64 = 90;
    const TICK_MS: u64 = 200;
    let scenario = Scenario::TrimWindow;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    // The backlog the group is behind by, as if produced over the last
    // BACKLOG ticks (explicit, time-based IDs in the recent past).
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut con).await?;
    let now_ms = secs * 1000 + micros / 1000;
    for i in 0..BACKLOG {
        let id = format!("{}-0", now_ms - (BACKLOG - i) * TICK_MS);
        xadd(&mut con, &stream, Some(MAXLEN), Some(&id), &body(i)).await?;
    }
    say(
        scenario,
        format_args!(
            "backlog of {BACKLOG} entries in a MAXLEN {MAXLEN} stream; producer and consumer at 5/s"
        ),
    );
    let mut tick = ticker(Duration::from_millis(TICK_MS));
    let mut n = BACKLOG;
    loop {
        tick.tick().await;
        n += 1;
        xadd(&mut con, &stream, Some(MAXLEN), None, &body(n)).await?;
        let got = read_new(&mut con, &stream, "workers", "worker-1", 1).await?;
        let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
        ack(&mut con, &stream, "workers", &ids).await?;
    }
}

async fn recovered(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Recovered;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let mut n = 0u64;
    // Phase 0 (5 s): normal operation, 2/s, the consumer keeps up.
    say(scenario, format_args!("phase 0: normal operation"));
    let mut tick = ticker(Duration::from_millis(500));
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        tick.tick().await;
        n += 1;
        xadd_capped(&mut con, &stream, &body(n)).await?;
        let got = read_new(&mut con, &stream, "workers", "worker-1", 10).await?;
        let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
        ack(&mut con, &stream, "workers", &ids).await?;
    }
    // Phase 1 (30 s): the consumer is down while a burst at 20/s is trimmed
    // to MAXLEN 100: the trim overtakes the group and entries are lost.
    say(
        scenario,
        format_args!("phase 1: consumer outage, burst at 20/s with MAXLEN 100"),
    );
    let mut tick = ticker(Duration::from_millis(50));
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        tick.tick().await;
        n += 1;
        xadd(&mut con, &stream, Some(100), None, &body(n)).await?;
    }
    // Phase 2: the consumer restarts at 2/s, production at 4/s, the
    // aggressive trimming is gone. Redis 7.0.x, 7.2.0-7.2.6 and 7.4.0-7.4.1
    // still count the trimmed entries in the lag (lag > XLEN), so the
    // exporter estimates it instead.
    say(
        scenario,
        format_args!("phase 2: consumer back at 2/s, production 4/s, no more trimming"),
    );
    let mut tick = ticker(Duration::from_millis(250));
    let mut turn = 0u64;
    loop {
        tick.tick().await;
        n += 1;
        turn += 1;
        xadd_capped(&mut con, &stream, &body(n)).await?;
        if turn % 2 == 0 {
            let got = read_new(&mut con, &stream, "workers", "worker-1", 1).await?;
            let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
            ack(&mut con, &stream, "workers", &ids).await?;
        }
    }
}

async fn outpace(ctx: &Ctx) -> Result<()> {
    let stream = Scenario::Outpace.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let tasks = vec![
        spawn_producer(ctx, &stream, 6.0),
        spawn_consumer(
            ctx,
            &stream,
            "workers",
            "worker-1",
            Duration::from_millis(333),
            1,
        ),
    ];
    all_of(tasks).await
}

async fn outpace_xdel(ctx: &Ctx) -> Result<()> {
    /// Every how many entries the producer cancels the one it just added (every 5 s at 6/s).
    const CANCEL_EVERY: u64 = 30;
    let scenario = Scenario::OutpaceXdel;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    say(
        scenario,
        format_args!(
            "producer 6/s cancels (XDEL) every {CANCEL_EVERY}th entry, undelivered; consumer 3/s"
        ),
    );
    let producer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_secs_f64(1.0 / 6.0));
            let mut n = 0u64;
            loop {
                tick.tick().await;
                n += 1;
                let id = xadd_capped(&mut con, &s, &body(n)).await?;
                if n % CANCEL_EVERY == 0 {
                    // The consumer is behind, so this entry has not been delivered: the
                    // deletion lies ahead of the group's last-delivered-id.
                    let _: i64 = redis::cmd("XDEL")
                        .arg(&s)
                        .arg(&id)
                        .query_async(&mut con)
                        .await?;
                }
            }
        }
    });
    let consumer = spawn_consumer(
        ctx,
        &stream,
        "workers",
        "worker-1",
        Duration::from_millis(333),
        1,
    );
    all_of(vec![producer, consumer]).await
}

async fn stopped(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Stopped;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let producer = spawn_producer(ctx, &stream, 3.0);
    let consumers = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(100));
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(5) {
                tick.tick().await;
                for consumer in ["worker-1", "worker-2"] {
                    let got = read_new(&mut con, &s, "workers", consumer, 10).await?;
                    let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
                    ack(&mut con, &s, "workers", &ids).await?;
                }
            }
            say(
                scenario,
                format_args!("every consumer stopped (scaled to zero); production goes on"),
            );
            Ok(())
        }
    });
    all_of(vec![producer, consumers]).await
}

async fn noack(ctx: &Ctx) -> Result<()> {
    let stream = Scenario::Noack.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let producer = spawn_producer(ctx, &stream, 3.0);
    let consumer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(333));
            loop {
                tick.tick().await;
                // Processes and forgets XACK.
                read_new(&mut con, &s, "workers", "worker-1", 10).await?;
            }
        }
    });
    all_of(vec![producer, consumer]).await
}

async fn many_streams(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::ManyStreams;
    let mut con = ctx.conn().await?;
    let names: Vec<String> = (0..ctx.streams)
        .map(|i| format!("{}{i}", scenario.stream(&ctx.prefix)))
        .collect();
    let groups: Vec<String> = (0..ctx.groups).map(|g| format!("group-{g}")).collect();
    for chunk in names.chunks(100) {
        let mut pipe = redis::pipe();
        for name in chunk {
            pipe.cmd("DEL").arg(name).ignore();
            for n in 0..5u64 {
                pipe.cmd("XADD").arg(name).arg("*").arg("n").arg(n).ignore();
            }
            // The groups start at the end: nothing undelivered.
            for g in &groups {
                pipe.cmd("XGROUP")
                    .arg("CREATE")
                    .arg(name)
                    .arg(g)
                    .arg("$")
                    .ignore();
            }
        }
        let () = pipe.query_async(&mut con).await?;
    }
    say(
        scenario,
        format_args!(
            "{} streams {}0..{}, {} groups each",
            names.len(),
            scenario.stream(&ctx.prefix),
            names.len().saturating_sub(1),
            groups.len()
        ),
    );
    // Keep them alive: one entry per stream every 10 s, read at once by
    // each group's consumer (NOACK: nothing stays pending).
    let mut tick = ticker(Duration::from_secs(10));
    let mut n = 5u64;
    loop {
        tick.tick().await;
        n += 1;
        for chunk in names.chunks(500) {
            let mut pipe = redis::pipe();
            for name in chunk {
                pipe.cmd("XADD")
                    .arg(name)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(1000)
                    .arg("*")
                    .arg("n")
                    .arg(n)
                    .ignore();
                for g in &groups {
                    pipe.cmd("XREADGROUP")
                        .arg("GROUP")
                        .arg(g)
                        .arg("consumer-1")
                        .arg("COUNT")
                        .arg(100)
                        .arg("NOACK")
                        .arg("STREAMS")
                        .arg(name)
                        .arg(">")
                        .ignore();
                }
            }
            let () = pipe.query_async(&mut con).await?;
        }
    }
}

async fn batch(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Batch;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["reports"], &[]).await?;
    say(
        scenario,
        format_args!(
            "producer at 2/s; the batch job drains the stream every {}",
            humantime::format_duration(ctx.batch_every)
        ),
    );
    // What accumulated since the job's last run, which it drains at once.
    for n in 1..=10 {
        xadd_capped(&mut con, &stream, &body(n)).await?;
    }
    let producer = spawn_producer(ctx, &stream, 2.0);
    let job = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(c.batch_every);
            loop {
                tick.tick().await;
                let mut drained = 0usize;
                loop {
                    let got = read_new(&mut con, &s, "reports", "batch-job", 500).await?;
                    if got.is_empty() {
                        break;
                    }
                    drained += got.len();
                    let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
                    ack(&mut con, &s, "reports", &ids).await?;
                }
                say(
                    Scenario::Batch,
                    format_args!("batch job processed {drained} entries"),
                );
            }
        }
    });
    all_of(vec![producer, job]).await
}

async fn big_pel(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::BigPel;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let total = ctx.pel_entries.max(1);
    let mut n = 0u64;
    while (n as usize) < total {
        let mut pipe = redis::pipe();
        for _ in 0..500.min(total - n as usize) {
            n += 1;
            pipe.cmd("XADD")
                .arg(&stream)
                .arg("*")
                .arg("n")
                .arg(n)
                .ignore();
        }
        let () = pipe.query_async(&mut con).await?;
    }
    let mut in_flight: VecDeque<String> = VecDeque::new();
    while in_flight.len() < total {
        let got = read_new(&mut con, &stream, "workers", "prefetcher", 1000).await?;
        if got.is_empty() {
            break;
        }
        in_flight.extend(got.into_iter().map(|e| e.id));
    }
    say(
        scenario,
        format_args!(
            "{} entries in flight with consumer prefetcher",
            in_flight.len()
        ),
    );
    // Keep the PEL the same size and moving: produce, take, finish the oldest.
    let mut tick = ticker(Duration::from_millis(500));
    loop {
        tick.tick().await;
        n += 1;
        xadd_capped(&mut con, &stream, &body(n)).await?;
        let got = read_new(&mut con, &stream, "workers", "prefetcher", 1).await?;
        in_flight.extend(got.into_iter().map(|e| e.id));
        let mut done = Vec::new();
        while in_flight.len() > total {
            if let Some(id) = in_flight.pop_front() {
                done.push(id);
            }
        }
        ack(&mut con, &stream, "workers", &done).await?;
    }
}

async fn evictable(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Evictable;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    if ctx.set_eviction_policy {
        let _: String = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg("256mb")
            .query_async(&mut con)
            .await?;
        let _: String = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("allkeys-lru")
            .query_async(&mut con)
            .await?;
        say(
            scenario,
            format_args!("maxmemory 256mb, maxmemory-policy allkeys-lru"),
        );
    }
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let producer = spawn_producer(ctx, &stream, 2.0);
    let consumer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(500));
            // The five newest entries are always in flight (a prefetching consumer):
            // the PEL never empties, and its oldest entry keeps moving.
            let mut in_flight: VecDeque<String> = VecDeque::new();
            loop {
                tick.tick().await;
                let got = read_new(&mut con, &s, "workers", "worker-1", 10).await?;
                in_flight.extend(got.into_iter().map(|e| e.id));
                let mut done = Vec::new();
                while in_flight.len() > 5 {
                    if let Some(id) = in_flight.pop_front() {
                        done.push(id);
                    }
                }
                ack(&mut con, &s, "workers", &done).await?;
            }
        }
    });
    all_of(vec![producer, consumer]).await
}
