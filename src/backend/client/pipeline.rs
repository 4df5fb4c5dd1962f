//! Batches sent as pipelines: cut to the pipeline size and to a bound on the
//! entries their replies hold, each paid for in tokens, each reply settled
//! and pruned.

use super::{NodeAddr, Reply, TargetClient};
use crate::backend::command::Command;
use crate::backend::error::TargetError;
use crate::backend::reply;

impl TargetClient {
    /// Sends `cmds` to `node` and returns one reply per command, in order.
    /// Batches are split into pipelines of at most the pipeline size whose
    /// replies may hold at most [`PIPELINE_ITEMS`] entries or rows between
    /// them; every command waits for its token first.
    ///
    /// # Errors
    /// A [`TargetError`] when the node cannot be reached or does not answer in
    /// time; server errors of single commands are returned in their reply.
    pub(crate) async fn execute(
        &self,
        node: &NodeAddr,
        cmds: &[Command],
    ) -> Result<Vec<Reply>, TargetError> {
        let mut replies = Vec::with_capacity(cmds.len());
        for chunk in pipelines(cmds, self.pipeline_size) {
            self.commands.acquire(chunk.len()).await;
            self.send_paid(node, chunk, &mut replies).await?;
        }
        Ok(replies)
    }

    /// Sends `cmds` as one pipeline whose tokens were already taken and
    /// appends their settled replies to `replies`.
    pub(super) async fn send_paid(
        &self,
        node: &NodeAddr,
        cmds: &[Command],
        replies: &mut Vec<Reply>,
    ) -> Result<(), TargetError> {
        let raw = self.round_trip(node, cmds, false).await?;
        for (cmd, value) in cmds.iter().zip(raw) {
            let reply = self.settle(node, cmd, value).await?;
            replies.push(self.pruned(cmd, reply));
        }
        Ok(())
    }

    /// `reply` without the items whose names were too long to keep
    /// (counted as skipped).
    pub(super) fn pruned(&self, cmd: &Command, mut reply: Reply) -> Reply {
        if let Ok(value) = &mut reply
            && let Some((kind, n)) = reply::prune(cmd, value)
        {
            self.stats.skipped(kind, n);
        }
        reply
    }
}

/// The most entries or rows the replies of one pipeline may hold between
/// them (the sum of their commands' `COUNT`s; one command alone may ask for
/// more): what one round trip keeps in memory before it is decoded stays
/// bounded whatever the batch.
pub(super) const PIPELINE_ITEMS: u64 = 10_000;

/// `cmds` cut into pipelines of at most `size` commands whose replies may
/// hold at most [`PIPELINE_ITEMS`] entries or rows (at least one command
/// each).
pub(super) fn pipelines(cmds: &[Command], size: usize) -> impl Iterator<Item = &[Command]> {
    let size = size.max(1);
    let mut rest = cmds;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut items = 0u64;
        let mut end = 0;
        while end < rest.len().min(size) {
            items += rest[end].reply_items();
            if end > 0 && items > PIPELINE_ITEMS {
                break;
            }
            end += 1;
        }
        let (chunk, after) = rest.split_at(end);
        rest = after;
        Some(chunk)
    })
}
