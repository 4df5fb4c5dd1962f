//! `evictable`: a queue whose consumer always has 5 entries in flight; with
//! `--set-eviction-policy` the server may evict it (allkeys-lru).

use std::collections::VecDeque;
use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, ack, all_of, fresh_stream, read_new, spawn_producer, ticker};
use crate::scenario::{Scenario, say};

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
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
