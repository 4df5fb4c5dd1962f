//! One pipeline to one node: the connection, the timeout, the replies
//! checked against their commands, and what a failure leaves (the connection
//! dropped, the topology suspect, the error counted).

use redis::Value;

use super::{NodeAddr, TargetClient};
use crate::backend::command::Command;
use crate::backend::error::{TargetError, pipeline_labels};
use crate::backend::reply;

impl TargetClient {
    /// One pipeline to one node, with the timeout. With `asking`, each
    /// command is preceded by `ASKING` and only its own reply is returned.
    pub(super) async fn round_trip(
        &self,
        addr: &NodeAddr,
        cmds: &[Command],
        asking: bool,
    ) -> Result<Vec<Value>, TargetError> {
        let node = self.node(addr);
        let mut conn = match self.connection(&node).await {
            Ok(c) => c,
            Err(e) => {
                self.set_reachable(false);
                self.topology_suspect();
                return Err(e);
            }
        };
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for cmd in cmds {
            if asking {
                pipe.add_command(Command::Asking.to_cmd()).ignore();
                self.stats.command(Command::Asking.label());
            }
            pipe.add_command(cmd.to_cmd());
            self.stats.command(cmd.label());
        }
        let sent = tokio::time::Instant::now();
        let result = tokio::time::timeout(
            self.timeout,
            pipe.query_async::<Vec<Value>>(&mut conn.inner),
        )
        .await;
        if matches!(result, Ok(Ok(_))) && !asking {
            self.pages()
                .observe(cmds, sent.elapsed(), tokio::time::Instant::now());
        }
        // A reply that broke the protocol still came from a server that
        // answers: the probes fail, the target stays up.
        let violation = conn.violation.get().map(str::to_string);
        self.set_reachable(matches!(result, Ok(Ok(_))) || violation.is_some());
        if !matches!(result, Ok(Ok(_))) {
            self.topology_suspect();
        }
        let err = match result {
            Ok(Ok(values)) if values.len() == cmds.len() => {
                match reply::pipeline_misfit(cmds, &values) {
                    None => return Ok(values),
                    Some(detail) => self.protocol_error(addr, detail),
                }
            }
            Ok(Ok(values)) => self.protocol_error(
                addr,
                format!(
                    "a pipeline of {} commands got {} replies",
                    cmds.len(),
                    values.len()
                ),
            ),
            Ok(Err(_)) if violation.is_some() => {
                self.protocol_error(addr, violation.unwrap_or_default())
            }
            Ok(Err(e)) if e.is_timeout() => self.command_timeout(addr, cmds),
            Err(_) => self.command_timeout(addr, cmds),
            Ok(Err(e)) => self.connection_error(addr, &e),
        };
        self.drop_connection(&node).await;
        self.stats.error(err.kind());
        Err(err)
    }

    /// No answer to `cmds` on an open connection to `addr`.
    fn command_timeout(&self, addr: &NodeAddr, cmds: &[Command]) -> TargetError {
        TargetError::CommandTimeout {
            target: self.target.name.clone(),
            node: addr.to_string(),
            // A transaction's MULTI and EXEC are no news: its commands are.
            commands: pipeline_labels(
                cmds.iter()
                    .filter(|c| !matches!(c, Command::Multi | Command::Exec))
                    .map(Command::label),
            ),
            timeout: self.timeout,
        }
    }

    /// A reply from `addr` that cannot be read, as `detail` says.
    fn protocol_error(&self, addr: &NodeAddr, detail: String) -> TargetError {
        TargetError::Protocol {
            target: self.target.name.clone(),
            node: addr.to_string(),
            detail,
        }
    }
}
