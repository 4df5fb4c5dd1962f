//! Subscriptions: a connection of its own per node (a subscribed
//! connection can send nothing but (un)subscriptions and `PING`, so it
//! cannot be the pooled one), opened the one way every connection is
//! ([`Dialer::open`]: the target's credentials and TLS, read through the
//! same bounds, [`super::bounded`]: a key name too long to keep arrives as
//! a null, and the message is left out and counted), subscribed with
//! `SUBSCRIBE` to the keyevent channels of the stream events the exporter
//! uses and `del`, and to `__redis__:invalidate`, where the node's poll
//! connection redirects its client-tracking invalidations (see
//! `tracking`); its messages decoded into [`Notice`]s.
//!
//! [`Dialer::open`]: super::connection::Dialer::open

use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSub, PubSubSink, PubSubStream};
use redis::{RedisConnectionInfo, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::bounded::{BoundedReplies, Violation};
use super::connection::{NodeAddr, data_settings, is_server_full};
use super::target_client::TargetClient;
use crate::backend::command::Command;
use crate::backend::error::TargetError;
use crate::config::Mode;
use crate::vocab::{ErrorKind, SkipKind};

/// One keyevent message: the event's name (`xadd`, `xdel`, `del`, …) and
/// the key it happened to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyEvent {
    /// The event, as Redis names it.
    pub(crate) event: String,
    /// The key.
    pub(crate) key: Vec<u8>,
}

/// The stream events the exporter uses, as `t_stream.c` publishes them
/// (`XDELEX` and `XACKDEL` publish `xdel`). Not `xadd`: it is ordinary
/// traffic the schedule covers, one message per entry added (a third more
/// work for the server per `XADD` at 100k/s, and a flood the subscriber
/// would have to read); a new stream used as a queue is watched on its
/// `xgroup-create`, one without groups at the next discovery.
pub(crate) const STREAM_EVENTS: [&str; 8] = [
    "xtrim",
    "xdel",
    "xsetid",
    "xgroup-create",
    "xgroup-setid",
    "xgroup-destroy",
    "xgroup-createconsumer",
    "xgroup-delconsumer",
];

/// The keyevent channels for database `db`: [`STREAM_EVENTS`] and `del`.
/// Channels, not a pattern: an ACL's `&__keyevent@0__:x*` allows each of
/// them to `SUBSCRIBE`, while `PSUBSCRIBE` must name the ACL's pattern
/// literally.
pub(crate) fn keyevent_channels(db: i64) -> Vec<String> {
    STREAM_EVENTS
        .iter()
        .chain(&["del"])
        .map(|event| format!("__keyevent@{db}__:{event}"))
        .collect()
}

/// The event and key of a keyevent message on `channel`, `None` for a
/// channel that is not a keyevent one.
pub(crate) fn decode_keyevent(channel: &str, payload: &[u8]) -> Option<KeyEvent> {
    let rest = channel.strip_prefix("__keyevent@")?;
    let (_db, event) = rest.split_once("__:")?;
    Some(KeyEvent {
        event: event.to_string(),
        key: payload.to_vec(),
    })
}

/// The channel the server sends a RESP2 connection's invalidations to,
/// on the connection they are redirected to (see `tracking`).
pub(crate) const INVALIDATE_CHANNEL: &str = "__redis__:invalidate";

/// What a subscription listens to: the keyevent channels
/// (`keyspace_events = "auto"`), the invalidations of the node's poll
/// connection (`client_tracking = "auto"`), or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Listen {
    /// The keyevent channels.
    pub(crate) keyevents: bool,
    /// The invalidation channel, with the connection's client ID read
    /// first.
    pub(crate) invalidations: bool,
}

/// One message of a subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Notice {
    /// A keyevent message.
    KeyEvent(KeyEvent),
    /// Keys the node's poll connection read have changed since.
    Invalidated(Vec<Vec<u8>>),
    /// Any key may have changed: the server flushed its keys (a null
    /// invalidation), or a key was too long to keep.
    InvalidatedAll,
    /// A keyevent whose key was too long to keep: it may have been any
    /// event of any key.
    KeyEventUnreadable,
}

