//! Connections to Redis nodes: the node's address, the byte stream to it
//! (TCP without Nagle, or TLS over it), the settings a connection is opened
//! with (the target's credentials and database, or a sentinel's), and
//! [`Dialer::open`], the one way every connection is opened (a node's
//! pooled one, a sentinel's, a keyspace-event subscription's), with what a
//! failure to connect means; then a pooled [`RedisConnection`] and the
//! [`Node`] slot that keeps it.

use std::sync::Arc;
use std::time::Duration;

use redis::RedisConnectionInfo;
use redis::aio::MultiplexedConnection;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::bounded::{BoundedReplies, Violation};
use super::stats::ClientStats;
use crate::backend::error::TargetError;
use crate::backend::tls::TlsSetup;
use crate::config::{Mode, Secret, Target};
use crate::vocab::{ErrorKind, ReconnectReason};

/// `host:port` of one server.
pub(crate) type NodeAddr = Arc<str>;

/// `host:port` split, without the brackets of an IPv6 host.
pub(super) fn split_addr(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.parse().ok()?))
}

/// What a stream to a node is: bytes both ways, on a task of its own.
pub(super) trait Transport: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Transport for T {}

/// The byte stream to one node: TCP, or TLS over it.
pub(super) type NodeStream = Box<dyn Transport>;

/// The settings of a data connection to `target`: its credentials, and its
/// database except in a cluster (which has only database 0). `CLIENT
/// SETINFO` is suppressed (outside the allowlist and NOPERM for the minimal
/// ACL user).
pub(super) fn data_settings(target: &Target) -> RedisConnectionInfo {
    let mut settings = RedisConnectionInfo::default().set_skip_set_lib_name();
    if !matches!(target.mode, Mode::Cluster { .. }) {
        settings = settings.set_db(target.endpoint.db);
    }
    if let Some(user) = &target.username {
        settings = settings.set_username(user);
    }
    if let Some(pass) = &target.password {
        settings = settings.set_password(pass.expose());
    }
    settings
}

/// The settings of a connection to a sentinel: the sentinels' own
/// credentials, and no database.
pub(super) fn sentinel_settings(
    username: Option<&str>,
    password: Option<&Secret>,
) -> RedisConnectionInfo {
    let mut settings = RedisConnectionInfo::default().set_skip_set_lib_name();
    if let Some(user) = username {
        settings = settings.set_username(user);
    }
    if let Some(pass) = password {
        settings = settings.set_password(pass.expose());
    }
    settings
}

/// What a connection waits for until its stream is open (TCP, and TLS
/// over it), as a connect timeout names it.
pub(super) const STEP_OPENING: &str = "opening the connection";

/// A TLS handshake that got no answer, as a connect timeout names it: a
/// server without TLS reads the handshake as the start of a command line
/// and waits for its end.
const STEP_TLS_HANDSHAKE: &str = "the TLS handshake; a server without TLS never answers one: if the server has no TLS, use a redis:// URL";

/// Whether `e` says the connection was closed under the client before an
/// answer came (end of stream, reset, broken pipe, aborted): an idle
/// `timeout` of the server, a proxy's or load balancer's idle limit,
/// `CLIENT KILL`, a restart. Not a refused connection (nothing listens),
/// nor an error the server sent.
pub(super) fn closed_under_us(e: &redis::RedisError) -> bool {
    e.code().is_none() && e.is_connection_dropped() && !e.is_connection_refusal()
}

/// Whether a connection error is the server refusing one more client
/// (`-ERR max number of clients reached`, its `maxclients`), which it says
/// to a new connection and then closes it.
pub(super) fn is_server_full(e: &redis::RedisError) -> bool {
    e.detail()
        .is_some_and(|d| d.starts_with("max number of clients reached"))
}

/// Whether a connection error is the server refusing the credentials.
fn is_auth_failure(e: &redis::RedisError) -> bool {
    matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
        || e.kind() == redis::ErrorKind::AuthenticationFailed
}

