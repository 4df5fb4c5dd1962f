//! `crashed-consumer`: `worker-2` reads 20 entries and dies holding them while
//! `worker-1` keeps up with a 5/s producer.

use std::time::Duration;

use anyhow::Result;

use crate::ops::{
    Ctx, all_of, body, fresh_stream, read_new, spawn_consumer, spawn_producer, xadd_capped,
};
use crate::scenario::{Scenario, say};

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::CrashedConsumer;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    for n in 1..=20 {
        xadd_capped(&mut con, &stream, &body(n)).await?;
    }
    // worker-2 takes a batch of 20 and dies before acknowledging any of it.
    let held = read_new(&mut con, &stream, "workers", "worker-2", 20).await?;
    say(
        scenario,
        format_args!(
            "worker-2 crashed holding {} entries (first {})",
            held.len(),
            held.first().map_or("-", |e| e.id.as_str())
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
