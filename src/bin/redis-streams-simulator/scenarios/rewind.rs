//! Groups moved in their stream: set back, and set beyond its end (`rewind`).

use std::time::Duration;

use anyhow::Result;
use tokio::time::{Instant, sleep};

use crate::ops::{Ctx, ack, body, fresh_stream, read_new, server_ms, setid, ticker, xadd_capped};
use crate::scenario::{Scenario, say};

/// `rewind`: a group set back in its stream, and one set beyond its end.
///
/// Group `replay` reads up to 10 entries every 0.5 s (60 entries written up
/// front, then 2/s); after `WARM_UP` it is set back 50 entries (`XGROUP
/// SETID`, a replay), pauses for `PAUSE` and reads them again: `redis_streams_group_rewinds_total`
/// counts it. Group `future` is set one hour ahead of the stream before
/// anything is produced (`XGROUP SETID` into the future): every entry added
/// in that hour has a smaller ID and will never be delivered to it
/// (`redis_streams_group_ahead_of_stream`).
pub(crate) async fn rewind(ctx: &Ctx) -> Result<()> {
    const WARM_UP: Duration = Duration::from_secs(8);
    const UP_FRONT: usize = 60;
    const BACK: usize = 50;
    const PAUSE: Duration = Duration::from_secs(2);
    let scenario = Scenario::Rewind;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["replay", "future"], &[]).await?;
    let future = format!("{}-0", server_ms(&mut con).await? + 3_600_000);
    setid(&mut con, &stream, "future", &future).await?;
    let mut ids = Vec::new();
    let mut n = 0u64;
    for _ in 0..UP_FRONT {
        n += 1;
        ids.push(xadd_capped(&mut con, &stream, &body(n)).await?);
    }
    say(
        scenario,
        format_args!("group future set to {future}, one hour ahead; {UP_FRONT} entries up front"),
    );
    let start = Instant::now();
    let mut rewound = false;
    let mut tick = ticker(Duration::from_millis(500));
    loop {
        tick.tick().await;
        if !rewound && start.elapsed() >= WARM_UP {
            rewound = true;
            let to = &ids[ids.len() - 1 - BACK];
            setid(&mut con, &stream, "replay", to).await?;
            say(
                scenario,
                format_args!("group replay set back {BACK} entries, to {to}"),
            );
            // A replay takes a while: the exporter sees the group back where it was set.
            sleep(PAUSE).await;
        }
        n += 1;
        ids.push(xadd_capped(&mut con, &stream, &body(n)).await?);
        let got = read_new(&mut con, &stream, "replay", "replayer", 10).await?;
        let read: Vec<String> = got.into_iter().map(|e| e.id).collect();
        ack(&mut con, &stream, "replay", &read).await?;
    }
}