/// What opening a connection to one of a target's nodes takes, borrowed
/// from its client: [`Dialer::open`] is the one way the client connects;
/// the rest says what a failure to connect means (auth, TLS, timeout).
#[derive(Clone, Copy, Debug)]
pub(super) struct Dialer<'a> {
    /// The target's name, for errors.
    pub(super) target: &'a str,
    /// For `rediss://` targets.
    pub(super) tls: Option<&'a TlsSetup>,
    /// The command timeout, which bounds connecting too.
    pub(super) timeout: Duration,
    /// The client's counters: `AUTH`, `SELECT` and failures to connect.
    pub(super) stats: &'a ClientStats,
}

impl Dialer<'_> {
    /// Opens a connection to `addr`: the one way the client connects, for
    /// its pooled connections, the sentinels and the keyspace-event
    /// subscriptions alike. TCP without Nagle, or TLS over it for
    /// `rediss://`; every byte read through the bounded-replies filter
    /// (`reading`: [`BoundedReplies::new`] for replies that answer commands,
    /// [`BoundedReplies::subscribed`] for messages); then `handshake`, where
    /// the redis crate sends `AUTH` and `SELECT` as `settings` say (counted
    /// here) and the caller has its first exchange, and says what its
    /// failures mean. The stream is opened by `deadline` (a timeout says
    /// whether TCP or the TLS handshake did not finish); the caller bounds
    /// the whole by the same deadline.
    ///
    /// # Errors
    /// A [`TargetError::Connection`] (counted) when the node cannot be
    /// reached, a [`TargetError::ConnectTimeout`] (counted) when the stream
    /// did not open by `deadline`; `handshake`'s own.
    pub(super) async fn open<C, F>(
        self,
        addr: &NodeAddr,
        settings: RedisConnectionInfo,
        deadline: Instant,
        reading: fn(NodeStream) -> BoundedReplies<NodeStream>,
        handshake: impl FnOnce(RedisConnectionInfo, BoundedReplies<NodeStream>) -> F,
    ) -> Result<C, TargetError>
    where
        F: Future<Output = Result<C, TargetError>>,
    {
        let Some((host, port)) = split_addr(addr) else {
            return Err(TargetError::Connection {
                target: self.target.to_string(),
                node: addr.to_string(),
                detail: "not a host:port address".into(),
                auth: false,
            });
        };
        if settings.password().is_some() {
            self.stats.command("auth");
        }
        if settings.db() != 0 {
            self.stats.command("select");
        }
        let stream = self.connect_stream(addr, &host, port, deadline).await?;
        handshake(settings, reading(stream)).await
    }

    /// The byte stream to `host:port` by `deadline`: TCP without Nagle
    /// (pipelines are written whole), and a TLS handshake over it for
    /// `rediss://`. A timeout says which of the two did not finish: a
    /// server without TLS never answers a handshake (it waits for a
    /// command line), so a `rediss://` URL to a plain server is told so.
    async fn connect_stream(
        &self,
        addr: &NodeAddr,
        host: &str,
        port: u16,
        deadline: Instant,
    ) -> Result<NodeStream, TargetError> {
        let failed = |e: std::io::Error| self.connection_failure(addr, &redis::RedisError::from(e));
        let timed_out = |step| {
            self.stats.error(ErrorKind::Timeout);
            self.connect_timeout(addr, step)
        };
        let tcp = match tokio::time::timeout_at(deadline, TcpStream::connect((host, port))).await {
            Err(_) => return Err(timed_out(STEP_OPENING)),
            Ok(tcp) => tcp.map_err(failed)?,
        };
        let _ = tcp.set_nodelay(true);
        let Some(tls) = self.tls else {
            return Ok(Box::new(tcp));
        };
        match tokio::time::timeout_at(deadline, tls.handshake(host, tcp)).await {
            Err(_) => Err(timed_out(STEP_TLS_HANDSHAKE)),
            Ok(stream) => Ok(Box::new(stream.map_err(failed)?)),
        }
    }

    /// What a connection error from `addr` means: a TLS problem explained,
    /// a timeout, refused credentials or another failure to connect.
    pub(super) fn connection_error(&self, addr: &NodeAddr, e: &redis::RedisError) -> TargetError {
        let auth = is_auth_failure(e);
        if let Some(detail) = self.tls.and_then(|t| t.explain(e)) {
            return TargetError::Connection {
                target: self.target.to_string(),
                node: addr.to_string(),
                detail,
                auth: false,
            };
        }
        if e.is_timeout() {
            return self.connect_timeout(addr, STEP_OPENING);
        }
        if is_server_full(e) {
            return TargetError::ServerFull {
                target: self.target.to_string(),
                node: addr.to_string(),
            };
        }
        TargetError::Connection {
            target: self.target.to_string(),
            node: addr.to_string(),
            detail: e.to_string(),
            auth,
        }
    }

    /// [`Self::connection_error`], counted.
    pub(super) fn connection_failure(&self, addr: &NodeAddr, e: &redis::RedisError) -> TargetError {
        let err = self.connection_error(addr, e);
        self.stats.error(err.kind());
        err
    }

    /// Connecting to `addr` timed out waiting for `step`.
    pub(super) fn connect_timeout(&self, addr: &NodeAddr, step: &'static str) -> TargetError {
        TargetError::ConnectTimeout {
            target: self.target.to_string(),
            node: addr.to_string(),
            step,
            timeout: self.timeout,
        }
    }
}

