//! `xdel-ghosts`: the consumer deletes (`XDEL`) every 3rd entry it read instead
//! of acknowledging it, leaving pending entries without a body.

use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, ack, all_of, fresh_stream, read_new, spawn_producer, ticker};
use crate::scenario::Scenario;

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
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
