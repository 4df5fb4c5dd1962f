//! `recovered`: a consumer outage while `MAXLEN 100` trimming overtakes the
//! group, then a restart that stays 10 entries behind with a nil lag.
//!
//! The nil lag comes from `XGROUP SETID` to the group's own position without
//! `ENTRIESREAD`: every 7.0+ server then forgets the group's entries-read and
//! reports `lag` as nil until the group reads the last entry, which it never
//! does here (it stays 10 behind), so the exporter counts the lag itself and
//! marks it estimated; Redis 6.2 reports no lag at all. Nothing depends on
//! one server's lag arithmetic.

use std::time::Duration;

use anyhow::Result;
use tokio::time::Instant;

use crate::ops::{
    Ctx, ack, body, fresh_stream, last_delivered, read_new, setid, ticker, xadd, xadd_capped,
};
use crate::scenario::{Scenario, say};

/// Entries the restarted consumer stays behind.
const BEHIND: usize = 10;

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Recovered;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let mut n = 0u64;
    // Phase 0 (5 s): normal operation, 2/s, the consumer keeps up.
    say(scenario, format_args!("phase 0: normal operation"));
    let mut tick = ticker(Duration::from_millis(500));
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        tick.tick().await;
        n += 1;
        xadd_capped(&mut con, &stream, &body(n)).await?;
        let got = read_new(&mut con, &stream, "workers", "worker-1", 10).await?;
        let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
        ack(&mut con, &stream, "workers", &ids).await?;
    }
    // Phase 1 (30 s): the consumer is down while a burst at 20/s is trimmed
    // to MAXLEN 100: the trim overtakes the group and entries are lost.
    say(
        scenario,
        format_args!("phase 1: consumer outage, burst at 20/s with MAXLEN 100"),
    );
    let mut tick = ticker(Duration::from_millis(50));
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        tick.tick().await;
        n += 1;
        xadd(&mut con, &stream, Some(100), None, &body(n)).await?;
    }
    // Phase 2: the consumer comes back and drains what is left but the last
    // BEHIND entries, in one read. Then production at 2/s without trimming,
    // and every tick it reads one entry: it stays BEHIND entries behind.
    let retained: i64 = redis::cmd("XLEN")
        .arg(&stream)
        .query_async(&mut con)
        .await?;
    let drain = usize::try_from(retained)
        .unwrap_or(0)
        .saturating_sub(BEHIND)
        .max(1);
    let got = read_new(&mut con, &stream, "workers", "worker-1", drain).await?;
    let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
    ack(&mut con, &stream, "workers", &ids).await?;
    let position = last_delivered(&mut con, &stream, "workers").await?;
    setid(&mut con, &stream, "workers", &position).await?;
    say(
        scenario,
        format_args!(
            "phase 2: consumer back, drained {} entries, {BEHIND} behind at {position} (SETID: nil lag); 2/s in and out",
            ids.len()
        ),
    );
    let mut tick = ticker(Duration::from_millis(500));
    loop {
        tick.tick().await;
        n += 1;
        xadd_capped(&mut con, &stream, &body(n)).await?;
        let got = read_new(&mut con, &stream, "workers", "worker-1", 1).await?;
        let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
        ack(&mut con, &stream, "workers", &ids).await?;
    }
}
