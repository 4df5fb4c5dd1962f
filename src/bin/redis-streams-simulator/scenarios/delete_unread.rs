//! `delete-unread`: entries deleted before the group read them, once.
//!
//! A producer at 2/s and a consumer that reads everything every 2 s. After
//! [`WARM_UP`], five entries are added and three of them deleted (`XDEL`)
//! before the consumer's next read: the group will never read those three.
//! Redis 7.0+ reports the group's lag as nil until it reads the last entry
//! again (the next read); the exporter counts the three as lost with cause
//! `deleted`. Redis 8.2+ has other ways to do the same (`XDELEX`, `XACKDEL`
//! by another group, `DELREF` trims), all counted alike.

use std::time::Duration;

use anyhow::Result;
use tokio::time::Instant;

use crate::ops::{Ctx, ack, body, fresh_stream, read_new, ticker, xadd_capped, xdel};
use crate::scenario::{Scenario, say};

const WARM_UP: Duration = Duration::from_secs(8);

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::DeleteUnread;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let start = Instant::now();
    let mut deleted = false;
    let mut tick = ticker(Duration::from_millis(500));
    let mut n = 0u64;
    let mut turn = 0u64;
    loop {
        tick.tick().await;
        turn += 1;
        n += 1;
        xadd_capped(&mut con, &stream, &body(n)).await?;
        if turn % 4 == 0 {
            let got = read_new(&mut con, &stream, "workers", "worker-1", 100).await?;
            let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
            ack(&mut con, &stream, "workers", &ids).await?;
        }
        if !deleted && start.elapsed() >= WARM_UP {
            deleted = true;
            let mut added = Vec::new();
            for _ in 0..5 {
                n += 1;
                added.push(xadd_capped(&mut con, &stream, &body(n)).await?);
            }
            let gone = vec![added[1].clone(), added[2].clone(), added[3].clone()];
            xdel(&mut con, &stream, &gone).await?;
            say(
                scenario,
                format_args!("deleted 3 unread entries: {}", gone.join(" ")),
            );
            // The next read comes a full period (2 s) later: the exporter sees the gap.
            turn = 0;
        }
    }
}
