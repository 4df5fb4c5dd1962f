//! `healthy`: a producer at 5/s and two consumers that read and acknowledge at
//! once. Nothing should alert.

use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, all_of, fresh_stream, spawn_consumer, spawn_producer};
use crate::scenario::Scenario;

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
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
