//! `many-streams`: `--streams N` small streams, for `max_streams` and
//! rate-limit starvation; with `--groups G`, each stream has G groups whose
//! consumers keep up (a large healthy keyspace, as `check` meets it).

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
    let groups: Vec<String> = (0..ctx.groups).map(|g| format!("group-{g}")).collect();
    for chunk in names.chunks(100) {
        let mut pipe = redis::pipe();
        for name in chunk {
            pipe.cmd("DEL").arg(name).ignore();
            for n in 0..5u64 {
                pipe.cmd("XADD").arg(name).arg("*").arg("n").arg(n).ignore();
            }
            // The groups start at the end: nothing undelivered.
            for g in &groups {
                pipe.cmd("XGROUP")
                    .arg("CREATE")
                    .arg(name)
                    .arg(g)
                    .arg("$")
                    .ignore();
            }
        }
        let () = pipe.query_async(&mut con).await?;
    }
    say(
        scenario,
        format_args!(
            "{} streams {}0..{}, {} groups each",
            names.len(),
            ctx.prefix,
            names.len().saturating_sub(1),
            groups.len()
        ),
    );
    // Keep them alive: one entry per stream every 10 s, read at once by each
    // group's consumer (NOACK: nothing stays pending).
    let mut tick = ticker(Duration::from_secs(10));
    let mut n = 5u64;
    loop {
        tick.tick().await;
        n += 1;
        for chunk in names.chunks(500) {
            let mut pipe = redis::pipe();
            for name in chunk {
                pipe.cmd("XADD")
                    .arg(name)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(1000)
                    .arg("*")
                    .arg("n")
                    .arg(n)
                    .ignore();
                for g in &groups {
                    pipe.cmd("XREADGROUP")
                        .arg("GROUP")
                        .arg(g)
                        .arg("consumer-1")
                        .arg("COUNT")
                        .arg(100)
                        .arg("NOACK")
                        .arg("STREAMS")
                        .arg(name)
                        .arg(">")
                        .ignore();
                }
            }
            let () = pipe.query_async(&mut con).await?;
        }
    }
}
