//! The scenarios, a file per family (what consumers do, failing entries,
//! trimming, deleting, the keyspace, rewinds); each scenario is a function
//! named after it, which drives it until the process stops, and [`run`]
//! picks the one a [`Scenario`] names.

use anyhow::Result;

use crate::ops::Ctx;
use crate::scenario::Scenario;

pub(crate) mod consumers;
pub(crate) mod deleting;
pub(crate) mod failing;
pub(crate) mod keyspace;
pub(crate) mod rewind;
pub(crate) mod trimming;

/// Drives `scenario` until the process stops (or a command fails).
pub(crate) async fn run(scenario: Scenario, ctx: &Ctx) -> Result<()> {
    match scenario {
        Scenario::Healthy => consumers::healthy(ctx).await,
        Scenario::CrashedConsumer => consumers::crashed_consumer(ctx).await,
        Scenario::Poison => failing::poison(ctx).await,
        Scenario::DeadLetter => failing::dead_letter(ctx).await,
        Scenario::Trim => trimming::trim(ctx).await,
        Scenario::XdelGhosts => deleting::xdel_ghosts(ctx).await,
        Scenario::TrimWindow => trimming::trim_window(ctx).await,
        Scenario::Recovered => trimming::recovered(ctx).await,
        Scenario::Outpace => consumers::outpace(ctx).await,
        Scenario::OutpaceXdel => deleting::outpace_xdel(ctx).await,
        Scenario::Stopped => consumers::stopped(ctx).await,
        Scenario::NeverAcks => consumers::never_acks(ctx).await,
        Scenario::TrimCatchup => trimming::trim_catchup(ctx).await,
        Scenario::DeleteUnread => deleting::delete_unread(ctx).await,
        Scenario::TrimOvertake => trimming::trim_overtake(ctx).await,
        Scenario::Rewind => rewind::rewind(ctx).await,
        Scenario::ManyStreams => keyspace::many_streams(ctx).await,
        Scenario::BigPel => consumers::big_pel(ctx).await,
        Scenario::Evictable => keyspace::evictable(ctx).await,
        Scenario::Batch => consumers::batch(ctx).await,
        Scenario::Idle => consumers::idle(ctx).await,
        Scenario::NoackReader => consumers::noack_reader(ctx).await,
        Scenario::All => Ok(()),
    }
}
