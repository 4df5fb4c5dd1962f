//! `trim-overtake`: a producer trims at the head while a slow group falls
//! behind, then the group speeds up before trimming reaches it.
//!
//! The stream starts with a [`WINDOW`] of history (backdated, time-based
//! IDs) at `MAXLEN` [`MAXLEN`], and the group at its end. For [`SLOW`] the
//! producer adds [`RATE`] entries a second with `MAXLEN` while the consumer
//! reads a third of that: the group's first undelivered entry ages while
//! trimming keeps removing the oldest, so the retention margin (its distance
//! from the trimming edge) shrinks by two thirds of a second a second and the
//! exporter's trim-overtake ETA appears and shrinks. Left alone the group
//! would lose entries after about 1.5 × [`WINDOW`]; it speeds up to twice
//! the production rate before (at [`SLOW`] the margin still holds about half
//! the window): the lag shrinks, the drain ETA appears and the overtake ETA
//! goes away; once caught up the consumer keeps up. Nothing is lost. It
//! happens once.

use std::time::Duration;

use anyhow::{Context, Result};
use tokio::time::Instant;

use crate::ops::{Ctx, ack, body, fresh_stream, read_new, server_ms, ticker, xadd};
use crate::scenario::{Scenario, say};

/// Entries the stream keeps: [`RATE`] × [`WINDOW`].
const MAXLEN: usize = 300;
/// Entries produced per second.
const RATE: u64 = 5;
/// Time span the stream retains at [`RATE`].
const WINDOW: Duration = Duration::from_secs(60);
/// How long the group reads at a third of the production rate.
const SLOW: Duration = Duration::from_secs(45);

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::TrimOvertake;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    // The stream with its history first, then the group at its end.
    fresh_stream(&mut con, &stream, &[], &[]).await?;
    let now_ms = server_ms(&mut con).await?;
    let step_ms = 1000 / RATE;
    let history = MAXLEN as u64;
    for i in 0..history {
        let id = format!("{}-0", now_ms - (history - i) * step_ms);
        xadd(&mut con, &stream, Some(MAXLEN), Some(&id), &body(i)).await?;
    }
    create_group_at_end(&mut con, &stream, "workers", history).await?;
    say(
        scenario,
        format_args!(
            "MAXLEN {MAXLEN} at {RATE}/s ({WINDOW:?} retained); the group reads {}/s for {SLOW:?}",
            RATE as f64 / 3.0
        ),
    );
    let mut n = history;
    let producer_period = Duration::from_millis(step_ms);
    let mut tick = ticker(producer_period);
    let start = Instant::now();
    let mut fast = false;
    let mut ticks = 0u64;
    loop {
        tick.tick().await;
        n += 1;
        xadd(&mut con, &stream, Some(MAXLEN), None, &body(n)).await?;
        ticks += 1;
        if !fast && start.elapsed() >= SLOW {
            fast = true;
            say(
                scenario,
                format_args!("the group speeds up to {}/s", 2 * RATE),
            );
        }
        // Slow: one entry every third production tick. Fast: two a tick
        // (twice the production rate) until caught up, then it keeps up.
        let count = match (fast, ticks % 3 == 0) {
            (true, _) => 2,
            (false, true) => 1,
            (false, false) => 0,
        };
        if count > 0 {
            let got = read_new(&mut con, &stream, "workers", "worker-1", count).await?;
            let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
            ack(&mut con, &stream, "workers", &ids).await?;
        }
    }
}

/// `XGROUP CREATE stream group $ ENTRIESREAD entries` (Redis 7.0+: a valid
/// lag from the start), or without `ENTRIESREAD` before 7.0.
async fn create_group_at_end(
    con: &mut redis::aio::MultiplexedConnection,
    stream: &str,
    group: &str,
    entries: u64,
) -> Result<()> {
    let with_counter: redis::RedisResult<String> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg(group)
        .arg("$")
        .arg("ENTRIESREAD")
        .arg(entries)
        .query_async(con)
        .await;
    if with_counter.is_err() {
        let _: String = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(stream)
            .arg(group)
            .arg("$")
            .query_async(con)
            .await
            .with_context(|| format!("XGROUP CREATE {stream} {group}"))?;
    }
    Ok(())
}