/// The keys of an invalidation message's payload: an array of keys, or a
/// null for a flush (or a key too long to keep, which the bounded reader
/// turned into one).
pub(crate) fn decode_invalidation(payload: &Value) -> Notice {
    let keys = match payload {
        Value::Array(items) => items
            .iter()
            .map(|k| match k {
                Value::BulkString(b) => Some(b.clone()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>(),
        _ => None,
    };
    match keys {
        Some(keys) => Notice::Invalidated(keys),
        None => Notice::InvalidatedAll,
    }
}

/// A subscribed connection to one node.
pub(crate) struct Subscription {
    sink: PubSubSink,
    messages: PubSubStream,
    channels: Vec<String>,
    timeout: Duration,
    violation: Violation,
    /// The connection's client ID, while invalidations come to it.
    pub(crate) redirect: Option<u64>,
    /// What the server or the ACL refused (a channel, `CLIENT ID`), for the
    /// caller to say: the rest of the subscription stands.
    pub(crate) refused: Vec<String>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("channels", &self.channels)
            .field("redirect", &self.redirect)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    /// The next message; `None` once the connection is gone. Messages on
    /// other channels (none are subscribed) are skipped; a keyevent whose
    /// key was too long to keep is counted in `client`'s skipped events and
    /// said ([`Notice::KeyEventUnreadable`]).
    pub(crate) async fn next(&mut self, client: &TargetClient) -> Option<Notice> {
        loop {
            let msg = self.messages.next().await?;
            let channel = msg.get_channel_name();
            if channel == INVALIDATE_CHANNEL {
                let payload = msg.get_payload::<Value>().unwrap_or(Value::Nil);
                return Some(decode_invalidation(&payload));
            }
            let Ok(Some(key)) = msg.get_payload::<Option<Vec<u8>>>() else {
                client.stats.skipped(SkipKind::Event, 1);
                return Some(Notice::KeyEventUnreadable);
            };
            if let Some(event) = decode_keyevent(channel, &key) {
                return Some(Notice::KeyEvent(event));
            }
        }
    }

    /// True when the keyevent channels are subscribed.
    pub(crate) fn keyevents(&self) -> bool {
        self.channels.iter().any(|c| c.starts_with("__keyevent@"))
    }

    /// Why the connection was dropped, when a message broke the protocol.
    pub(crate) fn violation(&self) -> Option<String> {
        self.violation.get().map(str::to_string)
    }

    /// Whether the server still answers on this connection (a `PING`
    /// within the command timeout).
    pub(crate) async fn ping(&mut self, client: &TargetClient) -> bool {
        client.stats.command(Command::Ping.label());
        let answered = tokio::time::timeout(self.timeout, self.sink.ping::<Value>()).await;
        match answered {
            Ok(Ok(_)) => true,
            Ok(Err(_)) => {
                client.stats.error(ErrorKind::Connection);
                false
            }
            Err(_) => {
                client.stats.error(ErrorKind::Timeout);
                false
            }
        }
    }

    /// Unsubscribes (`UNSUBSCRIBE`, within the command timeout) before the
    /// connection is dropped: a clean stop on shutdown or reload.
    pub(crate) async fn close(mut self, client: &TargetClient) {
        if self.channels.is_empty() {
            return;
        }
        let cmd = Command::Unsubscribe {
            channels: self.channels.clone(),
        };
        client.stats.command(cmd.label());
        let _ = tokio::time::timeout(self.timeout, self.sink.unsubscribe(&self.channels)).await;
    }
}

/// Sends `cmd` on a connection not yet handed to the redis crate and reads
/// its reply, one line (`AUTH`, `SELECT` and `CLIENT ID` answer `+OK`, an
/// integer or an error). Read a byte at a time, so that nothing past the
/// reply is taken from the crate (the bounded reader buffers the socket).
async fn exchange<S>(stream: &mut S, cmd: &redis::Cmd) -> redis::RedisResult<Value>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    stream.write_all(&cmd.get_packed_command()).await?;
    stream.flush().await?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        if line.len() > 4096 {
            return Err(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a reply of more than one line",
            )));
        }
        if stream.read(&mut byte).await? == 0 {
            return Err(redis::RedisError::from(std::io::Error::from(
                std::io::ErrorKind::UnexpectedEof,
            )));
        }
        line.push(byte[0]);
    }
    redis::parse_redis_value(&line)?.extract_error()
}

