//! The keyspace as the server holds it: many small streams (`many-streams`),
//! and a queue the server may evict (`evictable`).

use std::collections::VecDeque;
use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, ack, all_of, fresh_stream, read_new, spawn_producer, ticker};
use crate::scenario::{Scenario, say};

/// `many-streams`: `--streams N` small streams, for `max_streams` and
/// rate-limit starvation; with `--groups G`, each stream has G groups whose
/// consumers keep up (a large healthy keyspace, as `check` meets it).
pub(crate) async fn many_streams(ctx: &Ctx) -> Result<()> {
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
            ctx.prefix,
            names.len().saturating_sub(1),
            groups.len()
        ),
    );
    // Keep them alive: one entry per stream every 10 s, read at once by each
    // group's consumer (NOACK: nothing stays pending).
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

/// `evictable`: a queue whose consumer always has 5 entries in flight; with
/// `--set-eviction-policy` the server may evict it (allkeys-lru).
pub(crate) async fn evictable(ctx: &Ctx) -> Result<()> {
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
