//! What kind of failure a command met, as the bounded `kind` label of the
//! error counters (the client classifies server errors into it).

/// What kind of failure, as the bounded `kind` label of
/// `redis_streams_exporter_errors_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
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
    pub const ALL: [ErrorKind; 12] = [
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
    pub fn label(self) -> &'static str {
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
    pub fn is_vanished(self) -> bool {
        matches!(self, ErrorKind::NoSuchKey | ErrorKind::NoGroup)
    }
}
