//! One module per scenario; each exposes `run(ctx)`, which drives it until
//! the process stops (`failing` is the consumer loop two of them share), and
//! [`run`] picks the one a [`Scenario`] names.

use anyhow::Result;

use crate::ops::Ctx;
use crate::scenario::Scenario;

pub(crate) mod batch;
pub(crate) mod big_pel;
pub(crate) mod crashed_consumer;
pub(crate) mod dead_letter;
pub(crate) mod delete_unread;
pub(crate) mod evictable;
pub(crate) mod failing;
pub(crate) mod healthy;
pub(crate) mod many_streams;
pub(crate) mod noack;
pub(crate) mod outpace;
pub(crate) mod outpace_xdel;
pub(crate) mod poison;
pub(crate) mod recovered;
pub(crate) mod rewind;
pub(crate) mod stopped;
pub(crate) mod trim;
pub(crate) mod trim_catchup;
pub(crate) mod trim_overtake;
pub(crate) mod trim_window;
pub(crate) mod xdel_ghosts;

/// Drives `scenario` until the process stops (or a command fails).
pub(crate) async fn run(scenario: Scenario, ctx: &Ctx) -> Result<()> {
    match scenario {
        Scenario::Healthy => healthy::run(ctx).await,
        Scenario::CrashedConsumer => crashed_consumer::run(ctx).await,
        Scenario::Poison => poison::run(ctx).await,
        Scenario::DeadLetter => dead_letter::run(ctx).await,
        Scenario::Trim => trim::run(ctx).await,
        Scenario::XdelGhosts => xdel_ghosts::run(ctx).await,
        Scenario::TrimWindow => trim_window::run(ctx).await,
        Scenario::Recovered => recovered::run(ctx).await,
        Scenario::Outpace => outpace::run(ctx).await,
        Scenario::OutpaceXdel => outpace_xdel::run(ctx).await,
        Scenario::Stopped => stopped::run(ctx).await,
        Scenario::Noack => noack::run(ctx).await,
        Scenario::TrimCatchup => trim_catchup::run(ctx).await,
        Scenario::DeleteUnread => delete_unread::run(ctx).await,
        Scenario::TrimOvertake => trim_overtake::run(ctx).await,
        Scenario::Rewind => rewind::run(ctx).await,
        Scenario::ManyStreams => many_streams::run(ctx).await,
        Scenario::BigPel => big_pel::run(ctx).await,
        Scenario::Evictable => evictable::run(ctx).await,
        Scenario::Batch => batch::run(ctx).await,
        Scenario::All => Ok(()),
    }
}