/// A pooled connection to a Redis node and the task that drives it (made on
/// a stream of our own): aborted with the last clone, as the redis crate
/// does for the connections it makes, so a dropped connection to a server
/// that stopped answering does not keep its socket and task.
#[derive(Clone, Debug)]
pub(super) struct RedisConnection {
    pub(super) inner: MultiplexedConnection,
    /// What broke the protocol, once something did.
    pub(super) violation: Violation,
    /// The client's trust epoch when it was opened (see
    /// `TargetClient::distrust_connections`).
    pub(super) epoch: u64,
    _driver: Arc<AbortOnDrop>,
}

impl RedisConnection {
    /// `inner`, read through a stream whose protocol breaks `violation`
    /// tells, opened at `epoch` and driven by the task `driver`.
    pub(super) fn new(
        inner: MultiplexedConnection,
        violation: Violation,
        epoch: u64,
        driver: tokio::task::AbortHandle,
    ) -> RedisConnection {
        RedisConnection {
            inner,
            violation,
            epoch,
            _driver: Arc::new(AbortOnDrop(driver)),
        }
    }

    /// Whether the connection has closed: its driver ends when the socket
    /// does (the server closed it, or killed the client).
    pub(super) fn is_closed(&self) -> bool {
        self._driver.0.is_finished()
    }
}

#[derive(Debug)]
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl RedisConnection {
    /// Whether `other` is a clone of this connection (not another one to
    /// the same node).
    pub(super) fn same(&self, other: &RedisConnection) -> bool {
        Arc::ptr_eq(&self._driver, &other._driver)
    }
}

/// A connection slot for one node. The async mutex serialises connecting, so
/// concurrent probes do not open several connections to a node at once.
/// Beside it, when its connection last answered (what the keepalive
/// reads) and why the last one was dropped, until another replaces it
/// (what the reconnect counter reads).
#[derive(Debug)]
pub(super) struct Node {
    pub(super) addr: NodeAddr,
    pub(super) conn: tokio::sync::Mutex<Option<RedisConnection>>,
    answered_at: std::sync::Mutex<Option<Instant>>,
    dropped: std::sync::Mutex<Option<ReconnectReason>>,
    /// The `run_id` of the server its connections last reached, once one
    /// said (see [`Node::server_is`]).
    run_id: std::sync::Mutex<Option<String>>,
}

