//! `trim-window`: a steady backlog at 90 % of the retained window of a
//! `MAXLEN 100` stream: the group holds near the trimming edge without
//! losing ground (a retention margin under `max_delay`, not a page).

use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, ack, body, fresh_stream, read_new, ticker, xadd};
use crate::scenario::{Scenario, say};

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
    const MAXLEN: usize = 100;
    const BACKLOG: u64 = 90;
    const TICK_MS: u64 = 200;
    let scenario = Scenario::TrimWindow;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    // The backlog the group is behind by, as if produced over the last
    // BACKLOG ticks (explicit, time-based IDs in the recent past).
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut con).await?;
    let now_ms = secs * 1000 + micros / 1000;
    for i in 0..BACKLOG {
        let id = format!("{}-0", now_ms - (BACKLOG - i) * TICK_MS);
        xadd(&mut con, &stream, Some(MAXLEN), Some(&id), &body(i)).await?;
    }
    say(
        scenario,
        format_args!(
            "backlog of {BACKLOG} entries in a MAXLEN {MAXLEN} stream; producer and consumer at 5/s"
        ),
    );
    let mut tick = ticker(Duration::from_millis(TICK_MS));
    let mut n = BACKLOG;
    loop {
        tick.tick().await;
        n += 1;
        xadd(&mut con, &stream, Some(MAXLEN), None, &body(n)).await?;
        let got = read_new(&mut con, &stream, "workers", "worker-1", 1).await?;
        let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
        ack(&mut con, &stream, "workers", &ids).await?;
    }
}
