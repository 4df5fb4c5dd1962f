//! Connections: one slot per node, opened lazily with the target's
//! credentials and database, over TLS for `rediss://`, read through the
//! bounded-replies filter ([`super::bounded`]), within one deadline for
//! connecting and naming the connection; dropped when they can no longer be
//! trusted (a timeout, an I/O or protocol error, a reply that did not
//! decode); and what a failure to connect means (auth, TLS, timeout).

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisConnectionInfo, Value};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::bounded::{BoundedReplies, Violation};
use super::{NodeAddr, TargetClient};
use crate::backend::command::Command;
use crate::backend::error::TargetError;
use crate::config::{Mode, Target};
use crate::vocab::ErrorKind;

/// A connection slot for one node. The async mutex serialises connecting, so
/// concurrent probes do not open several connections to a node at once.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) addr: NodeAddr,
    conn: tokio::sync::Mutex<Option<Conn>>,
}

/// A connection and the task that drives it (made on a stream of our own):
/// aborted with the last clone, as the redis crate does for the connections
/// it makes, so a dropped connection to a server that stopped answering does
/// not keep its socket and task.
#[derive(Clone, Debug)]
pub(super) struct Conn {
    pub(super) inner: MultiplexedConnection,
    /// What broke the protocol, once something did.
    pub(super) violation: Violation,
    /// The client's trust epoch when it was opened (see
    /// [`TargetClient::distrust_connections`]).
    epoch: u64,
    _driver: Arc<AbortOnDrop>,
}

#[derive(Debug)]
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Node {
    pub(super) fn new(addr: NodeAddr) -> Arc<Node> {
        Arc::new(Node {
            addr,
            conn: tokio::sync::Mutex::new(None),
        })
    }
}

/// `host:port` split, without the brackets of an IPv6 host.
pub(super) fn split_addr(addr: &str) -> Option<(String, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.parse().ok()?))
}

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

/// Whether a connection error is the server refusing the credentials.
fn is_auth_failure(e: &redis::RedisError) -> bool {
    matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
        || e.kind() == redis::ErrorKind::AuthenticationFailed
}

impl TargetClient {
    pub(super) fn connection_error(&self, addr: &NodeAddr, e: &redis::RedisError) -> TargetError {
        let auth = is_auth_failure(e);
        if let Some(detail) = self.tls.as_ref().and_then(|t| t.explain(e)) {
            return TargetError::Connection {
                target: self.target.name.clone(),
                node: addr.to_string(),
                detail,
                auth: false,
            };
        }
        if e.is_timeout() {
            return self.connect_timeout(addr, "opening the connection");
        }
        TargetError::Connection {
            target: self.target.name.clone(),
            node: addr.to_string(),
            detail: e.to_string(),
            auth,
        }
    }

    /// Connecting to `addr` timed out waiting for `step`.
    pub(super) fn connect_timeout(&self, addr: &NodeAddr, step: &'static str) -> TargetError {
        TargetError::ConnectTimeout {
            target: self.target.name.clone(),
            node: addr.to_string(),
            step,
            timeout: self.timeout,
        }
    }

    pub(super) async fn drop_connection(&self, node: &Node) {
        *node.conn.lock().await = None;
    }

