//! `trim`: `XADD … MAXLEN 50` at 10/s. Group `workers` leaves 1 in 5 entries
//! unacknowledged (ghosts once trimmed); group `archive` has no consumer, so
//! trimming removes entries it never read. The stream starts full (50
//! entries, the first 50 read by `workers`), so trimming, and the archive's
//! loss, begin with the producer's first entry rather than 5 s later.

use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, Entry, ack, all_of, body, fresh_stream, read_new, ticker, xadd};
use crate::scenario::{Scenario, say};

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Trim;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers", "archive"], &[]).await?;
    say(
        scenario,
        format_args!("MAXLEN 50 at 10/s; the archive consumer is down"),
    );
    for n in 1..=50 {
        xadd(&mut con, &stream, Some(50), None, &body(n)).await?;
    }
    let mut seen = 0u64;
    let got = read_new(&mut con, &stream, "workers", "worker-1", 50).await?;
    ack(&mut con, &stream, "workers", &handled(got, &mut seen)).await?;
    let producer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(100));
            let mut n = 50u64;
            loop {
                tick.tick().await;
                n += 1;
                xadd(&mut con, &s, Some(50), None, &body(n)).await?;
            }
        }
    });
    let workers = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(200));
            loop {
                tick.tick().await;
                let got = read_new(&mut con, &s, "workers", "worker-1", 50).await?;
                ack(&mut con, &s, "workers", &handled(got, &mut seen)).await?;
            }
        }
    });
    all_of(vec![producer, workers]).await
}

/// The IDs of the entries handled: one in five crashes the handler mid-way,
/// never acknowledged, never retried.
fn handled(got: Vec<Entry>, seen: &mut u64) -> Vec<String> {
    let mut done = Vec::new();
    for e in got {
        *seen += 1;
        if *seen % 5 != 0 {
            done.push(e.id);
        }
    }
    done
}
