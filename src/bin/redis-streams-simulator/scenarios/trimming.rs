//! Trimming against the groups: `MAXLEN` that makes ghosts and losses (`trim`),
//! a backlog near the trimming edge (`trim-window`), a trim caught up one poll
//! later (`trim-catchup`), a slow group the trimming gains on (`trim-overtake`),
//! and an outage overtaken by trimming, then a restart with a nil lag
//! (`recovered`).

use std::time::Duration;

use anyhow::{Context, Result};
use tokio::time::{Instant, sleep};

use crate::ops::{
    Ctx, Entry, ack, all_of, body, fresh_stream, last_delivered, read_new, server_ms, setid,
    ticker, xadd, xadd_capped,
};
use crate::scenario::{Scenario, say};

/// `trim`: `XADD … MAXLEN 50` at 10/s. Group `workers` leaves 1 in 5 entries
/// unacknowledged (ghosts once trimmed); group `archive` has no consumer, so
/// trimming removes entries it never read. The stream starts full (50
/// entries, the first 50 read by `workers`), so trimming, and the archive's
/// loss, begin with the producer's first entry rather than 5 s later.
pub(crate) async fn trim(ctx: &Ctx) -> Result<()> {
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

/// `trim-window`: a steady backlog at 90 % of the retained window of a
/// `MAXLEN 100` stream: the group holds near the trimming edge without
/// losing ground (a retention margin under `max_delay`, not a page).
pub(crate) async fn trim_window(ctx: &Ctx) -> Result<()> {
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

/// `trim-catchup`: a trim that overtakes a group and is caught up one poll
/// later, so that the gauges show the loss for about one poll only.
///
/// A producer at 2/s and a consumer that keeps up; after `WARM_UP` (the
/// exporter has seen the group once), a burst of `BURST` entries is
/// trimmed to `MAXLEN` `KEEP` before the group reads any of it:
/// `BURST - KEEP` unread entries are gone. The consumer pauses for
/// `PAUSE` (a little more than one poll of the end-to-end test's
/// exporter), then catches up. Only a counter of losses can keep that
/// (`redis_streams_group_lost_entries_total`, Redis 7.0+); a gauge-based
/// alert with a `for:` never sees it. It happens once.
pub(crate) async fn trim_catchup(ctx: &Ctx) -> Result<()> {
    const WARM_UP: Duration = Duration::from_secs(8);
    const BURST: u64 = 60;
    const KEEP: usize = 20;
    const PAUSE: Duration = Duration::from_millis(1500);
    let scenario = Scenario::TrimCatchup;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let start = Instant::now();
    let mut burst_done = false;
    let mut tick = ticker(Duration::from_millis(500));
    let mut n = 0u64;
    loop {
        tick.tick().await;
        if !burst_done && start.elapsed() >= WARM_UP {
            burst_done = true;
            for _ in 0..BURST {
                n += 1;
                xadd_capped(&mut con, &stream, &body(n)).await?;
            }
            let removed: i64 = redis::cmd("XTRIM")
                .arg(&stream)
                .arg("MAXLEN")
                .arg(KEEP)
                .query_async(&mut con)
                .await?;
            say(
                scenario,
                format_args!(
                    "burst of {BURST} trimmed to MAXLEN {KEEP}: {removed} entries removed, the group reads again in {PAUSE:?}"
                ),
            );
            sleep(PAUSE).await;
        }
        n += 1;
        xadd(&mut con, &stream, None, None, &body(n)).await?;
        let got = read_new(&mut con, &stream, "workers", "worker-1", 100).await?;
        let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
        ack(&mut con, &stream, "workers", &ids).await?;
    }
}

/// `trim-overtake`: a producer trims at the head while a slow group falls
/// behind, then the group speeds up before trimming reaches it.
///
/// The stream starts with a `WINDOW` of history (backdated, time-based
/// IDs) at `MAXLEN` `MAXLEN`, and the group at its end. For `SLOW` the
/// producer adds `RATE` entries a second with `MAXLEN` while the consumer
/// reads a third of that: the group's first undelivered entry ages while
/// trimming keeps removing the oldest, so the retention margin (its distance
/// from the trimming edge) shrinks by two thirds of a second a second and the
/// exporter's trim-overtake ETA appears and shrinks. Left alone the group
/// would lose entries after about 1.5 × `WINDOW`; it speeds up to twice
/// the production rate before (at `SLOW` the margin still holds about half
/// the window): the lag shrinks, the drain ETA appears and the overtake ETA
/// goes away; once caught up the consumer keeps up. Nothing is lost. It
/// happens once.
pub(crate) async fn trim_overtake(ctx: &Ctx) -> Result<()> {
    /// Entries the stream keeps: `RATE` × `WINDOW`.
    const MAXLEN: usize = 300;
    /// Entries produced per second.
    const RATE: u64 = 5;
    /// Time span the stream retains at `RATE`.
    const WINDOW: Duration = Duration::from_secs(60);
    /// How long the group reads at a third of the production rate.
    const SLOW: Duration = Duration::from_secs(45);
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

/// `recovered`: a consumer outage while `MAXLEN 100` trimming overtakes the
/// group, then a restart that stays 10 entries behind with a nil lag.
///
/// The nil lag comes from `XGROUP SETID` to the group's own position without
/// `ENTRIESREAD`: every 7.0+ server then forgets the group's entries-read and
/// reports `lag` as nil until the group reads the last entry, which it never
/// does here (it stays 10 behind), so the exporter counts the lag itself and
/// marks it estimated; Redis 6.2 reports no lag at all. Nothing depends on
/// one server's lag arithmetic.
pub(crate) async fn recovered(ctx: &Ctx) -> Result<()> {
    /// Entries the restarted consumer stays behind.
    const BEHIND: usize = 10;
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
    // Phase 1 (--outage, 30 s): the consumer is down while a burst of
    // BURST entries is trimmed to MAXLEN 100: the trim overtakes the group
    // and entries are lost. The outage stays shorter than the exporter's
    // status window (2.5 minutes, or its --fast twentieth): the loss is the
    // fault, not a stopped group.
    const BURST: u32 = 600;
    say(
        scenario,
        format_args!(
            "phase 1: consumer outage for {}, burst of {BURST} entries with MAXLEN 100",
            humantime::format_duration(ctx.outage)
        ),
    );
    let mut tick = ticker((ctx.outage / BURST).max(Duration::from_millis(1)));
    for _ in 0..BURST {
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
