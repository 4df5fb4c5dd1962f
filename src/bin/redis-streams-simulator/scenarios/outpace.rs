//! `outpace`: production at 6/s, consumption at 3/s.

use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, all_of, fresh_stream, spawn_consumer, spawn_producer};
use crate::scenario::Scenario;

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
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
