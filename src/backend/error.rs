//! Errors from talking to Redis, typed by what failed.

use std::time::Duration;

use crate::vocab::ErrorKind;

impl ErrorKind {
    /// Classifies a server error by its code and text.
    pub(crate) fn from_server(code: &str, details: &str) -> ErrorKind {
        match code {
            "NOPERM" => ErrorKind::NoPerm,
            "WRONGTYPE" => ErrorKind::WrongType,
            "NOGROUP" => ErrorKind::NoGroup,
            "LOADING" => ErrorKind::Loading,
            "BUSY" => ErrorKind::Busy,
            "NOAUTH" | "WRONGPASS" => ErrorKind::Auth,
            "MOVED" | "ASK" | "CLUSTERDOWN" | "TRYAGAIN" | "CROSSSLOT" => ErrorKind::Cluster,
            "ERR" if details.starts_with("no such key") => ErrorKind::NoSuchKey,
            _ => ErrorKind::Other,
        }
    }
}

/// The server refused one command of a pipeline (the others may have
/// succeeded).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{command}: {code} {message}")]
pub(crate) struct CommandError {
    /// Classified kind.
    pub kind: ErrorKind,
    /// The command's label.
    pub command: &'static str,
    /// The server's error code (`ERR`, `NOPERM`, ...).
    pub code: String,
    /// The server's text after the code.
    pub message: String,
}

/// The target (or one of its nodes) could not be asked at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TargetError {
    /// Opening a connection (TCP, TLS, `AUTH`, `SELECT`, `CLIENT SETNAME`,
    /// or a subscription's `PSUBSCRIBE`) did not complete within the command
    /// timeout.
    #[error("target {target}: {node}: could not connect within {timeout:?} (no answer to {step})")]
    ConnectTimeout {
        /// Target name.
        target: String,
        /// `host:port`.
        node: String,
        /// What the connection was waiting for.
        step: &'static str,
        /// The limit.
        timeout: Duration,
    },
    /// No reply within the command timeout on an open connection; the
    /// connection is dropped (a late reply must not answer the next
    /// command).
    #[error(
        "target {target}: {node} did not answer {} within {timeout:?} on an open connection (dropped; the next command connects again)",
        pipeline(command, *commands)
    )]
    CommandTimeout {
        /// Target name.
        target: String,
        /// `host:port`.
        node: String,
        /// First command of the pipeline.
        command: &'static str,
        /// Commands in the pipeline.
        commands: usize,
        /// The limit.
        timeout: Duration,
    },
    /// Connecting failed or the connection broke.
    #[error("target {target}: {node}: {detail}")]
    Connection {
        /// Target name.
        target: String,
        /// `host:port`.
        node: String,
        /// What happened (never includes credentials).
        detail: String,
        /// Authentication failure rather than a network one.
        auth: bool,
    },
    /// A reply broke the protocol (a bound of `client::bounded`, bytes that
    /// are not RESP) or cannot be the answer to its command: the connection
    /// is dropped, so that no later reply is taken for the answer to
    /// another command.
    #[error("target {target}: {node}: {detail} (connection dropped)")]
    Protocol {
        /// Target name.
        target: String,
        /// `host:port`.
        node: String,
        /// What was wrong, naming the command whose reply it was.
        detail: String,
    },
    /// The topology (cluster slots, sentinel master) could not be found.
    #[error("target {target}: {detail}")]
    Topology {
        /// Target name.
        target: String,
        /// What happened.
        detail: String,
    },
}

/// `xinfo_stream`, or `xinfo_stream and 98 more` for a pipeline.
fn pipeline(command: &str, commands: usize) -> String {
    match commands {
        0 | 1 => command.to_string(),
        n => format!("{command} and {} more", n - 1),
    }
}

impl TargetError {
    /// The `kind` label of this error.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            TargetError::ConnectTimeout { .. } | TargetError::CommandTimeout { .. } => {
                ErrorKind::Timeout
            }
            TargetError::Connection { auth: true, .. } => ErrorKind::Auth,
            TargetError::Connection { .. } => ErrorKind::Connection,
            TargetError::Protocol { .. } => ErrorKind::Protocol,
            TargetError::Topology { .. } => ErrorKind::Cluster,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_say_what_timed_out() {
        let connect = TargetError::ConnectTimeout {
            target: "t".into(),
            node: "10.0.0.1:6379".into(),
            step: "CLIENT SETNAME",
            timeout: Duration::from_secs(2),
        };
        assert_eq!(
            connect.to_string(),
            "target t: 10.0.0.1:6379: could not connect within 2s (no answer to CLIENT SETNAME)"
        );
        let command = |commands| TargetError::CommandTimeout {
            target: "t".into(),
            node: "10.0.0.1:6379".into(),
            command: "xinfo_stream",
            commands,
            timeout: Duration::from_millis(1500),
        };
        assert_eq!(
            command(1).to_string(),
            "target t: 10.0.0.1:6379 did not answer xinfo_stream within 1.5s on an open connection (dropped; the next command connects again)"
        );
        assert!(
            command(99)
                .to_string()
                .contains("did not answer xinfo_stream and 98 more within")
        );
        assert_eq!(command(3).kind(), ErrorKind::Timeout);
        assert_eq!(connect.kind(), ErrorKind::Timeout);
    }
}
