//! `big-pel`: a prefetching consumer keeps `--pel-entries N` entries in flight.

use std::collections::VecDeque;
use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, ack, body, fresh_stream, read_new, ticker, xadd_capped};
use crate::scenario::{Scenario, say};

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::BigPel;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let total = ctx.pel_entries.max(1);
    let mut n = 0u64;
    while (n as usize) < total {
        let mut pipe = redis::pipe();
        for _ in 0..500.min(total - n as usize) {
            n += 1;
            pipe.cmd("XADD")
                .arg(&stream)
                .arg("*")
                .arg("n")
                .arg(n)
                .ignore();
        }
        let () = pipe.query_async(&mut con).await?;
    }
    let mut in_flight: VecDeque<String> = VecDeque::new();
    while in_flight.len() < total {
        let got = read_new(&mut con, &stream, "workers", "prefetcher", 1000).await?;
        if got.is_empty() {
            break;
        }
        in_flight.extend(got.into_iter().map(|e| e.id));
    }
    say(
        scenario,
        format_args!(
            "{} entries in flight with consumer prefetcher",
            in_flight.len()
        ),
    );
    // Keep the PEL the same size and moving: produce, take, finish the oldest.
    let mut tick = ticker(Duration::from_millis(500));
    loop {
        tick.tick().await;
        n += 1;
        xadd_capped(&mut con, &stream, &body(n)).await?;
        let got = read_new(&mut con, &stream, "workers", "prefetcher", 1).await?;
        in_flight.extend(got.into_iter().map(|e| e.id));
        let mut done = Vec::new();
        while in_flight.len() > total {
            if let Some(id) = in_flight.pop_front() {
                done.push(id);
            }
        }
        ack(&mut con, &stream, "workers", &done).await?;
    }
}
