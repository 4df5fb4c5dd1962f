//! `many-streams`: `--streams N` small streams without groups, for `max_streams`
//! and rate-limit starvation.

use std::time::Duration;

use anyhow::Result;

use crate::ops::{Ctx, ticker};
use crate::scenario::{Scenario, say};

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::ManyStreams;
    let mut con = ctx.conn().await?;
    let names: Vec<String> = (0..ctx.streams)
        .map(|i| format!("{}{i}", scenario.stream(&ctx.prefix)))
        .collect();
    for name in &names {
        let _: i64 = redis::cmd("DEL").arg(name).query_async(&mut con).await?;
        let mut pipe = redis::pipe();
        for n in 0..5u64 {
            pipe.cmd("XADD").arg(name).arg("*").arg("n").arg(n).ignore();
        }
        let () = pipe.query_async(&mut con).await?;
    }
    say(
        scenario,
        format_args!(
            "{} streams {}0..{}",
            names.len(),
            ctx.prefix,
            names.len().saturating_sub(1)
        ),
    );
    // Keep them alive: one entry per stream every 10 s.
    let mut tick = ticker(Duration::from_secs(10));
    let mut n = 5u64;
    loop {
        tick.tick().await;
        n += 1;
        let mut pipe = redis::pipe();
        for name in &names {
            pipe.cmd("XADD")
                .arg(name)
                .arg("MAXLEN")
                .arg("~")
                .arg(1000)
                .arg("*")
                .arg("n")
                .arg(n)
                .ignore();
        }
        let () = pipe.query_async(&mut con).await?;
    }
}
