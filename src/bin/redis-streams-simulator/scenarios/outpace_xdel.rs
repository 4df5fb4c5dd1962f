//! `outpace-xdel`: as `outpace`, and every 5 s the producer cancels (`XDEL`) its
//! newest entry, which the group has not read: Redis 7.0+ reports no lag.

use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, all_of, body, fresh_stream, spawn_consumer, ticker, xadd_capped};
use crate::scenario::{Scenario, say};

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
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