impl TargetClient {
    /// Opens a connection of its own to `addr` (the one way,
    /// [`Dialer::open`], its messages read as such), reads its client ID
    /// when it is to receive invalidations, and subscribes it to what
    /// `listen` asks, all within the command timeout. The handshake
    /// (`AUTH`, `SELECT`, `CLIENT ID`) is sent before the redis crate takes
    /// the connection over: a subscribed RESP2 connection may send nothing
    /// but (un)subscriptions and `PING`.
    ///
    /// A refused `CLIENT ID`, or a refused channel, leaves out what needs
    /// it (said in [`Subscription::refused`]) as long as something is left
    /// to listen to.
    ///
    /// # Errors
    /// When the node cannot be reached, refuses the credentials or
    /// everything asked (`NOPERM` for a user without those channels; a
    /// [`TargetError::ServerFull`] at its `maxclients`), or does not answer
    /// within the command timeout.
    ///
    /// [`Dialer::open`]: super::connection::Dialer::open
    pub(crate) async fn subscribe(
        &self,
        addr: &NodeAddr,
        listen: Listen,
    ) -> Result<Subscription, TargetError> {
        let db = match self.target.mode {
            Mode::Cluster { .. } => 0,
            _ => self.target.endpoint.db,
        };
        // A server at its maxclients answers the first command with an
        // error and closes: its own hint, not the ACL's.
        let server_full = || {
            self.stats.error(ErrorKind::Connection);
            TargetError::ServerFull {
                target: self.target.name.clone(),
                node: addr.to_string(),
            }
        };
        let refused = |what: &str, e: redis::RedisError| match e.code() {
            Some(_) if is_server_full(&e) => server_full(),
            Some(code) => {
                let kind = ErrorKind::from_server(code, e.detail().unwrap_or_default());
                // A user without the permissions: a setting, not a failed
                // collection.
                let auth = kind == ErrorKind::NoPerm;
                if !auth {
                    self.stats.error(kind);
                }
                TargetError::Connection {
                    target: self.target.name.clone(),
                    node: addr.to_string(),
                    detail: format!("{what} refused: {e}"),
                    auth,
                }
            }
            None => self.dialer().connection_failure(addr, &e),
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        let opened = self.dialer().open(
            addr,
            data_settings(&self.target),
            deadline,
            BoundedReplies::subscribed,
            |settings, mut stream| async move {
                let violation = stream.violation();
                let failed = |e: redis::RedisError| {
                    if is_server_full(&e) {
                        server_full()
                    } else {
                        self.dialer().connection_failure(addr, &e)
                    }
                };
                if let Some(password) = settings.password() {
                    let mut auth = redis::cmd("AUTH");
                    if let Some(user) = settings.username() {
                        auth.arg(user);
                    }
                    auth.arg(password);
                    exchange(&mut stream, &auth).await.map_err(failed)?;
                }
                if settings.db() != 0 {
                    let select = redis::cmd("SELECT").arg(settings.db()).to_owned();
                    exchange(&mut stream, &select).await.map_err(failed)?;
                }
                let mut refusals = Vec::new();
                let mut redirect = None;
                if listen.invalidations {
                    self.stats.command(Command::ClientId.label());
                    match exchange(&mut stream, &Command::ClientId.to_cmd()).await {
                        Ok(Value::Int(id)) => redirect = u64::try_from(id).ok(),
                        Ok(_) => {}
                        Err(e) if is_server_full(&e) => return Err(server_full()),
                        Err(e) if e.code().is_some() => refusals.push(refused("CLIENT ID", e)),
                        Err(e) => return Err(failed(e)),
                    }
                }
                let bare = RedisConnectionInfo::default().set_skip_set_lib_name();
                let (mut sink, messages) =
                    PubSub::new(&bare, stream).await.map_err(failed)?.split();
                let mut channels = Vec::new();
                let mut wanted = Vec::new();
                if listen.keyevents {
                    wanted.push(keyevent_channels(db));
                }
                if redirect.is_some() {
                    wanted.push(vec![INVALIDATE_CHANNEL.to_string()]);
                }
                // One SUBSCRIBE per kind: an ACL refuses a whole command for
                // one channel it does not allow.
                for kind in wanted {
                    let cmd = Command::Subscribe {
                        channels: kind.clone(),
                    };
                    self.stats.command(cmd.label());
                    match sink.subscribe(&kind).await {
                        Ok(()) => channels.extend(kind),
                        Err(e) if is_server_full(&e) => return Err(server_full()),
                        Err(e) if e.code().is_some() => refusals.push(refused("SUBSCRIBE", e)),
                        Err(e) => return Err(failed(e)),
                    }
                }
                if !channels.iter().any(|c| c == INVALIDATE_CHANNEL) {
                    redirect = None;
                }
                if channels.is_empty() {
                    return Err(refusals.into_iter().next().unwrap_or_else(|| {
                        TargetError::Connection {
                            target: self.target.name.clone(),
                            node: addr.to_string(),
                            detail: "nothing to subscribe to".into(),
                            auth: true,
                        }
                    }));
                }
                Ok(Subscription {
                    sink,
                    messages,
                    channels,
                    timeout: self.timeout,
                    violation,
                    redirect,
                    refused: refusals.iter().map(ToString::to_string).collect(),
                })
            },
        );
        match tokio::time::timeout_at(deadline, opened).await {
            Err(_) => {
                self.stats.error(ErrorKind::Timeout);
                Err(self.dialer().connect_timeout(addr, "SUBSCRIBE"))
            }
            Ok(subscribed) => subscribed,
        }
    }

    /// The client tracking of the target's poll connections, which a
    /// subscription registers its client ID with.
    pub(crate) fn tracking(&self) -> &super::tracking::Tracking {
        &self.tracking
    }

    /// The removals the target's keyevent subscriptions announced, which a
    /// subscription records and the stream polls read (see `removals`).
    pub(crate) fn removals(&self) -> &super::removals::RemovalLog {
        &self.removals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_of_the_target_database() {
        let channels = keyevent_channels(3);
        assert_eq!(channels.len(), 9);
        assert!(channels.contains(&"__keyevent@3__:xtrim".to_string()));
        assert!(channels.contains(&"__keyevent@3__:xgroup-create".to_string()));
        assert!(channels.contains(&"__keyevent@3__:del".to_string()));
        // Every entry added would be a message: not subscribed.
        assert!(!channels.iter().any(|c| c.ends_with(":xadd")));
    }

    #[test]
    fn keyevent_messages_decode_to_event_and_key() {
        assert_eq!(
            decode_keyevent("__keyevent@0__:xgroup-setid", b"orders"),
            Some(KeyEvent {
                event: "xgroup-setid".into(),
                key: b"orders".to_vec()
            })
        );
        assert_eq!(
            decode_keyevent("__keyevent@12__:del", b"a:b"),
            Some(KeyEvent {
                event: "del".into(),
                key: b"a:b".to_vec()
            })
        );
        assert_eq!(decode_keyevent("__keyspace@0__:orders", b"xadd"), None);
        assert_eq!(decode_keyevent("other", b"x"), None);
    }
}
