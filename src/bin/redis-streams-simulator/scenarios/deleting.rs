//! Entries deleted (`XDEL`): by a consumer instead of acknowledging them
//! (`xdel-ghosts`), before the group read them (`delete-unread`), or by a
//! producer that outpaces its consumer (`outpace-xdel`).

use std::time::Duration;

use anyhow::Result;
use tokio::time::Instant;

use crate::ops::{
    Ctx, ack, all_of, body, fresh_stream, read_new, spawn_consumer, spawn_producer, ticker,
    xadd_capped, xdel,
};
use crate::scenario::{Scenario, say};

/// `xdel-ghosts`: the consumer deletes (`XDEL`) every 3rd entry it read instead
/// of acknowledging it, leaving pending entries without a body.
pub(crate) async fn xdel_ghosts(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::XdelGhosts;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let producer = spawn_producer(ctx, &stream, 4.0);
    let consumer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(250));
            let mut seen = 0u64;
            loop {
                tick.tick().await;
                let got = read_new(&mut con, &s, "workers", "worker-1", 20).await?;
                let mut done = Vec::new();
                let mut deleted = Vec::new();
                for e in got {
                    seen += 1;
                    if seen % 3 == 0 {
                        deleted.push(e.id);
                    } else {
                        done.push(e.id);
                    }
                }
                ack(&mut con, &s, "workers", &done).await?;
                if !deleted.is_empty() {
                    // The bug: XDEL removes the body but leaves the PEL entry.
                    let mut cmd = redis::cmd("XDEL");
                    cmd.arg(&s);
                    for id in &deleted {
                        cmd.arg(id);
                    }
                    let _: i64 = cmd.query_async(&mut con).await?;
                }
            }
        }
    });
    all_of(vec![producer, consumer]).await
}

/// `delete-unread`: entries deleted before the group read them, once.
///
/// A producer at 2/s and a consumer that reads everything every 2 s. After
/// `WARM_UP`, five entries are added and three of them deleted (`XDEL`)
/// before the consumer's next read: the group will never read those three.
/// Redis 7.0+ reports the group's lag as nil until it reads the last entry
/// again (the next read); the exporter counts the three as lost with cause
/// `deleted`. Redis 8.2+ has other ways to do the same (`XDELEX`, `XACKDEL`
/// by another group, `DELREF` trims), all counted alike.
pub(crate) async fn delete_unread(ctx: &Ctx) -> Result<()> {
    const WARM_UP: Duration = Duration::from_secs(8);
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

/// `outpace-xdel`: as `outpace`, and every 5 s the producer cancels (`XDEL`) its
/// newest entry, which the group has not read: Redis 7.0+ reports no lag.
pub(crate) async fn outpace_xdel(ctx: &Ctx) -> Result<()> {
    /// Every how many entries the producer cancels the one it just added (every 5 s at 6/s).
    const CANCEL_EVERY: u64 = 30;
    let scenario = Scenario::OutpaceXdel;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    say(
        scenario,
        format_args!(
            "producer 6/s cancels (XDEL) every {CANCEL_EVERY}th entry, undelivered; consumer 3/s"
        ),
    );
    let producer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_secs_f64(1.0 / 6.0));
            let mut n = 0u64;
            loop {
                tick.tick().await;
                n += 1;
                let id = xadd_capped(&mut con, &s, &body(n)).await?;
                if n % CANCEL_EVERY == 0 {
                    // The consumer is behind, so this entry has not been delivered: the
                    // deletion lies ahead of the group's last-delivered-id.
                    let _: i64 = redis::cmd("XDEL")
                        .arg(&s)
                        .arg(&id)
                        .query_async(&mut con)
                        .await?;
                }
            }
        }
    });
    let consumer = spawn_consumer(
        ctx,
        &stream,
        "workers",
        "worker-1",
        Duration::from_millis(333),
        1,
    );
    all_of(vec![producer, consumer]).await
}
