//! What consumers do: keep up (`healthy`), crash holding entries
//! (`crashed-consumer`), never acknowledge what they read (`never-acks`), stop
//! (`stopped`), fall behind (`outpace`), drain the stream in batches (`batch`),
//! wait on a stream nothing is produced to (`idle`), read with `NOACK`
//! (`noack-reader`) or keep a big PEL in flight (`big-pel`).

use std::collections::VecDeque;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::time::Instant;

use crate::ops::{
    Ctx, ack, all_of, body, fresh_stream, read_new, spawn_consumer, spawn_producer, ticker,
    xadd_capped,
};
use crate::scenario::{Scenario, say};

/// `healthy`: a producer at 5/s and two consumers that read and acknowledge at
/// once. Nothing should alert.
pub(crate) async fn healthy(ctx: &Ctx) -> Result<()> {
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

/// `crashed-consumer`: `worker-2` reads 20 entries and dies holding them while
/// `worker-1` keeps up with a 5/s producer, among `--idle-consumers` idle
/// consumers with random names (a fleet's earlier incarnations, each
/// restart a new name), holding nothing: the one to act on is `worker-2`,
/// wherever its name sorts.
pub(crate) async fn crashed_consumer(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::CrashedConsumer;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    // Names from a xorshift over the clock: random enough to sort anywhere.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x5eed, |d| d.as_nanos() as u64)
        | 1;
    let mut crowd = redis::pipe();
    for _ in 0..ctx.idle_consumers {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        crowd
            .cmd("XGROUP")
            .arg("CREATECONSUMER")
            .arg(&stream)
            .arg("workers")
            .arg(format!("worker-{:08x}", seed as u32))
            .ignore();
    }
    if ctx.idle_consumers > 0 {
        let _: () = crowd
            .query_async(&mut con)
            .await
            .with_context(|| format!("XGROUP CREATECONSUMER {stream} workers"))?;
    }
    for n in 1..=20 {
        xadd_capped(&mut con, &stream, &body(n)).await?;
    }
    // worker-2 takes a batch of 20 and dies before acknowledging any of it.
    let held = read_new(&mut con, &stream, "workers", "worker-2", 20).await?;
    say(
        scenario,
        format_args!(
            "worker-2 crashed holding {} entries (first {}), among {} idle consumers",
            held.len(),
            held.first().map_or("-", |e| e.id.as_str()),
            ctx.idle_consumers
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

/// `never-acks`: the consumer reads 3/s and never acknowledges what it read.
pub(crate) async fn never_acks(ctx: &Ctx) -> Result<()> {
    let stream = Scenario::NeverAcks.stream(&ctx.prefix);
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

/// `stopped`: two consumers read for 5 s, then all stop while production goes
/// on.
pub(crate) async fn stopped(ctx: &Ctx) -> Result<()> {
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

/// `outpace`: production at 6/s, consumption at 3/s.
pub(crate) async fn outpace(ctx: &Ctx) -> Result<()> {
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

/// `batch`: a producer at 2/s and a healthy batch job that drains the stream
/// every `--batch-every` (4 minutes by default) and is idle in between. Its
/// consumer's last read is up to a whole period old while entries wait:
/// `check` must not call it stopped.
pub(crate) async fn batch(ctx: &Ctx) -> Result<()> {
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

/// `idle`: a stream whose 10 entries its consumer read and acknowledged;
/// nothing is produced since, and the consumer keeps waiting for more
/// (`XREADGROUP … BLOCK 1000`). Nothing should alert.
pub(crate) async fn idle(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Idle;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    for n in 1..=10 {
        xadd_capped(&mut con, &stream, &body(n)).await?;
    }
    let got = read_new(&mut con, &stream, "workers", "worker-1", 10).await?;
    let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
    ack(&mut con, &stream, "workers", &ids).await?;
    say(
        scenario,
        format_args!("10 entries read and acknowledged; nothing is produced from now on"),
    );
    loop {
        // Waits for work that never comes, as a worker blocked on the stream.
        let _: redis::Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("workers")
            .arg("worker-1")
            .arg("COUNT")
            .arg(10)
            .arg("BLOCK")
            .arg(1000)
            .arg("STREAMS")
            .arg(&stream)
            .arg(">")
            .query_async(&mut con)
            .await?;
    }
}

/// `noack-reader`: a producer at 2/s and a consumer that reads with
/// `XREADGROUP … NOACK` every 200 ms (fire-and-forget delivery: nothing is
/// ever pending) and keeps up. Nothing should alert.
pub(crate) async fn noack_reader(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::NoackReader;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let producer = spawn_producer(ctx, &stream, 2.0);
    let reader = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(200));
            loop {
                tick.tick().await;
                let _: redis::Value = redis::cmd("XREADGROUP")
                    .arg("GROUP")
                    .arg("workers")
                    .arg("reader-1")
                    .arg("COUNT")
                    .arg(100)
                    .arg("NOACK")
                    .arg("STREAMS")
                    .arg(&s)
                    .arg(">")
                    .query_async(&mut con)
                    .await?;
            }
        }
    });
    all_of(vec![producer, reader]).await
}

/// `big-pel`: a prefetching consumer keeps `--pel-entries N` entries in flight.
pub(crate) async fn big_pel(ctx: &Ctx) -> Result<()> {
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
