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
    /// No reply within the command timeout; the connection is dropped.
    #[error("target {target}: {node} did not answer {command} within {timeout:?}")]
    Timeout {
        /// Target name.
        target: String,
        /// `host:port`.
        node: String,
        /// First command of the pipeline.
        command: &'static str,
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
    /// The topology (cluster slots, sentinel master) could not be found.
    #[error("target {target}: {detail}")]
    Topology {
        /// Target name.
        target: String,
        /// What happened.
        detail: String,
    },
}

impl TargetError {
    /// The `kind` label of this error.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self {
            TargetError::Timeout { .. } => ErrorKind::Timeout,
            TargetError::Connection { auth: true, .. } => ErrorKind::Auth,
            TargetError::Connection { .. } => ErrorKind::Connection,
            TargetError::Topology { .. } => ErrorKind::Cluster,
        }
    }
}