impl Node {
    pub(super) fn new(addr: NodeAddr) -> Arc<Node> {
        Arc::new(Node {
            addr,
            conn: tokio::sync::Mutex::new(None),
            answered_at: std::sync::Mutex::new(None),
            dropped: std::sync::Mutex::new(None),
            run_id: std::sync::Mutex::new(None),
        })
    }

    /// A new connection reached the server whose `run_id` is `now` (`None`
    /// when it did not say): false when it is another server than the one
    /// the node's connections reached before, so what was read before may
    /// be of the server that went. An unknown `run_id` proves nothing, and
    /// keeps the last one known.
    pub(super) fn server_is(&self, now: Option<String>) -> bool {
        let Some(now) = now else {
            return true;
        };
        let mut known = self.run_id.lock().unwrap_or_else(|p| p.into_inner());
        let same = known.as_ref().is_none_or(|before| *before == now);
        *known = Some(now);
        same
    }

    /// Its connection answered at `now`.
    pub(super) fn answered(&self, now: Instant) {
        *self.answered_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
    }

    /// When its connection last answered (`None` before any).
    pub(super) fn answered_at(&self) -> Option<Instant> {
        *self.answered_at.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Its connection was dropped for `reason` (the first reason is kept
    /// until a connection replaces it).
    pub(super) fn dropped(&self, reason: ReconnectReason) {
        self.dropped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(reason);
    }

    /// A connection was opened at `now`: why the one it replaces went,
    /// `None` for a first connection.
    pub(super) fn opened(&self, now: Instant) -> Option<ReconnectReason> {
        self.answered(now);
        self.dropped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CliOverrides, from_str};

    fn target(fields: &str) -> Target {
        let text = format!("[[targets]]\nname = \"t\"\n{fields}\n");
        let config = from_str("test.toml", &text, &CliOverrides::default())
            .unwrap_or_else(|e| panic!("{e}"));
        (*config.targets[0]).clone()
    }

    #[test]
    fn addresses_split_into_host_and_port() {
        assert_eq!(split_addr("10.0.0.1:6379"), Some(("10.0.0.1".into(), 6379)));
        assert_eq!(split_addr("[::1]:7000"), Some(("::1".into(), 7000)));
        assert_eq!(split_addr("redis.local:0"), Some(("redis.local".into(), 0)));
        assert_eq!(split_addr(":7001"), Some((String::new(), 7001)));
        assert_eq!(split_addr("no-port"), None);
        assert_eq!(split_addr("host:port"), None);
        assert_eq!(split_addr("host:70000"), None);
    }

    #[test]
    fn data_connections_carry_credentials_and_the_database() {
        let t = target("url = \"redis://reader@10.0.0.1:6380/3\"");
        let s = data_settings(&t);
        assert_eq!(s.db(), 3);
        assert_eq!(s.username(), Some("reader"));
        assert_eq!(s.password(), None);
    }

    #[test]
    fn cluster_connections_stay_on_database_zero() {
        let t = target("url = \"redis://10.0.0.1:7000\"\nmode = \"cluster\"");
        assert!(matches!(t.mode, Mode::Cluster { .. }));
        let s = data_settings(&t);
        assert_eq!(s.db(), 0);
        assert_eq!(s.username(), None);
    }

    #[test]
    fn refused_credentials_are_told_apart() {
        let wrongpass = redis::make_extension_error(
            "WRONGPASS".into(),
            Some("invalid username-password pair".into()),
        );
        assert!(is_auth_failure(&wrongpass));
        let noauth = redis::make_extension_error("NOAUTH".into(), None);
        assert!(is_auth_failure(&noauth));
        let failed =
            redis::RedisError::from((redis::ErrorKind::AuthenticationFailed, "bad password"));
        assert!(is_auth_failure(&failed));
        let io =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(!is_auth_failure(&io));
        let noperm = redis::make_extension_error("NOPERM".into(), None);
        assert!(!is_auth_failure(&noperm));
    }
}
