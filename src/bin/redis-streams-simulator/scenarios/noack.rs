//! `noack`: the consumer reads 3/s and never acknowledges.

use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, all_of, fresh_stream, read_new, spawn_producer, ticker};
use crate::scenario::Scenario;

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
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
