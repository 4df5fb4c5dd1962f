//! `poison`: one malformed entry fails on every delivery and is reclaimed
//! (`XCLAIM`) forever.

use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, all_of, body, fresh_stream, ticker, xadd_capped};
use crate::scenario::Scenario;

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
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
        async move { super::failing::failing_consumer(&c, scenario, s, None).await }
    });
    all_of(vec![producer, consumer]).await
}
