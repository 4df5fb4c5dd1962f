//! Entries that fail on every delivery: one poison entry reclaimed forever
//! (`poison`), or every 4th entry dead-lettered after three deliveries
//! (`dead-letter`), and the consumer loop the two share.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;

use crate::ops::{
    Ctx, ack, all_of, body, claim, fresh_stream, read_new, ticker, xadd, xadd_capped,
};
use crate::scenario::{Scenario, say};

/// Shared by `poison` and `dead-letter`: a consumer loop in which entries
/// marked bad fail on every delivery and are reclaimed once a second, until
/// `give_up_after` deliveries (then dead-lettered) or forever.
pub(crate) async fn failing_consumer(
    ctx: &Ctx,
    scenario: Scenario,
    stream: String,
    dead_letter: Option<(String, u64)>,
) -> Result<()> {
    let mut con = ctx.conn().await?;
    let mut tick = ticker(Duration::from_millis(250));
    // id → deliveries so far.
    let mut failing: BTreeMap<String, u64> = BTreeMap::new();
    let mut since_retry = Duration::ZERO;
    let consumers = ["worker-1", "worker-2"];
    let mut turn = 0usize;
    let mut dead_lettered = 0u64;
    loop {
        tick.tick().await;
        since_retry += Duration::from_millis(250);
        let got = read_new(&mut con, &stream, "workers", consumers[turn % 2], 10).await?;
        let mut done = Vec::new();
        for e in got {
            if e.fields.get("kind").is_some_and(|k| k == "bad") {
                failing.insert(e.id, 1);
            } else {
                done.push(e.id);
            }
        }
        ack(&mut con, &stream, "workers", &done).await?;
        if since_retry < Duration::from_secs(1) || failing.is_empty() {
            continue;
        }
        since_retry = Duration::ZERO;
        turn += 1;
        // Retry: the other consumer claims the failed entries (a redelivery).
        let ids: Vec<String> = failing.keys().cloned().collect();
        let claimed = claim(&mut con, &stream, "workers", consumers[turn % 2], &ids).await?;
        for e in claimed {
            let deliveries = failing.entry(e.id.clone()).or_insert(1);
            *deliveries += 1;
            match &dead_letter {
                Some((dlq, limit)) if *deliveries >= *limit => {
                    let mut fields: Vec<(&str, String)> = vec![
                        ("original-stream", stream.clone()),
                        ("original-id", e.id.clone()),
                        ("deliveries", deliveries.to_string()),
                        ("reason", "handler failed".to_string()),
                    ];
                    if let Some(n) = e.fields.get("n") {
                        fields.push(("n", n.clone()));
                    }
                    xadd(&mut con, dlq, None, None, &fields).await?;
                    ack(&mut con, &stream, "workers", std::slice::from_ref(&e.id)).await?;
                    failing.remove(&e.id);
                    dead_lettered += 1;
                    if dead_lettered % 10 == 1 {
                        say(
                            scenario,
                            format_args!(
                                "{} dead-lettered after {limit} deliveries ({dead_lettered} so far)",
                                e.id
                            ),
                        );
                    }
                }
                Some(_) => {}
                None => {
                    if *deliveries % 10 == 0 {
                        say(
                            scenario,
                            format_args!(
                                "{} delivered {} times and still failing",
                                e.id, deliveries
                            ),
                        );
                    }
                }
            }
        }
    }
}

/// `poison`: one malformed entry fails on every delivery and is reclaimed
/// (`XCLAIM`) forever.
pub(crate) async fn poison(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Poison;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], &[]).await?;
    let producer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(500));
            let mut n = 0u64;
            loop {
                tick.tick().await;
                n += 1;
                let mut fields = body(n);
                // One malformed message early on; every other one is fine.
                fields.push(("kind", if n == 3 { "bad" } else { "good" }.to_string()));
                xadd_capped(&mut con, &s, &fields).await?;
            }
        }
    });
    let consumer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move { failing_consumer(&c, scenario, s, None).await }
    });
    all_of(vec![producer, consumer]).await
}

/// `dead-letter`: every 4th entry fails three deliveries, then goes to
/// `<stream>:dlq`.
pub(crate) async fn dead_letter(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::DeadLetter;
    let stream = scenario.stream(&ctx.prefix);
    let dlq = format!("{stream}:dlq");
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["workers"], std::slice::from_ref(&dlq)).await?;
    let producer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(Duration::from_millis(250));
            let mut n = 0u64;
            loop {
                tick.tick().await;
                n += 1;
                let mut fields = body(n);
                fields.push(("kind", if n % 4 == 0 { "bad" } else { "good" }.to_string()));
                xadd_capped(&mut con, &s, &fields).await?;
            }
        }
    });
    let consumer = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move { failing_consumer(&c, scenario, s, Some((dlq, 3))).await }
    });
    all_of(vec![producer, consumer]).await
}