    /// Every open connection of the target is dropped before its next use: a
    /// reply did not decode, so the replies on its connection may no longer
    /// answer the commands they are taken for (a server that skipped or
    /// added one would shift every later reply). Which node's it was is not
    /// known where replies are decoded, so all go; each reconnects when next
    /// asked.
    pub(crate) fn distrust_connections(&self) {
        self.epoch
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) async fn connection(&self, node: &Node) -> Result<Conn, TargetError> {
        let mut slot = node.conn.lock().await;
        let epoch = self.epoch.load(std::sync::atomic::Ordering::Relaxed);
        if let Some(conn) = slot.as_ref() {
            if conn.epoch == epoch {
                return Ok(conn.clone());
            }
            *slot = None;
        }
        let conn = self
            .connect(&node.addr, data_settings(&self.target))
            .await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Opens a connection and names it (`CLIENT SETINFO` is suppressed in
    /// `settings`: see [`data_settings`]).
    pub(super) async fn connect(
        &self,
        addr: &NodeAddr,
        settings: RedisConnectionInfo,
    ) -> Result<Conn, TargetError> {
        let conn_err = |detail: String| TargetError::Connection {
            target: self.target.name.clone(),
            node: addr.to_string(),
            detail,
            auth: false,
        };
        let (host, port) =
            split_addr(addr).ok_or_else(|| conn_err("not a host:port address".into()))?;
        let has_password = settings.password().is_some();
        let selects_db = settings.db() != 0;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        if has_password {
            self.stats.command("auth");
        }
        if selects_db {
            self.stats.command("select");
        }
        // One deadline for connecting and naming the connection together, so
        // a server that accepts but never answers costs one timeout, not two.
        let deadline = Instant::now() + self.timeout;
        let epoch = self.epoch.load(std::sync::atomic::Ordering::Relaxed);
        let opened = async {
            // Every stream is read through the bounded-replies filter, so a
            // TLS stream and a plain one are both handed to the crate here.
            let (inner, violation, driver) = match &self.tls {
                Some(tls) => {
                    let stream = tls
                        .connect(&host, port)
                        .await
                        .map_err(redis::RedisError::from)?;
                    let stream = BoundedReplies::new(stream);
                    let violation = stream.violation();
                    let (inner, driver) =
                        MultiplexedConnection::new_with_config(&settings, stream, config).await?;
                    (inner, violation, tokio::spawn(driver).abort_handle())
                }
                None => {
                    let stream = TcpStream::connect((host.as_str(), port))
                        .await
                        .map_err(redis::RedisError::from)?;
                    // Pipelines are written whole; there is nothing to gain
                    // from Nagle.
                    let _ = stream.set_nodelay(true);
                    let stream = BoundedReplies::new(stream);
                    let violation = stream.violation();
                    let (inner, driver) =
                        MultiplexedConnection::new_with_config(&settings, stream, config).await?;
                    (inner, violation, tokio::spawn(driver).abort_handle())
                }
            };
            Ok::<_, redis::RedisError>(Conn {
                inner,
                violation,
                epoch,
                _driver: Arc::new(AbortOnDrop(driver)),
            })
        };
        let result = tokio::time::timeout_at(deadline, opened).await;
        let mut conn = match result {
            Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                return Err(self.connect_timeout(addr, "opening the connection"));
            }
            Ok(Err(e)) => {
                let err = self.connection_error(addr, &e);
                self.stats.error(err.kind());
                return Err(err);
            }
            Ok(Ok(conn)) => conn,
        };
        // Naming the connection is a courtesy to operators; a user without
        // CLIENT SETNAME still gets metrics.
        self.stats.command(Command::ClientSetname.label());
        let sent = tokio::time::Instant::now();
        let named = tokio::time::timeout_at(
            deadline,
            Command::ClientSetname
                .to_cmd()
                .query_async::<Value>(&mut conn.inner),
        )
        .await;
        if matches!(named, Ok(Ok(_))) {
            // An O(1) command: its round trip is the network's.
            self.pages()
                .observe_network(sent.elapsed(), tokio::time::Instant::now());
        }
        match named {
            Ok(Ok(Value::ServerError(e))) => self.stats.error(ErrorKind::from_server(
                e.code(),
                e.details().unwrap_or_default(),
            )),
            Ok(Err(e)) if e.code() == Some("NOPERM") => self.stats.error(ErrorKind::NoPerm),
            Ok(Err(e)) if !e.is_timeout() => {
                let err = self.connection_error(addr, &e);
                self.stats.error(err.kind());
                return Err(err);
            }
            Ok(Err(_)) | Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                return Err(self.connect_timeout(addr, "CLIENT SETNAME"));
            }
            Ok(Ok(_)) => {}
        }
        Ok(conn)
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
