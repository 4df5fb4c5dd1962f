//! Reads that want one moment: groups of commands sent inside `MULTI` …
//! `EXEC` in one pipeline, and sent again without a transaction where the
//! server would not run one.

use redis::Value;

use super::{NodeAddr, Reply, TargetClient};
use crate::backend::command::Command;
use crate::backend::error::TargetError;

impl TargetClient {
    /// Sends `head`, then each group of `atomic` inside `MULTI` … `EXEC`, in
    /// one pipeline: each group's replies describe one moment, with no
    /// other client's command between them (a pipeline alone does not
    /// promise that: the server may read it in pieces). Returns the replies
    /// of `head`, and per group its replies and whether they are of one
    /// moment. A group the server would not run as a transaction (an ACL
    /// without `+multi`, a key it refuses at queueing, a redirection) is
    /// sent again without one; after a `NOPERM` on `MULTI` the client stops
    /// asking for transactions.
    ///
    /// `MULTI` and `EXEC` cost the server next to nothing and take no token
    /// of the rate limit.
    ///
    /// # Errors
    /// As [`TargetClient::execute`].
    pub(crate) async fn execute_atomically(
        &self,
        node: &NodeAddr,
        head: &[Command],
        atomic: &[Vec<Command>],
    ) -> Result<(Vec<Reply>, Vec<(Vec<Reply>, bool)>), TargetError> {
        let inner: usize = atomic.iter().map(Vec::len).sum();
        self.commands.acquire(head.len() + inner).await;
        let transactions = !self
            .no_transactions
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut cmds: Vec<Command> = head.to_vec();
        for group in atomic {
            if transactions {
                cmds.push(Command::Multi);
                cmds.extend(group.iter().cloned());
                cmds.push(Command::Exec);
            } else {
                cmds.extend(group.iter().cloned());
            }
        }
        let raw = self.round_trip(node, &cmds, false).await?;
        let mut raw = raw.into_iter();
        let mut heads = Vec::with_capacity(head.len());
        for cmd in head {
            let value = raw.next().unwrap_or(Value::Nil);
            let reply = self.settle(node, cmd, value).await?;
            heads.push(self.pruned(cmd, reply));
        }
        let mut groups = Vec::with_capacity(atomic.len());
        let mut again: Vec<usize> = Vec::new();
        for (i, group) in atomic.iter().enumerate() {
            if !transactions {
                let mut replies = Vec::with_capacity(group.len());
                for cmd in group {
                    let value = raw.next().unwrap_or(Value::Nil);
                    let reply = self.settle(node, cmd, value).await?;
                    replies.push(self.pruned(cmd, reply));
                }
                groups.push((replies, false));
                continue;
            }
            let multi = raw.next().unwrap_or(Value::Nil);
            let queued: Vec<Value> = raw.by_ref().take(group.len()).collect();
            let exec = raw.next().unwrap_or(Value::Nil);
            if let Value::ServerError(e) = &multi
                && e.code() == "NOPERM"
                && !self
                    .no_transactions
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(redis_target = %self.target.name, "MULTI is not permitted: each stream's XINFO is read without a transaction, and losses that need its two replies of one moment are reported as possible (grant +multi +exec, see docs/configuration.md)");
            }
            match exec {
                Value::Array(items)
                    if items.len() == group.len() && queued.len() == group.len() =>
                {
                    let replies = group
                        .iter()
                        .zip(items)
                        .map(|(cmd, v)| match v {
                            Value::ServerError(e) => Err(self.refusal(cmd, &e)),
                            v => self.pruned(cmd, Ok(v)),
                        })
                        .collect();
                    groups.push((replies, true));
                }
                _ => {
                    groups.push((Vec::new(), false));
                    again.push(i);
                }
            }
        }
        for i in again {
            let mut replies = Vec::with_capacity(atomic[i].len());
            self.send_paid(node, &atomic[i], &mut replies).await?;
            groups[i] = (replies, false);
        }
        Ok((heads, groups))
    }
}
