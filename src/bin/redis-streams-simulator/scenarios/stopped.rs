//! `stopped`: two consumers read for 5 s, then all stop while production goes
//! on.

use std::time::Duration;

use anyhow::Result;
use tokio::time::Instant;

use crate::ops::{Ctx, ack, all_of, fresh_stream, read_new, spawn_producer, ticker};
use crate::scenario::{Scenario, say};

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
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
