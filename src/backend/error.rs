//! Errors from talking to Redis, typed by what failed.

use std::time::Duration;

/// What kind of failure, as the bounded `kind` label of
/// `redis_streams_exporter_errors_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ErrorKind {
    /// A pipeline did not complete within `command_timeout`.
    Timeout,
    /// Connecting failed or the connection broke.
    Connection,
    /// Authentication was refused.
    Auth,
    /// The ACL user may not run the command or touch the key.
    NoPerm,
    /// The key is not a stream.
    WrongType,
    /// The group (or the stream) vanished.
    NoGroup,
    /// The stream vanished.
    NoSuchKey,
    /// The server is loading its dataset.
    Loading,
    /// The server is busy running a script.
    Busy,
    /// A MOVED redirection (stale slot map), redirections that did not
    /// settle, or an unreadable cluster topology.
    Cluster,
    /// A reply had an unexpected shape.
    Protocol,
    /// Anything else the server refused.
    Other,
}

impl ErrorKind {
    /// Every kind, so counters can start at 0 for each.
    pub(crate) const ALL: [ErrorKind; 12] = [
        ErrorKind::Timeout,
        ErrorKind::Connection,
        ErrorKind::Auth,
        ErrorKind::NoPerm,
        ErrorKind::WrongType,
        ErrorKind::NoGroup,
        ErrorKind::NoSuchKey,
        ErrorKind::Loading,
        ErrorKind::Busy,
        ErrorKind::Cluster,
        ErrorKind::Protocol,
        ErrorKind::Other,
    ];

    /// The label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connection => "connection",
            ErrorKind::Auth => "auth",
            ErrorKind::NoPerm => "noperm",
            ErrorKind::WrongType => "wrongtype",
            ErrorKind::NoGroup => "nogroup",
            ErrorKind::NoSuchKey => "nosuchkey",
            ErrorKind::Loading => "loading",
            ErrorKind::Busy => "busy",
            ErrorKind::Cluster => "cluster",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Other => "other",
        }
    }

    /// True for a key or group that no longer exists: an event (a stream
    /// deleted, a group destroyed between two polls), not an error of the
    /// exporter or the server, so it is not counted in `errors_total`.
    pub(crate) fn is_vanished(self) -> bool {
        matches!(self, ErrorKind::NoSuchKey | ErrorKind::NoGroup)
    }

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
