//! `batch`: a producer at 2/s and a healthy batch job that drains the stream
//! every `--batch-every` (4 minutes by default) and is idle in between. Its
//! consumer's last read is up to a whole period old while entries wait:
//! `check` must not call it stopped.

use anyhow::Result;

use crate::ops::{
    Ctx, ack, all_of, body, fresh_stream, read_new, spawn_producer, ticker, xadd_capped,
};
use crate::scenario::{Scenario, say};

pub(crate) async fn run(ctx: &Ctx) -> Result<()> {
    let scenario = Scenario::Batch;
    let stream = scenario.stream(&ctx.prefix);
    let mut con = ctx.conn().await?;
    fresh_stream(&mut con, &stream, &["reports"], &[]).await?;
    say(
        scenario,
        format_args!(
            "producer at 2/s; the batch job drains the stream every {}",
            humantime::format_duration(ctx.batch_every)
        ),
    );
    // What accumulated since the job's last run, which it drains at once.
    for n in 1..=10 {
        xadd_capped(&mut con, &stream, &body(n)).await?;
    }
    let producer = spawn_producer(ctx, &stream, 2.0);
    let job = tokio::spawn({
        let (c, s) = (ctx.clone(), stream.clone());
        async move {
            let mut con = c.conn().await?;
            let mut tick = ticker(c.batch_every);
            loop {
                tick.tick().await;
                let mut drained = 0usize;
                loop {
                    let got = read_new(&mut con, &s, "reports", "batch-job", 500).await?;
                    if got.is_empty() {
                        break;
                    }
                    drained += got.len();
                    let ids: Vec<String> = got.into_iter().map(|e| e.id).collect();
                    ack(&mut con, &s, "reports", &ids).await?;
                }
                say(
                    Scenario::Batch,
                    format_args!("batch job processed {drained} entries"),
                );
            }
        }
    });
    all_of(vec![producer, job]).await
}
