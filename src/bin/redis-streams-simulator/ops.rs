//! The Redis commands the scenarios share (plain commands: the crate is built
//! without its stream helpers), and the producer and consumer loops several
//! scenarios run.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use redis::Value;
use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;
use tokio::time::{MissedTickBehavior, interval};

/// What every scenario gets.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    pub(crate) client: redis::Client,
    pub(crate) prefix: String,
    pub(crate) streams: usize,
    pub(crate) groups: usize,
    pub(crate) batch_every: Duration,
    pub(crate) outage: Duration,
    pub(crate) idle_consumers: usize,
    pub(crate) pel_entries: usize,
    pub(crate) set_eviction_policy: bool,
}

impl Ctx {
    /// A connection of its own (consumers never share one with producers).
    pub(crate) async fn conn(&self) -> Result<MultiplexedConnection> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(Duration::from_secs(30)));
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .context("cannot connect to Redis")
    }
}

// ------------------------------------------------------------------------------------------------
// Commands.

/// One stream entry.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) fields: BTreeMap<String, String>,
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
pub(crate) fn entries(v: &Value) -> Vec<Entry> {
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
pub(crate) async fn fresh_stream(
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
pub(crate) async fn xadd(
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

pub(crate) async fn xadd_capped(
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
pub(crate) async fn read_new(
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

pub(crate) async fn ack(
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
pub(crate) async fn claim(
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

/// XDEL of `ids`.
pub(crate) async fn xdel(
    con: &mut MultiplexedConnection,
    stream: &str,
    ids: &[String],
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut cmd = redis::cmd("XDEL");
    cmd.arg(stream);
    for id in ids {
        cmd.arg(id);
    }
    let _: i64 = cmd.query_async(con).await?;
    Ok(())
}

/// `XGROUP SETID stream group id`, without ENTRIESREAD: Redis 7.0+ forgets the
/// group's entries-read, so its lag is nil until the group reads the last entry.
pub(crate) async fn setid(
    con: &mut MultiplexedConnection,
    stream: &str,
    group: &str,
    id: &str,
) -> Result<()> {
    let _: String = redis::cmd("XGROUP")
        .arg("SETID")
        .arg(stream)
        .arg(group)
        .arg(id)
        .query_async(con)
        .await
        .with_context(|| format!("XGROUP SETID {stream} {group} {id}"))?;
    Ok(())
}

/// The group's last-delivered-id, from XINFO GROUPS.
pub(crate) async fn last_delivered(
    con: &mut MultiplexedConnection,
    stream: &str,
    group: &str,
) -> Result<String> {
    let v: Value = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(stream)
        .query_async(con)
        .await?;
    let Value::Array(groups) = v else {
        return Err(anyhow!("XINFO GROUPS {stream}: not an array"));
    };
    for g in &groups {
        // RESP2 replies are flat [field, value, ...] arrays; RESP3 ones maps.
        let pairs: Vec<(String, &Value)> = match g {
            Value::Array(kv) => kv
                .chunks(2)
                .filter_map(|p| match p {
                    [k, v] => text(k).map(|k| (k, v)),
                    _ => None,
                })
                .collect(),
            Value::Map(kv) => kv
                .iter()
                .filter_map(|(k, v)| text(k).map(|k| (k, v)))
                .collect(),
            _ => Vec::new(),
        };
        let field = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| text(v))
        };
        if field("name").as_deref() == Some(group) {
            return field("last-delivered-id")
                .ok_or_else(|| anyhow!("XINFO GROUPS {stream}: {group} has no last-delivered-id"));
        }
    }
    Err(anyhow!("XINFO GROUPS {stream}: no group {group}"))
}

/// The server's clock, in milliseconds (TIME).
pub(crate) async fn server_ms(con: &mut MultiplexedConnection) -> Result<u64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(con).await?;
    Ok(secs * 1000 + micros / 1000)
}

/// A ticker that never bursts to catch up.
pub(crate) fn ticker(period: Duration) -> tokio::time::Interval {
    let mut t = interval(period);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

pub(crate) fn body(n: u64) -> Vec<(&'static str, String)> {
    vec![("n", n.to_string()), ("payload", format!("order-{n}"))]
}

// ------------------------------------------------------------------------------------------------
// Producers and consumers. Each runs until the process stops.

/// Starts a producer at `per_second` that adds capped entries forever.
pub(crate) fn spawn_producer(ctx: &Ctx, stream: &str, per_second: f64) -> JoinHandle<Result<()>> {
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
pub(crate) fn spawn_consumer(
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

pub(crate) async fn all_of(tasks: Vec<JoinHandle<Result<()>>>) -> Result<()> {
    // A scenario stopped (for --cleanup, or at the end) stops its tasks with
    // it: a spawned task outlives its parent otherwise, and would write again
    // after the cleanup deleted its keys.
    let tasks: Vec<_> = tasks
        .into_iter()
        .map(tokio_util::task::AbortOnDropHandle::new)
        .collect();
    for t in tasks {
        t.await.map_err(|e| anyhow!("task panicked: {e}"))??;
    }
    Ok(())
}
