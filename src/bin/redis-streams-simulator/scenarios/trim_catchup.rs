//! `trim-catchup`: a trim that overtakes a group and is caught up one poll
//! later, so that the gauges show the loss for about one poll only.
//!
//! A producer at 2/s and a consumer that keeps up; after [`WARM_UP`] (the
//! exporter has seen the group once), a burst of [`BURST`] entries is
//! trimmed to `MAXLEN` [`KEEP`] before the group reads any of it:
//! `BURST - KEEP` unread entries are gone. The consumer pauses for
//! [`PAUSE`] (a little more than one poll of the end-to-end test's
//! exporter), then catches up. Only a counter of losses can keep that
//! (`redis_streams_group_lost_entries_total`, Redis 7.0+); a gauge-based
//! alert with a `for:` never sees it. It happens once.

use std::time::Duration;

use anyhow::Result;
use tokio::time::{Instant, sleep};

use crate::ops::{Ctx, ack, body, fresh_stream, read_new, ticker, xadd, xadd_capped};
use crate::scenario::{Scenario, say};

const WARM_UP: Duration = Duration::from_secs(8);
const BURST: u64 = 60;
const KEEP: usize = 20;
const PAUSE: Duration = Duration::from_millis(1500);

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
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
