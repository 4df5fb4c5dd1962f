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
    /// or a subscription's `SUBSCRIBE`) did not complete within the command
    /// timeout.
    #[error(
        "{}: could not connect within {timeout:?} (no answer to {step})",
        at(target, node)
    )]
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
        "{} did not answer {commands} within {timeout:?} on an open connection (dropped; the next command connects again)",
        at(target, node)
    )]
    CommandTimeout {
        /// Target name.
        target: String,
        /// `host:port`.
        node: String,
        /// The commands of the pipeline, by label (`time, xinfo_stream
        /// x49, xinfo_groups x49`).
        commands: String,
        /// The limit.
        timeout: Duration,
    },
    /// Connecting failed or the connection broke.
    #[error("{}: {detail}", at(target, node))]
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
    /// The server refused one more connection: it has `maxclients`
    /// clients already (it says so to the new connection, then closes it).
    #[error(
        "{}: the server refused a new connection: max number of clients reached (its maxclients); raise maxclients or close other clients",
        at(target, node)
    )]
    ServerFull {
        /// Target name.
        target: String,
        /// `host:port`.
        node: String,
    },
    /// A node's connection was opened again and the server behind it is
    /// another one (its `run_id` changed: a restart, a failover to another
    /// process at the address): whatever a run read before may be of the
    /// server that went, so the run fails as if the server had been
    /// unreachable (the new connection is kept for the next one).
    #[error(
        "{}: the server restarted (its run_id changed) while the connection was down; what was read before is of the server that went",
        at(target, node)
    )]
    Restarted {
        /// Target name.
        target: String,
        /// `host:port`.
        node: String,
    },
    /// A reply broke the protocol (a bound of `client::bounded`, bytes that
    /// are not RESP) or cannot be the answer to its command: the connection
    /// is dropped, so that no later reply is taken for the answer to
    /// another command.
    #[error("{}: {detail} (connection dropped)", at(target, node))]
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

/// `target X: host:port`, or `target X` alone when the target is named by
/// its address (the default), so that a log line does not say it twice.
fn at(target: &str, node: &str) -> String {
    if target == node {
        format!("target {target}")
    } else {
        format!("target {target}: {node}")
    }
}

/// The commands of a pipeline by label, in the order they first appear,
/// with how many of each there were: `time, xinfo_stream x49`.
pub(crate) fn pipeline_labels(labels: impl IntoIterator<Item = &'static str>) -> String {
    let mut counted: Vec<(&'static str, usize)> = Vec::new();
    for label in labels {
        match counted.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counted.push((label, 1)),
        }
    }
    let words: Vec<String> = counted
        .into_iter()
        .map(|(l, n)| {
            if n == 1 {
                l.to_string()
            } else {
                format!("{l} x{n}")
            }
        })
        .collect();
    words.join(", ")
}

impl TargetError {
    /// The `kind` label of this error.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            TargetError::ConnectTimeout { .. } | TargetError::CommandTimeout { .. } => {
                ErrorKind::Timeout
            }
            TargetError::Connection { auth: true, .. } => ErrorKind::Auth,
            TargetError::Connection { .. }
            | TargetError::ServerFull { .. }
            | TargetError::Restarted { .. } => ErrorKind::Connection,
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
        let command = |labels: &[&'static str]| TargetError::CommandTimeout {
            target: "t".into(),
            node: "10.0.0.1:6379".into(),
            commands: pipeline_labels(labels.iter().copied()),
            timeout: Duration::from_millis(1500),
        };
        assert_eq!(
            command(&["xinfo_stream"]).to_string(),
            "target t: 10.0.0.1:6379 did not answer xinfo_stream within 1.5s on an open connection (dropped; the next command connects again)"
        );
        let pipeline = [
            "time",
            "xinfo_stream",
            "xinfo_groups",
            "xinfo_stream",
            "xinfo_groups",
        ];
        assert!(
            command(&pipeline)
                .to_string()
                .contains("did not answer time, xinfo_stream x2, xinfo_groups x2 within")
        );
        assert_eq!(command(&pipeline).kind(), ErrorKind::Timeout);
        assert_eq!(connect.kind(), ErrorKind::Timeout);
    }
}
